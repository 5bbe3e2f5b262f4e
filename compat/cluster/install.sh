#!/usr/bin/env bash
# Builds a real control plane from the Go module proxy into compat/cluster/bin/, pinned by
# go.sum files and rebuilt only when one changes (a machine that built once builds nothing):
#   etcd, kube-apiserver  Kubernetes v1.35.4 (this folder's go.mod: k8s.io/kubernetes with its
#                         staging modules replaced by their published versions), version-stamped
#   gatekeeper            Gatekeeper v3.23.0's manager (compat/gatekeeper's go.mod, the version
#                         the frameworks harness uses)
#   kyverno               Kyverno v1.19.0's admission controller (compat/kyverno's go.mod, the
#                         version the CLI harness uses, with its pod-security fork)
#   kyverno-reports-controller  the same version's reports controller (PolicyReports)
# The checks drive the API server with client-go (this module), not a kubectl of the machine.
# Cold, on 2 cores: about 7 min for kube-apiserver, 1 for etcd; Gatekeeper's and Kyverno's
# controllers reuse most of their harnesses' builds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
compat="$(dirname "$here")"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null; then
    echo "compat/cluster/install.sh: no go on PATH (Go 1.26 is needed)" >&2
    exit 2
fi
export GOFLAGS="-mod=readonly -buildvcs=false ${GOFLAGS:-}"
export GOTOOLCHAIN=local
bin="$here/bin"
mkdir -p "$bin"

kubernetes_version=v1.35.4
stamp="-X k8s.io/component-base/version.gitVersion=$kubernetes_version \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35 \
-X k8s.io/component-base/version.gitTreeState=clean"

# build NAME MODULE_DIR CGO PACKAGE [LDFLAGS]: kept while MODULE_DIR/go.sum is the one it was
# built from. CGO follows each module's other builds, so that Go's cache serves both.
build() {
    local name="$1" module="$2" cgo="$3" package="$4" ldflags="${5:-}"
    local out="$bin/$name" sum="$bin/.$name.go.sum"
    if [ -x "$out" ] && cmp -s "$module/go.sum" "$sum"; then
        return
    fi
    local start=$SECONDS
    echo "building $name ($package)" >&2
    (cd "$module" && CGO_ENABLED=$cgo go build -trimpath -ldflags "$ldflags" -o "$out.new" "$package")
    mv "$out.new" "$out"
    cp "$module/go.sum" "$sum"
    echo "  $name built in $((SECONDS - start)) s" >&2
}

build kube-apiserver "$here" 0 ./cmd/kube-apiserver "$stamp"
build etcd "$here" 0 ./cmd/etcd
# The reality stage's node: the same module and version as the API server.
build kubelet "$here" 0 ./cmd/kubelet "$stamp"
build kube-controller-manager "$here" 0 ./cmd/kube-controller-manager "$stamp"
build kube-scheduler "$here" 0 ./cmd/kube-scheduler "$stamp"
build kube-proxy "$here" 0 ./cmd/kube-proxy "$stamp"
build kubectl "$here" 0 ./cmd/kubectl "$stamp"
build gatekeeper "$compat/gatekeeper" 1 github.com/open-policy-agent/gatekeeper/v3
build kyverno "$compat/kyverno" 1 github.com/kyverno/kyverno/cmd/kyverno
build kyverno-reports-controller "$compat/kyverno" 1 github.com/kyverno/kyverno/cmd/reports-controller
# The reality stage's istiod, the proxy image's agent and the node's CNI plugin:
# pilot-discovery, pilot-agent and istio-cni of the istio.io/istio version istio-charts.sh pins
# (its go.mod has no replace, so `go install PACKAGE@VERSION` builds each by that go.mod,
# outside this module); kept while bin/.NAME.version is that version. Cold, on 2 cores: about
# 4 min for pilot-discovery, then 10 s for pilot-agent and about 30 s for istio-cni.
# go_install PACKAGE VERSION: `go install PACKAGE@VERSION` into bin/, kept while
# bin/.NAME.version is VERSION (NAME: the package's last element).
go_install() {
    local package="$1" version="$2"
    local name="${package##*/}"
    if [ -x "$bin/$name" ] && [ "$(cat "$bin/.$name.version" 2>/dev/null)" = "$version" ]; then
        return
    fi
    local start=$SECONDS scratch
    echo "building $name ($package@$version)" >&2
    scratch="$(mktemp -d)"
    (cd "$scratch" && GOBIN="$scratch/bin" CGO_ENABLED=0 GOFLAGS=-mod=mod \
        go install "$package@$version") || { rm -rf "$scratch"; exit 1; }
    mv "$scratch/bin/$name" "$bin/$name"
    rm -rf "$scratch"
    echo "$version" > "$bin/.$name.version"
    echo "  $name built in $((SECONDS - start)) s" >&2
}
istio_version="$(sed -n 's/^version=//p' "$here/istio-charts.sh")"
for istio_package in pilot/cmd/pilot-discovery pilot/cmd/pilot-agent cni/cmd/istio-cni; do
    go_install "istio.io/istio/$istio_package" "$istio_version"
done
# krew itself and its manifest validator, for the kubectl plugin checks of the diagnose stage:
# .krew.yaml rendered for the binary under test is validated, then installed by krew.
for krew_cmd in krew validate-krew-manifest; do
    go_install "sigs.k8s.io/krew/cmd/$krew_cmd" v0.4.3
done
echo "compat/cluster/bin: $("$bin/kube-apiserver" --version), etcd $("$bin/etcd" --version | sed -n 's/^etcd Version: //p'), gatekeeper v3.23.0, kyverno v1.19.0 (admission and reports controllers)" >&2
