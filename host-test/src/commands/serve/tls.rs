//! The serving certificate, its key and the client CA, loaded from PEM files and reloaded
//! without a restart when their content changes.
//!
//! Reloading compares file contents on a short poll rather than watching inodes: kubelet
//! updates a mounted Secret by swapping the `..data` symlink, which a watch on the files
//! themselves never sees (Kubewarden's `CLOSE_WRITE` watch misses it; serving.md §4.4). Each
//! accepted connection takes the configuration current at that moment, so a rotation never
//! disturbs a handshake in progress. A change that does not load (a half-written pair, a key of
//! another certificate) keeps the previous configuration and is logged and counted.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Where the PEM files are.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// The bytes a configuration was built from, to tell whether the files changed.
#[derive(PartialEq, Eq)]
struct Material {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

struct Loaded {
    config: Arc<ServerConfig>,
    material: Material,
    /// Validity of the serving (leaf) certificate, seconds since the epoch.
    not_before: i64,
    not_after: i64,
}

pub struct TlsState {
    files: TlsFiles,
    current: RwLock<Loaded>,
}

/// What a reload poll did.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    Unchanged,
    Reloaded,
    /// The files changed but do not make a working configuration; the old one stays.
    Failed(String),
}

impl TlsState {
    pub fn load(files: TlsFiles) -> Result<TlsState> {
        let loaded = load(&files)?;
        Ok(TlsState {
            files,
            current: RwLock::new(loaded),
        })
    }

    /// The configuration for the next handshake.
    pub fn config(&self) -> Arc<ServerConfig> {
        match self.current.read() {
            Ok(current) => Arc::clone(&current.config),
            Err(poisoned) => Arc::clone(&poisoned.into_inner().config),
        }
    }

    pub fn requires_client_certificates(&self) -> bool {
        self.files.client_ca.is_some()
    }

    /// Rereads the files and swaps the configuration when their content changed.
    pub fn reload_if_changed(&self) -> Reload {
        let material = match read_material(&self.files) {
            Ok(material) => material,
            Err(error) => return Reload::Failed(format!("{error:#}")),
        };
        let unchanged = self
            .current
            .read()
            .map(|current| current.material == material)
            .unwrap_or(false);
        if unchanged {
            return Reload::Unchanged;
        }
        match build(&self.files, material) {
            Ok(loaded) => {
                if let Ok(mut current) = self.current.write() {
                    *current = loaded;
                }
                Reload::Reloaded
            }
            Err(error) => Reload::Failed(format!("{error:#}")),
        }
    }

    /// The serving certificate's notAfter, in seconds since the Unix epoch (for the
    /// `meshlife_certificate_expiry_timestamp_seconds` gauge).
    pub fn not_after(&self) -> Option<i64> {
        self.current.read().ok().map(|current| current.not_after)
    }

    /// `Ok` while the serving certificate is within its validity period.
    pub fn check_validity(&self) -> Result<(), String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs() as i64);
        let (not_before, not_after) = self
            .current
            .read()
            .map(|current| (current.not_before, current.not_after))
            .map_err(|_| "certificate state unavailable".to_string())?;
        if now < not_before {
            return Err(format!(
                "the serving certificate {} is not valid yet",
                self.files.cert.display()
            ));
        }
        if now > not_after {
            return Err(format!(
                "the serving certificate {} has expired",
                self.files.cert.display()
            ));
        }
        Ok(())
    }
}

/// Through the CLI's one reader: a FIFO or a device given as a certificate must not hang the
/// server's start or its reloads.
fn read_file(path: &Path, what: &str) -> Result<Vec<u8>> {
    crate::inputs::files::read_bytes(path, Default::default())
        .with_context(|| format!("cannot read the {what} {}", path.display()))
}

fn read_material(files: &TlsFiles) -> Result<Material> {
    Ok(Material {
        cert: read_file(&files.cert, "TLS certificate")?,
        key: read_file(&files.key, "TLS key")?,
        client_ca: files
            .client_ca
            .as_deref()
            .map(|path| read_file(path, "client CA"))
            .transpose()?,
    })
}

fn load(files: &TlsFiles) -> Result<Loaded> {
    build(files, read_material(files)?)
}

fn build(files: &TlsFiles, material: Material) -> Result<Loaded> {
    let cert_path = files.cert.display();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&material.cert)
        .collect::<Result<_, _>>()
        .map_err(|error| anyhow!("{cert_path} is not PEM: {error}"))?;
    let Some(leaf) = chain.first() else {
        bail!("{cert_path} holds no CERTIFICATE block");
    };
    let (not_before, not_after) = validity(leaf).with_context(|| format!("{cert_path}"))?;
    let key = PrivateKeyDer::from_pem_slice(&material.key).map_err(|error| {
        anyhow!(
            "{} holds no private key (PKCS#8, PKCS#1 or SEC1 PEM): {error}",
            files.key.display()
        )
    })?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // TLS 1.3 for Gatekeeper (it requires it), 1.2 as well for the API server and Kyverno.
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|error| anyhow!("TLS versions: {error}"))?;
    let builder = match (&files.client_ca, &material.client_ca) {
        (Some(ca_path), Some(ca_pem)) => {
            let mut roots = rustls::RootCertStore::empty();
            let mut added = 0;
            for certificate in CertificateDer::pem_slice_iter(ca_pem) {
                let certificate = certificate
                    .map_err(|error| anyhow!("{} is not PEM: {error}", ca_path.display()))?;
                roots.add(certificate).map_err(|error| {
                    anyhow!(
                        "{} holds a certificate rustls refuses: {error}",
                        ca_path.display()
                    )
                })?;
                added += 1;
            }
            if added == 0 {
                bail!("{} holds no CERTIFICATE block", ca_path.display());
            }
            // Absent certificates are allowed at the handshake and refused by the routes that
            // require one: Kyverno and the API server present none (serving.md §6.2). A
            // certificate that is presented must chain to this CA, or the handshake fails.
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .allow_unauthenticated()
                    .build()
                    .map_err(|error| anyhow!("client CA {}: {error}", ca_path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|error| {
        anyhow!(
            "{} and {} are not a certificate and its key: {error}",
            files.cert.display(),
            files.key.display()
        )
    })?;
    // Go's client (Gatekeeper, Kyverno) speaks HTTP/1.1 to providers.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Loaded {
        config: Arc::new(config),
        material,
        not_before,
        not_after,
    })
}

fn validity(leaf: &CertificateDer<'_>) -> Result<(i64, i64)> {
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|error| anyhow!("the first certificate does not parse: {error}"))?;
    let validity = parsed.validity();
    Ok((
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    ))
}
