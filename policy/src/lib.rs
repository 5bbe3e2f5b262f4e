//! meshlife policy: service-mesh lifecycle rules over Kubernetes admission requests.
//!
//! The same code builds natively (unit tests, benchmarks, the CLI's native floor) and for
//! `wasm32-unknown-unknown`, where `abi` exposes it through the OPA wasm ABI 1.3.

pub mod catalogue;
pub mod duration;
mod evaluate;
pub mod input;
mod json_cursor;
pub mod mesh;
pub mod network_policy;
mod node;
mod one_pass;
mod operation;
pub mod params;
mod pod_specs;
pub mod proxy_config;
mod rules;
pub mod stop_signal;
#[cfg(not(target_arch = "wasm32"))]
pub mod timeline;
pub mod value_text;
#[cfg(not(target_arch = "wasm32"))]
pub mod verdicts;
pub mod violation;
pub mod workload;
mod yaml_subset;

/// The inner readers the fuzz targets in `fuzz/` drive directly (the YAML subset reader is
/// otherwise reached only through a ProxyConfig annotation, where JSON is tried first and the
/// nesting pre-check refuses much before it runs). Not an API: hidden, and it changes with the
/// readers.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::yaml_subset::{UNSUPPORTED_YAML, parse_yaml};
}

#[cfg(target_arch = "wasm32")]
mod abi;

pub use violation::{Details, Severity, Violation, result_set_json, result_set_rego};

/// The one entrypoint the module exports, id 0.
pub const ENTRYPOINT: &str = "meshlife/violation";

/// Evaluates one Gatekeeper-shaped input (`{"review": AdmissionRequest, "parameters": {...}}`,
/// JSON bytes) and returns its violations, sorted and without duplicates (a Rego set).
/// Never panics: malformed input is a single `ML000` violation.
pub fn evaluate(input: &[u8]) -> Vec<Violation> {
    evaluate::evaluate(input)
}

/// [`evaluate`], or `None` when the bytes are not JSON syntax at all, for the ABI glue whose
/// input may also be OPA value text (Rego sets, Go escapes): only then does it convert first.
pub fn evaluate_if_json(input: &[u8]) -> Option<Vec<Violation>> {
    evaluate::evaluate_if_json(input)
}

/// [`evaluate`] for the bytes a host hands the module (`opa_eval`, `opa_value_parse`): OPA value
/// text, JSON or Rego term syntax (sets, Go string escapes, a trailing NUL), none at all for an
/// absent input. JSON is read as it is; only other text pays for the conversion.
pub fn evaluate_value_text(text: &[u8]) -> Vec<Violation> {
    let text = value_text::trim_trailing_nul(text);
    if text.is_empty() {
        return evaluate(b"");
    }
    // Valid JSON means the same value in Rego, so reading it first cannot change an answer.
    evaluate_if_json(text).unwrap_or_else(|| match value_text::to_json(text) {
        Ok(json) => evaluate(&json),
        // Not a value the converter accepts (say, nested too deeply): the policy itself
        // explains what is wrong with it.
        Err(_) => evaluate(text),
    })
}

/// [`evaluate`] without its one-pass reader: every input is read the exact way (a sparse tree,
/// then the typed view with a path for every field). The answers must be the same; this exists
/// so tests can hold the two readers to that.
#[doc(hidden)]
pub fn evaluate_with_exact_reader(input: &[u8]) -> Vec<Violation> {
    evaluate::evaluate_with_exact_reader(input)
}

pub use evaluate::{EXEMPT_ANNOTATION, EXEMPT_REASON_ANNOTATION};

/// For each pod spec the object of a Gatekeeper-shaped input holds, whether it is meshed (mesh,
/// injected or predicted, native or classic) or why not, for a host's "not judged" summary.
/// Native-only (not an entrypoint of the wasm module); never panics.
#[cfg(not(target_arch = "wasm32"))]
pub fn mesh_verdicts(input: &[u8]) -> Vec<verdicts::PodSpecVerdict> {
    verdicts::mesh_verdicts(input)
}
