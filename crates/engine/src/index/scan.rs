//! Exact scans: the reference answer ([`Index::exact_search`]) and the filtered scan the
//! planner picks for selective filters, over vectors in memory, on disk, or codes.

use std::time::Instant;

use crate::distance::{distance, F32Scorer, Scorer};
use crate::error::SearchError;
use crate::exact;
use crate::files::vectors::{read_row, storage_error, Vectors};
use crate::heap::{Neighbor, TopK};
use crate::index::params::{FilterPlan, Hit, SearchParams, Walk};
use crate::index::{Index, Structure};

/// Rows per positioned read when an exact scan streams `--vectors disk` rows.
const DISK_SCAN_ROWS: usize = 4096;

impl Index {
    /// Exact top-`k` by scanning every stored vector (single thread), whatever the index
    /// kind: the reference an approximate answer is checked against.
    pub fn exact_search(
        &self,
        query: &[f32],
        k: usize,
    ) -> std::result::Result<Vec<Hit>, SearchError> {
        let q = self.prepare_query(query)?;
        let k = k.max(1);
        let dim = self.info.dim;
        let found = match &self.vectors {
            Vectors::Mem(_) => exact::scan_one(
                self.metric,
                self.stored_vectors().unwrap_or_default(),
                dim,
                &q,
                k,
                None,
                None,
            )?,
            Vectors::Disk(rows) => {
                let mut buf = vec![0f32; DISK_SCAN_ROWS * dim];
                let mut best: Vec<Neighbor> = Vec::new();
                for first in (0..self.info.n).step_by(DISK_SCAN_ROWS) {
                    let count = DISK_SCAN_ROWS.min(self.info.n - first);
                    let chunk = &mut buf[..count * dim];
                    rows.read_rows(first, count, chunk)
                        .map_err(|e| storage_error(rows.path(), e))?;
                    let part = exact::scan_one(self.metric, chunk, dim, &q, k, None, None)?;
                    best.extend(part.into_iter().map(|mut nb| {
                        nb.id += first as u32;
                        nb
                    }));
                    best.sort_unstable();
                    best.truncate(k);
                }
                best
            }
            Vectors::Absent => return Err(SearchError::NoVectors),
        };
        Ok(self.hits(found))
    }

    /// Exact top-`k` over the rows passing `pass` (with `allow`: iterating its rows, not
    /// testing every row), on the float32 vectors when they were opened, else on the codes.
    ///
    /// With `may_use_codes` (an automatically planned scan) a quantized HNSW index reads the
    /// passing rows' codes instead when that pays ([`Index::scan_codes_pays`]) and rescores
    /// the best with float32, as its walks do; a forced `Exact`, or the fallback of a walk,
    /// stays on float32 (the exact answer).
    pub(super) fn exact_filtered(
        &self,
        q: &[f32],
        p: &SearchParams<'_>,
        pass: &dyn Fn(u32) -> bool,
        may_use_codes: bool,
    ) -> std::result::Result<Vec<Hit>, SearchError> {
        // Scans inside a code-specific search.
        let on_codes = Walk {
            plan: FilterPlan::Exact,
            filter: Some(pass),
            budget: usize::MAX,
            want: 0,
            min_pass_rate: 0.0,
        };
        if let Structure::Hnsw {
            graph,
            codes: Some(codes),
        } = &self.structure
        {
            let codes_only = !self.vectors.opened();
            if codes_only || (may_use_codes && self.scan_codes_pays(codes, p)) {
                let found = self.search_codes(&graph.view(), codes, q, p, &on_codes)?;
                if codes_only || found.is_some() {
                    return Ok(found.unwrap_or_default());
                }
            }
        }
        let found = match &self.vectors {
            Vectors::Mem(_) => {
                let scorer = F32Scorer {
                    metric: self.metric,
                    rows: self.rows()?,
                    query: q,
                };
                self.scan_rows(&scorer, p)?
            }
            Vectors::Disk(disk) => {
                let mut v = vec![0f32; self.info.dim];
                let scorer = |i: u32| -> std::result::Result<f32, SearchError> {
                    read_row(disk, i as usize, &mut v)?;
                    Ok(distance(self.metric, q, &v))
                };
                self.scan_rows_with(scorer, p)?
            }
            Vectors::Absent => {
                // Codes only (HNSW with codes was answered above).
                let found = match &self.structure {
                    Structure::IvfPq { lists, codes } => {
                        self.search_ivf(&lists.view(), codes, q, p, &on_codes)?
                    }
                    // Every partition, each scanning its own passing rows.
                    Structure::Partitioned { routing, store, .. } => {
                        let all = routing.partitions();
                        return self
                            .search_partitions(routing, store, q, p, all, Some(pass))
                            .map(|(hits, _)| hits);
                    }
                    Structure::Flat | Structure::Hnsw { .. } => return Err(SearchError::NoVectors),
                };
                return Ok(found.unwrap_or_default());
            }
        };
        Ok(self.hits(found))
    }

    /// Exact top-`k` with an in-memory scorer over the rows passing `p.filter` and `p.allow`:
    /// allowed rows in chunks, prefetched ahead.
    ///
    /// The rows come from `p.allow` (`candidate_rows`), so only `p.filter` is tested
    /// on each: testing membership again would map each row to its external id and look it up
    /// in the bitmap, two dependent random reads a row (1M x 384, 1% passing: the sq8 codes
    /// scan went from a p50 of 0.75-0.9 ms to 0.51-0.55 ms without them).
    pub(super) fn scan_rows<S: Scorer>(
        &self,
        scorer: &S,
        p: &SearchParams<'_>,
    ) -> std::result::Result<Vec<Neighbor>, SearchError> {
        let pass = |i: u32| p.filter.is_none_or(|f| f(i));
        const CHUNK: usize = 32;
        let mut top = TopK::new(p.k);
        let mut chunk = [0u32; CHUNK];
        let mut rounds = 0u32;
        let lines = self.info.dim.div_ceil(16);
        let mut next = self.candidate_rows(p);
        loop {
            if rounds.is_multiple_of(32) {
                check_deadline(p.deadline)?;
            }
            rounds += 1;
            let mut len = 0;
            for i in next.by_ref() {
                if pass(i) {
                    scorer.prefetch_first(i);
                    chunk[len] = i;
                    len += 1;
                    if len == CHUNK {
                        break;
                    }
                }
            }
            if len == 0 {
                break;
            }
            for (j, &i) in chunk[..len].iter().enumerate() {
                if let Some(&n) = chunk[..len].get(j + 1) {
                    scorer.prefetch_all(n, lines);
                }
                top.push(Neighbor {
                    dist: scorer.dist(i),
                    id: i,
                });
            }
        }
        Ok(top.into_sorted())
    }

    /// [`Index::scan_rows`] with a fallible scorer (rows read from disk).
    fn scan_rows_with(
        &self,
        mut score: impl FnMut(u32) -> std::result::Result<f32, SearchError>,
        p: &SearchParams<'_>,
    ) -> std::result::Result<Vec<Neighbor>, SearchError> {
        let pass = |i: u32| p.filter.is_none_or(|f| f(i));
        let mut top = TopK::new(p.k);
        for (j, i) in self.candidate_rows(p).enumerate() {
            if j % 1024 == 0 {
                check_deadline(p.deadline)?;
            }
            if pass(i) {
                top.push(Neighbor {
                    dist: score(i)?,
                    id: i,
                });
            }
        }
        Ok(top.into_sorted())
    }

    /// Internal ids an exact scan visits, ascending: the rows of `allow`, or every row.
    ///
    /// When rows are permuted (`ids.bin`), the allowed rows are first marked in a bitset of
    /// internal ids (n/8 bytes, O(s) writes) and read back in storage order, so the scan
    /// reads the vectors front to back instead of in random order: on dev-gcide-50k a 50%
    /// filter's scan took 10.2 ms of CPU in external-id order (memory-bound, ~400 ns a
    /// row) and much less in storage order (see the comment of [`Index::filter_plan`]).
    fn candidate_rows<'s>(&'s self, p: &SearchParams<'s>) -> Box<dyn Iterator<Item = u32> + 's> {
        let n = self.info.n;
        let Some(a) = p.allow else {
            return Box::new(0..n as u32);
        };
        let inside = a.iter().take_while(move |&e| (e as usize) < n);
        match &self.ids {
            None => Box::new(inside),
            Some(ids) => {
                let inverse = ids.inverse();
                let mut bits = vec![0u64; n.div_ceil(64)];
                for e in inside {
                    let i = inverse[e as usize] as usize;
                    bits[i / 64] |= 1 << (i % 64);
                }
                Box::new(bits.into_iter().enumerate().flat_map(|(w, mut word)| {
                    std::iter::from_fn(move || {
                        (word != 0).then(|| {
                            let b = word.trailing_zeros();
                            word &= word - 1;
                            (w * 64) as u32 + b
                        })
                    })
                }))
            }
        }
    }
}

pub(super) fn check_deadline(deadline: Option<Instant>) -> std::result::Result<(), SearchError> {
    match deadline {
        Some(d) if Instant::now() >= d => Err(SearchError::DeadlineExceeded),
        _ => Ok(()),
    }
}
