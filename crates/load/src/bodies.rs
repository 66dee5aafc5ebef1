//! The rotating request bodies (built once, sent as shared `Bytes`) and the
//! query pickers.

use std::io::BufRead;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::config::Pick;
use crate::error::LoadError;

/// Pre-serialised bodies with what each answer should hold.
#[derive(Debug, Clone, Default)]
pub struct BodySet {
    /// Serialised request bodies, sent verbatim.
    pub bodies: Vec<Bytes>,
    /// `k` asked for by each body.
    pub k: Vec<u32>,
    /// `qidx` of each body, when it names one (for recall against `--gt`).
    pub qidx: Vec<Option<u32>>,
    /// 1-based line numbers in the body file (empty for generated bodies).
    pub lines: Vec<usize>,
}

impl BodySet {
    /// `{"qidx": i, "k": k}` (plus `"ef"`) for i in 0..n.
    pub fn generated(n: usize, k: u32, ef: Option<u32>) -> Self {
        let mut s = BodySet::default();
        for i in 0..n {
            let body = match ef {
                Some(ef) => format!("{{\"qidx\":{i},\"k\":{k},\"ef\":{ef}}}"),
                None => format!("{{\"qidx\":{i},\"k\":{k}}}"),
            };
            s.bodies.push(Bytes::from(body));
            s.k.push(k);
            s.qidx.push(Some(i as u32));
        }
        s
    }

    /// An empty body per request (GET endpoints); one entry.
    pub fn empty() -> Self {
        BodySet {
            bodies: vec![Bytes::new()],
            k: vec![0],
            qidx: vec![None],
            lines: vec![],
        }
    }

    /// Read JSON lines: each non-blank line must be a JSON object and is sent
    /// verbatim. `k` defaults to 10 (the API default) when the line has none.
    pub fn from_file(path: &Path) -> Result<Self, LoadError> {
        let f = std::fs::File::open(path).map_err(|source| LoadError::Input {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_reader(std::io::BufReader::new(f), path)
    }

    /// Like [`BodySet::from_file`], from any reader; `path` is only used in errors.
    pub fn from_reader(r: impl BufRead, path: &Path) -> Result<Self, LoadError> {
        let mut s = BodySet::default();
        for (i, line) in r.lines().enumerate() {
            let lineno = i + 1;
            let line = line.map_err(|e| LoadError::BodyFile {
                path: path.to_path_buf(),
                line: lineno,
                message: format!("cannot read: {e}"),
            })?;
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            let bad = |message: String| LoadError::BodyFile {
                path: path.to_path_buf(),
                line: lineno,
                message,
            };
            let v: serde_json::Value =
                serde_json::from_str(t).map_err(|e| bad(format!("not valid JSON: {e}")))?;
            let obj = v
                .as_object()
                .ok_or_else(|| bad("not a JSON object".into()))?;
            let k = match obj.get("k") {
                None => 10,
                Some(k) => k
                    .as_u64()
                    .filter(|k| (1..=1000).contains(k))
                    .ok_or_else(|| {
                        bad(format!("\"k\" must be an integer in 1..=1000, found {k}"))
                    })? as u32,
            };
            let qidx = obj
                .get("qidx")
                .and_then(|q| q.as_u64())
                .and_then(|q| u32::try_from(q).ok());
            s.bodies.push(Bytes::from(t.to_string()));
            s.k.push(k);
            s.qidx.push(qidx);
            s.lines.push(lineno);
        }
        if s.bodies.is_empty() {
            return Err(LoadError::BodyFile {
                path: path.to_path_buf(),
                line: 0,
                message: "no bodies (the file is empty)".into(),
            });
        }
        Ok(s)
    }

    /// `{"text": T, "k": k}` (plus `"ef"` and `"mode"`) for the string field `field` of each line of a
    /// JSONL file; line i (blank lines skipped) counts as query row i for `--gt`.
    pub fn from_text_queries(
        path: &Path,
        field: &str,
        k: u32,
        ef: Option<u32>,
        mode: Option<&str>,
    ) -> Result<Self, LoadError> {
        let f = std::fs::File::open(path).map_err(|source| LoadError::Input {
            path: path.to_path_buf(),
            source,
        })?;
        let mut s = BodySet::default();
        for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
            let lineno = i + 1;
            let bad = |message: String| LoadError::BodyFile {
                path: path.to_path_buf(),
                line: lineno,
                message,
            };
            let line = line.map_err(|e| bad(format!("cannot read: {e}")))?;
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_str(t).map_err(|e| bad(format!("not valid JSON: {e}")))?;
            let text = match v.get(field) {
                Some(serde_json::Value::String(x)) => x.clone(),
                Some(other) => {
                    return Err(bad(format!(
                        "field {field:?} must be a string, got {other}"
                    )))
                }
                None => return Err(bad(format!("field {field:?} is missing"))),
            };
            let mut body = serde_json::json!({"text": text, "k": k});
            if let Some(ef) = ef {
                body["ef"] = ef.into();
            }
            if let Some(m) = mode {
                body["mode"] = m.into();
            }
            let row = s.bodies.len() as u32;
            s.bodies
                .push(Bytes::from(serde_json::to_vec(&body).unwrap_or_default()));
            s.k.push(k);
            s.qidx.push(Some(row));
            s.lines.push(lineno);
        }
        if s.bodies.is_empty() {
            return Err(LoadError::BodyFile {
                path: path.to_path_buf(),
                line: 0,
                message: "no queries (the file is empty)".into(),
            });
        }
        Ok(s)
    }

    /// Number of bodies.
    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    /// True when there are no bodies.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }
}

/// Shared, read-only part of a picker.
#[derive(Debug)]
pub struct PickShared {
    pick: Pick,
    n: usize,
    /// Zipf CDF over ranks 1..=n (last element 1.0).
    zipf_cdf: Vec<f64>,
    seq: AtomicUsize,
}

impl PickShared {
    /// Shared state for picking among `n` bodies with `pick` (precomputes the Zipf CDF).
    pub fn new(pick: Pick, n: usize) -> Arc<Self> {
        let zipf_cdf = match pick {
            Pick::Zipf(s) => {
                let mut acc = 0.0;
                let mut cdf: Vec<f64> = (1..=n)
                    .map(|r| {
                        acc += 1.0 / (r as f64).powf(s);
                        acc
                    })
                    .collect();
                for c in cdf.iter_mut() {
                    *c /= acc;
                }
                if let Some(last) = cdf.last_mut() {
                    *last = 1.0;
                }
                cdf
            }
            _ => Vec::new(),
        };
        Arc::new(PickShared {
            pick,
            n,
            zipf_cdf,
            seq: AtomicUsize::new(0),
        })
    }
}

/// Picks body indexes; one per worker (own RNG, shared sequence counter).
#[derive(Debug)]
pub struct Picker {
    shared: Arc<PickShared>,
    rng: SmallRng,
}

impl Picker {
    /// A picker over `shared` with its own RNG seeded from `seed`.
    pub fn new(shared: Arc<PickShared>, seed: u64) -> Self {
        Picker {
            shared,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Index of the next body to send (always 0 when there is at most one body).
    #[inline]
    pub fn next_index(&mut self) -> usize {
        let s = &*self.shared;
        if s.n <= 1 {
            return 0;
        }
        match s.pick {
            Pick::Uniform => self.rng.random_range(0..s.n),
            Pick::Seq => s.seq.fetch_add(1, Ordering::Relaxed) % s.n,
            Pick::Fixed(i) => i.min(s.n - 1),
            Pick::Zipf(_) => {
                let u: f64 = self.rng.random();
                s.zipf_cdf.partition_point(|&c| c < u).min(s.n - 1)
            }
        }
    }
}
