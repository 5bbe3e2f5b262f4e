{{/*
What every object shares: the server's name, labels, the URL, the constraint files, and the
TLS material and token, made once per release (templates/meshlife.yaml) and kept on upgrade.
*/}}

{{/* The server's name: Gatekeeper's provider keeps the name `meshlife install gatekeeper` gives it. */}}
{{- define "meshlife.name" -}}
{{- if eq .Values.engine "gatekeeper" }}meshlife-provider{{ else }}meshlife{{ end }}
{{- end }}

{{/* Labels of every namespaced object of the server; Helm's own beside meshlife's. */}}
{{- define "meshlife.labels" -}}
{app.kubernetes.io/name: {{ include "meshlife.name" . }}, app.kubernetes.io/part-of: meshlife, app.kubernetes.io/managed-by: {{ .Release.Service }}, helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}}
{{- end }}

{{/* Labels of the cluster-scoped objects. */}}
{{- define "meshlife.clusterLabels" -}}
{app.kubernetes.io/part-of: meshlife, app.kubernetes.io/managed-by: {{ .Release.Service }}, helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}}
{{- end }}

{{/* `url`'s base (https://HOST[:PORT]) without a trailing slash, or empty. */}}
{{- define "meshlife.urlBase" -}}
{{- trimSuffix "/" .Values.url }}
{{- end }}

{{/* `url`'s host, without brackets, or empty. */}}
{{- define "meshlife.urlHost" -}}
{{- $authority := trimPrefix "https://" (include "meshlife.urlBase" .) }}
{{- if hasPrefix "[" $authority }}
{{- regexReplaceAll "^\\[([^\\]]*)\\].*$" $authority "${1}" }}
{{- else }}
{{- regexReplaceAll ":[0-9]+$" $authority "" }}
{{- end }}
{{- end }}

{{/* Where the callers reach PATH: through `url` when given, else the in-cluster address. */}}
{{- define "meshlife.url" -}}
{{- $base := include "meshlife.urlBase" .root }}
{{- if $base }}{{ $base }}{{ .path }}{{ else }}{{ .inCluster }}{{ .path }}{{ end }}
{{- end }}

{{/* The names of the Service the serving certificate carries. */}}
{{- define "meshlife.serviceNames" -}}
{{- $name := include "meshlife.name" . }}
{{- $ns := .Release.Namespace }}
{{- list (printf "%s.%s" $name $ns) (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.cluster.local" $name $ns) | toJson }}
{{- end }}

{{/*
The constraint files, as a JSON list of {name, text}: the shipped cluster file, then the
user's own.
*/}}
{{- define "meshlife.constraintFiles" -}}
{{- $files := list }}
{{- if .Values.cluster }}
{{- $path := printf "files/clusters/%s.yaml" .Values.cluster }}
{{- $text := .Files.Get $path }}
{{- if not $text }}{{ fail (printf "cluster %q: no file %s in the chart" .Values.cluster $path) }}{{ end }}
{{- $files = append $files (dict "name" (printf "constraints/gatekeeper/clusters/%s.yaml" .Values.cluster) "text" $text) }}
{{- end }}
{{- range $index, $text := .Values.constraints }}
{{- $files = append $files (dict "name" (printf "constraints[%d]" $index) "text" $text) }}
{{- end }}
{{- /* As `meshlife install` reads them: YAML, and one object per kind and name across files. */}}
{{- $seen := dict }}
{{- range $files }}
{{- $file := .name }}
{{- range $number, $text := regexSplit "(?m)^---[ \t]*$" .text -1 }}
{{- $document := fromYaml $text }}
{{- if hasKey $document "Error" }}
{{- fail (printf "%s: document %d is not YAML: %s" $file (add1 $number) $document.Error) }}
{{- end }}
{{- if $document.kind }}
{{- $key := printf "%s %s" $document.kind (dig "metadata" "name" "" $document) }}
{{- if hasKey $seen $key }}
{{- fail (printf "%s: %s is also in %s: Gatekeeper keeps one object per name, so only the one applied last would run; rename one of them" $file $key (get $seen $key)) }}
{{- end }}
{{- $_ := set $seen $key $file }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $files }}
{{- end }}

{{/*
The TLS material, as JSON {caCert, caKey, cert, key}. A new CA (ten years) and serving
certificate (two years), ECDSA P-256 as `meshlife install` makes them, unless the release
already holds them: on upgrade the Secret is read back (lookup) and kept while it names the
same hosts and is valid for more than 30 days, as `meshlife install --secrets-dir` keeps its
files. With cert-manager, the CA Secret is kept and cert-manager renews the rest. `helm
template` and `--dry-run` cannot read the cluster: they show new material every time.
*/}}
{{- define "meshlife.tls" -}}
{{- $name := include "meshlife.name" . }}
{{- $ns := .Release.Namespace }}
{{- $dns := include "meshlife.serviceNames" . | fromJsonArray }}
{{- $ips := list }}
{{- $host := include "meshlife.urlHost" . }}
{{- if $host }}
{{- if or (regexMatch "^[0-9.]+$" $host) (contains ":" $host) }}
{{- $ips = append $ips $host }}
{{- else }}
{{- $dns = append $dns $host }}
{{- end }}
{{- end }}
{{- $names := concat $dns $ips | join "," }}
{{- $out := dict }}
{{- if .Values.certManager }}
{{- $kept := lookup "v1" "Secret" $ns (printf "%s-ca" $name) }}
{{- $data := dig "data" dict $kept }}
{{- if and (index $data "tls.crt") (index $data "tls.key") }}
{{- $_ := set $out "caCert" (index $data "tls.crt" | b64dec) }}
{{- $_ := set $out "caKey" (index $data "tls.key" | b64dec) }}
{{- else }}
{{- $ca := genCAWithKey "meshlife-serve-ca" 3650 (genPrivateKey "ecdsa") }}
{{- $_ := set $out "caCert" $ca.Cert }}
{{- $_ := set $out "caKey" $ca.Key }}
{{- end }}
{{- else }}
{{- $kept := lookup "v1" "Secret" $ns (printf "%s-tls" $name) }}
{{- $data := dig "data" dict $kept }}
{{- $annotations := dig "metadata" "annotations" dict $kept }}
{{- $notAfter := index $annotations "meshlife.dev/certificate-not-after" | default "" }}
{{- $current := and (index $data "tls.crt") (index $data "tls.key") (index $data "ca.crt")
      (eq (index $annotations "meshlife.dev/certificate-names" | default "") $names)
      $notAfter (gt (toDate "2006-01-02T15:04:05Z07:00" $notAfter | unixEpoch | int64) (now | dateModify "720h" | unixEpoch | int64)) }}
{{- if $current }}
{{- $_ := set $out "caCert" (index $data "ca.crt" | b64dec) }}
{{- $_ := set $out "cert" (index $data "tls.crt" | b64dec) }}
{{- $_ := set $out "key" (index $data "tls.key" | b64dec) }}
{{- $_ := set $out "notAfter" $notAfter }}
{{- else }}
{{- $ca := genCAWithKey "meshlife-serve-ca" 3650 (genPrivateKey "ecdsa") }}
{{- $cert := genSignedCertWithKey (first $dns) $ips $dns 730 $ca (genPrivateKey "ecdsa") }}
{{- $_ := set $out "caCert" $ca.Cert }}
{{- $_ := set $out "cert" $cert.Cert }}
{{- $_ := set $out "key" $cert.Key }}
{{- $_ := set $out "notAfter" (now | dateModify "17520h" | date "2006-01-02T15:04:05Z07:00") }}
{{- end }}
{{- end }}
{{- $_ := set $out "names" $names }}
{{- toJson $out }}
{{- end }}

{{/* Kyverno's bearer token: kept from the release's Secret on upgrade, else 256 random bits as hex. */}}
{{- define "meshlife.kyvernoToken" -}}
{{- $kept := lookup "v1" "Secret" .Release.Namespace "meshlife-kyverno-token" }}
{{- $token := dig "data" "token" "" $kept }}
{{- if $token }}{{ $token | b64dec }}{{ else }}{{ randAlphaNum 64 | sha256sum }}{{ end }}
{{- end }}

{{/* A PEM (or any text) as the lines of a YAML block scalar indented by N. */}}
{{- define "meshlife.block" -}}
{{- .text | trim | indent .indent }}
{{- end }}
