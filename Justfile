# Everyday recipes; each mirrors a command from the README.

# Check the bundled examples with the default parameters (exits 1: the examples hold findings).
check:
    cargo run --release -- check examples/

# Run the self-contained test suite (passes on any clone), as CI does.
test:
    cargo test --workspace

# Compare the real-world corpus (../shared/corpus, or MESHLIFE_CORPUS) with the reviewed
# tests/corpus/expectations.yaml; fails, saying where it looked, when the corpus is missing.
corpus:
    cargo test -p meshlife --features corpus --test corpus

# Build the OPA-ABI module into dist/meshlife.wasm.
wasm:
    cargo run --release -- build

# Run the gator-format suites over the examples.
verify:
    cargo run --release -- verify examples/

# The compatibility matrix: dist/meshlife.wasm in npm, PyPI, Rust, Kubewarden and OPA Go hosts
# (installs the hosts from their registries; exits non-zero on any difference).
compat *ARGS:
    bash compat/run.sh {{ARGS}}

# Kyverno's own CLI (`kyverno apply`, built from Kyverno v1.19.0's Go module) runs the policies of
# constraints/kyverno/ over every example against a live `meshlife serve`; its verdicts must
# equal `meshlife check`'s (compat/README-kyverno.md). Part of `just compat`.
kyverno-compat:
    cargo build --release
    bash compat/kyverno/run.sh

# meshlife's three installs in a real control plane (etcd, kube-apiserver v1.35.4, Gatekeeper
# v3.23.0's manager, Kyverno v1.19.0's admission controller, all built from the Go module proxy
# into compat/cluster/bin/): every example through each engine under every cluster file, the
# faults and the security checks (compat/README-cluster.md). Part of CI.
cluster *ARGS:
    cargo build --release
    bash compat/cluster/run.sh -- {{ARGS}}

# Seen happening: a real node (kubelet, containerd, runc, the CNI bridge, the controller manager,
# the scheduler, kube-proxy; Kubernetes v1.35.4) and Istio's own data plane (istiod's injector and
# CA, pilot-agent, the istio-cni plugin, the real Envoy 1.40.0) run every bug class broken and
# fixed, and meshlife's check, explain and diagnose are held against what happened
# (compat/README-cluster.md, stage reality). Needs root; changes the host while it runs and
# undoes it all on every way out.
reality *ARGS:
    cargo build --release
    bash compat/cluster/run.sh -- -engines reality -bench 0 {{ARGS}}

# What an admission costs through each engine, written into BENCHMARKS.md's last section (run
# after `just bench`, which rewrites the file, on a quiet machine): the sequential table (300
# dry-run creates per figure, the same object and new ones, concurrency 1 and 4) and the load
# table (16 users creating Pods and Deployments for 20 s per configuration, the most this
# 2-core machine sustains with no policy at p99 under 100 ms), and whether each target was met.
# `-profile DIR` adds CPU profiles of Gatekeeper and Kyverno during their figures.
cluster-bench *ARGS:
    cargo build --release
    bash compat/cluster/run.sh -- -engines webhook,gatekeeper,kyverno -bench-only -bench 300 \
        -load-users 16 -load-duration 20s -markdown BENCHMARKS.md {{ARGS}}

# The `meshlife explain -o html examples/` page in Debian's headless Chromium (installed pinned
# when missing): every workload drawn, no console error, nothing fetched; screenshots in
# target/browser/.
browser:
    cargo build --release
    bash tests/browser/run.sh

# The image `meshlife install` names (ghcr.io/meshlife/meshlife:<version>), built here with no
# registry: the release binary (target/release/meshlife, glibc) and the shared libraries ldd lists
# for it, from this machine's Debian, packed FROM scratch as distroless/cc lays them out
# (image/Dockerfile), and its CycloneDX SBOM (crates and Debian packages) in target/image/.
# Installs Debian's docker.io and starts dockerd when needed.
image:
    bash image/build.sh

# The image run as `meshlife install gatekeeper`'s Deployment runs it: read-only root, user
# 65532, no capabilities; mTLS ProviderRequests, health, metrics and SIGTERM under load.
image-test:
    bash tests/image/run.sh

# The pre-commit hooks (.pre-commit-hooks.yaml) run by pre-commit itself (PyPI, pinned) on a sample
# repository: HOOK is `meshlife` (built from source by cargo) or `meshlife-docker` (the image,
# after `just image`). pre-commit builds this repository's HEAD commit.
pre-commit HOOK="meshlife":
    cargo build --release
    bash tests/pre-commit/run.sh {{HOOK}}

# Both crates as crates.io gets them: `cargo publish --dry-run` (packaged, and the packaged
# meshlife built with no workspace around it, its wasm module from the packaged policy's files),
# then `cargo install` of the packaged crate, run on an example it must refuse.
publish:
    bash tests/publish/run.sh packaged

# `cargo install --path host-test`, run on the same example.
install-path:
    cargo build --release
    bash tests/publish/run.sh path

# charts/meshlife against `meshlife install`: helm lint --strict per engine, and `helm template`
# compared object by object for every engine and shipped cluster file (the real Helm, pinned).
chart:
    bash compat/helm/run.sh

# Draw again the timeline pictures of docs/rules.md (docs/timelines/), one per rule, from each
# rule's first example that fires; the test docs_timelines fails when they are out of date.
docs-timelines:
    MESHLIFE_UPDATE_DOCS=1 cargo test -p meshlife --test it docs_timelines

# Measure evaluation latency (module warm and fresh, native, parse floor, regorus, npm SDK) and
# write BENCHMARKS.md from the figures; `cargo bench -p meshlife` runs the criterion benchmarks.
bench:
    cd compat/node && npm ci --no-audit --no-fund --loglevel=error
    cargo run --release -- bench --memory --markdown BENCHMARKS.md

# Drive `meshlife serve` over HTTPS beside OPA's own server (built by compat/opa/install.sh) and
# append the figures to BENCHMARKS.md. Run after `just bench`, which rewrites the file.
bench-serve:
    bash compat/opa/install.sh v1.22.3
    cargo run --release -- bench serve --markdown BENCHMARKS.md

# Coverage-guided fuzzing (cargo fuzz, libFuzzer) of one target for SECONDS, or `all` of them:
# one_pass_vs_exact, yaml_subset, proxy_config, manifest_reading. See fuzz/README.md.
fuzz TARGET SECONDS="60":
    bash fuzz/run.sh {{TARGET}} {{SECONDS}}

# Reading time against input size (YAML nesting, many documents, one large object).
bench-reading:
    cargo bench -p meshlife --bench reading

# Lint and format check.
lint:
    cargo fmt --all --check
    cargo fmt --manifest-path fuzz/Cargo.toml --all --check
    cargo clippy --workspace --all-targets
