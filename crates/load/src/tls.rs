//! Trust for `https://` targets: the root store (`--ca FILE`, else the system's CA bundle)
//! and the one rustls client configuration (ring provider) that every connection of a run
//! shares. Built once, when the target is parsed; connections only clone its `Arc`.

use std::path::Path;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::CertificateDer;

use crate::error::LoadError;

/// The system CA bundles tried, in order, for https without `--ca` (Debian, Ubuntu, Alpine,
/// Arch; then Fedora, RHEL).
pub const SYSTEM_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// The TLS client configuration for a run: `ca` (`--ca`, PEM, one or more CA certificates)
/// is the whole root store; without it the first of [`SYSTEM_BUNDLES`] that exists. A usage
/// error (exit 2) naming `--ca` when neither is there, or the file cannot be read or holds
/// no usable certificate.
pub fn client_config(ca: Option<&Path>) -> Result<Arc<ClientConfig>, LoadError> {
    let system: Vec<&Path> = SYSTEM_BUNDLES.iter().map(Path::new).collect();
    client_config_with(ca, &system)
}

/// [`client_config`] with the system bundles to try given (tests).
pub fn client_config_with(
    ca: Option<&Path>,
    system: &[&Path],
) -> Result<Arc<ClientConfig>, LoadError> {
    let roots = match ca {
        Some(path) => read_ca(path)?,
        None => {
            let Some(path) = system.iter().find(|p| p.is_file()) else {
                let tried: Vec<String> = system.iter().map(|p| p.display().to_string()).collect();
                return Err(LoadError::usage(format!(
                    "an https:// target needs trusted CA certificates: give --ca FILE (PEM) (no system CA bundle found: tried {})",
                    tried.join(", ")
                )));
            };
            read_system_bundle(path)?
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| LoadError::usage(format!("cannot set up TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The client speaks HTTP/1.1 only; say so to servers that negotiate.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A PEM error as a usage error naming `flag` and the file.
fn pem_error(path: &Path, flag: &str, e: pem::Error) -> LoadError {
    match e {
        pem::Error::Io(e) => {
            LoadError::usage(format!("{flag} {}: cannot read: {e}", path.display()))
        }
        other => LoadError::usage(format!(
            "{flag} {}: not a PEM certificate file: {other}",
            path.display()
        )),
    }
}

/// `--ca`: every certificate of the file must be a usable trust anchor.
fn read_ca(path: &Path) -> Result<RootCertStore, LoadError> {
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path).map_err(|e| pem_error(path, "--ca", e))?;
    for (i, cert) in certs.enumerate() {
        let cert = cert.map_err(|e| pem_error(path, "--ca", e))?;
        roots.add(cert).map_err(|e| {
            LoadError::usage(format!(
                "--ca {}: certificate {} is not usable as a CA: {e}",
                path.display(),
                i + 1
            ))
        })?;
    }
    if roots.is_empty() {
        return Err(LoadError::usage(format!(
            "--ca {}: no certificate found (expected one or more PEM 'BEGIN CERTIFICATE' blocks)",
            path.display()
        )));
    }
    Ok(roots)
}

/// A system bundle: certificates rustls cannot use are skipped (bundles carry a few).
fn read_system_bundle(path: &Path) -> Result<RootCertStore, LoadError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, "system CA bundle", e))?
        .filter_map(Result::ok)
        .collect();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(certs);
    if roots.is_empty() {
        return Err(LoadError::usage(format!(
            "the system CA bundle {} holds no usable certificate: give --ca FILE (PEM)",
            path.display()
        )));
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_without_ca_and_without_a_system_bundle_is_a_usage_error_naming_ca() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-bundle.crt");
        let e = client_config_with(None, &[missing.as_path()]).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        let m = e.to_string();
        assert!(
            m.contains("--ca FILE") && m.contains("no-bundle.crt"),
            "{m}"
        );
    }

    #[test]
    fn ca_files_that_hold_no_certificate_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = client_config_with(Some(&empty), &[]).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains("no certificate found"), "{e}");

        let missing = dir.path().join("missing.pem");
        let e = client_config_with(Some(&missing), &[]).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(
            e.to_string().contains("--ca") && e.to_string().contains("cannot read"),
            "{e}"
        );

        let garbled = dir.path().join("garbled.pem");
        std::fs::write(
            &garbled,
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = client_config_with(Some(&garbled), &[]).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains("--ca"), "{e}");
    }

    #[test]
    fn a_system_bundle_is_used_without_ca() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = ca;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        let bundle = dir.path().join("bundle.crt");
        std::fs::write(&bundle, cert.pem()).unwrap();
        let missing = dir.path().join("missing.crt");
        let config = client_config_with(None, &[missing.as_path(), bundle.as_path()]).unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}
