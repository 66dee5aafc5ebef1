//! `searchd ingest --to qdrant://HOST:6334/NAME`: the documents are read, checked, typed and
//! embedded exactly as for a collection directory (into a staging collection with a flat
//! index, or the `--out` collection when one is asked for too, or the `--docs` directory when
//! it already is a searchd collection), then uploaded into Qdrant by
//! `searchd_server::qdrant::admin` (create, payload indexes, parallel batches with retries,
//! wait for green and fully indexed).
//!
//! What is uploaded is the collection's live state ([`LiveDocs::open`]): a collection that
//! took writes is read as a server opening it would serve it (deleted and replaced rows
//! left out, the write-ahead log's operations not yet in segments applied), also while a
//! server is writing to it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use searchd_collection::LiveDocs;
use searchd_server::qdrant::admin::{self, Existing, IngestOptions, Quantization};

use crate::text::IngestArgs;
use crate::util::{self, CliError, CmdResult};

fn input_or_io(e: String) -> CliError {
    if e.starts_with("cannot reach")
        || e.contains("already has a collection")
        || e.starts_with("cannot append")
    {
        CliError::Input(e)
    } else {
        CliError::Io(e)
    }
}

pub fn run(a: &IngestArgs) -> CmdResult {
    let q = &a.qdrant;
    let to = q.to.as_deref().unwrap_or_default();
    let (url, name) = admin::parse_target(to).map_err(CliError::Input)?;
    let quantization = match a.quantization.as_str() {
        "none" => Quantization::None,
        "sq8" => Quantization::Int8,
        "binary" => Quantization::Binary,
        other => {
            return Err(CliError::Input(format!(
            "--quantization {other} with --to qdrant: use none, sq8 (Qdrant scalar int8) or binary"
        )))
        }
    };
    if q.shards == 0
        || q.replicas == 0
        || q.write_consistency == 0
        || q.write_consistency > q.replicas
    {
        return Err(CliError::Input(format!(
            "--shards and --replicas must be at least 1 and --write-consistency between 1 and --replicas (got {}, {}, {})",
            q.shards, q.replicas, q.write_consistency
        )));
    }
    if q.upload_batch == 0 || q.upload_parallel == 0 {
        return Err(CliError::Input(
            "--upload-batch and --upload-parallel must be at least 1".into(),
        ));
    }
    let started = Instant::now();
    // The documents as a searchd collection.
    let mut staging: Option<PathBuf> = None;
    let dir = if searchd_collection::is_collection(&a.docs) {
        a.docs.clone()
    } else if let Some(out) = &a.out {
        crate::text::ingest_to_dir(a, out)?;
        out.clone()
    } else {
        let dir =
            std::env::temp_dir().join(format!("searchd-to-qdrant-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut local = a.clone();
        local.index = "flat".into();
        local.quantization = "none".into();
        local.no_lexical = true;
        local.lexical = false;
        local.json = None;
        staging = Some(dir.clone());
        let r = crate::text::ingest_to_dir(&local, &dir);
        if r.is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        r?;
        dir
    };
    // The collection's live state: its last commit, deleted sets and write-ahead log (a
    // served collection is read as its server sees it), not its segments' rows.
    let docs = LiveDocs::open(&dir, &Default::default()).map_err(|e| {
        let msg = format!("{}: {e}", dir.display());
        if e.is_input() {
            CliError::Input(msg)
        } else {
            CliError::Io(msg)
        }
    });
    let docs = match docs {
        Ok(d) => Arc::new(d),
        Err(e) => {
            if let Some(s) = &staging {
                let _ = std::fs::remove_dir_all(s);
            }
            return Err(e);
        }
    };
    let opts = IngestOptions {
        m: a.m as u64,
        ef_construct: a.ef_construction as u64,
        on_disk: q.on_disk,
        shards: q.shards,
        replicas: q.replicas,
        write_consistency: q.write_consistency,
        quantization,
        indexing_threshold_kb: q.indexing_threshold_kb,
        existing: if q.recreate {
            Existing::Recreate
        } else if q.append {
            Existing::Append
        } else {
            Existing::Refuse
        },
        batch: q.upload_batch,
        parallel: q.upload_parallel,
        retries: 5,
        wait_timeout: Duration::from_secs(q.wait_timeout_s),
        text_field: Some(a.text_field.clone()),
        defer_indexing: q.defer_indexing,
        wait_indexed: !q.no_wait,
    };
    let total = docs.len();
    let bar = util::bar(total, "upload");
    let progress = {
        let bar = bar.clone();
        Arc::new(move |done: u64| bar.set_position(done)) as Arc<dyn Fn(u64) + Send + Sync>
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::Io(e.to_string()))?;
    let report = rt.block_on(admin::ingest_collection(&url, &name, docs, &opts, progress));
    crate::util::done(&bar);
    if let Some(s) = &staging {
        let _ = std::fs::remove_dir_all(s);
    }
    let r = report.map_err(input_or_io)?;
    if !r.waited {
        println!(
            "uploaded {} documents into Qdrant collection {name} at {url} in {:.1}s ({} per upsert, {} in flight{}; {} retries; not waiting for green: {} of {} vectors indexed so far), {:.1}s in all",
            r.points,
            r.upload_s,
            r.batch,
            r.parallel,
            if r.deferred_indexing { ", indexing deferred" } else { "" },
            r.retries,
            r.indexed_vectors,
            r.points_in_collection,
            started.elapsed().as_secs_f64()
        );
    } else {
        println!(
        "uploaded {} documents into Qdrant collection {name} at {url} in {:.1}s (upload {:.1}s, then {:.1}s to green with {} of {} vectors indexed{}; {} retries), {:.1}s in all",
        r.points,
        r.upload_s + r.index_wait_s,
        r.upload_s,
        r.index_wait_s,
        r.indexed_vectors,
        r.points_in_collection,
        if r.below_indexing_threshold {
            "; the rest in segments below Qdrant's indexing threshold, searched exactly"
        } else {
            ""
        },
        r.retries,
        started.elapsed().as_secs_f64()
    );
    }
    if let Some(path) = &a.json {
        let v = serde_json::json!({"schema": "searchd.qdrant_ingest.v1", "to": to, "report": r,
            "total_s": started.elapsed().as_secs_f64()});
        std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap_or_default())
            .map_err(|e| CliError::Io(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}
