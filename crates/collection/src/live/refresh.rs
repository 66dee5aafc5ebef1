//! A refresh: the pending operations collapsed (the last per id wins) into one new
//! segment plus deleted rows, and a new view swapped in.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use searchd_docs::DocId;
use searchd_engine::roaring::RoaringBitmap;

use super::ops::{latest_back, lookup_exact};
use super::optimizer::Timer;
use super::{unreachable_manifest, LiveCollection, Op};
use crate::error::Result;
use crate::segment::Segment;
use crate::segwrite::{write_segment, NewDoc};

impl LiveCollection {
    /// Make every acknowledged write visible: collapse the pending operations into one new
    /// segment plus deleted rows, and swap in a new view.
    pub fn refresh(&self) -> Result<()> {
        let _r = self.refresh_lock.lock().unwrap_or_else(|p| p.into_inner());
        let t = Instant::now();
        let mut timer = Timer::new();
        let (ops, name) = {
            let mut inner = self.lock_inner();
            if inner.pending.is_empty() {
                return Ok(());
            }
            let ops = std::mem::take(&mut inner.pending);
            inner.pending_docs = 0;
            inner.inflight_ids = std::mem::take(&mut inner.pending_ids);
            let name = format!("seg-{:06}", inner.next_segment);
            inner.next_segment += 1;
            (ops, name)
        };
        let upto = ops.last().map_or(0, |(s, _)| *s);
        // The last operation per id wins.
        let mut order: Vec<DocId> = Vec::new();
        let mut latest: HashMap<DocId, Option<NewDoc>> = HashMap::new();
        for (_, op) in ops {
            match op {
                Op::Upsert(docs) => {
                    for d in docs {
                        if !latest.contains_key(&d.id) {
                            order.push(d.id.clone());
                        }
                        latest.insert(d.id.clone(), Some(d));
                    }
                }
                Op::Delete(ids) => {
                    for id in ids {
                        if !latest.contains_key(&id) {
                            order.push(id.clone());
                        }
                        latest.insert(id, None);
                    }
                }
            }
        }
        let docs: Vec<&NewDoc> = order
            .iter()
            .filter_map(|id| latest.get(id).and_then(|d| d.as_ref()))
            .collect();
        let base = self
            .scratch
            .as_ref()
            .map_or(self.dir.as_path(), |s| s.path());
        let ndocs = docs.len() as u64;
        timer.lap("collapse");
        let new_seg = if docs.is_empty() {
            None
        } else {
            let spec = self.spec_now();
            let built = write_segment(base, &name, &docs, &spec, None).and_then(|meta| {
                timer.lap("write");
                let seg = Segment::open(base, &meta, self.spec.dim, &self.opts)?;
                timer.lap("open");
                crate::failpoint::hit("refresh.after_segment_write");
                Ok((meta, seg))
            });
            match built {
                Ok(x) => Some(x),
                Err(e) => {
                    // Put the operations back: they are in the log, a later refresh
                    // retries them.
                    self.counters.errors.fetch_add(1, Relaxed);
                    let mut inner = self.lock_inner();
                    inner.last_error = Some(e.to_string());
                    let back: Vec<(u64, Op)> = latest_back(order, latest, upto);
                    let mut rest = std::mem::take(&mut inner.pending);
                    let mut all = back;
                    all.append(&mut rest);
                    inner.pending = all;
                    let inflight = std::mem::take(&mut inner.inflight_ids);
                    for (k, v) in inflight {
                        inner.pending_ids.entry(k).or_insert(v);
                    }
                    return Err(e);
                }
            }
        };
        // The view gets the mapping as it is now: it has every field of its documents.
        let mapping_now = self.mapping();
        let old_view = {
            let mut inner = self.lock_inner();
            let cur = self.view();
            let mut live: Vec<Option<RoaringBitmap>> = (0..cur.segments.len())
                .map(|i| cur.live_rows(i).cloned())
                .collect();
            let mut changed = vec![false; cur.segments.len()];
            for id in &order {
                if let Some(r) = lookup_exact(&cur, id) {
                    let i = r.segment as usize;
                    let l = live[i].get_or_insert_with(|| {
                        let mut b = RoaringBitmap::new();
                        b.insert_range(0..cur.segments[i].len() as u32);
                        b
                    });
                    l.remove(r.row as u32);
                    changed[i] = true;
                }
            }
            let mut manifest = cur.manifest.clone().unwrap_or_else(unreachable_manifest);
            if let Some(mut m) = mapping_now {
                // Fields still being built stay out of the view's mapping until every
                // segment indexes them (live/mapping.rs).
                m.fields
                    .retain(|f| !manifest.building.iter().any(|b| b.name == f.name));
                manifest.mapping = Some(m);
            }
            let mut segments = cur.segments.clone();
            let mut lives: Vec<Option<Arc<RoaringBitmap>>> = live
                .into_iter()
                .zip(&changed)
                .zip(&cur.live)
                .map(|((l, c), old)| if *c { l.map(Arc::new) } else { old.clone() })
                .collect();
            if let Some((meta, seg)) = new_seg {
                manifest.segments.push(meta);
                segments.push(Arc::new(seg));
                lives.push(None);
                if self.scratch.is_none() {
                    inner.unsynced.push(name);
                }
            }
            manifest.next_segment = inner.next_segment;
            let next = cur.successor(manifest, segments, lives, upto);
            let old = self.set_view(next);
            inner.inflight_ids.clear();
            old
        };
        timer.lap("swap");
        crate::failpoint::hit("refresh.after_swap");
        // Released outside the writers' lock (see `set_view`).
        drop(old_view);
        *self.applied.lock().unwrap_or_else(|p| p.into_inner()) = upto;
        self.applied_cv.notify_all();
        self.record(timer.event("refresh", ndocs, 0, 0));
        self.counters.refreshes.fetch_add(1, Relaxed);
        self.counters
            .refresh_us
            .fetch_add(t.elapsed().as_micros() as u64, Relaxed);
        Ok(())
    }
}
