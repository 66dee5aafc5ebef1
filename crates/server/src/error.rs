//! Errors: the server's own ([`ServerError`]) and the per-request JSON errors of the
//! HTTP contract ([`Code`], [`ApiError`]).

use std::path::PathBuf;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the index: {0}")]
    Index(#[from] searchd_engine::Error),
    #[error("cannot open the collection: {0}")]
    Collection(#[from] searchd_collection::Error),
    #[error("cannot read the query matrix: {0}")]
    Queries(#[from] searchd_vecio::Error),
    #[error("{path}: the query matrix has {queries} dimensions, the index has {index}")]
    QueryDim {
        path: PathBuf,
        queries: usize,
        index: usize,
    },
    #[error("cannot start the async runtime or threads: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Outcome of one request, as the `code` of the contract's error table (plus `ok`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    Ok,
    InvalidJson,
    InvalidArgument,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    BodyTooLarge,
    UnsupportedMediaType,
    Internal,
    Overloaded,
    NotReady,
    DeadlineExceeded,
    /// A write to a collection that is not open for writing (409).
    Conflict,
    /// The disk is full: the write was refused, nothing acknowledged before is lost (507).
    InsufficientStorage,
}

impl Code {
    pub const ALL: [Code; 16] = [
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
        Code::Conflict,
        Code::InsufficientStorage,
    ];

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
            Code::Conflict => "conflict",
            Code::InsufficientStorage => "insufficient_storage",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Code::Ok => StatusCode::OK,
            Code::InvalidJson | Code::InvalidArgument => StatusCode::BAD_REQUEST,
            Code::Unauthorized => StatusCode::UNAUTHORIZED,
            Code::Forbidden => StatusCode::FORBIDDEN,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Code::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Code::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::Overloaded | Code::NotReady => StatusCode::SERVICE_UNAVAILABLE,
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Code::Conflict => StatusCode::CONFLICT,
            Code::InsufficientStorage => StatusCode::INSUFFICIENT_STORAGE,
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A JSON error reply: `{"error": {"code": ..., "message": ...}}`.
#[derive(Debug)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
}

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
        }
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
        match self.code {
            Code::Overloaded | Code::NotReady => {
                h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            Code::BodyTooLarge | Code::RequestTimeout => {
                // The rest of the body was not read: the connection cannot be reused.
                h.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Code::Unauthorized => {
                h.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"searchd admin\""),
                );
            }
            _ => {}
        }
        resp.extensions_mut().insert(Tagged(self.code));
        resp
    }
}
