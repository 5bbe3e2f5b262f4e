#!/usr/bin/env bash
# The pre-commit hooks of .pre-commit-hooks.yaml run by pre-commit itself (PyPI, pinned in
# requirements.txt) as a user's repository runs them: a sample repository whose
# .pre-commit-config.yaml names this repository at its HEAD commit and one hook.
#
#   tests/pre-commit/run.sh meshlife          the hook pre-commit builds with cargo (language: rust)
#   tests/pre-commit/run.sh meshlife-docker   the hook on the image (language: docker_image);
#                                             tests/image/run.sh runs it once the image is built
#
# pre-commit clones this repository at HEAD: changes not committed are not in what it builds
# (said when there are any). The cargo build shares this clone's target/ (CARGO_TARGET_DIR), so
# the dependencies the release build compiled are not compiled again.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
hook=${1:?usage: tests/pre-commit/run.sh meshlife|meshlife-docker}
tools=${MESHLIFE_TOOLS:-$HOME/.cache/meshlife-tools}
venv=$tools/pre-commit-$(sha256sum tests/pre-commit/requirements.txt | cut -c1-12)
failures=0

check() {
    local name=$1 ok=$2 detail=${3:-}
    if [ "$ok" = yes ]; then
        echo "PASS  $name"
    else
        echo "FAIL  $name"
        [ -n "$detail" ] && printf '%s\n' "$detail" | sed 's/^/      /'
        failures=$((failures + 1))
    fi
}

if [ ! -x "$venv/bin/pre-commit" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
        -r tests/pre-commit/requirements.txt
fi
echo "pre-commit $("$venv/bin/pre-commit" --version | awk '{print $2}') from $venv"

revision=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "note: the working tree differs from HEAD; pre-commit builds HEAD ($revision), without those changes"
fi

if [ "$hook" = meshlife-docker ]; then
    reference=$(cat target/image/reference)
    entry=$(python3 -c 'import sys, yaml
hooks = {h["id"]: h for h in yaml.safe_load(open(".pre-commit-hooks.yaml"))}
print(hooks["meshlife-docker"]["entry"].split()[0])' 2>/dev/null || sed -n 's/^  entry: \([^ ]*\) check.*/\1/p' .pre-commit-hooks.yaml)
    check "the image hook names the image this revision builds ($reference)" \
        "$([ "$entry" = "$reference" ] && echo yes || echo no)" "entry's image: $entry"
else
    # pre-commit's `cargo install` (release) builds in target/pre-commit/, seeded with a copy of
    # the release build (target/release), with the workspace's release profile (thin LTO; a
    # package outside the workspace does not inherit it) and the crates cargo already holds
    # (offline: cargo install resolves afresh, ignoring Cargo.lock). It then reuses the release
    # build's dependencies: the build from pre-commit's own clone is meshlife's own crates, not
    # the 400 it depends on. A copy, not target/ itself: cargo keys path crates by their path
    # within the workspace, so the clone's meshlife would replace this checkout's artefacts.
    export CARGO_TARGET_DIR=$repo/target/pre-commit
    if [ -d "$repo/target/release" ] && [ ! -d "$CARGO_TARGET_DIR/release" ]; then
        mkdir -p "$CARGO_TARGET_DIR"
        cp -a "$repo/target/release" "$CARGO_TARGET_DIR/release"
    fi
    export CARGO_PROFILE_RELEASE_LTO=thin
    export CARGO_NET_OFFLINE=true
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A cache of its own: the hook is installed (built) by this run, not found from an earlier one.
export PRE_COMMIT_HOME=$work/pre-commit-home
sample=$work/sample
mkdir -p "$sample/deploy" "$sample/chart/templates"
cd "$sample"
git init --quiet
git config user.email test@example.com
git config user.name test
cat > .pre-commit-config.yaml <<CONFIG
repos:
  - repo: $repo
    rev: $revision
    hooks:
      - id: $hook
CONFIG
# An Istio Deployment whose proxy drains past its grace period (ML401, an error), a values file
# and a Helm template: what a repository's YAML looks like.
cp "$repo/examples/istio/deployment-drain-exceeds-grace.yaml" deploy/web.yaml
printf 'replicas: 2\nimage: web:1.0\n' > values.yaml
printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n' \
    > chart/templates/deployment.yaml
git add -A
git commit --quiet --no-verify -m "sample"

started=$SECONDS
status=0
output=$("$venv/bin/pre-commit" run --all-files 2>&1) || status=$?
echo "   (pre-commit installed and ran the hook $hook in $((SECONDS - started)) s)"
check "pre-commit run --all-files fails on the error finding (exit 1)" \
    "$([ "$status" = 1 ] && echo yes || echo no)" "exit $status; $output"
check "its output names the file and the rule" \
    "$(grep -q "deploy/web.yaml" <<<"$output" && grep -q "ML401" <<<"$output" && echo yes || echo no)" "$output"

status=0
output=$("$venv/bin/pre-commit" run --files values.yaml chart/templates/deployment.yaml 2>&1) || status=$?
check "a change to no manifest (a values file, a Helm template) passes" \
    "$([ "$status" = 0 ] && echo yes || echo no)" "exit $status; $output"

# As a user works: the git hook installed, a bad commit refused, the fixed one taken.
"$venv/bin/pre-commit" install --install-hooks > /dev/null
printf '# touched\n' >> deploy/web.yaml
git add deploy/web.yaml
status=0
output=$(git commit -m "drain past grace" 2>&1) || status=$?
check "git commit with the manifest staged is refused by the hook" \
    "$([ "$status" != 0 ] && grep -q ML401 <<<"$output" && echo yes || echo no)" "exit $status; $output"
cp "$repo/examples/istio/deployment-drain-within-grace.yaml" deploy/web.yaml
git add deploy/web.yaml
status=0
output=$(git commit -m "drain within grace" 2>&1) || status=$?
check "git commit of the fixed manifest passes the hook" \
    "$([ "$status" = 0 ] && echo yes || echo no)" "exit $status; $output"

if [ "$failures" -gt 0 ]; then
    echo "pre-commit ($hook): $failures check(s) failed" >&2
    exit 1
fi
echo "pre-commit ($hook): PASS"
