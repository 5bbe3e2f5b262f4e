//! `meshlife install gatekeeper`: everything `kubectl apply -f -` needs to run `meshlife serve`
//! as Gatekeeper's External Data provider, printed as `linkerd install` prints its control
//! plane: ServiceAccount, Deployment, Service, PodDisruptionBudget, the TLS material (a CA and a
//! serving certificate made here, or cert-manager resources issuing from that CA), the
//! Provider with its `caBundle`, the ConstraintTemplate and the constraints given.
//!
//! The CA is made here even with cert-manager: the Provider's `caBundle` must be known when it
//! is applied, and cert-manager's cainjector cannot fill it in (it injects into webhooks, CRDs
//! and APIServices only; serving.md §1.9). cert-manager then renews the serving certificate
//! from that CA, and `meshlife serve` reloads it without a restart.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::cli::{EXIT_INPUT_ERROR, EXIT_OK};

/// The ConstraintTemplate the provider serves, as shipped.
const TEMPLATE: &str = include_str!("../../constraints/gatekeeper/template.yaml");

/// Names every printed object shares; the Provider's URL is built from them.
const NAME: &str = "meshlife-provider";
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
}

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

    /// Provider replicas, spread across nodes.
    #[arg(long, default_value_t = 2)]
    pub replicas: u32,

    /// Let cert-manager issue and renew the serving certificate (from a CA made here).
    #[arg(long)]
    pub cert_manager: bool,

    /// Container image of meshlife.
    #[arg(long, default_value = concat!("ghcr.io/meshlife/meshlife:", env!("CARGO_PKG_VERSION")))]
    pub image: String,

    /// Secret holding Gatekeeper's webhook certificate, whose `ca.crt` client certificates must
    /// chain to (Gatekeeper presents that certificate to providers since 3.9).
    #[arg(long, default_value = "gatekeeper-webhook-server-cert")]
    pub gatekeeper_cert_secret: String,
}

pub fn run_install(args: &InstallArgs) -> u8 {
    match &args.target {
        InstallTarget::Gatekeeper(gatekeeper) => match gatekeeper_manifests(gatekeeper) {
            Ok(text) => match crate::output::write_stdout(&text) {
                Ok(()) => EXIT_OK,
                Err(error) => {
                    eprintln!("meshlife: error: {error}");
                    EXIT_INPUT_ERROR
                }
            },
            Err(error) => {
                eprintln!("meshlife: error: {error}");
                EXIT_INPUT_ERROR
            }
        },
    }
}

/// The CA and serving certificate, as PEM.
struct TlsMaterial {
    ca_pem: String,
    ca_key_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn make_certificates(service_names: &[String]) -> Result<TlsMaterial, String> {
    let failed = |error: rcgen::Error| format!("cannot make the TLS certificates: {error}");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "meshlife-provider-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    // Ten years, as Gatekeeper's own cert-controller makes its CA: the Provider's caBundle is
    // the one thing a rotation cannot update without reapplying.
    let now = time_now();
    ca_params.not_before = now;
    ca_params.not_after = now + std::time::Duration::from_secs(10 * 365 * 24 * 3600);
    let ca_key = KeyPair::generate().map_err(failed)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(failed)?;
    let ca_pem = ca_cert.pem();
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca_params, ca_key);

    let mut params = CertificateParams::new(service_names.to_vec()).map_err(failed)?;
    params
        .distinguished_name
        .push(DnType::CommonName, service_names[0].clone());
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = now;
    params.not_after = now + std::time::Duration::from_secs(2 * 365 * 24 * 3600);
    let key = KeyPair::generate().map_err(failed)?;
    let cert = params.signed_by(&key, &issuer).map_err(failed)?;
    Ok(TlsMaterial {
        ca_pem,
        ca_key_pem,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn time_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
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

pub fn gatekeeper_manifests(args: &GatekeeperInstall) -> Result<String, String> {
    if args.replicas == 0 {
        return Err("--replicas must be at least 1".into());
    }
    let namespace = &args.namespace;
    let mut constraints = String::new();
    let mut loaded = Vec::new();
    for path in &args.constraints {
        // Read once: the text printed is the text checked.
        let text = crate::files::read_text(path, Default::default())
            .map_err(|error| format!("constraint {}: {error}", path.display()))?;
        // The same reader `meshlife check --constraint` uses: a file that is not a
        // MeshLifecycle constraint is refused here, not by the API server later.
        loaded.extend(
            crate::constraint::parse_constraints_text(&path.display().to_string(), &text)
                .map_err(|error| error.to_string())?,
        );
        // Two of one name: the second `kubectl apply`d would silently replace the first.
        crate::constraint::refuse_duplicate_names(&loaded).map_err(|error| error.to_string())?;
        let _ = writeln!(
            constraints,
            "---\n# From {}\n{}",
            path.display(),
            text.trim_end()
        );
    }
    let service_names = vec![
        format!("{NAME}.{namespace}"),
        format!("{NAME}.{namespace}.svc"),
        format!("{NAME}.{namespace}.svc.cluster.local"),
    ];
    let tls = make_certificates(&service_names)?;
    let tls_secret = format!("{NAME}-tls");
    let mut out = String::new();
    let _ = write!(
        out,
        "# meshlife {version}: Gatekeeper External Data provider, printed by `meshlife install gatekeeper`.\n\
         # Apply with `kubectl apply -f -`. The Secret below holds a private key made just now:\n\
         # keep this output where you keep Secrets. If kubectl reports `no matches for kind\n\
         # MeshLifecycle`, Gatekeeper had not yet made that CRD from the template: apply again.\n",
        version = env!("CARGO_PKG_VERSION"),
    );
    let _ = write!(
        out,
        "---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {NAME}
  namespace: {namespace}
  labels: {{app.kubernetes.io/name: {NAME}, app.kubernetes.io/part-of: meshlife}}
# meshlife serve calls no Kubernetes API.
automountServiceAccountToken: false
"
    );
    if args.cert_manager {
        let _ = write!(
            out,
            "---
# The CA the Provider's caBundle names; cert-manager issues the serving certificate from it.
apiVersion: v1
kind: Secret
metadata:
  name: {NAME}-ca
  namespace: {namespace}
  labels: {{app.kubernetes.io/name: {NAME}, app.kubernetes.io/part-of: meshlife}}
type: kubernetes.io/tls
stringData:
  tls.crt: |
{ca}  tls.key: |
{ca_key}---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: {NAME}-ca
  namespace: {namespace}
spec:
  ca:
    secretName: {NAME}-ca
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {NAME}
  namespace: {namespace}
spec:
  secretName: {tls_secret}
  issuerRef: {{name: {NAME}-ca, kind: Issuer}}
  dnsNames: [{names}]
  duration: 2160h
  renewBefore: 720h
  privateKey: {{algorithm: ECDSA, size: 256, rotationPolicy: Always}}
  usages: [server auth, digital signature, key encipherment]
",
            ca = indent(&tls.ca_pem, 4),
            ca_key = indent(&tls.ca_key_pem, 4),
            names = service_names.join(", "),
        );
    } else {
        let _ = write!(
            out,
            "---
apiVersion: v1
kind: Secret
metadata:
  name: {tls_secret}
  namespace: {namespace}
  labels: {{app.kubernetes.io/name: {NAME}, app.kubernetes.io/part-of: meshlife}}
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
    let replicas = args.replicas;
    let min_available = replicas.saturating_sub(1);
    let image = &args.image;
    let gatekeeper_secret = &args.gatekeeper_cert_secret;
    let _ = write!(
        out,
        "---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {NAME}
  namespace: {namespace}
  labels: {{app.kubernetes.io/name: {NAME}, app.kubernetes.io/part-of: meshlife}}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app.kubernetes.io/name: {NAME}}}
  strategy:
    type: RollingUpdate
    # A new pod is ready before an old one goes: the provider is in every admission's path.
    rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: {NAME}, app.kubernetes.io/part-of: meshlife}}
      annotations:
        # Gatekeeper calls the provider over its own mTLS: no mesh proxy belongs in the
        # admission path, where an unready proxy would fail every review.
        sidecar.istio.io/inject: \"false\"
        linkerd.io/inject: disabled
    spec:
      serviceAccountName: {NAME}
      automountServiceAccountToken: false
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
          matchLabels: {{app.kubernetes.io/name: {NAME}}}
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: ScheduleAnyway
        labelSelector:
          matchLabels: {{app.kubernetes.io/name: {NAME}}}
      containers:
      - name: meshlife
        image: {image}
        args:
        - serve
        - --listen=0.0.0.0:{ROUTES_PORT}
        - --health-listen=0.0.0.0:{HEALTH_PORT}
        - --tls-cert=/certs/tls.crt
        - --tls-key=/certs/tls.key
        - --client-ca=/gatekeeper-certs/ca.crt
        - --log-format=json
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
        - {{name: gatekeeper-ca, mountPath: /gatekeeper-certs, readOnly: true}}
        - {{name: cache, mountPath: /cache}}
      volumes:
      - name: tls
        secret: {{secretName: {tls_secret}}}
      # Gatekeeper's webhook certificate Secret; only its ca.crt is read.
      - name: gatekeeper-ca
        secret:
          secretName: {gatekeeper_secret}
          items: [{{key: ca.crt, path: ca.crt}}]
      - name: cache
        emptyDir: {{sizeLimit: 64Mi}}
---
apiVersion: v1
kind: Service
metadata:
  name: {NAME}
  namespace: {namespace}
  labels: {{app.kubernetes.io/name: {NAME}, app.kubernetes.io/part-of: meshlife}}
spec:
  selector: {{app.kubernetes.io/name: {NAME}}}
  ports:
  - {{name: https, port: {ROUTES_PORT}, targetPort: https, protocol: TCP}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {NAME}
  namespace: {namespace}
  labels: {{app.kubernetes.io/name: {NAME}, app.kubernetes.io/part-of: meshlife}}
spec:
  minAvailable: {min_available}
  selector:
    matchLabels: {{app.kubernetes.io/name: {NAME}}}
---
apiVersion: externaldata.gatekeeper.sh/v1beta1
kind: Provider
metadata:
  name: meshlife
spec:
  url: https://{NAME}.{namespace}:{ROUTES_PORT}/validate
  # Seconds; inside Gatekeeper's 3 s webhook timeout. meshlife serve stops any evaluation at 1 s.
  timeout: 2
  caBundle: {ca_bundle}
---
{template}
{constraints}",
        ca_bundle = base64(tls.ca_pem.as_bytes()),
        template = TEMPLATE.trim_end(),
    );
    Ok(out)
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
}
