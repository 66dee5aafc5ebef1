//! Writes: documents checked ([`crate::validate`]), logged, acknowledged, and made
//! visible when the writer waits; deletes by id or by filter; backpressure while the
//! optimizer is behind.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use searchd_docs::DocId;
use searchd_engine::Metric;

use super::ops::{canonical_id, lookup_exact, note_ids};
use super::{Dynamic, LiveCollection, Op, Receipt, WRITE_STALL};
use crate::error::{Error, Result};
use crate::segwrite::NewDoc;
use crate::validate::{add_fields, check_docs, DocRules};
use crate::wal::Fsync;

impl LiveCollection {
    pub(super) fn check_writable(&self) -> Result<()> {
        match &self.read_only_reason {
            Some(r) => Err(Error::ReadOnly(format!(
                "collection {} is read-only: {r}",
                self.dir.display()
            ))),
            None => Ok(()),
        }
    }

    /// Check documents before they are logged: dimensions, finite components, a non-zero
    /// vector under cosine, a JSON object of stored fields whose mapped fields convert.
    pub fn validate(&self, docs: &[NewDoc]) -> Result<()> {
        let mapping = self.lock_mapping();
        self.validate_with(docs, mapping.as_ref()).map(|_| ())
    }

    /// [`Self::validate`] against `mapping`; returns the fields the documents bring that it
    /// does not have, with their inferred types.
    fn validate_with(
        &self,
        docs: &[NewDoc],
        mapping: Option<&searchd_fields::Schema>,
    ) -> Result<Vec<(String, searchd_fields::FieldType)>> {
        let view = self.view();
        check_docs(
            docs,
            &DocRules {
                dim: view.dim(),
                cosine: view.metric() == Metric::Cosine,
                mapping,
                text_field: self.text_field.as_deref(),
                dynamic: self.dynamic,
            },
        )
    }

    /// Insert or replace documents by id. Acknowledged (logged) when this returns; with
    /// `wait`, also visible to searches.
    pub fn upsert(&self, mut docs: Vec<NewDoc>, wait: bool) -> Result<Receipt> {
        self.check_writable()?;
        if docs.is_empty() {
            return Err(Error::Input("docs is empty: nothing to write".into()));
        }
        for d in &mut docs {
            d.id = canonical_id(self.id_kind, std::mem::replace(&mut d.id, DocId::Int(0)));
        }
        {
            // The mapping lock is held from the check to the growth, so two upserts
            // bringing one new field agree on its type (the first one decides).
            let mut mapping = self.lock_mapping();
            let new = self.validate_with(&docs, mapping.as_ref())?;
            if let (Some(m), Dynamic::True) = (mapping.as_mut(), self.dynamic) {
                add_fields(m, new);
            }
        }
        let n = docs.len() as u64;
        let op = Op::Upsert(docs);
        let seq = self.log(op)?;
        self.counters.docs_upserted.fetch_add(n, Relaxed);
        let applied = self.finish_write(seq, wait)?;
        Ok(Receipt::upserted(seq, applied, n))
    }

    /// Delete documents by id. Ids that do not exist are reported, not an error; when none
    /// exists nothing is logged.
    pub fn delete(&self, ids: Vec<DocId>, wait: bool) -> Result<Receipt> {
        self.check_writable()?;
        let (found, not_found) = {
            // The view is read under the writers' lock: a refresh swaps the view and
            // forgets the ids it applied (`inflight_ids`) under it, so an id written by
            // that refresh is either still in flight here or in the view. (Read before the
            // lock, a refresh in between made a just-written id look absent: the delete
            // answered `not_found` and the document stayed.)
            let inner = self.lock_inner();
            let view = self.view();
            let exists = |id: &DocId| {
                inner
                    .pending_ids
                    .get(id)
                    .or_else(|| inner.inflight_ids.get(id))
                    .copied()
                    .unwrap_or_else(|| lookup_exact(&view, id).is_some())
            };
            let mut found: Vec<DocId> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let mut not_found = Vec::new();
            for id in ids {
                // The collection's form of the id, or the form given when only that one
                // exists (written before ids were put in one form).
                let canon = canonical_id(self.id_kind, id.clone());
                let hit = [canon, id.clone()].into_iter().find(|c| exists(c));
                match hit {
                    Some(c) if seen.insert(c.clone()) => found.push(c),
                    Some(_) => {}
                    None => not_found.push(id),
                }
            }
            (found, not_found)
        };
        if found.is_empty() {
            return Ok(Receipt::nothing(not_found));
        }
        let n = found.len() as u64;
        let seq = self.log(Op::Delete(found))?;
        self.counters.docs_deleted.fetch_add(n, Relaxed);
        let applied = self.finish_write(seq, wait)?;
        Ok(Receipt::deleted(seq, applied, n, not_found))
    }

    /// Delete every document that passes `f` (evaluated on a fresh refresh, as
    /// Elasticsearch's delete-by-query runs on a refreshed snapshot).
    pub fn delete_by_filter(&self, f: &searchd_fields::Filter, wait: bool) -> Result<Receipt> {
        self.check_writable()?;
        self.refresh()?;
        let view = self.view();
        let m = view.matches(f);
        let mut ids = Vec::with_capacity(m.len() as usize);
        for (i, seg) in view.segments().iter().enumerate() {
            if let Some(rows) = m.segment(i) {
                for r in rows {
                    if let Some(id) = seg.ids.id(r as u64) {
                        ids.push(id.clone());
                    }
                }
            }
        }
        self.delete(ids, wait)
    }

    /// Write backpressure, as Lucene stalls indexing threads when merges fall behind: while
    /// the view holds more than twice `max_segments` segments (the merger, at full priority
    /// past `max_segments`, is not keeping up with the writes), a write waits for the count
    /// to come down, and after [`WRITE_STALL`] is refused with [`Error::Busy`] (503 with
    /// `Retry-After`). Every segment is one more search per query: unbounded writes made
    /// searches collapse (1,000 docs/s on 2 cores: 40 segments, search p50 353 ms,
    /// `bench/results/search-under-writes-synth1m-1000docs.md`).
    fn throttle(&self) -> Result<()> {
        let limit = self.cfg.max_segments.saturating_mul(2).max(4);
        let over = || self.view().segments.len() > limit;
        if !over() {
            return Ok(());
        }
        let until = Instant::now() + WRITE_STALL;
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            if !over() {
                return Ok(());
            }
        }
        self.counters.throttled.fetch_add(1, Relaxed);
        Err(Error::Busy(format!(
            "writes are held back: the collection has {} segments (limit {limit}) while the optimizer merges; retry later",
            self.view().segments.len()
        )))
    }

    fn log(&self, op: Op) -> Result<u64> {
        self.throttle()?;
        let payload = op.encode();
        let (seq, group, docs) = {
            let mut inner = self.lock_inner();
            let seq = inner.wal.append(&payload).inspect_err(|_| {
                self.counters.errors.fetch_add(1, Relaxed);
            })?;
            let docs = match &op {
                Op::Upsert(d) => d.len(),
                Op::Delete(_) => 0,
            };
            note_ids(&mut inner.pending_ids, &op);
            inner.pending.push((seq, op));
            inner.pending_docs += docs;
            let group = (inner.wal.fsync() == Fsync::Group).then(|| inner.wal.group());
            (seq, group, inner.pending_docs)
        };
        if let Some(g) = group {
            g.wait(seq)
                .map_err(|e| Error::io(self.dir.join("wal"), e))?;
        }
        self.counters.writes.fetch_add(1, Relaxed);
        if docs >= self.cfg.refresh_docs {
            self.wake_optimizer();
        }
        Ok(seq)
    }

    fn finish_write(&self, seq: u64, wait: bool) -> Result<bool> {
        if !wait {
            return Ok(false);
        }
        // A refresh that started before this write was logged does not include it: run
        // (or wait for) one that does.
        loop {
            if self.applied_seq() >= seq {
                return Ok(true);
            }
            self.refresh()?;
        }
    }
}
