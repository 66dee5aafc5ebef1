//! One `Router` from every route module (CONTRACTS.md "HTTP API").

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::error::{ApiError, Code};
use crate::query::read_handler;
use crate::state::App;
use crate::{admin, es, native, observe, reads, writes};

pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/search", post(native::search))
        .route("/collections", get(native::collections))
        .route("/collections/{name}", get(native::collection_info))
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
        .route("/{name}/_doc/{id}", get(es::get_doc))
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
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Every route, the fallbacks too: with keys, nothing is answered to a caller
        // without one (but /health and /ready).
        .layer(axum::middleware::from_fn_with_state(app.clone(), gate))
        .with_state(app)
}

/// The key gate in front of every route: with `--api-keys`, a request needs a key that
/// allows its route ([`crate::auth::admit`]); without, it passes (admin routes then check
/// `--admin-token` or a loopback peer themselves).
async fn gate(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let Some(keys) = &app.keys else {
        return next.run(req).await;
    };
    match crate::auth::admit(keys, &req) {
        Ok(Some(caller)) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Ok(None) => next.run(req).await,
        Err(e) => e.into_response(),
    }
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
