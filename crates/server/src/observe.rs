//! Probes and figures: `/health`, `/ready`, `/stats`, `/metrics`.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, Code};
use crate::state::{not_ready, App};
use crate::stats::process_stats;
use crate::wire::{json_response, v1_index_info};

pub(crate) async fn health() -> Response {
    json_response(StatusCode::OK, b"{\"status\":\"ok\"}".to_vec())
}

pub(crate) async fn ready(State(app): State<Arc<App>>) -> Response {
    // A probe needs no key: with keys, its reasons are shown without directories.
    let shown = |why: String| {
        if app.keys.is_some() {
            crate::auth::redact_text(&why)
        } else {
            why
        }
    };
    if let Some(why) = not_ready(&app) {
        return ApiError::new(Code::NotReady, shown(why)).into_response();
    }
    if let Some(why) = app
        .slots()
        .iter()
        .find_map(|s| s.backend.load_full().and_then(|b| b.ready().err()))
    {
        return ApiError::new(Code::NotReady, shown(why)).into_response();
    }
    json_response(StatusCode::OK, b"{\"status\":\"ready\"}".to_vec())
}

pub(crate) async fn stats(
    State(app): State<Arc<App>>,
    caller: Option<axum::Extension<crate::auth::Caller>>,
) -> Response {
    let s = &app.stats;
    let (latency, qps, _) = s.window();
    let slots = app.slots();
    let index = slots[0]
        .backend
        .load_full()
        .map(|b| v1_index_info(&b.info()));
    let collections: serde_json::Map<String, serde_json::Value> = slots
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                match (s.backend.load_full(), s.failed.load_full()) {
                    (Some(b), _) => b.info(),
                    (None, Some(why)) => serde_json::json!({"state": "failed", "reason": *why}),
                    (None, None) => serde_json::Value::Null,
                },
            )
        })
        .collect();
    let mut cache = app
        .cache
        .as_ref()
        .map_or_else(|| serde_json::json!({"enabled": false}), |c| c.json());
    if let Some(t) = &app.shared {
        cache["shared"] = t.json();
    }
    let (waiting_in_line, refusals_held_now, refusals_held) = app.admission.line();
    let mut memory = memory_breakdown(&collections, app.cfg.load.pool.as_ref());
    // Collections with a budget of their own: each one's pool, by name.
    if !app.cfg.collection_pools.is_empty() {
        memory["collection_budgets"] = app
            .cfg
            .collection_pools
            .iter()
            .map(|(name, p)| {
                (
                    name.clone(),
                    serde_json::json!({"budget": p.budget(), "pool": p.stats()}),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    let mut v = serde_json::json!({
        "uptime_s": (s.uptime().as_secs_f64() * 1e3).round() / 1e3,
        "memory": memory,
        "index": index,
        "requests": s.totals(),
        "collections": collections,
        "embedder": app.embedder.as_ref().map(|b| serde_json::json!({"model": b.record, "batching": b.stats.json()})),
        "reranker": app.reranker.as_ref().map(|r| r.info()),
        "cache": cache,
        "stages": s.stages(),
        "inflight": app.inflight(),
        "queued": app.admission.queued(),
        "admission": {
            "shed_by_wait": app.admission.shed_by_wait(),
            "waiting_in_line": waiting_in_line,
            "refusals_held_now": refusals_held_now,
            "refusals_held": refusals_held,
            "completion_interval_ms": app.admission.completion_interval().map(crate::wire::ms),
        },
        "running": app.pool.running(),
        "latency_ms": latency,
        // Rounded, as every rate and duration in replies (no float noise such as 0.1716300886).
        "qps_1m": (qps * 1e3).round() / 1e3,
        "process": process_stats(),
        "reloads": s.reloads.load(Relaxed),
        "config": {
            "threads": app.cfg.threads,
            "max_inflight": app.cfg.max_inflight,
            "queue": app.cfg.queue,
            "max_queue_wait_ms": app.cfg.max_queue_wait.map(|d| d.as_millis() as u64),
            "refusal_hold_ms": app.admission.hold().as_millis() as u64,
            "timeout_ms": app.cfg.timeout.as_millis() as u64,
            "ef": app.cfg.ef,
            "body_limit": app.cfg.body_limit,
        },
    });
    if !crate::auth::sees_paths(app.keys.is_some(), caller.as_deref()) {
        crate::auth::redact_paths(&mut v);
    }
    json_response(
        StatusCode::OK,
        serde_json::to_vec(&v).unwrap_or_else(|_| b"{}".to_vec()),
    )
}

/// `/stats` `memory`: every part of every segment with its bytes and placement, what is
/// resident in private memory (parts placed `ram` and the partitions the graph manager
/// holds), and the graph managers' totals. Mapped parts live in the page cache and count
/// only as far as they are touched (the process's RSS, under `process`, says how far).
fn memory_breakdown(
    collections: &serde_json::Map<String, serde_json::Value>,
    pool: Option<&searchd_engine::MemoryPool>,
) -> serde_json::Value {
    let mut parts = Vec::new();
    let mut resident = 0u64;
    let (mut p_resident, mut p_bytes, mut loads, mut evictions) = (0u64, 0u64, 0u64, 0u64);
    let mut load_ms_p99 = 0f64;
    for (name, info) in collections {
        let Some(segments) = info.get("segment_details").and_then(|d| d.as_array()) else {
            continue;
        };
        for seg in segments {
            let Some(mem) = seg.get("memory") else {
                continue;
            };
            let segment = seg.get("name").cloned().unwrap_or_default();
            let placement = mem.get("placement");
            let mut part = |part: &str, bytes: u64, placed: serde_json::Value| {
                if bytes == 0 {
                    return;
                }
                if placed == "ram" {
                    resident += bytes;
                }
                parts.push(serde_json::json!({
                    "collection": name, "segment": segment, "part": part,
                    "bytes": bytes, "placement": placed,
                }));
            };
            for key in ["vectors", "graph", "codes"] {
                let placed = placement
                    .and_then(|p| p.get(key))
                    .cloned()
                    .unwrap_or_default();
                part(key, mem[key].as_u64().unwrap_or(0), placed);
            }
            // Stored documents, BM25 and field indexes: their own files, read through the
            // page cache.
            for key in ["docs", "lexical", "fields"] {
                part(key, mem[key].as_u64().unwrap_or(0), "files".into());
            }
            if let Some(ps) = mem.get("partitions").filter(|p| !p.is_null()) {
                let n = |k: &str| ps[k].as_u64().unwrap_or(0);
                part("partitions", n("resident_bytes"), "ram".into());
                p_resident += n("resident");
                p_bytes += n("resident_bytes");
                loads += n("loads");
                evictions += n("evictions");
                load_ms_p99 = load_ms_p99.max(ps["load_ms_p99"].as_f64().unwrap_or(0.0));
            }
        }
    }
    serde_json::json!({
        "budget": pool.map(|p| p.budget()),
        "budget_scope": "process",
        // The budget's accounts: routing pinned by the open partitioned indexes, their
        // resident partitions, loads in flight, and the most taken at once.
        "pool": pool.map(|p| p.stats()),
        "resident": resident,
        "parts": parts,
        "partitions": {
            "resident": p_resident,
            "resident_bytes": p_bytes,
            "loads": loads,
            "evictions": evictions,
            "load_ms_p99": load_ms_p99,
        },
    })
}

pub(crate) async fn metrics(State(app): State<Arc<App>>) -> Response {
    let text = crate::stats::render_metrics(
        &app.stats,
        app.inflight(),
        app.admission.queued(),
        &app.limits,
        app.figures(),
        crate::stats::CacheTiers {
            local: app.cache.as_ref().map(|c| {
                let k = c.counters();
                [
                    k.hits.load(Relaxed),
                    k.misses.load(Relaxed),
                    k.inserts.load(Relaxed),
                    k.evictions.load(Relaxed),
                    c.bytes(),
                ]
            }),
            shared: app.shared.as_ref().map(|t| t.figures()),
        },
        app.audit
            .as_ref()
            .map(|a| [a.lines.load(Relaxed), a.errors.load(Relaxed)]),
    );
    let mut r = (StatusCode::OK, text).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

// ---------------------------------------------------------------------------------------
// Request bodies
