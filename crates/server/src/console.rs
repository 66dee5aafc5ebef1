//! The search console (`GET /`, `GET /console`): one HTML page, its script and its
//! stylesheet, embedded in the binary (`include_str!`: no build step, no node, nothing
//! fetched from elsewhere). The page uses only the public HTTP API (`/collections`,
//! `/collections/{name}/search|facet|count|scroll|docs/{id}`, `/stats`), so it is also an
//! example of it.
//!
//! Every asset is answered with its content type, `Cache-Control: no-cache` and an `ETag`
//! (a changed binary serves changed assets; an unchanged one answers 304), and the page
//! with a Content-Security-Policy that allows only its own origin: no inline script or
//! style, no other host.

use std::sync::LazyLock;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::error::{Code, Tagged};

/// The page, its script and its stylesheet.
const INDEX_HTML: &str = include_str!("console/index.html");
const CONSOLE_JS: &str = include_str!("console/console.js");
const CONSOLE_CSS: &str = include_str!("console/console.css");

/// Only this origin: scripts, styles, images and fetches; no frames, forms or plugins.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// One embedded asset with its strong ETag (computed once).
struct Asset {
    body: &'static str,
    content_type: &'static str,
    etag: HeaderValue,
}

impl Asset {
    fn new(body: &'static str, content_type: &'static str) -> Asset {
        let digest = Sha256::digest(body.as_bytes());
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        Asset {
            body,
            content_type,
            etag: HeaderValue::from_str(&format!("\"{hex}\""))
                .unwrap_or(HeaderValue::from_static("\"0\"")),
        }
    }

    /// The asset, or 304 when the request's `If-None-Match` names its ETag.
    fn reply(&self, req: &HeaderMap) -> Response {
        let fresh = req
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(',')
                    .any(|t| t.trim() == "*" || t.trim().as_bytes() == self.etag.as_bytes())
            });
        let mut r = if fresh {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            (StatusCode::OK, self.body).into_response()
        };
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert(header::ETAG, self.etag.clone());
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        h.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        r.extensions_mut().insert(Tagged(Code::Ok));
        r
    }
}

static PAGE: LazyLock<Asset> = LazyLock::new(|| Asset::new(INDEX_HTML, "text/html; charset=utf-8"));
static SCRIPT: LazyLock<Asset> =
    LazyLock::new(|| Asset::new(CONSOLE_JS, "text/javascript; charset=utf-8"));
static STYLE: LazyLock<Asset> =
    LazyLock::new(|| Asset::new(CONSOLE_CSS, "text/css; charset=utf-8"));

/// The console's HTML page (`GET /` without Elasticsearch's media type, `GET /console`).
pub(crate) fn page(headers: &HeaderMap) -> Response {
    PAGE.reply(headers)
}

/// `GET /console`.
pub(crate) async fn console(headers: HeaderMap) -> Response {
    page(&headers)
}

/// `GET /console/console.js`.
pub(crate) async fn script(headers: HeaderMap) -> Response {
    SCRIPT.reply(&headers)
}

/// `GET /console/console.css`.
pub(crate) async fn style(headers: HeaderMap) -> Response {
    STYLE.reply(&headers)
}
