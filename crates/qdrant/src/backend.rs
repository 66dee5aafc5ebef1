//! [`QdrantBackend`]: the [`SearchBackend`] over a Qdrant collection (module doc in
//! `qdrant/mod.rs`): the shared state ([`Inner`]), opening and checking the collection, and
//! the trait's methods, which hand over to the search path (`search.rs`), the reads
//! (`read.rs`) and the writes (`write.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use qdrant_client::qdrant::{
    collections_client::CollectionsClient, qdrant_client::QdrantClient, Distance, Filter,
    GetCollectionInfoRequest, HealthCheckRequest, PayloadSchemaType,
};
use searchd_collection::{DocId, ModelRecord};
use searchd_fields::{FieldSpec, FieldType, Filter as SdFilter, Schema};
use tonic::transport::Channel;

use super::conn::{channel, spawn_probe, with_key};
use super::filter::Translator;
use super::layout::{point_id, read_meta, vector_params, ID_KEY, SRC_KEY};
use super::write::after_write;
use super::QdrantTarget;
use crate::Error;
use searchd_backend::{
    BackendError, BoxFuture, Document, FacetSpec, FieldsWanted, ReadOutput, ReadRequest, Receipt,
    SearchBackend, SearchOutput, SearchRequest, WriteOp,
};

pub(super) struct Inner {
    pub(super) target: QdrantTarget,
    pub(super) channels: Vec<Channel>,
    pub(super) next: AtomicUsize,
    pub(super) dim: usize,
    pub(super) distance: Distance,
    pub(super) points: AtomicU64,
    pub(super) schema: Arc<Schema>,
    /// The schema without the layout's `_id` and `_src` keys: what upserts are checked
    /// against.
    pub(super) mapping: Schema,
    pub(super) translator: Translator,
    pub(super) model: Option<ModelRecord>,
    pub(super) text_field: Option<String>,
    pub(super) reachable: AtomicBool,
    pub(super) last_error: parking_lot::Mutex<String>,
    /// Bumped by every write through this backend, and again once a write not waited for
    /// is known to be visible ([`SearchBackend::version`], part of response cache keys).
    pub(super) writes: AtomicU64,
    /// `/stats`' point count is out of date (a write since the last refresh).
    pub(super) count_dirty: AtomicBool,
    /// A task is refreshing `/stats`' point count; writes meanwhile leave it to that task.
    pub(super) counting: AtomicBool,
}

/// A Qdrant collection served through searchd's API.
#[derive(Clone)]
pub struct QdrantBackend {
    inner: Arc<Inner>,
}

/// Open `t` for serving (called by the server's loader on a blocking thread inside its
/// runtime): connect, check the collection against the server's model, start the probe.
pub fn open(
    t: &QdrantTarget,
    model: Option<&ModelRecord>,
) -> Result<Box<dyn SearchBackend>, Error> {
    let handle = tokio::runtime::Handle::current();
    let b = handle.block_on(QdrantBackend::connect(t.clone(), model.cloned()))?;
    Ok(Box::new(b))
}

/// A mapping for a collection searchd did not write: one field per payload index.
fn schema_of_indexes(info: &qdrant_client::qdrant::CollectionInfo) -> (Schema, Translator) {
    let mut fields = Vec::new();
    let mut tr = Translator::default();
    for (name, s) in &info.payload_schema {
        let ty = match PayloadSchemaType::try_from(s.data_type) {
            Ok(PayloadSchemaType::Keyword) => FieldType::Keyword,
            Ok(PayloadSchemaType::Integer) => FieldType::Integer,
            Ok(PayloadSchemaType::Float) => FieldType::Float,
            Ok(PayloadSchemaType::Bool) => FieldType::Bool,
            Ok(PayloadSchemaType::Datetime) => {
                tr.native_datetime.insert(name.clone());
                FieldType::Datetime
            }
            _ => continue,
        };
        fields.push(FieldSpec {
            name: name.clone(),
            ty,
            array: false,
            docs: s.points.unwrap_or(0),
            values: s.points.unwrap_or(0),
            declared: false,
        });
    }
    fields.sort_by(|a, b| a.name.cmp(&b.name));
    (
        Schema {
            fields,
            skipped: Vec::new(),
        },
        tr,
    )
}

fn metric_name(d: Distance) -> &'static str {
    match d {
        Distance::Cosine => "cosine",
        Distance::Dot => "ip",
        Distance::Euclid => "l2",
        Distance::Manhattan => "manhattan",
        Distance::UnknownDistance => "unknown",
    }
}

impl QdrantBackend {
    /// Connect to `t` and check its collection (errors are start-up messages: exit 2).
    pub async fn connect(
        t: QdrantTarget,
        model: Option<ModelRecord>,
    ) -> Result<QdrantBackend, Error> {
        let cfg = Error::Config;
        let channels = (0..t.channels.max(1))
            .map(|_| channel(&t))
            .collect::<Result<Vec<_>, _>>()
            .map_err(cfg)?;
        let probe = tokio::time::timeout(
            t.connect_timeout,
            QdrantClient::new(channels[0].clone())
                .health_check(with_key(&t, HealthCheckRequest {})),
        )
        .await;
        match probe {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(cfg(format!(
                    "cannot reach Qdrant at {}: {} (is it running? --qdrant-url is its gRPC address, port 6334 by default)",
                    t.url,
                    e.message()
                )))
            }
            Err(_) => {
                return Err(cfg(format!(
                    "cannot reach Qdrant at {}: no answer within {} ms (is it running? --qdrant-url is its gRPC address, port 6334 by default)",
                    t.url,
                    t.connect_timeout.as_millis()
                )))
            }
        }
        let got = CollectionsClient::new(channels[0].clone())
            .get(with_key(
                &t,
                GetCollectionInfoRequest {
                    collection_name: t.collection.clone(),
                },
            ))
            .await;
        let info = match got {
            Ok(r) => r.into_inner().result.unwrap_or_default(),
            Err(e) if e.code() == tonic::Code::NotFound => {
                return Err(cfg(format!(
                    "Qdrant at {} has no collection {:?}; make one with `searchd ingest --docs FILE --to qdrant://HOST:6334/{}`",
                    t.url, t.collection, t.collection
                )))
            }
            Err(e) => {
                return Err(cfg(format!(
                    "Qdrant at {}: cannot read collection {:?}: {}",
                    t.url,
                    t.collection,
                    e.message()
                )))
            }
        };
        let (dim, distance) = vector_params(&info, &t.collection).map_err(cfg)?;
        let meta = read_meta(&info).unwrap_or_default();
        let (schema, translator) = match &meta.mapping {
            Some(m) => (m.clone(), Translator::default()),
            None => schema_of_indexes(&info),
        };
        if let Some(m) = &model {
            if let Some(theirs) = &meta.model {
                if theirs.checksum != m.checksum {
                    return Err(cfg(format!(
                        "Qdrant collection {} was embedded with model {} (checksum {}), but the server's --model is {} (checksum {})",
                        t.collection, theirs.name, theirs.checksum, m.name, m.checksum
                    )));
                }
            }
            if m.dim != dim {
                return Err(cfg(format!(
                    "Qdrant collection {} has {dim}-dimensional vectors, but the server's --model {} makes {}-dimensional ones",
                    t.collection, m.name, m.dim
                )));
            }
            if !matches!(distance, Distance::Cosine | Distance::Dot) {
                return Err(cfg(format!(
                    "Qdrant collection {} compares vectors by {} distance, but the model's embeddings are compared by cosine; make the collection with distance Cosine",
                    t.collection,
                    distance.as_str_name()
                )));
            }
        }
        if matches!(distance, Distance::Manhattan | Distance::UnknownDistance) {
            return Err(cfg(format!(
                "Qdrant collection {} uses {} distance; searchd serves Cosine, Dot and Euclid",
                t.collection,
                distance.as_str_name()
            )));
        }
        let mut mapping = schema.clone();
        mapping
            .fields
            .retain(|f| f.name != ID_KEY && f.name != SRC_KEY);
        let inner = Arc::new(Inner {
            dim,
            distance,
            points: AtomicU64::new(info.points_count.unwrap_or(0)),
            schema: Arc::new(schema),
            mapping,
            translator,
            model: meta.model.clone().or(model),
            text_field: meta.text_field.clone(),
            reachable: AtomicBool::new(true),
            last_error: parking_lot::Mutex::new(String::new()),
            writes: AtomicU64::new(0),
            count_dirty: AtomicBool::new(false),
            counting: AtomicBool::new(false),
            next: AtomicUsize::new(0),
            channels,
            target: t,
        });
        spawn_probe(Arc::downgrade(&inner));
        Ok(QdrantBackend { inner })
    }

    /// The mapping filters are parsed against.
    pub fn schema(&self) -> &Schema {
        &self.inner.schema
    }

    /// Whether the last probe or call reached Qdrant.
    pub fn reachable(&self) -> bool {
        self.inner.reachable.load(Ordering::Relaxed)
    }
}

impl Inner {
    /// Qdrant's filter for a parsed one (some cannot be expressed: a 400 says which).
    pub(super) fn translate(&self, f: Option<&SdFilter>) -> Result<Option<Filter>, BackendError> {
        let Some(f) = f else { return Ok(None) };
        self.translator
            .filter(&f.view(), &point_id)
            .map(Some)
            .map_err(BackendError::Invalid)
    }

    pub(super) fn check_facets(
        &self,
        facets: &[FacetSpec],
        path: &str,
    ) -> Result<(), BackendError> {
        for f in facets {
            match self.schema.get(&f.field) {
                Some(s) if s.ty == FieldType::Keyword => {}
                Some(s) => {
                    return Err(BackendError::Invalid(format!(
                        "{path}: field \"{}\" is {}, facets count keyword fields",
                        f.field, s.ty
                    )))
                }
                None => {
                    return Err(BackendError::Invalid(format!(
                        "{path}: unknown field \"{}\"",
                        f.field
                    )))
                }
            }
        }
        Ok(())
    }
}

impl SearchBackend for QdrantBackend {
    fn info(&self) -> serde_json::Value {
        let i = &self.inner;
        serde_json::json!({
            "kind": "qdrant",
            "url": i.target.url,
            "collection": i.target.collection,
            "path": format!("{}/{}", i.target.url, i.target.collection),
            "docs": i.points.load(Ordering::Relaxed),
            "dim": i.dim,
            "metric": metric_name(i.distance),
            "bytes": 0,
            "channels": i.channels.len(),
            "reachable": self.reachable(),
            "last_error": i.last_error.lock().clone(),
            "writes": i.writes.load(Ordering::Relaxed),
            "mapping": *i.schema,
            "model": i.model,
        })
    }
    fn figures(&self) -> (u64, usize, u64) {
        (self.inner.points.load(Ordering::Relaxed), self.inner.dim, 0)
    }
    fn model(&self) -> Option<ModelRecord> {
        self.inner.model.clone()
    }
    fn schema(&self) -> Arc<Schema> {
        self.inner.schema.clone()
    }
    fn can_search_text(&self) -> Result<(), String> {
        Err("the Qdrant backend has no lexical index; text queries run in mode \"dense\" (start the server with --model)".into())
    }
    fn text_field(&self) -> Option<String> {
        self.inner.text_field.clone()
    }
    fn ready(&self) -> Result<(), String> {
        if self.reachable() {
            Ok(())
        } else {
            Err(format!(
                "Qdrant at {} is unreachable: {}",
                self.inner.target.url,
                self.inner.last_error.lock()
            ))
        }
    }
    fn search(&self, req: SearchRequest) -> BoxFuture<'_, Result<SearchOutput, BackendError>> {
        Box::pin(self.inner.search(req))
    }
    fn get(
        &self,
        id: DocId,
        fields: FieldsWanted,
    ) -> BoxFuture<'_, Result<Document, BackendError>> {
        Box::pin(self.inner.get(id, fields))
    }
    fn read(&self, req: ReadRequest) -> BoxFuture<'_, Result<ReadOutput, BackendError>> {
        Box::pin(self.inner.read(req))
    }
    fn write(&self, op: WriteOp, wait: bool) -> BoxFuture<'_, Result<Receipt, BackendError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let r = match op {
                WriteOp::Upsert(docs) => inner.upsert(docs, wait).await,
                WriteOp::Delete(ids) => inner.delete(ids, wait).await,
                WriteOp::DeleteFilter(f) => inner.delete_filter(f, wait).await,
            };
            // Refused requests (400, 404) changed nothing; anything else may have.
            let barrier = match &r {
                // Nothing matched: nothing was sent.
                Ok(rc) if rc.upserted == 0 && rc.deleted == 0 => return r,
                Ok(rc) => !rc.applied,
                Err(BackendError::Invalid(_) | BackendError::NotFound(_)) => return r,
                Err(_) => true,
            };
            inner.writes.fetch_add(1, Ordering::AcqRel);
            after_write(inner, barrier);
            r
        })
    }
    fn version(&self) -> u64 {
        self.inner.writes.load(Ordering::Acquire)
    }
    /// The engine's address and collection: every front door serving it shares replies
    /// (writes through any of them reach the same points).
    fn shared_key(&self) -> Option<String> {
        let t = &self.inner.target;
        Some(format!("qdrant:{}/{}", t.url, t.collection))
    }
}
