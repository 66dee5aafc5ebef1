//! Merges: the refresher's flat merges and the merger's graph builds and vacuums (what to
//! merge is [`merge_policy`]'s choice), each reading a view, building the merged segment
//! without any lock, then swapping it in with the rows deleted meanwhile carried over.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use searchd_engine::roaring::RoaringBitmap;
use searchd_engine::IndexKind;

use super::merge_policy::{self, MergeParams, SegStat};
use super::ops::text_of;
use super::optimizer::Timer;
use super::{alive_rows, seg_names, unreachable_manifest, LiveCollection};
use crate::collection::Collection;
use crate::error::{Error, Result};
use crate::rows::DocRef;
use crate::segment::Segment;
use crate::segwrite::{write_segment, GraphBase, NewDoc};

impl LiveCollection {
    /// One optimizer step, as the two background threads take them: a cheap flat merge
    /// if one is due, else a graph build or vacuum. Returns whether it merged.
    pub fn optimize(&self) -> Result<bool> {
        Ok(self.flat_merge_step()? || self.fields_build_step()? || self.graph_merge_step()?)
    }

    /// The refresher's merge (after a refresh): when `merge_factor` or more small segments
    /// exist, the smallest of them whose documents stay under `flat_max` are rewritten as one
    /// exact-scan segment. It only copies rows (no graph), so it runs at full priority and
    /// keeps the count of small segments bounded however slow graph builds are.
    pub fn flat_merge_step(&self) -> Result<bool> {
        if self.is_read_only() {
            return Ok(false);
        }
        let v0 = self.view();
        let Some((pick, names)) = self.claim(&v0, |v, claimed| self.pick_flat_merge(v, claimed))
        else {
            return Ok(false);
        };
        let r = self.merge(&v0, &pick, "flat_merge", 0);
        self.release(&names);
        r.map(|_| true)
    }

    /// The merger's step: small segments that together pass `flat_max` become one graph
    /// segment, segments with `vacuum_ratio` deleted rows are rewritten (minor graph
    /// segments, each under a tenth of the largest, at 1 - [`searchd_engine::NEAR_UNFILTERED`] = 10%), three
    /// or more minor graph segments become one, and past
    /// `max_segments` the smallest are merged. The build runs on a thread of its own niced
    /// by `optimizer_nice`, unless the optimizer is behind (more than `max_segments`
    /// segments): then at full priority, since every extra segment makes each search dearer.
    /// (The refresher's flat merges keep small segments few, so that is rare; a threshold on
    /// the documents in small segments ran builds at full priority beside the searches most
    /// of the time at `flat_max` 1,000.)
    pub fn graph_merge_step(&self) -> Result<bool> {
        if self.is_read_only() {
            return Ok(false);
        }
        let v0 = self.view();
        let Some((pick, names)) = self.claim(&v0, |v, claimed| self.pick_merge(v, claimed)) else {
            return Ok(false);
        };
        let behind = v0.segments.len() > self.cfg.max_segments;
        let nice = if behind { 0 } else { self.cfg.optimizer_nice };
        let r = self.merge_niced(&v0, &pick, "graph_merge", nice);
        self.release(&names);
        r.map(|_| true)
    }

    /// [`Self::merge`] on a thread of its own at priority `nice` (the index build's
    /// threads inherit it).
    pub(super) fn merge_niced(
        &self,
        v0: &Collection,
        pick: &[usize],
        kind: &'static str,
        nice: i32,
    ) -> Result<()> {
        std::thread::scope(|sc| {
            let h = std::thread::Builder::new()
                .name("searchd-build".into())
                .spawn_scoped(sc, || {
                    // Threads the index build starts inherit this priority.
                    if nice != 0 {
                        if let Err(e) = searchd_os::renice_current_thread(nice) {
                            tracing::warn!(error = %e, "could not lower the merge's priority");
                        }
                    }
                    self.merge(v0, pick, kind, nice)
                });
            match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(Error::Input("the merge thread panicked".into()))),
                Err(e) => Err(Error::io(&self.dir, e)),
            }
        })
    }

    /// Picks under the lock and claims the picked segments' names: `(picked rows of the
    /// view, their names for [`Self::release`])`; `None` when nothing is due.
    pub(super) fn claim(
        &self,
        v: &Collection,
        pick: impl FnOnce(&Collection, &dyn Fn(usize) -> bool) -> Vec<usize>,
    ) -> Option<(Vec<usize>, Vec<String>)> {
        let names = seg_names(v);
        let mut inner = self.lock_inner();
        let picked = {
            let claimed = |i: usize| inner.claimed.iter().any(|c| Some(c) == names.get(i));
            pick(v, &claimed)
        };
        if picked.is_empty() {
            return None;
        }
        // `v` was read before the lock: a merge that ended since may have swapped some of
        // its segments out and released their claims. Merges swap under this lock, so a
        // segment still in the current view here stays until its claim is released.
        let cur = self.view();
        let gone = |i: usize| {
            v.segments
                .get(i)
                .is_none_or(|s| !cur.segments.iter().any(|c| Arc::ptr_eq(c, s)))
        };
        if picked.iter().any(|&i| gone(i)) {
            return None;
        }
        let mine: Vec<String> = picked
            .iter()
            .filter_map(|&i| names.get(i).cloned())
            .collect();
        inner.claimed.extend(mine.iter().cloned());
        Some((picked, mine))
    }

    pub(super) fn release(&self, names: &[String]) {
        let mut inner = self.lock_inner();
        inner.claimed.retain(|c| !names.contains(c));
    }

    /// [`merge_policy::pick_flat_merge`] over the view's segments.
    fn pick_flat_merge(&self, v: &Collection, claimed: &dyn Fn(usize) -> bool) -> Vec<usize> {
        let (segs, claimed) = policy_inputs(v, claimed);
        merge_policy::pick_flat_merge(&segs, &claimed, &MergeParams::of(&self.cfg))
    }

    /// [`merge_policy::pick_merge`] over the view's segments.
    fn pick_merge(&self, v: &Collection, claimed: &dyn Fn(usize) -> bool) -> Vec<usize> {
        let (segs, claimed) = policy_inputs(v, claimed);
        merge_policy::pick_merge(&segs, &claimed, &MergeParams::of(&self.cfg))
    }

    fn merge(&self, v0: &Collection, pick: &[usize], kind: &'static str, nice: i32) -> Result<()> {
        let t = Instant::now();
        let mut timer = Timer::new();
        self.counters.merging.store(true, Relaxed);
        self.counters.merge_started_ms.store(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            Relaxed,
        );
        let r = self.merge_inner(v0, pick, &mut timer);
        self.counters.merging.store(false, Relaxed);
        if r.is_err() {
            self.counters.errors.fetch_add(1, Relaxed);
        }
        let (moved, reused) = r?;
        let mut event = timer.event(kind, moved, pick.len(), nice);
        event.reused = reused;
        self.record(event);
        self.counters.merges.fetch_add(1, Relaxed);
        self.counters.merged_docs.fetch_add(moved, Relaxed);
        self.counters
            .merge_us
            .fetch_add(t.elapsed().as_micros() as u64, Relaxed);
        Ok(())
    }

    /// Merge the picked segments into one; returns the documents moved and how many of them
    /// kept their graph links (an extended graph, else 0).
    fn merge_inner(
        &self,
        v0: &Collection,
        pick: &[usize],
        timer: &mut Timer,
    ) -> Result<(u64, u64)> {
        // The picked graph segment with the most alive rows and few deleted ones lends its
        // graph to the merged index: its alive rows come first, in order.
        let stat = |i: usize| SegStat {
            len: v0.segments[i].len(),
            alive: alive_rows(v0, i),
        };
        let is_graph = |i: usize| v0.segments[i].index.info().kind == IndexKind::Hnsw;
        let base = pick
            .iter()
            .copied()
            .filter(|&i| merge_policy::extends_graph(stat(i), is_graph(i)))
            .max_by_key(|&i| (stat(i).alive, std::cmp::Reverse(i)));
        let order: Vec<usize> = base
            .into_iter()
            .chain(pick.iter().copied().filter(|&i| Some(i) != base))
            .collect();
        // Read the alive documents of the picked segments, as of v0.
        let mut docs: Vec<NewDoc> = Vec::new();
        let mut maps: Vec<Vec<u32>> = Vec::with_capacity(order.len());
        for &i in &order {
            let seg = &v0.segments[i];
            let mut map = vec![u32::MAX; seg.len()];
            #[allow(clippy::needless_range_loop)] // `row` is the row number, not just an index
            for row in 0..seg.len() {
                let r = DocRef {
                    segment: i as u32,
                    row: row as u64,
                };
                if !v0.is_live(r) {
                    continue;
                }
                let id = seg
                    .ids
                    .id(row as u64)
                    .cloned()
                    .ok_or_else(|| Error::format(&self.dir, "a row without an id"))?;
                let vector = v0
                    .vector(r)
                    .map_err(|e| Error::Input(format!("merge: {e}")))?
                    .ok_or_else(|| Error::format(&self.dir, "a row without a vector"))?
                    .into_owned();
                let source = v0.source(r)?.unwrap_or_else(|| b"{}".to_vec());
                let text = text_of(&source, self.text_field.as_deref());
                map[row] = docs.len() as u32;
                docs.push(NewDoc {
                    id,
                    vector,
                    text,
                    source,
                });
            }
            maps.push(map);
        }
        let name = {
            let mut inner = self.lock_inner();
            let name = format!("seg-{:06}", inner.next_segment);
            inner.next_segment += 1;
            name
        };
        let refs: Vec<&NewDoc> = docs.iter().collect();
        timer.lap("read");
        let base_rows: Vec<u64> = match base {
            Some(_) => maps[0]
                .iter()
                .enumerate()
                .filter(|(_, &to)| to != u32::MAX)
                .map(|(row, _)| row as u64)
                .collect(),
            None => Vec::new(),
        };
        let base = base.map(|i| GraphBase {
            index: &v0.segments[i].index,
            rows: &base_rows,
        });
        let mut spec = self.spec_now();
        let largest = v0.segments.iter().map(|s| s.len()).max().unwrap_or(0);
        if merge_policy::minor_codes(refs.len(), largest, &spec) {
            spec.build.quantization = searchd_engine::Quantization::Sq8;
        }
        let reused = if base.is_some() && refs.len() >= spec.flat_max {
            base_rows.len() as u64
        } else {
            0
        };
        let new_seg = if refs.is_empty() {
            None
        } else {
            let meta = write_segment(&self.dir, &name, &refs, &spec, base)?;
            timer.lap("write");
            let seg = Segment::open(&self.dir, &meta, self.spec.dim, &self.opts)?;
            timer.lap("open");
            crate::failpoint::hit("merge.after_segment_write");
            Some((meta, seg))
        };
        let moved = docs.len() as u64;
        drop(docs);
        // Swap: the picked segments (still in the view: they are claimed, so no other
        // merge removes them) leave; rows deleted since v0 are deleted in the merged one.
        let _r = self.refresh_lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut inner = self.lock_inner();
        timer.lap("wait_refresh");
        let cur = self.view();
        let mut merged_live: Option<RoaringBitmap> = None;
        let mut gone = Vec::new();
        for (k, &i) in order.iter().enumerate() {
            let seg0 = &v0.segments[i];
            let j = cur
                .segments
                .iter()
                .position(|s| Arc::ptr_eq(s, seg0))
                .ok_or_else(|| Error::format(&self.dir, "a merged segment left the view"))?;
            gone.push(j);
            if let Some(l1) = cur.live_rows(j) {
                for (row, &to) in maps[k].iter().enumerate() {
                    if to != u32::MAX && !l1.contains(row as u32) {
                        let ml = merged_live.get_or_insert_with(|| {
                            let mut b = RoaringBitmap::new();
                            b.insert_range(0..moved as u32);
                            b
                        });
                        ml.remove(to);
                    }
                }
            }
        }
        let mut manifest = cur.manifest.clone().unwrap_or_else(unreachable_manifest);
        let mut segments = Vec::new();
        let mut lives = Vec::new();
        let mut metas = Vec::new();
        for j in 0..cur.segments.len() {
            if gone.contains(&j) {
                inner.obsolete.push(manifest.segments[j].name.clone());
                continue;
            }
            segments.push(cur.segments[j].clone());
            lives.push(cur.live[j].clone());
            metas.push(manifest.segments[j].clone());
        }
        if let Some((meta, seg)) = new_seg {
            // The merged segment goes first: it holds the oldest documents.
            segments.insert(0, Arc::new(seg));
            lives.insert(0, merged_live.map(Arc::new));
            metas.insert(0, meta);
            inner.unsynced.push(name);
        }
        manifest.segments = metas;
        manifest.next_segment = inner.next_segment;
        let next = cur.successor(manifest, segments, lives, cur.seq);
        let old = self.set_view(next);
        timer.lap("swap");
        crate::failpoint::hit("merge.after_swap");
        drop(old);
        timer.lap("drop_old");
        Ok((moved, reused))
    }
}

/// The merge policy's inputs from a view: each segment's rows and alive rows, and which
/// segments another merge claimed.
fn policy_inputs(v: &Collection, claimed: &dyn Fn(usize) -> bool) -> (Vec<SegStat>, Vec<bool>) {
    let n = v.segments.len();
    let segs = (0..n)
        .map(|i| SegStat {
            len: v.segments[i].len(),
            alive: alive_rows(v, i),
        })
        .collect();
    (segs, (0..n).map(claimed).collect())
}
