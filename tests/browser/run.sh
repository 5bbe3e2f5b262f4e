#!/usr/bin/env bash
# The page of `meshlife explain -o html examples/` in Debian's headless Chromium (just browser):
# every workload rendered, no console error, nothing fetched from elsewhere; screenshots in
# target/browser/. Installs the pinned Chromium from Debian's packages when it is missing, and
# playwright-core (package-lock.json) to drive it.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)

# The version is pinned, so that a run says which browser it proved the page in and two runs
# use the same one. Debian's security archive keeps only its newest build, though: once this
# one is superseded it cannot be installed any more, and the run takes the archive's build,
# says so, and asks for this line to be updated (a run that fails for that would test nothing).
chromium_version="156.0.8078.114-1~deb12u1"
# Only an installed package counts ("ii"): a removed one keeps its version in dpkg's records.
installed=$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' chromium 2>/dev/null || true)
if [ "$installed" != "ii $chromium_version" ] || [ ! -x /usr/bin/chromium ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    wanted="$chromium_version"
    if ! apt-cache madison chromium | grep -qF "| $chromium_version |"; then
        wanted=$(apt-cache policy chromium | awk '/Candidate:/ {print $2}')
        echo "warning: Debian's archive no longer serves chromium $chromium_version; using" \
            "$wanted: update chromium_version in tests/browser/run.sh" >&2
    fi
    echo "== installing chromium $wanted from Debian's packages (found: ${installed:-none})"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        --allow-downgrades "chromium=$wanted" "chromium-common=$wanted" > /dev/null
fi
npm ci --no-audit --no-fund --loglevel=error

out="$root/target/browser"
mkdir -p "$out"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
meshlife="${MESHLIFE:-$target/release/meshlife}"
if [ ! -x "$meshlife" ]; then
    (cd "$root" && cargo build --release -q -p meshlife)
fi
# From the root, so that the page names the files as a reader of the repository does.
(cd "$root" && "$meshlife" explain -o html examples/) > "$out/examples.html"
(cd "$root" && "$meshlife" explain -o json examples/) > "$out/examples.json"
node check-page.mjs "$out/examples.html" "$out/examples.json" "$out"
