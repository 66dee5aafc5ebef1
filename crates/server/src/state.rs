//! Shared state of one server: the served collections (slots), settings, admission,
//! pools, embedder, reranker, stats, limits and the response cache.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use searchd_engine::LoadOptions;
use searchd_vecio::Vectors;

use crate::backend::SearchBackend;
use crate::embedq::Batcher;
use crate::error::{ApiError, Code};
use crate::pool::{Admission, Pool};
use crate::rerank::Reranker;
use crate::stats::{IndexFigures, Stats};

/// When the request's headers had been read (its deadline counts from here).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival(pub Instant);

/// Settings the handlers need.
pub(crate) struct Settings {
    pub ef: usize,
    pub oversample: Option<f32>,
    pub nprobe: Option<usize>,
    pub timeout: Duration,
    pub body_limit: usize,
    pub read_timeout: Duration,
    pub admin_token: Option<String>,
    pub reload_root: Option<PathBuf>,
    pub load: LoadOptions,
    /// Pools of the collections with a budget of their own (by name; see
    /// [`crate::open::load_options`]).
    pub collection_pools: std::collections::BTreeMap<String, searchd_engine::MemoryPool>,
    pub max_inflight: usize,
    pub queue: usize,
    pub max_queue_wait: Option<std::time::Duration>,
    pub threads: usize,
    pub write_body_limit: usize,
    /// Most buckets of one request's aggregations and facets.
    pub max_buckets: usize,
    /// Extra `Host` names served without API keys (`--allow-host`).
    pub allow_host: Vec<String>,
    /// Largest reply body (`--max-reply-bytes`).
    pub max_reply_bytes: usize,
    /// CORS origins (`--cors-origin`).
    pub cors_origin: Vec<String>,
    /// Where collections created over HTTP go (`--data-dir`); `None`: creating is refused.
    pub data_dir: Option<PathBuf>,
    /// How collections opened by `/admin/reload` take writes (as at start-up).
    pub live: searchd_collection::live::LiveConfig,
}

/// One served collection: its name and its backend, swapped whole on reload.
pub(crate) struct Slot {
    pub name: String,
    pub backend: ArcSwapOption<Box<dyn SearchBackend>>,
    /// Bumped by every swap of the backend (and every write): part of each cache key, so a
    /// cached reply can never outlive the data it was computed from.
    pub generation: std::sync::atomic::AtomicU64,
    /// Why the collection could not be opened at start (a damaged file, a gap in its log):
    /// it answers 503 naming the reason while the other collections serve.
    pub failed: ArcSwapOption<String>,
}

/// A generation no slot of this process has had: every slot starts from one and every
/// reload takes a new one, so a collection deleted and created again under its name can
/// never meet the old one's cached replies.
pub(crate) fn fresh_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Slot {
    /// A slot not open yet.
    pub fn new(name: String) -> Slot {
        Slot {
            name,
            backend: ArcSwapOption::empty(),
            generation: std::sync::atomic::AtomicU64::new(fresh_generation()),
            failed: ArcSwapOption::empty(),
        }
    }

    /// A new cache generation: replies cached before can no longer be served.
    pub fn bump(&self) {
        self.generation
            .store(fresh_generation(), std::sync::atomic::Ordering::Release);
    }

    /// The slot's backend, or 503: still loading, or failed to open (with the reason).
    pub fn backend_or_503(&self) -> Result<Arc<Box<dyn SearchBackend>>, ApiError> {
        if let Some(b) = self.backend.load_full() {
            return Ok(b);
        }
        Err(match self.failed.load_full() {
            // Paths stay out of replies to any caller (an admin reads them in /ready and
            // /stats).
            Some(why) => ApiError::new(
                Code::NotReady,
                format!(
                    "collection {:?} failed to open: {} (GET /ready has the details)",
                    self.name,
                    crate::auth::redact_text(&why)
                ),
            ),
            None => ApiError::new(
                Code::NotReady,
                "the collection is still loading; retry shortly",
            ),
        })
    }
}

/// What `/ready` says: `None` when every collection is open, else why not (collections
/// that failed to open are named with their reasons).
pub(crate) fn not_ready(app: &App) -> Option<String> {
    let slots = app.slots();
    let failed: Vec<String> = slots
        .iter()
        .filter_map(|s| s.failed.load_full().map(|w| format!("{}: {w}", s.name)))
        .collect();
    if !failed.is_empty() {
        return Some(format!(
            "{} failed to open (the others serve): {}",
            if failed.len() == 1 {
                "a collection"
            } else {
                "collections"
            },
            failed.join("; ")
        ));
    }
    if slots.iter().all(|s| s.backend.load().is_some()) {
        None
    } else {
        Some("the index is still loading".into())
    }
}

/// The one reload (or collection create or delete, [`crate::manage`]) that may run at a
/// time: taken before the open, released when it has finished (on its blocking thread),
/// whether or not its client is still there.
pub(crate) struct ReloadTurn(Arc<crate::limits::Limits>);

impl ReloadTurn {
    pub(crate) fn take(limits: &Arc<crate::limits::Limits>) -> Option<ReloadTurn> {
        limits
            .reload_busy
            .compare_exchange(
                false,
                true,
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Relaxed,
            )
            .is_ok()
            .then(|| ReloadTurn(limits.clone()))
    }
}

impl Drop for ReloadTurn {
    fn drop(&mut self) {
        self.0
            .reload_busy
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Shared state of one server.
pub(crate) struct App {
    /// `https` with `--tls-cert`, else `http` (for messages).
    pub scheme: &'static str,
    /// The audit log (`serve --audit-log`); `None` when off.
    pub audit: Option<Arc<crate::audit::Audit>>,
    /// The API keys (`serve --api-keys`); `None`: no keys, every route open as before.
    pub keys: Option<Arc<crate::auth::Keys>>,
    /// Served collections; the first is the default behind the v1 routes. Swapped whole
    /// when a collection is created or deleted over HTTP ([`crate::manage`]); a request
    /// keeps the slot it looked up.
    pub slots: ArcSwap<Vec<Arc<Slot>>>,
    pub queries: ArcSwapOption<Vectors>,
    /// Where the query matrix came from, for messages.
    pub queries_path: Option<PathBuf>,
    pub cfg: Settings,
    pub admission: Admission,
    /// Permits for rendering large replies (and parsing large bodies) off the I/O threads
    /// ([`crate::render`]).
    pub renders: crate::render::Renders,
    pub pool: Arc<Pool>,
    pub embedder: Option<Batcher>,
    pub reranker: Option<Reranker>,
    pub stats: Arc<Stats>,
    /// Byte budget, connection cap, shutdown of uploads, the one-reload-at-a-time flag.
    pub limits: Arc<crate::limits::Limits>,
    /// The response cache (`serve --cache-bytes`); `None` when off.
    pub cache: Option<crate::cache::ResponseCache>,
    /// The shared cache tier (`serve --cache-redis`); `None` when off.
    pub shared: Option<Arc<crate::shared::SharedTier>>,
}

impl App {
    /// A write or reload changed `slot`'s data (called after the change is applied, before
    /// the reply): its cache generation moves on ([`Slot::bump`]) and the shared cache tier,
    /// when there is one, gets a new generation for it too.
    pub(crate) async fn changed(&self, slot: &Slot) {
        slot.bump();
        if let Some(t) = &self.shared {
            t.invalidate(&slot.name).await;
        }
    }

    pub fn inflight(&self) -> usize {
        self.admission.inflight()
    }

    /// The served collections now.
    pub fn slots(&self) -> Arc<Vec<Arc<Slot>>> {
        self.slots.load_full()
    }

    pub fn slot(&self, name: &str) -> Result<Arc<Slot>, ApiError> {
        let slots = self.slots();
        slots
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .ok_or_else(|| {
                ApiError::new(
                    Code::NotFound,
                    format!(
                        "no collection named {name:?} (served: {})",
                        slots
                            .iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    }

    pub(crate) fn figures(&self) -> IndexFigures {
        let memory = self.cfg.load.pool.as_ref().map(|p| p.stats());
        let collection_pools = self
            .cfg
            .collection_pools
            .iter()
            .map(|(name, p)| (name.clone(), p.stats()))
            .collect();
        match self.slots().first().and_then(|s| s.backend.load_full()) {
            Some(b) => {
                let (n, dim, bytes) = b.figures();
                IndexFigures {
                    loaded: true,
                    n,
                    dim: dim as u64,
                    bytes,
                    memory,
                    collection_pools,
                }
            }
            None => IndexFigures {
                memory,
                collection_pools,
                ..IndexFigures::default()
            },
        }
    }
}
