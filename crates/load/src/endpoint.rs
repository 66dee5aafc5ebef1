//! `METHOD /path`: the endpoint a measurement sends to (`--endpoint`, and each entry of a
//! `--mix`).

use std::fmt;

/// `METHOD /path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// HTTP method.
    pub method: hyper::Method,
    /// Path (and query), starting with '/'.
    pub path: String,
}

impl Endpoint {
    /// True when requests carry a query body and answers get the full check.
    pub fn is_search(&self) -> bool {
        self.method != hyper::Method::GET && self.method != hyper::Method::HEAD
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// Parse `POST /search`, `GET /health`.
pub fn parse_endpoint(s: &str) -> Result<Endpoint, String> {
    let err = |why: &str| {
        format!("invalid endpoint '{s}': {why} (expected e.g. 'POST /search' or 'GET /health')")
    };
    let mut it = s.split_whitespace();
    let (Some(m), Some(p), None) = (it.next(), it.next(), it.next()) else {
        return Err(err("needs a method and a path"));
    };
    let method = hyper::Method::from_bytes(m.to_ascii_uppercase().as_bytes())
        .map_err(|_| err("bad method"))?;
    if !p.starts_with('/') {
        return Err(err("path must start with /"));
    }
    p.parse::<hyper::Uri>().map_err(|_| err("bad path"))?;
    Ok(Endpoint {
        method,
        path: p.to_string(),
    })
}
