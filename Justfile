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

# Lint and format check.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets
