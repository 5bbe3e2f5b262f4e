{{/*
engine: kyverno (or its old name kyverno-cel) and kyverno-clusterpolicy, as
`meshlife install kyverno [--cluster-policy]`: the server behind
Kyverno's service calls, requiring a bearer token, and the shipped policy pair
(constraints/kyverno/) with the server's URL, its CA, its namespace, the token and the cluster's
facts written in, by the same textual steps as the install. Context: {root, tls, token}.
*/}}
{{- define "meshlife.kyverno" -}}
{{- $root := .root }}
{{- $ns := $root.Release.Namespace }}
{{- $cel := ne $root.Values.engine "kyverno-clusterpolicy" }}
{{- $token := .token }}
---
apiVersion: v1
kind: Secret
metadata:
  name: meshlife-kyverno-token
  namespace: {{ $ns }}
  labels: {{ include "meshlife.labels" $root }}
type: Opaque
stringData:
  token: {{ $token }}
{{- $mount := dict "name" "kyverno-token" "path" "/kyverno-token" "comment" "The token the policies send as `Authorization: Bearer`." "source" "secret: {secretName: meshlife-kyverno-token}" }}
{{- if not $cel }}
---
# POST /kyverno adds each object's Namespace (its injection labels) from a watch: the
# ClusterPolicies send Kyverno's request, which carries none.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: meshlife-kyverno-namespace-reader
  labels: {{ include "meshlife.clusterLabels" $root }}
rules:
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: meshlife-kyverno-namespace-reader
  labels: {{ include "meshlife.clusterLabels" $root }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: meshlife-kyverno-namespace-reader
subjects:
- kind: ServiceAccount
  name: meshlife
  namespace: {{ $ns }}
{{- end }}
{{ include "meshlife.server" (dict "root" $root "tls" .tls "args" (list "--kyverno-token-file=/kyverno-token/token") "mounts" (list $mount) "callsTheApi" (not $cel) "caller" "Kyverno") }}
{{- $text := $root.Files.Get (ternary "files/validating-policies.yaml" "files/cluster-policies.yaml" $cel) }}
{{- $url := include "meshlife.url" (dict "root" $root "inCluster" (printf "https://meshlife.%s.svc:8443" $ns) "path" "/kyverno") }}
{{- $text = replace "https://meshlife.meshlife-system.svc:8443/kyverno" $url $text }}
{{- $pem := .tls.caCert | trim | replace "$" "$$" }}
{{- $text = regexReplaceAll "(?m)^( *)REPLACE_WITH_PEM_OF_THE_MESHLIFE_CA *$" $text (printf "${1}%s" (replace "\n" "\n${1}" $pem)) }}
{{- $text = replace "- meshlife-system\n" (printf "- %s\n" $ns) $text }}
{{- $text = replace " meshlife-system]" (printf " %s]" $ns) $text }}
{{- if $cel }}
{{- $text = replace "{\"Content-Type\": \"application/json\"})" (printf "{\"Content-Type\": \"application/json\", \"Authorization\": \"Bearer %s\"})" $token) $text }}
{{- else }}
{{- $header := "          - key: Content-Type\n            value: application/json\n" }}
{{- $text = replace $header (printf "%s          - key: Authorization\n            value: Bearer %s\n" $header $token) $text }}
{{- end }}
{{- $facts := include "meshlife.kyvernoFacts" $root | fromJson }}
{{- if $facts.errors }}
{{- if $cel }}
{{- $text = include "meshlife.celParameters" (dict "text" $text "policy" "name: meshlife-errors-cel\n" "parameters" $facts.errors) }}
{{- if $facts.warnings }}
{{- $text = include "meshlife.celParameters" (dict "text" $text "policy" "name: meshlife-warnings-cel\n" "parameters" $facts.warnings) }}
{{- end }}
{{- else }}
{{- $text = include "meshlife.yamlParameters" (dict "text" $text "facts" $facts) }}
{{- end }}
{{- end }}
---
{{ $text | trim }}
{{- end }}

{{/*
The parameters of the constraint files' one deny constraint (for meshlife-errors) and at most
one warn constraint (meshlife-warnings), without providerFailure (a Gatekeeper template's
parameter: Kyverno's failure handling is the policy's own): JSON {errors, warnings}, both
absent without any constraint file.
*/}}
{{- define "meshlife.kyvernoFacts" -}}
{{- $deny := list }}
{{- $warn := list }}
{{- $other := 0 }}
{{- $files := include "meshlife.constraintFiles" . | fromJsonArray }}
{{- range $files }}
{{- range regexSplit "(?m)^---[ \t]*$" .text -1 }}
{{- $document := fromYaml . }}
{{- if $document.kind }}
{{- $action := dig "spec" "enforcementAction" "" $document | default "deny" }}
{{- $parameters := dig "spec" "parameters" dict $document | deepCopy }}
{{- $_ := unset $parameters "providerFailure" }}
{{- if eq $action "deny" }}{{ $deny = append $deny $parameters }}
{{- else if eq $action "warn" }}{{ $warn = append $warn $parameters }}
{{- else }}{{ $other = add1 $other }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- if $files }}
{{- if or (ne (len $deny) 1) (gt (len $warn) 1) (gt $other 0) }}
{{- fail (printf "the constraint files (cluster and constraints): expected one deny constraint (for meshlife-errors) and at most one warn constraint (for meshlife-warnings), as in constraints/gatekeeper/clusters/; found %d deny, %d warn and %d other" (len $deny) (len $warn) $other) }}
{{- end }}
{{- $out := dict "errors" (first $deny) }}
{{- if $warn }}{{ $_ := set $out "warnings" (first $warn) }}{{ end }}
{{- toJson $out }}
{{- else }}{}{{ end }}
{{- end }}

{{/* The ClusterPolicy pair's `parameters` blocks replaced, the errors' first, then the warnings'. */}}
{{- define "meshlife.yamlParameters" -}}
{{- $start := "        - key: parameters\n          value:\n" }}
{{- $parts := splitList $start .text }}
{{- if ne (len $parts) 3 }}{{ fail "the shipped ClusterPolicies' parameters are not where expected" }}{{ end }}
{{- $out := index $parts 0 }}
{{- range $index, $parameters := list .facts.errors .facts.warnings }}
{{- $part := index $parts (add1 $index) }}
{{- if $parameters }}
{{- $rest := regexReplaceAll "(?s)\\A.*?(        service:\n)" $part "${1}" }}
{{- $body := ternary "            {}\n" (printf "%s\n" (toYaml $parameters | indent 12)) (empty $parameters) }}
{{- $part = printf "            # From the cluster's constraint file, given to the chart.\n%s%s" $body $rest }}
{{- end }}
{{- $out = printf "%s%s%s" $out $start $part }}
{{- end }}
{{- $out }}
{{- end }}

{{/* One ValidatingPolicy's `"parameters": dyn({...})` maps replaced by a CEL literal. */}}
{{- define "meshlife.celParameters" -}}
{{- $documents := splitList "\n---\n" .text }}
{{- $policy := .policy }}
{{- $literal := include "meshlife.celLiteral" .parameters | replace "$" "$$" }}
{{- $out := list }}
{{- range $documents }}
{{- if contains $policy . }}
{{- $out = append $out (regexReplaceAll "(?s)          \"parameters\": dyn\\(\\{\n.*?          \\}\\)\n" . (printf "          \"parameters\": dyn(%s)\n" $literal)) }}
{{- else }}
{{- $out = append $out . }}
{{- end }}
{{- end }}
{{- join "\n---\n" $out }}
{{- end }}

{{/* A value as a CEL literal whose map values and list items are dyn(), as `meshlife install kyverno` writes it. */}}
{{- define "meshlife.celLiteral" -}}
{{- if kindIs "map" . -}}
{{- $entries := list }}
{{- range $key, $value := . }}
{{- $entries = append $entries (printf "%s: dyn(%s)" (toJson $key) (include "meshlife.celLiteral" $value)) }}
{{- end -}}
{{ printf "{%s}" (join ", " $entries) }}
{{- else if kindIs "slice" . -}}
{{- $items := list }}
{{- range . }}
{{- $items = append $items (printf "dyn(%s)" (include "meshlife.celLiteral" .)) }}
{{- end -}}
{{ printf "[%s]" (join ", " $items) }}
{{- else -}}
{{ toJson . }}
{{- end -}}
{{- end }}
