//! Builds the policy's wasm module (nested cargo, see `src/module/build.rs`) and leaves it in
//! `$OUT_DIR/meshlife.wasm`, where the CLI embeds it.

// The CLI uses the rest of the module (`build_dist`); the build script needs only `build_module`.
#[allow(dead_code)]
#[path = "src/module/build.rs"]
mod module_build;

use std::path::{Path, PathBuf};

fn main() {
    // Manifest reading alone (the fuzz target's build) embeds no module.
    if std::env::var_os("CARGO_FEATURE_COMMANDS").is_none() {
        return;
    }
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    // In the workspace, the policy is host-test's sibling. Anywhere else (the packaged crate),
    // meshlife-policy says where its files are: its `links` metadata, the folder cargo unpacked
    // it into. The sibling is looked for first because cargo keys a path crate's build outputs
    // by its path within the workspace, so another checkout building into the same target/
    // (pre-commit's clone of this repository) leaves its own folder in that metadata.
    let workspace_root = manifest_dir.parent().map(Path::to_owned);
    let in_workspace = workspace_root.as_ref().is_some_and(|root| {
        root.join("policy").join("Cargo.toml").is_file() && root.join("Cargo.lock").is_file()
    });
    let source = match workspace_root {
        Some(root) if in_workspace => {
            for input in [
                "policy/src",
                "policy/Cargo.toml",
                "policy/build.rs",
                "Cargo.lock",
                "Cargo.toml",
            ] {
                println!("cargo:rerun-if-changed={}", root.join(input).display());
            }
            module_build::PolicySource::Workspace(root)
        }
        _ => {
            let policy_root = PathBuf::from(std::env::var_os("DEP_MESHLIFE_POLICY_ROOT").expect(
                "meshlife-policy's build script names its folder (`links = \"meshlife_policy\"`)",
            ));
            for input in ["src", "Cargo.toml", "build.rs"] {
                println!(
                    "cargo:rerun-if-changed={}",
                    policy_root.join(input).display()
                );
            }
            let lockfile = manifest_dir.join("Cargo.lock");
            module_build::PolicySource::Packaged {
                unpacked: policy_root,
                copy_to: out_dir.join("meshlife-policy"),
                lockfile: lockfile.is_file().then_some(lockfile),
            }
        }
    };
    println!("cargo:rerun-if-changed=src/module/build.rs");

    let module = module_build::build_module(&source).unwrap_or_else(|error| {
        panic!("building the meshlife wasm module: {error}");
    });
    let destination = out_dir.join("meshlife.wasm");
    std::fs::write(&destination, module)
        .unwrap_or_else(|error| panic!("writing {}: {error}", destination.display()));
}
