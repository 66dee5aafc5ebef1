//! Opening what a server serves: each configured source (a directory, an index or
//! collection in memory, another backend, a Qdrant collection) as a backend, the query
//! matrix, and the model check. Used at start-up and by `/admin/reload`.

use std::path::Path;
use std::sync::Arc;

use searchd_collection::{Collection, ModelRecord};
use searchd_vecio::Vectors;

use crate::backend::SearchBackend;
use crate::config::{IndexSource, QuerySource, ServerConfig};
use crate::error::ServerError;
use crate::local::LocalBackend;
use crate::pool;

/// Each collection's backend or why it failed to open, and the query matrix.
pub(crate) type Loaded = (
    Vec<Result<Box<dyn SearchBackend>, ServerError>>,
    Option<Arc<Vectors>>,
);

/// Check that a collection was embedded by the server's model (text queries would be
/// meaningless otherwise). Collections without a model record (vectors given) pass with a
/// warning: their text queries are embedded by a model that did not make their vectors.
pub(crate) fn check_model(
    server: &ModelRecord,
    coll: Option<&ModelRecord>,
    path: &Path,
) -> Result<(), String> {
    match coll {
        Some(m) if m.checksum != server.checksum || m.dim != server.dim => Err(format!(
            "{} was embedded with model {} (checksum {}, {} dimensions), but the server's --model is {} (checksum {}, {} dimensions)",
            path.display(),
            m.name,
            m.checksum,
            m.dim,
            server.name,
            server.checksum,
            server.dim
        )),
        Some(_) => Ok(()),
        None => {
            tracing::warn!(
                "{} records no model (its vectors were given at ingest, not embedded by searchd): text queries to it are embedded with --model {} and compared with vectors that model may not have made; send vector queries, or ingest the documents again with --model",
                path.display(),
                server.name
            );
            Ok(())
        }
    }
}

/// How to open the collection `name`: the server's options, with the collection's own pool
/// when it has a budget of its own (`--collection NAME=DIR:budget=BYTES`).
pub(crate) fn load_options(
    load: &searchd_engine::LoadOptions,
    pools: &std::collections::BTreeMap<String, searchd_engine::MemoryPool>,
    name: &str,
) -> searchd_engine::LoadOptions {
    match pools.get(name) {
        Some(own) => searchd_engine::LoadOptions {
            memory_budget: Some(own.budget()),
            pool: Some(own.clone()),
            ..load.clone()
        },
        None => load.clone(),
    }
}

pub(crate) fn open_source(
    src: &IndexSource,
    load: &searchd_engine::LoadOptions,
    config: &ServerConfig,
    pool: &Arc<pool::Pool>,
    model: Option<&ModelRecord>,
) -> Result<Box<dyn SearchBackend>, ServerError> {
    let backend: Box<dyn SearchBackend> = match src {
        IndexSource::Path(p) => open_path(p, load, &config.live, pool, model)?,
        IndexSource::Loaded(ix) => Box::new(LocalBackend::new(
            Arc::new(Collection::from_shared_index(ix.clone())),
            pool.clone(),
        )),
        IndexSource::Collection(c) => Box::new(LocalBackend::new(c.clone(), pool.clone())),
        IndexSource::Backend(b) => Box::new(b.clone()),
        #[cfg(feature = "qdrant")]
        IndexSource::Qdrant(t) => searchd_qdrant::open(t, model).map_err(|e| match e {
            searchd_qdrant::Error::Config(m) => ServerError::Config(m),
        })?,
        #[cfg(not(feature = "qdrant"))]
        IndexSource::Qdrant(_) => {
            return Err(ServerError::Config(
                "this searchd was built without the `qdrant` feature".into(),
            ))
        }
    };
    Ok(backend)
}

/// Open a directory as start-up and `/admin/reload` both do: a collection directory as a
/// live collection (its log replayed; writable unless `live.read_only` or another process
/// holds its lock), a bare index directory as a fixed one. A live directory is never served
/// as a static view of its last commit. With `model`, the collection must have been
/// embedded by it.
pub(crate) fn open_path(
    p: &Path,
    load: &searchd_engine::LoadOptions,
    live: &searchd_collection::live::LiveConfig,
    pool: &Arc<pool::Pool>,
    model: Option<&ModelRecord>,
) -> Result<Box<dyn SearchBackend>, ServerError> {
    if searchd_collection::is_collection(p) {
        let live =
            searchd_collection::live::LiveCollection::open(p, load, live.clone()).map_err(|e| {
                match e {
                    searchd_collection::Error::Engine(e) => ServerError::Index(e),
                    other => ServerError::Collection(other),
                }
            })?;
        if let Some(m) = model {
            if let Err(e) = check_model(m, live.view().model(), p) {
                // Closed, not only dropped: its optimizer threads would keep it alive.
                let _ = live.close();
                return Err(ServerError::Config(e));
            }
        }
        if let Some(r) = live.read_only_reason() {
            tracing::info!(path = %p.display(), "collection is read-only: {r}");
        }
        let rec = live.recovery();
        if rec.replayed > 0 || rec.cut.is_some() {
            tracing::info!(path = %p.display(), replayed = rec.replayed, cut = ?rec.cut, "write-ahead log applied");
        }
        Ok(Box::new(LocalBackend::live(live, pool.clone())))
    } else {
        let coll = Collection::open_any(p, load).map_err(|e| match e {
            searchd_collection::Error::Engine(e) => ServerError::Index(e),
            other => ServerError::Collection(other),
        })?;
        if let Some(m) = model {
            check_model(m, coll.model(), p).map_err(ServerError::Config)?;
        }
        Ok(Box::new(LocalBackend::new(Arc::new(coll), pool.clone())))
    }
}

pub(crate) fn load(
    config: &ServerConfig,
    pools: &std::collections::BTreeMap<String, searchd_engine::MemoryPool>,
    pool: Arc<pool::Pool>,
    model: Option<&ModelRecord>,
) -> Result<Loaded, ServerError> {
    let queries = match &config.queries {
        None => None,
        Some(QuerySource::Loaded(v)) => Some(v.clone()),
        Some(QuerySource::Path(p)) => Some(Arc::new(searchd_vecio::read_vectors(p)?)),
    };
    // One collection that cannot open (a damaged file, a gap in its log) is served as
    // failed while the others serve; the server stops only when none opens.
    let first = load_options(&config.load, pools, config.name.as_deref().unwrap_or(""));
    let mut backends = vec![open_source(&config.index, &first, config, &pool, model)];
    for (name, src) in &config.more {
        let load = load_options(&config.load, pools, name);
        backends.push(open_source(src, &load, config, &pool, model));
    }
    if backends.iter().all(|b| b.is_err()) {
        return Err(backends
            .swap_remove(0)
            .err()
            .unwrap_or_else(|| ServerError::Config("no collection could be opened".into())));
    }
    if let (Some(q), Some(Ok(first))) = (&queries, backends.first()) {
        let dim = first.figures().1;
        if q.dim() != dim {
            let path = match &config.queries {
                Some(QuerySource::Path(p)) => p.clone(),
                _ => "(query matrix)".into(),
            };
            return Err(ServerError::QueryDim {
                path,
                queries: q.dim(),
                index: dim,
            });
        }
    }
    Ok((backends, queries))
}
