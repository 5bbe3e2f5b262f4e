# ML101, ML301 and ML401 as a Gatekeeper ConstraintTemplate author would write them in Rego, for
# `meshlife bench` (engine regorus-3-rules). It follows the rules of docs/rules.md for the common
# cases (Istio and Linkerd, predicted and injected sidecars, every workload kind) so that regorus
# does comparable work; the module remains the reference for the edge cases.
package meshlife.bench

import rego.v1

# The pod template of every workload kind the rules read.
pod_spec := input.review.object.spec if input.review.object.kind == "Pod"

pod_spec := input.review.object.spec.template.spec if {
	input.review.object.kind in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
}

pod_spec := input.review.object.spec.jobTemplate.spec.template.spec if input.review.object.kind == "CronJob"

pod_metadata := input.review.object.metadata if input.review.object.kind == "Pod"

pod_metadata := input.review.object.spec.template.metadata if {
	input.review.object.kind in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
}

pod_metadata := input.review.object.spec.jobTemplate.spec.template.metadata if input.review.object.kind == "CronJob"

annotations := object.get(pod_metadata, "annotations", {})

labels := object.get(pod_metadata, "labels", {})

namespace_labels := object.get(input.review, ["namespaceObject", "metadata", "labels"], {})

parameters := object.get(input, "parameters", {})

# --- which mesh and which kind of sidecar ---------------------------------------------------

istio_injected if {
	some container in pod_spec.containers
	container.name == "istio-proxy"
}

istio_injected if {
	some container in object.get(pod_spec, "initContainers", [])
	container.name == "istio-proxy"
}

istio_requested if labels["sidecar.istio.io/inject"] == "true"

istio_requested if {
	not labels["sidecar.istio.io/inject"] == "false"
	namespace_labels["istio-injection"] == "enabled"
}

istio_requested if {
	not labels["sidecar.istio.io/inject"] == "false"
	labels["istio.io/rev"]
}

istio if istio_injected

istio if istio_requested

linkerd_injected if {
	some container in pod_spec.containers
	container.name == "linkerd-proxy"
}

linkerd_injected if {
	some container in object.get(pod_spec, "initContainers", [])
	container.name == "linkerd-proxy"
}

linkerd_requested if annotations["linkerd.io/inject"] == "enabled"

linkerd if linkerd_injected

linkerd if linkerd_requested

kubernetes_minor := object.get(parameters, "kubernetesMinorVersion", 33)

istio_native if {
	some container in object.get(pod_spec, "initContainers", [])
	container.name == "istio-proxy"
	container.restartPolicy == "Always"
}

istio_native if {
	not istio_injected
	kubernetes_minor >= 29
	annotations["sidecar.istio.io/nativeSidecar"] == "true"
}

istio_native if {
	not istio_injected
	kubernetes_minor >= 29
	not annotations["sidecar.istio.io/nativeSidecar"] == "false"
	object.get(parameters, ["istio", "nativeSidecars"], false) == true
}

linkerd_native if {
	some container in object.get(pod_spec, "initContainers", [])
	container.name == "linkerd-proxy"
	container.restartPolicy == "Always"
}

linkerd_native if {
	not linkerd_injected
	kubernetes_minor >= 29
	annotations["config.linkerd.io/proxy-enable-native-sidecar"] == "true"
}

# proxy.istio.io/config is JSON or YAML.
proxy_config := json.unmarshal(annotations["proxy.istio.io/config"]) if {
	json.is_valid(annotations["proxy.istio.io/config"])
}

proxy_config := yaml.unmarshal(annotations["proxy.istio.io/config"]) if {
	not json.is_valid(annotations["proxy.istio.io/config"])
	yaml.is_valid(annotations["proxy.istio.io/config"])
}

istio_hold if proxy_config.holdApplicationUntilProxyStarts == true

istio_hold if object.get(parameters, ["istio", "holdApplicationUntilProxyStarts"], false) == true

linkerd_await if annotations["config.linkerd.io/proxy-await"] != "disabled"

# --- ML101: the app can start before the proxy -----------------------------------------------

violation contains {"msg": msg, "details": {"rule": "ML101"}} if {
	istio
	not istio_native
	not istio_hold
	some container in pod_spec.containers
	container.name != "istio-proxy"
	msg := sprintf("[ML101 startup-no-hold] container %q can start before the classic istio-proxy sidecar is ready", [container.name])
}

violation contains {"msg": msg, "details": {"rule": "ML101"}} if {
	linkerd
	not linkerd_native
	not linkerd_await
	some container in pod_spec.containers
	container.name != "linkerd-proxy"
	msg := sprintf("[ML101 startup-no-hold] container %q can start before the classic linkerd-proxy sidecar is ready", [container.name])
}

# --- ML301: a Job whose classic sidecar never exits -------------------------------------------

exit_markers := array.concat(
	["quitquitquit", "linkerd-await", "/shutdown"],
	object.get(parameters, "exitMarkers", []),
)

calls_exit(container) if {
	some part in array.concat(object.get(container, "command", []), object.get(container, "args", []))
	some marker in exit_markers
	contains(part, marker)
}

batch if input.review.object.kind in {"Job", "CronJob"}

batch if pod_spec.restartPolicy in {"Never", "OnFailure"}

violation contains {"msg": msg, "details": {"rule": "ML301"}} if {
	batch
	istio
	not istio_native
	some container in pod_spec.containers
	container.name != "istio-proxy"
	not calls_exit(container)
	msg := sprintf("[ML301 job-sidecar-never-exits] the classic istio-proxy sidecar keeps running once container %q has finished", [container.name])
}

violation contains {"msg": msg, "details": {"rule": "ML301"}} if {
	batch
	linkerd
	not linkerd_native
	some container in pod_spec.containers
	container.name != "linkerd-proxy"
	not calls_exit(container)
	msg := sprintf("[ML301 job-sidecar-never-exits] the classic linkerd-proxy sidecar keeps running once container %q has finished", [container.name])
}

# --- ML401: the proxy's drain outlasts the grace period ----------------------------------------

grace_seconds := object.get(pod_spec, "terminationGracePeriodSeconds", 30)

drain_text := proxy_config.terminationDrainDuration

drain_text := object.get(parameters, ["istio", "terminationDrainDuration"], "5s") if not proxy_config.terminationDrainDuration

drain_seconds := time.parse_duration_ns(drain_text) / 1000000000

violation contains {"msg": msg, "details": {"rule": "ML401"}} if {
	istio
	drain_seconds >= grace_seconds
	msg := sprintf("[ML401 drain-exceeds-grace] the istio-proxy sidecar drains for %v, not shorter than terminationGracePeriodSeconds %v", [drain_text, grace_seconds])
}
