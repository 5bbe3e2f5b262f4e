//! `meshlife install gatekeeper`: `meshlife serve` as Gatekeeper's External Data provider, in
//! Gatekeeper's namespace (exempt from its webhook, so the provider can never be blocked by its
//! own policy), verifying Gatekeeper's client certificate; then the Provider with its
//! `caBundle`, the ConstraintTemplate and the constraints given.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;

use super::{Mount, ROUTES_PORT, Server, ServerOptions, base64, kept_secrets};

/// The ConstraintTemplate the provider serves, as shipped.
const TEMPLATE: &str = include_str!("../../../constraints/gatekeeper/template.yaml");

/// Names every printed object shares; the Provider's URL is built from them.
const NAME: &str = "meshlife-provider";

#[derive(Args, Debug)]
pub struct GatekeeperInstall {
    /// Constraint files to include (constraints/gatekeeper/clusters/*.yaml, or the output of
    /// `meshlife constraint`). May be repeated.
    #[arg(long = "constraint", value_name = "FILE")]
    pub constraints: Vec<PathBuf>,

    /// Namespace of the provider. Gatekeeper's own namespace is exempt from its webhook (so the
    /// provider can never be blocked by its own policy) and holds the client CA the provider
    /// verifies Gatekeeper with.
    #[arg(long, default_value = "gatekeeper-system")]
    pub namespace: String,

    #[command(flatten)]
    pub server: ServerOptions,

    /// Secret holding Gatekeeper's webhook certificate, whose `ca.crt` client certificates must
    /// chain to (Gatekeeper presents that certificate to providers since 3.9).
    #[arg(long, default_value = "gatekeeper-webhook-server-cert")]
    pub gatekeeper_cert_secret: String,
}

pub fn manifests(args: &GatekeeperInstall) -> Result<String, String> {
    let namespace = &args.namespace;
    let mut constraints = String::new();
    for file in super::read_constraints(&args.constraints)? {
        let _ = writeln!(
            constraints,
            "---\n# From {}\n{}",
            file.path.display(),
            file.text.trim_end()
        );
    }
    let server = Server {
        name: NAME,
        namespace,
        options: &args.server,
        args: vec!["--client-ca=/gatekeeper-certs/ca.crt".into()],
        mounts: vec![Mount {
            name: "gatekeeper-ca",
            path: "/gatekeeper-certs",
            source: format!(
                "secret: {{secretName: {}, items: [{{key: ca.crt, path: ca.crt}}]}}",
                args.gatekeeper_cert_secret
            ),
            comment: "Gatekeeper's webhook certificate Secret; only its ca.crt is read.",
        }],
        calls_the_api: false,
        caller: "Gatekeeper",
    };
    let tls = kept_secrets::certificates(
        args.server.secrets_dir.as_deref(),
        &server.certificate_names(),
    )?;
    let mut out = format!(
        "# meshlife {version}: Gatekeeper External Data provider, printed by `meshlife install gatekeeper`.\n\
         # Apply with `kubectl apply -f -`. The Secret below holds a private key (made just now,\n\
         # or kept in --secrets-dir): keep this output where you keep Secrets. If kubectl reports\n\
         # `no matches for kind MeshLifecycle`, Gatekeeper had not yet made that CRD from the\n\
         # template: apply again.\n",
        version = env!("CARGO_PKG_VERSION"),
    );
    out.push_str(&server.manifests(&tls)?);
    let _ = write!(
        out,
        "---
apiVersion: externaldata.gatekeeper.sh/v1beta1
kind: Provider
metadata:
  name: meshlife
spec:
  url: {url}
  # Seconds; inside Gatekeeper's 3 s webhook timeout. meshlife serve stops any evaluation at 1 s.
  timeout: 2
  caBundle: {ca_bundle}
---
{template}
{constraints}",
        url = server.url(
            format!("https://{NAME}.{namespace}:{ROUTES_PORT}"),
            "/validate"
        ),
        ca_bundle = base64(tls.ca_pem.as_bytes()),
        template = TEMPLATE.trim_end(),
    );
    Ok(out)
}
