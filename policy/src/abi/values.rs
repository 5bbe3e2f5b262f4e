//! Value handles: the addresses of small records in the heap that hold either JSON text or the
//! violations of an evaluation. Parsing copies the host's bytes, because hosts free or overwrite
//! their buffer right after the call.

use crate::value_text::{self, MAX_DEPTH};
use crate::{ENTRYPOINT, Violation, result_set_json, result_set_rego};

use super::abort;

/// Marks a record as one of ours, so a stray address is refused rather than misread.
const RECORD_TAG: u32 = u32::from_le_bytes(*b"mlv1");

/// `opa_value_add_path` / `opa_value_remove_path` error codes (OPA's `opa_errc`).
const ERR_OK: i32 = 0;
const ERR_INTERNAL: i32 = 1;
const ERR_INVALID_TYPE: i32 = 2;
const ERR_INVALID_PATH: i32 = 3;

#[repr(C)]
pub(super) struct ValueRecord {
    tag: u32,
    pub(super) content: Content,
}

// The slices point into the heap too: a record and everything it refers to lie between the heap
// pointers the host saved around its creation, so a byte copy of that range stays valid.
pub(super) enum Content {
    /// JSON text (which is also valid Rego term syntax).
    Json(&'static [u8]),
    /// A result: dumps as the result set `[{"result": [...]}]`.
    Violations(&'static [Violation]),
}

/// Stores `content` in a fresh record and returns its handle.
pub(super) fn store(content: Content) -> usize {
    let record = Box::leak(Box::new(ValueRecord {
        tag: RECORD_TAG,
        content,
    }));
    record as *mut ValueRecord as usize
}

pub(super) fn store_json_copy(json: &[u8]) -> usize {
    store(Content::Json(json.to_vec().leak()))
}

/// The record behind `handle`; `None` for 0 and for addresses that do not hold a record.
pub(super) fn lookup(handle: usize) -> Option<&'static ValueRecord> {
    record_pointer(handle).map(|record| {
        // SAFETY: `record_pointer` found our tag there; records are only written through
        // `replace_content`, never while a reference obtained here is in use.
        unsafe { &*record }
    })
}

fn record_pointer(handle: usize) -> Option<*mut ValueRecord> {
    if handle == 0 || !handle.is_multiple_of(align_of::<ValueRecord>()) {
        return None;
    }
    let record = handle as *mut ValueRecord;
    // SAFETY: every aligned address below memory.size is readable in wasm (beyond it the read
    // traps); the tag is read before anything else, so only our own records are reinterpreted.
    let tag = unsafe { (&raw const (*record).tag).read() };
    (tag == RECORD_TAG).then_some(record)
}

/// Gives the record behind `handle` new content, keeping the handle the host holds.
fn replace_content(handle: usize, content: Content) {
    if let Some(record) = record_pointer(handle) {
        // SAFETY: a record of ours (checked by `record_pointer`); no reference to it is alive.
        unsafe { (&raw mut (*record).content).write(content) };
    }
}

/// A NUL-terminated copy of `text` in the heap, for the host to read.
pub(super) fn c_string(text: &[u8]) -> *const u8 {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text);
    bytes.push(0);
    bytes.leak().as_ptr()
}

/// Hands a freshly built string to the host, NUL-terminated, without copying it.
pub(super) fn c_string_owned(text: String) -> *const u8 {
    let mut bytes = text.into_bytes();
    bytes.push(0);
    bytes.leak().as_ptr()
}

/// The `len` bytes at `address`; `None` for address 0, which hosts use for "nothing".
///
/// # Safety
/// The range must lie in linear memory and stay unchanged while the slice is used.
pub(super) unsafe fn host_bytes(address: *const u8, len: usize) -> Option<&'static [u8]> {
    if address.is_null() {
        return None;
    }
    // SAFETY: forwarded to the caller.
    Some(unsafe { core::slice::from_raw_parts(address, len) })
}

fn dump(handle: usize, render: fn(&[Violation]) -> String) -> *const u8 {
    if handle == 0 {
        return c_string(b"null");
    }
    let Some(record) = lookup(handle) else {
        abort(c"meshlife: dump of an unknown value handle")
    };
    match record.content {
        Content::Json(json) => c_string(json),
        Content::Violations(violations) => c_string_owned(render(violations)),
    }
}

/// # Safety
/// `text` must point to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn opa_json_parse(text: *const u8, len: usize) -> usize {
    // SAFETY: forwarded to the caller.
    let Some(text) = (unsafe { host_bytes(text, len) }) else {
        return 0;
    };
    // rust opa-wasm counts the C string's NUL in `len`.
    let json = value_text::trim_trailing_nul(text);
    // serde_json skips ignored values with an explicit stack, so this check is safe at any depth.
    if serde_json::from_slice::<serde::de::IgnoredAny>(json).is_err() {
        return 0;
    }
    store_json_copy(json)
}

/// Accepts JSON and Rego term syntax (sets, Go-quoted strings).
///
/// # Safety
/// `text` must point to `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn opa_value_parse(text: *const u8, len: usize) -> usize {
    // SAFETY: forwarded to the caller.
    let Some(text) = (unsafe { host_bytes(text, len) }) else {
        return 0;
    };
    match value_text::to_json(text) {
        Ok(json) => store_json_copy(&json),
        Err(_) => 0,
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn opa_json_dump(handle: usize) -> *const u8 {
    dump(handle, result_set_json)
}

/// Rego syntax: a result is the set of bindings `{{"result": {...}}}` OPA's Go host expects.
#[unsafe(no_mangle)]
pub extern "C" fn opa_value_dump(handle: usize) -> *const u8 {
    dump(handle, result_set_rego)
}

/// Values live until the host rewinds the heap.
#[unsafe(no_mangle)]
pub extern "C" fn opa_value_free(_handle: usize) {}

#[unsafe(no_mangle)]
pub extern "C" fn builtins() -> usize {
    store(Content::Json(b"{}"))
}

#[unsafe(no_mangle)]
pub extern "C" fn entrypoints() -> usize {
    let json = format!("{{\"{ENTRYPOINT}\":0}}");
    store(Content::Json(json.into_bytes().leak()))
}

/// Sets `value` at `path` (an array of strings) inside the object `base`, creating missing
/// objects on the way, as OPA's `opa_value_add_path` does. `base` keeps its handle.
#[unsafe(no_mangle)]
pub extern "C" fn opa_value_add_path(base: usize, path: usize, value: usize) -> i32 {
    let Some(value) = lookup(value).and_then(json_of) else {
        return ERR_INVALID_TYPE;
    };
    edit_path(base, path, PathEdit::Add(value))
}

/// Removes the entry at `path` from the object `base`; a path that leads nowhere counts as
/// removed, as in OPA.
#[unsafe(no_mangle)]
pub extern "C" fn opa_value_remove_path(base: usize, path: usize) -> i32 {
    edit_path(base, path, PathEdit::Remove)
}

#[derive(Clone, Copy)]
enum PathEdit {
    /// Insert this JSON value.
    Add(&'static [u8]),
    Remove,
}

fn json_of(record: &ValueRecord) -> Option<&'static [u8]> {
    match record.content {
        Content::Json(json) => Some(json),
        Content::Violations(_) => None,
    }
}

type JsonObject = serde_json::Map<String, serde_json::Value>;

/// Applies `edit` at `path` in the document behind `base` and stores the result under `base`'s
/// handle.
fn edit_path(base: usize, path: usize, edit: PathEdit) -> i32 {
    let Some(keys) = lookup(path).and_then(json_of).and_then(path_keys) else {
        return ERR_INVALID_PATH;
    };
    let Some((last_key, parent_keys)) = keys.split_last() else {
        return ERR_INVALID_PATH;
    };
    let Some(base_json) = lookup(base).and_then(json_of) else {
        return ERR_INVALID_TYPE;
    };
    // serde_json's `Value` parses, drops and prints recursively; on the 32 KiB stack only
    // documents within the value-text depth bound are safe to rebuild.
    let inserted_depth = match edit {
        PathEdit::Add(value) => value_text::validate_json(value).unwrap_or(usize::MAX),
        PathEdit::Remove => 0,
    };
    let base_depth = value_text::validate_json(base_json).unwrap_or(usize::MAX);
    if base_depth > MAX_DEPTH || inserted_depth.saturating_add(keys.len()) > MAX_DEPTH {
        return ERR_INTERNAL;
    }
    let Ok(serde_json::Value::Object(mut document)) = serde_json::from_slice(base_json) else {
        return ERR_INVALID_TYPE;
    };
    let mut parent = &mut document;
    for key in parent_keys {
        let child = match edit {
            PathEdit::Add(_) => parent
                .entry(key.as_str())
                .or_insert_with(|| serde_json::Value::Object(JsonObject::new())),
            PathEdit::Remove => match parent.get_mut(key) {
                Some(child) => child,
                None => return ERR_OK,
            },
        };
        match child {
            serde_json::Value::Object(child) => parent = child,
            _ if matches!(edit, PathEdit::Remove) => return ERR_OK,
            _ => return ERR_INVALID_TYPE,
        }
    }
    match edit {
        PathEdit::Add(value) => {
            let Ok(value) = serde_json::from_slice(value) else {
                return ERR_INTERNAL;
            };
            parent.insert(last_key.clone(), value);
        }
        PathEdit::Remove => {
            if parent.remove(last_key).is_none() {
                return ERR_OK;
            }
        }
    }
    match serde_json::to_vec(&document) {
        Ok(json) => {
            replace_content(base, Content::Json(json.leak()));
            ERR_OK
        }
        Err(_) => ERR_INTERNAL,
    }
}

/// The keys of a path value: a JSON array of strings, at most `MAX_DEPTH` long.
fn path_keys(json: &[u8]) -> Option<Vec<String>> {
    if value_text::validate_json(json).ok()? > 1 {
        return None;
    }
    let keys: Vec<String> = serde_json::from_slice(json).ok()?;
    (keys.len() <= MAX_DEPTH).then_some(keys)
}
