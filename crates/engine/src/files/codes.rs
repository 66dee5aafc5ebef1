//! `codes.bin`: compressed codes of a quantized index, and the quantizers behind them.
//!
//! ```text
//! header   [n, dim, code kind (1 sq8, 2 pq, 3 binary, 4 rabitq), kind parameter (PQ: m,
//!          RaBitQ: bits), variant (RaBitQ: rotation kind, 0 dense, 1 structured), 0]
//! params   the quantizer's parameters: SQ8 `lo` and `step` (dim f32 each); PQ m x 256 x
//!          dim/m f32 centroids; binary dim f32 means; RaBitQ dim f32 centre, then the
//!          rotation: dense, dim x dim f32 (row-major); structured, 6 x dim f32 signs
//!          ([`crate::rabitq::rotation`])
//! norms    n f32: squared norms of the stored float32 vectors (for l2)
//! padding  PQ, binary and RaBitQ: zero bytes up to a 64-byte boundary, so binary codes can
//!          be read as `u64` straight from the mapping
//! codes    n codes: SQ8 dim bytes; PQ m bytes; binary ceil(dim/64) little-endian u64;
//!          RaBitQ a little-endian f32 factor, then ceil(dim/2) bytes (1-4 bits) or dim (5-8)
//! ```
//! Rows are in storage order (HNSW: the graph's order; IVF-PQ: list order, residuals).
//! A code kind is one [`Quantization`] arm for the build, one [`Quantizer`] arm for search,
//! one [`CodeKind`] in the manifest and one code in the header.

use std::path::Path;

use crate::error::{Error, Result};
use crate::format::{
    CodeKind, CodesParams, DirWriter, Header, Manifest, CODES_BINARY, CODES_MAGIC, CODES_PQ,
    CODES_RABITQ, CODES_SQ8, DEFAULT_OVERSAMPLE, HEADER_LEN,
};
use crate::storage::{FileBytes, LoadOptions};

/// The file name.
pub const NAME: &str = "codes.bin";

/// Codes an index keeps for traversal (the float32 vectors are always kept, for rescoring).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Quantization {
    /// Float32 vectors only.
    #[default]
    None,
    /// One byte per dimension ([`crate::sq8`]); HNSW traversal on codes, the best
    /// `oversample * k` candidates rescored with float32.
    Sq8,
    /// Product quantization with `m` subspaces of 256 centroids ([`crate::pq`]): `m` bytes
    /// per vector.
    Pq {
        /// Subspaces, which is also bytes per code; must divide the dimension.
        m: usize,
    },
    /// One bit per dimension, sign after centring ([`crate::binary`]).
    Binary,
    /// `bits` (1 to 8) per dimension of a randomly rotated residual, with a per-vector
    /// factor that makes the inner-product estimate unbiased ([`crate::rabitq`]).
    Rabitq {
        /// Bits per dimension: 1 to 8.
        bits: u32,
    },
}

impl Quantization {
    /// The name `--quantization` takes: `none`, `sq8`, `pq:M`, `binary`, `rabitq:B` (B from 1 to 8).
    pub fn name(self) -> String {
        match self {
            Quantization::None => "none".into(),
            Quantization::Sq8 => "sq8".into(),
            Quantization::Pq { m } => format!("pq:{m}"),
            Quantization::Binary => "binary".into(),
            Quantization::Rabitq { bits } => format!("rabitq:{bits}"),
        }
    }
    /// Parse a name as [`Quantization::name`] gives it; `None` for anything else (`m` is
    /// not checked against a dimension here).
    pub fn parse(s: &str) -> Option<Quantization> {
        match s {
            "none" => Some(Quantization::None),
            "sq8" => Some(Quantization::Sq8),
            "binary" => Some(Quantization::Binary),
            _ => {
                if let Some(bits) = s.strip_prefix("rabitq:") {
                    let bits = bits.parse().ok()?;
                    return crate::rabitq::BITS
                        .contains(&bits)
                        .then_some(Quantization::Rabitq { bits });
                }
                let m = s.strip_prefix("pq:")?.parse().ok()?;
                Some(Quantization::Pq { m })
            }
        }
    }
    /// Default `oversample` recorded in the manifest: coarser codes need more candidates
    /// rescored to keep recall@10 >= 0.95 (measured on dev-gcide-50k and synth 1M, see
    /// docs/memory-and-quantization.md).
    pub fn default_oversample(self) -> f32 {
        match self {
            Quantization::None | Quantization::Sq8 => DEFAULT_OVERSAMPLE,
            Quantization::Pq { .. } => 24.0,
            Quantization::Binary => 64.0,
            // Measured on dev-gcide-50k: rabitq:4 rescoring 4 x k matches float32's recall at
            // every ef; coarser codes need more candidates.
            Quantization::Rabitq { bits } if bits < 4 => 16.0,
            Quantization::Rabitq { .. } => DEFAULT_OVERSAMPLE,
        }
    }
}

impl CodesParams {
    fn new(kind: CodeKind, oversample: f32) -> CodesParams {
        CodesParams {
            kind,
            bits: None,
            m: None,
            centroids: None,
            clip: None,
            sample: None,
            iters: None,
            seed: None,
            residual: None,
            oversample,
        }
    }
}

/// Train the quantizer `q` on `stored` (row-major, `dim` columns, storage order), write
/// `codes.bin` and return the manifest's `quantization` entry.
pub fn write(
    w: &mut DirWriter,
    stored: &[f32],
    dim: usize,
    q: Quantization,
) -> Result<CodesParams> {
    use rayon::prelude::*;
    let n = stored.len() / dim;
    let norms: Vec<f32> = stored
        .par_chunks(dim)
        .map(searchd_kernels::norm_sq)
        .collect();
    let header = |kind: u64, param: u64, variant: u64| {
        Header::new(CODES_MAGIC, [n as u64, dim as u64, kind, param, variant, 0])
    };
    let oversample = q.default_oversample();
    match q {
        Quantization::None => Err(Error::invalid("no quantization to write")),
        Quantization::Sq8 => {
            let quant = crate::sq8::Sq8::train(
                stored,
                dim,
                crate::sq8::DEFAULT_SAMPLE,
                crate::sq8::DEFAULT_CLIP,
            )?;
            let mut codes = vec![0u8; n * dim];
            codes
                .par_chunks_mut(dim)
                .zip(stored.par_chunks(dim))
                .for_each(|(c, v)| quant.encode_into(v, c));
            w.write_file(
                NAME,
                &header(CODES_SQ8, 0, 0),
                &[
                    bytemuck::cast_slice(quant.lo()),
                    bytemuck::cast_slice(quant.step()),
                    bytemuck::cast_slice(&norms),
                    &codes,
                ],
            )?;
            Ok(CodesParams {
                clip: Some(crate::sq8::DEFAULT_CLIP),
                sample: Some(crate::sq8::DEFAULT_SAMPLE.min(n)),
                ..CodesParams::new(CodeKind::Sq8, oversample)
            })
        }
        Quantization::Pq { m } => {
            let params = crate::pq::PqParams::new(m);
            let quant = crate::pq::Pq::train(stored, dim, &params)?;
            let codes = quant.encode_all(stored);
            write_pq_file(w, &quant, &params, &norms, &codes, false)
        }
        Quantization::Binary => {
            let quant = crate::binary::Binary::train(stored, dim, crate::binary::DEFAULT_SAMPLE)?;
            let words = quant.words();
            let mut codes = vec![0u64; n * words];
            codes
                .par_chunks_mut(words)
                .zip(stored.par_chunks(dim))
                .for_each(|(c, v)| quant.encode_into(v, c));
            let le: Vec<u64> = codes.iter().map(|w| w.to_le()).collect();
            let before = 4 * dim + 4 * n;
            let pad = vec![0u8; codes_padding(before)];
            w.write_file(
                NAME,
                &header(CODES_BINARY, 0, 0),
                &[
                    bytemuck::cast_slice(quant.mean()),
                    bytemuck::cast_slice(&norms),
                    &pad,
                    bytemuck::cast_slice(&le),
                ],
            )?;
            Ok(CodesParams {
                sample: Some(crate::binary::DEFAULT_SAMPLE.min(n)),
                ..CodesParams::new(CodeKind::Binary, oversample)
            })
        }
        Quantization::Rabitq { bits } => {
            let quant = crate::rabitq::Rabitq::train(
                stored,
                dim,
                bits,
                crate::rabitq::DEFAULT_SAMPLE,
                crate::rabitq::DEFAULT_SEED,
            )?;
            let len = quant.len();
            let mut codes = vec![0u8; n * len];
            codes
                .par_chunks_mut(len)
                .zip(stored.par_chunks(dim))
                .for_each(|(c, v)| quant.encode_into(v, c));
            let rotation = quant.rotation();
            let before = 4 * dim + 4 * rotation.params().len() + 4 * n;
            let pad = vec![0u8; codes_padding(before)];
            w.write_file(
                NAME,
                &header(CODES_RABITQ, bits as u64, rotation.kind_code()),
                &[
                    bytemuck::cast_slice(quant.center()),
                    bytemuck::cast_slice(rotation.params()),
                    bytemuck::cast_slice(&norms),
                    &pad,
                    &codes,
                ],
            )?;
            Ok(CodesParams {
                bits: Some(bits),
                sample: Some(crate::rabitq::DEFAULT_SAMPLE.min(n)),
                seed: Some(crate::rabitq::DEFAULT_SEED),
                ..CodesParams::new(CodeKind::Rabitq, oversample)
            })
        }
    }
}

/// IVF-PQ `codes.bin`: the PQ layout of [`write`], with codebooks trained on the
/// residuals `x - centroid(list(x))` and norms and codes in list order (see [`crate::ivf`]).
pub fn write_residuals(
    w: &mut DirWriter,
    stored: &[f32],
    dim: usize,
    m: usize,
    centroids: &[f32],
    lists: &[u32],
    order: &[u32],
) -> Result<CodesParams> {
    use rayon::prelude::*;
    let n = order.len();
    let residual_into = |r: usize, out: &mut [f32]| {
        let c = lists[r] as usize;
        for ((o, x), c) in out
            .iter_mut()
            .zip(&stored[r * dim..(r + 1) * dim])
            .zip(&centroids[c * dim..(c + 1) * dim])
        {
            *o = x - c;
        }
    };
    // Only the rows `Pq::train` would sample (evenly spread over list order) are
    // materialised: the same codebooks as training on all n residuals, without an n x dim
    // copy (1.5 GB at 1M x 384).
    let params = crate::pq::PqParams::new(m);
    let take = params.sample.min(n);
    let mut sample = vec![0f32; take * dim];
    sample
        .par_chunks_mut(dim)
        .enumerate()
        .for_each(|(i, out)| residual_into(order[i * n / take] as usize, out));
    let quant = crate::pq::Pq::train(&sample, dim, &params)?;
    drop(sample);
    let mut codes = vec![0u8; n * m];
    codes.par_chunks_mut(m).zip(order.par_iter()).for_each_init(
        || vec![0f32; dim],
        |buf, (out, &r)| {
            residual_into(r as usize, buf);
            quant.encode_into(buf, out);
        },
    );
    let norms: Vec<f32> = order
        .par_iter()
        .map(|&r| searchd_kernels::norm_sq(&stored[r as usize * dim..(r as usize + 1) * dim]))
        .collect();
    write_pq_file(w, &quant, &params, &norms, &codes, true)
}

/// `codes.bin` of PQ codes (layout at the top of this module) and the manifest entry; `residual`
/// says the codes are of IVF residuals, in list order.
fn write_pq_file(
    w: &mut DirWriter,
    quant: &crate::pq::Pq,
    params: &crate::pq::PqParams,
    norms: &[f32],
    codes: &[u8],
    residual: bool,
) -> Result<CodesParams> {
    let (n, dim, m) = (norms.len(), quant.dim(), quant.m());
    let before = 4 * quant.centroids().len() + 4 * n;
    let pad = vec![0u8; codes_padding(before)];
    let header = Header::new(
        CODES_MAGIC,
        [n as u64, dim as u64, CODES_PQ, m as u64, 0, 0],
    );
    w.write_file(
        NAME,
        &header,
        &[
            bytemuck::cast_slice(quant.centroids()),
            bytemuck::cast_slice(norms),
            &pad,
            codes,
        ],
    )?;
    Ok(CodesParams {
        m: Some(m),
        centroids: Some(crate::pq::KSUB),
        sample: Some(params.sample.min(n)),
        iters: Some(params.iters),
        seed: Some(params.seed),
        residual: residual.then_some(true),
        ..CodesParams::new(CodeKind::Pq, Quantization::Pq { m }.default_oversample())
    })
}

/// Zero bytes after `payload_before` bytes of payload (which follow the 64-byte header)
/// so the codes start on a 64-byte boundary.
fn codes_padding(payload_before: usize) -> usize {
    payload_before.next_multiple_of(64) - payload_before
}

/// `codes.bin` of a quantized index: its bytes, where things are in them, its quantizer.
pub struct Codes {
    bytes: FileBytes,
    /// The quantizer the codes were made with.
    pub quant: Quantizer,
    /// Squared norms of the float32 vectors (n f32), for l2.
    norms: (usize, usize),
    /// Byte offset of row 0's code.
    start: usize,
    /// Bytes per code.
    pub len: usize,
    /// Default `oversample` recorded at build time.
    pub oversample: f32,
}

pub enum Quantizer {
    /// [`crate::sq8`].
    Sq8(crate::sq8::Sq8),
    /// [`crate::pq`].
    Pq(crate::pq::Pq),
    /// [`crate::binary`].
    Binary(crate::binary::Binary),
    /// [`crate::rabitq`].
    Rabitq(crate::rabitq::Rabitq),
}

impl Codes {
    /// Squared norms of the float32 vectors, by stored row (list order for IVF-PQ).
    #[inline]
    pub fn norms(&self) -> &[f32] {
        let (s, n) = self.norms;
        bytemuck::cast_slice(&self.bytes.as_bytes()[s..s + 4 * n])
    }
    /// Size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes.as_bytes().len() as u64
    }
    /// The codes, `len` bytes each, from stored row 0.
    #[inline]
    pub fn rows(&self) -> &[u8] {
        &self.bytes.as_bytes()[self.start..]
    }
}

impl Codes {
    /// Open and check `codes.bin` of `dir` (placed as `opts.codes`), holding the codes the
    /// manifest's `params` describe.
    pub fn open(
        dir: &Path,
        manifest: &Manifest,
        params: &CodesParams,
        opts: &LoadOptions,
    ) -> Result<Codes> {
        let (path, bytes) = super::open_checked(dir, manifest, NAME, opts.codes, opts)?;
        let expected = match params.kind {
            CodeKind::Sq8 => CODES_SQ8,
            CodeKind::Pq => CODES_PQ,
            CodeKind::Binary => CODES_BINARY,
            CodeKind::Rabitq => CODES_RABITQ,
        };
        parse(
            &path,
            bytes,
            manifest.n,
            manifest.dim,
            expected,
            params.oversample,
        )
    }
}

/// Check `codes.bin` and read its quantizer.
fn parse(
    path: &Path,
    bytes: FileBytes,
    n: usize,
    dim: usize,
    expected_kind: u64,
    oversample: f32,
) -> Result<Codes> {
    let b = bytes.as_bytes();
    let h = Header::parse(path, b, CODES_MAGIC)?;
    let [hn, hdim, kind, param, variant, _] = h.fields;
    if hn as usize != n || hdim as usize != dim || kind != expected_kind {
        return Err(Error::format(
            path,
            format!(
                "header says {hn} x {hdim} codes of kind {kind}, the index has {n} x {dim} of kind {expected_kind}"
            ),
        ));
    }
    let f32s = |start: usize, len: usize| -> Result<Vec<f32>> {
        b.get(start..start + 4 * len)
            .map(|s| bytemuck::cast_slice::<u8, f32>(s).to_vec())
            .ok_or_else(|| Error::format(path, "file ends inside the quantizer parameters"))
    };
    let bad = |e: Error| Error::format(path, e.to_string());
    // (quantizer, bytes of its parameters, bytes per code, codes 64-byte aligned)
    let (quant, params, len, aligned) = match kind {
        CODES_SQ8 => {
            let lo = f32s(HEADER_LEN, dim)?;
            let step = f32s(HEADER_LEN + 4 * dim, dim)?;
            let q = crate::sq8::Sq8::from_parts(lo, step).map_err(bad)?;
            (Quantizer::Sq8(q), 8 * dim, dim, false)
        }
        CODES_PQ => {
            let m = param as usize;
            if m == 0 || m > dim || !dim.is_multiple_of(m) {
                return Err(Error::format(
                    path,
                    format!("pq m={m} does not divide dimension {dim}"),
                ));
            }
            let c = f32s(HEADER_LEN, crate::pq::KSUB * dim)?;
            let q = crate::pq::Pq::from_parts(dim, m, c).map_err(bad)?;
            (Quantizer::Pq(q), 4 * crate::pq::KSUB * dim, m, true)
        }
        CODES_BINARY => {
            let q = crate::binary::Binary::from_parts(f32s(HEADER_LEN, dim)?).map_err(bad)?;
            let len = 8 * q.words();
            (Quantizer::Binary(q), 4 * dim, len, true)
        }
        CODES_RABITQ => {
            let bits = u32::try_from(param).unwrap_or(0);
            let center = f32s(HEADER_LEN, dim)?;
            if dim > crate::rabitq::MAX_DIM {
                return Err(Error::format(
                    path,
                    format!("rabitq codes of {dim} dimensions"),
                ));
            }
            use crate::rabitq::Rotation;
            let Some(stored) = Rotation::stored_len(variant, dim) else {
                return Err(Error::format(
                    path,
                    format!("unknown rabitq rotation kind {variant}"),
                ));
            };
            let rotation = Rotation::from_parts(variant, dim, f32s(HEADER_LEN + 4 * dim, stored)?)
                .map_err(bad)?;
            let q = crate::rabitq::Rabitq::from_parts(dim, bits, center, rotation).map_err(bad)?;
            let len = q.len();
            (Quantizer::Rabitq(q), 4 * dim + 4 * stored, len, true)
        }
        other => return Err(Error::format(path, format!("unknown code kind {other}"))),
    };
    let norms = (HEADER_LEN + params, n);
    let mut start = norms.0 + 4 * n;
    if aligned {
        start += codes_padding(params + 4 * n);
    }
    let expect = start + n * len;
    if b.len() != expect {
        return Err(Error::Size {
            path: path.to_path_buf(),
            expected: expect as u64,
            actual: b.len() as u64,
        });
    }
    Ok(Codes {
        bytes,
        quant,
        norms,
        start,
        len,
        oversample,
    })
}
