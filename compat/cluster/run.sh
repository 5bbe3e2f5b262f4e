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
case " $* " in
*reality*)
    # The node's runtime, from Debian's packages (containerd 1.6.20, runc 1.1.5 on Debian 12).
    source "$repo/image/machine.sh"
    install_debian_packages containerd runc containernetworking-plugins iptables iproute2
    # The reality stage's own programs (static: they run FROM scratch in pods) and the real
    # Envoy for the proxy image; istiod and pilot-agent come from install.sh.
    (cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$here/bin/workload" ./cmd/workload \
        && CGO_ENABLED=0 go build -trimpath -o "$here/bin/pause" ./cmd/pause)
    bash "$here/envoy.sh" > /dev/null
    # The workload's modes over real loopback sockets, the image archives read back, the node's
    # claim (a killed run's node is undone by the next, a running one is left alone) and the
    # readers of /proc/PID/stat, and the free ports.
    (cd "$here" && go test -count=1 ./cmd/workload/ && go test -count=1 -run 'Image|SharedLibraries|NodeClaim|ProcStat|FreePort' .)
    ;;
esac
gatekeeper_module="$(cd "$here/../gatekeeper" && go list -m -f '{{.Dir}}' github.com/open-policy-agent/gatekeeper/v3)"
kyverno_module="$(cd "$here/../kyverno" && go list -m -f '{{.Dir}}' github.com/kyverno/kyverno)"
istio_charts="$(bash "$here/istio-charts.sh")"
exec "$out/cluster-compat" -meshlife "$binary" -repo "$repo" -bin "$here/bin" \
    -gatekeeper-module "$gatekeeper_module" -kyverno-module "$kyverno_module" -helm "$helm" \
    -istio-charts "$istio_charts" "$@"
