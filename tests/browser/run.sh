#!/usr/bin/env bash
# The page of `meshlife explain -o html examples/` in Debian's headless Chromium (just browser):
# every workload rendered, no console error, nothing fetched from elsewhere; screenshots in
# target/browser/. Installs the pinned Chromium from Debian's packages when it is missing, and
# playwright-core (package-lock.json) to drive it.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)

# Debian's security archive serves the newest build; the version is pinned so that a run says
# which browser it proved the page in. A change of it is a change of this line.
chromium_version="156.0.8078.114-1~deb12u1"
installed=$(dpkg-query -W -f='${Version}' chromium 2>/dev/null || true)
if [ "$installed" != "$chromium_version" ]; then
    echo "== installing chromium $chromium_version from Debian's packages (found: ${installed:-none})"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        "chromium=$chromium_version" "chromium-common=$chromium_version" > /dev/null
fi
npm ci --no-audit --no-fund --loglevel=error

out="$root/target/browser"
mkdir -p "$out"
meshlife="${MESHLIFE:-$root/target/release/meshlife}"
if [ ! -x "$meshlife" ]; then
    (cd "$root" && cargo build --release -q -p meshlife)
fi
# From the root, so that the page names the files as a reader of the repository does.
(cd "$root" && "$meshlife" explain -o html examples/) > "$out/examples.html"
(cd "$root" && "$meshlife" explain -o json examples/) > "$out/examples.json"
node check-page.mjs "$out/examples.html" "$out/examples.json" "$out"
