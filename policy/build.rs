//! Link settings for the wasm module (see the shared `opa-wasm-abi.md`, section 3.1).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The meshlife CLI's build script compiles this crate to wasm and needs its files: this
    // folder, as `DEP_MESHLIFE_POLICY_ROOT` (the `links` metadata cargo passes to dependents), is
    // the workspace's policy/ or where cargo unpacked the packaged crate.
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    println!("cargo:root={root}");
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("wasm32") {
        return;
    }
    // Hosts create the memory and pass it in as `env.memory`; several also read it back through
    // a `memory` export.
    println!("cargo:rustc-link-arg-cdylib=--import-memory");
    println!("cargo:rustc-link-arg-cdylib=--export-memory");
    // The default 1 MiB stack would make the memory import's minimum 17 pages, more than most
    // hosts provide; 32 KiB keeps it at 1-2 pages. No maximum is ever declared: most hosts
    // refuse a memory import that has one.
    println!("cargo:rustc-link-arg-cdylib=-zstack-size=32768");
}
