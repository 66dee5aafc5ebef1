//! `--mix NAME=FILE:WEIGHT,...`: a weighted mix of endpoints, each FILE holding
//! one request per line, expanded into a seeded request schedule.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use hyper::Method;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::endpoint::Endpoint;
use crate::error::LoadError;

/// Fewest entries of a mix schedule.
pub const MIN_SCHEDULE: usize = 10_000;
/// Most entries of a mix schedule (unless the files together hold more lines).
pub const MAX_SCHEDULE: usize = 1_000_000;

/// One `NAME=FILE:WEIGHT` of `--mix`.
#[derive(Debug, Clone, PartialEq)]
pub struct MixEntry {
    /// Endpoint name (`[A-Za-z0-9_-]+`, unique in the mix).
    pub name: String,
    /// The mix file of this endpoint's requests.
    pub file: PathBuf,
    /// Relative share of the requests (positive; 1 when omitted).
    pub weight: f64,
}

/// The whole `--mix` value.
#[derive(Debug, Clone, PartialEq)]
pub struct MixSpec(pub Vec<MixEntry>);

/// Parse `NAME=FILE[:WEIGHT],...`: NAME is `[A-Za-z0-9_-]+` and unique, WEIGHT a
/// positive number (1 when omitted). The files are read when the run starts.
pub fn parse_mix(s: &str) -> Result<MixSpec, String> {
    let err = |why: String| {
        format!("invalid mix '{s}': {why} (expected NAME=FILE:WEIGHT,..., e.g. search=q.txt:3,get=docs.txt:1)")
    };
    let mut out: Vec<MixEntry> = Vec::new();
    let mut names = HashSet::new();
    for part in s.split(',') {
        let p = part.trim();
        if p.is_empty() {
            return Err(err("empty entry".into()));
        }
        let Some((name, rest)) = p.split_once('=') else {
            return Err(err(format!("'{p}' has no '=' between name and file")));
        };
        let name = name.trim();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(err(format!(
                "name '{name}' must be letters, digits, '_' or '-'"
            )));
        }
        if !names.insert(name.to_string()) {
            return Err(err(format!("duplicate name '{name}'")));
        }
        let (file, weight) = match rest.rsplit_once(':') {
            None => (rest, 1.0),
            Some((f, w)) => {
                let w = w.trim();
                let v: f64 = w
                    .parse()
                    .map_err(|_| err(format!("weight '{w}' of '{name}' is not a number")))?;
                if !(v.is_finite() && v > 0.0) {
                    return Err(err(format!("weight '{w}' of '{name}' must be > 0")));
                }
                (f, v)
            }
        };
        let file = file.trim();
        if file.is_empty() {
            return Err(err(format!("'{name}' has no file")));
        }
        out.push(MixEntry {
            name: name.to_string(),
            file: PathBuf::from(file),
            weight,
        });
    }
    if out.len() > u16::MAX as usize {
        return Err(err("too many endpoints".into()));
    }
    Ok(MixSpec(out))
}

/// One request of a mix file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MixLine {
    /// HTTP method.
    pub method: Method,
    /// Path (and query) starting with '/'.
    pub path: String,
    /// The JSON body, if the line has one.
    pub body: Option<Bytes>,
}

impl MixLine {
    /// Whether the request carries a body (and Content-Length). POST/PUT/DELETE always
    /// do (an empty one when the line has none); GET and HEAD never.
    pub fn with_body(&self) -> bool {
        self.method != Method::GET && self.method != Method::HEAD
    }
}

fn takes_body(m: &Method) -> bool {
    *m != Method::GET && *m != Method::HEAD
}

/// Parse one non-blank line: `GET /path`, `POST /path {json}` or a bare `{json}` object
/// (sent to `default`, which must take a body).
pub fn parse_mix_line(line: &str, default: &Endpoint) -> Result<MixLine, String> {
    let t = line.trim();
    if t.starts_with('{') {
        let v: serde_json::Value =
            serde_json::from_str(t).map_err(|e| format!("not valid JSON: {e}"))?;
        if !v.is_object() {
            return Err("not a JSON object".into());
        }
        if !takes_body(&default.method) {
            return Err(format!(
                "a bare JSON body needs an --endpoint that takes a body, not '{default}'"
            ));
        }
        return Ok(MixLine {
            method: default.method.clone(),
            path: default.path.clone(),
            body: Some(Bytes::from(t.to_string())),
        });
    }
    let (m, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
    let method = match m.to_ascii_uppercase().as_str() {
        "GET" => Method::GET,
        "POST" => Method::POST,
        "PUT" => Method::PUT,
        "DELETE" => Method::DELETE,
        "HEAD" => Method::HEAD,
        _ => {
            return Err(format!(
            "unknown method '{m}' (expected GET, POST, PUT, DELETE or HEAD, or a bare JSON object)"
        ))
        }
    };
    let rest = rest.trim_start();
    let (path, body) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if path.is_empty() {
        return Err(format!("'{m}' needs a path"));
    }
    if !path.starts_with('/') {
        return Err(format!("path '{path}' must start with '/'"));
    }
    if path.parse::<hyper::Uri>().is_err() {
        return Err(format!("bad path '{path}'"));
    }
    let body = body.trim();
    let body = if body.is_empty() {
        None
    } else {
        if !takes_body(&method) {
            return Err(format!("{method} takes no body"));
        }
        serde_json::from_str::<serde::de::IgnoredAny>(body)
            .map_err(|e| format!("body is not valid JSON: {e}"))?;
        Some(Bytes::from(body.to_string()))
    };
    Ok(MixLine {
        method,
        path: path.to_string(),
        body,
    })
}

/// Read a mix file: one request per non-blank line.
pub fn read_mix_file(path: &Path, default: &Endpoint) -> Result<Vec<MixLine>, LoadError> {
    let f = std::fs::File::open(path).map_err(|source| LoadError::Input {
        path: path.to_path_buf(),
        source,
    })?;
    mix_lines_from_reader(std::io::BufReader::new(f), path, default)
}

/// As [`read_mix_file`], from any reader (`path` names it in errors). An empty file is a
/// usage error.
pub fn mix_lines_from_reader(
    r: impl BufRead,
    path: &Path,
    default: &Endpoint,
) -> Result<Vec<MixLine>, LoadError> {
    let mut out = Vec::new();
    for (i, line) in r.lines().enumerate() {
        let bad = |message: String| LoadError::BodyFile {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let line = line.map_err(|e| bad(format!("cannot read: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_mix_line(&line, default).map_err(bad)?);
    }
    if out.is_empty() {
        return Err(LoadError::usage(format!(
            "--mix file {} holds no request (it is empty)",
            path.display()
        )));
    }
    Ok(out)
}

/// A request schedule: entry i is line `line[i]` of endpoint `ep[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Endpoint index of each entry.
    pub ep: Vec<u16>,
    /// Line index (within its endpoint's file) of each entry.
    pub line: Vec<u32>,
}

impl Schedule {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.ep.len()
    }
    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.ep.is_empty()
    }
}

/// Expand endpoints (`weights[e]`, `lines[e]` lines each) into a seeded schedule of
/// max(10 000, total lines, enough for every line) entries (at most 1 000 000 unless
/// the lines alone are more): each endpoint gets its weight's share of the entries
/// (largest remainder, at least one), the entries are shuffled, and within an
/// endpoint its lines rotate in order.
pub fn build_schedule(weights: &[f64], lines: &[usize], seed: u64) -> Schedule {
    assert_eq!(weights.len(), lines.len());
    let total_w: f64 = weights.iter().sum();
    let total_lines: usize = lines.iter().sum();
    let cover = weights
        .iter()
        .zip(lines)
        .map(|(&w, &n)| (n as f64 * total_w / w).ceil())
        .fold(0.0, f64::max)
        .min(MAX_SCHEDULE as f64) as usize;
    let len = MIN_SCHEDULE.max(total_lines).max(cover);
    let mut counts: Vec<usize> = Vec::with_capacity(weights.len());
    let mut frac: Vec<(f64, usize)> = Vec::with_capacity(weights.len());
    for (e, &w) in weights.iter().enumerate() {
        let exact = len as f64 * w / total_w;
        counts.push(exact.floor() as usize);
        frac.push((exact - exact.floor(), e));
    }
    let mut left = len.saturating_sub(counts.iter().sum());
    frac.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, e) in frac.iter().cycle() {
        if left == 0 {
            break;
        }
        counts[e] += 1;
        left -= 1;
    }
    for c in counts.iter_mut() {
        *c = (*c).max(1);
    }
    let mut ep: Vec<u16> = counts
        .iter()
        .enumerate()
        .flat_map(|(e, &c)| std::iter::repeat_n(e as u16, c))
        .collect();
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x6d69_785f_7363_6864);
    ep.shuffle(&mut rng);
    let mut next = vec![0usize; weights.len()];
    let line = ep
        .iter()
        .map(|&e| {
            let e = e as usize;
            let l = next[e] % lines[e].max(1);
            next[e] += 1;
            l as u32
        })
        .collect();
    Schedule { ep, line }
}
