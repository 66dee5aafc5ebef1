//! `POST /admin/reload`: open a collection again (or another directory) and swap it in.

use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::backend::SearchBackend;
use crate::error::{ApiError, Code};
use crate::local::LocalBackend;
use crate::state::{App, ReloadTurn, Slot};
use crate::wire::{authorize, json_error, json_response, read_body, v1_index_info};

/// The body of `POST /admin/reload`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReloadBody {
    /// An index directory or a collection directory.
    #[schema(value_type = String)]
    index: PathBuf,
    /// Which served collection to swap (default: the first).
    #[serde(default)]
    collection: Option<String>,
}

/// The canonical form of `requested` when it lies under the configured reload root.
/// A relative path is taken from the root (not the working directory). A path outside the
/// root is 403 whether or not it exists (its `..` are resolved lexically before anything
/// is looked up, and symlinks after), so the admin route cannot probe the machine's files;
/// a path inside the root that cannot be opened is 400.
fn allowed_reload_path(app: &App, requested: &std::path::Path) -> Result<PathBuf, ApiError> {
    let Some(root) = &app.cfg.reload_root else {
        return Ok(requested.to_path_buf());
    };
    let outside = || {
        ApiError::new(
            Code::Forbidden,
            format!(
                "{} is outside the reload root {} (serve --reload-root)",
                requested.display(),
                root.display()
            ),
        )
    };
    let mut lexical = PathBuf::new();
    for c in root.join(requested).components() {
        match c {
            std::path::Component::ParentDir => {
                lexical.pop();
            }
            std::path::Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    if !lexical.starts_with(root) {
        return Err(outside());
    }
    let canon = lexical
        .canonicalize()
        .map_err(|e| ApiError::invalid(format!("cannot open {}: {e}", lexical.display())))?;
    if !canon.starts_with(root) {
        return Err(outside());
    }
    Ok(canon)
}

/// Set when the reload's handler is dropped (its client went away) before it swapped.
struct Abandon(Arc<std::sync::atomic::AtomicBool>, bool);

impl Drop for Abandon {
    fn drop(&mut self) {
        if !self.1 {
            self.0.store(true, Relaxed);
        }
    }
}

pub(crate) async fn reload(State(app): State<Arc<App>>, req: Request) -> Response {
    match reload_inner(&app, req).await {
        Ok(body) => json_response(StatusCode::OK, body),
        Err(e) => e.into_response(),
    }
}

/// Whether two paths name the same directory (symlinks and `..` resolved).
fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// What a collection of `dim` dimensions embedded by `model` must match to replace
/// another: the query matrix and the server's model.
fn check_swap(
    app: &App,
    dim: usize,
    model: Option<&searchd_collection::ModelRecord>,
    shown: &str,
) -> Result<(), ApiError> {
    if let Some(q) = app.queries.load_full() {
        if q.dim() != dim {
            return Err(ApiError::invalid(format!(
                "{shown} has {dim} dimensions but the query matrix{} has {}; refusing to swap",
                app.queries_path
                    .as_ref()
                    .map(|p| format!(" {}", p.display()))
                    .unwrap_or_default(),
                q.dim()
            )));
        }
    }
    if let Some(batcher) = &app.embedder {
        crate::open::check_model(&batcher.record, model, std::path::Path::new(shown))
            .map_err(|e| ApiError::invalid(format!("{e}; refusing to swap")))?;
    }
    Ok(())
}

/// Open `dir` as start-up does ([`crate::open::open_path`]): a collection directory live, a bare
/// index directory fixed.
fn open_dir(
    app: &App,
    name: &str,
    dir: &std::path::Path,
    shown: &str,
) -> Result<Box<dyn SearchBackend>, ApiError> {
    let load = crate::open::load_options(&app.cfg.load, &app.cfg.collection_pools, name);
    crate::open::open_path(dir, &load, &app.cfg.live, &app.pool, None).map_err(|e| {
        let why = match e {
            crate::error::ServerError::Index(e) => e.to_string(),
            crate::error::ServerError::Collection(e) => e.to_string(),
            other => other.to_string(),
        };
        ApiError::invalid(format!(
            "cannot open {shown} as an index or collection: {why}"
        ))
    })
}

/// Whether no one holds the lock of the collection directory `dir` (`DIR/LOCK`).
fn lock_free(dir: &std::path::Path) -> bool {
    match std::fs::File::open(dir.join("LOCK")) {
        Ok(f) => f.try_lock().is_ok(),
        Err(_) => true,
    }
}

/// Close a backend that was swapped out (or opened and not swapped in) and, for a live
/// collection, wait until nothing holds it any more, so that its directory's lock is
/// released: a reload of that directory right after must be able to write it. Requests in
/// flight on it finish first, and so does a merge its optimizer had started (logged every
/// 10 s while it runs). Blocking.
fn retire_blocking(b: Arc<Box<dyn SearchBackend>>) {
    let writer = b.writer();
    b.close();
    drop(b);
    let Some(w) = writer else { return };
    let dir = w.dir().to_path_buf();
    let weak = Arc::downgrade(&w);
    drop(w);
    let t = Instant::now();
    let mut next_log = Duration::from_secs(10);
    while weak.strong_count() > 0 {
        if t.elapsed() >= next_log {
            tracing::info!(
                path = %dir.display(),
                waited_s = t.elapsed().as_secs(),
                "waiting for the closed collection to be let go (requests in flight, or a merge)"
            );
            next_log += Duration::from_secs(10);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Its last holder may still be dropping it (the lock goes with it): a moment more.
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until && !lock_free(&dir) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

async fn retire(b: Arc<Box<dyn SearchBackend>>) {
    let _ = tokio::task::spawn_blocking(move || retire_blocking(b)).await;
}

async fn reload_inner(app: &Arc<App>, req: Request) -> Result<Vec<u8>, ApiError> {
    authorize(app, &req)?;
    let body = read_body(app, req).await?;
    let b: ReloadBody = serde_json::from_slice(&body).map_err(|e| json_error(e, &body))?;
    let started = Instant::now();
    let dir = allowed_reload_path(app, &b.index)?;
    let slot = match &b.collection {
        Some(name) => app.slot(name)?,
        None => app.slots()[0].clone(),
    };
    // One reload opens an index at a time; searches go on meanwhile on the current one.
    let Some(turn) = ReloadTurn::take(&app.limits) else {
        return Err(ApiError::new(
            Code::Conflict,
            "another reload is opening an index; retry when it has finished",
        ));
    };
    let shown = b.index.display().to_string();
    let live_dir = searchd_collection::is_collection(&dir);
    if live_dir {
        // One writer per directory: not also another collection of this server.
        for other in app.slots().iter().filter(|o| !Arc::ptr_eq(o, &slot)) {
            let writer = other.backend.load_full().and_then(|b| b.writer());
            if writer.is_some_and(|w| same_dir(w.dir(), &dir)) {
                return Err(ApiError::new(
                    Code::Conflict,
                    format!(
                        "{shown} is served by collection {:?}, which takes its writes; a directory is served by one collection at a time (reload {:?} itself, or snapshot it and restore the snapshot into a new directory to serve a copy)",
                        other.name, other.name
                    ),
                ));
            }
        }
        // Checked on the manifest, before anything is closed or opened.
        if let Ok(m) = searchd_collection::Manifest::read(&dir) {
            check_swap(app, m.dim, m.model.as_ref(), &shown)?;
        }
    }
    let current = slot.backend.load_full().and_then(|b| b.writer());
    if live_dir && current.is_some_and(|w| same_dir(w.dir(), &dir)) {
        // The directory the slot writes: closed, then opened again with its log replayed.
        // Detached: a client going away must not leave the slot half way.
        let task = tokio::spawn(reopen(app.clone(), slot, dir, shown, turn, started));
        return task
            .await
            .map_err(|e| ApiError::new(Code::Internal, format!("the reload failed: {e}")))?;
    }
    // Another directory: opened beside the current one, which serves meanwhile. If this
    // handler is dropped (the client went away), the open still finishes on its thread (it
    // cannot be interrupted) but its result is closed there, never swapped.
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut abandon = Abandon(gone.clone(), false);
    let opener = app.clone();
    let what = shown.clone();
    let name = slot.name.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let opened = open_dir(&opener, &name, &dir, &what);
        if gone.load(Relaxed) {
            if let Ok(b) = opened {
                retire_blocking(Arc::new(b));
            }
            tracing::info!(path = %what, "reload cancelled: its client went away; nothing swapped");
            return None;
        }
        Some((opened, turn))
    })
    .await
    .map_err(|e| ApiError::new(Code::Internal, format!("the index loader failed: {e}")))?;
    abandon.1 = true;
    let Some((opened, turn)) = opened else {
        return Err(ApiError::new(Code::Internal, "the reload was cancelled"));
    };
    let backend = opened?;
    if let Err(e) = check_swap(app, backend.figures().1, backend.model().as_ref(), &shown) {
        retire(Arc::new(backend)).await;
        drop(turn);
        return Err(e);
    }
    // From the swap on, detached: the previous collection must be closed whatever the
    // client does.
    let task = tokio::spawn(swap_in(app.clone(), slot, backend, shown, turn, started));
    task.await
        .map_err(|e| ApiError::new(Code::Internal, format!("the reload failed: {e}")))
}

/// Swap `backend` into the slot; close the previous one (a live collection commits its
/// writes and lets go of its directory; in-flight requests finish on it first), then reply.
async fn swap_in(
    app: Arc<App>,
    slot: Arc<Slot>,
    backend: Box<dyn SearchBackend>,
    shown: String,
    turn: ReloadTurn,
    started: Instant,
) -> Vec<u8> {
    let info = backend.info();
    let previous = slot.backend.swap(Some(Arc::new(backend)));
    // A collection that had failed to open at start serves from now on.
    slot.failed.store(None);
    app.changed(&slot).await;
    app.stats.reloads.fetch_add(1, Relaxed);
    let previous_path = previous.as_ref().map(|p| p.info()["path"].clone());
    if let Some(p) = previous {
        retire(p).await;
    }
    drop(turn);
    let took_ms = crate::wire::ms(started.elapsed());
    tracing::info!(
        collection = %slot.name,
        path = %shown,
        docs = info["docs"].as_u64().unwrap_or(0),
        dim = info["dim"].as_u64().unwrap_or(0),
        took_ms,
        "reloaded"
    );
    let v = serde_json::json!({
        "collection": slot.name,
        "index": v1_index_info(&info),
        "previous": previous_path,
        "took_ms": took_ms,
    });
    serde_json::to_vec(&v).unwrap_or_default()
}

/// Reload of the directory the slot's live collection writes: close it (every
/// acknowledged write refreshed and committed, the optimizer stopped), serve its last view
/// read-only while it is let go (writes meanwhile: 503 with `Retry-After`), open the
/// directory again (the log after the commit replayed) and swap that in. If the directory
/// cannot be opened again, the last view stays, refusing writes with 409 until a reload
/// succeeds.
async fn reopen(
    app: Arc<App>,
    slot: Arc<Slot>,
    dir: PathBuf,
    shown: String,
    turn: ReloadTurn,
    started: Instant,
) -> Result<Vec<u8>, ApiError> {
    let Some(old) = slot.backend.load_full() else {
        return Err(ApiError::new(
            Code::Internal,
            "the collection is not loaded",
        ));
    };
    let Some(writer) = old.writer() else {
        return Err(ApiError::new(Code::Internal, "the collection is not live"));
    };
    let closing = old.clone();
    let _ = tokio::task::spawn_blocking(move || closing.close()).await;
    let view = writer.view();
    drop(writer);
    let paused = LocalBackend::paused(
        view.clone(),
        app.pool.clone(),
        format!(
            "collection {:?} is being reopened by /admin/reload; retry in a moment",
            slot.name
        ),
        true,
    );
    let previous = slot.backend.swap(Some(Arc::new(Box::new(paused))));
    slot.bump();
    drop(previous);
    retire(old).await;
    let opener = app.clone();
    let (d, what, name) = (dir.clone(), shown.clone(), slot.name.clone());
    let opened = tokio::task::spawn_blocking(move || open_dir(&opener, &name, &d, &what))
        .await
        .unwrap_or_else(|e| {
            Err(ApiError::new(
                Code::Internal,
                format!("the index loader failed: {e}"),
            ))
        });
    let checked =
        opened.and_then(
            |b| match check_swap(&app, b.figures().1, b.model().as_ref(), &shown) {
                Ok(()) => Ok(b),
                Err(e) => {
                    retire_blocking(Arc::new(b));
                    Err(e)
                }
            },
        );
    match checked {
        Ok(backend) => Ok(swap_in(app, slot, backend, shown, turn, started).await),
        Err(e) => {
            tracing::error!(collection = %slot.name, path = %shown, error = %e.message, "reload could not reopen the collection; it serves its last view and refuses writes");
            let failed = LocalBackend::paused(
                view,
                app.pool.clone(),
                format!(
                    "collection {:?} could not be reopened by /admin/reload ({}); it serves its last view read-only: fix the cause and reload it again, or restart",
                    slot.name, e.message
                ),
                false,
            );
            slot.backend.store(Some(Arc::new(Box::new(failed))));
            app.changed(&slot).await;
            drop(turn);
            Err(e)
        }
    }
}
