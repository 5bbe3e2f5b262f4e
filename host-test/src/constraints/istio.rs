//! The Istio section of a generated constraint: native sidecars, holdApplicationUntilProxyStarts,
//! drain and termination figures, each derived from the Istio and Kubernetes versions.

use meshlife_policy::duration::format_ms;
use serde_json::Value;

use crate::constraints::facts::IstioFacts;
use crate::constraints::parameters::{
    CLASSIC_ONLY, DEFAULT_DRAIN, DEFAULT_GRACE_SECONDS, DEFAULT_ISTIO_UID, ISTIO_AUTO_NATIVE_SINCE,
    NATIVE_MIN_MINOR, ParameterMap, cni_comment, rule,
};

pub(super) fn istio_parameters(
    istio: &IstioFacts,
    k: u32,
    warnings: &mut Vec<String>,
) -> ParameterMap {
    let mut map = ParameterMap::default();
    let version = &istio.version;
    let uid = istio.proxy_uid.unwrap_or(DEFAULT_ISTIO_UID);
    let classic_tail = if k < NATIVE_MIN_MINOR {
        format!(
            "so {CLASSIC_ONLY} and the drain rules ML401/ML402 apply to Istio pods (a \
             sidecar.istio.io/nativeSidecar: \"true\" request is ML104 here)."
        )
    } else {
        format!(
            "so {CLASSIC_ONLY} and the drain rules ML401/ML402 apply to Istio pods that do not \
             set sidecar.istio.io/nativeSidecar: \"true\"."
        )
    };
    if istio.native && k < NATIVE_MIN_MINOR {
        warnings.push(format!(
            "Istio is set to inject native sidecars, but kubernetes 1.{k} cannot run them: every \
             Istio pod is reported by ML104 (native-sidecar-unsupported)"
        ));
    }
    let native_tail = if k < NATIVE_MIN_MINOR {
        format!(
            "but kubernetes 1.{k} cannot run them: every Istio pod that does not set \
             sidecar.istio.io/nativeSidecar: \"false\" is {} and is judged as classic.",
            rule("ML104")
        )
    } else {
        format!(
            "so {CLASSIC_ONLY} and ML401/ML402 do not apply to Istio pods unless they set \
             sidecar.istio.io/nativeSidecar: \"false\"; {} and {} still do.",
            rule("ML103"),
            rule("ML405")
        )
    };
    let native_comment = match (istio.native_given, istio.native) {
        (false, false) if version.minor < ISTIO_AUTO_NATIVE_SINCE => format!(
            "istio {version}: istiod injects classic sidecars (ENABLE_NATIVE_SIDECARS=false \
             before 1.27), {classic_tail}"
        ),
        (false, false) => format!(
            "istio {version}: ENABLE_NATIVE_SIDECARS=auto injects native sidecars only when every \
             kubelet is 1.33 or later, and the lowest here is 1.{k}: istiod injects classic \
             sidecars, {classic_tail}"
        ),
        (false, true) => format!(
            "istio {version} on kubernetes 1.{k}: ENABLE_NATIVE_SIDECARS=auto injects native \
             sidecars (every kubelet is 1.33 or later), {native_tail}"
        ),
        (true, native) => {
            let by_version = if istio.native_by_version {
                "native"
            } else {
                "classic"
            };
            let what = if native { "native" } else { "classic" };
            let tail = if native { &native_tail } else { &classic_tail };
            format!(
                "--istio-native-sidecars {native}: istiod injects {what} sidecars \
                 (ENABLE_NATIVE_SIDECARS={native}; istio {version} on kubernetes 1.{k} would \
                 inject {by_version} ones by default), {tail}"
            )
        }
    };
    map.push("nativeSidecars", Value::Bool(istio.native), native_comment);

    // Below 1.29 a native request is judged as classic: every pod reads the classic settings.
    let native_effective = istio.native && k >= NATIVE_MIN_MINOR;
    let only_classic = if native_effective {
        " Only pods that opt out of native sidecars read it."
    } else {
        ""
    };
    let hold_comment = if istio.hold {
        format!(
            "meshConfig.defaultConfig.holdApplicationUntilProxyStarts on: classic Istio pods \
             wait for the proxy, so {} does not fire unless their proxy.istio.io/config \
             annotation sets holdApplicationUntilProxyStarts: false.{only_classic}",
            rule("ML101")
        )
    } else {
        format!(
            "meshConfig.defaultConfig.holdApplicationUntilProxyStarts off: a classic Istio pod is \
             {} unless its proxy.istio.io/config annotation sets \
             holdApplicationUntilProxyStarts: true.{only_classic}",
            rule("ML101")
        )
    };
    map.push(
        "holdApplicationUntilProxyStarts",
        Value::Bool(istio.hold),
        hold_comment,
    );
    let forced_comment = if istio.hold_forced {
        format!(
            "Helm values.global.proxy.holdApplicationUntilProxyStarts on: istiod ORs it into \
             every pod, so every classic Istio pod waits for the proxy and a per-pod false cannot \
             switch it off: no {} for Istio pods.",
            rule("ML101")
        )
    } else {
        "Helm values.global.proxy.holdApplicationUntilProxyStarts off: the pod's \
         proxy.istio.io/config annotation, else the meshConfig default above, decides hold."
            .to_string()
    };
    map.push("holdForced", Value::Bool(istio.hold_forced), forced_comment);

    let cni_comment = cni_comment("istio", istio.cni, native_effective, uid);
    map.push("cni", Value::Bool(istio.cni), cni_comment);

    let default_note = if istio.drain == DEFAULT_DRAIN && !istio.drain_given {
        " (the default)"
    } else {
        ""
    };
    let longest_grace = istio.drain_ms / 1000;
    let grace_clause = if longest_grace >= DEFAULT_GRACE_SECONDS {
        format!(
            "whose terminationGracePeriodSeconds is {longest_grace} or less, which includes the \
             default 30: every classic Istio pod that keeps the default grace period is ML401"
        )
    } else {
        format!("whose terminationGracePeriodSeconds is {longest_grace} or less")
    };
    let drain_text = format_ms(istio.drain_ms);
    map.push(
        "terminationDrainDuration",
        Value::String(istio.drain.clone()),
        format!(
            "meshConfig.defaultConfig.terminationDrainDuration {}{default_note}: {} for classic \
             Istio pods {grace_clause}; {} when an app's preStop sleep lasts {drain_text} or \
             longer. A pod's proxy.istio.io/config annotation overrides it.",
            istio.drain,
            rule("ML401"),
            rule("ML402"),
        ),
    );
    if let Some(envoy_drain) = &istio.envoy_drain {
        map.push(
            "drainDuration",
            Value::String(envoy_drain.clone()),
            format!(
                "meshConfig.defaultConfig.drainDuration {envoy_drain} (Istio's default: 45s): how \
                 long Envoy drains its listeners; a classic proxy closes its inbound listeners \
                 then, while terminationDrainDuration keeps it running: {} when an app's preStop \
                 outlasts it. A pod's proxy.istio.io/config annotation overrides it.",
                rule("ML406"),
            ),
        );
    }
    map.push_list(
        "injectedNamespaces",
        &istio.injected_namespaces,
        "Istio injection is on in these namespaces (\"*\": all), whatever their Namespace object \
         says; other namespaces: their istio-injection or istio.io/rev label decides."
            .into(),
    );
    map.push_list(
        "ambientNamespaces",
        &istio.ambient_namespaces,
        "Namespaces in ambient mode (\"*\": all): their pods get no sidecar, and no findings, \
         unless they ask for one; read only when a review carries no Namespace object (its \
         istio.io/dataplane-mode label decides otherwise)."
            .into(),
    );
    if let Some(uid) = istio.proxy_uid {
        map.push(
            "proxyUID",
            Value::from(uid),
            format!(
                "istio-proxy runs as UID {uid}: its traffic is not captured, so ML201 and ML202 \
                 leave init containers running as {uid} alone."
            ),
        );
    }
    map
}
