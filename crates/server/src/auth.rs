//! API keys with scopes (CONTRACTS.md "Security and operations").
//!
//! `serve --api-keys FILE` names a TOML file of keys, stored hashed:
//!
//! ```toml
//! [[key]]
//! name = "ingest"                      # shown in logs, never the key
//! hash = "sha256:9f86d0…"              # SHA-256 of the key, hex (`searchd keys new` prints it)
//! scope = "write"                      # "read" < "write" < "admin"
//! collections = ["docs"]               # optional: only these collections
//! ```
//!
//! With keys configured, every route but `/health`, `/ready`, the search console's page
//! and assets (`GET /console`, `/console/*`, and `GET /` unless it asks for Elasticsearch's
//! media type: they hold no data, and the page sends the key its user types) and the API's
//! description (`GET /openapi.json`, no data either) needs one, sent as
//! `Authorization: Bearer KEY` or `api-key: KEY` (Qdrant's header). No key, or one that
//! is not in the file: 401 `unauthorized`. A key whose scope or collections do not cover
//! the route: 403 `forbidden`. What a route needs is decided here, in one place
//! ([`need`]), from its method and path: reads (searches, counts, facets, scrolls,
//! documents, collection info, `/stats`, `/metrics`) need `read`; anything that changes
//! a collection needs `write`; snapshots and `/admin/*` need `admin`; a method or path
//! this table does not know is treated as a write. A route that spans every collection
//! (`/stats`, `/metrics`, `/collections`, the v1 `/search`, `/admin/*`) needs a key that
//! is not limited to named collections.
//!
//! The middleware that applies this in front of every route is `router.rs` `gate`.
//!
//! The file is read at start (a bad file refuses the start) and again whenever it changes
//! (polled every second); a changed file that does not parse is logged and the keys in
//! force stay.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use axum::extract::Request;
use axum::http::{header, Method};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, Code, ServerError};

/// What a key may do; each scope includes the ones below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Searches and reads.
    Read,
    /// Reads, upserts and deletes.
    Write,
    /// Everything: snapshots, reloads.
    Admin,
}

impl Scope {
    /// The scope's name in the key file.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// Parse `read`, `write` or `admin`.
    pub fn parse(s: &str) -> Result<Scope, String> {
        match s {
            "read" => Ok(Scope::Read),
            "write" => Ok(Scope::Write),
            "admin" => Ok(Scope::Admin),
            other => Err(format!("unknown scope {other:?} (read, write or admin)")),
        }
    }
}

/// One key of the file (its hash, never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEntry {
    /// The key's name, for logs and the audit trail.
    pub name: String,
    /// SHA-256 of the key.
    hash: [u8; 32],
    /// What it may do.
    pub scope: Scope,
    /// Only these collections (`None`: every collection).
    pub collections: Option<Vec<String>>,
}

/// The keys in force.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRing {
    entries: Vec<KeyEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileText {
    #[serde(default)]
    key: Vec<RawKey>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    name: String,
    hash: String,
    scope: Scope,
    collections: Option<Vec<String>>,
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `sha256:` and the hex SHA-256 of `key`: the `hash` of its entry in the key file.
pub fn hash_of(key: &str) -> String {
    format!("sha256:{}", hex(&Sha256::digest(key.as_bytes())))
}

fn parse_hash(text: &str) -> Option<[u8; 32]> {
    let hex = text.strip_prefix("sha256:")?;
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Equal-time comparison (for equal lengths), so a secret cannot be guessed byte by byte
/// from timings: the key hashes here, `--admin-token` in `wire.rs`.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl KeyRing {
    /// Parse a key file's text; the message names the entry that is wrong.
    pub fn parse(text: &str) -> Result<KeyRing, String> {
        let raw: FileText = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut entries: Vec<KeyEntry> = Vec::with_capacity(raw.key.len());
        for (i, k) in raw.key.into_iter().enumerate() {
            let at = format!("key[{i}]");
            if k.name.trim().is_empty() {
                return Err(format!("{at}: name is empty"));
            }
            if entries.iter().any(|e| e.name == k.name) {
                return Err(format!("{at}: two keys are named {:?}", k.name));
            }
            let hash = parse_hash(&k.hash).ok_or_else(|| {
                format!(
                    "{at} ({}): hash must be \"sha256:\" and 64 hex digits (searchd keys new prints it)",
                    k.name
                )
            })?;
            if entries.iter().any(|e| same(&e.hash, &hash)) {
                return Err(format!("{at} ({}): the same key is listed twice", k.name));
            }
            if let Some(c) = &k.collections {
                if c.is_empty() || c.iter().any(|n| n.is_empty()) {
                    return Err(format!(
                        "{at} ({}): collections must name at least one collection (leave it out for every collection)",
                        k.name
                    ));
                }
            }
            entries.push(KeyEntry {
                name: k.name,
                hash,
                scope: k.scope,
                collections: k.collections,
            });
        }
        Ok(KeyRing { entries })
    }

    /// Read and parse a key file; a file without keys is refused.
    pub fn load(path: &Path) -> Result<KeyRing, ServerError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ServerError::Config(format!("--api-keys {}: {e}", path.display())))?;
        let ring = KeyRing::parse(&text)
            .map_err(|m| ServerError::Config(format!("--api-keys {}: {m}", path.display())))?;
        if ring.is_empty() {
            return Err(ServerError::Config(format!(
                "--api-keys {}: no [[key]] in the file (searchd keys new makes one)",
                path.display()
            )));
        }
        Ok(ring)
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of `key`, comparing its hash with every entry's (no early exit).
    pub fn find(&self, key: &str) -> Option<&KeyEntry> {
        let d: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        let mut found = None;
        for e in &self.entries {
            if same(&e.hash, &d) && found.is_none() {
                found = Some(e);
            }
        }
        found
    }
}

/// A new random key (`sdk_` and 64 hex digits from the OS's random source) and the
/// `[[key]]` table to add to the key file for it.
pub fn new_key(
    name: &str,
    scope: Scope,
    collections: Option<&[String]>,
) -> std::io::Result<(String, String)> {
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    let key = format!("sdk_{}", hex(&bytes));
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut entry = format!(
        "[[key]]\nname = {}\nhash = {}\nscope = {}\n",
        q(name),
        q(&hash_of(&key)),
        q(scope.name())
    );
    if let Some(c) = collections {
        let list: Vec<String> = c.iter().map(|s| q(s)).collect();
        entry.push_str(&format!("collections = [{}]\n", list.join(", ")));
    }
    Ok((key, entry))
}

/// What a route needs: a scope, and the collection it touches (`None`: it spans every
/// collection, so a key limited to named collections cannot use it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The least scope.
    pub scope: Scope,
    /// The collection named by the path.
    pub collection: Option<String>,
}

/// What `method path` needs; `None` for the open probes (`/health`, `/ready`), the
/// console's page and assets (`GET /console`, `/console/*`; `GET /` is decided by the
/// router's gate, by its media type) and `GET /openapi.json`.
pub fn need(method: &Method, path: &str) -> Option<Need> {
    let segs: Vec<&str> = path
        .trim_start_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let read_method = *method == Method::GET || *method == Method::HEAD;
    let n = |scope: Scope, collection: Option<&str>| {
        Some(Need {
            scope,
            collection: collection.map(str::to_string),
        })
    };
    match segs.as_slice() {
        ["health" | "healthz" | "ready" | "readyz"] => None,
        ["console"] | ["console", "console.js" | "console.css"] if read_method => None,
        // The API's description (GET /openapi.json) holds no data, as the console's assets.
        ["openapi.json"] if read_method => None,
        ["stats" | "metrics"] if read_method => n(Scope::Read, None),
        ["search"] if *method == Method::POST => n(Scope::Read, None),
        ["admin", ..] => n(Scope::Admin, None),
        ["collections"] if read_method => n(Scope::Read, None),
        // Creating a collection (its name is in the body).
        ["collections"] => n(Scope::Write, None),
        ["collections", c] if read_method => n(Scope::Read, Some(c)),
        ["collections", c, "search" | "count" | "facet" | "scroll"]
            if *method == Method::POST || read_method =>
        {
            n(Scope::Read, Some(c))
        }
        ["collections", c, "docs", _] if read_method => n(Scope::Read, Some(c)),
        ["collections", c, "snapshot"] => n(Scope::Admin, Some(c)),
        // Deleting a collection takes its files: admin (a key may be limited to it).
        ["collections", c] if *method == Method::DELETE => n(Scope::Admin, Some(c)),
        ["collections", c, ..] => n(Scope::Write, Some(c)),
        [c, "_search" | "_count" | "_mget" | "_msearch"]
            if read_method || *method == Method::POST =>
        {
            n(Scope::Read, Some(c))
        }
        [c, "_doc", _] if read_method => n(Scope::Read, Some(c)),
        [c, ..] if !c.starts_with('_') && read_method => n(Scope::Read, Some(c)),
        _ if read_method => n(Scope::Read, None),
        // Anything else changes something (or is not known): a write at least.
        [c, ..] if !c.starts_with('_') => n(Scope::Write, Some(c)),
        _ => n(Scope::Write, None),
    }
}

/// Whether `entry` may do what `need` says.
pub fn allows(entry: &KeyEntry, need: &Need) -> bool {
    entry.scope >= need.scope
        && match (&entry.collections, &need.collection) {
            (None, _) => true,
            (Some(list), Some(c)) => list.iter().any(|x| x == c),
            (Some(_), None) => false,
        }
}

/// The key a request carries: `Authorization: Bearer KEY`, else `api-key: KEY`.
fn presented(req: &Request) -> Option<&str> {
    let h = req.headers();
    if let Some(v) = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        return v.strip_prefix("Bearer ").map(str::trim);
    }
    h.get("api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// Who a request was let in as (in the request's extensions once the key gate let it
/// pass with a key).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key's name.
    pub key: String,
    /// Its scope.
    pub scope: Scope,
    /// The collections it is limited to (`None`: all).
    pub collections: Option<Vec<String>>,
}

impl Caller {
    /// Whether the key may write `collection` (for a `_bulk` whose lines name indexes the
    /// URL does not).
    pub fn may_write(&self, collection: &str) -> bool {
        self.scope >= Scope::Write
            && self
                .collections
                .as_ref()
                .is_none_or(|l| l.iter().any(|c| c == collection))
    }
}

/// The keys of a server, reloaded when the file changes.
pub(crate) struct Keys {
    path: PathBuf,
    ring: ArcSwap<KeyRing>,
}

impl Keys {
    /// Read the key file (an error refuses the start).
    pub fn open(path: &Path) -> Result<Keys, ServerError> {
        let ring = KeyRing::load(path)?;
        Ok(Keys {
            path: path.to_path_buf(),
            ring: ArcSwap::from_pointee(ring),
        })
    }

    /// Poll the file every second; swap in its keys when it changed and parses.
    pub fn watch(self: &Arc<Self>) {
        let keys = self.clone();
        tokio::spawn(async move {
            let stamp = |p: &Path| -> Option<(SystemTime, u64)> {
                let m = std::fs::metadata(p).ok()?;
                Some((m.modified().ok()?, m.len()))
            };
            let mut last = stamp(&keys.path);
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let now = stamp(&keys.path);
                if now == last {
                    continue;
                }
                last = now;
                match KeyRing::load(&keys.path) {
                    Ok(r) => {
                        tracing::info!("{}: {} keys in force", keys.path.display(), r.len());
                        keys.ring.store(Arc::new(r));
                    }
                    Err(e) => tracing::error!("{e}; the keys in force stay"),
                }
            }
        });
    }
}

/// Whether `req` may pass, with keys configured: `Ok(Some(caller))` with a key that
/// allows its route, `Ok(None)` for the open probes and the console, else the 401/403 to
/// answer.
pub(crate) fn admit(keys: &Keys, req: &Request) -> Result<Option<Caller>, ApiError> {
    let Some(need) = need(req.method(), req.uri().path()) else {
        return Ok(None);
    };
    let ring = keys.ring.load();
    let entry =
        match presented(req) {
            None => return Err(ApiError::new(
                Code::Unauthorized,
                "this server needs an API key: send Authorization: Bearer KEY (or api-key: KEY)",
            )),
            Some(k) => ring
                .find(k)
                .ok_or_else(|| ApiError::new(Code::Unauthorized, "unknown API key"))?,
        };
    if !allows(entry, &need) {
        let what = match (&need.collection, &entry.collections) {
            (None, Some(list)) => format!(
                "key {:?} is limited to collections {list:?}; this route spans every collection",
                entry.name
            ),
            (Some(c), Some(list)) if !list.iter().any(|x| x == c) => {
                format!("key {:?} may not use collection {c:?}", entry.name)
            }
            _ => format!(
                "key {:?} has scope {}; this route needs {}",
                entry.name,
                entry.scope.name(),
                need.scope.name()
            ),
        };
        return Err(ApiError::new(Code::Forbidden, what));
    }
    Ok(Some(Caller {
        key: entry.name.clone(),
        scope: entry.scope,
        collections: entry.collections.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(scope: Scope, collections: Option<&[&str]>) -> KeyEntry {
        KeyEntry {
            name: "k".into(),
            hash: [0; 32],
            scope,
            collections: collections.map(|c| c.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn routes_need_what_they_do() {
        let g = Method::GET;
        let p = Method::POST;
        let d = Method::DELETE;
        let need_of = |m: &Method, path: &str| need(m, path).map(|n| (n.scope, n.collection));
        let s = |x: &str| Some(x.to_string());
        assert_eq!(need_of(&g, "/health"), None);
        assert_eq!(need_of(&g, "/ready"), None);
        for open in ["/console", "/console/console.js", "/console/console.css"] {
            assert_eq!(need_of(&g, open), None, "{open}");
        }
        assert_eq!(
            need_of(&g, "/console/other.js"),
            Some((Scope::Read, s("console")))
        );
        assert_eq!(need_of(&p, "/console"), Some((Scope::Write, s("console"))));
        assert_eq!(need_of(&g, "/stats"), Some((Scope::Read, None)));
        assert_eq!(need_of(&p, "/search"), Some((Scope::Read, None)));
        assert_eq!(need_of(&p, "/admin/reload"), Some((Scope::Admin, None)));
        assert_eq!(need_of(&g, "/collections"), Some((Scope::Read, None)));
        assert_eq!(need_of(&g, "/collections/a"), Some((Scope::Read, s("a"))));
        for r in ["search", "count", "facet", "scroll"] {
            assert_eq!(
                need_of(&p, &format!("/collections/a/{r}")),
                Some((Scope::Read, s("a")))
            );
        }
        assert_eq!(
            need_of(&g, "/collections/a/docs/7"),
            Some((Scope::Read, s("a")))
        );
        assert_eq!(
            need_of(&d, "/collections/a/docs/7"),
            Some((Scope::Write, s("a")))
        );
        assert_eq!(
            need_of(&p, "/collections/a/docs"),
            Some((Scope::Write, s("a")))
        );
        assert_eq!(
            need_of(&p, "/collections/a/delete"),
            Some((Scope::Write, s("a")))
        );
        assert_eq!(
            need_of(&p, "/collections/a/snapshot"),
            Some((Scope::Admin, s("a")))
        );
        assert_eq!(need_of(&p, "/a/_search"), Some((Scope::Read, s("a"))));
        assert_eq!(need_of(&g, "/a/_count"), Some((Scope::Read, s("a"))));
        assert_eq!(need_of(&g, "/a/_doc/1"), Some((Scope::Read, s("a"))));
        // Writes the server may learn later are writes already.
        assert_eq!(
            need_of(&Method::PUT, "/a/_doc/1"),
            Some((Scope::Write, s("a")))
        );
        assert_eq!(need_of(&p, "/a/_bulk"), Some((Scope::Write, s("a"))));
        assert_eq!(need_of(&p, "/_bulk"), Some((Scope::Write, None)));
        // Deleting a collection takes its files: admin.
        assert_eq!(need_of(&d, "/collections/a"), Some((Scope::Admin, s("a"))));
        assert_eq!(
            need_of(&Method::PUT, "/collections/a/mapping"),
            Some((Scope::Write, s("a")))
        );
        assert_eq!(need_of(&p, "/collections"), Some((Scope::Write, None)));
    }

    #[test]
    fn scopes_and_collections_limit_keys() {
        let read_a = entry(Scope::Read, Some(&["a"]));
        let write = entry(Scope::Write, None);
        let admin = entry(Scope::Admin, None);
        let n = |scope, c: Option<&str>| Need {
            scope,
            collection: c.map(str::to_string),
        };
        assert!(allows(&read_a, &n(Scope::Read, Some("a"))));
        assert!(!allows(&read_a, &n(Scope::Read, Some("b"))));
        assert!(!allows(&read_a, &n(Scope::Read, None)));
        assert!(!allows(&read_a, &n(Scope::Write, Some("a"))));
        assert!(allows(&write, &n(Scope::Write, Some("b"))));
        assert!(allows(&write, &n(Scope::Read, None)));
        assert!(!allows(&write, &n(Scope::Admin, None)));
        assert!(allows(&admin, &n(Scope::Admin, Some("a"))));
    }

    #[test]
    fn key_files_parse_and_refuse_by_entry() {
        let (key, table) = new_key("ingest", Scope::Write, Some(&["docs".to_string()])).unwrap();
        assert!(key.starts_with("sdk_") && key.len() == 68, "{key}");
        let ring = KeyRing::parse(&table).unwrap();
        let e = ring.find(&key).expect("the new key is found");
        assert_eq!(e.name, "ingest");
        assert_eq!(e.scope, Scope::Write);
        assert_eq!(e.collections.as_deref(), Some(&["docs".to_string()][..]));
        assert!(ring.find("sdk_other").is_none());
        assert!(ring.find(&key[..key.len() - 1]).is_none());
        let bad = [
            (
                "[[key]]\nname = \"a\"\nhash = \"md5:00\"\nscope = \"read\"\n",
                "hash must be",
            ),
            (
                "[[key]]\nname = \"\"\nhash = \"x\"\nscope = \"read\"\n",
                "name is empty",
            ),
            (
                "[[key]]\nname = \"a\"\nhash = \"x\"\nscope = \"root\"\n",
                "unknown variant",
            ),
            (
                "[[key]]\nname = \"a\"\nhash = \"x\"\nscope = \"read\"\nrole = 1\n",
                "unknown field",
            ),
            ("key = 3\n", "invalid type"),
        ];
        for (text, needle) in bad {
            let e = KeyRing::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
        let twice = format!("{table}\n{}", table.replace("ingest", "other"));
        assert!(KeyRing::parse(&twice).unwrap_err().contains("listed twice"));
        let dup = format!(
            "{table}\n{}",
            new_key("ingest", Scope::Read, None).unwrap().1
        );
        assert!(KeyRing::parse(&dup)
            .unwrap_err()
            .contains("two keys are named"));
        assert_eq!(
            hash_of("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

/// Whether the caller may see the server's file paths: every caller of a server without
/// keys (it trusts whoever reaches it), an admin key's caller with keys.
pub(crate) fn sees_paths(keys: bool, caller: Option<&Caller>) -> bool {
    !keys || caller.is_some_and(|c| c.scope == Scope::Admin)
}

/// Strip the directories from the file paths in `v` (the values of keys such as `path`,
/// `dir`, `*_path`, and of messages such as `reason`), for callers that may not see them:
/// `/srv/data/docs` becomes `docs`.
pub(crate) fn redact_paths(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                let pathy = matches!(
                    k.as_str(),
                    "path" | "dir" | "root" | "reason" | "message" | "error" | "file"
                ) || k.ends_with("_path")
                    || k.ends_with("_dir");
                match x {
                    serde_json::Value::String(s) if pathy => *s = redact_text(s),
                    _ => redact_paths(x),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(redact_paths),
        _ => {}
    }
}

/// `text` with each absolute path (a word starting with `/` that has another `/`)
/// replaced by its last component.
pub(crate) fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('/') {
        let at_word = i == 0
            || rest[..i].chars().next_back().is_some_and(|c| {
                c.is_whitespace() || matches!(c, '"' | '\'' | '(' | '=' | ':' | '[')
            });
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')' | ',' | ';' | ']'))
            .unwrap_or(tail.len());
        let word = &tail[..end];
        if at_word && word[1..].contains('/') {
            let trimmed = word.trim_end_matches(['/', '.', ':']);
            let last = trimmed.rsplit('/').next().unwrap_or("");
            out.push_str(last);
            out.push_str(&word[trimmed.len()..]);
        } else {
            out.push_str(word);
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod redact_tests {
    use super::*;

    #[test]
    fn paths_lose_their_directories() {
        assert_eq!(redact_text("/srv/data/docs"), "docs");
        assert_eq!(
            redact_text("cannot open /srv/data/docs/seg-1: no such file"),
            "cannot open seg-1: no such file"
        );
        assert_eq!(redact_text("\"/a/b/c.json\" bad"), "\"c.json\" bad");
        assert_eq!(
            redact_text("at /srv/x/ for 3/4 and /top"),
            "at x/ for 3/4 and /top"
        );
        assert_eq!(redact_text("no slashes"), "no slashes");
        let mut v = serde_json::json!({"docs": {"path": "/srv/data/docs", "n": 3,
            "segments": [{"dir": "/srv/data/docs/s1"}], "route": "/collections/{name}/search"}});
        redact_paths(&mut v);
        assert_eq!(v["docs"]["path"], "docs");
        assert_eq!(v["docs"]["segments"][0]["dir"], "s1");
        assert_eq!(v["docs"]["route"], "/collections/{name}/search");
        assert!(sees_paths(false, None));
        assert!(!sees_paths(true, None));
        let reader = Caller {
            key: "r".into(),
            scope: Scope::Read,
            collections: None,
        };
        assert!(!sees_paths(true, Some(&reader)));
    }
}
