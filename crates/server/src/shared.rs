//! The shared cache tier (`serve --cache-redis redis://HOST:PORT`): whole JSON replies of
//! read requests kept in Redis, shared by every searchd process given the same URL, behind
//! the in-process [`ResponseCache`](crate::cache::ResponseCache) (`--cache-bytes`) or alone.
//! Replies it served carry `x-searchd-cache: shared-hit`.
//!
//! ## Keys
//!
//! - `searchd:v1:gen:{collection}`: the collection's **generation**, a random 64-bit token
//!   (decimal). Every write through any front door (upsert, delete, delete by filter) and
//!   every reload replaces it with a fresh token *after* the change is applied and *before*
//!   the reply. A reader that finds no token sets one (`SET NX`, then `GET`: whichever
//!   process set it first wins).
//! - `searchd:v1:e:{collection}:{sha256}`: one reply, SET with `EX --cache-ttl-s`. The hash
//!   covers the backend's [`shared_key`](crate::backend::SearchBackend::shared_key) (what
//!   names the data across processes: a local collection's canonical directory and the
//!   sequence number of its view, a Qdrant URL and collection) and the in-process key
//!   (route, query string, canonical body). The value is the 8-byte *effective generation*
//!   it was computed under, then the reply. Replies over [`MAX_ENTRY_BYTES`] are not sent.
//! - The effective generation is `sha256(redis run_id, token)`: a restarted Redis (empty,
//!   restored from a snapshot, or a replica promoted in its place) has another `run_id`, so
//!   nothing stored before the restart (in Redis or in any process's in-process tier) is
//!   ever served after it.
//!
//! ## A read
//!
//! One round trip: `MGET gen entry`. The entry is served (`shared-hit`) only if it carries
//! the current effective generation; the in-process tier is looked up first, with the
//! effective generation in its key, so both tiers move together. A 200 miss is stored in
//! the in-process tier at once and sent to Redis by a spawned task (at most
//! [`MAX_PENDING_SETS`] at a time; past it the store is dropped and counted): the request
//! never waits for a SET.
//!
//! ## Why a reply acknowledged elsewhere is never served stale
//!
//! Front door A applies a write, replaces the token (g -> g'), then replies. A read on B
//! that starts after that reply fetches g' (Redis is one server: the SET happened before
//! the MGET), so it can only match entries stored under g', and an entry stored under g'
//! was computed by a read that had fetched g' first, so after the write was applied. In the
//! in-process tiers the key carries the effective generation too, so the same holds. A read
//! concurrent with the write may see either state, as without a cache.
//!
//! ## Failing open
//!
//! Every Redis call runs under [`TIMEOUT`]. Any error or timeout *opens the breaker*: the
//! connection is dropped and for [`BREAKER`] no request talks to Redis; then one spawned
//! probe reconnects (reads `run_id`, sends the invalidations that could not be sent, then
//! closes the breaker). While it is open **no tier is used** for reads (they are computed,
//! `x-searchd-cache: miss`): without the current generation this process cannot tell
//! whether another front door wrote. Nothing waits on Redis longer than [`TIMEOUT`] and no
//! request fails because of it. A write whose token could not be replaced still succeeds
//! (fail open); the collection is remembered and its token replaced by the probe before
//! this process uses the tier again. The one window left: while only *this* process cannot
//! reach Redis (a partition, not an outage: the others still can), the others may serve
//! replies from before this process's writes until its probe gets through, or the TTL ends.
//! When Redis is down for everyone, nobody serves from a cache, and a restart changes the
//! `run_id`. Counted in `/stats` `cache.shared` and `/metrics` `searchd_cache_shared_*`.
//!
//! Writes acknowledged without `wait` replace the token at once, before they are visible: a
//! remote backend's reply computed in between may be kept under the new token until the TTL
//! (a local collection's key has its view's sequence number, so it is exact).
//! A single Redis server (or a primary with replicas); not Redis Cluster (one key space).

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::error::ServerError;

/// Longest wait for any Redis call (connect included). Past it the call counts as failed.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(50);
/// Longest wait for a (re)connection by the probe (not on any request's path).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long the breaker stays open after a failure before a probe tries again.
pub(crate) const BREAKER: Duration = Duration::from_secs(1);
/// Largest reply sent to Redis.
pub(crate) const MAX_ENTRY_BYTES: usize = 1 << 20;
/// Most SETs in flight; past it a store is dropped (and counted).
pub(crate) const MAX_PENDING_SETS: usize = 256;
/// Prefix of every key.
const PREFIX: &str = "searchd:v1:";

/// A connection and the `run_id` of the server it reaches.
struct Live {
    conn: redis::aio::MultiplexedConnection,
    run_id: String,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    /// Reads that used no tier: the breaker was open (or the collection had no token yet).
    bypassed: AtomicU64,
    stores: AtomicU64,
    stores_dropped: AtomicU64,
    too_large: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
    breaker_trips: AtomicU64,
    /// Microseconds the breaker was open, counted when it closes.
    open_us: AtomicU64,
    reconnects: AtomicU64,
    invalidations: AtomicU64,
    invalidation_failures: AtomicU64,
}

/// The shared tier of one process.
pub(crate) struct SharedTier {
    client: redis::Client,
    /// `HOST:PORT/DB` (never the password), for logs and `/stats`.
    shown: String,
    ttl: Duration,
    live: ArcSwapOption<Live>,
    /// Since when the breaker is open (`None`: closed).
    open_since: parking_lot::Mutex<Option<Instant>>,
    /// When the next probe may start.
    probe_after: parking_lot::Mutex<Instant>,
    probing: AtomicBool,
    /// Collections whose token could not be replaced after a write.
    pending: parking_lot::Mutex<HashSet<String>>,
    pending_sets: AtomicUsize,
    counters: Counters,
    /// This tier (spawned tasks take an owned reference).
    weak: std::sync::Weak<SharedTier>,
}

/// What a read learnt from Redis.
pub(crate) enum Lookup {
    /// No tier may be used (breaker open, or no token yet).
    Bypass,
    /// The effective generation, the entry's key, and the entry when it is current.
    Found {
        generation: u64,
        key: String,
        entry: Option<Bytes>,
    },
}

/// Check a `--cache-redis` URL (start-up refuses a malformed one).
pub(crate) fn check_url(url: &str) -> Result<(), ServerError> {
    client(url).map(drop)
}

fn client(url: &str) -> Result<redis::Client, ServerError> {
    if !(url.starts_with("redis://") || url.starts_with("redis+unix://")) {
        return Err(ServerError::Config(
            "--cache-redis must be a redis://HOST:PORT[/DB] URL (rediss:// TLS is not built in)"
                .into(),
        ));
    }
    redis::Client::open(url).map_err(|e| {
        ServerError::Config(format!(
            "--cache-redis is not a usable Redis URL ({e}); expected redis://[:PASSWORD@]HOST:PORT[/DB]"
        ))
    })
}

impl SharedTier {
    /// The tier for `url` (checked), connecting in the background: an unreachable Redis
    /// is a warning, not an error (the tier starts with its breaker open).
    pub(crate) fn start(url: &str, ttl: Duration) -> Result<Arc<SharedTier>, ServerError> {
        let client = client(url)?;
        let info = client.get_connection_info();
        let shown = format!("{}/{}", info.addr(), info.redis_settings().db());
        let now = Instant::now();
        let tier = Arc::new_cyclic(|weak| SharedTier {
            client,
            shown,
            ttl,
            live: ArcSwapOption::empty(),
            open_since: parking_lot::Mutex::new(Some(now)),
            probe_after: parking_lot::Mutex::new(now),
            probing: AtomicBool::new(false),
            pending: parking_lot::Mutex::new(HashSet::new()),
            pending_sets: AtomicUsize::new(0),
            counters: Counters::default(),
            weak: weak.clone(),
        });
        tier.maybe_probe();
        Ok(tier)
    }

    /// This tier as an owned `Arc`.
    fn me(&self) -> Option<Arc<SharedTier>> {
        self.weak.upgrade()
    }

    /// The live connection, or `None` (breaker open: a probe is started when due).
    fn conn(&self) -> Option<Arc<Live>> {
        let l = self.live.load_full();
        if l.is_none() {
            self.maybe_probe();
        }
        l
    }

    /// A Redis call failed: drop the connection, open the breaker.
    fn trip(&self, e: &str, timed_out: bool) {
        if timed_out {
            self.counters.timeouts.fetch_add(1, Relaxed);
        } else {
            self.counters.errors.fetch_add(1, Relaxed);
        }
        if self.live.swap(None).is_some() {
            self.counters.breaker_trips.fetch_add(1, Relaxed);
            let now = Instant::now();
            *self.open_since.lock() = Some(now);
            *self.probe_after.lock() = now + BREAKER;
            self.probe_later();
            tracing::warn!(redis = %self.shown, error = %e, "the shared cache tier is off (reads go uncached) until Redis answers again; retried every {} ms", BREAKER.as_millis());
        }
    }

    /// Start a probe if none runs and the breaker's time is up.
    fn maybe_probe(&self) {
        if Instant::now() < *self.probe_after.lock() || self.probing.swap(true, Relaxed) {
            return;
        }
        let Some(tier) = self.me() else {
            self.probing.store(false, Relaxed);
            return;
        };
        tokio::spawn(async move {
            let r = tier.connect().await;
            match r {
                Ok(live) => {
                    // The writes this process could not announce: announce them before
                    // anything is served from a tier again.
                    let names: Vec<String> = tier.pending.lock().iter().cloned().collect();
                    let mut ok = true;
                    for n in &names {
                        let mut c = live.conn.clone();
                        match tokio::time::timeout(TIMEOUT, set_token(&mut c, n)).await {
                            Ok(Ok(())) => {
                                tier.pending.lock().remove(n);
                                tier.counters.invalidations.fetch_add(1, Relaxed);
                            }
                            _ => {
                                ok = false;
                                break;
                            }
                        }
                    }
                    if ok {
                        if let Some(since) = tier.open_since.lock().take() {
                            tier.counters
                                .open_us
                                .fetch_add(since.elapsed().as_micros() as u64, Relaxed);
                        }
                        tier.counters.reconnects.fetch_add(1, Relaxed);
                        tracing::info!(redis = %tier.shown, run_id = %live.run_id, "the shared cache tier is on");
                        tier.live.store(Some(Arc::new(live)));
                    } else {
                        tier.counters.errors.fetch_add(1, Relaxed);
                        *tier.probe_after.lock() = Instant::now() + BREAKER;
                    }
                }
                Err(e) => {
                    if tier.counters.reconnects.load(Relaxed) == 0
                        && tier.counters.errors.load(Relaxed) == 0
                    {
                        tracing::warn!(redis = %tier.shown, error = %e, "cannot reach Redis for the shared cache tier; serving without it (reads uncached) until it answers, retried every {} ms", BREAKER.as_millis());
                    }
                    tier.counters.errors.fetch_add(1, Relaxed);
                    *tier.probe_after.lock() = Instant::now() + BREAKER;
                }
            }
            tier.probing.store(false, Relaxed);
            if tier.live.load().is_none() {
                tier.probe_later();
            }
        });
    }

    /// Probe again once the breaker's time is up, reads or not (so a process that only
    /// serves `/stats` or writes learns that Redis is back, and sends its pending
    /// invalidations). Holds no reference to the tier while it sleeps.
    fn probe_later(&self) {
        let weak = self.weak.clone();
        tokio::spawn(async move {
            tokio::time::sleep(BREAKER).await;
            if let Some(t) = weak.upgrade() {
                t.maybe_probe();
            }
        });
    }

    /// Connect and read the server's `run_id`.
    async fn connect(&self) -> Result<Live, String> {
        let cfg = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(CONNECT_TIMEOUT));
        let mut conn = tokio::time::timeout(
            CONNECT_TIMEOUT,
            self.client
                .get_multiplexed_async_connection_with_config(&cfg),
        )
        .await
        .map_err(|_| "connection timed out".to_string())?
        .map_err(|e| e.to_string())?;
        let info: String = tokio::time::timeout(
            CONNECT_TIMEOUT,
            redis::cmd("INFO").arg("server").query_async(&mut conn),
        )
        .await
        .map_err(|_| "INFO timed out".to_string())?
        .map_err(|e| e.to_string())?;
        let run_id = info
            .lines()
            .find_map(|l| l.strip_prefix("run_id:"))
            .map(|s| s.trim().to_string())
            .ok_or_else(|| "INFO server has no run_id".to_string())?;
        Ok(Live { conn, run_id })
    }

    /// Look a request up: `identity` names the data (the backend's shared key), `request`
    /// the request (the in-process key, generation left out).
    pub(crate) async fn lookup(&self, collection: &str, identity: &str, request: &[u8]) -> Lookup {
        let Some(live) = self.conn() else {
            self.counters.bypassed.fetch_add(1, Relaxed);
            return Lookup::Bypass;
        };
        let key = entry_key(collection, identity, request);
        let token_key = gen_key(collection);
        let mut c = live.conn.clone();
        let got = tokio::time::timeout(
            TIMEOUT,
            redis::cmd("MGET")
                .arg(&token_key)
                .arg(&key)
                .query_async::<Vec<Option<Vec<u8>>>>(&mut c),
        )
        .await;
        let (token, entry) = match got {
            Ok(Ok(mut v)) if v.len() == 2 => {
                let e = v.pop().flatten();
                (v.pop().flatten(), e)
            }
            Ok(Ok(_)) => {
                self.trip("MGET answered an unexpected shape", false);
                self.counters.bypassed.fetch_add(1, Relaxed);
                return Lookup::Bypass;
            }
            Ok(Err(e)) => {
                self.trip(&e.to_string(), false);
                self.counters.bypassed.fetch_add(1, Relaxed);
                return Lookup::Bypass;
            }
            Err(_) => {
                self.trip("MGET timed out", true);
                self.counters.bypassed.fetch_add(1, Relaxed);
                return Lookup::Bypass;
            }
        };
        let token = match token {
            Some(t) => t,
            None => match self.first_token(&live, &token_key).await {
                Some(t) => t,
                None => {
                    self.counters.bypassed.fetch_add(1, Relaxed);
                    return Lookup::Bypass;
                }
            },
        };
        let generation = effective(&live.run_id, &token);
        let entry = entry.and_then(|v| {
            (v.len() >= 8 && v[..8] == generation.to_le_bytes()).then(|| Bytes::from(v).slice(8..))
        });
        Lookup::Found {
            generation,
            key,
            entry,
        }
    }

    /// The collection had no token (a new or restarted Redis, or the key was evicted): set
    /// one unless another process just did, and return the one that holds (two more round
    /// trips, once per collection and Redis lifetime).
    async fn first_token(&self, live: &Live, key: &str) -> Option<Vec<u8>> {
        let mine = fresh_token();
        let mut c = live.conn.clone();
        let set = tokio::time::timeout(
            TIMEOUT,
            redis::cmd("SET")
                .arg(key)
                .arg(&mine)
                .arg("NX")
                .query_async::<Option<String>>(&mut c),
        )
        .await;
        match set {
            Ok(Ok(Some(_))) => return Some(mine.into_bytes()),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                self.trip(&e.to_string(), false);
                return None;
            }
            Err(_) => {
                self.trip("SET NX of a generation timed out", true);
                return None;
            }
        }
        match tokio::time::timeout(
            TIMEOUT,
            redis::cmd("GET")
                .arg(key)
                .query_async::<Option<Vec<u8>>>(&mut c),
        )
        .await
        {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                self.trip(&e.to_string(), false);
                None
            }
            Err(_) => {
                self.trip("GET of a generation timed out", true);
                None
            }
        }
    }

    /// Count the outcome of a lookup whose entry was consulted (the in-process tier missed).
    pub(crate) fn count(&self, hit: bool) {
        if hit {
            self.counters.hits.fetch_add(1, Relaxed);
        } else {
            self.counters.misses.fetch_add(1, Relaxed);
        }
    }

    /// Send a computed reply to Redis (fire and forget).
    pub(crate) fn store(&self, key: String, generation: u64, reply: &[u8]) {
        if reply.len() > MAX_ENTRY_BYTES {
            self.counters.too_large.fetch_add(1, Relaxed);
            return;
        }
        let Some(live) = self.live.load_full() else {
            return;
        };
        if self.pending_sets.fetch_add(1, Relaxed) >= MAX_PENDING_SETS {
            self.pending_sets.fetch_sub(1, Relaxed);
            self.counters.stores_dropped.fetch_add(1, Relaxed);
            return;
        }
        let Some(me) = self.me() else {
            self.pending_sets.fetch_sub(1, Relaxed);
            return;
        };
        let mut value = Vec::with_capacity(8 + reply.len());
        value.extend_from_slice(&generation.to_le_bytes());
        value.extend_from_slice(reply);
        let ttl = self.ttl.as_secs().max(1);
        tokio::spawn(async move {
            let mut c = live.conn.clone();
            let r = tokio::time::timeout(
                TIMEOUT,
                redis::cmd("SET")
                    .arg(&key)
                    .arg(value)
                    .arg("EX")
                    .arg(ttl)
                    .query_async::<()>(&mut c),
            )
            .await;
            me.pending_sets.fetch_sub(1, Relaxed);
            match r {
                Ok(Ok(())) => {
                    me.counters.stores.fetch_add(1, Relaxed);
                }
                Ok(Err(e)) => me.trip(&e.to_string(), false),
                Err(_) => me.trip("SET timed out", true),
            }
        });
    }

    /// A write or reload changed `collection`: replace its token (before the reply). If
    /// Redis cannot be told, the write still succeeds; the collection is remembered and the
    /// probe tells Redis before this process uses the tier again.
    pub(crate) async fn invalidate(&self, collection: &str) {
        let Some(live) = self.conn() else {
            self.counters.invalidation_failures.fetch_add(1, Relaxed);
            self.pending.lock().insert(collection.to_string());
            return;
        };
        let mut c = live.conn.clone();
        match tokio::time::timeout(TIMEOUT, set_token(&mut c, collection)).await {
            Ok(Ok(())) => {
                self.counters.invalidations.fetch_add(1, Relaxed);
            }
            r => {
                self.counters.invalidation_failures.fetch_add(1, Relaxed);
                self.pending.lock().insert(collection.to_string());
                match r {
                    Ok(Err(e)) => self.trip(&e.to_string(), false),
                    _ => self.trip("SET of a generation timed out", true),
                }
            }
        }
    }

    /// `/stats` `cache.shared`.
    pub(crate) fn json(&self) -> serde_json::Value {
        let c = &self.counters;
        let (hits, misses) = (c.hits.load(Relaxed), c.misses.load(Relaxed));
        let open = self.open_since.lock().is_some();
        let open_seconds = self.open_seconds();
        serde_json::json!({
            "enabled": true,
            "redis": self.shown,
            "connected": self.live.load().is_some(),
            "breaker_open": open,
            "breaker_open_s": open_seconds,
            "breaker_trips": c.breaker_trips.load(Relaxed),
            "hits": hits,
            "misses": misses,
            "hit_rate": if hits + misses > 0 { hits as f64 / (hits + misses) as f64 } else { 0.0 },
            "bypassed": c.bypassed.load(Relaxed),
            "stores": c.stores.load(Relaxed),
            "stores_dropped": c.stores_dropped.load(Relaxed),
            "too_large": c.too_large.load(Relaxed),
            "errors": c.errors.load(Relaxed),
            "timeouts": c.timeouts.load(Relaxed),
            "reconnects": c.reconnects.load(Relaxed),
            "invalidations": c.invalidations.load(Relaxed),
            "invalidation_failures": c.invalidation_failures.load(Relaxed),
            "pending_invalidations": self.pending.lock().len(),
            "ttl_s": self.ttl.as_secs_f64(),
            "timeout_ms": TIMEOUT.as_millis() as u64,
        })
    }

    /// Seconds the breaker has been open in all (the current opening included).
    fn open_seconds(&self) -> f64 {
        let closed = self.counters.open_us.load(Relaxed) as f64 / 1e6;
        closed
            + self
                .open_since
                .lock()
                .map_or(0.0, |s| s.elapsed().as_secs_f64())
    }

    /// `/metrics` figures.
    pub(crate) fn figures(&self) -> SharedFigures {
        let c = &self.counters;
        // Read apart: a guard taken inside the struct literal would live to its end, and
        // `open_seconds` takes the same (non-reentrant) lock.
        let open = self.open_since.lock().is_some();
        let open_seconds = self.open_seconds();
        SharedFigures {
            counters: [
                c.hits.load(Relaxed),
                c.misses.load(Relaxed),
                c.bypassed.load(Relaxed),
                c.stores.load(Relaxed),
                c.stores_dropped.load(Relaxed),
                c.errors.load(Relaxed),
                c.timeouts.load(Relaxed),
                c.breaker_trips.load(Relaxed),
                c.invalidations.load(Relaxed),
                c.invalidation_failures.load(Relaxed),
            ],
            open,
            open_seconds,
        }
    }
}

/// The tier's counters for `/metrics`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SharedFigures {
    /// In the order of [`SharedFigures::NAMES`].
    pub counters: [u64; 10],
    pub open: bool,
    pub open_seconds: f64,
}

impl SharedFigures {
    /// Names and help of [`SharedFigures::counters`].
    pub const NAMES: [(&'static str, &'static str); 10] = [
        ("searchd_cache_shared_hits", "Replies served from the shared (Redis) tier"),
        ("searchd_cache_shared_misses", "Reads the shared tier did not have (computed, then stored)"),
        ("searchd_cache_shared_bypassed", "Reads served uncached because Redis could not be asked (breaker open) or had no generation yet"),
        ("searchd_cache_shared_stores", "Replies stored in Redis"),
        ("searchd_cache_shared_stores_dropped", "Replies not stored because too many stores were in flight"),
        ("searchd_cache_shared_errors", "Redis calls that failed (connection refused, reset, error replies)"),
        ("searchd_cache_shared_timeouts", "Redis calls that took longer than the tier's timeout"),
        ("searchd_cache_shared_breaker_trips", "Times the tier turned itself off after a Redis failure"),
        ("searchd_cache_shared_invalidations", "Generation changes sent to Redis after writes and reloads"),
        ("searchd_cache_shared_invalidation_failures", "Writes and reloads whose generation change could not be sent at once (sent when Redis answers again)"),
    ];
}

async fn set_token(
    c: &mut redis::aio::MultiplexedConnection,
    collection: &str,
) -> redis::RedisResult<()> {
    redis::cmd("SET")
        .arg(gen_key(collection))
        .arg(fresh_token())
        .query_async::<()>(c)
        .await
}

fn gen_key(collection: &str) -> String {
    format!("{PREFIX}gen:{collection}")
}

/// `searchd:v1:e:{collection}:{hex sha256(identity, 0, request)}`.
fn entry_key(collection: &str, identity: &str, request: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(identity.as_bytes());
    h.update([0u8]);
    h.update(request);
    let d = h.finalize();
    let mut k = String::with_capacity(PREFIX.len() + collection.len() + 4 + 64);
    k.push_str(PREFIX);
    k.push_str("e:");
    k.push_str(collection);
    k.push(':');
    for b in d {
        k.push_str(&format!("{b:02x}"));
    }
    k
}

/// The generation replies are stored under: the token and the server's `run_id`.
fn effective(run_id: &str, token: &[u8]) -> u64 {
    let mut h = Sha256::new();
    h.update(run_id.as_bytes());
    h.update([0u8]);
    h.update(token);
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().unwrap_or([0; 8])) | 1
}

/// A token no process has used: a randomly keyed hash of the time, a counter and the pid.
fn fresh_token() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(N.fetch_add(1, Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish().to_string()
}
