//! A trivial multi-threaded HTTP/1.1 server for measuring the load
//! generator itself: `GET /health` -> 200 "ok", anything else -> 404.
//!
//! `cargo run --release -p searchd-load --example hello_server -- [ADDR] [THREADS]`
//! prints `listening on http://ADDR` once bound (ADDR default 127.0.0.1:0).

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let resp = if req.method() == Method::GET && req.uri().path() == "/health" {
        Response::new(Full::new(Bytes::from_static(b"ok")))
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
