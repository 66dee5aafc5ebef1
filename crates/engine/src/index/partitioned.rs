//! Searches of a partitioned index ([`crate::partition`]): route to the nearest partitions,
//! search each one's graph with its share of the filter, merge.

use roaring::RoaringBitmap;

use crate::error::SearchError;
use std::sync::Arc;

use crate::files::parts::PartsFile;
use crate::index::part_store::PartStore;
use crate::index::{Hit, Index, SearchParams};

/// Probes requested ahead of the one being searched.
const LOOKAHEAD: usize = 4;

impl Index {
    /// The best `p.k` rows of the `nprobe` partitions nearest `q` (prepared). `pass`
    /// (rows of this index) is the filter, when there is one: each partition gets the
    /// rows of its own that pass as an allow set, and plans its search from it (a
    /// partition with none is skipped). A row copied into several partitions counts once.
    pub(super) fn search_partitions(
        &self,
        routing: &PartsFile,
        store: &Arc<PartStore>,
        q: &[f32],
        p: &SearchParams<'_>,
        nprobe: usize,
        pass: Option<&dyn Fn(u32) -> bool>,
    ) -> Result<(Vec<Hit>, usize), SearchError> {
        let probes = crate::partition::route(routing.centroids(), self.info.dim, q, nprobe);
        // The next LOOKAHEAD cold probes load in the background while earlier ones are
        // searched (not all at once: under a tight budget, later probes' loads would
        // drop the earlier ones before this search reached them).
        let ahead = |i: usize| {
            if let Some(&part) = probes.get(i + LOOKAHEAD) {
                store.request(part as usize);
            }
        };
        probes
            .iter()
            .take(LOOKAHEAD)
            .for_each(|&part| store.request(part as usize));
        let mut found: Vec<Hit> = Vec::with_capacity(p.k * probes.len());
        let (mut answered, mut skipped) = (0, 0);
        for (i, &part) in probes.iter().enumerate() {
            ahead(i);
            if p.deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return Err(SearchError::DeadlineExceeded);
            }
            let members = routing.members(part as usize);
            let allow: Option<RoaringBitmap> = pass.map(|pass| {
                RoaringBitmap::from_sorted_iter(
                    members
                        .iter()
                        .enumerate()
                        .filter(|(_, &row)| pass(row))
                        .map(|(local, _)| local as u32),
                )
                .expect("ascending")
            });
            if allow.as_ref().is_some_and(|a| a.is_empty()) {
                continue;
            }
            let sub = SearchParams {
                filter: None,
                allow: allow.as_ref(),
                nprobe: None,
                ..*p
            };
            let Some(index) = store.wait(part as usize, p.deadline)? else {
                skipped += 1;
                continue;
            };
            answered += 1;
            let hits = index.search(q, &sub)?;
            found.extend(hits.into_iter().map(|h| Hit {
                id: members[h.id as usize] as u64,
                score: h.score,
            }));
        }
        if answered == 0 && p.deadline.is_some() {
            // Not one probe was resident by the deadline: no answer, rather than an empty
            // one that looks like "nothing matches".
            return Err(SearchError::DeadlineExceeded);
        }
        found.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        let mut seen = std::collections::HashSet::with_capacity(found.len());
        found.retain(|h| seen.insert(h.id));
        found.truncate(p.k);
        Ok((found, skipped))
    }
}
