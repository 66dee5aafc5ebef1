//! Writes: the checks of upserted documents, documents as points, upserts, deletes by id
//! and by filter, and what follows a write (the `wait=true` barrier behind writes not known
//! to be visible, the refresh of `/stats`' point count).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use qdrant_client::qdrant::{
    condition::ConditionOneOf, points_selector::PointsSelectorOneOf, DeletePoints, Distance,
    Filter, HasIdCondition, PointId, PointStruct, PointsIdsList, PointsSelector, UpdateResult,
    UpdateStatus, UpsertPoints,
};
use searchd_backend::Receipt;
use searchd_collection::live::{Doc, Dynamic};
use searchd_collection::{validate, DocId};
use searchd_fields::Filter as SdFilter;

use super::backend::Inner;
use super::conn::secs;
use super::layout::{cond, doc_id_of, point_id, ID_KEY};
use super::read::id_order;
use searchd_backend::BackendError;

/// How long a write may take at Qdrant (with `wait`, until it is visible).
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the task refreshing `/stats`' point count waits before counting, so the writes
/// of that interval share one count (an exact count scans the collection in Qdrant: one per
/// write cost single-document writes 2-6x their throughput).
const COUNT_REFRESH_DELAY: Duration = Duration::from_millis(500);

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
pub(super) fn after_write(inner: Arc<Inner>, barrier: bool) {
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
    /// The checks of a local live collection's upserts ([`validate::check_docs`]: the
    /// vector's length, finite values, a direction under cosine, each field of the mapping
    /// convertible to its type; 400s naming the document and the field), and RFC 3339
    /// strings for Qdrant datetime indexes. Fields not in the mapping are kept in `_src`
    /// only (mapping `dynamic: false`).
    fn check_docs(&self, docs: &[Doc]) -> Result<(), BackendError> {
        let rules = validate::DocRules {
            dim: self.dim,
            cosine: self.distance == Distance::Cosine,
            mapping: Some(&self.mapping),
            text_field: None,
            dynamic: Dynamic::False,
        };
        validate::check_docs(docs, &rules).map_err(|e| BackendError::Invalid(e.to_string()))?;
        if self.translator.native_datetime.is_empty() {
            return Ok(());
        }
        for (i, d) in docs.iter().enumerate() {
            let map: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(&d.source).unwrap_or_default();
            for k in &self.translator.native_datetime {
                let ok = match map.get(k) {
                    None | Some(serde_json::Value::Null) => true,
                    Some(serde_json::Value::String(_)) => true,
                    Some(serde_json::Value::Array(a)) => a.iter().all(|x| x.is_string()),
                    Some(_) => false,
                };
                if !ok {
                    return Err(BackendError::Invalid(format!(
                        "docs[{i}].fields: field \"{k}\" is a Qdrant datetime index: give RFC 3339 strings"
                    )));
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

    pub(super) async fn upsert(&self, docs: Vec<Doc>, wait: bool) -> Result<Receipt, BackendError> {
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
        Ok(Receipt::upserted(seq, applied, n))
    }

    /// Deletes by id: the ids are looked up first, so those that do not exist are reported
    /// (as the local backend does) and nothing is sent when none exists.
    pub(super) async fn delete(
        &self,
        ids: Vec<DocId>,
        wait: bool,
    ) -> Result<Receipt, BackendError> {
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
            return Ok(Receipt::nothing(not_found));
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
        Ok(Receipt::deleted(
            seq,
            applied,
            found.len() as u64,
            not_found,
        ))
    }

    /// Deletes by filter (parsed as searches parse it): `deleted` is the exact count of
    /// matching points just before the delete.
    pub(super) async fn delete_filter(
        &self,
        f: SdFilter,
        wait: bool,
    ) -> Result<Receipt, BackendError> {
        let filter = self.translate(Some(&f))?.unwrap_or_default();
        let deadline = Instant::now() + WRITE_TIMEOUT;
        let n = self.count(Some(filter.clone()), deadline).await?;
        if n == 0 {
            return Ok(Receipt::nothing(Vec::new()));
        }
        let (seq, applied) = self
            .delete_points(PointsSelectorOneOf::Filter(filter), wait, deadline)
            .await?;
        Ok(Receipt::deleted(seq, applied, n, Vec::new()))
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
