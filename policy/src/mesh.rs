//! Deciding, once per pod spec, which mesh proxies it and how: from the injected pod's shape
//! when the proxy is already there, predicted from annotations, namespace and parameters when
//! it is a template. Rules read this decision; they never re-derive it.

use crate::duration::parse_go_duration;
use crate::input::Container;
use crate::params::Settings;
use crate::proxy_config::{ProxyConfig, parse_proxy_config};
use crate::workload::Workload;
use crate::yaml_subset::UNSUPPORTED_YAML;

pub const ISTIO_PROXY: &str = "istio-proxy";
pub const LINKERD_PROXY: &str = "linkerd-proxy";
const ISTIO_INIT: &str = "istio-init";
const ISTIO_VALIDATION: &str = "istio-validation";
const LINKERD_INIT: &str = "linkerd-init";
const LINKERD_VALIDATOR: &str = "linkerd-network-validator";

pub const ISTIO_INJECT: &str = "sidecar.istio.io/inject";
pub const ISTIO_NATIVE: &str = "sidecar.istio.io/nativeSidecar";
pub const ISTIO_PROXY_CONFIG: &str = "proxy.istio.io/config";
pub const ISTIO_INTERCEPTION_MODE: &str = "sidecar.istio.io/interceptionMode";
pub const LINKERD_INJECT: &str = "linkerd.io/inject";
pub const LINKERD_AWAIT: &str = "config.linkerd.io/proxy-await";
pub const LINKERD_ADMIN_SHUTDOWN: &str = "config.linkerd.io/proxy-admin-shutdown";
pub const LINKERD_WAIT_BEFORE_EXIT: &str = "config.alpha.linkerd.io/proxy-wait-before-exit-seconds";
pub const LINKERD_SHUTDOWN_GRACE: &str = "config.linkerd.io/shutdown-grace-period";
/// Current spelling first, then the beta (2.19) and alpha (2.15) ones.
pub const LINKERD_NATIVE: [&str; 3] = [
    "config.linkerd.io/proxy-enable-native-sidecar",
    "config.beta.linkerd.io/proxy-enable-native-sidecar",
    "config.alpha.linkerd.io/proxy-enable-native-sidecar",
];

/// Kubernetes minor version from which native sidecars run (beta, on by default).
pub const NATIVE_SIDECAR_MIN_MINOR: u32 = 29;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mesh {
    Istio,
    Linkerd,
}

impl Mesh {
    pub fn as_str(self) -> &'static str {
        match self {
            Mesh::Istio => "istio",
            Mesh::Linkerd => "linkerd",
        }
    }

    pub fn proxy_name(self) -> &'static str {
        match self {
            Mesh::Istio => ISTIO_PROXY,
            Mesh::Linkerd => LINKERD_PROXY,
        }
    }

    pub fn proxy_uid(self, settings: &Settings) -> i64 {
        match self {
            Mesh::Istio => settings.raw.istio.proxy_uid,
            Mesh::Linkerd => settings.raw.linkerd.proxy_uid,
        }
    }

    /// Init containers the mesh itself adds.
    pub fn owns_init_container(name: &str) -> bool {
        matches!(
            name,
            ISTIO_INIT
                | ISTIO_VALIDATION
                | ISTIO_PROXY
                | LINKERD_INIT
                | LINKERD_VALIDATOR
                | LINKERD_PROXY
        )
    }
}

/// Where the proxy sits, or will sit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// An init container with `restartPolicy: Always`.
    Native,
    /// A regular container; `hold` when the app waits for it.
    Classic { hold: bool },
    /// In `initContainers` without `restartPolicy: Always`: the pod never starts.
    BrokenInit,
}

/// A mesh annotation (or label) whose value the mesh would ignore or reject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationProblem {
    pub key: &'static str,
    pub is_label: bool,
    pub problem: String,
    pub fix: String,
    /// Valid YAML that meshlife's reader does not support: the mesh reads it, meshlife judges
    /// the pod as if it were absent.
    pub unreadable_here: bool,
}

#[derive(Debug, Clone)]
pub struct MeshDecision {
    pub mesh: Mesh,
    /// True when the proxy is already in the pod spec; false for a prediction.
    pub injected: bool,
    pub placement: Placement,
    /// Native sidecars were asked for but the cluster cannot run them (ML104); the pod is
    /// then judged as classic.
    pub native_unsupported: Option<String>,
    /// Injected: index of the proxy in `containers` (classic) or `initContainers` (native).
    pub proxy_index: Option<usize>,
    /// Predicted Istio: index in `containers` of an `istio-proxy` declared with `image: auto`,
    /// which the injector merges over its own container (the declared fields win).
    pub placeholder_index: Option<usize>,
    /// Injected classic: the proxy carries the hold hook but is not `containers[0]`.
    pub hold_hook_misplaced: bool,
    /// Traffic capture is done by CNI, so it is active before any init container runs.
    pub cni: bool,
    /// Injected: index of `istio-init` / `linkerd-init` among the init containers.
    pub redirect_init_index: Option<usize>,
    /// Istio: effective `terminationDrainDuration`, in ms.
    pub drain_ms: u64,
    /// Istio: `EXIT_ON_ZERO_ACTIVE_CONNECTIONS` and `MINIMUM_DRAIN_DURATION` (default 5 s).
    pub exit_on_zero_active_connections: bool,
    pub minimum_drain_ms: u64,
    /// Istio: where the drain value came from, for messages.
    pub drain_from_annotation: bool,
    /// Istio: `drainDuration`, in ms: how long Envoy drains once asked (a native proxy's
    /// preStop asks at the pod's deletion), and whether the annotation set it.
    pub envoy_drain_ms: u64,
    pub envoy_drain_from_annotation: bool,
    pub annotation_problems: Vec<AnnotationProblem>,
    /// Istio: the `proxy.istio.io/config` annotation as read (defaults when absent).
    pub proxy_config: ProxyConfig,
    /// Predicted native: whether the injector gives the proxy a startupProbe, which holds the
    /// later containers until it is ready (Istio: on by default; Linkerd: with proxy-await).
    pub predicted_startup_probe: bool,
}

impl MeshDecision {
    /// Whether the app containers wait for the proxy to be ready: a classic proxy with the hold
    /// hook, or a native one that a startupProbe (or postStart hook) keeps "not started" until
    /// it is ready. A native proxy without either counts as started as soon as it runs.
    pub fn proxy_gates_app_start(&self, workload: &Workload) -> bool {
        match self.placement {
            Placement::Classic { hold } => hold,
            Placement::Native if self.injected => self
                .proxy(workload)
                .is_some_and(|proxy| proxy.has_startup_probe || proxy.post_start().is_some()),
            Placement::Native => self.predicted_startup_probe,
            Placement::BrokenInit => false,
        }
    }

    pub fn is_classic(&self) -> bool {
        matches!(self.placement, Placement::Classic { .. })
    }

    pub fn is_native(&self) -> bool {
        self.placement == Placement::Native
    }

    /// The proxy container as the manifest declares it: the injected one, else the `image:
    /// auto` placeholder the injector will merge its own over (the declared fields win).
    pub fn declared_proxy<'w>(&self, workload: &'w Workload<'w>) -> Option<&'w Container<'w>> {
        self.proxy(workload).or_else(|| {
            self.placeholder_index
                .and_then(|index| workload.spec.containers().get(index))
        })
    }

    /// The injected proxy container, if any.
    pub fn proxy<'w>(&self, workload: &'w Workload<'w>) -> Option<&'w Container<'w>> {
        let index = self.proxy_index?;
        match self.placement {
            Placement::Classic { .. } => workload.spec.containers().get(index),
            Placement::Native | Placement::BrokenInit => workload.spec.init_containers().get(index),
        }
    }

    pub fn proxy_path(&self, workload: &Workload) -> Option<String> {
        let index = self.proxy_index?;
        Some(match self.placement {
            Placement::Classic { .. } => workload.container_path(index),
            Placement::Native | Placement::BrokenInit => workload.init_container_path(index),
        })
    }
}

pub enum Decision {
    /// No proxy now, none predicted, and why.
    NotMeshed(NotMeshed),
    /// An Istio gateway: the proxy is the workload itself.
    Gateway,
    Meshed(Box<MeshDecision>),
}

/// Why a pod spec without a proxy gets none predicted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum NotMeshed {
    /// Nothing asks for a proxy: no inject label or annotation, and the namespace has no
    /// injection on. `namespace_unknown`: `review.namespaceObject` was absent and the namespace
    /// is in neither `istio.injectedNamespaces` nor `linkerd.injectedNamespaces` (the
    /// "Namespace not in the input and not in the facts" case).
    #[serde(rename_all = "camelCase")]
    NoMeshSignal {
        namespace: Option<String>,
        namespace_object_absent: bool,
        namespace_unknown: bool,
    },
    /// The pod template opts out: `sidecar.istio.io/inject: "false"` (label or annotation) or
    /// `linkerd.io/inject: disabled`.
    #[serde(rename_all = "camelCase")]
    OptedOut {
        mesh: &'static str,
        key: &'static str,
        is_label: bool,
        value: String,
    },
    /// The Namespace object turns injection off: the label `istio-injection: disabled`, or
    /// the annotation `linkerd.io/inject: disabled` (`key` says which). Against a `"*"` in the
    /// facts this opt-out wins: the injector never sees such a namespace.
    #[serde(rename_all = "camelCase")]
    NamespaceInjectionDisabled {
        namespace: Option<String>,
        key: &'static str,
    },
    /// `hostNetwork: true`: neither injector touches the pod.
    HostNetwork,
    /// `kube-system` or `kube-public`.
    SystemNamespace { namespace: String },
    /// Istio ambient (`istio.io/dataplane-mode: ambient` on the pod or its namespace) without a
    /// sidecar request: no in-pod proxy.
    #[serde(rename_all = "camelCase")]
    Ambient { by_pod_label: bool },
    /// `inject.istio.io/templates` names no sidecar template: the proxy cannot be predicted.
    CustomTemplate { templates: String },
    /// The annotation `sidecar.istio.io/inject: "true"` alone, in a namespace without injection:
    /// no webhook is called for the pod, so the annotation is never read.
    AnnotationOnlyInjectRequest { namespace: Option<String> },
}

impl NotMeshed {
    /// A specific reason says more than "no signal".
    fn is_specific(&self) -> bool {
        !matches!(self, NotMeshed::NoMeshSignal { .. })
    }
}

pub fn decide(workload: &Workload, settings: &Settings) -> Decision {
    let containers = workload.spec.containers();
    let inits = workload.spec.init_containers();
    let find = |list: &[Container], name: &str| list.iter().position(|c| c.name() == name);

    // Istio's gateway template: the proxy is the workload (its placeholder container is often
    // named istio-proxy, so this comes before the injected-pod check).
    let linkerd_injected = find(containers, LINKERD_PROXY)
        .or(find(inits, LINKERD_PROXY))
        .is_some();
    if !linkerd_injected
        && workload
            .annotation("inject.istio.io/templates")
            .is_some_and(|t| t.contains("gateway"))
    {
        return Decision::Gateway;
    }
    for mesh in [Mesh::Istio, Mesh::Linkerd] {
        let proxy = mesh.proxy_name();
        // `image: auto` is the value Istio's injector replaces with its proxy image: a pod that
        // declares its own istio-proxy so (custom injection, `inject.istio.io/templates`) is
        // not injected yet, and is predicted like any other.
        let is_proxy = |c: &Container| {
            c.name() == proxy && !(mesh == Mesh::Istio && c.image.as_deref() == Some("auto"))
        };
        // A native proxy wins over a placeholder of the same name left in `containers` (Istio's
        // spire template leaves an image-less one there).
        if let Some(index) = inits
            .iter()
            .position(|c| is_proxy(c) && c.is_restartable_init())
        {
            return Decision::Meshed(Box::new(injected(workload, settings, mesh, true, index)));
        }
        if let Some(index) = find(containers, proxy) {
            // A gateway's placeholder is `image: auto` too: it stays a gateway.
            if mesh == Mesh::Istio && is_istio_gateway(containers, index) {
                return Decision::Gateway;
            }
            if is_proxy(&containers[index]) {
                return Decision::Meshed(Box::new(injected(
                    workload, settings, mesh, false, index,
                )));
            }
        }
        if let Some(index) = inits.iter().position(is_proxy) {
            return Decision::Meshed(Box::new(injected(workload, settings, mesh, true, index)));
        }
    }
    if workload.spec.host_network == Some(true) {
        return Decision::NotMeshed(NotMeshed::HostNetwork);
    }
    let istio = match istio_predicted(workload, settings) {
        Ok(()) => return Decision::Meshed(Box::new(predicted(workload, settings, Mesh::Istio))),
        Err(reason) => reason,
    };
    let linkerd = match linkerd_predicted(workload, settings) {
        Ok(()) => {
            return Decision::Meshed(Box::new(predicted(workload, settings, Mesh::Linkerd)));
        }
        Err(reason) => reason,
    };
    Decision::NotMeshed(if !istio.is_specific() && linkerd.is_specific() {
        linkerd
    } else {
        istio
    })
}

/// A gateway runs the proxy as its only container, or with the `router` mode argument.
fn is_istio_gateway(containers: &[Container], proxy_index: usize) -> bool {
    containers.len() == 1
        || containers[proxy_index]
            .args()
            .iter()
            .any(|arg| arg == "router")
}

fn injected(
    workload: &Workload,
    settings: &Settings,
    mesh: Mesh,
    in_init_containers: bool,
    index: usize,
) -> MeshDecision {
    let spec = &workload.spec;
    let inits = spec.init_containers();
    let has_init = |name: &str| inits.iter().position(|c| c.name() == name);
    let mut decision = base_decision(workload, settings, mesh, true);
    decision.proxy_index = Some(index);
    if in_init_containers {
        let proxy = &inits[index];
        decision.placement = if proxy.is_restartable_init() {
            Placement::Native
        } else {
            Placement::BrokenInit
        };
        if decision.is_native() && settings.raw.kubernetes_minor_version < NATIVE_SIDECAR_MIN_MINOR
        {
            decision.native_unsupported = Some(format!(
                "the proxy is a native sidecar (restartPolicy: Always) but kubernetesMinorVersion is {}",
                settings.raw.kubernetes_minor_version
            ));
        }
    } else {
        let proxy = &spec.containers()[index];
        let has_hook = has_hold_hook(mesh, proxy);
        decision.placement = Placement::Classic {
            hold: has_hook && index == 0,
        };
        decision.hold_hook_misplaced = has_hook && index != 0;
        if mesh == Mesh::Istio {
            apply_proxy_env(&mut decision, proxy);
        }
    }
    let (redirect, validator, mesh_cni) = match mesh {
        Mesh::Istio => (ISTIO_INIT, ISTIO_VALIDATION, settings.raw.istio.cni),
        Mesh::Linkerd => (LINKERD_INIT, LINKERD_VALIDATOR, settings.raw.linkerd.cni),
    };
    decision.redirect_init_index = has_init(redirect);
    decision.cni = has_init(validator).is_some()
        || (mesh_cni && decision.redirect_init_index.is_none() && captures_traffic(workload, mesh));
    decision
}

/// An Istio proxy's own env: pilot-agent reads its drain settings from it.
fn apply_proxy_env(decision: &mut MeshDecision, proxy: &Container) {
    if let Some(flag) = proxy.env_value("EXIT_ON_ZERO_ACTIVE_CONNECTIONS") {
        decision.exit_on_zero_active_connections = flag.eq_ignore_ascii_case("true");
    }
    if let Some(ms) = proxy
        .env_value("MINIMUM_DRAIN_DURATION")
        .and_then(|d| parse_go_duration(d).ok())
    {
        decision.minimum_drain_ms = ms;
    }
}

/// True when the proxy's postStart hook is the mesh's "wait until ready" command.
fn has_hold_hook(mesh: Mesh, proxy: &Container) -> bool {
    let Some(hook) = proxy.post_start() else {
        return false;
    };
    let command = hook.exec_command().join(" ");
    match mesh {
        Mesh::Istio => command.contains("pilot-agent") && command.contains("wait"),
        Mesh::Linkerd => command.contains("linkerd-await"),
    }
}

/// `interceptionMode: NONE` turns capture off, and with it the init-container hazards.
fn captures_traffic(workload: &Workload, mesh: Mesh) -> bool {
    mesh != Mesh::Istio
        || !workload
            .annotation(ISTIO_INTERCEPTION_MODE)
            .is_some_and(|mode| mode.eq_ignore_ascii_case("NONE"))
}

fn predicted(workload: &Workload, settings: &Settings, mesh: Mesh) -> MeshDecision {
    let mut decision = base_decision(workload, settings, mesh, false);
    if mesh == Mesh::Istio {
        decision.placeholder_index = workload.spec.containers().iter().position(|container| {
            container.name() == mesh.proxy_name() && container.image.as_deref() == Some("auto")
        });
        if let Some(placeholder) = decision.declared_proxy(workload) {
            // The declared env overrides the template's, as on an injected proxy.
            apply_proxy_env(&mut decision, placeholder);
        }
    }
    let (native_requested, hold) = match mesh {
        Mesh::Istio => {
            let native = match workload.annotation(ISTIO_NATIVE) {
                Some("true") => true,
                Some("false") => false,
                _ => settings.raw.istio.native_sidecars,
            };
            let istio = &settings.raw.istio;
            let hold = istio.hold_forced
                || decision
                    .proxy_config
                    .hold_application_until_proxy_starts
                    .unwrap_or(istio.hold_application_until_proxy_starts);
            (native, hold)
        }
        Mesh::Linkerd => {
            let native = LINKERD_NATIVE
                .iter()
                .find_map(|key| workload.annotation(key).and_then(parse_go_bool))
                .or_else(|| {
                    LINKERD_NATIVE
                        .iter()
                        .find_map(|key| workload.namespace_annotation(key).and_then(parse_go_bool))
                })
                .unwrap_or(settings.raw.linkerd.native_sidecars);
            let await_setting = |value: Option<&str>| match value {
                Some("enabled") => Some(true),
                Some("disabled") => Some(false),
                _ => None,
            };
            let hold = await_setting(workload.annotation(LINKERD_AWAIT))
                .or_else(|| await_setting(workload.namespace_annotation(LINKERD_AWAIT)))
                .unwrap_or(settings.raw.linkerd.proxy_await);
            (native, hold)
        }
    };
    let minor = settings.raw.kubernetes_minor_version;
    decision.predicted_startup_probe = match mesh {
        // values.global.proxy.startupProbe.enabled, on by default.
        Mesh::Istio => true,
        // Native with await: startupProbe GET :4191/ready; without await, no probe at all.
        Mesh::Linkerd => hold,
    };
    decision.placement = if native_requested && minor >= NATIVE_SIDECAR_MIN_MINOR {
        Placement::Native
    } else {
        Placement::Classic { hold }
    };
    if native_requested && minor < NATIVE_SIDECAR_MIN_MINOR {
        decision.native_unsupported = Some(format!(
            "native sidecars are requested but kubernetesMinorVersion is {minor}"
        ));
    }
    let cni = match mesh {
        Mesh::Istio => settings.raw.istio.cni,
        Mesh::Linkerd => settings.raw.linkerd.cni,
    };
    decision.cni = cni && captures_traffic(workload, mesh);
    decision
}

/// Istio's default `drainDuration` (pkg/config/mesh/mesh.go): Envoy's `--drain-time-s`.
pub const ISTIO_DRAIN_DURATION_MS: u64 = 45_000;

/// The fields shared by both ways of deciding: drain settings and annotation problems.
fn base_decision(
    workload: &Workload,
    settings: &Settings,
    mesh: Mesh,
    injected: bool,
) -> MeshDecision {
    let mut decision = MeshDecision {
        mesh,
        injected,
        placement: Placement::Classic { hold: false },
        native_unsupported: None,
        proxy_index: None,
        placeholder_index: None,
        hold_hook_misplaced: false,
        cni: false,
        redirect_init_index: None,
        drain_ms: settings.istio_drain_ms,
        exit_on_zero_active_connections: false,
        minimum_drain_ms: 5000,
        drain_from_annotation: false,
        envoy_drain_ms: settings.istio_envoy_drain_ms,
        envoy_drain_from_annotation: false,
        annotation_problems: Vec::new(),
        proxy_config: ProxyConfig::default(),
        predicted_startup_probe: false,
    };
    let mut config_problems = Vec::new();
    if mesh == Mesh::Istio
        && let Some(text) = workload.annotation(ISTIO_PROXY_CONFIG)
    {
        let (config, problems) = parse_proxy_config(text);
        config_problems = problems;
        if let Some(ms) = config.termination_drain_ms {
            decision.drain_ms = ms;
            decision.drain_from_annotation = true;
        }
        if let Some(flag) = config.exit_on_zero_active_connections {
            decision.exit_on_zero_active_connections = flag;
        }
        if let Some(ms) = config.minimum_drain_ms {
            decision.minimum_drain_ms = ms;
        }
        if let Some(ms) = config.drain_duration_ms {
            decision.envoy_drain_ms = ms;
            decision.envoy_drain_from_annotation = true;
        }
        decision.proxy_config = config;
    }
    decision.annotation_problems = annotation_problems(workload, mesh, config_problems);
    decision
}

/// Both injectors leave the system namespaces alone.
fn in_system_namespace(workload: &Workload) -> bool {
    matches!(
        workload.namespace.as_deref(),
        Some("kube-system" | "kube-public")
    )
}

fn system_namespace(workload: &Workload) -> NotMeshed {
    NotMeshed::SystemNamespace {
        namespace: workload.namespace.as_deref().unwrap_or("").to_string(),
    }
}

fn namespace_name(workload: &Workload) -> Option<String> {
    workload.namespace.as_deref().map(str::to_string)
}

/// Nothing asks for a proxy; whether the namespace's facts were known at all.
fn no_mesh_signal(workload: &Workload, settings: &Settings) -> NotMeshed {
    let namespace = workload.namespace.as_deref().unwrap_or("");
    let absent = workload.namespace_meta.is_none();
    NotMeshed::NoMeshSignal {
        namespace: namespace_name(workload),
        namespace_object_absent: absent,
        namespace_unknown: absent
            && !in_list(&settings.raw.istio.injected_namespaces, namespace)
            && !in_list(&settings.raw.linkerd.injected_namespaces, namespace),
    }
}

fn istio_predicted(workload: &Workload, settings: &Settings) -> Result<(), NotMeshed> {
    let namespace = workload.namespace.as_deref().unwrap_or("");
    if in_system_namespace(workload) {
        return Err(system_namespace(workload));
    }
    // The label is what the webhook's objectSelector sees, so it wins over the annotation.
    let label_request = workload.pod_meta.label(ISTIO_INJECT);
    let pod_request = label_request.or_else(|| workload.annotation(ISTIO_INJECT));
    if pod_request == Some("false") {
        return Err(NotMeshed::OptedOut {
            mesh: "istio",
            key: ISTIO_INJECT,
            is_label: label_request.is_some(),
            value: "false".to_string(),
        });
    }
    // Custom injection templates (proxyless gRPC, a platform's own) may add no proxy at all:
    // only the sidecar templates can be predicted.
    if let Some(templates) = workload.annotation("inject.istio.io/templates")
        && !templates
            .split(',')
            .map(str::trim)
            .any(|template| matches!(template, "sidecar" | "grpc-agent"))
    {
        return Err(NotMeshed::CustomTemplate {
            templates: templates.to_string(),
        });
    }
    let istio = &settings.raw.istio;
    // The facts describe the cluster; a Namespace manifest beside the workload may be a bare
    // stub, so a namespace the facts name as injected is injected whatever it says. A "*" is
    // not a statement about this namespace: its own `istio-injection: disabled` wins.
    let label = workload.namespace_label("istio-injection");
    let namespace_injection = match (listed(&istio.injected_namespaces, namespace), label) {
        (Listed::ByName, _) => Some(true),
        (Listed::ByWildcard, Some("disabled")) | (Listed::No, Some("disabled")) => Some(false),
        (Listed::ByWildcard, _) | (Listed::No, Some("enabled")) => Some(true),
        (Listed::No, _) => workload.namespace_label("istio.io/rev").map(|_| true),
    };
    if namespace_injection == Some(false) {
        return Err(NotMeshed::NamespaceInjectionDisabled {
            namespace: namespace_name(workload),
            key: "istio-injection",
        });
    }
    // The webhooks select pods by namespace label or by pod *label* (`sidecar.istio.io/inject:
    // "true"`, `istio.io/rev`); the annotation is only read once a webhook is called for the
    // pod, that is when the namespace has injection on. An annotation "true" alone in a
    // namespace without injection asks nobody.
    let sidecar_requested = label_request == Some("true")
        || workload.pod_meta.label("istio.io/rev").is_some()
        || (pod_request == Some("true") && namespace_injection == Some(true));
    let pod_mode = workload.pod_meta.label("istio.io/dataplane-mode");
    let namespace_ambient =
        namespace_is_ambient(workload.namespace_meta.as_ref(), namespace, settings);
    let ambient = pod_mode == Some("ambient") || (namespace_ambient && pod_mode != Some("none"));
    if ambient && !sidecar_requested {
        return Err(NotMeshed::Ambient {
            by_pod_label: pod_mode == Some("ambient"),
        });
    }
    if sidecar_requested || namespace_injection == Some(true) {
        return Ok(());
    }
    if pod_request == Some("true") {
        return Err(NotMeshed::AnnotationOnlyInjectRequest {
            namespace: namespace_name(workload),
        });
    }
    Err(no_mesh_signal(workload, settings))
}

fn linkerd_predicted(workload: &Workload, settings: &Settings) -> Result<(), NotMeshed> {
    if in_system_namespace(workload) {
        return Err(system_namespace(workload));
    }
    let enabled = |value: Option<&str>| matches!(value, Some("enabled" | "ingress"));
    let meshed = match workload.annotation(LINKERD_INJECT) {
        Some("disabled") => {
            return Err(NotMeshed::OptedOut {
                mesh: "linkerd",
                key: LINKERD_INJECT,
                is_label: false,
                value: "disabled".to_string(),
            });
        }
        value if enabled(value) => true,
        _ => {
            let namespace = workload.namespace.as_deref().unwrap_or("");
            let annotation = workload.namespace_annotation(LINKERD_INJECT);
            // As for Istio, the facts win over a Namespace manifest when they name the
            // namespace; against a "*", its own `linkerd.io/inject: disabled` wins.
            match listed(&settings.raw.linkerd.injected_namespaces, namespace) {
                Listed::ByName => true,
                Listed::ByWildcard if annotation == Some("disabled") => {
                    return Err(NotMeshed::NamespaceInjectionDisabled {
                        namespace: namespace_name(workload),
                        key: LINKERD_INJECT,
                    });
                }
                Listed::ByWildcard => true,
                Listed::No => enabled(annotation),
            }
        }
    };
    if meshed {
        Ok(())
    } else {
        Err(no_mesh_signal(workload, settings))
    }
}

/// Whether Istio's ambient mode covers the namespace: its label when the input carries the
/// Namespace, else the facts' `istio.ambientNamespaces`.
pub(crate) fn namespace_is_ambient(
    namespace_meta: Option<&crate::input::ObjectMeta>,
    namespace: &str,
    settings: &Settings,
) -> bool {
    match namespace_meta {
        Some(meta) => meta.label(DATAPLANE_MODE) == Some("ambient"),
        None => in_list(&settings.raw.istio.ambient_namespaces, namespace),
    }
}

/// The label that puts a pod or namespace in ambient mode (`ambient`) or keeps it out (`none`).
pub const DATAPLANE_MODE: &str = "istio.io/dataplane-mode";

pub(crate) fn in_list(list: &[String], namespace: &str) -> bool {
    listed(list, namespace) != Listed::No
}

/// How a list of the facts holds a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    ByName,
    /// Only by `"*"`: every namespace, this one not in particular.
    ByWildcard,
    No,
}

fn listed(list: &[String], namespace: &str) -> Listed {
    if list.iter().any(|entry| entry == namespace) {
        Listed::ByName
    } else if list.iter().any(|entry| entry == "*") {
        Listed::ByWildcard
    } else {
        Listed::No
    }
}

/// Go's `strconv.ParseBool`, which Linkerd uses for its boolean annotations.
pub fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The mesh's lifecycle annotations whose values it would ignore or reject.
fn annotation_problems(
    workload: &Workload,
    mesh: Mesh,
    config_problems: Vec<String>,
) -> Vec<AnnotationProblem> {
    let mut problems = Vec::new();
    let mut check = |key: &'static str,
                     is_label: bool,
                     value: Option<&str>,
                     valid: &dyn Fn(&str) -> bool,
                     expected: &str| {
        if let Some(value) = value
            && !valid(value)
        {
            problems.push(AnnotationProblem {
                key,
                is_label,
                problem: format!("is \"{value}\", not {expected}"),
                fix: format!("set {key} to {expected}"),
                unreadable_here: false,
            });
        }
    };
    let true_or_false = |v: &str| v == "true" || v == "false";
    let unsigned = |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
    match mesh {
        Mesh::Istio => {
            check(
                ISTIO_INJECT,
                true,
                workload.pod_meta.label(ISTIO_INJECT),
                &true_or_false,
                "\"true\" or \"false\"",
            );
            check(
                ISTIO_INJECT,
                false,
                workload.annotation(ISTIO_INJECT),
                &true_or_false,
                "\"true\" or \"false\"",
            );
            check(
                ISTIO_NATIVE,
                false,
                workload.annotation(ISTIO_NATIVE),
                &true_or_false,
                "\"true\" or \"false\"",
            );
            for problem in config_problems {
                let unreadable_here = problem.contains(UNSUPPORTED_YAML);
                let fix = if unreadable_here {
                    "write proxy.istio.io/config as JSON (or YAML without anchors, aliases and tags) so meshlife can check it"
                } else if problem.contains("duration") {
                    "write the durations in proxy.istio.io/config as Go duration strings such as \"30s\" or \"1m30s\""
                } else if problem.contains("boolean") || problem.contains("EXIT_ON_ZERO") {
                    "write holdApplicationUntilProxyStarts in proxy.istio.io/config as an unquoted boolean (true or false), and proxyMetadata values as strings such as \"true\""
                } else {
                    "write proxy.istio.io/config as a YAML or JSON map such as '{\"holdApplicationUntilProxyStarts\": true, \"terminationDrainDuration\": \"5s\"}'"
                };
                problems.push(AnnotationProblem {
                    key: ISTIO_PROXY_CONFIG,
                    is_label: false,
                    problem,
                    fix: fix.to_string(),
                    unreadable_here,
                });
            }
        }
        Mesh::Linkerd => {
            check(
                LINKERD_AWAIT,
                false,
                workload.annotation(LINKERD_AWAIT),
                &|v| v == "enabled" || v == "disabled",
                "\"enabled\" or \"disabled\"",
            );
            check(
                LINKERD_WAIT_BEFORE_EXIT,
                false,
                workload.annotation(LINKERD_WAIT_BEFORE_EXIT),
                &unsigned,
                "an unsigned integer number of seconds such as \"10\"",
            );
            for key in LINKERD_NATIVE {
                check(
                    key,
                    false,
                    workload.annotation(key),
                    &|v| parse_go_bool(v).is_some(),
                    "\"true\" or \"false\"",
                );
            }
            check(
                LINKERD_SHUTDOWN_GRACE,
                false,
                workload.annotation(LINKERD_SHUTDOWN_GRACE),
                &|v| parse_go_duration(v).is_ok(),
                "a Go duration such as \"30s\"",
            );
        }
    }
    problems
}
