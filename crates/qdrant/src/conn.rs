//! The connection to Qdrant: the pool of HTTP/2 channels, the API key on each request,
//! deadlines of gRPC calls, gRPC status -> [`BackendError`], and the reachability probe.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::{Duration, Instant};

use qdrant_client::qdrant::{
    points_client::PointsClient, qdrant_client::QdrantClient, HealthCheckRequest,
};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use super::backend::Inner;
use super::QdrantTarget;
use searchd_backend::BackendError;

/// Largest gRPC message read (pages of 10,000 documents with their fields).
const MAX_MESSAGE: usize = 256 << 20;

/// Deadline in whole seconds for Qdrant's own `timeout` fields (at least 1).
pub(super) fn secs(deadline: Instant) -> u64 {
    deadline
        .saturating_duration_since(Instant::now())
        .as_secs_f64()
        .ceil()
        .max(1.0) as u64
}

pub(super) fn channel(t: &QdrantTarget) -> Result<Channel, String> {
    let mut ep = Endpoint::from_shared(t.url.clone())
        .map_err(|e| format!("--qdrant-url {:?}: {e}", t.url))?
        .connect_timeout(t.connect_timeout)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(5))
        .keep_alive_while_idle(true);
    if t.url.starts_with("https://") {
        ep = ep
            .tls_config(ClientTlsConfig::new().with_native_roots())
            .map_err(|e| format!("TLS for {}: {e}", t.url))?;
    }
    Ok(ep.connect_lazy())
}

pub(super) fn with_key<T>(t: &QdrantTarget, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    if let Some(k) = &t.api_key {
        if let Ok(v) = k.parse() {
            r.metadata_mut().insert("api-key", v);
        }
    }
    r
}

pub(super) fn spawn_probe(inner: Weak<Inner>) {
    tokio::spawn(async move {
        loop {
            let Some(i) = inner.upgrade() else { break };
            let ch = i.channels[0].clone();
            let req = with_key(&i.target, HealthCheckRequest {});
            let ok = matches!(
                tokio::time::timeout(
                    Duration::from_secs(1),
                    QdrantClient::new(ch).health_check(req)
                )
                .await,
                Ok(Ok(_))
            );
            let was = i.reachable.swap(ok, Ordering::Relaxed);
            if was != ok {
                if ok {
                    tracing::info!(url = %i.target.url, "Qdrant is reachable again");
                } else {
                    tracing::warn!(url = %i.target.url, "Qdrant is unreachable");
                }
            }
            drop(i);
            tokio::time::sleep(if ok {
                Duration::from_secs(1)
            } else {
                Duration::from_millis(250)
            })
            .await;
        }
    });
}

impl Inner {
    fn channel(&self) -> Channel {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.channels.len();
        self.channels[i].clone()
    }

    pub(super) fn points(&self) -> PointsClient<Channel> {
        PointsClient::new(self.channel())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    pub(super) fn request<T>(&self, msg: T, deadline: Instant) -> tonic::Request<T> {
        let mut r = with_key(&self.target, msg);
        r.set_timeout(deadline.saturating_duration_since(Instant::now()));
        r
    }

    fn status_error(&self, s: &tonic::Status) -> BackendError {
        use tonic::Code as C;
        let m = s.message();
        match s.code() {
            C::InvalidArgument | C::FailedPrecondition | C::OutOfRange => {
                if m.contains("No point with id") || m.contains("not found") {
                    BackendError::NotFound(format!("Qdrant: {m}"))
                } else {
                    BackendError::Invalid(format!("Qdrant refused the request: {m}"))
                }
            }
            C::NotFound => BackendError::NotFound(format!("Qdrant: {m}")),
            C::DeadlineExceeded | C::Cancelled => BackendError::Deadline { started: true },
            C::ResourceExhausted => BackendError::Overloaded(format!("Qdrant is overloaded: {m}")),
            C::Unavailable => {
                self.reachable.store(false, Ordering::Relaxed);
                *self.last_error.lock() = m.to_string();
                BackendError::Unavailable(format!(
                    "Qdrant at {} is unreachable: {m}",
                    self.target.url
                ))
            }
            _ => BackendError::Unavailable(format!("Qdrant failed: {m}")),
        }
    }

    /// One gRPC call bounded by `deadline` on our side too (504, never a hang).
    pub(super) async fn call<R, Fut>(&self, deadline: Instant, fut: Fut) -> Result<R, BackendError>
    where
        Fut: Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(BackendError::Deadline { started: false });
        }
        match tokio::time::timeout(left, fut).await {
            Err(_) => Err(BackendError::Deadline { started: true }),
            Ok(Err(s)) => Err(self.status_error(&s)),
            Ok(Ok(r)) => Ok(r.into_inner()),
        }
    }
}
