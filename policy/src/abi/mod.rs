//! The OPA wasm ABI 1.3 around [`crate::evaluate`] (see `docs/opa-wasm-abi.md` in the shared
//! docs). Nothing here knows a rule: the glue turns host memory into input bytes, calls the
//! policy and hands back OPA result sets.
//!
//! All state that outlives a call sits in the heap between the host's saved heap pointers, so a
//! host may rewind the heap at will or byte-copy a heap range into a fresh instance (OPA's Go VM
//! pool does). The only state outside the heap is the heap pointer itself.

mod alloc;
mod eval;
mod values;

use core::ffi::{CStr, c_char};

#[link(wasm_import_module = "env")]
unsafe extern "C" {
    /// Host hook: report a fatal error (NUL-terminated message). Some hosts (Kubewarden) return
    /// from it, so callers trap afterwards.
    #[link_name = "opa_abort"]
    fn host_abort(message: *const c_char);
}

/// Reports `message` to the host and traps.
pub(crate) fn abort(message: &CStr) -> ! {
    // SAFETY: the import takes a NUL-terminated string that lives in the module's static data.
    unsafe { host_abort(message.as_ptr()) };
    core::arch::wasm32::unreachable()
}

// Hosts read the ABI version from these two exported globals. Rust exports a static's *address*
// as the global's value; the build pipeline (`host-test/src/module/build.rs`) rewrites the
// globals' init values to 1 and 3 after linking. The statics' own memory holds the same numbers,
// so nothing depends on which of the two a reader sees.
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static opa_wasm_abi_version: i32 = 1;

#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static opa_wasm_abi_minor_version: i32 = 3;
