//! `meshlife install gatekeeper`: `meshlife serve` as Gatekeeper's External Data provider, in
//! Gatekeeper's namespace (exempt from its webhook, so the provider can never be blocked by its
//! own policy), verifying Gatekeeper's client certificate; then the Provider with its
//! `caBundle`, the ConstraintTemplate and the constraints given.

use crate::terminal::print_note;
use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use serde::Deserialize as _;

use super::{Mount, ROUTES_PORT, Server, ServerOptions, base64, kept_secrets};

/// The ConstraintTemplate the provider serves, as shipped.
const TEMPLATE: &str = include_str!("../../../embedded/gatekeeper-template.yaml");

/// Names every printed object shares; the Provider's URL is built from them.
const NAME: &str = "meshlife-provider";

/// Where Gatekeeper runs and keeps its webhook certificate.
const GATEKEEPER_NAMESPACE: &str = "gatekeeper-system";
const GATEKEEPER_CERT_SECRET: &str = "gatekeeper-webhook-server-cert";

#[derive(Args, Debug)]
pub struct GatekeeperInstall {
    /// Constraint files to include (constraints/gatekeeper/clusters/*.yaml, or the output of
    /// `meshlife constraint`). May be repeated.
    #[arg(long = "constraint", value_name = "FILE")]
    pub constraints: Vec<PathBuf>,

    /// Namespace of the provider. Gatekeeper's own namespace is exempt from its webhook (so the
    /// provider can never be blocked by its own policy) and holds the client CA the provider
    /// verifies Gatekeeper with; another namespace is printed too, and needs a copy of that
    /// Secret there, named with --gatekeeper-cert-secret.
    #[arg(long, default_value = GATEKEEPER_NAMESPACE)]
    pub namespace: String,

    #[command(flatten)]
    pub server: ServerOptions,

    /// Secret holding Gatekeeper's webhook certificate, whose `ca.crt` client certificates must
    /// chain to (Gatekeeper presents that certificate to providers since 3.9).
    /// [default: gatekeeper-webhook-server-cert in gatekeeper-system; elsewhere required]
    #[arg(long)]
    pub gatekeeper_cert_secret: Option<String>,
}

pub fn manifests(args: &GatekeeperInstall) -> Result<String, String> {
    let namespace = &args.namespace;
    let own_namespace = namespace != GATEKEEPER_NAMESPACE;
    let cert_secret = match &args.gatekeeper_cert_secret {
        Some(name) => name.as_str(),
        None if !own_namespace => GATEKEEPER_CERT_SECRET,
        None => {
            return Err(format!(
                "--namespace {namespace}: the provider verifies Gatekeeper's client certificate with \
             ca.crt of the Secret {GATEKEEPER_CERT_SECRET}, which Gatekeeper keeps in \
             {GATEKEEPER_NAMESPACE} and a pod in {namespace} cannot mount. Copy it there and \
             name the copy with --gatekeeper-cert-secret (again whenever Gatekeeper renews its \
             CA):\n  kubectl create namespace {namespace}\n  kubectl -n {GATEKEEPER_NAMESPACE} \
             get secret {GATEKEEPER_CERT_SECRET} -o jsonpath='{{.data.ca\\.crt}}' | base64 -d \
             > ca.crt && kubectl -n {namespace} create secret generic gatekeeper-ca \
             --from-file=ca.crt\n  meshlife install gatekeeper --namespace {namespace} \
             --gatekeeper-cert-secret gatekeeper-ca ...\nor install into {GATEKEEPER_NAMESPACE}, \
             which Gatekeeper's webhook exempts"
            ));
        }
    };
    let mut constraints = String::new();
    for file in super::read_constraints(&args.constraints)? {
        if own_namespace {
            for name in constraints_judging(&file.text, namespace) {
                print_note(format_args!(
                    "{}: constraint {name} does not exclude {namespace}, so \
                     Gatekeeper reviews the provider's own pods through the provider (admitted \
                     while it is down only under providerFailure: ignore); add {namespace} to \
                     its spec.match.excludedNamespaces",
                    file.path.display()
                ));
            }
        }
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
                cert_secret
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
    if own_namespace {
        out.push_str(&super::own_namespace(namespace));
    }
    out.push_str(&server.manifests(&tls)?);
    let _ = write!(
        out,
        "---
apiVersion: externaldata.gatekeeper.sh/v1beta1
kind: Provider
metadata:
  name: meshlife
  labels: {{app.kubernetes.io/part-of: meshlife}}
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

/// The names of the constraints in `text` that would review objects in `namespace`: its match
/// neither excludes it nor lists other namespaces only (Gatekeeper's `prefix*` and `*suffix`
/// wildcards count). A `namespaceSelector` cannot be read here: such a constraint is left out.
fn constraints_judging(text: &str, namespace: &str) -> Vec<String> {
    let names_it = |list: &serde_yaml_ng::Value| {
        list.as_sequence().is_some_and(|names| {
            names
                .iter()
                .filter_map(serde_yaml_ng::Value::as_str)
                .any(|pattern| namespace_matches(pattern, namespace))
        })
    };
    serde_yaml_ng::Deserializer::from_str(text)
        .filter_map(|document| serde_yaml_ng::Value::deserialize(document).ok())
        .filter(|constraint| !constraint.is_null())
        .filter(|constraint| {
            let matching = &constraint["spec"]["match"];
            let limited = !matching["namespaces"].is_null() && !names_it(&matching["namespaces"]);
            !limited
                && !names_it(&matching["excludedNamespaces"])
                && matching["namespaceSelector"].is_null()
        })
        .map(|constraint| {
            constraint["metadata"]["name"]
                .as_str()
                .unwrap_or("(unnamed)")
                .to_string()
        })
        .collect()
}

/// Gatekeeper's namespace patterns: a name, `prefix*` or `*suffix`.
fn namespace_matches(pattern: &str, namespace: &str) -> bool {
    if let Some(prefix) = pattern.strip_suffix('*') {
        namespace.starts_with(prefix)
    } else if let Some(suffix) = pattern.strip_prefix('*') {
        namespace.ends_with(suffix)
    } else {
        pattern == namespace
    }
}
