//! [`QdrantBackend`]: the [`SearchBackend`] over a Qdrant collection (module doc in
//! `qdrant/mod.rs`).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use qdrant_client::qdrant::{
    collections_client::CollectionsClient, condition::ConditionOneOf, point_id::PointIdOptions,
    points_client::PointsClient, qdrant_client::QdrantClient, query::Variant as QueryVariant,
    r#match::MatchValue, value::Kind, vector_input, vectors_config, with_payload_selector,
    Condition, CountPoints, Direction, Distance, FacetCounts, FieldCondition, Filter,
    GetCollectionInfoRequest, GetPoints, HasIdCondition, HealthCheckRequest, IsEmptyCondition,
    Match, OrderBy, PayloadIncludeSelector, PayloadSchemaType, PointId, Query, QueryPoints, Range,
    RetrievedPoint, ScrollPoints, SearchParams, VectorInput, WithPayloadSelector,
};
use qdrant_client::qdrant::{
    points_selector::PointsSelectorOneOf, DeletePoints, PointStruct, PointsIdsList, PointsSelector,
    UpdateResult, UpdateStatus, UpsertPoints,
};
use searchd_collection::live::{Doc, Receipt};
use searchd_collection::{DocId, ModelRecord};
use searchd_fields::{
    FieldSpec, FieldType, FieldsConfig, FieldsWriter, Filter as SdFilter, Order, Schema, SortBy,
};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use super::filter::Translator;
use super::QdrantTarget;
use crate::backend::{
    select_fields, BackendError, BoxFuture, Document, FacetOutput, FacetSpec, FieldsWanted,
    QueryInput, ReadOutput, ReadRequest, ScoredDoc, SearchBackend, SearchOutput, SearchRequest,
    SortedDoc, StageTimes, WriteOp, MAX_RESULT_WINDOW,
};
use crate::error::ServerError;

/// Payload key of a string document id.
pub const ID_KEY: &str = "_id";
/// Payload key of the stored document (its JSON text, byte for byte).
pub const SRC_KEY: &str = "_src";
/// Collection metadata key of [`SearchdMeta`].
pub const META_KEY: &str = "searchd";
/// Largest gRPC message read (pages of 10,000 documents with their fields).
const MAX_MESSAGE: usize = 256 << 20;
/// Buckets asked of Qdrant's facet API (all of them, so `other_count` is exact).
const FACET_LIMIT: u64 = 1_000_000;
/// How long a write may take at Qdrant (with `wait`, until it is visible).
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// What `searchd ingest --to qdrant://` records in the collection's metadata.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SearchdMeta {
    #[serde(default)]
    pub mapping: Option<Schema>,
    #[serde(default)]
    pub model: Option<ModelRecord>,
    #[serde(default)]
    pub metric: Option<String>,
    #[serde(default)]
    pub text_field: Option<String>,
}

fn fnv(seed: u64, s: &[u8]) -> u64 {
    let mut h = seed;
    for &b in s {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The Qdrant point id of a document id: integers as themselves, strings as a UUID made
/// from two FNV-1a hashes of the string (version nibble 8, "custom"), so any process maps a
/// string to the same point.
pub fn point_id(id: &DocId) -> PointId {
    match id {
        DocId::Int(n) => PointId::from(*n),
        DocId::Str(s) => PointId::from(uuid_of(s)),
    }
}

pub(crate) fn uuid_of(s: &str) -> String {
    let a = fnv(0xcbf2_9ce4_8422_2325, s.as_bytes());
    let b = fnv(0x6c62_272e_07bb_0142, s.as_bytes()) ^ a.rotate_left(29);
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&a.to_be_bytes());
    x[8..].copy_from_slice(&b.to_be_bytes());
    x[6] = (x[6] & 0x0f) | 0x80;
    x[8] = (x[8] & 0x3f) | 0x80;
    let h: String = x.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn payload_str<'a>(
    p: &'a HashMap<String, qdrant_client::qdrant::Value>,
    k: &str,
) -> Option<&'a str> {
    match p.get(k)?.kind.as_ref()? {
        Kind::StringValue(s) => Some(s),
        _ => None,
    }
}

/// The document id of a point.
fn doc_id_of(
    id: Option<&PointId>,
    payload: &HashMap<String, qdrant_client::qdrant::Value>,
) -> DocId {
    if let Some(s) = payload_str(payload, ID_KEY) {
        return DocId::Str(s.to_string());
    }
    match id.and_then(|p| p.point_id_options.as_ref()) {
        Some(PointIdOptions::Num(n)) => DocId::Int(*n),
        Some(PointIdOptions::Uuid(u)) => DocId::Str(u.clone()),
        None => DocId::Str(String::new()),
    }
}

fn fields_of(
    payload: &HashMap<String, qdrant_client::qdrant::Value>,
    wanted: &FieldsWanted,
) -> Option<Vec<u8>> {
    match wanted {
        FieldsWanted::None => None,
        w => match payload_str(payload, SRC_KEY) {
            Some(src) => select_fields(src.as_bytes(), w),
            None => Some(b"{}".to_vec()),
        },
    }
}

fn cond(c: ConditionOneOf) -> Condition {
    Condition {
        condition_one_of: Some(c),
    }
}

fn include(keys: &[&str]) -> WithPayloadSelector {
    WithPayloadSelector {
        selector_options: Some(with_payload_selector::SelectorOptions::Include(
            PayloadIncludeSelector {
                fields: keys.iter().map(|k| k.to_string()).collect(),
            },
        )),
    }
}

/// Deadline in whole seconds for Qdrant's own `timeout` fields (at least 1).
fn secs(deadline: Instant) -> u64 {
    deadline
        .saturating_duration_since(Instant::now())
        .as_secs_f64()
        .ceil()
        .max(1.0) as u64
}

struct Inner {
    target: QdrantTarget,
    channels: Vec<Channel>,
    next: AtomicUsize,
    dim: usize,
    distance: Distance,
    points: AtomicU64,
    schema: Schema,
    translator: Translator,
    model: Option<ModelRecord>,
    text_field: Option<String>,
    reachable: AtomicBool,
    last_error: parking_lot::Mutex<String>,
    /// Bumped by every write through this backend, and again once a write not waited for
    /// is known to be visible ([`SearchBackend::version`], part of response cache keys).
    writes: AtomicU64,
    /// `/stats`' point count is out of date (a write since the last refresh).
    count_dirty: AtomicBool,
    /// A task is refreshing `/stats`' point count; writes meanwhile leave it to that task.
    counting: AtomicBool,
}

/// How long the task refreshing `/stats`' point count waits before counting, so the writes
/// of that interval share one count (an exact count scans the collection in Qdrant: one per
/// write cost single-document writes 2-6x their throughput).
const COUNT_REFRESH_DELAY: Duration = Duration::from_millis(500);

/// A Qdrant collection served through searchd's API.
#[derive(Clone)]
pub struct QdrantBackend {
    inner: Arc<Inner>,
}

fn channel(t: &QdrantTarget) -> Result<Channel, String> {
    let mut ep = Endpoint::from_shared(t.url.clone())
        .map_err(|e| format!("--qdrant-url {:?}: {e}", t.url))?
        .connect_timeout(t.connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(5))
        .keep_alive_while_idle(true);
    if t.url.starts_with("https://") {
        ep = ep
            .tls_config(ClientTlsConfig::new().with_native_roots())
            .map_err(|e| format!("TLS for {}: {e}", t.url))?;
    }
    Ok(ep.connect_lazy())
}

/// Open `t` for serving (called by the server's loader on a blocking thread inside its
/// runtime): connect, check the collection against the server's model, start the probe.
pub fn open(
    t: &QdrantTarget,
    model: Option<&ModelRecord>,
) -> Result<Box<dyn SearchBackend>, ServerError> {
    let handle = tokio::runtime::Handle::current();
    let b = handle.block_on(QdrantBackend::connect(t.clone(), model.cloned()))?;
    Ok(Box::new(b))
}

/// The vector size and distance of a collection's (single, unnamed) vector.
pub(crate) fn vector_params(
    info: &qdrant_client::qdrant::CollectionInfo,
    name: &str,
) -> Result<(usize, Distance), String> {
    let vc = info
        .config
        .as_ref()
        .and_then(|c| c.params.as_ref())
        .and_then(|p| p.vectors_config.as_ref())
        .and_then(|v| v.config.as_ref());
    match vc {
        Some(vectors_config::Config::Params(p)) => Ok((
            p.size as usize,
            Distance::try_from(p.distance).unwrap_or(Distance::UnknownDistance),
        )),
        Some(vectors_config::Config::ParamsMap(_)) => Err(format!(
            "Qdrant collection {name} has named vectors; searchd serves collections with one unnamed dense vector"
        )),
        None => Err(format!("Qdrant collection {name} has no dense vector")),
    }
}

pub(crate) fn read_meta(info: &qdrant_client::qdrant::CollectionInfo) -> Option<SearchdMeta> {
    let v = info.config.as_ref()?.metadata.get(META_KEY)?;
    match v.kind.as_ref()? {
        Kind::StringValue(s) => serde_json::from_str(s).ok(),
        _ => None,
    }
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
    ) -> Result<QdrantBackend, ServerError> {
        let cfg = ServerError::Config;
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
        let inner = Arc::new(Inner {
            dim,
            distance,
            points: AtomicU64::new(info.points_count.unwrap_or(0)),
            schema,
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

fn with_key<T>(t: &QdrantTarget, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    if let Some(k) = &t.api_key {
        if let Ok(v) = k.parse() {
            r.metadata_mut().insert("api-key", v);
        }
    }
    r
}

fn spawn_probe(inner: Weak<Inner>) {
    tokio::spawn(async move {
        loop {
            let Some(i) = inner.upgrade() else { break };
            let ch = i.channels[0].clone();
            let req = with_key(&i.target, HealthCheckRequest {});
            let ok = matches!(
                tokio::time::timeout(
                    Duration::from_secs(1),
                    QdrantClient::new(ch).health_check(req)
                )
                .await,
                Ok(Ok(_))
            );
            let was = i.reachable.swap(ok, Ordering::Relaxed);
            if was != ok {
                if ok {
                    tracing::info!(url = %i.target.url, "Qdrant is reachable again");
                } else {
                    tracing::warn!(url = %i.target.url, "Qdrant is unreachable");
                }
            }
            drop(i);
            tokio::time::sleep(if ok {
                Duration::from_secs(1)
            } else {
                Duration::from_millis(250)
            })
            .await;
        }
    });
}

impl Inner {
    fn channel(&self) -> Channel {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.channels.len();
        self.channels[i].clone()
    }

    fn points(&self) -> PointsClient<Channel> {
        PointsClient::new(self.channel())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    fn request<T>(&self, msg: T, deadline: Instant) -> tonic::Request<T> {
        let mut r = with_key(&self.target, msg);
        r.set_timeout(deadline.saturating_duration_since(Instant::now()));
        r
    }

    fn status_error(&self, s: &tonic::Status) -> BackendError {
        use tonic::Code as C;
        let m = s.message();
        match s.code() {
            C::InvalidArgument | C::FailedPrecondition | C::OutOfRange => {
                if m.contains("No point with id") || m.contains("not found") {
                    BackendError::NotFound(format!("Qdrant: {m}"))
                } else {
                    BackendError::Invalid(format!("Qdrant refused the request: {m}"))
                }
            }
            C::NotFound => BackendError::NotFound(format!("Qdrant: {m}")),
            C::DeadlineExceeded | C::Cancelled => BackendError::Deadline { started: true },
            C::ResourceExhausted => BackendError::Overloaded(format!("Qdrant is overloaded: {m}")),
            C::Unavailable => {
                self.reachable.store(false, Ordering::Relaxed);
                *self.last_error.lock() = m.to_string();
                BackendError::Unavailable(format!(
                    "Qdrant at {} is unreachable: {m}",
                    self.target.url
                ))
            }
            _ => BackendError::Unavailable(format!("Qdrant failed: {m}")),
        }
    }

    /// One gRPC call bounded by `deadline` on our side too (504, never a hang).
    async fn call<R, Fut>(&self, deadline: Instant, fut: Fut) -> Result<R, BackendError>
    where
        Fut: Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(BackendError::Deadline { started: false });
        }
        match tokio::time::timeout(left, fut).await {
            Err(_) => Err(BackendError::Deadline { started: true }),
            Ok(Err(s)) => Err(self.status_error(&s)),
            Ok(Ok(r)) => Ok(r.into_inner()),
        }
    }

    fn parse_filter(
        &self,
        v: Option<&serde_json::Value>,
        path: &str,
    ) -> Result<Option<Filter>, BackendError> {
        let Some(v) = v else { return Ok(None) };
        let f = SdFilter::parse_at(v, &self.schema, path)
            .map_err(|e| BackendError::Invalid(e.to_string()))?;
        self.translator
            .filter(&f.view(), &point_id)
            .map(Some)
            .map_err(BackendError::Invalid)
    }

    fn check_facets(&self, facets: &[FacetSpec], path: &str) -> Result<(), BackendError> {
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

    fn score(&self, s: f32) -> f32 {
        match self.distance {
            // Qdrant answers the distance; searchd's l2 scores are -(squared distance).
            Distance::Euclid => -(s * s),
            _ => s,
        }
    }

    async fn search(&self, req: SearchRequest) -> Result<SearchOutput, BackendError> {
        let SearchRequest {
            query,
            k,
            ef,
            fields,
            filter,
            facets,
            deadline,
            permit,
            ..
        } = req;
        self.check_facets(&facets, "facets")?;
        let mut filter = self.parse_filter(filter.as_ref(), "filter")?;
        let t = Instant::now();
        let input = match query {
            QueryInput::Vector(v) => VectorInput::from(v),
            QueryInput::Row(m, i) => VectorInput::from(m.row(i).to_vec()),
            QueryInput::Stored(id) => {
                let pid = point_id(&id);
                filter
                    .get_or_insert_with(Filter::default)
                    .must_not
                    .push(cond(ConditionOneOf::HasId(HasIdCondition {
                        has_id: vec![pid.clone()],
                    })));
                // Check the document exists first: a clear 404 rather than Qdrant's message.
                let got = self.get_points(vec![pid.clone()], &[], deadline).await?;
                if got.is_empty() {
                    return Err(BackendError::NotFound(format!(
                        "document {id} is not in the collection"
                    )));
                }
                VectorInput {
                    variant: Some(vector_input::Variant::Id(pid)),
                }
            }
            QueryInput::Lexical(_) | QueryInput::Hybrid { .. } => {
                return Err(BackendError::Invalid(
                    "the Qdrant backend searches vectors only (mode \"dense\"); lexical and hybrid need a local collection".into(),
                ))
            }
        };
        // Only the payload the reply needs. A hit's `_id` (string ids only) is fetched after
        // the search for the hits that have one: asking for it on every hit made Qdrant read
        // each hit's payload (the stored document included) and cost it ~0.2 ms of CPU per
        // search (1.0 ms through searchd against 0.74-0.86 ms through its REST API with no
        // payload, `bench/results/qdrant-gcide.md`).
        let mut keys: Vec<&str> = Vec::new();
        if fields != FieldsWanted::None {
            keys.extend([ID_KEY, SRC_KEY]);
        }
        for f in &facets {
            keys.push(&f.field);
        }
        let with_payload = if keys.is_empty() {
            WithPayloadSelector {
                selector_options: Some(with_payload_selector::SelectorOptions::Enable(false)),
            }
        } else {
            include(&keys)
        };
        let msg = QueryPoints {
            collection_name: self.target.collection.clone(),
            query: Some(Query {
                variant: Some(QueryVariant::Nearest(input)),
            }),
            filter,
            limit: Some(k as u64),
            params: Some(SearchParams {
                hnsw_ef: Some(ef.max(k) as u64),
                ..SearchParams::default()
            }),
            with_payload: Some(with_payload),
            timeout: Some(secs(deadline)),
            ..QueryPoints::default()
        };
        let res = self
            .call(deadline, self.points().query(self.request(msg, deadline)))
            .await?;
        // Hits with a UUID point id and no `_id` in the payload: documents with string ids.
        let need: Vec<PointId> = res
            .result
            .iter()
            .filter(|p| !p.payload.contains_key(ID_KEY))
            .filter_map(|p| p.id.clone())
            .filter(|id| matches!(id.point_id_options, Some(PointIdOptions::Uuid(_))))
            .collect();
        let names: HashMap<String, String> = if need.is_empty() {
            HashMap::new()
        } else {
            self.get_points(need, &[ID_KEY], deadline)
                .await?
                .into_iter()
                .filter_map(|p| {
                    let uuid = match p.id.as_ref()?.point_id_options.as_ref()? {
                        PointIdOptions::Uuid(u) => u.clone(),
                        PointIdOptions::Num(_) => return None,
                    };
                    Some((uuid, payload_str(&p.payload, ID_KEY)?.to_string()))
                })
                .collect()
        };
        drop(permit);
        let dense_us = t.elapsed().as_micros() as u64;
        let facets = facets
            .iter()
            .map(|f| facet_of_hits(f, res.result.iter().map(|p| &p.payload)))
            .collect();
        let hits = res
            .result
            .into_iter()
            .map(|p| {
                let named = match p.id.as_ref().and_then(|i| i.point_id_options.as_ref()) {
                    Some(PointIdOptions::Uuid(u)) => names.get(u).cloned().map(DocId::Str),
                    _ => None,
                };
                ScoredDoc {
                    id: named.unwrap_or_else(|| doc_id_of(p.id.as_ref(), &p.payload)),
                    score: self.score(p.score),
                    fields: fields_of(&p.payload, &fields),
                }
            })
            .collect();
        Ok(SearchOutput {
            hits,
            stages: StageTimes {
                dense_us,
                ..StageTimes::default()
            },
            facets,
            ..SearchOutput::default()
        })
    }

    async fn get_points(
        &self,
        ids: Vec<PointId>,
        keys: &[&str],
        deadline: Instant,
    ) -> Result<Vec<RetrievedPoint>, BackendError> {
        let msg = GetPoints {
            collection_name: self.target.collection.clone(),
            ids,
            with_payload: Some(include(keys)),
            timeout: Some(secs(deadline)),
            ..GetPoints::default()
        };
        Ok(self
            .call(deadline, self.points().get(self.request(msg, deadline)))
            .await?
            .result)
    }

    async fn get(&self, id: DocId, fields: FieldsWanted) -> Result<Document, BackendError> {
        let deadline = Instant::now() + Duration::from_secs(5);
        // A path segment cannot tell "17" from 17: look up both.
        let mut ids = vec![point_id(&id)];
        if let DocId::Str(s) = &id {
            if let Ok(n) = s.parse::<u64>() {
                ids.insert(0, PointId::from(n));
            }
        }
        let got = self.get_points(ids, &[ID_KEY, SRC_KEY], deadline).await?;
        let Some(p) = got.into_iter().next() else {
            return Err(BackendError::NotFound(format!(
                "document {id} is not in the collection"
            )));
        };
        let fields = match fields {
            FieldsWanted::None => b"{}".to_vec(),
            w => fields_of(&p.payload, &w).unwrap_or_else(|| b"{}".to_vec()),
        };
        Ok(Document {
            id: doc_id_of(p.id.as_ref(), &p.payload),
            fields,
        })
    }

    async fn count(&self, filter: Option<Filter>, deadline: Instant) -> Result<u64, BackendError> {
        let msg = CountPoints {
            collection_name: self.target.collection.clone(),
            filter,
            exact: Some(true),
            timeout: Some(secs(deadline)),
            ..CountPoints::default()
        };
        Ok(self
            .call(deadline, self.points().count(self.request(msg, deadline)))
            .await?
            .result
            .map_or(0, |r| r.count))
    }

    async fn facet(
        &self,
        spec: &FacetSpec,
        filter: Option<Filter>,
        deadline: Instant,
    ) -> Result<FacetOutput, BackendError> {
        let msg = FacetCounts {
            collection_name: self.target.collection.clone(),
            key: spec.field.clone(),
            filter,
            limit: Some(FACET_LIMIT),
            exact: Some(true),
            timeout: Some(secs(deadline)),
            ..FacetCounts::default()
        };
        let res = self
            .call(deadline, self.points().facet(self.request(msg, deadline)))
            .await?;
        use qdrant_client::qdrant::facet_value::Variant as V;
        let all: Vec<(String, u64)> = res
            .hits
            .into_iter()
            .filter_map(|h| {
                let v = match h.value?.variant? {
                    V::StringValue(s) => s,
                    V::IntegerValue(i) => i.to_string(),
                    V::BoolValue(b) => b.to_string(),
                };
                Some((v, h.count))
            })
            .collect();
        Ok(top_buckets(spec, all))
    }

    async fn scroll_raw(
        &self,
        filter: Filter,
        order_by: Option<OrderBy>,
        offset: Option<PointId>,
        limit: usize,
        keys: &[&str],
        deadline: Instant,
    ) -> Result<Vec<RetrievedPoint>, BackendError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let msg = ScrollPoints {
            collection_name: self.target.collection.clone(),
            filter: Some(filter),
            offset,
            limit: Some(limit.min(u32::MAX as usize) as u32),
            with_payload: Some(include(keys)),
            order_by,
            timeout: Some(secs(deadline)),
            ..ScrollPoints::default()
        };
        Ok(self
            .call(deadline, self.points().scroll(self.request(msg, deadline)))
            .await?
            .result)
    }

    async fn read(&self, req: ReadRequest) -> Result<ReadOutput, BackendError> {
        if req.from + req.size > MAX_RESULT_WINDOW {
            return Err(BackendError::Invalid(format!(
                "from + size must be at most {MAX_RESULT_WINDOW}, got {}; page deeper with a cursor (after / search_after)",
                req.from + req.size
            )));
        }
        self.check_facets(&req.facets, "facets")?;
        let plan = match &req.sort {
            Some(v) => PagePlan::of(&self.schema, v)?,
            None => PagePlan::ById,
        };
        let filter = self.parse_filter(req.filter.as_ref(), "filter")?;
        let cursor = match &req.after {
            Some(a) => Some(plan.cursor(a, &self.schema)?),
            None => None,
        };
        let deadline = req.deadline;
        let total = if req.total {
            Some(self.count(filter.clone(), deadline).await?)
        } else {
            None
        };
        let mut facets = Vec::new();
        for f in &req.facets {
            facets.push(self.facet(f, filter.clone(), deadline).await?);
        }
        let mut hits = Vec::new();
        let mut next = None;
        if req.size > 0 {
            let need = req.from + req.size;
            let base = filter.unwrap_or_default();
            let mut keys = vec![ID_KEY];
            if req.fields != FieldsWanted::None {
                keys.push(SRC_KEY);
            }
            let page = match &plan {
                PagePlan::ById => {
                    self.page_by_id(base, cursor.and_then(|c| c.1), need, &keys, deadline)
                        .await?
                }
                PagePlan::ByField { field, ty, order } => {
                    keys.push(field);
                    self.page_by_field(base, field, *ty, *order, cursor, need, &keys, deadline)
                        .await?
                }
            };
            let full = page.len() >= need;
            for (sort, p) in page.into_iter().skip(req.from).take(req.size) {
                hits.push(SortedDoc {
                    id: doc_id_of(p.id.as_ref(), &p.payload),
                    sort,
                    fields: fields_of(&p.payload, &req.fields),
                });
            }
            if full {
                next = hits.last().map(|h| h.sort.clone());
            }
        }
        drop(req.permit);
        Ok(ReadOutput {
            hits,
            next,
            total,
            facets,
        })
    }

    async fn page_by_id(
        &self,
        filter: Filter,
        after: Option<DocId>,
        need: usize,
        keys: &[&str],
        deadline: Instant,
    ) -> Result<Vec<(Vec<serde_json::Value>, RetrievedPoint)>, BackendError> {
        let offset = after.as_ref().map(point_id);
        let extra = usize::from(offset.is_some());
        let mut got = self
            .scroll_raw(filter, None, offset.clone(), need + extra, keys, deadline)
            .await?;
        if let (Some(o), Some(first)) = (&offset, got.first()) {
            if first.id.as_ref() == Some(o) {
                got.remove(0);
            }
        }
        got.truncate(need);
        Ok(got
            .into_iter()
            .map(|p| {
                let id = doc_id_of(p.id.as_ref(), &p.payload);
                (vec![id_json(&id)], p)
            })
            .collect())
    }

    #[allow(clippy::too_many_arguments)]
    async fn page_by_field(
        &self,
        filter: Filter,
        field: &str,
        ty: FieldType,
        order: Order,
        cursor: Option<(Option<Num>, Option<DocId>)>,
        need: usize,
        keys: &[&str],
        deadline: Instant,
    ) -> Result<Vec<(Vec<serde_json::Value>, RetrievedPoint)>, BackendError> {
        let and = |extra: Condition| {
            let mut f = filter.clone();
            f.must.push(extra);
            f
        };
        let value_of = |p: &RetrievedPoint| num_of(p.payload.get(field), ty);
        let mut out: Vec<(Option<Num>, RetrievedPoint)> = Vec::new();
        let in_values = !matches!(cursor, Some((None, _)));
        if in_values {
            if let Some((Some(v), cid)) = &cursor {
                // Ties of the cursor's value after its id.
                let offset = cid.as_ref().map(point_id);
                let mut ties = self
                    .scroll_raw(
                        and(eq(field, *v)),
                        None,
                        offset.clone(),
                        need + 1,
                        keys,
                        deadline,
                    )
                    .await?;
                if let (Some(o), Some(first)) = (&offset, ties.first()) {
                    if first.id.as_ref() == Some(o) {
                        ties.remove(0);
                    }
                }
                out.extend(ties.into_iter().map(|p| (Some(*v), p)));
            }
            if out.len() < need {
                let beyond = match &cursor {
                    Some((Some(v), _)) => beyond(field, *v, order),
                    _ => exists(field),
                };
                let want = need - out.len();
                let ob = OrderBy {
                    key: field.to_string(),
                    direction: Some(match order {
                        Order::Asc => Direction::Asc as i32,
                        Order::Desc => Direction::Desc as i32,
                    }),
                    start_from: None,
                };
                let batch = self
                    .scroll_raw(and(beyond.clone()), Some(ob), None, want, keys, deadline)
                    .await?;
                let full = batch.len() >= want;
                let mut batch: Vec<(Option<Num>, RetrievedPoint)> =
                    batch.into_iter().map(|p| (value_of(&p), p)).collect();
                if full {
                    // Qdrant orders ties arbitrarily: the last value's ties come by id.
                    let last = batch.last().and_then(|b| b.0);
                    batch.retain(|b| b.0 != last);
                    if let Some(l) = last {
                        let mut f = filter.clone();
                        f.must.push(beyond);
                        f.must.push(eq(field, l));
                        let ties = self
                            .scroll_raw(f, None, None, want - batch.len(), keys, deadline)
                            .await?;
                        sort_batch(&mut batch, order);
                        batch.extend(ties.into_iter().map(|p| (Some(l), p)));
                    }
                } else {
                    sort_batch(&mut batch, order);
                }
                out.extend(batch);
            }
        }
        if out.len() < need {
            // Documents without a value come last, by id.
            let offset = match &cursor {
                Some((None, Some(cid))) => Some(point_id(cid)),
                _ => None,
            };
            let extra = usize::from(offset.is_some());
            let mut f = filter.clone();
            f.must.push(cond(ConditionOneOf::IsEmpty(IsEmptyCondition {
                key: field.to_string(),
            })));
            let mut missing = self
                .scroll_raw(
                    f,
                    None,
                    offset.clone(),
                    need - out.len() + extra,
                    keys,
                    deadline,
                )
                .await?;
            if let (Some(o), Some(first)) = (&offset, missing.first()) {
                if first.id.as_ref() == Some(o) {
                    missing.remove(0);
                }
            }
            out.extend(missing.into_iter().map(|p| (None, p)));
        }
        out.truncate(need);
        Ok(out
            .into_iter()
            .map(|(v, p)| {
                let id = doc_id_of(p.id.as_ref(), &p.payload);
                (
                    vec![v.map_or(serde_json::Value::Null, Num::json), id_json(&id)],
                    p,
                )
            })
            .collect())
    }
}

/// A write's sequence number (Qdrant's operation id) and whether it is visible.
fn outcome(r: Option<UpdateResult>) -> Result<(u64, bool), BackendError> {
    let r = r.unwrap_or_default();
    let seq = r.operation_id.unwrap_or(0);
    match UpdateStatus::try_from(r.status) {
        Ok(UpdateStatus::Completed) => Ok((seq, true)),
        Ok(UpdateStatus::ClockRejected) => Err(BackendError::Unavailable(
            "Qdrant rejected the write (outdated clock tag); retry".into(),
        )),
        // Acknowledged, or waited for but not applied within Qdrant's timeout: in Qdrant's
        // log, visible later.
        _ => Ok((seq, false)),
    }
}

/// A filter no point matches, for the write barrier.
fn no_point() -> Filter {
    Filter {
        must: vec![cond(ConditionOneOf::HasId(HasIdCondition {
            has_id: Vec::new(),
        }))],
        ..Filter::default()
    }
}

/// After a write through `inner`: when it may not be visible yet (not waited for, timed
/// out, failed on the way), send a no-op delete with `wait=true` behind it — Qdrant applies
/// a shard's updates in order, so once that returns the write is visible — and bump the
/// version again so the response cache drops answers computed before; then refresh the
/// point count of `/stats`.
fn after_write(inner: Arc<Inner>, barrier: bool) {
    tokio::spawn(async move {
        if barrier {
            for attempt in 0..10u32 {
                let deadline = Instant::now() + WRITE_TIMEOUT;
                let msg = DeletePoints {
                    collection_name: inner.target.collection.clone(),
                    wait: Some(true),
                    points: Some(PointsSelector {
                        points_selector_one_of: Some(PointsSelectorOneOf::Filter(no_point())),
                    }),
                    timeout: Some(secs(deadline)),
                    ..DeletePoints::default()
                };
                let r = inner
                    .call(
                        deadline,
                        inner.points().delete(inner.request(msg, deadline)),
                    )
                    .await;
                inner.writes.fetch_add(1, Ordering::AcqRel);
                if r.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(250 << attempt.min(3))).await;
            }
        }
        refresh_count(inner).await;
    });
}

/// Refresh `/stats`' point count after writes: one task at a time, one count per
/// [`COUNT_REFRESH_DELAY`] however many writes arrive, and a last count after the last write.
async fn refresh_count(inner: Arc<Inner>) {
    inner.count_dirty.store(true, Ordering::Release);
    if inner.counting.swap(true, Ordering::AcqRel) {
        return; // the running task sees count_dirty and counts again
    }
    loop {
        tokio::time::sleep(COUNT_REFRESH_DELAY).await;
        inner.count_dirty.store(false, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(5);
        if let Ok(n) = inner.count(None, deadline).await {
            inner.points.store(n, Ordering::Relaxed);
        }
        if !inner.count_dirty.load(Ordering::Acquire) {
            inner.counting.store(false, Ordering::Release);
            // A write between the check and the release found `counting` still set: take
            // the task back for it, unless that write's own call already did.
            if !inner.count_dirty.load(Ordering::Acquire)
                || inner.counting.swap(true, Ordering::AcqRel)
            {
                return;
            }
        }
    }
}

impl Inner {
    /// The checks of a local live collection's upserts: the vector's length, finite
    /// values, a direction under cosine, and each field of the mapping convertible to its
    /// type (400s naming the document and the field). Fields not in the mapping are kept in
    /// `_src` only.
    fn check_docs(&self, docs: &[Doc]) -> Result<(), BackendError> {
        let bad = |m: String| Err(BackendError::Invalid(m));
        let declared: Vec<(String, FieldType)> = self
            .schema
            .fields
            .iter()
            .filter(|f| f.name != ID_KEY && f.name != SRC_KEY)
            .map(|f| (f.name.clone(), f.ty))
            .collect();
        let mut fw = FieldsWriter::new(FieldsConfig {
            declared: declared.clone(),
            skip: Vec::new(),
        });
        for (i, d) in docs.iter().enumerate() {
            let at = format!("docs[{i}]");
            if d.vector.len() != self.dim {
                return bad(format!(
                    "{at}.vector has {} dimensions, the collection has {}",
                    d.vector.len(),
                    self.dim
                ));
            }
            if let Some(j) = d.vector.iter().position(|x| !x.is_finite()) {
                return bad(format!("{at}.vector[{j}] is not a finite number"));
            }
            if self.distance == Distance::Cosine
                && d.vector
                    .iter()
                    .map(|&x| f64::from(x) * f64::from(x))
                    .sum::<f64>()
                    == 0.0
            {
                return bad(format!(
                    "{at}.vector is all zeros: it has no direction under cosine"
                ));
            }
            let mut map: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(&d.source).map_err(|e| {
                    BackendError::Invalid(format!("{at}: fields are not a JSON object: {e}"))
                })?;
            map.retain(|k, _| declared.iter().any(|(n, _)| n == k));
            fw.add(i as u32, &map)
                .map_err(|e| BackendError::Invalid(format!("{at}.fields: {e}")))?;
            for k in &self.translator.native_datetime {
                let ok = match map.get(k) {
                    None | Some(serde_json::Value::Null) => true,
                    Some(serde_json::Value::String(_)) => true,
                    Some(serde_json::Value::Array(a)) => a.iter().all(|x| x.is_string()),
                    Some(_) => false,
                };
                if !ok {
                    return bad(format!(
                        "{at}.fields: field \"{k}\" is a Qdrant datetime index: give RFC 3339 strings"
                    ));
                }
            }
        }
        Ok(())
    }

    /// A document as a point, in the layout `searchd ingest --to qdrant://` writes.
    fn point(&self, d: Doc) -> PointStruct {
        let mut p = super::admin::point_of(&d.id, d.vector, &d.source, &self.schema);
        if !self.translator.native_datetime.is_empty() {
            // Datetimes of a Qdrant datetime index stay RFC 3339 strings.
            let doc: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(&d.source).unwrap_or_default();
            for k in &self.translator.native_datetime {
                match doc.get(k) {
                    Some(v @ (serde_json::Value::String(_) | serde_json::Value::Array(_))) => {
                        p.payload
                            .insert(k.clone(), qdrant_client::qdrant::Value::from(v.clone()));
                    }
                    _ => {
                        p.payload.remove(k);
                    }
                }
            }
        }
        p
    }

    async fn upsert(&self, docs: Vec<Doc>, wait: bool) -> Result<Receipt, BackendError> {
        if docs.is_empty() {
            return Err(BackendError::Invalid(
                "docs is empty: nothing to write".into(),
            ));
        }
        self.check_docs(&docs)?;
        let n = docs.len() as u64;
        let points: Vec<PointStruct> = docs.into_iter().map(|d| self.point(d)).collect();
        let deadline = Instant::now() + WRITE_TIMEOUT;
        let msg = UpsertPoints {
            collection_name: self.target.collection.clone(),
            wait: Some(wait),
            points,
            timeout: Some(secs(deadline)),
            ..UpsertPoints::default()
        };
        let r = self
            .call(deadline, self.points().upsert(self.request(msg, deadline)))
            .await?;
        let (seq, applied) = outcome(r.result)?;
        Ok(Receipt {
            seq,
            applied,
            not_found: Vec::new(),
            deleted: 0,
            upserted: n,
        })
    }

    /// Deletes by id: the ids are looked up first, so those that do not exist are reported
    /// (as the local backend does) and nothing is sent when none exists.
    async fn delete(&self, ids: Vec<DocId>, wait: bool) -> Result<Receipt, BackendError> {
        let deadline = Instant::now() + WRITE_TIMEOUT;
        let mut pids: Vec<PointId> = ids.iter().map(point_id).collect();
        pids.sort_by(|a, b| id_order(Some(a), Some(b)));
        pids.dedup();
        let got = self.get_points(pids, &[ID_KEY], deadline).await?;
        let present: std::collections::HashSet<DocId> = got
            .iter()
            .map(|p| doc_id_of(p.id.as_ref(), &p.payload))
            .collect();
        let (found, not_found): (Vec<DocId>, Vec<DocId>) =
            ids.into_iter().partition(|id| present.contains(id));
        if found.is_empty() {
            return Ok(Receipt {
                seq: 0,
                applied: true,
                not_found,
                deleted: 0,
                upserted: 0,
            });
        }
        let mut pids: Vec<PointId> = found.iter().map(point_id).collect();
        pids.sort_by(|a, b| id_order(Some(a), Some(b)));
        pids.dedup();
        let (seq, applied) = self
            .delete_points(
                PointsSelectorOneOf::Points(PointsIdsList { ids: pids }),
                wait,
                deadline,
            )
            .await?;
        Ok(Receipt {
            seq,
            applied,
            not_found,
            deleted: found.len() as u64,
            upserted: 0,
        })
    }

    /// Deletes by filter (parsed as searches parse it): `deleted` is the exact count of
    /// matching points just before the delete.
    async fn delete_filter(
        &self,
        v: serde_json::Value,
        wait: bool,
    ) -> Result<Receipt, BackendError> {
        let parsed = SdFilter::parse_at(&v, &self.schema, "filter")
            .map_err(|e| BackendError::Invalid(e.to_string()))?;
        crate::backend::refuse_vacuous(&parsed)?;
        let filter = self.parse_filter(Some(&v), "filter")?.unwrap_or_default();
        let deadline = Instant::now() + WRITE_TIMEOUT;
        let n = self.count(Some(filter.clone()), deadline).await?;
        if n == 0 {
            return Ok(Receipt {
                seq: 0,
                applied: true,
                not_found: Vec::new(),
                deleted: 0,
                upserted: 0,
            });
        }
        let (seq, applied) = self
            .delete_points(PointsSelectorOneOf::Filter(filter), wait, deadline)
            .await?;
        Ok(Receipt {
            seq,
            applied,
            not_found: Vec::new(),
            deleted: n,
            upserted: 0,
        })
    }

    async fn delete_points(
        &self,
        sel: PointsSelectorOneOf,
        wait: bool,
        deadline: Instant,
    ) -> Result<(u64, bool), BackendError> {
        let msg = DeletePoints {
            collection_name: self.target.collection.clone(),
            wait: Some(wait),
            points: Some(PointsSelector {
                points_selector_one_of: Some(sel),
            }),
            timeout: Some(secs(deadline)),
            ..DeletePoints::default()
        };
        let r = self
            .call(deadline, self.points().delete(self.request(msg, deadline)))
            .await?;
        outcome(r.result)
    }
}

fn id_json(id: &DocId) -> serde_json::Value {
    match id {
        DocId::Int(n) => serde_json::Value::from(*n),
        DocId::Str(s) => serde_json::Value::String(s.clone()),
    }
}

/// A numeric sort value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    I(i64),
    F(f64),
}

impl Num {
    fn f(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
    fn json(self) -> serde_json::Value {
        match self {
            Num::I(i) => serde_json::Value::from(i),
            Num::F(f) => serde_json::Number::from_f64(f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
        }
    }
}

fn num_of(v: Option<&qdrant_client::qdrant::Value>, ty: FieldType) -> Option<Num> {
    let k = v?.kind.as_ref()?;
    let x = match k {
        Kind::IntegerValue(i) => Num::I(*i),
        Kind::DoubleValue(f) => Num::F(*f),
        Kind::ListValue(l) => return l.values.first().and_then(|x| num_of(Some(x), ty)),
        _ => return None,
    };
    Some(match (ty, x) {
        (FieldType::Float, Num::I(i)) => Num::F(i as f64),
        (_, x) => x,
    })
}

fn sort_batch(b: &mut [(Option<Num>, RetrievedPoint)], order: Order) {
    b.sort_by(|x, y| {
        let (a, c) = (x.0.map_or(f64::NAN, Num::f), y.0.map_or(f64::NAN, Num::f));
        let by_value = match order {
            Order::Asc => a.total_cmp(&c),
            Order::Desc => c.total_cmp(&a),
        };
        by_value.then_with(|| id_order(x.1.id.as_ref(), y.1.id.as_ref()))
    });
}

fn id_order(a: Option<&PointId>, b: Option<&PointId>) -> std::cmp::Ordering {
    let key = |p: Option<&PointId>| match p.and_then(|p| p.point_id_options.as_ref()) {
        Some(PointIdOptions::Num(n)) => (0u8, *n, String::new()),
        Some(PointIdOptions::Uuid(u)) => (1, 0, u.clone()),
        None => (2, 0, String::new()),
    };
    key(a).cmp(&key(b))
}

fn field_cond(key: &str) -> FieldCondition {
    FieldCondition {
        key: key.to_string(),
        ..FieldCondition::default()
    }
}

fn eq(field: &str, v: Num) -> Condition {
    let mut f = field_cond(field);
    match v {
        Num::I(i) => {
            f.r#match = Some(Match {
                match_value: Some(MatchValue::Integer(i)),
            })
        }
        Num::F(x) => {
            f.range = Some(Range {
                gte: Some(x),
                lte: Some(x),
                ..Range::default()
            })
        }
    }
    cond(ConditionOneOf::Field(f))
}

fn beyond(field: &str, v: Num, order: Order) -> Condition {
    let mut f = field_cond(field);
    f.range = Some(match order {
        Order::Asc => Range {
            gt: Some(v.f()),
            ..Range::default()
        },
        Order::Desc => Range {
            lt: Some(v.f()),
            ..Range::default()
        },
    });
    cond(ConditionOneOf::Field(f))
}

fn exists(field: &str) -> Condition {
    cond(ConditionOneOf::Filter(Filter {
        must_not: vec![cond(ConditionOneOf::IsEmpty(IsEmptyCondition {
            key: field.to_string(),
        }))],
        ..Filter::default()
    }))
}

/// How a sorted page is read from Qdrant.
enum PagePlan {
    /// Point id order (Qdrant's scroll order).
    ById,
    /// One numeric field (Qdrant's `order_by`), then the id.
    ByField {
        field: String,
        ty: FieldType,
        order: Order,
    },
}

impl PagePlan {
    fn of(schema: &Schema, v: &serde_json::Value) -> Result<PagePlan, BackendError> {
        let keys = searchd_fields::parse_sort(v, schema, "sort")
            .map_err(|e| BackendError::Invalid(e.to_string()))?;
        let bad = |m: String| Err(BackendError::Invalid(m));
        match keys.as_slice() {
            [] => Ok(PagePlan::ById),
            [k] | [k, _] if matches!(k.by, SortBy::Score) => bad(
                "sort: _score needs a query (vector or text); a filter alone gives no scores".into(),
            ),
            [k] if k.by == SortBy::Id => {
                if k.order == Order::Desc {
                    bad("sort: the Qdrant backend pages by id in ascending order only".into())
                } else {
                    Ok(PagePlan::ById)
                }
            }
            [k] | [k, _] => {
                if let [_, second] = keys.as_slice() {
                    if !(second.by == SortBy::Id && second.order == Order::Asc) {
                        return bad("sort: the Qdrant backend sorts by one field (then the id, ascending); several sort keys cannot be expressed in Qdrant's order_by".into());
                    }
                }
                let SortBy::Field(name) = &k.by else {
                    return bad("sort: unsupported key".into());
                };
                let spec = schema.get(name);
                match spec {
                    Some(s)
                        if matches!(s.ty, FieldType::Integer | FieldType::Float | FieldType::Datetime)
                            && !s.array =>
                    {
                        Ok(PagePlan::ByField {
                            field: name.clone(),
                            ty: s.ty,
                            order: k.order,
                        })
                    }
                    Some(s) => bad(format!(
                        "sort: \"{name}\" is a {}{} field; the Qdrant backend sorts by single-valued integer, float or datetime fields (Qdrant's order_by)",
                        if s.array { "multi-valued " } else { "" },
                        s.ty
                    )),
                    None => bad(format!("sort: unknown field \"{name}\"")),
                }
            }
            _ => bad("sort: the Qdrant backend sorts by one field (then the id, ascending); several sort keys cannot be expressed in Qdrant's order_by".into()),
        }
    }

    /// A value cursor: `[id]` for id order, `[value or null, id]` for a field.
    fn cursor(
        &self,
        v: &serde_json::Value,
        _schema: &Schema,
    ) -> Result<(Option<Num>, Option<DocId>), BackendError> {
        let bad = |m: &str| BackendError::Invalid(format!("after: {m}"));
        let Some(a) = v.as_array() else {
            return Err(bad("must be the sort values of the last hit (a list)"));
        };
        let id = |x: &serde_json::Value| -> Result<DocId, BackendError> {
            crate::wire::doc_id("after", x).map_err(|_| bad("the last value must be a document id"))
        };
        match (self, a.as_slice()) {
            (PagePlan::ById, [i]) => Ok((None, Some(id(i)?))),
            (PagePlan::ByField { ty, .. }, [v, i]) => {
                let n = match v {
                    serde_json::Value::Null => None,
                    serde_json::Value::Number(n) => Some(match ty {
                        FieldType::Float => Num::F(n.as_f64().unwrap_or(0.0)),
                        _ => Num::I(
                            n.as_i64()
                                .ok_or_else(|| bad("the value must be an integer"))?,
                        ),
                    }),
                    _ => return Err(bad("the first value must be a number or null")),
                };
                Ok((n, Some(id(i)?)))
            }
            (PagePlan::ById, _) => Err(bad("must have 1 value (the id) for this sort")),
            (PagePlan::ByField { .. }, _) => Err(bad(
                "must have 2 values (the field's value and the id) for this sort",
            )),
        }
    }
}

/// Buckets: count descending, then value ascending; the rest in `other_count`.
fn top_buckets(spec: &FacetSpec, mut all: Vec<(String, u64)>) -> FacetOutput {
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let other_count = all.iter().skip(spec.size).map(|b| b.1).sum();
    all.truncate(spec.size);
    FacetOutput {
        name: spec.name.clone(),
        field: spec.field.clone(),
        buckets: all,
        other_count,
    }
}

/// A terms facet over the hits' payloads (each document counted once per value).
fn facet_of_hits<'a>(
    spec: &FacetSpec,
    payloads: impl Iterator<Item = &'a HashMap<String, qdrant_client::qdrant::Value>>,
) -> FacetOutput {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for p in payloads {
        let mut vals: Vec<String> = Vec::new();
        match p.get(&spec.field).and_then(|v| v.kind.as_ref()) {
            Some(Kind::StringValue(s)) => vals.push(s.clone()),
            Some(Kind::ListValue(l)) => {
                for x in &l.values {
                    if let Some(Kind::StringValue(s)) = &x.kind {
                        vals.push(s.clone());
                    }
                }
            }
            _ => {}
        }
        vals.sort();
        vals.dedup();
        for v in vals {
            *counts.entry(v).or_default() += 1;
        }
    }
    top_buckets(spec, counts.into_iter().collect())
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
            "mapping": i.schema,
            "model": i.model,
        })
    }
    fn figures(&self) -> (u64, usize, u64) {
        (self.inner.points.load(Ordering::Relaxed), self.inner.dim, 0)
    }
    fn model(&self) -> Option<ModelRecord> {
        self.inner.model.clone()
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
                WriteOp::DeleteFilter(v) => inner.delete_filter(v, wait).await,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_ids_map_to_stable_uuids() {
        let a = uuid_of("doc-1");
        assert_eq!(a, uuid_of("doc-1"));
        assert_ne!(a, uuid_of("doc-2"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "8");
    }

    #[test]
    fn facet_buckets_order_and_other_count() {
        let spec = FacetSpec {
            name: "t".into(),
            field: "t".into(),
            size: 2,
        };
        let f = top_buckets(
            &spec,
            vec![
                ("b".into(), 3),
                ("a".into(), 3),
                ("c".into(), 5),
                ("d".into(), 1),
            ],
        );
        assert_eq!(f.buckets, vec![("c".into(), 5), ("a".into(), 3)]);
        assert_eq!(f.other_count, 4);
    }
}
