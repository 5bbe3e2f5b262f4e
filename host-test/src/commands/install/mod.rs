//! `meshlife install TARGET`: everything `kubectl apply -f -` needs to run `meshlife serve` in
//! front of one admission engine, printed as `linkerd install` prints its control plane.
//!
//! One file per target (`gatekeeper`, `kyverno`, `webhook`), each printing its engine's
//! objects; this file makes what they share: the serving CA and certificate (or cert-manager
//! resources issuing from that CA), and the server itself (ServiceAccount, Deployment,
//! Service, PodDisruptionBudget, and the ResourceQuota its priority class needs).
//!
//! The CA is made here even with cert-manager: a Provider's `caBundle` and a Kyverno policy's
//! `caBundle` must be known when they are applied, and cert-manager's cainjector cannot fill
//! them in (it injects into webhooks, CRDs and APIServices only; serving.md §1.9). cert-manager
//! then renews the serving certificate from that CA, and `meshlife serve` reloads it without a
//! restart.

mod drill_role;
mod facts_reader;
mod gatekeeper;
mod kept_secrets;
mod kyverno;
mod rbac;
mod webhook;

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::terminal::print_error;
use crate::terminal::{EXIT_ERROR, EXIT_OK};

pub use facts_reader::FactsReaderInstall;
pub use gatekeeper::GatekeeperInstall;
pub use kyverno::KyvernoInstall;
pub use webhook::WebhookInstall;

const ROUTES_PORT: u16 = 8443;
const HEALTH_PORT: u16 = 8080;
/// Seconds: the drain delay (5) and the in-flight limit (10) of `meshlife serve`, plus a margin
/// for the kubelet to deliver the signal.
const GRACE_PERIOD_SECONDS: u32 = 20;

#[derive(Args, Debug)]
pub struct InstallArgs {
    #[command(subcommand)]
    pub target: InstallTarget,
}

#[derive(Subcommand, Debug)]
pub enum InstallTarget {
    /// The External Data provider for Gatekeeper, its Provider, the MeshLifecycle template and
    /// constraints.
    Gatekeeper(GatekeeperInstall),
    /// The server behind Kyverno's service calls, and the ValidatingPolicy pair (or, with
    /// `--cluster-policy`, the ClusterPolicy pair) that calls it.
    Kyverno(KyvernoInstall),
    /// The server as the API server's own validating webhook, for clusters without Gatekeeper
    /// or Kyverno: its ValidatingWebhookConfiguration, RBAC to watch Namespaces, and the
    /// constraints it judges under.
    Webhook(WebhookInstall),
    /// The read-only ClusterRole `constraint --from-cluster` and `check --kubeconfig` need, and
    /// its binding to the users, groups or ServiceAccounts given.
    FactsReader(FactsReaderInstall),
    /// The Role `meshlife drill` needs in the namespace of the workloads it drills, and its
    /// binding to the users, groups or ServiceAccounts given.
    DrillRole(drill_role::DrillRoleInstall),
}

/// What every target's server takes from the command line.
#[derive(Args, Debug)]
pub struct ServerOptions {
    /// Server replicas, spread across nodes and zones.
    #[arg(long, default_value_t = 2)]
    pub replicas: u32,

    /// Let cert-manager issue and renew the serving certificate (from a CA made here).
    #[arg(long)]
    pub cert_manager: bool,

    /// Also print the server's monitoring: a PodMonitor (the prometheus-operator scrapes
    /// /metrics), a PrometheusRule with the alerts (runbooks in docs/serve.md) and a Grafana
    /// dashboard in a ConfigMap labelled grafana_dashboard: "1" (for Grafana's dashboard
    /// sidecar). Needs the prometheus-operator's CRDs.
    #[arg(long)]
    pub monitoring: bool,

    /// Container image of meshlife.
    #[arg(long, default_value = concat!("ghcr.io/meshlife/meshlife:", env!("CARGO_PKG_VERSION")))]
    pub image: String,

    /// Where the callers reach the server when not through the Service printed here (a server
    /// run outside the cluster, a load balancer): `https://HOST[:PORT]`. The Provider's `url`,
    /// the policies' service URL or the webhook's `clientConfig.url` use it, and the serving
    /// certificate names HOST beside the Service's names.
    #[arg(long, value_name = "URL", value_parser = parse_external_url)]
    pub url: Option<ExternalUrl>,

    /// Keep the CA, its key, the serving certificate and key (and Kyverno's token) in DIR, so
    /// that the same inputs print the same manifests (a GitOps repository does not churn): the
    /// first run writes them there, later runs read them. The CA is never replaced; the serving
    /// certificate is issued again from it when it no longer names the server or expires
    /// within 30 days. One DIR per target and namespace; keep it as you keep Secrets.
    #[arg(long, value_name = "DIR")]
    pub secrets_dir: Option<PathBuf>,
}

/// A `--url`: the scheme and authority callers use, without a trailing slash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalUrl {
    /// `https://HOST[:PORT]`.
    pub base: String,
    /// HOST as the certificate names it (an IP address without brackets, or a DNS name).
    pub host: String,
}

fn parse_external_url(text: &str) -> Result<ExternalUrl, String> {
    let rest = text.strip_prefix("https://").ok_or_else(|| {
        format!("{text:?}: the URL must start with https:// (every engine calls meshlife serve over TLS)")
    })?;
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() {
        return Err(format!("{text:?}: the URL names no host"));
    }
    if authority.contains(['/', '?', '#', '@']) {
        return Err(format!(
            "{text:?}: give only the scheme, host and port (https://HOST[:PORT]); each engine's \
             path (/validate, /kyverno, /admission) is added by the install"
        ));
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| format!("{text:?}: an IPv6 address needs its closing ]"))?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if let Some(port) = port
        && port.parse::<u16>().map_or(true, |port| port == 0)
    {
        return Err(format!(
            "{text:?}: the port must be a number from 1 to 65535"
        ));
    }
    if host.is_empty() {
        return Err(format!("{text:?}: the URL names no host"));
    }
    Ok(ExternalUrl {
        base: format!("https://{authority}"),
        host: host.to_string(),
    })
}

pub fn run_install(args: &InstallArgs) -> u8 {
    let printed = match &args.target {
        InstallTarget::Gatekeeper(target) => gatekeeper::manifests(target),
        InstallTarget::Kyverno(target) => kyverno::manifests(target),
        InstallTarget::Webhook(target) => webhook::manifests(target),
        InstallTarget::FactsReader(target) => facts_reader::manifests(target),
        InstallTarget::DrillRole(target) => drill_role::manifests(target),
    };
    let written = printed
        .and_then(|text| crate::terminal::write_stdout(&text).map_err(|error| error.to_string()));
    match written {
        Ok(()) => EXIT_OK,
        Err(error) => {
            print_error(error);
            EXIT_ERROR
        }
    }
}

/// The alerts (a Prometheus rule file: the PrometheusRule's spec) and the Grafana dashboard,
/// shared with the chart, whose files they are.
pub const MONITORING_RULES: &str = include_str!("../../../embedded/monitoring-rules.yaml");
pub const MONITORING_DASHBOARD: &str = include_str!("../../../embedded/monitoring-dashboard.json");

/// `text` with every line indented by `spaces` (empty lines left empty), ending in a newline.
fn indented(text: &str, spaces: usize) -> String {
    let pad = " ".repeat(spaces);
    text.lines()
        .map(|line| {
            if line.is_empty() {
                "\n".to_string()
            } else {
                format!("{pad}{line}\n")
            }
        })
        .collect()
}

/// The CA and serving certificate, as PEM.
struct TlsMaterial {
    ca_pem: String,
    ca_key_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn make_certificates(service_names: &[String]) -> Result<TlsMaterial, String> {
    let (ca_pem, ca_key_pem, issuer) = make_ca()?;
    let (cert_pem, key_pem) = issue_serving_certificate(&issuer, service_names)?;
    Ok(TlsMaterial {
        ca_pem,
        ca_key_pem,
        cert_pem,
        key_pem,
    })
}

fn certificate_error(error: rcgen::Error) -> String {
    format!("cannot make the TLS certificates: {error}")
}

/// A new CA: its certificate and key as PEM, and the issuer they make.
fn make_ca() -> Result<(String, String, Issuer<'static, KeyPair>), String> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(certificate_error)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "meshlife-serve-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    // Ten years, as Gatekeeper's own cert-controller makes its CA: the caBundle an engine
    // holds is the one thing a rotation cannot update without reapplying.
    let now = time::OffsetDateTime::now_utc();
    ca_params.not_before = now;
    ca_params.not_after = now + std::time::Duration::from_secs(10 * 365 * 24 * 3600);
    let ca_key = KeyPair::generate().map_err(certificate_error)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(certificate_error)?;
    let ca_pem = ca_cert.pem();
    let ca_key_pem = ca_key.serialize_pem();
    Ok((ca_pem, ca_key_pem, Issuer::new(ca_params, ca_key)))
}

/// A serving certificate for `service_names` (the first is its common name), valid two years,
/// and its key, as PEM.
fn issue_serving_certificate(
    issuer: &Issuer<'_, KeyPair>,
    service_names: &[String],
) -> Result<(String, String), String> {
    let mut params = CertificateParams::new(service_names.to_vec()).map_err(certificate_error)?;
    params
        .distinguished_name
        .push(DnType::CommonName, service_names[0].clone());
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now;
    params.not_after = now + std::time::Duration::from_secs(2 * 365 * 24 * 3600);
    let key = KeyPair::generate().map_err(certificate_error)?;
    let cert = params.signed_by(&key, issuer).map_err(certificate_error)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let triple = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for position in 0..4 {
            if position <= chunk.len() {
                out.push(ALPHABET[(triple >> (18 - 6 * position) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A YAML block scalar body, indented.
fn indent(text: &str, spaces: usize) -> String {
    let pad = " ".repeat(spaces);
    text.lines().map(|line| format!("{pad}{line}\n")).collect()
}

/// Reads constraint files as `meshlife serve --constraint` does at start (a file that is not a
/// MeshLifecycle constraint, or a bad parameter, stops `install`, not the rollout), each once:
/// the text printed is the text checked.
fn read_constraints(
    paths: &[PathBuf],
) -> Result<Vec<crate::constraints::constraint::ConstraintFile>, String> {
    let engine = crate::module::engine::Engine::embedded().map_err(|error| format!("{error:#}"))?;
    crate::constraints::constraint::read_constraint_files(paths, Default::default(), &engine)
}

/// A volume the server mounts read-only, beside its certificates.
struct Mount {
    name: &'static str,
    path: &'static str,
    /// The volume's source, one YAML flow mapping (`secret: {...}`).
    source: String,
    comment: &'static str,
}

/// The server one target runs: its name, where, and what it needs beyond its certificate.
struct Server<'a> {
    name: &'a str,
    namespace: &'a str,
    options: &'a ServerOptions,
    /// `meshlife serve` flags beyond listening and the certificate.
    args: Vec<String>,
    mounts: Vec<Mount>,
    /// Whether the pod gets a service-account token (to watch Namespaces).
    calls_the_api: bool,
    /// Who calls the server, for the comment on why no mesh proxy belongs in its pod.
    caller: &'static str,
}

impl Server<'_> {
    fn tls_secret(&self) -> String {
        format!("{}-tls", self.name)
    }

    /// The names the serving certificate carries: the Service's, and `--url`'s host.
    fn certificate_names(&self) -> Vec<String> {
        let mut names = self.service_names();
        if let Some(url) = &self.options.url {
            names.push(url.host.clone());
        }
        names
    }

    /// Where callers reach `path`: through `--url` when given, else `in_cluster`.
    fn url(&self, in_cluster: String, path: &str) -> String {
        match &self.options.url {
            Some(url) => format!("{}{path}", url.base),
            None => format!("{in_cluster}{path}"),
        }
    }

    /// The Service's names.
    fn service_names(&self) -> Vec<String> {
        let (name, namespace) = (self.name, self.namespace);
        vec![
            format!("{name}.{namespace}"),
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
        ]
    }

    fn labels(&self) -> String {
        format!(
            "{{app.kubernetes.io/name: {}, app.kubernetes.io/part-of: meshlife}}",
            self.name
        )
    }

    /// ServiceAccount, the TLS material, Deployment, Service, PodDisruptionBudget and the
    /// ResourceQuota that lets its priority class in.
    fn manifests(&self, tls: &TlsMaterial) -> Result<String, String> {
        if self.options.replicas == 0 {
            return Err("--replicas must be at least 1".into());
        }
        let (name, namespace, labels) = (self.name, self.namespace, self.labels());
        let mut out = String::new();
        let automount = if self.calls_the_api {
            "# meshlife serve watches Namespaces with this account's token.\nautomountServiceAccountToken: true"
        } else {
            "# meshlife serve calls no Kubernetes API.\nautomountServiceAccountToken: false"
        };
        let _ = write!(
            out,
            "---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
{automount}
"
        );
        out.push_str(&self.tls_manifests(tls));
        out.push_str(&self.deployment());
        let min_available = self.options.replicas.saturating_sub(1);
        let _ = write!(
            out,
            "---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
spec:
  selector: {{app.kubernetes.io/name: {name}}}
  ports:
  - {{name: https, port: {ROUTES_PORT}, targetPort: https, protocol: TCP}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
spec:
  minAvailable: {min_available}
  selector:
    matchLabels: {{app.kubernetes.io/name: {name}}}
---
# The server is in the admission path of every pod, so it runs as system-cluster-critical.
# Outside kube-system, clusters that limit that class (GKE's default, any cluster whose
# ResourceQuota admission config does) admit its pods only in a namespace whose quota names
# it. This quota does, as Gatekeeper's chart ships one for its own: 100 pods counts this
# namespace's other critical pods too (Gatekeeper's own, in gatekeeper-system).
apiVersion: v1
kind: ResourceQuota
metadata:
  name: {name}-critical-pods
  namespace: {namespace}
  labels: {labels}
spec:
  hard: {{pods: \"100\"}}
  scopeSelector:
    matchExpressions:
    - {{operator: In, scopeName: PriorityClass, values: [system-cluster-critical]}}
"
        );
        if self.options.monitoring {
            out.push_str(&self.monitoring_manifests());
        }
        Ok(out)
    }

    /// The PodMonitor, the PrometheusRule and the dashboard's ConfigMap: the chart's
    /// templates/_monitoring.tpl, from the same two files.
    fn monitoring_manifests(&self) -> String {
        let (name, namespace, labels) = (self.name, self.namespace, self.labels());
        let dashboard_labels = format!(
            "{}, grafana_dashboard: \"1\"}}",
            labels.trim_end_matches('}')
        );
        format!(
            "---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
spec:
  selector:
    matchLabels: {{app.kubernetes.io/name: {name}}}
  podMetricsEndpoints:
  - {{port: health, path: /metrics}}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
spec:
{rules}---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}-dashboard
  namespace: {namespace}
  labels: {dashboard_labels}
data:
  meshlife-serve.json: |
{dashboard}",
            rules = indented(MONITORING_RULES, 2),
            dashboard = indented(MONITORING_DASHBOARD, 4),
        )
    }

    fn tls_manifests(&self, tls: &TlsMaterial) -> String {
        let (name, namespace, labels) = (self.name, self.namespace, self.labels());
        let tls_secret = self.tls_secret();
        if !self.options.cert_manager {
            return format!(
                "---
apiVersion: v1
kind: Secret
metadata:
  name: {tls_secret}
  namespace: {namespace}
  labels: {labels}
type: kubernetes.io/tls
stringData:
  tls.crt: |
{cert}  tls.key: |
{key}  ca.crt: |
{ca}",
                cert = indent(&tls.cert_pem, 4),
                key = indent(&tls.key_pem, 4),
                ca = indent(&tls.ca_pem, 4),
            );
        }
        format!(
            "---
# The CA the callers trust; cert-manager issues the serving certificate from it.
apiVersion: v1
kind: Secret
metadata:
  name: {name}-ca
  namespace: {namespace}
  labels: {labels}
type: kubernetes.io/tls
stringData:
  tls.crt: |
{ca}  tls.key: |
{ca_key}---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: {name}-ca
  namespace: {namespace}
spec:
  ca:
    secretName: {name}-ca
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {name}
  namespace: {namespace}
spec:
  secretName: {tls_secret}
  issuerRef: {{name: {name}-ca, kind: Issuer}}
  dnsNames: [{names}]
  duration: 2160h
  renewBefore: 720h
  privateKey: {{algorithm: ECDSA, size: 256, rotationPolicy: Always}}
  usages: [server auth, digital signature, key encipherment]
",
            ca = indent(&tls.ca_pem, 4),
            ca_key = indent(&tls.ca_key_pem, 4),
            names = self.service_names().join(", "),
        )
    }

    fn deployment(&self) -> String {
        let (name, namespace, labels) = (self.name, self.namespace, self.labels());
        let replicas = self.options.replicas;
        let image = &self.options.image;
        let caller = self.caller;
        let automount = self.calls_the_api;
        let tls_secret = self.tls_secret();
        let args: String = self
            .args
            .iter()
            .map(|arg| format!("        - {arg}\n"))
            .collect();
        let mounts: String = self
            .mounts
            .iter()
            .map(|mount| {
                format!(
                    "        - {{name: {}, mountPath: {}, readOnly: true}}\n",
                    mount.name, mount.path
                )
            })
            .collect();
        let volumes: String = self
            .mounts
            .iter()
            .map(|mount| {
                format!(
                    "      # {}\n      - name: {}\n        {}\n",
                    mount.comment, mount.name, mount.source
                )
            })
            .collect();
        format!(
            "---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
  labels: {labels}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app.kubernetes.io/name: {name}}}
  strategy:
    type: RollingUpdate
    # A new pod is ready before an old one goes: the server is in every admission's path.
    rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata:
      labels: {labels}
      annotations:
        # {caller} calls the server over its own TLS: no mesh proxy belongs in the admission
        # path, where an unready proxy would fail every review.
        sidecar.istio.io/inject: \"false\"
        linkerd.io/inject: disabled
    spec:
      serviceAccountName: {name}
      automountServiceAccountToken: {automount}
      priorityClassName: system-cluster-critical
      # Drain delay 5 s + requests in flight at most 10 s, with room to spare.
      terminationGracePeriodSeconds: {GRACE_PERIOD_SECONDS}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {{type: RuntimeDefault}}
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: ScheduleAnyway
        labelSelector:
          matchLabels: {{app.kubernetes.io/name: {name}}}
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: ScheduleAnyway
        labelSelector:
          matchLabels: {{app.kubernetes.io/name: {name}}}
      containers:
      - name: meshlife
        image: {image}
        args:
        - serve
        - --listen=0.0.0.0:{ROUTES_PORT}
        - --health-listen=0.0.0.0:{HEALTH_PORT}
        - --tls-cert=/certs/tls.crt
        - --tls-key=/certs/tls.key
{args}        - --log-format=json
        env:
        # wasmtime keeps its compiled module here; the root filesystem is read-only.
        - name: XDG_CACHE_HOME
          value: /cache
        ports:
        - {{name: https, containerPort: {ROUTES_PORT}, protocol: TCP}}
        - {{name: health, containerPort: {HEALTH_PORT}, protocol: TCP}}
        readinessProbe:
          httpGet: {{path: /readyz, port: health}}
          periodSeconds: 2
          failureThreshold: 1
        livenessProbe:
          httpGet: {{path: /healthz, port: health}}
          periodSeconds: 10
          failureThreshold: 3
        startupProbe:
          httpGet: {{path: /readyz, port: health}}
          periodSeconds: 1
          failureThreshold: 30
        resources:
          requests: {{cpu: 100m, memory: 64Mi}}
          limits: {{memory: 512Mi}}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {{drop: [ALL]}}
        volumeMounts:
        - {{name: tls, mountPath: /certs, readOnly: true}}
{mounts}        - {{name: cache, mountPath: /cache}}
      volumes:
      - name: tls
        secret: {{secretName: {tls_secret}}}
{volumes}      - name: cache
        emptyDir: {{sizeLimit: 64Mi}}
"
        )
    }
}

/// A Namespace of meshlife's own, where no mesh injects.
fn own_namespace(namespace: &str) -> String {
    format!(
        "---
apiVersion: v1
kind: Namespace
metadata:
  name: {namespace}
  labels:
    app.kubernetes.io/part-of: meshlife
    # The server is in the admission path: no sidecar in front of it.
    istio-injection: disabled
"
    )
}

/// A random token (hex) for a caller to present, from the operating system's generator.
fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut bytes)
        .map_err(|_| "the system's random generator failed".to_string())?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// The ClusterRole that lets the server watch Namespaces, and its binding to the server's
/// ServiceAccount; `why` is the comment above it (lines after the first begin with `# `).
pub(super) fn namespace_reader(why: &str, role: &str, account: &str, namespace: &str) -> String {
    format!(
        "---
# {why}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {role}
  labels: {{app.kubernetes.io/part-of: meshlife}}
rules:
- apiGroups: [\"\"]
  resources: [namespaces]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {role}
  labels: {{app.kubernetes.io/part-of: meshlife}}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {role}
subjects:
- kind: ServiceAccount
  name: {account}
  namespace: {namespace}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn tokens_are_random_hex_of_256_bits() {
        let (first, second) = (random_token().unwrap(), random_token().unwrap());
        assert_eq!(first.len(), 64);
        assert!(first.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(first, second);
    }
}
