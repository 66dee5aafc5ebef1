//! `manifest.json`, typed: what an index directory holds and how it was built.
//!
//! Read by [`Manifest::read`], which accepts every format version in
//! [`super::READ_VERSIONS`]; written by [`super::DirWriter::commit`]. Unknown fields are
//! ignored (a newer searchd may add some); an unknown kind, metric or code kind is refused
//! with the manifest's path.

use std::path::Path;

use searchd_kernels::Metric;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Index kinds: how an index finds candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// Exact scan of every vector.
    Flat,
    /// HNSW graph over float32 vectors (or codes, with a quantization).
    Hnsw,
    /// Inverted file of coarse k-means lists with product-quantized residuals
    /// ([`crate::ivf`]); `ef` of a search is the number of lists probed.
    IvfPq,
    /// Balanced k-means partitions, one HNSW graph each ([`crate::partition`]); a search
    /// probes the `nprobe` nearest partitions.
    Partitioned,
}

impl IndexKind {
    /// The name in manifests and on the command line: `flat`, `hnsw`, `ivfpq`,
    /// `partitioned`.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Flat => "flat",
            IndexKind::Hnsw => "hnsw",
            IndexKind::IvfPq => "ivfpq",
            IndexKind::Partitioned => "partitioned",
        }
    }
    /// Parse a name written by [`IndexKind::name`].
    pub fn parse(s: &str) -> Option<IndexKind> {
        match s {
            "flat" => Some(IndexKind::Flat),
            "hnsw" => Some(IndexKind::Hnsw),
            "ivfpq" => Some(IndexKind::IvfPq),
            "partitioned" => Some(IndexKind::Partitioned),
            _ => None,
        }
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Kinds of compressed codes (`codes.bin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CodeKind {
    /// One byte per dimension ([`crate::sq8`]).
    Sq8,
    /// Product quantization ([`crate::pq`]).
    Pq,
    /// One bit per dimension ([`crate::binary`]).
    Binary,
    /// Few bits per dimension of a rotated residual ([`crate::rabitq`]).
    Rabitq,
}

impl CodeKind {
    /// The name in manifests: `sq8`, `pq`, `binary`.
    pub fn name(self) -> &'static str {
        match self {
            CodeKind::Sq8 => "sq8",
            CodeKind::Pq => "pq",
            CodeKind::Binary => "binary",
            CodeKind::Rabitq => "rabitq",
        }
    }
}

/// How the codes of a quantized index were trained (the manifest's `params.quantization`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodesParams {
    /// Which codes `codes.bin` holds.
    pub kind: CodeKind,
    /// RaBitQ: bits per dimension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bits: Option<u32>,
    /// PQ: subspaces (bytes per code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m: Option<usize>,
    /// PQ: centroids per subspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub centroids: Option<usize>,
    /// SQ8: the fraction clipped at each end of a dimension's range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip: Option<f64>,
    /// Rows the quantizer was trained on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<usize>,
    /// PQ: k-means iterations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iters: Option<usize>,
    /// PQ: k-means seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// IVF-PQ: the codes are of residuals to the coarse centroids, in list order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<bool>,
    /// Default `oversample` of searches (absent in a manifest: the engine's default).
    #[serde(default = "default_oversample")]
    pub oversample: f32,
}

fn default_oversample() -> f32 {
    crate::format::DEFAULT_OVERSAMPLE
}

/// How an index was built (the manifest's `params`); which fields are set depends on the
/// kind. Shown as JSON by [`crate::IndexInfo::params`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// HNSW: links per node on upper levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m: Option<usize>,
    /// HNSW: candidate list size while inserting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ef_construction: Option<usize>,
    /// IVF-PQ: coarse lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nlist: Option<usize>,
    /// IVF-PQ: coarse k-means iterations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iters: Option<usize>,
    /// HNSW level generator / coarse k-means seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Partitioned: partitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<usize>,
    /// Partitioned: most further partitions a boundary row is copied into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<usize>,
    /// Partitioned: rows placed in more than one partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<usize>,
    /// Partitioned: partitions a search probes unless it asks otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nprobe: Option<usize>,
    /// Partitioned: the codes of each partition's graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_quantization: Option<CodesParams>,
    /// Build threads (0 = one per core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Codes of a quantized index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantization: Option<CodesParams>,
}

/// One file listed in the manifest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileEntry {
    /// File name inside the directory.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// CRC32 of the whole file.
    pub crc32: u32,
}

/// `manifest.json`: what an index directory holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Always [`crate::format::MANIFEST_FORMAT`].
    pub format: String,
    /// The format version the directory was written in.
    pub format_version: u32,
    /// The index kind.
    pub kind: IndexKind,
    /// The metric searches use.
    #[serde(with = "metric_name")]
    pub metric: Metric,
    /// Dimensions.
    pub dim: usize,
    /// Rows.
    pub n: usize,
    /// How it was built.
    #[serde(default)]
    pub params: Params,
    /// Every file with its size and CRC32.
    pub files: Vec<FileEntry>,
    /// `searchd <version>` that wrote it.
    pub created_by: String,
}

impl Manifest {
    /// Read and check `dir/manifest.json`: the format name and a readable version.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(crate::format::MANIFEST);
        if !dir.is_dir() {
            return Err(Error::io(
                dir,
                std::io::Error::new(std::io::ErrorKind::NotFound, "index directory not found"),
            ));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let invalid =
            |e: serde_json::Error| Error::format(&path, format!("manifest is not valid: {e}"));
        // Parsed once; the format and version are checked before the typed fields, so a newer
        // format is reported as such rather than as a field this searchd does not know.
        let value: serde_json::Value = serde_json::from_str(&text).map_err(invalid)?;
        #[derive(Deserialize)]
        struct Head {
            format: String,
            format_version: u32,
        }
        let head = Head::deserialize(&value).map_err(invalid)?;
        if head.format != crate::format::MANIFEST_FORMAT {
            return Err(Error::format(
                &path,
                format!(
                    "format is {:?}, expected {:?}",
                    head.format,
                    crate::format::MANIFEST_FORMAT
                ),
            ));
        }
        crate::format::check_version(&path, head.format_version)?;
        serde_json::from_value(value).map_err(invalid)
    }

    /// The entry of file `name`, if the directory holds it.
    pub fn file(&self, name: &str) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.name == name)
    }

    /// The entry of file `name`, or a format error naming the manifest.
    pub fn required(&self, dir: &Path, name: &str) -> Result<&FileEntry> {
        self.file(name).ok_or_else(|| {
            Error::format(
                dir.join(crate::format::MANIFEST),
                format!("manifest lists no {name}"),
            )
        })
    }
}

/// A [`Metric`] as its name (`cosine`, `ip`, `l2`).
mod metric_name {
    use searchd_kernels::Metric;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &Metric, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(m.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Metric, D::Error> {
        let s = String::deserialize(d)?;
        Metric::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("unknown metric {s:?} (cosine, ip, l2)"))
        })
    }
}
