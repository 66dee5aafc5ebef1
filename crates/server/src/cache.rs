//! The response cache: whole JSON replies of read requests, shared by all threads.
//!
//! Off by default (`serve --cache-bytes` turns it on). Why off: with rotating queries — the
//! lab's and most production traffic's shape — the hit rate is near zero, and a miss then
//! costs a canonicalisation of the body, a hash and an insert on top of the work, while the
//! bytes held are taken from the page cache the index lives in. It pays for repeated reads
//! (dashboards, facet panels, the first page of a popular filter); `bench/fields_reads.py`
//! measures both sides (docs/queries-and-filters.md "Response cache").
//!
//! - **Key**: collection name, the collection's *generation* (bumped by every reload and
//!   write, so a swapped or changed collection can never serve an older answer), the route,
//!   the query string, and the body in canonical form (parsed and re-serialised: object
//!   keys sorted, whitespace dropped), so `{"k":10,"text":"a"}` and `{ "text": "a", "k": 10 }`
//!   share an entry.
//! - **Bounded** by bytes (key + reply + a fixed overhead per entry), evicted by
//!   CLOCK-PRO-style hot/cold queues (quick_cache: sharded locks, no maintenance work on the
//!   request path), with a time to live checked on lookup. With moka (TinyLFU) instead, a
//!   cold-key mix at 8 clients ran 28% below the no-cache server in the same run; with
//!   quick_cache 13% (`bench/results/fields-reads.md`).
//! - Only `200` replies are kept. Replies served from the cache carry the header
//!   `x-searchd-cache: hit` (`miss` otherwise); their `took_us` is the original's.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

/// Bytes counted per entry besides its key and reply (the table's bookkeeping).
const ENTRY_OVERHEAD: usize = 96;

/// Counters of the cache, for `/stats` and `/metrics`.
#[derive(Debug, Default)]
pub struct CacheCounters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub inserts: AtomicU64,
    pub evictions: AtomicU64,
    /// Replies not cached because they were larger than an eighth of the capacity.
    pub too_large: AtomicU64,
}

#[derive(Clone)]
struct Entry {
    at: Instant,
    reply: Bytes,
}

#[derive(Clone)]
struct ByBytes;

impl quick_cache::Weighter<Bytes, Entry> for ByBytes {
    fn weight(&self, k: &Bytes, v: &Entry) -> u64 {
        (k.len() + v.reply.len() + ENTRY_OVERHEAD) as u64
    }
}

/// Counts evictions (not replacements, which quick_cache does not report).
#[derive(Clone)]
struct CountEvictions(Arc<CacheCounters>);

impl quick_cache::Lifecycle<Bytes, Entry> for CountEvictions {
    type RequestState = ();
    fn on_evict(&self, _state: &mut (), _key: Bytes, _val: Entry) {
        self.0.evictions.fetch_add(1, Relaxed);
    }
}

type Inner = quick_cache::sync::Cache<
    Bytes,
    Entry,
    ByBytes,
    quick_cache::DefaultHashBuilder,
    CountEvictions,
>;

/// The shared response cache.
pub struct ResponseCache {
    inner: Inner,
    counters: Arc<CacheCounters>,
    max_bytes: u64,
    ttl: Duration,
}

impl ResponseCache {
    /// A cache holding at most `max_bytes`, entries living at most `ttl`.
    pub fn new(max_bytes: u64, ttl: Duration) -> ResponseCache {
        let counters = Arc::new(CacheCounters::default());
        let inner = Inner::with(
            // An estimate for the table's first size: replies of ~1 KiB.
            (max_bytes / 1024).clamp(16, 1 << 20) as usize,
            max_bytes,
            ByBytes,
            quick_cache::DefaultHashBuilder::default(),
            CountEvictions(counters.clone()),
        );
        ResponseCache {
            inner,
            counters,
            max_bytes,
            ttl,
        }
    }

    /// The key of a request, or `None` when its body is not JSON (it gets its 400 uncached).
    pub fn key(
        collection: &str,
        generation: u64,
        route: &str,
        query: Option<&str>,
        body: &[u8],
    ) -> Option<Bytes> {
        let mut k = Vec::with_capacity(collection.len() + route.len() + body.len() + 32);
        k.extend_from_slice(collection.as_bytes());
        k.push(0);
        k.extend_from_slice(&generation.to_le_bytes());
        k.extend_from_slice(route.as_bytes());
        k.push(0);
        k.extend_from_slice(query.unwrap_or("").as_bytes());
        k.push(0);
        if !body.is_empty() {
            let v: serde_json::Value = serde_json::from_slice(body).ok()?;
            canonical(&v, &mut k);
        }
        Some(Bytes::from(k))
    }

    /// `key` (made by [`ResponseCache::key`] for `collection`) with another generation,
    /// changed in place (a key made by [`ResponseCache::key`] and not shared converts to a
    /// `Vec` without a copy).
    pub fn rekey(key: Bytes, collection: &str, generation: u64) -> Bytes {
        let mut k = Vec::from(key);
        let at = collection.len() + 1;
        if let Some(g) = k.get_mut(at..at + 8) {
            g.copy_from_slice(&generation.to_le_bytes());
        }
        Bytes::from(k)
    }

    pub fn get(&self, key: &Bytes) -> Option<Bytes> {
        let got = match self.inner.get(key) {
            Some(e) if e.at.elapsed() < self.ttl => Some(e.reply),
            Some(_) => {
                self.inner.remove(key);
                None
            }
            None => None,
        };
        match &got {
            Some(_) => self.counters.hits.fetch_add(1, Relaxed),
            None => self.counters.misses.fetch_add(1, Relaxed),
        };
        got
    }

    pub fn insert(&self, key: Bytes, reply: Bytes) {
        if (key.len() + reply.len()) as u64 > self.max_bytes / 8 {
            self.counters.too_large.fetch_add(1, Relaxed);
            return;
        }
        self.counters.inserts.fetch_add(1, Relaxed);
        self.inner.insert(
            key,
            Entry {
                at: Instant::now(),
                reply,
            },
        );
    }

    pub fn counters(&self) -> &CacheCounters {
        &self.counters
    }

    /// `/stats` `cache`.
    pub fn json(&self) -> serde_json::Value {
        let c = &self.counters;
        let (hits, misses) = (c.hits.load(Relaxed), c.misses.load(Relaxed));
        serde_json::json!({
            "enabled": true,
            "max_bytes": self.max_bytes,
            "ttl_s": self.ttl.as_secs_f64(),
            "bytes": self.inner.weight(),
            "entries": self.inner.len(),
            "hits": hits,
            "misses": misses,
            "hit_rate": if hits + misses > 0 { hits as f64 / (hits + misses) as f64 } else { 0.0 },
            "inserts": c.inserts.load(Relaxed),
            "evictions": c.evictions.load(Relaxed),
            "too_large": c.too_large.load(Relaxed),
        })
    }

    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        self.inner.weight()
    }
}

/// Canonical JSON: object keys sorted (byte order), no whitespace, numbers as serde_json
/// prints them.
fn canonical(v: &serde_json::Value, out: &mut Vec<u8>) {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = serde_json::to_writer(&mut *out, k);
                out.push(b':');
                canonical(&m[k], out);
            }
            out.push(b'}');
        }
        serde_json::Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(x, out);
            }
            out.push(b']');
        }
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_canonical_and_generation_bound() {
        let a = ResponseCache::key("c", 1, "search", None, br#"{"k":10,"text":"a b"}"#).unwrap();
        let b =
            ResponseCache::key("c", 1, "search", None, br#"{ "text": "a b", "k": 10 }"#).unwrap();
        assert_eq!(a, b);
        let g2 = ResponseCache::key("c", 2, "search", None, br#"{"k":10,"text":"a b"}"#).unwrap();
        assert_ne!(a, g2, "another generation is another key");
        assert_eq!(ResponseCache::rekey(a.clone(), "c", 2), g2);
        let q = ResponseCache::key(
            "c",
            1,
            "search",
            Some("nonce=1"),
            br#"{"k":10,"text":"a b"}"#,
        )
        .unwrap();
        assert_ne!(a, q, "the query string is part of the key");
        let other =
            ResponseCache::key("d", 1, "search", None, br#"{"k":10,"text":"a b"}"#).unwrap();
        assert_ne!(a, other);
        assert!(ResponseCache::key("c", 1, "search", None, b"{not json").is_none());
        let nested_a = ResponseCache::key(
            "c",
            1,
            "s",
            None,
            br#"{"f":{"b":[1,{"y":1,"x":2}],"a":true}}"#,
        );
        let nested_b = ResponseCache::key(
            "c",
            1,
            "s",
            None,
            br#"{"f":{"a":true,"b":[1,{"x":2,"y":1}]}}"#,
        );
        assert_eq!(nested_a, nested_b);
    }

    #[test]
    fn bounded_and_counted() {
        let c = ResponseCache::new(64 * 1024, Duration::from_secs(60));
        for i in 0..2000u32 {
            let k = Bytes::from(format!("key-{i}"));
            c.insert(k.clone(), Bytes::from(vec![b'x'; 200]));
            assert!(c.get(&k).is_some() || c.counters().evictions.load(Relaxed) > 0);
        }
        assert!(c.bytes() <= 64 * 1024, "holds {} bytes", c.bytes());
        assert!(c.counters().evictions.load(Relaxed) > 0);
        assert_eq!(c.counters().inserts.load(Relaxed), 2000);
        c.insert(Bytes::from_static(b"big"), Bytes::from(vec![0u8; 20_000]));
        assert_eq!(c.counters().too_large.load(Relaxed), 1);
    }

    #[test]
    fn entries_expire() {
        let c = ResponseCache::new(1 << 20, Duration::from_millis(50));
        let k = Bytes::from_static(b"k");
        c.insert(k.clone(), Bytes::from_static(b"v"));
        assert!(c.get(&k).is_some());
        std::thread::sleep(Duration::from_millis(120));
        assert!(c.get(&k).is_none());
    }
}
