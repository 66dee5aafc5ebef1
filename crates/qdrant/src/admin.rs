//! Writing a Qdrant collection from a searchd collection (`searchd ingest --to
//! qdrant://HOST:6334/NAME`): create it (vector params, HNSW, shards, replicas, write
//! consistency, quantization, the searchd metadata), declare the payload indexes of the
//! mapping, upload the points in parallel batches with retries, then wait until Qdrant
//! reports the collection green with every vector indexed. The points of a collection are
//! its live documents ([`LiveDocs`]), never its segments' rows.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use qdrant_client::qdrant::{
    collections_client::CollectionsClient, points_client::PointsClient,
    qdrant_client::QdrantClient, quantization_config, value::Kind, vectors_config,
    BinaryQuantization, CollectionExistsRequest, CollectionInfo, CollectionStatus,
    CreateCollection, CreateFieldIndexCollection, DeleteCollection, Distance,
    FieldType as QFieldType, GetCollectionInfoRequest, HealthCheckRequest, HnswConfigDiff,
    ListValue, OptimizersConfigDiff, PointStruct, QuantizationConfig, QuantizationType,
    ScalarQuantization, UpdateCollection, UpsertPoints, Value, VectorParams, VectorsConfig,
};
use searchd_collection::{DocId, LiveDocs};
use searchd_engine::Metric;
use searchd_fields::{typed_values, FieldType, Schema, TypedValue};
use tonic::transport::{Channel, Endpoint};

use super::layout::{point_id, read_meta, vector_params, SearchdMeta, ID_KEY, META_KEY, SRC_KEY};

/// `qdrant://HOST:PORT/NAME` (or `http(s)://HOST:PORT/NAME`) as (gRPC URL, collection).
pub fn parse_target(s: &str) -> Result<(String, String), String> {
    let (scheme, rest) = if let Some(r) = s.strip_prefix("qdrant://") {
        ("http", r)
    } else if let Some(r) = s.strip_prefix("http://") {
        ("http", r)
    } else if let Some(r) = s.strip_prefix("https://") {
        ("https", r)
    } else {
        return Err(format!(
            "--to {s:?}: expected qdrant://HOST:6334/COLLECTION"
        ));
    };
    let Some((host, name)) = rest.split_once('/') else {
        return Err(format!(
            "--to {s:?}: no collection name (expected qdrant://HOST:6334/COLLECTION)"
        ));
    };
    let name = name.trim_end_matches('/');
    if host.is_empty()
        || name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!(
            "--to {s:?}: expected qdrant://HOST:6334/COLLECTION, the name made of letters, digits, '-', '_' or '.'"
        ));
    }
    let host = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:6334")
    };
    Ok((format!("{scheme}://{host}"), name.to_string()))
}

/// Quantization of the Qdrant collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantization {
    /// No quantization (full float32 vectors).
    None,
    /// Scalar int8 (searchd's sq8).
    Int8,
    /// Binary (1 bit per dimension).
    Binary,
}

/// What an existing collection of the same name gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Fail with an error (the default).
    Refuse,
    /// Delete it and create it anew.
    Recreate,
    /// Add the points to it (its dimension, metric and model must match).
    Append,
}

/// Collection and upload parameters.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// HNSW `m`: links per node.
    pub m: u64,
    /// HNSW `ef_construct`: candidate list size while building.
    pub ef_construct: u64,
    /// Keep vectors, the HNSW graph and payloads on disk rather than in memory.
    pub on_disk: bool,
    /// Number of shards.
    pub shards: u32,
    /// Replicas of each shard.
    pub replicas: u32,
    /// Replicas that must acknowledge each write.
    pub write_consistency: u32,
    /// Quantization of the collection.
    pub quantization: Quantization,
    /// Qdrant's optimizer `indexing_threshold` in KB (`None`: Qdrant's default).
    pub indexing_threshold_kb: Option<u64>,
    /// What an existing collection of the same name gets.
    pub existing: Existing,
    /// Points per upsert.
    pub batch: usize,
    /// Upserts in flight.
    pub parallel: usize,
    /// Attempts per batch on transient errors (unavailable, overloaded, timeout).
    pub retries: usize,
    /// Longest wait for green and fully indexed.
    pub wait_timeout: Duration,
    /// The field whose text was embedded, recorded in the collection's metadata (`None`: the spec's).
    pub text_field: Option<String>,
    /// Upload with Qdrant's HNSW indexing switched off (`indexing_threshold` 0), then switch
    /// it back on (to `indexing_threshold_kb`, or what the collection had) and build each
    /// segment's graph once, instead of indexing segments while points still arrive
    /// (Qdrant's bulk-upload advice). Default false.
    pub defer_indexing: bool,
    /// Wait for green and fully indexed before returning (default true); false returns once
    /// every upsert is acknowledged and applied, with the indexing still going on.
    pub wait_indexed: bool,
}

/// Points per upsert by default: the best of a measured sweep (1M x 384 into one node on
/// 2 cores, `bench/results/qdrant-synth1m.md`: 64 / 256 / 1,024 points x 1 / 2 / 4 / 8 in
/// flight; 1,024 x 8 uploaded 43k points/s, 256 x 2 30k, 64 x 1 15k).
pub const DEFAULT_UPLOAD_BATCH: usize = 1024;
/// Upserts in flight by default (see [`DEFAULT_UPLOAD_BATCH`]).
pub const DEFAULT_UPLOAD_PARALLEL: usize = 8;

/// Qdrant's default optimizer `indexing_threshold` (KB).
pub const DEFAULT_INDEXING_THRESHOLD_KB: u64 = 10_000;

impl Default for IngestOptions {
    fn default() -> IngestOptions {
        IngestOptions {
            m: 16,
            ef_construct: 200,
            on_disk: false,
            shards: 1,
            replicas: 1,
            write_consistency: 1,
            quantization: Quantization::None,
            indexing_threshold_kb: None,
            existing: Existing::Refuse,
            batch: DEFAULT_UPLOAD_BATCH,
            parallel: DEFAULT_UPLOAD_PARALLEL,
            retries: 5,
            wait_timeout: Duration::from_secs(3600),
            text_field: None,
            defer_indexing: false,
            wait_indexed: true,
        }
    }
}

/// What an ingest did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IngestReport {
    /// Points uploaded.
    pub points: u64,
    /// Seconds spent uploading.
    pub upload_s: f64,
    /// From the last upsert to green with every vector indexed (but for segments below the
    /// indexing threshold).
    pub index_wait_s: f64,
    /// Seconds from the start to the end of the ingest.
    pub total_s: f64,
    /// Upsert attempts repeated after a transient error.
    pub retries: u64,
    /// Points in the collection at the end.
    pub points_in_collection: u64,
    /// Vectors Qdrant has indexed at the end.
    pub indexed_vectors: u64,
    /// Some vectors (`points_in_collection - indexed_vectors`) are in segments below Qdrant's
    /// indexing threshold, which Qdrant keeps unindexed and searches exactly; "fully indexed"
    /// then means green with only such segments left.
    pub below_indexing_threshold: bool,
    /// Points per upsert and upserts in flight.
    pub batch: usize,
    /// Upserts in flight.
    pub parallel: usize,
    /// The upload ran with indexing switched off (`defer_indexing`).
    pub deferred_indexing: bool,
    /// The wait for green and fully indexed ran (`wait_indexed`); when false, `index_wait_s`
    /// is 0 and the counts are those right after the upload.
    pub waited: bool,
}

fn distance_of(m: Metric) -> Distance {
    match m {
        Metric::Cosine => Distance::Cosine,
        Metric::InnerProduct => Distance::Dot,
        Metric::L2 => Distance::Euclid,
    }
}

fn metric_name(m: Metric) -> &'static str {
    match m {
        Metric::Cosine => "cosine",
        Metric::InnerProduct => "ip",
        Metric::L2 => "l2",
    }
}

fn typed_json(t: TypedValue) -> Value {
    match t {
        TypedValue::Keyword(s) => Value::from(s),
        TypedValue::Int(i) => Value::from(i),
        TypedValue::Float(f) => Value::from(f),
        TypedValue::Bool(b) => Value::from(b),
    }
}

/// The payload of one document: its source, its string id, its typed fields.
pub fn payload_of(id: &DocId, source: &[u8], schema: &Schema) -> HashMap<String, Value> {
    let mut p = HashMap::new();
    p.insert(
        SRC_KEY.to_string(),
        Value::from(String::from_utf8_lossy(source).into_owned()),
    );
    if let DocId::Str(s) = id {
        p.insert(ID_KEY.to_string(), Value::from(s.clone()));
    }
    let doc: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(source).unwrap_or_default();
    for f in &schema.fields {
        if f.name == ID_KEY || f.name == SRC_KEY {
            continue;
        }
        let Some(v) = doc.get(&f.name) else { continue };
        let vals = typed_values(f.ty, v);
        if vals.is_empty() {
            continue;
        }
        let value = if vals.len() == 1 && !v.is_array() {
            typed_json(vals.into_iter().next().expect("one"))
        } else {
            Value {
                kind: Some(Kind::ListValue(ListValue {
                    values: vals.into_iter().map(typed_json).collect(),
                })),
            }
        };
        p.insert(f.name.clone(), value);
    }
    p
}

/// The point of one document as `searchd ingest --to qdrant://` writes it (and the Qdrant
/// backend's upserts): [`point_id`], the vector, [`payload_of`].
pub fn point_of(id: &DocId, vector: Vec<f32>, source: &[u8], schema: &Schema) -> PointStruct {
    PointStruct {
        id: Some(point_id(id)),
        payload: payload_of(id, source, schema),
        vectors: Some(vector.into()),
    }
}

/// What a new Qdrant collection is made of (and what an append must match).
#[derive(Debug, Clone)]
pub struct CollectionSpec {
    /// Dimensions of the vectors.
    pub dim: usize,
    /// Distance metric of the vectors.
    pub metric: Metric,
    /// The documents' fields and their types.
    pub schema: Schema,
    /// The model that embedded the documents (`None`: vectors were given).
    pub model: Option<searchd_collection::ModelRecord>,
    /// The field whose text was embedded, if any.
    pub text_field: Option<String>,
}

/// Makes the points of rows `from..to` of an upload.
pub type PointSource = Arc<dyn Fn(u64, u64) -> Result<Vec<PointStruct>, String> + Send + Sync>;

fn transient(s: &tonic::Status) -> bool {
    use tonic::Code as C;
    matches!(
        s.code(),
        C::Unavailable
            | C::ResourceExhausted
            | C::DeadlineExceeded
            | C::Internal
            | C::Unknown
            | C::Aborted
    )
}

pub(crate) async fn connect(url: &str) -> Result<Channel, String> {
    let ch = Endpoint::from_shared(url.to_string())
        .map_err(|e| format!("{url}: {e}"))?
        .connect_timeout(Duration::from_secs(3))
        .tcp_nodelay(true)
        .connect_lazy();
    match tokio::time::timeout(
        Duration::from_secs(5),
        QdrantClient::new(ch.clone()).health_check(HealthCheckRequest {}),
    )
    .await
    {
        Ok(Ok(_)) => Ok(ch),
        Ok(Err(e)) => Err(format!(
            "cannot reach Qdrant at {url}: {} (is it running? the gRPC port is 6334 by default)",
            e.message()
        )),
        Err(_) => Err(format!(
            "cannot reach Qdrant at {url}: no answer within 5 s (is it running? the gRPC port is 6334 by default)"
        )),
    }
}

/// Upload the live documents `docs` into the Qdrant collection `name` at `url`: each
/// document once, as its last acknowledged write left it (deleted and replaced rows are not
/// sent; see [`LiveDocs`]); `progress` gets the number of points uploaded so far.
pub async fn ingest_collection(
    url: &str,
    name: &str,
    docs: Arc<LiveDocs>,
    opts: &IngestOptions,
    progress: Arc<dyn Fn(u64) + Send + Sync>,
) -> Result<IngestReport, String> {
    let coll = docs.collection();
    let spec = CollectionSpec {
        dim: coll.dim(),
        metric: coll.metric(),
        schema: coll.schema().clone(),
        model: coll.model().cloned(),
        text_field: coll.manifest().and_then(|m| m.text_field.clone()),
    };
    let total = docs.len();
    let schema = spec.schema.clone();
    let source: PointSource = Arc::new(move |from, to| {
        let mut pts = Vec::with_capacity((to - from) as usize);
        for i in from..to {
            let d = docs.get(i).map_err(|e| e.to_string())?;
            let src = d.source.unwrap_or_else(|| b"{}".to_vec());
            pts.push(point_of(&d.id, d.vector, &src, &schema));
        }
        Ok(pts)
    });
    ingest_points(url, name, &spec, total, source, opts, progress).await
}

/// Upload `total` points made by `source` into the Qdrant collection `name` at `url`
/// (created per `opts.existing` from `spec`), then wait for green and fully indexed;
/// `progress` gets the number of points uploaded so far.
// `on_disk` and `always_ram` are deprecated in the 1.20 protocol in favour of `memory`, which
// Qdrant 1.18 servers do not know yet; the old fields are what 1.18 reads.
#[allow(deprecated)]
pub async fn ingest_points(
    url: &str,
    name: &str,
    spec: &CollectionSpec,
    total: u64,
    source: PointSource,
    opts: &IngestOptions,
    progress: Arc<dyn Fn(u64) + Send + Sync>,
) -> Result<IngestReport, String> {
    let started = Instant::now();
    let ch = connect(url).await?;
    let mut colls = CollectionsClient::new(ch.clone());
    let exists = colls
        .collection_exists(CollectionExistsRequest {
            collection_name: name.to_string(),
        })
        .await
        .map_err(|e| format!("Qdrant at {url}: {}", e.message()))?
        .into_inner()
        .result
        .is_some_and(|r| r.exists);
    let dim = spec.dim;
    let distance = distance_of(spec.metric);
    let schema = spec.schema.clone();
    let mut create = true;
    if exists {
        match opts.existing {
            Existing::Refuse => {
                return Err(format!(
                    "Qdrant at {url} already has a collection {name:?}; pass --recreate to replace it or --append to add these documents to it"
                ))
            }
            Existing::Recreate => {
                colls
                    .delete(DeleteCollection {
                        collection_name: name.to_string(),
                        timeout: Some(60),
                    })
                    .await
                    .map_err(|e| format!("cannot delete {name}: {}", e.message()))?;
            }
            Existing::Append => {
                let info = collection_info(&mut colls, name).await?;
                let (d, dist) = vector_params(&info, name)?;
                if d != dim || dist != distance {
                    return Err(format!(
                        "cannot append: Qdrant collection {name} has {d}-dimensional {} vectors, these documents have {dim}-dimensional {} ones",
                        dist.as_str_name(),
                        distance.as_str_name()
                    ));
                }
                if let (Some(theirs), Some(ours)) = (read_meta(&info).and_then(|m| m.model), spec.model.as_ref()) {
                    if theirs.checksum != ours.checksum {
                        return Err(format!(
                            "cannot append: Qdrant collection {name} was embedded with model {} ({}), these documents with {} ({})",
                            theirs.name, theirs.checksum, ours.name, ours.checksum
                        ));
                    }
                }
                create = false;
            }
        }
    }
    if create {
        let meta = SearchdMeta {
            mapping: Some(schema.clone()),
            model: spec.model.clone(),
            metric: Some(metric_name(spec.metric).to_string()),
            text_field: opts.text_field.clone().or_else(|| spec.text_field.clone()),
        };
        let quantization = match opts.quantization {
            Quantization::None => None,
            Quantization::Int8 => Some(QuantizationConfig {
                quantization: Some(quantization_config::Quantization::Scalar(
                    ScalarQuantization {
                        r#type: QuantizationType::Int8 as i32,
                        quantile: Some(0.99),
                        always_ram: Some(true),
                        ..ScalarQuantization::default()
                    },
                )),
            }),
            Quantization::Binary => Some(QuantizationConfig {
                quantization: Some(quantization_config::Quantization::Binary(
                    BinaryQuantization {
                        always_ram: Some(true),
                        ..BinaryQuantization::default()
                    },
                )),
            }),
        };
        let mut metadata = HashMap::new();
        metadata.insert(
            META_KEY.to_string(),
            Value::from(serde_json::to_string(&meta).map_err(|e| e.to_string())?),
        );
        colls
            .create(CreateCollection {
                collection_name: name.to_string(),
                vectors_config: Some(VectorsConfig {
                    config: Some(vectors_config::Config::Params(VectorParams {
                        size: dim as u64,
                        distance: distance as i32,
                        on_disk: Some(opts.on_disk),
                        ..VectorParams::default()
                    })),
                }),
                hnsw_config: Some(HnswConfigDiff {
                    m: Some(opts.m),
                    ef_construct: Some(opts.ef_construct),
                    on_disk: Some(opts.on_disk),
                    ..HnswConfigDiff::default()
                }),
                optimizers_config: opts.indexing_threshold_kb.map(|t| OptimizersConfigDiff {
                    indexing_threshold: Some(t),
                    ..OptimizersConfigDiff::default()
                }),
                shard_number: Some(opts.shards),
                replication_factor: Some(opts.replicas),
                write_consistency_factor: Some(opts.write_consistency),
                on_disk_payload: Some(opts.on_disk),
                quantization_config: quantization,
                metadata,
                timeout: Some(60),
                ..CreateCollection::default()
            })
            .await
            .map_err(|e| format!("cannot create Qdrant collection {name}: {}", e.message()))?;
        // Payload indexes before the upload, so Qdrant builds them as points arrive.
        let mut points = PointsClient::new(ch.clone());
        for f in &schema.fields {
            if f.name == ID_KEY || f.name == SRC_KEY {
                continue;
            }
            let ty = match f.ty {
                FieldType::Keyword => QFieldType::Keyword,
                FieldType::Integer | FieldType::Datetime => QFieldType::Integer,
                FieldType::Float => QFieldType::Float,
                FieldType::Bool => QFieldType::Bool,
            };
            points
                .create_field_index(CreateFieldIndexCollection {
                    collection_name: name.to_string(),
                    wait: Some(true),
                    field_name: f.name.clone(),
                    field_type: Some(ty as i32),
                    ..CreateFieldIndexCollection::default()
                })
                .await
                .map_err(|e| format!("cannot index payload field {}: {}", f.name, e.message()))?;
        }
    }

    // Deferred indexing: remember the threshold to restore, switch indexing off.
    let restore_threshold = if opts.defer_indexing {
        let had = if create {
            None
        } else {
            collection_info(&mut colls, name)
                .await?
                .config
                .and_then(|c| c.optimizer_config)
                .and_then(|o| o.indexing_threshold)
        };
        set_indexing_threshold(&mut colls, name, 0).await?;
        Some(
            opts.indexing_threshold_kb
                .or(had)
                .unwrap_or(DEFAULT_INDEXING_THRESHOLD_KB),
        )
    } else {
        None
    };

    // Upload: `parallel` tasks, each taking the next batch of rows.
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let retried = Arc::new(AtomicU64::new(0));
    let batch = opts.batch.max(1) as u64;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..opts.parallel.max(1) {
        let (next, done, retried, source, ch, progress) = (
            next.clone(),
            done.clone(),
            retried.clone(),
            source.clone(),
            ch.clone(),
            progress.clone(),
        );
        let name = name.to_string();
        let retries = opts.retries;
        tasks.spawn(async move {
            let mut client = PointsClient::new(ch).max_encoding_message_size(256 << 20);
            loop {
                let from = next.fetch_add(batch, Ordering::Relaxed);
                if from >= total {
                    return Ok::<(), String>(());
                }
                let to = (from + batch).min(total);
                let pts = source(from, to)?;
                let n = pts.len() as u64;
                let mut attempt = 0;
                loop {
                    let req = UpsertPoints {
                        collection_name: name.clone(),
                        wait: Some(true),
                        points: pts.clone(),
                        ..UpsertPoints::default()
                    };
                    match client.upsert(req).await {
                        Ok(_) => break,
                        Err(e) if transient(&e) && attempt < retries => {
                            attempt += 1;
                            retried.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(100 << attempt.min(6))).await;
                        }
                        Err(e) => {
                            return Err(format!(
                                "upsert of points {from}..{to} failed after {attempt} retries: {}",
                                e.message()
                            ))
                        }
                    }
                }
                let d = done.fetch_add(n, Ordering::Relaxed) + n;
                progress(d);
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| format!("upload task failed: {e}"))??;
    }
    let uploaded = Instant::now();
    if let Some(t) = restore_threshold {
        set_indexing_threshold(&mut colls, name, t).await?;
    }
    let report = |pts: u64, idx: u64, waited: bool| IngestReport {
        points: total,
        upload_s: (uploaded - started).as_secs_f64(),
        index_wait_s: if waited {
            uploaded.elapsed().as_secs_f64()
        } else {
            0.0
        },
        total_s: started.elapsed().as_secs_f64(),
        retries: retried.load(Ordering::Relaxed),
        points_in_collection: pts,
        indexed_vectors: idx,
        below_indexing_threshold: idx < pts,
        batch: opts.batch,
        parallel: opts.parallel,
        deferred_indexing: opts.defer_indexing,
        waited,
    };
    if !opts.wait_indexed {
        let info = collection_info(&mut colls, name).await?;
        return Ok(report(
            info.points_count.unwrap_or(0),
            info.indexed_vectors_count.unwrap_or(0),
            false,
        ));
    }

    // Wait for green with every vector indexed, but for segments below Qdrant's indexing
    // threshold: Qdrant leaves those unindexed (it searches them exactly), so once green the
    // vectors left unindexed must fit in such segments. Green three polls in a row, so a
    // green seen before the optimizer picked the upload up does not end the wait.
    let mut streak = 0;
    let (points_in, indexed) = loop {
        let info = collection_info(&mut colls, name).await?;
        let pts = info.points_count.unwrap_or(0);
        let idx = info.indexed_vectors_count.unwrap_or(0);
        let threshold_kb = info
            .config
            .as_ref()
            .and_then(|c| c.optimizer_config.as_ref())
            .and_then(|o| o.indexing_threshold)
            .unwrap_or(10_000);
        let unindexed_kb = pts.saturating_sub(idx) * dim as u64 * 4 / 1024;
        let small = unindexed_kb < threshold_kb * info.segments_count.max(1);
        let green = info.status == CollectionStatus::Green as i32;
        if green && (idx >= pts || small) {
            streak += 1;
            if streak >= 3 {
                break (pts, idx);
            }
        } else {
            streak = 0;
        }
        if uploaded.elapsed() > opts.wait_timeout {
            return Err(format!(
                "Qdrant collection {name} is not green and fully indexed after {} s (status {}, {idx} of {pts} vectors indexed)",
                opts.wait_timeout.as_secs(),
                CollectionStatus::try_from(info.status).map_or("unknown", |s| s.as_str_name())
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    Ok(report(points_in, indexed, true))
}

async fn collection_info(
    colls: &mut CollectionsClient<Channel>,
    name: &str,
) -> Result<CollectionInfo, String> {
    Ok(colls
        .get(GetCollectionInfoRequest {
            collection_name: name.to_string(),
        })
        .await
        .map_err(|e| format!("cannot read {name}: {}", e.message()))?
        .into_inner()
        .result
        .unwrap_or_default())
}

/// Set the collection's optimizer `indexing_threshold` (KB; 0 switches HNSW indexing off).
async fn set_indexing_threshold(
    colls: &mut CollectionsClient<Channel>,
    name: &str,
    kb: u64,
) -> Result<(), String> {
    colls
        .update(UpdateCollection {
            collection_name: name.to_string(),
            optimizers_config: Some(OptimizersConfigDiff {
                indexing_threshold: Some(kb),
                ..OptimizersConfigDiff::default()
            }),
            timeout: Some(600),
            ..UpdateCollection::default()
        })
        .await
        .map_err(|e| {
            format!(
                "cannot set the indexing threshold of {name}: {}",
                e.message()
            )
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(
            parse_target("qdrant://127.0.0.1:6334/docs").unwrap(),
            ("http://127.0.0.1:6334".into(), "docs".into())
        );
        assert_eq!(
            parse_target("qdrant://qd/docs").unwrap(),
            ("http://qd:6334".into(), "docs".into())
        );
        assert!(parse_target("qdrant://host:6334").is_err());
        assert!(parse_target("ftp://x/y").is_err());
        assert!(parse_target("qdrant://h/bad name").is_err());
    }
}
