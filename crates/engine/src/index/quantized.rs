//! Searches on compressed codes: an HNSW walk scored on SQ8, PQ or binary codes, or an
//! IVF-PQ list scan, then the best `oversample * k` candidates rescored with the float32
//! vectors (wherever they are) so returned scores are exact.

use crate::distance::{distance, HammingScorer, IpScorer, Scorer};
use crate::error::SearchError;
use crate::files::codes::{Codes, Quantizer};
use crate::files::vectors::{read_row, Vectors};
use crate::heap::Neighbor;
use crate::hnsw::{self, GraphView, SearchCtx};
use crate::index::params::{FilterPlan, Hit, SearchParams, Walk, MAX_OVERSAMPLE};
use crate::index::Index;
use crate::ivf::IvfView;

/// An exact scan on codes rescores at least one passing row in this many with float32
/// ([`scan_rescore_share`]): coarse codes (PQ, binary, RaBitQ below 6 bits) ...
const SCAN_RESCORE_SHARE: usize = 32;
/// ... and fine ones (SQ8, RaBitQ from 6 bits). Each rescored row is a cache and TLB miss on
/// the float32 file (~0.8 us at 1M x 384): 1M x 384, 1% passing, sq8, the scan's p50 went
/// from ~0.5 ms rescoring 316 rows to ~0.33 ms rescoring 79, recall@10 1.000 for uniform,
/// near and far filters; one in 256 gave 0.9945 on the far filter. rabitq:4 needs one in 32
/// (one in 64: 0.9955 on the far filter).
const SCAN_RESCORE_SHARE_FINE: usize = 128;
/// Fewest passing rows an automatic exact scan reads as codes ([`Index::scan_codes_pays`]).
const SCAN_CODES_MIN_ROWS: usize = 2048;

impl Index {
    /// Graph search on the codes (or, for [`FilterPlan::Exact`], a scan of the allowed
    /// rows' codes), rescored. `None`: the walk ran over its budget or found too few.
    pub(super) fn search_codes<F: Fn(u32) -> bool>(
        &self,
        g: &GraphView<'_>,
        codes: &Codes,
        q: &[f32],
        p: &SearchParams<'_>,
        walk: &Walk<F>,
    ) -> std::result::Result<Option<Vec<Hit>>, SearchError> {
        let mut r = self.candidates_wanted(codes, p)?;
        let rescore = self.vectors.opened();
        if rescore && walk.plan == FilterPlan::Exact {
            // A scan rescores a share of what it read: with many rows of nearly equal scores
            // (a filter far from the query) the codes' error reorders more than `r` of them
            // (1M x 384, 1% passing far from every query, rabitq:4: recall@10 0.78 rescoring
            // 40), more so the coarser the codes (`scan_rescore_share`).
            let rows = self.allowed_rows(p).unwrap_or(self.info.n);
            r = r.max(rows / scan_rescore_share(&codes.quant));
        }
        let ef = p.ef.max(r);
        let rows = codes.rows();
        let query_norm = searchd_kernels::norm_sq(q);
        let candidates = match &codes.quant {
            Quantizer::Sq8(quant) => {
                let prepared = quant.prepare(q);
                self.traverse(
                    g,
                    p,
                    walk,
                    r,
                    ef,
                    self.ip_scorer(codes, query_norm, |c| prepared.ip(c)),
                )?
            }
            Quantizer::Pq(quant) => {
                let prepared = quant.prepare(q);
                self.traverse(
                    g,
                    p,
                    walk,
                    r,
                    ef,
                    self.ip_scorer(codes, query_norm, |c| prepared.ip(c)),
                )?
            }
            Quantizer::Rabitq(quant) => {
                let prepared = quant.prepare(q);
                self.traverse(
                    g,
                    p,
                    walk,
                    r,
                    ef,
                    self.ip_scorer(codes, query_norm, |c| prepared.ip(c)),
                )?
            }
            Quantizer::Binary(quant) => {
                let prepared = quant.prepare(q);
                self.traverse(
                    g,
                    p,
                    walk,
                    r,
                    ef,
                    HammingScorer {
                        codes: bytemuck::cast_slice(&rows[..self.info.n * codes.len]),
                        words: codes.len / 8,
                        query: &prepared,
                    },
                )?
            }
        };
        match candidates {
            Some(c) if c.len() >= walk.want => self.finish(q, c, p.k, rescore).map(Some),
            _ => Ok(None),
        }
    }

    /// HNSW search of `r` candidates with list size `ef`, with one scorer type
    /// (monomorphised per code kind, so the distance inlines into the traversal loop).
    fn traverse<S: Scorer, F: Fn(u32) -> bool>(
        &self,
        g: &GraphView<'_>,
        p: &SearchParams<'_>,
        walk: &Walk<F>,
        r: usize,
        ef: usize,
        scorer: S,
    ) -> std::result::Result<Option<Vec<Neighbor>>, SearchError> {
        if walk.plan == FilterPlan::Exact {
            // The walk's filter is `p`'s (its `filter` and `allow`), which the scan applies.
            let scan = SearchParams { k: r, ..*p };
            return self.scan_rows(&scorer, &scan).map(Some);
        }
        let ctx = SearchCtx {
            scorer,
            deadline: p.deadline,
            filter: walk.filter.as_ref(),
            two_hop: walk.plan == FilterPlan::GraphTwoHop,
            budget: walk.budget,
            min_pass_rate: walk.min_pass_rate,
        };
        hnsw::search(
            g,
            g.entry,
            g.max_level,
            &ctx,
            r,
            self.walk_ef(p, walk.plan, ef),
        )
    }

    fn ip_scorer<'a, F: Fn(&[u8]) -> f32>(
        &self,
        codes: &'a Codes,
        query_norm: f32,
        ip: F,
    ) -> IpScorer<'a, F> {
        IpScorer {
            metric: self.metric,
            codes: codes.rows(),
            len: codes.len,
            norms: codes.norms(),
            query_norm,
            ip,
        }
    }

    /// Whether an automatic exact scan should read codes (then rescore) instead of the
    /// float32 rows: when the codes are smaller than the rows, at least
    /// [`SCAN_CODES_MIN_ROWS`] rows pass (below, a query's fixed cost on codes, e.g. the
    /// rabitq rotation, is a large share of a scan of a few hundred rows) and they are many
    /// times the rescored candidates (binary codes rescore 64 x k).
    ///
    /// Measured on 1M x 384 (`bench/filtered_codes_scan.py`, one thread, the forced float32
    /// scan and the automatic codes scan in the same run, 200 queries, three runs): 1%
    /// passing (10k rows), sq8 codes 1.61-2.28x the float32 scan's QPS (medians), rabitq:4
    /// 1.68-3.13x, recall@10 1.000 (this VM's memory bandwidth varied 2x between runs).
    pub(super) fn scan_codes_pays(&self, codes: &Codes, p: &SearchParams<'_>) -> bool {
        let Ok(r) = self.candidates_wanted(codes, p) else {
            return false;
        };
        let rows = self.allowed_rows(p).unwrap_or(self.info.n);
        codes.len < 4 * self.info.dim && rows >= SCAN_CODES_MIN_ROWS.max(8 * r)
    }

    /// Rescoring depth for a quantized search: `ceil(oversample * k)` candidates (just `k`
    /// when there are no float32 vectors to rescore with).
    fn candidates_wanted(
        &self,
        codes: &Codes,
        p: &SearchParams<'_>,
    ) -> std::result::Result<usize, SearchError> {
        let over = p.oversample.unwrap_or(codes.oversample);
        if !(1.0..=MAX_OVERSAMPLE).contains(&over) {
            return Err(SearchError::BadOversample {
                got: over,
                max: MAX_OVERSAMPLE,
            });
        }
        Ok(if self.vectors.opened() {
            ((p.k as f32 * over).ceil() as usize).max(p.k)
        } else {
            p.k
        })
    }

    /// IVF-PQ: scan the `ef` nearest lists (every list for [`FilterPlan::Exact`]), skipping
    /// rows that fail the filter, then rescore. `None`: too few rows passed (the caller
    /// falls back to the exact scan).
    pub(super) fn search_ivf<F: Fn(u32) -> bool>(
        &self,
        ivf: &IvfView<'_>,
        codes: &Codes,
        q: &[f32],
        p: &SearchParams<'_>,
        walk: &Walk<F>,
    ) -> std::result::Result<Option<Vec<Hit>>, SearchError> {
        let r = self.candidates_wanted(codes, p)?;
        let Quantizer::Pq(quant) = &codes.quant else {
            return Err(SearchError::Storage {
                message: "ivfpq index without pq codes".into(),
            });
        };
        let nprobe = if walk.plan == FilterPlan::Exact {
            ivf.nlist()
        } else {
            p.ef
        };
        let probed = ivf.probe(self.metric, q, nprobe);
        let lut = quant.prepare(q);
        let filter = walk.filter.as_ref().map(|f| f as &dyn Fn(u32) -> bool);
        let candidates = crate::ivf::scan(
            ivf,
            self.metric,
            &probed,
            &lut,
            codes.rows(),
            codes.len,
            codes.norms(),
            searchd_kernels::norm_sq(q),
            r,
            filter,
            p.deadline,
        )?;
        if candidates.len() < walk.want {
            return Ok(None);
        }
        self.finish(q, candidates, p.k, self.vectors.opened())
            .map(Some)
    }

    /// The best `k` of `candidates` (ids are stored rows), rescored with the float32
    /// vectors when `rescore`, so the returned order and scores are exact.
    fn finish(
        &self,
        q: &[f32],
        candidates: Vec<Neighbor>,
        k: usize,
        rescore: bool,
    ) -> std::result::Result<Vec<Hit>, SearchError> {
        if !rescore {
            let mut c = candidates;
            c.truncate(k);
            return Ok(self.hits(c));
        }
        let mut exact = candidates;
        match &self.vectors {
            Vectors::Mem(_) => self.rows()?.rescore(self.metric, q, &mut exact),
            Vectors::Disk(disk) => {
                let mut v = vec![0f32; self.info.dim];
                for c in &mut exact {
                    read_row(disk, c.id as usize, &mut v)?;
                    c.dist = distance(self.metric, q, &v);
                }
            }
            Vectors::Absent => return Err(SearchError::NoVectors),
        }
        exact.sort_unstable();
        exact.truncate(k);
        Ok(self.hits(exact))
    }
}

/// One passing row in how many an exact scan on `quant`'s codes rescores at least.
fn scan_rescore_share(quant: &Quantizer) -> usize {
    match quant {
        Quantizer::Sq8(_) => SCAN_RESCORE_SHARE_FINE,
        Quantizer::Rabitq(r) if r.bits() >= 6 => SCAN_RESCORE_SHARE_FINE,
        Quantizer::Rabitq(_) | Quantizer::Pq(_) | Quantizer::Binary(_) => SCAN_RESCORE_SHARE,
    }
}
