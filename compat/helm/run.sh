#!/usr/bin/env bash
# The chart's checks (just chart; CI): builds the real Helm (install.sh, pinned), then
#   helm lint --strict charts/meshlife, once per engine;
#   chartcheck: `helm template` against `meshlife install` for every engine, every shipped
#   cluster file and the other choices both offer, object by object (chartcheck/main.go);
#   promcheck: the monitoring's alerts through rulefmt (promtool check rules' checker) and the
#   dashboard's queries through the PromQL parser (compat/monitoring/promcheck).
# Usage: compat/helm/run.sh [MESHLIFE_BINARY]   (default: the release build, made when missing)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
meshlife="${1:-$target/release/meshlife}"
if [ "$#" -eq 0 ]; then
    (cd "$root" && cargo build --release -q -p meshlife)
fi
helm="$(bash "$here/install.sh")"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    PATH="/usr/local/go/bin:$PATH"
fi
(cd "$here" && GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local \
    go build -o bin/chartcheck ./chartcheck)
cd "$root"
# Helm says at INFO that it follows the chart's links into constraints/ (one source for the
# template, the policies and the cluster files); only that line is left out of what it prints.
quiet() { grep -v 'found symbolic link in path' || true; }
lint_output="$(mktemp)"
trap 'rm -f "$lint_output"' EXIT
for engine in gatekeeper kyverno kyverno-clusterpolicy kyverno-cel webhook; do
    echo "== helm lint --strict charts/meshlife --set engine=$engine"
    "$helm" lint --strict charts/meshlife --set engine="$engine" --set cluster=istio-1.26-classic \
        2>&1 | quiet | tee "$lint_output"
    grep -q '0 chart(s) failed' "$lint_output"
done
echo "== helm template against meshlife install"
"$here/bin/chartcheck" -helm "$helm" -meshlife "$meshlife" -chart charts/meshlife \
    -clusters constraints/gatekeeper/clusters

echo "== the monitoring's alerts and dashboard through Prometheus' own rule checker and PromQL parser"
(cd "$root/compat/monitoring" && GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local \
    go build -o bin/promcheck ./promcheck)
"$root/compat/monitoring/bin/promcheck" -rules charts/meshlife/files/monitoring/rules.yaml \
    -dashboard charts/meshlife/files/monitoring/dashboard.json
