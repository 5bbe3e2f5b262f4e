{{/*
The server, as `meshlife install` prints it for every engine: ServiceAccount, the TLS material
(or cert-manager's Issuer and Certificate), Deployment, Service, PodDisruptionBudget and the
ResourceQuota its priority class needs; with monitoring, its PodMonitor, PrometheusRule and
Grafana dashboard. Context: {root, tls, args, mounts, callsTheApi, caller},
each mount {name, path, source, comment}.
*/}}
{{- define "meshlife.server" -}}
{{- $root := .root }}
{{- $name := include "meshlife.name" $root }}
{{- $ns := $root.Release.Namespace }}
{{- $labels := include "meshlife.labels" $root }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels: {{ $labels }}
{{- if .callsTheApi }}
# meshlife serve watches Namespaces with this account's token.
automountServiceAccountToken: true
{{- else }}
# meshlife serve calls no Kubernetes API.
automountServiceAccountToken: false
{{- end }}
{{ include "meshlife.tlsObjects" . }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels: {{ $labels }}
spec:
  replicas: {{ $root.Values.replicas }}
  selector:
    matchLabels: {app.kubernetes.io/name: {{ $name }}}
  strategy:
    type: RollingUpdate
    # A new pod is ready before an old one goes: the server is in every admission's path.
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    metadata:
      labels: {app.kubernetes.io/name: {{ $name }}, app.kubernetes.io/part-of: meshlife}
      annotations:
        # {{ .caller }} calls the server over its own TLS: no mesh proxy belongs in the admission
        # path, where an unready proxy would fail every review.
        sidecar.istio.io/inject: "false"
        linkerd.io/inject: disabled
    spec:
      serviceAccountName: {{ $name }}
      automountServiceAccountToken: {{ .callsTheApi }}
      priorityClassName: system-cluster-critical
      # Drain delay 5 s + requests in flight at most 10 s, with room to spare.
      terminationGracePeriodSeconds: 20
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: ScheduleAnyway
        labelSelector:
          matchLabels: {app.kubernetes.io/name: {{ $name }}}
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: ScheduleAnyway
        labelSelector:
          matchLabels: {app.kubernetes.io/name: {{ $name }}}
      containers:
      - name: meshlife
        image: {{ $root.Values.image }}
        args:
        - serve
        - --listen=0.0.0.0:8443
        - --health-listen=0.0.0.0:8080
        - --tls-cert=/certs/tls.crt
        - --tls-key=/certs/tls.key
        {{- range .args }}
        - {{ . }}
        {{- end }}
        - --log-format=json
        env:
        # wasmtime keeps its compiled module here; the root filesystem is read-only.
        - name: XDG_CACHE_HOME
          value: /cache
        ports:
        - {name: https, containerPort: 8443, protocol: TCP}
        - {name: health, containerPort: 8080, protocol: TCP}
        readinessProbe:
          httpGet: {path: /readyz, port: health}
          periodSeconds: 2
          failureThreshold: 1
        livenessProbe:
          httpGet: {path: /healthz, port: health}
          periodSeconds: 10
          failureThreshold: 3
        startupProbe:
          httpGet: {path: /readyz, port: health}
          periodSeconds: 1
          failureThreshold: 30
        resources:
          {{- toYaml $root.Values.resources | nindent 10 }}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts:
        - {name: tls, mountPath: /certs, readOnly: true}
        {{- range .mounts }}
        - {name: {{ .name }}, mountPath: {{ .path }}, readOnly: true}
        {{- end }}
        - {name: cache, mountPath: /cache}
      volumes:
      - name: tls
        secret: {secretName: {{ $name }}-tls}
      {{- range .mounts }}
      # {{ .comment }}
      - name: {{ .name }}
        {{ .source }}
      {{- end }}
      - name: cache
        emptyDir: {sizeLimit: 64Mi}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels: {{ $labels }}
spec:
  selector: {app.kubernetes.io/name: {{ $name }}}
  ports:
  - {name: https, port: 8443, targetPort: https, protocol: TCP}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels: {{ $labels }}
spec:
  minAvailable: {{ sub (int $root.Values.replicas) 1 }}
  selector:
    matchLabels: {app.kubernetes.io/name: {{ $name }}}
---
# The server is in the admission path of every pod, so it runs as system-cluster-critical.
# Outside kube-system, clusters that limit that class (GKE's default, any cluster whose
# ResourceQuota admission config does) admit its pods only in a namespace whose quota names
# it. This quota does, as Gatekeeper's chart ships one for its own: 100 pods counts this
# namespace's other critical pods too (Gatekeeper's own, in gatekeeper-system).
apiVersion: v1
kind: ResourceQuota
metadata:
  name: {{ $name }}-critical-pods
  namespace: {{ $ns }}
  labels: {{ $labels }}
spec:
  hard: {pods: "100"}
  scopeSelector:
    matchExpressions:
    - {operator: In, scopeName: PriorityClass, values: [system-cluster-critical]}
{{- if $root.Values.monitoring }}
{{ include "meshlife.monitoring" $root }}
{{- end }}
{{- end }}

{{/* The serving certificate's Secret, or cert-manager's CA Secret, Issuer and Certificate. */}}
{{- define "meshlife.tlsObjects" -}}
{{- $root := .root }}
{{- $name := include "meshlife.name" $root }}
{{- $ns := $root.Release.Namespace }}
{{- $labels := include "meshlife.labels" $root }}
{{- if not $root.Values.certManager -}}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ $name }}-tls
  namespace: {{ $ns }}
  labels: {{ $labels }}
  annotations:
    # Read back on upgrade: the material is kept while it names these hosts and is valid.
    meshlife.dev/certificate-names: {{ .tls.names | quote }}
    meshlife.dev/certificate-not-after: {{ .tls.notAfter | quote }}
type: kubernetes.io/tls
stringData:
  tls.crt: |
{{ include "meshlife.block" (dict "text" .tls.cert "indent" 4) }}
  tls.key: |
{{ include "meshlife.block" (dict "text" .tls.key "indent" 4) }}
  ca.crt: |
{{ include "meshlife.block" (dict "text" .tls.caCert "indent" 4) }}
{{- else -}}
---
# The CA the callers trust; cert-manager issues the serving certificate from it.
apiVersion: v1
kind: Secret
metadata:
  name: {{ $name }}-ca
  namespace: {{ $ns }}
  labels: {{ $labels }}
type: kubernetes.io/tls
stringData:
  tls.crt: |
{{ include "meshlife.block" (dict "text" .tls.caCert "indent" 4) }}
  tls.key: |
{{ include "meshlife.block" (dict "text" .tls.caKey "indent" 4) }}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: {{ $name }}-ca
  namespace: {{ $ns }}
spec:
  ca:
    secretName: {{ $name }}-ca
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
spec:
  secretName: {{ $name }}-tls
  issuerRef: {name: {{ $name }}-ca, kind: Issuer}
  dnsNames: [{{ include "meshlife.serviceNames" $root | fromJsonArray | join ", " }}]
  duration: 2160h
  renewBefore: 720h
  privateKey: {algorithm: ECDSA, size: 256, rotationPolicy: Always}
  usages: [server auth, digital signature, key encipherment]
{{- end }}
{{- end }}
