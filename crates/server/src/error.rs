//! Errors: the server's own ([`ServerError`]) and the per-request JSON errors of the
//! HTTP contract ([`Code`], [`ApiError`]).

use std::path::PathBuf;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is invalid (the message says why).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The index could not be opened.
    #[error("cannot open the index: {0}")]
    Index(#[from] searchd_engine::Error),
    /// The collection could not be opened.
    #[error("cannot open the collection: {0}")]
    Collection(#[from] searchd_collection::Error),
    /// The query matrix could not be read.
    #[error("cannot read the query matrix: {0}")]
    Queries(#[from] searchd_vecio::Error),
    /// The query matrix's dimension differs from the index's.
    #[error("{path}: the query matrix has {queries} dimensions, the index has {index}")]
    QueryDim {
        /// The query matrix file.
        path: PathBuf,
        /// Dimensions of the query vectors.
        queries: usize,
        /// Dimensions of the index vectors.
        index: usize,
    },
    /// The async runtime or a thread could not be started.
    #[error("cannot start the async runtime or threads: {0}")]
    Runtime(#[source] std::io::Error),
    /// Any other I/O error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Outcome of one request, as the `code` of the contract's error table (plus `ok`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// 200: the request succeeded.
    Ok,
    /// 400: the body is not valid JSON.
    InvalidJson,
    /// 400: the request is well-formed JSON but an argument is invalid.
    InvalidArgument,
    /// 401: no valid API key (with `--api-keys`), or an admin route without the right
    /// bearer token.
    Unauthorized,
    /// 403: a key whose scope or collections do not cover the route, or an admin route
    /// from a non-loopback peer while no admin token is set.
    Forbidden,
    /// 404: no such route, collection or document.
    NotFound,
    /// 405: the route does not take this method.
    MethodNotAllowed,
    /// 408: the request was not read in time.
    RequestTimeout,
    /// 413: the body is larger than the body limit.
    BodyTooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 500: an unexpected server error.
    Internal,
    /// 503: too many requests in flight or queued.
    Overloaded,
    /// 503: the server is not ready to serve.
    NotReady,
    /// 504: the request's deadline passed.
    DeadlineExceeded,
    /// 400: the request is not valid HTTP/1.1 (answered for hyper's parser).
    BadRequest,
    /// 414: the request target is too long.
    UriTooLong,
    /// 431: the request's headers are larger than `--max-header-bytes`.
    HeadersTooLarge,
    /// 409: the operation conflicts with one in progress (a second reload).
    Conflict,
    /// 503: the server is shutting down.
    ShuttingDown,
    /// The disk is full: the write was refused, nothing acknowledged before is lost (507).
    InsufficientStorage,
    /// 400: the request's aggregations and facets ask for more buckets than
    /// `--max-buckets` allows (refused before any work).
    TooManyBuckets,
    /// 400: the reply would be larger than `--max-reply-bytes`.
    ReplyTooLarge,
}

impl Code {
    /// Every code, in the order of the contract's table.
    pub const ALL: [Code; 22] = [
        Code::Ok,
        Code::InvalidJson,
        Code::InvalidArgument,
        Code::Unauthorized,
        Code::Forbidden,
        Code::NotFound,
        Code::MethodNotAllowed,
        Code::RequestTimeout,
        Code::BodyTooLarge,
        Code::UnsupportedMediaType,
        Code::Internal,
        Code::Overloaded,
        Code::NotReady,
        Code::DeadlineExceeded,
        Code::BadRequest,
        Code::UriTooLong,
        Code::HeadersTooLarge,
        Code::Conflict,
        Code::ShuttingDown,
        Code::InsufficientStorage,
        Code::TooManyBuckets,
        Code::ReplyTooLarge,
    ];

    /// The `code` string of the JSON error body (for example `invalid_json`).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Ok => "ok",
            Code::InvalidJson => "invalid_json",
            Code::InvalidArgument => "invalid_argument",
            Code::Unauthorized => "unauthorized",
            Code::Forbidden => "forbidden",
            Code::NotFound => "not_found",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::RequestTimeout => "request_timeout",
            Code::BodyTooLarge => "body_too_large",
            Code::UnsupportedMediaType => "unsupported_media_type",
            Code::Internal => "internal",
            Code::Overloaded => "overloaded",
            Code::NotReady => "not_ready",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::BadRequest => "bad_request",
            Code::UriTooLong => "uri_too_long",
            Code::HeadersTooLarge => "headers_too_large",
            Code::Conflict => "conflict",
            Code::ShuttingDown => "shutting_down",
            Code::InsufficientStorage => "insufficient_storage",
            Code::TooManyBuckets => "too_many_buckets",
            Code::ReplyTooLarge => "reply_too_large",
        }
    }

    /// The HTTP status answered with this code.
    pub fn status(self) -> StatusCode {
        match self {
            Code::Ok => StatusCode::OK,
            Code::InvalidJson
            | Code::InvalidArgument
            | Code::BadRequest
            | Code::TooManyBuckets
            | Code::ReplyTooLarge => StatusCode::BAD_REQUEST,
            Code::UriTooLong => StatusCode::URI_TOO_LONG,
            Code::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Code::Conflict => StatusCode::CONFLICT,
            Code::Unauthorized => StatusCode::UNAUTHORIZED,
            Code::Forbidden => StatusCode::FORBIDDEN,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Code::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Code::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::Overloaded | Code::NotReady | Code::ShuttingDown => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Code::InsufficientStorage => StatusCode::INSUFFICIENT_STORAGE,
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A JSON error reply: `{"error": {"code": ..., "message": ...}}`.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
    /// Close the connection after this reply (part of the request was not read).
    pub close: bool,
}

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            close: false,
        }
    }
    /// The same error, closing the connection after the reply.
    pub fn closing(mut self) -> ApiError {
        self.close = true;
        self
    }
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(Code::InvalidArgument, message)
    }
}

/// Put on every response so the connection layer can count it by code.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tagged(pub Code);

pub(crate) const JSON: HeaderValue = HeaderValue::from_static("application/json");

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(48 + self.message.len());
        body.extend_from_slice(b"{\"error\":{\"code\":\"");
        body.extend_from_slice(self.code.as_str().as_bytes());
        body.extend_from_slice(b"\",\"message\":");
        // serde_json escapes the message correctly; writing a String to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut body, &self.message);
        body.extend_from_slice(b"}}");
        let mut resp = (self.code.status(), body).into_response();
        let h = resp.headers_mut();
        h.insert(header::CONTENT_TYPE, JSON);
        if self.close {
            h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        match self.code {
            Code::Overloaded | Code::NotReady | Code::ShuttingDown => {
                h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Code::BodyTooLarge | Code::RequestTimeout => {
                // The rest of the body was not read: the connection cannot be reused.
                h.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Code::Unauthorized => {
                h.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"searchd\""),
                );
            }
            _ => {}
        }
        resp.extensions_mut().insert(Tagged(self.code));
        resp
    }
}

impl Code {
    /// The code of an error status raised outside our handlers (axum's extractors, the
    /// router): the JSON body the contract promises for it.
    pub(crate) fn of_status(status: StatusCode) -> Code {
        match status.as_u16() {
            400 | 422 => Code::InvalidArgument,
            401 => Code::Unauthorized,
            403 => Code::Forbidden,
            404 => Code::NotFound,
            405 => Code::MethodNotAllowed,
            408 => Code::RequestTimeout,
            409 => Code::Conflict,
            413 => Code::BodyTooLarge,
            414 => Code::UriTooLong,
            415 => Code::UnsupportedMediaType,
            431 => Code::HeadersTooLarge,
            503 => Code::Overloaded,
            504 => Code::DeadlineExceeded,
            _ => Code::Internal,
        }
    }
}

/// A whole HTTP/1.1 reply with the JSON error body, closing the connection: written
/// straight to a socket where there is no handler (hyper's own parse errors, refused
/// connections).
pub(crate) fn raw_reply(code: Code, message: &str) -> Vec<u8> {
    let mut body = Vec::with_capacity(48 + message.len());
    body.extend_from_slice(b"{\"error\":{\"code\":\"");
    body.extend_from_slice(code.as_str().as_bytes());
    body.extend_from_slice(b"\",\"message\":");
    let _ = serde_json::to_writer(&mut body, message);
    body.extend_from_slice(b"}}");
    let status = code.status();
    let mut out = Vec::with_capacity(body.len() + 160);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("Error").as_bytes());
    out.extend_from_slice(b"\r\ncontent-type: application/json\r\nconnection: close\r\n");
    if status == StatusCode::SERVICE_UNAVAILABLE {
        out.extend_from_slice(b"retry-after: 1\r\n");
    }
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(body.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(&body);
    out
}
