//! HTTPS for the HTTP API (`serve --tls-cert FILE --tls-key FILE`): a rustls server
//! configuration (TLS 1.2 and 1.3, the ring provider, HTTP/1.1 by ALPN) read from PEM
//! files, swapped in when either file changes (polled every second) or on SIGHUP, and
//! kept as it is when the new files do not load (the error is logged). The accept loop
//! ([`crate::net`]) does each handshake on the connection's own task under
//! `--read-timeout-ms`; a client that speaks plain HTTP to the TLS port gets a plain 400
//! saying so instead of a handshake failure.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::ServerError;

/// Read a certificate chain and its key into a server configuration.
pub(crate) fn load_config(
    cert: &Path,
    key: &Path,
) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let bad = |what: &str, p: &Path, e: &dyn std::fmt::Display| {
        ServerError::Config(format!("{what} {}: {e}", p.display()))
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad("--tls-cert", cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad("--tls-cert", cert, &e))?;
    if chain.is_empty() {
        return Err(ServerError::Config(format!(
            "--tls-cert {}: no PEM certificate in the file",
            cert.display()
        )));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        bad(
            "--tls-key",
            key,
            &format!("{e} (a PEM private key: PKCS#8, PKCS#1 or SEC1)"),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Config(format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            ServerError::Config(format!(
                "--tls-cert {} and --tls-key {}: {e}",
                cert.display(),
                key.display()
            ))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The server's TLS configuration, reloadable.
pub(crate) struct Tls {
    cert: PathBuf,
    key: PathBuf,
    config: ArcSwap<rustls::ServerConfig>,
}

type Stamp = Option<(SystemTime, u64)>;

fn stamp(p: &Path) -> Stamp {
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl Tls {
    /// Read the files (an error refuses the start).
    pub fn open(cert: &Path, key: &Path) -> Result<Tls, ServerError> {
        Ok(Tls {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            config: ArcSwap::new(load_config(cert, key)?),
        })
    }

    /// The acceptor for a new connection (the configuration in force now).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.load_full())
    }

    fn reload(&self, why: &str) {
        match load_config(&self.cert, &self.key) {
            Ok(c) => {
                self.config.store(c);
                tracing::info!(
                    "{why}: TLS certificate {} reloaded (new connections use it)",
                    self.cert.display()
                );
            }
            Err(e) => tracing::error!("{why}: {e}; the certificate in force stays"),
        }
    }

    /// Reload when a file changes (polled every second) or on SIGHUP.
    pub fn watch(self: &Arc<Self>) {
        let tls = self.clone();
        tokio::spawn(async move {
            let mut hup =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
            let both = |t: &Tls| (stamp(&t.cert), stamp(&t.key));
            let mut last = both(&tls);
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                let signalled = tokio::select! {
                    _ = tick.tick() => false,
                    Some(()) = async {
                        match hup.as_mut() {
                            Some(h) => h.recv().await,
                            None => std::future::pending().await,
                        }
                    } => true,
                };
                let now = both(&tls);
                if signalled {
                    last = now;
                    tls.reload("SIGHUP");
                } else if now != last {
                    // A writer may be between the two files: give it a moment.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    last = both(&tls);
                    tls.reload("certificate files changed");
                }
            }
        });
    }
}

/// The first byte of a TLS connection (a handshake record). Anything else on the TLS port
/// is a client speaking plain HTTP (or noise).
pub(crate) const HANDSHAKE_RECORD: u8 = 0x16;

/// The reply to plain HTTP on the TLS port (written in clear text, then the connection is
/// closed), like the servers users know.
pub(crate) fn plain_http_reply() -> Vec<u8> {
    crate::error::raw_reply(
        crate::error::Code::BadRequest,
        "this port serves HTTPS: use https:// (a plain HTTP request was sent to the TLS port)",
    )
}
