//! Builds the policy's wasm module (nested cargo, see `src/module/build.rs`) and leaves it in
//! `$OUT_DIR/meshlife.wasm`, where the CLI embeds it.

// The CLI uses the rest of the module (`build_dist`); the build script needs only `build_module`.
#[allow(dead_code)]
#[path = "src/module/build.rs"]
mod module_build;

use std::path::PathBuf;

fn main() {
    // Manifest reading alone (the fuzz target's build) embeds no module.
    if std::env::var_os("CARGO_FEATURE_COMMANDS").is_none() {
        return;
    }
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace_root = manifest_dir
        .parent()
        .expect("host-test lives in the workspace")
        .to_owned();
    for input in [
        "policy/src",
        "policy/Cargo.toml",
        "policy/build.rs",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace_root.join(input).display()
        );
    }
    println!("cargo:rerun-if-changed=src/module/build.rs");

    let module = module_build::build_module(&workspace_root).unwrap_or_else(|error| {
        panic!("building the meshlife wasm module: {error}");
    });
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    let destination = out_dir.join("meshlife.wasm");
    std::fs::write(&destination, module)
        .unwrap_or_else(|error| panic!("writing {}: {error}", destination.display()));
}
