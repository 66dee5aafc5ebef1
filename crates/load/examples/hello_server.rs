//! A trivial multi-threaded HTTP/1.1 server for measuring the load
//! generator itself: `GET /health` -> 200 "ok"; also a fake `POST /search`
//! answering `{"qidx": i, "k": k}` with k sorted hits (ids (i + j) % 1000) for
//! trying the full checks; anything else -> 404.
//!
//! `cargo run --release -p searchd-load --example hello_server -- [ADDR] [THREADS]`
//! prints `listening on http://ADDR` once bound (ADDR default 127.0.0.1:0).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

fn fake_search(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let q = v.get("qidx")?.as_u64()?;
    let k = v.get("k").and_then(|k| k.as_u64()).unwrap_or(10).min(1000);
    let hits: Vec<String> = (0..k)
        .map(|j| {
            format!(
                "{{\"id\":{},\"score\":{}}}",
                (q + j) % 1000,
                1.0 - j as f64 / 1000.0
            )
        })
        .collect();
    Some(format!("{{\"hits\":[{}],\"took_us\":1}}", hits.join(",")))
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let resp = if req.method() == Method::GET && req.uri().path() == "/health" {
        Response::new(Full::new(Bytes::from_static(b"ok")))
    } else if req.method() == Method::POST && req.uri().path() == "/search" {
        let body = req.into_body().collect().await.map(|c| c.to_bytes());
        match body.ok().as_deref().and_then(fake_search) {
            Some(json) => Response::new(Full::new(Bytes::from(json))),
            None => {
                let mut r = Response::new(Full::new(Bytes::from_static(
                    br#"{"error":{"code":"invalid_argument","message":"need qidx"}}"#,
                )));
                *r.status_mut() = StatusCode::BAD_REQUEST;
                r
            }
        }
    } else {
        let mut r = Response::new(Full::new(Bytes::from_static(b"not found")));
        *r.status_mut() = StatusCode::NOT_FOUND;
        r
    };
    Ok(resp)
}

fn main() -> std::io::Result<()> {
    let mut argv = std::env::args().skip(1);
    let addr = argv.next().unwrap_or_else(|| "127.0.0.1:0".into());
    let threads: Option<usize> = argv.next().and_then(|t| t.parse().ok());
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Some(t) = threads {
        b.worker_threads(t);
    }
    b.enable_all().build()?.block_on(async move {
        let listener = TcpListener::bind(&addr).await?;
        println!("listening on http://{}", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(handle))
                    .await;
            });
        }
    })
}
