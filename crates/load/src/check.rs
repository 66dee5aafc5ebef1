//! Checking one answer.

use serde::Deserialize;

use crate::stats::ErrorKind;

/// What an answer must look like.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// Status 200, body ignored (e.g. `GET /health`).
    StatusOnly,
    /// Status 200 and a search answer (see [`check_search_body`]).
    Search,
    /// As `Search`, but with at most the expected hits: lexical search returns only the
    /// documents that match a query word, which may be fewer than k.
    SearchUpTo,
    /// A `--mix` request: any 2xx status and, when the body is not empty, valid JSON
    /// (see [`check_mix_answer`]).
    Mix,
}

/// Map an HTTP status to ok or an error kind.
pub fn check_status(status: u16) -> Result<(), ErrorKind> {
    match status {
        200 => Ok(()),
        503 => Err(ErrorKind::Http503),
        504 => Err(ErrorKind::Http504),
        400..=499 => Err(ErrorKind::Http4xx),
        500..=599 => Err(ErrorKind::Http5xx),
        _ => Err(ErrorKind::HttpOther),
    }
}

/// A document id: an integer (rows of the base file, comparable with `--gt`) or a string.
#[derive(Deserialize)]
#[serde(untagged)]
enum HitId {
    Int(i64),
    Str(String),
}

#[derive(Deserialize)]
struct Hit {
    id: HitId,
    score: f64,
}

#[derive(Deserialize)]
struct SearchdAnswer {
    hits: Vec<Hit>,
    #[allow(dead_code)]
    took_us: f64,
}

/// Qdrant's REST search answer (`POST /collections/NAME/points/search`), so the load lab
/// measures Qdrant directly with the same checks and recall.
#[derive(Deserialize)]
struct QdrantAnswer {
    result: Vec<Hit>,
    #[allow(dead_code)]
    status: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AnyAnswer {
    Searchd(SearchdAnswer),
    Qdrant(QdrantAnswer),
}

struct SearchAnswer {
    hits: Vec<Hit>,
}

/// Check a `POST /search` answer body: JSON `{"hits":[{"id":..,"score":..}],"took_us":..}`
/// (other fields allowed), exactly `expect_hits` hits, scores non-increasing,
/// integer ids >= 0 and below `n_max` when given. On success the hit ids are
/// left in `ids` (cleared first).
pub fn check_search_body(
    body: &[u8],
    expect_hits: usize,
    n_max: Option<u64>,
    ids: &mut Vec<i64>,
) -> Result<(), ErrorKind> {
    check_hits(body, expect_hits..=expect_hits, n_max, ids)
}

fn check_hits(
    body: &[u8],
    count: std::ops::RangeInclusive<usize>,
    n_max: Option<u64>,
    ids: &mut Vec<i64>,
) -> Result<(), ErrorKind> {
    ids.clear();
    let ans = match serde_json::from_slice(body).map_err(|_| ErrorKind::BadBody)? {
        AnyAnswer::Searchd(a) => SearchAnswer { hits: a.hits },
        AnyAnswer::Qdrant(a) => SearchAnswer { hits: a.result },
    };
    if !count.contains(&ans.hits.len()) {
        return Err(ErrorKind::WrongCount);
    }
    if ans.hits.windows(2).any(|w| w[0].score < w[1].score) {
        return Err(ErrorKind::Unsorted);
    }
    for h in &ans.hits {
        match &h.id {
            HitId::Int(id) => {
                if *id < 0 || n_max.is_some_and(|n| *id as u64 >= n) {
                    return Err(ErrorKind::BadId);
                }
                ids.push(*id);
            }
            // String ids (collections with their own ids) cannot be checked against row
            // numbers; recall against --gt needs integer ids equal to the rows.
            HitId::Str(s) if s.is_empty() => return Err(ErrorKind::BadId),
            HitId::Str(_) => {}
        }
    }
    Ok(())
}

/// Check a whole answer: status first, then the body when `check` is `Search`.
pub fn check_response(
    check: Check,
    status: u16,
    body: &[u8],
    expect_hits: usize,
    n_max: Option<u64>,
    ids: &mut Vec<i64>,
) -> Result<(), ErrorKind> {
    if check == Check::Mix {
        ids.clear();
        return check_mix_answer(status, body);
    }
    check_status(status)?;
    match check {
        Check::StatusOnly | Check::Mix => Ok(()),
        Check::Search => check_search_body(body, expect_hits, n_max, ids),
        Check::SearchUpTo => check_hits(body, 0..=expect_hits, n_max, ids),
    }
}

/// Check an answer to a `--mix` request: a 2xx status (others map as
/// [`check_status`] does) and a body that is empty or valid JSON (`bad_body`
/// otherwise).
pub fn check_mix_answer(status: u16, body: &[u8]) -> Result<(), ErrorKind> {
    if !(200..300).contains(&status) {
        check_status(status)?;
        return Err(ErrorKind::HttpOther);
    }
    if body.trim_ascii().is_empty() {
        return Ok(());
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .map(|_| ())
        .map_err(|_| ErrorKind::BadBody)
}

/// recall@k of one answer against its exact neighbours (not tie-aware):
/// |answer ∩ truth[..k]| / k with k = min(answer k, truth width).
pub fn recall_of(answer: &[i64], truth: &[i64], k: usize) -> f64 {
    let k = k.min(truth.len());
    if k == 0 {
        return 0.0;
    }
    let t = &truth[..k];
    let hit = answer.iter().take(k).filter(|id| t.contains(id)).count();
    hit as f64 / k as f64
}
