//! The Linkerd section of a generated constraint: native sidecars, proxy await, shutdown figures,
//! each derived from the Linkerd and Kubernetes versions.

use serde_json::Value;

use crate::constraints::facts::LinkerdFacts;
use crate::constraints::parameters::{
    DEFAULT_LINKERD_UID, NATIVE_MIN_MINOR, ParameterMap, cni_comment, rule,
};

pub(super) fn linkerd_parameters(
    linkerd: &LinkerdFacts,
    k: u32,
    warnings: &mut Vec<String>,
) -> ParameterMap {
    let mut map = ParameterMap::default();
    let version = &linkerd.version;
    let uid = linkerd.proxy_uid.unwrap_or(DEFAULT_LINKERD_UID);
    let opt_in = if k < NATIVE_MIN_MINOR {
        "(a config.linkerd.io/proxy-enable-native-sidecar: \"true\" request is ML104 here)"
    } else {
        "that do not opt in with config.linkerd.io/proxy-enable-native-sidecar: \"true\""
    };
    let classic_tail = format!(
        "so ML101 (startup-no-hold, when proxy-await is off), {}, {}, {} and {} apply to Linkerd \
         pods {opt_in}.",
        rule("ML301"),
        rule("ML302"),
        rule("ML201"),
        rule("ML403")
    );
    if linkerd.native && k < NATIVE_MIN_MINOR {
        warnings.push(format!(
            "Linkerd is set to inject native sidecars, but kubernetes 1.{k} cannot run them: \
             every Linkerd pod is reported by ML104 (native-sidecar-unsupported); pass \
             --linkerd-native-sidecars false if the injector is set to classic sidecars"
        ));
    }
    let native_tail = if k < NATIVE_MIN_MINOR {
        format!(
            "but kubernetes 1.{k} cannot run them: every Linkerd pod that keeps the default is {} \
             and is judged as classic.",
            rule("ML104")
        )
    } else {
        format!(
            "so ML101, ML201, ML301, ML302, ML303 and ML403 do not apply to Linkerd pods that \
             keep the default; {} still fires for injected native pods whose proxy-await is \
             disabled.",
            rule("ML103")
        )
    };
    let native_comment = match (linkerd.native_given, linkerd.native) {
        (false, false) => format!(
            "linkerd {version}: the proxy is injected as a classic sidecar (native sidecars are \
             opt-in before 2.20, config.linkerd.io/proxy-enable-native-sidecar), {classic_tail}"
        ),
        (false, true) => format!(
            "linkerd {version}: native sidecars by default (since 2.20, Helm \
             proxy.nativeSidecar), {native_tail}"
        ),
        (true, native) => {
            let by_version = if version.native_by_default() {
                "native"
            } else {
                "classic"
            };
            let what = if native { "native" } else { "classic" };
            let tail = if native { &native_tail } else { &classic_tail };
            format!(
                "--linkerd-native-sidecars {native}: Helm proxy.nativeSidecar={native}, the proxy \
                 is injected as a {what} sidecar (linkerd {version} defaults to {by_version}), \
                 {tail}"
            )
        }
    };
    map.push(
        "nativeSidecars",
        Value::Bool(linkerd.native),
        native_comment,
    );

    let await_comment = match (linkerd.proxy_await, linkerd.await_given) {
        (true, _) => format!(
            "config.linkerd.io/proxy-await defaults to enabled: classic Linkerd pods wait for the \
             proxy, so {} does not fire, and native ones get a startupProbe, unless a pod or its \
             Namespace sets it to disabled.",
            rule("ML101")
        ),
        (false, true) => format!(
            "--linkerd-await false (Helm proxy.await=false): classic Linkerd pods are {} and \
             injected native ones {}, unless a pod or its Namespace sets \
             config.linkerd.io/proxy-await: enabled.",
            rule("ML101"),
            rule("ML103")
        ),
        (false, false) => format!(
            "linkerd {version} has no proxy-await (added in 2.11): classic Linkerd pods start \
             without waiting for the proxy, {}.",
            rule("ML101")
        ),
    };
    map.push(
        "proxyAwait",
        Value::Bool(linkerd.proxy_await),
        await_comment,
    );

    let native_effective = linkerd.native && k >= NATIVE_MIN_MINOR;
    let cni_comment = cni_comment("linkerd", linkerd.cni, native_effective, uid);
    map.push("cni", Value::Bool(linkerd.cni), cni_comment);

    let shutdown_comment = if linkerd.shutdown_endpoint {
        format!(
            "Helm proxy.enableShutdownEndpoint on: a Linkerd Job can stop its classic proxy with \
             POST localhost:4191/shutdown or linkerd-await --shutdown (no {} for predicted pods).",
            rule("ML302")
        )
    } else {
        format!(
            "Helm proxy.enableShutdownEndpoint off (the default): a Linkerd Job that stops its \
             classic proxy with POST localhost:4191/shutdown or linkerd-await --shutdown is {} \
             unless its template or Namespace sets config.linkerd.io/proxy-admin-shutdown: \
             enabled.",
            rule("ML302")
        )
    };
    map.push(
        "shutdownEndpoint",
        Value::Bool(linkerd.shutdown_endpoint),
        shutdown_comment,
    );
    map.push_list(
        "injectedNamespaces",
        &linkerd.injected_namespaces,
        "Linkerd injection is on in these namespaces (\"*\": all), whatever their Namespace \
         object says; other namespaces: their linkerd.io/inject annotation decides."
            .into(),
    );
    if let Some(uid) = linkerd.proxy_uid {
        map.push(
            "proxyUID",
            Value::from(uid),
            format!(
                "linkerd-proxy runs as UID {uid}: its traffic is not captured, so ML201 and ML202 \
                 leave init containers running as {uid} alone."
            ),
        );
    }
    map
}
