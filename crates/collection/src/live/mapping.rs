//! Field indexes added to a live collection's mapping (`PUT /collections/{name}/mapping`).
//!
//! [`LiveCollection::put_mapping`] adds the fields to the writer's mapping (new segments,
//! from refreshes and merges, index them at once) and records them in the view's manifest as
//! `building`, committed before it returns: the change is durable when acknowledged, and a
//! restart resumes the build. The view's mapping — what filters, facets and sorts are parsed
//! against — does not have them yet, because the segments written before would answer for
//! them with nothing: a filter on such a field is refused as unmapped rather than answered
//! from part of the collection.
//!
//! The optimizer's merger thread then takes [`LiveCollection::fields_build_step`]: each
//! segment whose field indexes lack a building field is rewritten alone through the merge
//! path (rows deleted meanwhile carried over, swapped in under the refresh lock, at the
//! optimizer's priority). When no segment lacks one, the fields move from `building` to the
//! mapping in one view swap and a commit. A value that does not convert to the declared type
//! stops the build (`/stats` `live.fields_build.failed`); the fields stay unmapped for reads.

use searchd_fields::{FieldSpec, FieldType};

use super::LiveCollection;
use crate::collection::Collection;
use crate::error::{Error, Result};

/// What [`LiveCollection::put_mapping`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MappingChange {
    /// Fields added: indexed by new segments now, by the older ones in the background.
    pub added: Vec<String>,
    /// Fields that already had the asked type (nothing to do).
    pub unchanged: Vec<String>,
    /// Segments written before the change that the build rewrites.
    pub segments_to_build: usize,
}

/// Whether segment `i` of `v` lacks the index of a field in `building`.
fn lacks(v: &Collection, i: usize, building: &[FieldSpec]) -> bool {
    match &v.segments[i].fields {
        Some(f) => building.iter().any(|b| f.schema().get(&b.name).is_none()),
        None => true,
    }
}

/// `/stats` `live.fields_build`: the fields being built and the segments left.
pub(super) fn build_stats(v: &Collection, failed: Option<&str>) -> serde_json::Value {
    let building: &[FieldSpec] = v.manifest.as_ref().map_or(&[], |m| &m.building);
    let left = (0..v.segments.len())
        .filter(|&i| !building.is_empty() && lacks(v, i, building))
        .count();
    serde_json::json!({
        "fields": building.iter().map(|b| serde_json::json!({"name": b.name, "type": b.ty})).collect::<Vec<_>>(),
        "segments_left": left,
        "segments": v.segments.len(),
        "done": building.is_empty(),
        "failed": failed,
    })
}

impl LiveCollection {
    /// Add typed field indexes to the mapping; see the module documentation. A field the
    /// mapping has with another type, the text field, a field of a collection made without
    /// field indexes or a name that is not a plain top-level key is an input error.
    pub fn put_mapping(&self, fields: &[(String, FieldType)]) -> Result<MappingChange> {
        self.check_writable()?;
        if fields.is_empty() {
            return Err(Error::Input(
                "properties is empty: name at least one field".into(),
            ));
        }
        let mut change = MappingChange::default();
        {
            let _r = self.refresh_lock.lock().unwrap_or_else(|p| p.into_inner());
            let mut mapping = self.lock_mapping();
            let Some(m) = mapping.as_mut() else {
                return Err(Error::Input(
                    "this collection was made without field indexes (ingest --no-field-indexes): it has no mapping to add to".into(),
                ));
            };
            let skip: &[String] = self.spec.fields.as_ref().map_or(&[], |f| &f.skip);
            let mut new = Vec::new();
            for (name, ty) in fields {
                if name.is_empty() || name.contains('.') || name.starts_with('_') {
                    return Err(Error::Input(format!(
                        "field {name:?}: a mapped field is a top-level key of the documents (not empty, no '.', not starting with '_')"
                    )));
                }
                if self.text_field.as_deref() == Some(name.as_str()) || skip.contains(name) {
                    return Err(Error::Input(format!(
                        "field {name:?} is the collection's text field (indexed for text search): it cannot be mapped"
                    )));
                }
                match m.get(name) {
                    Some(f) if f.ty == *ty => change.unchanged.push(name.clone()),
                    Some(f) => {
                        return Err(Error::Input(format!(
                            "field {name:?} is mapped as {} already: a mapping cannot change a field's type (reindex into a new collection)",
                            f.ty
                        )))
                    }
                    None => {
                        if !new.iter().any(|(n, _): &(String, FieldType)| n == name) {
                            new.push((name.clone(), *ty));
                        }
                    }
                }
            }
            if new.is_empty() {
                return Ok(change);
            }
            for (name, _) in &new {
                m.skipped.retain(|s| s.name != *name);
            }
            super::super::validate::add_fields(m, new.clone());
            let specs: Vec<FieldSpec> = new.iter().filter_map(|(n, _)| m.get(n).cloned()).collect();
            drop(mapping);
            let mut inner = self.lock_inner();
            let cur = self.view();
            let mut manifest = cur
                .manifest
                .clone()
                .unwrap_or_else(super::unreachable_manifest);
            manifest.building.extend(specs);
            let building = manifest.building.clone();
            change.segments_to_build = (0..cur.segments.len())
                .filter(|&i| lacks(&cur, i, &building))
                .count();
            change.added = new.into_iter().map(|(n, _)| n).collect();
            let next = cur.successor(manifest, cur.segments.clone(), cur.live.clone(), cur.seq);
            let old = self.set_view(next);
            inner.manifest_dirty = true;
            inner.fields_failed = None;
            drop(inner);
            drop(old);
        }
        // Durable before the reply: a restart resumes the build.
        self.commit()?;
        self.wake_optimizer();
        Ok(change)
    }

    /// One step of building the fields added by [`Self::put_mapping`]: rewrite one segment
    /// that lacks them, or, when none does, move them into the view's mapping. Returns
    /// whether it did something.
    pub fn fields_build_step(&self) -> Result<bool> {
        if self.is_read_only() || self.lock_inner().fields_failed.is_some() {
            return Ok(false);
        }
        let v0 = self.view();
        let building: Vec<FieldSpec> = match &v0.manifest {
            Some(m) if !m.building.is_empty() => m.building.clone(),
            _ => return Ok(false),
        };
        let lacking: Vec<usize> = (0..v0.segments.len())
            .filter(|&i| lacks(&v0, i, &building))
            .collect();
        if !lacking.is_empty() {
            let Some((pick, names)) = self.claim(&v0, |_, claimed| {
                lacking
                    .iter()
                    .copied()
                    .find(|&i| !claimed(i))
                    .into_iter()
                    .collect()
            }) else {
                // Every lacking segment is in another merge, whose output indexes them.
                return Ok(false);
            };
            let r = self.merge_niced(&v0, &pick, "fields_build", self.cfg.optimizer_nice);
            self.release(&names);
            if let Err(e) = r {
                if e.is_input() {
                    self.lock_inner().fields_failed = Some(e.to_string());
                }
                return Err(e);
            }
            return Ok(true);
        }
        {
            let _r = self.refresh_lock.lock().unwrap_or_else(|p| p.into_inner());
            let mut inner = self.lock_inner();
            let cur = self.view();
            if (0..cur.segments.len()).any(|i| lacks(&cur, i, &building)) {
                return Ok(false);
            }
            let mut manifest = cur
                .manifest
                .clone()
                .unwrap_or_else(super::unreachable_manifest);
            let done = std::mem::take(&mut manifest.building);
            if let Some(m) = manifest.mapping.as_mut() {
                for b in done {
                    m.skipped.retain(|s| s.name != b.name);
                    if m.get(&b.name).is_none() {
                        m.fields.push(b);
                    }
                }
                m.fields.sort_by(|a, b| a.name.cmp(&b.name));
            }
            let next = cur.successor(manifest, cur.segments.clone(), cur.live.clone(), cur.seq);
            let old = self.set_view(next);
            inner.manifest_dirty = true;
            drop(inner);
            drop(old);
        }
        self.commit()?;
        Ok(true)
    }
}
