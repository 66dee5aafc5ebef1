//! Fused CPU kernels used between candle's matmuls, as candle `CustomOp`s.
//!
//! candle's element-wise ops run one at a time, single-threaded, each allocating a new
//! buffer, and its `gelu_erf` calls scalar libm `erff`; profiling the plain-candle version
//! showed ~40% of the time outside gemm. These kernels fuse each bias-residual-LayerNorm
//! and each bias-GELU step into one pass, run rows in parallel on the current rayon pool,
//! and do attention directly on the fused QKV rows, looking only at each sequence's real
//! keys (so padding needs no mask and costs no work). Each row's work runs under
//! `pulp::Arch::dispatch`, i.e. compiled for AVX2/FMA (or AVX-512, NEON) when the CPU has
//! it, with a baseline fallback, all safe code.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Shape};
use rayon::prelude::*;

/// Rows per rayon task, so tiny rows are not scheduled one by one.
const MIN_ROWS: usize = 8;

/// Where each sequence's tokens sit in a `(rows, h)` activation matrix: sequence `r`
/// occupies rows `starts[r] .. starts[r] + lens[r]`; rows outside every sequence are
/// padding (left zero by the embedding, skipped by attention). The embedder uses the
/// padded layout (`starts[r] = r * s`), the cross-encoder a packed one (no pad rows).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seqs<'a> {
    /// First row of each sequence, ascending, `starts[0] == 0`.
    pub starts: &'a [usize],
    pub lens: &'a [usize],
    /// Total rows of the matrix (pads included).
    pub rows: usize,
}

impl Seqs<'_> {
    /// `(sequence, position)` of `row`, `None` for a pad row.
    #[inline]
    fn locate(&self, row: usize) -> Option<(usize, usize)> {
        let r = self
            .starts
            .partition_point(|&st| st <= row)
            .checked_sub(1)?;
        let t = row - self.starts[r];
        (t < self.lens[r]).then_some((r, t))
    }

    fn max_len(&self) -> usize {
        self.lens.iter().copied().max().unwrap_or(0)
    }

    fn valid(&self) -> bool {
        self.starts.len() == self.lens.len()
            && self
                .starts
                .iter()
                .zip(self.lens)
                .all(|(&st, &l)| st + l <= self.rows)
            && self.starts.windows(2).all(|w| w[0] <= w[1])
    }
}

fn contiguous<'a>(s: &'a CpuStorage, l: &Layout, op: &str) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(v) = s else {
        candle_core::bail!("{op}: expected f32 storage");
    };
    match l.contiguous_offsets() {
        Some((a, b)) => Ok(&v[a..b]),
        None => candle_core::bail!("{op}: input must be contiguous"),
    }
}

/// erf for f32 as a rational function on `[-4, 4]` (the approximation Eigen and XLA use
/// for single precision; max error a few ulp); branch-free so loops over it vectorise.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_6e-3;
    p = x2 * p + -1.609_603_3e-2;
    p *= x;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    p / q
}

#[inline(always)]
fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    let c = 0.797_884_6_f32; // sqrt(2/pi)
    0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh())
}

/// Activation after the intermediate dense layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    /// No activation (plain bias add).
    None,
    /// Exact GELU with erf (Hugging Face "gelu").
    GeluErf,
    /// The tanh approximation ("gelu_new", "gelu_pytorch_tanh", "gelu_fast").
    GeluTanh,
    Relu,
}

/// `act(x + bias)`, row-wise; `x` is `(rows, bias.len())`.
pub(crate) struct BiasAct<'a> {
    pub bias: &'a [f32],
    pub act: Act,
}

impl CustomOp1 for BiasAct<'_> {
    fn name(&self) -> &'static str {
        "bias-act"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous(s, l, self.name())?;
        let n = self.bias.len();
        if n == 0 || x.len() % n != 0 {
            candle_core::bail!("bias-act: {} values, bias of {n}", x.len());
        }
        let mut out = vec![0f32; x.len()];
        let b = self.bias;
        let arch = pulp::Arch::new();
        out.par_chunks_mut(n)
            .zip(x.par_chunks(n))
            .with_min_len(MIN_ROWS)
            .for_each(|(o, x)| {
                arch.dispatch(|| match self.act {
                    Act::None => o
                        .iter_mut()
                        .zip(x)
                        .zip(b)
                        .for_each(|((o, x), b)| *o = x + b),
                    Act::GeluErf => o
                        .iter_mut()
                        .zip(x)
                        .zip(b)
                        .for_each(|((o, x), b)| *o = gelu_erf(x + b)),
                    Act::GeluTanh => o
                        .iter_mut()
                        .zip(x)
                        .zip(b)
                        .for_each(|((o, x), b)| *o = gelu_tanh(x + b)),
                    Act::Relu => o
                        .iter_mut()
                        .zip(x)
                        .zip(b)
                        .for_each(|((o, x), b)| *o = (x + b).max(0.0)),
                })
            });
        Ok((CpuStorage::F32(out), l.shape().clone()))
    }
}

/// LayerNorm of one row in place (two passes, f32 like PyTorch).
#[inline(always)]
fn norm_row(y: &mut [f32], g: &[f32], b: &[f32], eps: f32) {
    let n = y.len() as f32;
    let mean = y.iter().sum::<f32>() / n;
    let var = y.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in y.iter_mut().zip(g).zip(b) {
        *v = (*v - mean) * inv * g + b;
    }
}

/// `LayerNorm(x + bias + residual)`, row-wise; `x`, `residual` are `(rows, h)`.
pub(crate) struct BiasResidualNorm<'a> {
    pub bias: &'a [f32],
    pub gamma: &'a [f32],
    pub beta: &'a [f32],
    pub eps: f32,
}

impl CustomOp2 for BiasResidualNorm<'_> {
    fn name(&self) -> &'static str {
        "bias-residual-layernorm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous(s1, l1, self.name())?;
        let r = contiguous(s2, l2, self.name())?;
        let h = self.bias.len();
        if h == 0 || x.len() != r.len() || x.len() % h != 0 {
            candle_core::bail!("{}: shapes {:?} {:?}", self.name(), l1.shape(), l2.shape());
        }
        let mut out = vec![0f32; x.len()];
        let arch = pulp::Arch::new();
        out.par_chunks_mut(h)
            .zip(x.par_chunks(h).zip(r.par_chunks(h)))
            .with_min_len(MIN_ROWS)
            .for_each(|(o, (x, r))| {
                arch.dispatch(|| {
                    for (((o, x), r), b) in o.iter_mut().zip(x).zip(r).zip(self.bias) {
                        *o = x + b + r;
                    }
                    norm_row(o, self.gamma, self.beta, self.eps);
                })
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// Embedding lookup: `LayerNorm(word[id] + pos[t] + types[type_id])` for the
/// `seqs.rows` ids (one per row); `types` is the `(type_vocab, h)` table and `type_ids`
/// the per-row segment ids (`None` = all 0, what a single-text encoder uses). Pad rows
/// are left zero (nothing reads them: attention only looks at real keys).
#[allow(clippy::too_many_arguments)]
pub(crate) fn embed_norm(
    ids: &[u32],
    type_ids: Option<&[u32]>,
    seqs: Seqs<'_>,
    word: &[f32],
    pos: &[f32],
    types: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) -> Vec<f32> {
    let h = gamma.len();
    let mut out = vec![0f32; ids.len() * h];
    let arch = pulp::Arch::new();
    out.par_chunks_mut(h)
        .enumerate()
        .with_min_len(MIN_ROWS)
        .for_each(|(row, o)| {
            let Some((_, t)) = seqs.locate(row) else {
                return;
            };
            let id = ids[row] as usize;
            let w = &word[id * h..(id + 1) * h];
            let p = &pos[t * h..(t + 1) * h];
            let tid = type_ids.map_or(0, |ty| ty[row] as usize);
            let ty = &types[tid * h..(tid + 1) * h];
            for (((o, w), p), ty) in o.iter_mut().zip(w).zip(p).zip(ty) {
                *o = w + p + ty;
            }
            arch.dispatch(|| norm_row(o, gamma, beta, eps));
        });
    out
}

#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Multi-head self-attention on fused QKV rows: input `(rows, 3h)` laid out
/// `[q | k | v]` per row, heads contiguous inside each; output the context `(rows, h)`
/// before the output projection. A query row of sequence `r` attends to that sequence's
/// keys only (rows `starts[r] .. starts[r] + lens[r]`, the same as an additive -inf mask
/// on everything else); pad query rows give 0. With `cls_only` only the first row of
/// each sequence is computed and the output is `(b, h)` (a classifier head reads
/// nothing else from the last layer).
pub(crate) struct Attention<'a> {
    pub seqs: Seqs<'a>,
    pub heads: usize,
    pub scale: f32,
    pub cls_only: bool,
}

impl CustomOp1 for Attention<'_> {
    fn name(&self) -> &'static str {
        "attention"
    }

    fn cpu_fwd(&self, st: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let qkv = contiguous(st, l, self.name())?;
        let (rows, h3) = l.shape().dims2()?;
        let (seqs, nh) = (self.seqs, self.heads);
        if rows != seqs.rows || h3 % (3 * nh) != 0 || !seqs.valid() {
            candle_core::bail!(
                "attention: shape {:?} for {} sequences in {} rows",
                l.shape(),
                seqs.lens.len(),
                seqs.rows
            );
        }
        let h = h3 / 3;
        let hd = h / nh;
        let b = seqs.lens.len();
        let out_rows = if self.cls_only { b } else { rows };
        let mut out = vec![0f32; out_rows * h];
        let arch = pulp::Arch::new();
        out.par_chunks_mut(h)
            .enumerate()
            .with_min_len(4)
            .for_each_init(
                || vec![0f32; seqs.max_len()],
                |p, (orow, o)| {
                    let (r, t) = if self.cls_only {
                        (orow, 0)
                    } else {
                        match seqs.locate(orow) {
                            Some(rt) => rt,
                            None => return,
                        }
                    };
                    let len = seqs.lens[r];
                    if t >= len {
                        return;
                    }
                    let base = seqs.starts[r];
                    let row = base + t;
                    let q_row = &qkv[row * h3..row * h3 + h];
                    arch.dispatch(|| {
                        for head in 0..nh {
                            let off = head * hd;
                            let q = &q_row[off..off + hd];
                            let mut m = f32::NEG_INFINITY;
                            for (j, pj) in p[..len].iter_mut().enumerate() {
                                let k0 = (base + j) * h3 + h + off;
                                let sc = dot(q, &qkv[k0..k0 + hd]) * self.scale;
                                *pj = sc;
                                m = m.max(sc);
                            }
                            let mut z = 0f32;
                            for pj in &mut p[..len] {
                                *pj = (*pj - m).exp();
                                z += *pj;
                            }
                            let inv = 1.0 / z;
                            let o = &mut o[off..off + hd];
                            for (j, &pj) in p[..len].iter().enumerate() {
                                let v0 = (base + j) * h3 + 2 * h + off;
                                let w = pj * inv;
                                for (o, v) in o.iter_mut().zip(&qkv[v0..v0 + hd]) {
                                    *o += w * v;
                                }
                            }
                        }
                    });
                },
            );
        Ok((CpuStorage::F32(out), Shape::from((out_rows, h))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn erf64(x: f64) -> f64 {
        // Maclaurin series; converges well for |x| <= 4 in f64.
        let mut sum = x;
        let mut term = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn fast_erf_is_accurate() {
        let mut worst = 0f64;
        for i in -6000..=6000 {
            let x = i as f64 / 1000.0;
            let want = if x.abs() > 4.0 { x.signum() } else { erf64(x) };
            worst = worst.max((erf(x as f32) as f64 - want).abs());
        }
        assert!(worst < 1e-6, "max erf error {worst}");
    }
}
