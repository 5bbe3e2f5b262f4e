{{/*
engine: gatekeeper, as `meshlife install gatekeeper`: the provider, its Provider, the
MeshLifecycle ConstraintTemplate and the constraint files. Context: {root, tls}.
*/}}
{{- define "meshlife.gatekeeper" -}}
{{- $root := .root }}
{{- $ns := $root.Release.Namespace }}
{{- $certSecret := $root.Values.gatekeeper.certSecret }}
{{- if not $certSecret }}
{{- if ne $ns "gatekeeper-system" }}
{{- fail (printf "namespace %s: the provider verifies Gatekeeper's client certificate with ca.crt of the Secret gatekeeper-webhook-server-cert, which Gatekeeper keeps in gatekeeper-system and a pod in %s cannot mount. Copy it there (kubectl -n gatekeeper-system get secret gatekeeper-webhook-server-cert -o jsonpath='{.data.ca\\.crt}' | base64 -d > ca.crt && kubectl -n %s create secret generic gatekeeper-ca --from-file=ca.crt), again whenever Gatekeeper renews its CA, and set gatekeeper.certSecret=gatekeeper-ca; or install into gatekeeper-system, which Gatekeeper's webhook exempts" $ns $ns $ns) }}
{{- end }}
{{- $certSecret = "gatekeeper-webhook-server-cert" }}
{{- end }}
{{- $mount := dict "name" "gatekeeper-ca" "path" "/gatekeeper-certs" "comment" "Gatekeeper's webhook certificate Secret; only its ca.crt is read." "source" (printf "secret: {secretName: %s, items: [{key: ca.crt, path: ca.crt}]}" $certSecret) }}
{{- include "meshlife.server" (dict "root" $root "tls" .tls "args" (list "--client-ca=/gatekeeper-certs/ca.crt") "mounts" (list $mount) "callsTheApi" false "caller" "Gatekeeper") }}
---
apiVersion: externaldata.gatekeeper.sh/v1beta1
kind: Provider
metadata:
  name: meshlife
  labels: {{ include "meshlife.clusterLabels" $root }}
spec:
  url: {{ include "meshlife.url" (dict "root" $root "inCluster" (printf "https://meshlife-provider.%s:8443" $ns) "path" "/validate") }}
  # Seconds; inside Gatekeeper's 3 s webhook timeout. meshlife serve stops any evaluation at 1 s.
  timeout: 2
  caBundle: {{ .tls.caCert | b64enc }}
---
{{ $root.Files.Get "files/template.yaml" | trim }}
{{- /* Helm checks every kind before it creates anything, and MeshLifecycle exists only once
Gatekeeper has made it from the template above: the constraints come with the next upgrade
(NOTES.txt says so), as `kubectl apply` of the install's output succeeds the second time. */}}
{{- if $root.Capabilities.APIVersions.Has "constraints.gatekeeper.sh/v1beta1/MeshLifecycle" }}
{{- range include "meshlife.constraintFiles" $root | fromJsonArray }}
---
# From {{ .name }}
{{- /* helm uninstall deletes unknown kinds in alphabetical order, the ConstraintTemplate
before its constraints, and Gatekeeper refuses to delete a constraint whose template is gone
(when its webhook has DELETE operations on). So uninstall leaves the constraints to the API
server, which deletes them with their kind once Gatekeeper removes it, the template gone. The
annotation goes in as text, so that the file's comments stay with the facts they explain. */}}
{{- $documents := list }}
{{- range regexSplit "(?m)^---[ \t]*$" .text -1 }}
{{- $document := fromYaml . }}
{{- if not $document.kind }}
{{- else if dig "metadata" "annotations" "" $document }}
{{- $_ := set $document.metadata.annotations "helm.sh/resource-policy" "keep" }}
{{- $documents = append $documents (toYaml $document) }}
{{- else }}
{{- $documents = append $documents (regexReplaceAll "(?m)^metadata:[ \t]*$" (trim .) "metadata:\n  annotations: {helm.sh/resource-policy: keep}") }}
{{- end }}
{{- end }}
{{ join "\n---\n" $documents }}
{{- end }}
{{- end }}
{{- end }}
