//! `meshlife install kyverno`: `meshlife serve` behind Kyverno's service calls, in a namespace
//! of its own, requiring a bearer token; then the ValidatingPolicy pair of
//! constraints/kyverno/validating-policies.yaml (what Kyverno recommends from 1.17, when it
//! deprecated ClusterPolicy; or, with `--cluster-policy`, the ClusterPolicy pair) with the
//! server's URL, its CA and the token filled in, and the cluster's facts from `--constraint` as
//! their parameters.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use serde_json::Value;

use super::{Mount, ROUTES_PORT, Server, ServerOptions, kept_secrets, own_namespace};
use crate::constraints::constraint::{Constraint, EnforcementAction};

const CLUSTER_POLICIES: &str = include_str!("../../../embedded/kyverno-cluster-policies.yaml");
const VALIDATING_POLICIES: &str =
    include_str!("../../../embedded/kyverno-validating-policies.yaml");
/// What the shipped policies name, replaced here by what is installed.
const SHIPPED_NAMESPACE: &str = "meshlife-system";
const SHIPPED_URL: &str = "https://meshlife.meshlife-system.svc:8443/kyverno";
const CA_PLACEHOLDER: &str = "REPLACE_WITH_PEM_OF_THE_MESHLIFE_CA";

const NAME: &str = "meshlife";

/// The one step `kubectl apply` cannot take for the ValidatingPolicy pair: CEL's `http.Post`
/// trusts only the admission controller's system roots, and has no timeout to bound
/// (validating-policies.yaml says why).
const CEL_TRUST_STEP: &str = "meshlife: one more step for the ValidatingPolicy pair: Kyverno's \
    CEL http.Post trusts only its admission controller's system roots, so meshlife's CA (the \
    ConfigMap kyverno/meshlife-ca in this output) must be added to them, and the admission \
    controller restarted whenever that CA changes. After applying this output:\n  \
    kubectl -n kyverno patch deployment kyverno-admission-controller --patch \
    '{\"spec\":{\"template\":{\"spec\":{\"volumes\":[{\"name\":\"meshlife-ca\",\
    \"configMap\":{\"name\":\"meshlife-ca\"}}],\"containers\":[{\"name\":\"kyverno\",\
    \"env\":[{\"name\":\"SSL_CERT_DIR\",\"value\":\"/etc/ssl/certs:/etc/meshlife-ca\"}],\
    \"volumeMounts\":[{\"name\":\"meshlife-ca\",\"mountPath\":\"/etc/meshlife-ca\",\
    \"readOnly\":true}]}]}}}}'\n\
    (or the Helm values in constraints/kyverno/validating-policies.yaml's header).\n\
    It changes the admission controller's Pod template only (a rolling restart): one volume \
    from that ConfigMap, mounted read-only, and SSL_CERT_DIR naming the system directory \
    first, so every root it trusted stays trusted. No smaller step works: http.Post reads Go's \
    system roots alone, and http.Client(caBundle), which would take the CA from the policy, \
    has no Post in Kyverno 1.19's admission controller. Until this step is taken, every call \
    fails its TLS handshake: meshlife-errors-cel admits the object (failurePolicy Ignore) and \
    meshlife-warnings-cel warns that it was not checked (\"request failed\").\n\
    Kyverno 1.19's http.Post has no timeout: a meshlife serve that accepts the call and then \
    hangs makes the API server admit the object after 5 s with no verdict and nothing on it, \
    counted only in its apiserver_admission_webhook_fail_open_count (alert \
    MeshlifeAdmissionsFailedOpen). The ClusterPolicy pair (--cluster-policy), with Kyverno's \
    --apiCallTimeout, warns on the object instead.";
/// Kyverno gives a service call 30 s, the API server its webhook 10 s: a server that accepts a
/// call and never answers would make the API server admit the object with no verdict and no
/// trace on it (cluster-policies.yaml says more).
const CALL_BOUND_STEP: &str = "meshlife: recommended for the ClusterPolicy pair: bound \
    Kyverno's service calls inside its webhook's timeout. Kyverno waits up to --apiCallTimeout \
    (30 s by default) for meshlife serve, while the API server waits 10 s for Kyverno's \
    webhook: a server that accepts the call and then hangs makes the API server admit the \
    object with no verdict of any policy behind that webhook, yours included, and nothing on \
    the object says so. With 2 s, the calls end first and the object gets the warning that it \
    was not checked. The flag bounds every policy's calls:\n  \
    kubectl -n kyverno patch deployment kyverno-admission-controller --type json --patch \
    '[{\"op\":\"add\",\"path\":\"/spec/template/spec/containers/0/args/-\",\
    \"value\":\"--apiCallTimeout=2s\"}]'\n\
    (or admissionController.container.extraArgs.apiCallTimeout: 2s in Kyverno's Helm values).";
const TOKEN_SECRET: &str = "meshlife-kyverno-token";

#[derive(Args, Debug)]
pub struct KyvernoInstall {
    /// A cluster file of MeshLifecycle constraints (constraints/gatekeeper/clusters/*.yaml, or
    /// the output of `meshlife constraint`): one `deny` constraint, whose parameters become
    /// meshlife-errors', and at most one `warn` constraint, whose parameters become
    /// meshlife-warnings'. Without it, the policies' parameters are the defaults, written out.
    #[arg(long = "constraint", value_name = "FILE")]
    pub constraint: Option<PathBuf>,

    /// Print the ClusterPolicy pair (service calls; Kyverno 1.13+, deprecated by Kyverno from
    /// 1.17) instead of the ValidatingPolicy pair (CEL `http.Post`, `policies.kyverno.io/v1`,
    /// Kyverno 1.16+). Its calls can be bounded (Kyverno's --apiCallTimeout), so a hung server
    /// ends in a warning on the object; it needs no change to Kyverno's Deployment to trust
    /// meshlife's CA.
    #[arg(long)]
    pub cluster_policy: bool,

    /// The ValidatingPolicy pair, now the default: accepted so that earlier scripts still run.
    #[arg(long, hide = true, conflicts_with = "cluster_policy")]
    pub cel: bool,

    /// Namespace of the server, made here; Kyverno's policies exclude it.
    #[arg(long, default_value = SHIPPED_NAMESPACE)]
    pub namespace: String,

    #[command(flatten)]
    pub server: ServerOptions,
}

pub fn manifests(args: &KyvernoInstall) -> Result<String, String> {
    let cel = !args.cluster_policy;
    let namespace = &args.namespace;
    let (errors_parameters, warnings_parameters) = match &args.constraint {
        Some(path) => cluster_facts(path)?,
        None => (None, None),
    };
    let token = kept_secrets::kyverno_token(args.server.secrets_dir.as_deref())?;
    let server = Server {
        name: NAME,
        namespace,
        options: &args.server,
        args: vec!["--kyverno-token-file=/kyverno-token/token".into()],
        mounts: vec![Mount {
            name: "kyverno-token",
            path: "/kyverno-token",
            source: format!("secret: {{secretName: {TOKEN_SECRET}}}"),
            comment: "The token the policies send as `Authorization: Bearer`.",
        }],
        // The ClusterPolicy pair sends no Namespace: the server adds it from its watch.
        calls_the_api: !cel,
        caller: "Kyverno",
    };
    let tls = kept_secrets::certificates(
        args.server.secrets_dir.as_deref(),
        &server.certificate_names(),
    )?;
    let url = server.url(
        format!("https://{NAME}.{namespace}.svc:{ROUTES_PORT}"),
        "/kyverno",
    );
    let (policies, kind) = if cel {
        eprintln!("{CEL_TRUST_STEP}");
        (VALIDATING_POLICIES, "ValidatingPolicy")
    } else {
        eprintln!("{CALL_BOUND_STEP}");
        (CLUSTER_POLICIES, "ClusterPolicy")
    };
    let mut policies = render(policies, &url, &tls.ca_pem, namespace)?;
    policies = if cel {
        with_cel_token(&policies, &token)?
    } else {
        with_header_token(&policies, &token)?
    };
    // The second first: replacing a block may change where the later ones are found.
    for (index, parameters) in [errors_parameters, warnings_parameters]
        .into_iter()
        .enumerate()
        .rev()
    {
        if let Some(parameters) = parameters {
            policies = if cel {
                with_cel_parameters(&policies, index, &parameters)?
            } else {
                with_yaml_parameters(&policies, index, &parameters)?
            };
        }
    }

    let mut out = format!(
        "# meshlife {version}: the server behind Kyverno's service calls and the {kind} pair that\n\
         # calls it, printed by `meshlife install kyverno`. Apply with `kubectl apply -f -`. The\n\
         # Secrets below hold a private key and a token (made just now, or kept in\n\
         # --secrets-dir): keep this output where you keep Secrets (the policies carry the token\n\
         # too; anyone who can read them can call the server, which only ever answers what it\n\
         # judges).\n",
        version = env!("CARGO_PKG_VERSION"),
    );
    out.push_str(&own_namespace(namespace));
    let _ = write!(
        out,
        "---
apiVersion: v1
kind: Secret
metadata:
  name: {TOKEN_SECRET}
  namespace: {namespace}
  labels: {{app.kubernetes.io/name: {NAME}, app.kubernetes.io/part-of: meshlife}}
type: Opaque
stringData:
  token: {token}
"
    );
    if !cel {
        out.push_str(&super::namespace_reader(
            "POST /kyverno adds each object's Namespace (its injection labels) from a watch: the\n\
             # ClusterPolicies send Kyverno's request, which carries none.",
            "meshlife-kyverno-namespace-reader",
            NAME,
            namespace,
        ));
    }
    out.push_str(&server.manifests(&tls)?);
    out.push_str("---\n");
    out.push_str(policies.trim_end());
    out.push('\n');
    Ok(out)
}

/// The parameters of the deny and the warn constraint of a cluster file.
fn cluster_facts(path: &std::path::Path) -> Result<(Option<Value>, Option<Value>), String> {
    let files = super::read_constraints(&[path.to_path_buf()])?;
    let constraints: Vec<&Constraint> = files.iter().flat_map(|file| &file.constraints).collect();
    let of = |action: EnforcementAction| -> Vec<&Constraint> {
        constraints
            .iter()
            .copied()
            .filter(|constraint| constraint.enforcement_action == action)
            .collect()
    };
    let (deny, warn) = (of(EnforcementAction::Deny), of(EnforcementAction::Warn));
    if deny.len() != 1 || warn.len() > 1 || constraints.len() != deny.len() + warn.len() {
        return Err(format!(
            "constraint {}: expected one deny constraint (for meshlife-errors) and at most one \
             warn constraint (for meshlife-warnings), as in constraints/gatekeeper/clusters/; \
             found {} deny, {} warn and {} other",
            path.display(),
            deny.len(),
            warn.len(),
            constraints.len() - deny.len() - warn.len()
        ));
    }
    // providerFailure is the Gatekeeper template's: a Kyverno policy's failure handling is its
    // context `default` and failurePolicy (cluster-policies.yaml says how to choose).
    let facts = |constraint: &Constraint| {
        let mut parameters = constraint.parameters.clone();
        if let Some(map) = parameters.as_object_mut() {
            map.remove("providerFailure");
        }
        parameters
    };
    Ok((
        Some(facts(deny[0])),
        warn.first().map(|constraint| facts(constraint)),
    ))
}

/// The URL, the CA (PEM, at the placeholder's indentation) and the namespace.
fn render(text: &str, url: &str, ca_pem: &str, namespace: &str) -> Result<String, String> {
    if !text.contains(SHIPPED_URL) || !text.contains(CA_PLACEHOLDER) {
        return Err("the shipped Kyverno policies lost their URL or CA placeholder".into());
    }
    let mut out = String::new();
    for line in text.replace(SHIPPED_URL, url).lines() {
        if line.trim() == CA_PLACEHOLDER {
            let indent = &line[..line.len() - line.trim_start().len()];
            for pem_line in ca_pem.trim().lines() {
                let _ = writeln!(out, "{indent}{pem_line}");
            }
        } else {
            let _ = writeln!(out, "{line}");
        }
    }
    // The server's own namespace, excluded from the policies.
    Ok(out
        .replace(
            &format!("- {SHIPPED_NAMESPACE}\n"),
            &format!("- {namespace}\n"),
        )
        .replace(&format!(" {SHIPPED_NAMESPACE}]"), &format!(" {namespace}]")))
}

const CONTENT_TYPE_HEADER: &str =
    "          - key: Content-Type\n            value: application/json\n";

fn with_header_token(text: &str, token: &str) -> Result<String, String> {
    if text.matches(CONTENT_TYPE_HEADER).count() != 2 {
        return Err("the shipped ClusterPolicies' headers are not where expected".into());
    }
    Ok(text.replace(
        CONTENT_TYPE_HEADER,
        &format!(
            "{CONTENT_TYPE_HEADER}          - key: Authorization\n            value: Bearer {token}\n"
        ),
    ))
}

fn with_cel_token(text: &str, token: &str) -> Result<String, String> {
    const HEADERS: &str = r#"{"Content-Type": "application/json"})"#;
    // meshlife-errors-cel calls twice (its match condition and its variable), the warnings once.
    if text.matches(HEADERS).count() != 3 {
        return Err("the shipped ValidatingPolicies' headers are not where expected".into());
    }
    Ok(text.replace(
        HEADERS,
        &format!(r#"{{"Content-Type": "application/json", "Authorization": "Bearer {token}"}})"#),
    ))
}

/// Replaces the `index`th rule's parameters (YAML under `- key: parameters`).
fn with_yaml_parameters(text: &str, index: usize, parameters: &Value) -> Result<String, String> {
    const START: &str = "        - key: parameters\n          value:\n";
    const END: &str = "        service:\n";
    let (start, end) = nth_block(text, index, START, END)?;
    let yaml = serde_yaml_ng::to_string(parameters).map_err(|error| error.to_string())?;
    let body: String = if parameters.as_object().is_some_and(|map| map.is_empty()) {
        "            {}\n".into()
    } else {
        super::indent(&yaml, 12)
    };
    Ok(format!(
        "{}{START}            # From the --constraint file given to meshlife install.\n{body}{}",
        &text[..start],
        &text[end..]
    ))
}

/// Replaces every parameters map (the CEL map after `"parameters": `) of the `index`th policy:
/// meshlife-errors-cel sends the same parameters from its match condition and its variable.
fn with_cel_parameters(text: &str, index: usize, parameters: &Value) -> Result<String, String> {
    const START: &str = "          \"parameters\": dyn({\n";
    const END: &str = "          })\n";
    const POLICY_NAMES: [&str; 2] = [
        "name: meshlife-errors-cel\n",
        "name: meshlife-warnings-cel\n",
    ];
    let policy_start = text
        .find(POLICY_NAMES[index])
        .ok_or("the shipped ValidatingPolicies are not where expected")?;
    let policy_end = text[policy_start..]
        .find("\n---\n")
        .map_or(text.len(), |offset| policy_start + offset);
    let (head, policy, tail) = (
        &text[..policy_start],
        &text[policy_start..policy_end],
        &text[policy_end..],
    );
    let blocks = policy.matches(START).count();
    if blocks == 0 {
        return Err("the shipped ValidatingPolicies' parameters are not where expected".into());
    }
    let mut policy = policy.to_string();
    // The last first: replacing a block moves the ones after it.
    for block in (0..blocks).rev() {
        let (start, end) = nth_block(&policy, block, START, END)?;
        policy = format!(
            "{}          \"parameters\": dyn({})\n{}",
            &policy[..start],
            cel_literal(parameters),
            &policy[end + END.len()..]
        );
    }
    Ok(format!("{head}{policy}{tail}"))
}

/// Where the `index`th block from `start` to the next `end` begins and where `end` begins.
fn nth_block(text: &str, index: usize, start: &str, end: &str) -> Result<(usize, usize), String> {
    let begin = text
        .match_indices(start)
        .nth(index)
        .map(|(position, _)| position)
        .ok_or("the shipped Kyverno policies' parameters are not where expected")?;
    let finish = text[begin..]
        .find(end)
        .map(|offset| begin + offset)
        .ok_or("the shipped Kyverno policies' parameters have no end")?;
    Ok((begin, finish))
}

/// A JSON value as a CEL literal whose map values and list items are `dyn`, since a CEL map
/// or list literal must otherwise hold one type.
fn cel_literal(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            // Keys sorted, as Go templates range over a map: the Helm chart writes the same text.
            let mut sorted: Vec<(&String, &Value)> = map.iter().collect();
            sorted.sort_by_key(|(key, _)| key.as_str());
            let entries: Vec<String> = sorted
                .into_iter()
                .map(|(key, value)| {
                    format!(
                        "{}: dyn({})",
                        serde_json::to_string(key).unwrap_or_default(),
                        cel_literal(value)
                    )
                })
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items
                .iter()
                .map(|item| format!("dyn({})", cel_literal(item)))
                .collect();
            format!("[{}]", items.join(", "))
        }
        // JSON's strings, numbers, booleans and null are CEL literals as written.
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cel_literals_wrap_every_value_so_mixed_maps_type_check() {
        let value = serde_json::json!({"c": {"d": null}, "a": 1, "b": [true, "x"]});
        assert_eq!(
            cel_literal(&value),
            r#"{"a": dyn(1), "b": dyn([dyn(true), dyn("x")]), "c": dyn({"d": dyn(null)})}"#
        );
    }

    #[test]
    fn parameters_replace_each_rules_block() {
        let facts = serde_json::json!({"kubernetesMinorVersion": 29, "minSeverity": "error"});
        let text = with_yaml_parameters(CLUSTER_POLICIES, 1, &facts).unwrap();
        let second = &text[text.find("name: meshlife-warnings").unwrap()..];
        assert!(
            second.contains("            kubernetesMinorVersion: 29\n"),
            "{second}"
        );
        assert!(!second.contains("excludeRules"), "{second}");
        // The first rule keeps its own.
        assert!(text.contains("            kubernetesMinorVersion: 33\n"));
    }

    #[test]
    fn cel_parameters_replace_each_policys_map() {
        let facts = serde_json::json!({"kubernetesMinorVersion": 29});
        let text = with_cel_parameters(VALIDATING_POLICIES, 1, &facts).unwrap();
        let text =
            with_cel_parameters(&text, 0, &serde_json::json!({"minSeverity": "error"})).unwrap();
        let second = &text[text.find("name: meshlife-warnings-cel").unwrap()..];
        assert!(
            second.contains(r#""parameters": dyn({"kubernetesMinorVersion": dyn(29)})"#),
            "{second}"
        );
        // meshlife-errors-cel's match condition and variable send the same parameters.
        let first = &text[..text.find("name: meshlife-warnings-cel").unwrap()];
        assert_eq!(
            first
                .matches(r#""parameters": dyn({"minSeverity": dyn("error")})"#)
                .count(),
            2,
            "{first}"
        );
        assert!(!first.contains("kubernetesMinorVersion"), "{first}");
    }
}
