//! A small HTTPS/1.1 keep-alive client over one connection at a time, as Gatekeeper's Go client
//! talks to a provider (TLS, one request after the other on a reused connection). Used by
//! `meshlife bench serve` and by the server's integration tests.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{HeaderMap, Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// TLS settings of a client: the CA to trust, and an optional client certificate.
pub fn client_config(
    ca_pem: &[u8],
    client_certificate: Option<(&[u8], &[u8])>,
) -> Result<Arc<ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(certificate.context("CA bundle is not PEM")?)
            .context("CA certificate refused")?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_root_certificates(roots);
    let mut config = match client_certificate {
        Some((cert_pem, key_pem)) => {
            let chain = CertificateDer::pem_slice_iter(cert_pem)
                .collect::<Result<Vec<_>, _>>()
                .context("client certificate is not PEM")?;
            let key = PrivateKeyDer::from_pem_slice(key_pem).context("client key is not PEM")?;
            builder
                .with_client_auth_cert(chain, key)
                .context("client certificate and key")?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// One keep-alive connection.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    host: String,
    server_certificate: Option<Vec<u8>>,
}

/// A response, read whole.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// Whether the server asked for this connection to be closed.
    pub fn closes(&self) -> bool {
        self.headers
            .get(hyper::header::CONNECTION)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.eq_ignore_ascii_case("close"))
    }
}

impl Connection {
    pub async fn open(
        address: SocketAddr,
        server_name: &str,
        tls: &Arc<ClientConfig>,
    ) -> Result<Connection> {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .with_context(|| format!("connecting to {address}"))?;
        tcp.set_nodelay(true)?;
        let name = ServerName::try_from(server_name.to_string())
            .map_err(|error| anyhow!("server name {server_name}: {error}"))?;
        let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
            .connect(name, tcp)
            .await
            .context("TLS handshake")?;
        let server_certificate = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|leaf| leaf.to_vec());
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .context("HTTP handshake")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Connection {
            sender,
            host: format!("{server_name}:{}", address.port()),
            server_certificate,
        })
    }

    /// The DER of the certificate the server presented.
    pub fn server_certificate(&self) -> Option<Vec<u8>> {
        self.server_certificate.clone()
    }

    /// Whether the connection can take another request (the server has not closed it).
    pub fn is_open(&self) -> bool {
        !self.sender.is_closed()
    }

    pub async fn post(&mut self, path: &str, body: Bytes) -> Result<Reply> {
        self.post_with_headers(path, body, &[]).await
    }

    /// [`post`](Self::post) with more headers (`Authorization`, say).
    pub async fn post_with_headers(
        &mut self,
        path: &str,
        body: Bytes,
        headers: &[(&str, &str)],
    ) -> Result<Reply> {
        self.sender.ready().await.context("connection closed")?;
        let mut request = Request::post(path)
            .header(hyper::header::HOST, &self.host)
            .header(hyper::header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body))?;
        let response = self
            .sender
            .send_request(request)
            .await
            .context("sending the request")?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .context("reading the response")?
            .to_bytes();
        Ok(Reply {
            status,
            headers,
            body,
        })
    }
}

/// Gatekeeper's ProviderRequest for `keys`.
pub fn provider_request(keys: &[&str]) -> Bytes {
    let body = serde_json::json!({
        "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
        "kind": "ProviderRequest",
        "request": {"keys": keys},
    });
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}
