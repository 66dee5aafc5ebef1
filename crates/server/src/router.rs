//! One `Router` from every route module (CONTRACTS.md "HTTP API").

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header::HOST, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;

use crate::error::{ApiError, Code};
use crate::query::read_handler;
use crate::state::App;
use crate::{admin, console, es, es_write, manage, native, observe, openapi, reads, writes};

pub(crate) fn router(app: Arc<App>) -> Router {
    let cors = cors_layer(&app.cfg.cors_origin);
    let r = Router::new()
        .route("/search", post(native::search))
        .route(
            "/collections",
            get(native::collections).post(manage::create),
        )
        .route(
            "/collections/{name}",
            get(native::collection_info).delete(manage::delete),
        )
        .route("/collections/{name}/mapping", put(manage::put_mapping))
        .route(
            "/collections/{name}/search",
            post(native::collection_search),
        )
        .route(
            "/collections/{name}/docs/{id}",
            get(native::get_doc).delete(writes::delete_one),
        )
        .route("/collections/{name}/docs", post(writes::upsert))
        .route("/collections/{name}/delete", post(writes::delete_many))
        .route("/collections/{name}/snapshot", post(writes::snapshot))
        .route(
            "/collections/{name}/count",
            post(read_handler("count", reads::COUNT, reads::count)),
        )
        .route(
            "/collections/{name}/facet",
            post(read_handler("facet", reads::FACET, reads::facet)),
        )
        .route(
            "/collections/{name}/scroll",
            post(read_handler("scroll", reads::SCROLL, reads::scroll)),
        )
        .route("/{name}/_search", {
            let h = read_handler("_search", es::search_rule(), es::search);
            get(h.clone()).post(h)
        })
        .route("/{name}/_count", {
            let h = read_handler("_count", es::COUNT, es::count);
            get(h.clone()).post(h)
        })
        .route(
            "/{name}/_doc/{id}",
            get(es::get_doc)
                .put(es_write::index_doc)
                .post(es_write::index_doc)
                .delete(es_write::delete_doc),
        )
        .route(
            "/{name}/_bulk",
            post(es_write::bulk_index).put(es_write::bulk_index),
        )
        .route("/_bulk", post(es_write::bulk_any).put(es_write::bulk_any))
        .route("/{name}/_mapping", get(es_write::get_mapping))
        .route("/{name}", get(es_write::get_index))
        .route("/_cat/indices", get(es_write::cat_indices))
        .route("/", get(root))
        .route("/console", get(console::console))
        .route("/console/console.js", get(console::script))
        .route("/console/console.css", get(console::style))
        .route("/version", get(version))
        .route("/{name}/_mget", {
            let h = read_handler("_mget", es::MGET, es::mget);
            get(h.clone()).post(h)
        })
        .route("/health", get(observe::health))
        .route("/healthz", get(observe::health))
        .route("/ready", get(observe::ready))
        .route("/readyz", get(observe::ready))
        .route("/stats", get(observe::stats))
        .route("/metrics", get(observe::metrics))
        .route("/admin/reload", post(admin::reload))
        .route("/openapi.json", get(openapi::serve))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Every route, the fallbacks too: with keys, nothing is answered to a caller
        // without one (but /health and /ready).
        .layer(axum::middleware::from_fn_with_state(app.clone(), gate))
        .with_state(app);
    // Outside the gate: a browser's preflight carries no key.
    match cors {
        Some(c) => r.layer(c),
        None => r,
    }
}

/// CORS for `--cors-origin` (none: no layer, no CORS headers).
fn cors_layer(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| axum::http::HeaderValue::from_str(o).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::DELETE,
                Method::HEAD,
            ])
            .allow_headers([
                axum::http::header::AUTHORIZATION,
                axum::http::header::CONTENT_TYPE,
                axum::http::HeaderName::from_static("api-key"),
            ])
            .expose_headers([
                axum::http::HeaderName::from_static("x-searchd-cache"),
                axum::http::HeaderName::from_static("x-elastic-product"),
            ])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

/// `GET /version`: the build's version, git commit and features.
async fn version() -> Response {
    let features: Vec<&str> = [("qdrant", cfg!(feature = "qdrant"))]
        .into_iter()
        .filter_map(|(n, on)| on.then_some(n))
        .collect();
    crate::wire::json_response(
        axum::http::StatusCode::OK,
        serde_json::to_vec(&serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "git": option_env!("SEARCHD_GIT").unwrap_or("unknown"),
            "features": features,
        }))
        .unwrap_or_default(),
    )
}

/// The gate in front of every route (the fallbacks too):
/// - the `Host` check ([`crate::host`]) when the server has no API keys;
/// - with `--api-keys`, a request needs a key that allows its route
///   ([`crate::auth::admit`]); without, it passes (admin routes then check
///   `--admin-token` or a loopback peer themselves);
/// - with `--audit-log`, writes, admin actions and refusals are recorded as they end
///   ([`crate::audit`]).
async fn gate(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let audit = app.audit.as_deref().map(|a| {
        let need = crate::auth::need(req.method(), req.uri().path());
        let peer = req
            .extensions()
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map_or_else(String::new, |c| c.0.to_string());
        // The route template when one matched (this gate wraps each route), else the path.
        let route = req
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .map_or_else(|| req.uri().path().to_string(), |m| m.as_str().to_string());
        (a, need, req.method().clone(), route, peer)
    });
    let mut caller = None;
    let es = es_shaped(&req);
    let pretty = wants_pretty(req.uri());
    let mut resp = if app.keys.is_none()
        && !crate::host::allowed(
            req.headers().get(HOST).map(|h| h.as_bytes()),
            &app.cfg.allow_host,
        )
        && !matches!(
            req.uri().path(),
            "/health" | "/healthz" | "/ready" | "/readyz"
        ) {
        ApiError::new(
            Code::Forbidden,
            crate::host::refusal(req.headers().get(HOST).map(|h| h.as_bytes())),
        )
        .into_response()
    } else {
        match &app.keys {
            None => next.run(req).await,
            // `GET /` is the console's page, open as its assets are (`auth::need`), except
            // for an Elasticsearch client: its root needs a key, as Elasticsearch's does.
            Some(_) if console_root(&req) => next.run(req).await,
            Some(keys) => match crate::auth::admit(keys, &req) {
                Ok(Some(c)) => {
                    caller = Some(c.key.clone());
                    req.extensions_mut().insert(c);
                    next.run(req).await
                }
                Ok(None) => next.run(req).await,
                Err(e) => e.into_response(),
            },
        }
    };
    if es && resp.status().as_u16() >= 400 {
        resp = es_error_shape(resp).await;
    }
    if pretty {
        resp = prettify(resp, app.cfg.max_reply_bytes).await;
    }
    if es {
        resp.headers_mut().insert(
            "x-elastic-product",
            axum::http::HeaderValue::from_static("Elasticsearch"),
        );
    }
    if let Some((log, need, method, route, peer)) = audit {
        let status = resp.status().as_u16();
        let changes = need
            .as_ref()
            .is_some_and(|n| n.scope >= crate::auth::Scope::Write);
        if changes || status == 401 || status == 403 {
            log.record(&crate::audit::Entry {
                time: crate::audit::now_rfc3339(),
                key: caller.as_deref(),
                peer,
                method: method.as_str(),
                route: &route,
                collection: need.as_ref().and_then(|n| n.collection.as_deref()),
                status,
                code: resp
                    .extensions()
                    .get::<crate::error::Tagged>()
                    .map(|t| t.0.as_str())
                    .filter(|_| status >= 400),
            });
        }
    }
    resp
}

/// `GET /` (or `HEAD`) for the console's page rather than Elasticsearch's root.
fn console_root(req: &Request) -> bool {
    matches!(*req.method(), Method::GET | Method::HEAD)
        && req.uri().path() == "/"
        && !es_write::wants_es(req.headers())
}

/// `GET /`: Elasticsearch's root shape for its clients (they ask for its media type),
/// else the search console.
async fn root(req: Request) -> Response {
    if es_write::wants_es(req.headers()) {
        return es_write::es_root();
    }
    console::page(req.headers())
}

/// An error reply of an Elasticsearch-shaped request also in Elasticsearch's shape: the
/// error keeps searchd's `code` and `message` and gains `type`, `reason` and `root_cause`,
/// and the reply gains `status` (`{"error": {"code", "message", "type", "reason",
/// "root_cause": [{"type", "reason"}]}, "status": N}`), so a client written for either
/// reads what it expects. Replies already in Elasticsearch's shape (a missing `_doc`)
/// and anything that is not searchd's error object pass unchanged.
async fn es_error_shape(resp: Response) -> Response {
    let Some(code) = resp.extensions().get::<crate::error::Tagged>().map(|t| t.0) else {
        return resp;
    };
    let status = resp.status().as_u16();
    let (mut parts, body) = resp.into_parts();
    // Error bodies are a message long; anything larger is not one of them.
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
        return ApiError::new(Code::Internal, "the error reply could not be read").into_response();
    };
    let mut v: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(_) => return Response::from_parts(parts, axum::body::Body::from(bytes)),
    };
    let is_ours = v["error"]["code"].is_string() && v["error"]["type"].is_null();
    if !is_ours {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    }
    let kind = es_write::es_error_type(code);
    let reason = v["error"]["message"].clone();
    v["error"]["type"] = kind.into();
    v["error"]["reason"] = reason.clone();
    v["error"]["root_cause"] = serde_json::json!([{"type": kind, "reason": reason}]);
    v["status"] = status.into();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(
        parts,
        axum::body::Body::from(serde_json::to_vec(&v).unwrap_or_else(|_| bytes.to_vec())),
    )
}

/// `?pretty` (or `pretty=true`): JSON replies indented, as Elasticsearch and Qdrant do.
fn wants_pretty(uri: &Uri) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&')
            .any(|kv| kv == "pretty" || kv == "pretty=true" || kv == "pretty=")
    })
}

/// A JSON reply re-serialised with indentation (other replies as they are).
async fn prettify(resp: Response, limit: usize) -> Response {
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return ApiError::new(
            Code::Internal,
            "the reply could not be read to pretty-print it",
        )
        .into_response();
    };
    let out = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| serde_json::to_vec_pretty(&v).ok())
        .map(|mut v| {
            v.push(b'\n');
            v
        })
        .unwrap_or_else(|| bytes.to_vec());
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(out))
}

/// Replies of Elasticsearch-shaped requests carry `X-Elastic-Product: Elasticsearch`,
/// which the official clients check: routes with a `_` segment (`_search`, `_doc`,
/// `_bulk`, `_cat`, ...) and any request asking for Elasticsearch's media type.
fn es_shaped(req: &Request) -> bool {
    req.uri().path().split('/').any(|s| s.starts_with('_')) || es_write::wants_es(req.headers())
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        Code::NotFound,
        format!("no route for {method} {}", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        Code::MethodNotAllowed,
        format!("{} does not accept {method}", uri.path()),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// Every `(METHOD, path)` that [`super::router`] routes, read from this file's source:
    /// each `.route("PATH", ...)` of `fn router` and the method routers (`get(..)`,
    /// `.post(..)`, ...) written in it.
    fn routed() -> BTreeSet<(String, String)> {
        let src = include_str!("router.rs");
        let start = src
            .find("pub(crate) fn router(")
            .expect("fn router in router.rs");
        let body = &src[start..];
        let end = body.find(".fallback(").expect(".fallback( ends the routes");
        let body = &body[..end];
        let mut out = BTreeSet::new();
        for chunk in body.split(".route(").skip(1) {
            let chunk = chunk.trim_start();
            let path = chunk
                .strip_prefix('"')
                .and_then(|c| c.split('"').next())
                .unwrap_or_else(|| panic!("a .route( without a literal path: {chunk:.60}"));
            let mut methods = 0;
            for m in [
                "get", "post", "put", "delete", "patch", "head", "options", "any",
            ] {
                let pat = format!("{m}(");
                let mut at = 0;
                while let Some(i) = chunk[at..].find(&pat) {
                    let i = at + i;
                    let before = chunk[..i].chars().next_back();
                    if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        assert_ne!(m, "any", "{path}: any(..) cannot be documented per method");
                        out.insert((m.to_uppercase(), path.to_string()));
                        methods += 1;
                    }
                    at = i + pat.len();
                }
            }
            assert!(methods > 0, "no method found for route {path}");
        }
        out
    }

    fn documented() -> (serde_json::Value, BTreeSet<(String, String)>) {
        let doc: serde_json::Value =
            serde_json::from_slice(&crate::openapi::document_bytes()).unwrap();
        let mut out = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                out.insert((method.to_uppercase(), path.clone()));
            }
        }
        (doc, out)
    }

    #[test]
    fn the_route_parser_reads_this_router() {
        let r = routed();
        // Spot checks of the parser on the shapes router.rs uses.
        for (m, p) in [
            ("POST", "/search"),
            ("GET", "/collections"),
            ("POST", "/collections"),
            ("DELETE", "/collections/{name}/docs/{id}"),
            ("GET", "/{name}/_search"),
            ("POST", "/{name}/_search"),
            ("PUT", "/{name}/_doc/{id}"),
            ("PUT", "/_bulk"),
            ("GET", "/openapi.json"),
        ] {
            assert!(r.contains(&(m.to_string(), p.to_string())), "{m} {p}");
        }
        assert!(r.len() >= 40, "{} routes read", r.len());
    }

    /// A route added to the router must be described in /openapi.json (and nothing is
    /// described that is not routed).
    #[test]
    fn every_route_is_in_the_openapi_document() {
        let routed = routed();
        let (_, documented) = documented();
        let missing: Vec<_> = routed.difference(&documented).collect();
        assert!(
            missing.is_empty(),
            "routes missing from the OpenAPI document (openapi/mod.rs `operations`): {missing:?}"
        );
        let extra: Vec<_> = documented.difference(&routed).collect();
        assert!(
            extra.is_empty(),
            "the OpenAPI document describes routes the router does not have: {extra:?}"
        );
    }

    /// The document's security matches `auth::need`: open operations are those it lets
    /// through without a key.
    #[test]
    fn open_operations_are_the_ones_auth_lets_through() {
        let (doc, documented) = documented();
        for (method, path) in documented {
            // `GET /` is decided by the gate (console page, or Elasticsearch's root with a key).
            if path == "/" {
                continue;
            }
            let open = doc["paths"][&path][method.to_lowercase()]["security"]
                .as_array()
                .is_some_and(|s| {
                    s.iter()
                        .any(|r| r.as_object().is_some_and(|o| o.is_empty()))
                });
            let concrete = path.replace("{name}", "docs").replace("{id}", "1");
            let m: axum::http::Method = method.parse().unwrap();
            assert_eq!(
                open,
                crate::auth::need(&m, &concrete).is_none(),
                "{method} {path}: open in the document and in auth::need differ"
            );
        }
    }
}
