{{/*
engine: webhook, as `meshlife install webhook`: the server as the API server's own validating
webhook, RBAC to watch Namespaces, and the constraint files it judges under. Context: {root, tls}.
*/}}
{{- define "meshlife.webhook" -}}
{{- $root := .root }}
{{- $ns := $root.Release.Namespace }}
{{- $files := include "meshlife.constraintFiles" $root | fromJsonArray }}
{{- $policy := $root.Values.failurePolicy | default "ignore" }}
---
# POST /admission reads each object's Namespace labels (istio-injection, istio.io/rev,
# linkerd.io/inject) from a watch, as the injectors do; an AdmissionReview carries no Namespace.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: meshlife-namespace-reader
  labels: {{ include "meshlife.clusterLabels" $root }}
rules:
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: meshlife-namespace-reader
  labels: {{ include "meshlife.clusterLabels" $root }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: meshlife-namespace-reader
subjects:
- kind: ServiceAccount
  name: meshlife
  namespace: {{ $ns }}
{{- $args := list }}
{{- $mounts := list }}
{{- if $files }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: meshlife-constraints
  namespace: {{ $ns }}
  labels: {{ include "meshlife.labels" $root }}
data:
{{- range $index, $file := $files }}
  # From {{ $file.name }}
  constraint-{{ $index }}.yaml: |
{{ include "meshlife.block" (dict "text" $file.text "indent" 4) }}
{{- $args = append $args (printf "--constraint=/constraints/constraint-%d.yaml" $index) }}
{{- end }}
{{- $mounts = list (dict "name" "constraints" "path" "/constraints" "comment" "The constraints judged under (read at start: restart to apply a change)." "source" "configMap: {name: meshlife-constraints}") }}
{{- end }}
{{ include "meshlife.server" (dict "root" $root "tls" .tls "args" $args "mounts" $mounts "callsTheApi" true "caller" "The API server") }}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: meshlife
  labels: {{ include "meshlife.clusterLabels" $root }}
webhooks:
- name: admission.meshlife.dev
  admissionReviewVersions: [v1]
  # meshlife only reads: dry-run requests are judged too.
  sideEffects: None
  {{- if eq $policy "fail" }}
  # Fail: an object the server could not judge (down, overloaded, too slow) is refused, so
  # keep the replicas and the PodDisruptionBudget; failurePolicy=ignore admits it.
  failurePolicy: Fail
  {{- else }}
  # Ignore: an object the server could not judge (down, overloaded, too slow) is admitted,
  # and the API server logs the failure. failurePolicy=fail refuses it instead.
  failurePolicy: Ignore
  {{- end }}
  # meshlife serve stops any evaluation at 1 s; the rest is TLS set-up and the network.
  timeoutSeconds: {{ $root.Values.timeoutSeconds }}
  matchPolicy: Equivalent
  clientConfig:
    {{- if $root.Values.url }}
    url: {{ include "meshlife.url" (dict "root" $root "inCluster" "" "path" "/admission") }}
    {{- else }}
    service: {name: meshlife, namespace: {{ $ns }}, path: /admission, port: 8443}
    {{- end }}
    caBundle: {{ .tls.caCert | b64enc }}
  rules:
  - apiGroups: [""]
    apiVersions: ["*"]
    resources: [pods, replicationcontrollers]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  - apiGroups: [apps]
    apiVersions: ["*"]
    resources: [deployments, statefulsets, daemonsets, replicasets]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  - apiGroups: [batch]
    apiVersions: ["*"]
    resources: [jobs, cronjobs]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  - apiGroups: [argoproj.io]
    apiVersions: ["*"]
    resources: [rollouts, analysistemplates]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  - apiGroups: [argoproj.io]
    apiVersions: ["*"]
    resources: [clusteranalysistemplates]
    operations: [CREATE, UPDATE]
    scope: Cluster
  - apiGroups: [kubeflow.org]
    apiVersions: ["*"]
    resources: [experiments, pytorchjobs, tfjobs, mpijobs, xgboostjobs, paddlejobs, jaxjobs]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  - apiGroups: [jobset.x-k8s.io]
    apiVersions: ["*"]
    resources: [jobsets]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  - apiGroups: [batch.volcano.sh]
    apiVersions: ["*"]
    resources: [jobs]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  # ML604: what Istio's ambient pods need of the NetworkPolicies that select them.
  - apiGroups: [networking.k8s.io]
    apiVersions: ["*"]
    resources: [networkpolicies]
    operations: [CREATE, UPDATE]
    scope: Namespaced
  # Never the server's own namespace (it could not start while judging itself), nor the
  # system namespaces no mesh injects into.
  namespaceSelector:
    matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: [{{ $ns }}, kube-system, kube-public, kube-node-lease]
  matchConditions:
  # Mirror pods of static manifests: the kubelet cannot act on a refusal.
  - name: not-a-kubelet
    expression: "!request.userInfo.username.startsWith('system:node:')"
  # Only the kinds meshlife reviews, whatever version matchPolicy converted from.
  - name: reviewed-kinds
    expression: >-
      request.kind.kind in ['Pod', 'ReplicationController', 'Deployment', 'StatefulSet',
      'DaemonSet', 'ReplicaSet', 'Job', 'CronJob', 'Rollout', 'AnalysisTemplate',
      'ClusterAnalysisTemplate', 'Experiment', 'PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob',
      'PaddleJob', 'JAXJob', 'JobSet', 'NetworkPolicy']
  # An object being deleted is only updated to let it go (a finalizer removed): never refused.
  - name: not-being-deleted
    expression: "!has(object.metadata.deletionTimestamp)"
{{- end }}
