# Everyday recipes; each mirrors a command from the README.

# Check the bundled examples with the default parameters (exits 1: the examples hold findings).
check:
    cargo run --release -- check examples/

# Run the whole test suite, as CI does.
test:
    cargo test --workspace

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

# Lint and format check.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets
