//! Evaluation: the eval-context path (ABI 1.0) and the one-call `opa_eval` (ABI 1.2).

use crate::{evaluate, evaluate_value_text, result_set_json, result_set_rego};

use super::abort;
use super::alloc::set_heap_pointer;
use super::values::{self, Content, host_bytes, lookup, store};

const CONTEXT_TAG: u32 = u32::from_le_bytes(*b"mlc1");

/// The module's one entrypoint, `meshlife/violation`.
const ENTRYPOINT_ID: i32 = 0;

/// What the policy sees when the host passes no input (value 0, or address 0 and length 0):
/// empty input, which the policy reports as `ML000`.
const ABSENT_INPUT: &[u8] = b"";

#[repr(C)]
struct EvalContext {
    tag: u32,
    input: usize,
    data: usize,
    entrypoint: i32,
    result: usize,
}

fn context(handle: usize) -> &'static mut EvalContext {
    if handle != 0 && handle.is_multiple_of(align_of::<EvalContext>()) {
        let context = handle as *mut EvalContext;
        // SAFETY: as for value records: the tag is checked before the rest is reinterpreted.
        unsafe {
            if (&raw const (*context).tag).read() == CONTEXT_TAG {
                return &mut *context;
            }
        }
    }
    abort(c"meshlife: unknown eval context")
}

fn check_entrypoint(entrypoint: i32) {
    if entrypoint != ENTRYPOINT_ID {
        abort(c"invalid entrypoint");
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn opa_eval_ctx_new() -> usize {
    let context = EvalContext {
        tag: CONTEXT_TAG,
        input: 0,
        data: 0,
        entrypoint: ENTRYPOINT_ID,
        result: 0,
    };
    Box::leak(Box::new(context)) as *mut EvalContext as usize
}

#[unsafe(no_mangle)]
pub extern "C" fn opa_eval_ctx_set_input(handle: usize, input: usize) {
    context(handle).input = input;
}

#[unsafe(no_mangle)]
pub extern "C" fn opa_eval_ctx_set_data(handle: usize, data: usize) {
    context(handle).data = data;
}

#[unsafe(no_mangle)]
pub extern "C" fn opa_eval_ctx_set_entrypoint(handle: usize, entrypoint: i32) {
    context(handle).entrypoint = entrypoint;
}

#[unsafe(no_mangle)]
pub extern "C" fn opa_eval_ctx_get_result(handle: usize) -> usize {
    context(handle).result
}

/// Evaluates the context's entrypoint on its input. The policy reads no `data`, so the data
/// value is kept but not consulted.
#[unsafe(no_mangle)]
pub extern "C" fn eval(handle: usize) -> i32 {
    let context = context(handle);
    check_entrypoint(context.entrypoint);
    let violations = match lookup(context.input).map(|record| &record.content) {
        Some(Content::Json(json)) => evaluate(json),
        // A result handed back as input: the policy sees its JSON rendering (and rejects it).
        Some(Content::Violations(violations)) => evaluate(result_set_json(violations).as_bytes()),
        None => evaluate(ABSENT_INPUT),
    };
    context.result = store(Content::Violations(violations.leak()));
    0
}

/// One call: evaluate `input` (JSON or Rego text, `len` bytes at `input`) and return the result
/// set as a C string, JSON for `format` 0, Rego syntax for 1.
///
/// # Safety
/// `input` must point to `len` readable bytes that stay unchanged during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn opa_eval(
    reserved: i32,
    entrypoint: i32,
    _data: usize,
    input: *const u8,
    len: usize,
    heap_pointer: usize,
    format: i32,
) -> *const u8 {
    if reserved != 0 {
        abort(c"opa_eval: reserved argument must be 0");
    }
    // The host rewinds the heap with this call. Its input sits below `heap_pointer`; should a
    // host place it above, allocations start after it so they never overwrite it.
    let input_end = (input as usize).saturating_add(len);
    let heap_start = if input.is_null() {
        heap_pointer
    } else {
        heap_pointer.max(input_end)
    };
    set_heap_pointer(heap_start);
    check_entrypoint(entrypoint);
    // SAFETY: forwarded to the caller.
    let text = unsafe { host_bytes(input, len) }.unwrap_or(ABSENT_INPUT);
    // Most hosts send JSON; OPA's Go host sends Rego terms (sets, Go string escapes).
    let violations = evaluate_value_text(text);
    let result_set = match format {
        1 => result_set_rego(&violations),
        _ => result_set_json(&violations),
    };
    values::c_string_owned(result_set)
}
