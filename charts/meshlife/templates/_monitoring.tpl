{{/*
meshlife serve's monitoring, as `meshlife install --monitoring` prints it: a PodMonitor that has
the prometheus-operator scrape /metrics on the health port, the PrometheusRule of the alerts
(files/monitoring/rules.yaml; runbooks in docs/serve.md) and the Grafana dashboard
(files/monitoring/dashboard.json) in a ConfigMap that Grafana's dashboard sidecar loads (the
label grafana_dashboard: "1", the sidecar's default). The CLI prints the same two files.
*/}}
{{- define "meshlife.monitoring" -}}
{{- $name := include "meshlife.name" . }}
{{- $ns := .Release.Namespace }}
{{- $labels := include "meshlife.labels" . }}
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels: {{ $labels }}
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: {{ $name }}}
  podMetricsEndpoints:
  - {port: health, path: /metrics}
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels: {{ $labels }}
spec:
{{ .Files.Get "files/monitoring/rules.yaml" | indent 2 }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $name }}-dashboard
  namespace: {{ $ns }}
  labels: {{ $labels | trimSuffix "}" }}, grafana_dashboard: "1"}
data:
  meshlife-serve.json: |
{{ .Files.Get "files/monitoring/dashboard.json" | indent 4 }}
{{- end }}
