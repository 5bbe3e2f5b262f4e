#!/usr/bin/env bash
# meshlife's three installs in a real control plane (see compat/README-cluster.md): builds what
# is missing (install.sh), then runs cluster-compat, which starts etcd, kube-apiserver,
# Gatekeeper, Kyverno and meshlife serve on free loopback ports and stops all of them on
# every way out. Prints a line per engine and cluster file and ends with
# `cluster-compat: PASS`; exits 1 on any difference or failed check, 2 when it cannot run.
# Usage: compat/cluster/run.sh [MESHLIFE_BINARY] [-- cluster-compat flags, e.g. -engines webhook]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../go-harness.sh"
binary_arg=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    binary_arg="$1"
    shift
fi
[ "${1:-}" = "--" ] && shift
go_harness cluster-compat "$here" "$binary_arg"
bash "$here/install.sh"
helm="$(bash "$here/../helm/install.sh")"
out="$target/compat/cluster"
mkdir -p "$out"
(cd "$here" && go build -trimpath -o "$out/cluster-compat" .)
gatekeeper_module="$(cd "$here/../gatekeeper" && go list -m -f '{{.Dir}}' github.com/open-policy-agent/gatekeeper/v3)"
kyverno_module="$(cd "$here/../kyverno" && go list -m -f '{{.Dir}}' github.com/kyverno/kyverno)"
istio_charts="$(bash "$here/istio-charts.sh")"
exec "$out/cluster-compat" -meshlife "$binary" -repo "$repo" -bin "$here/bin" \
    -gatekeeper-module "$gatekeeper_module" -kyverno-module "$kyverno_module" -helm "$helm" \
    -istio-charts "$istio_charts" "$@"
