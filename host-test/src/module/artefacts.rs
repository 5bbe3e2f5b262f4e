//! Release artefacts `meshlife build` writes beside `dist/meshlife.wasm`, each the module
//! unchanged in the form another OPA host loads:
//!
//! - `dist/meshlife.kubewarden.wasm`: the module with Kubewarden's metadata
//!   (`constraints/kubewarden/metadata.yml`) as JSON in the custom section
//!   `io.kubewarden.metadata`, as `kwctl annotate` stores it. The section is appended after the
//!   module's last section; every other byte is the module's.
//! - `dist/bundle.tar.gz`: an OPA bundle for `opa run -s` / `opa eval -b`: `/.manifest` maps the
//!   entrypoint `meshlife/violation` to `/policy.wasm`. Entry names keep their leading slash,
//!   which is how OPA and the Rust opa-wasm loader look them up.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wasm_encoder::Section;
use wasmparser::{Parser, Payload};

/// Kubewarden metadata, relative to the workspace root.
pub const KUBEWARDEN_METADATA: &str = "constraints/kubewarden/metadata.yml";
pub const DIST_KUBEWARDEN_MODULE: &str = "dist/meshlife.kubewarden.wasm";
pub const DIST_OPA_BUNDLE: &str = "dist/bundle.tar.gz";
/// The custom section kwctl writes and policy-server reads.
pub const KUBEWARDEN_METADATA_SECTION: &str = "io.kubewarden.metadata";
/// The module's one entrypoint, and the bundle root it lives under.
pub const ENTRYPOINT: &str = "meshlife/violation";
pub const BUNDLE_ROOT: &str = "meshlife";
/// Tar entry names in the bundle (leading slash included).
pub const BUNDLE_MANIFEST_ENTRY: &str = "/.manifest";
pub const BUNDLE_MODULE_ENTRY: &str = "/policy.wasm";
/// Modification time of every bundle entry and of the gzip header: the bundle depends only on
/// the module and the version.
const BUNDLE_MTIME: u64 = 0;

/// `metadata.yml` as kwctl reads it and policy-evaluator's `Metadata` serialises it: the same
/// camelCase keys in the same order. Unknown keys are refused (kwctl ignores them; here a typo
/// must not drop a setting).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubewardenMetadata {
    /// Set by the build, not read from the file: kwctl records `Unknown` for Rego-ABI policies
    /// (`opa` and `gatekeeper` execution modes), which have no waPC protocol version.
    #[serde(default, skip_deserializing)]
    pub protocol_version: Option<String>,
    pub rules: Vec<KubewardenRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    pub mutating: bool,
    #[serde(default = "default_true")]
    pub background_audit: bool,
    pub execution_mode: String,
    #[serde(default = "default_policy_type")]
    pub policy_type: String,
    #[serde(default)]
    pub context_aware_resources: Vec<ContextAwareResource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_kubewarden_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubewardenRule {
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    pub operations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextAwareResource {
    pub api_version: String,
    pub kind: String,
}

fn default_true() -> bool {
    true
}

fn default_policy_type() -> String {
    "kubernetes".into()
}

impl KubewardenMetadata {
    /// Parses and checks `metadata.yml`, and sets what kwctl sets (the protocol version).
    pub fn from_yaml(text: &str) -> Result<KubewardenMetadata, String> {
        let mut metadata: KubewardenMetadata = serde_yaml_ng::from_str(text)
            .map_err(|error| format!("invalid Kubewarden metadata: {error}"))?;
        // The module takes Gatekeeper's input ({"parameters", "review"}); in Kubewarden's
        // `opa` mode it would get {"request"} and answer nothing, i.e. allow everything.
        if metadata.execution_mode != "gatekeeper" {
            return Err(format!(
                "executionMode is {:?}; the meshlife module needs \"gatekeeper\"",
                metadata.execution_mode
            ));
        }
        if metadata.mutating {
            return Err("mutating must be false: meshlife only validates".into());
        }
        if !["kubernetes", "raw"].contains(&metadata.policy_type.as_str()) {
            return Err(format!(
                "policyType {:?} is not kubernetes or raw",
                metadata.policy_type
            ));
        }
        if metadata.rules.is_empty() {
            return Err("rules must list the reviewed kinds".into());
        }
        for (index, rule) in metadata.rules.iter().enumerate() {
            for (field, values) in [
                ("apiGroups", &rule.api_groups),
                ("apiVersions", &rule.api_versions),
                ("resources", &rule.resources),
                ("operations", &rule.operations),
            ] {
                if values.is_empty() {
                    return Err(format!("rules[{index}].{field} is empty"));
                }
            }
            if let Some(operation) = rule.operations.iter().find(|operation| {
                !["CREATE", "UPDATE", "DELETE", "CONNECT", "*"].contains(&operation.as_str())
            }) {
                return Err(format!(
                    "rules[{index}].operations: {operation:?} is not CREATE, UPDATE, DELETE, CONNECT or *"
                ));
            }
        }
        metadata.protocol_version = Some("Unknown".into());
        Ok(metadata)
    }

    /// The JSON kwctl writes into the custom section.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("metadata serialises")
    }
}

/// `module` with `metadata_json` appended as the custom section `io.kubewarden.metadata`.
/// A module that already carries the section is refused: policy-server reads the first one,
/// so a second would be ignored.
pub fn annotate_for_kubewarden(module: &[u8], metadata_json: &[u8]) -> Result<Vec<u8>, String> {
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.map_err(|error| format!("parsing the module: {error}"))?;
        if let Payload::CustomSection(section) = payload
            && section.name() == KUBEWARDEN_METADATA_SECTION
        {
            return Err(format!(
                "the module already has a {KUBEWARDEN_METADATA_SECTION} section"
            ));
        }
    }
    let mut annotated = module.to_vec();
    wasm_encoder::CustomSection {
        name: Cow::Borrowed(KUBEWARDEN_METADATA_SECTION),
        data: Cow::Borrowed(metadata_json),
    }
    .append_to(&mut annotated);
    Ok(annotated)
}

/// The bundle's `/.manifest`.
pub fn bundle_manifest(revision: &str) -> serde_json::Value {
    serde_json::json!({
        "revision": revision,
        "roots": [BUNDLE_ROOT],
        "wasm": [{"entrypoint": ENTRYPOINT, "module": BUNDLE_MODULE_ENTRY}],
    })
}

/// A gzipped tar with `/.manifest` and `/policy.wasm`, byte-identical for the same inputs.
pub fn opa_bundle(module: &[u8], revision: &str) -> Result<Vec<u8>, String> {
    let manifest = serde_json::to_vec(&bundle_manifest(revision)).expect("JSON");
    let io_error = |error: std::io::Error| format!("writing the bundle: {error}");
    let encoder = flate2::GzBuilder::new()
        .mtime(BUNDLE_MTIME as u32)
        .write(Vec::new(), flate2::Compression::best());
    let mut archive = tar::Builder::new(encoder);
    for (name, data) in [
        (BUNDLE_MANIFEST_ENTRY, manifest.as_slice()),
        (BUNDLE_MODULE_ENTRY, module),
    ] {
        archive
            .append(&entry_header(name, data.len() as u64)?, data)
            .map_err(io_error)?;
    }
    let encoder = archive.into_inner().map_err(io_error)?;
    encoder.finish().map_err(io_error)
}

/// A regular-file header named exactly `name`. `Header::set_path` refuses absolute paths, so
/// the name is written into the header's name field directly.
fn entry_header(name: &str, size: u64) -> Result<tar::Header, String> {
    let mut header = tar::Header::new_ustar();
    let field = &mut header.as_old_mut().name;
    if name.len() >= field.len() {
        return Err(format!("tar entry name {name:?} is too long"));
    }
    field.fill(0);
    field[..name.len()].copy_from_slice(name.as_bytes());
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(BUNDLE_MTIME);
    header.set_uid(0);
    header.set_gid(0);
    header
        .set_username("")
        .and_then(|()| header.set_groupname(""))
        .map_err(|error| format!("tar header: {error}"))?;
    header.set_cksum();
    Ok(header)
}

/// Writes the Kubewarden module and the OPA bundle for `module` under `workspace_root`, and
/// returns their paths.
pub fn write_release_artefacts(
    workspace_root: &Path,
    module: &[u8],
) -> Result<Vec<PathBuf>, String> {
    let metadata_path = workspace_root.join(KUBEWARDEN_METADATA);
    let metadata_text = crate::inputs::files::read_text(&metadata_path, Default::default())
        .map_err(|error| format!("reading {}: {error}", metadata_path.display()))?;
    let metadata = KubewardenMetadata::from_yaml(&metadata_text)
        .map_err(|error| format!("{}: {error}", metadata_path.display()))?;
    let outputs = [
        (
            DIST_KUBEWARDEN_MODULE,
            annotate_for_kubewarden(module, &metadata.to_json())?,
        ),
        (
            DIST_OPA_BUNDLE,
            opa_bundle(module, env!("CARGO_PKG_VERSION"))?,
        ),
    ];
    let mut written = Vec::new();
    for (relative, bytes) in outputs {
        let path = workspace_root.join(relative);
        if let Some(directory) = path.parent() {
            std::fs::create_dir_all(directory)
                .map_err(|error| format!("creating {}: {error}", directory.display()))?;
        }
        let mut file = std::fs::File::create(&path)
            .map_err(|error| format!("writing {}: {error}", path.display()))?;
        file.write_all(&bytes)
            .map_err(|error| format!("writing {}: {error}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
