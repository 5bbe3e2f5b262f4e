//! The CLI's manifest reading: `manifests::parse_documents` (constraints and verify suites) and
//! `manifests::load` (what `meshlife check FILE` reads), over one YAML text.
//!
//! Asserted: neither panics and both end (libFuzzer's -timeout); every document of the text is
//! either a value or an InputError naming the file and document, in document order, at a line
//! of the file; and `load` never drops a document in silence: each one `parse_documents` sees
//! comes back as an object, an error or a skip of that document (or the whole file is skipped
//! with a reason), and a file that yields nothing says so.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use meshlife::inputs::manifests::{load, parse_documents};
use serde_json::Value;

const FILE: &str = "fuzz.yaml";

/// One file per fuzzing process, rewritten for every input (`load` reads paths, not text).
fn scratch_file() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("meshlife-fuzz-{}.yaml", std::process::id()))
    })
}

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    // Lines a report may name: each line of the file, and the one after a final newline. A
    // lone CR ends a line in YAML (1.2 §5.4) and libyaml's error positions count it, so lines
    // are counted as YAML counts them, not as `str::lines` does.
    let last_line = text.replace("\r\n", "\n").split(['\n', '\r']).count() + 1;
    let documents = parse_documents(FILE, text);
    let mut previous: Option<usize> = None;
    let mut seen = Vec::new();
    for document in &documents {
        let (index, line) = match document {
            Ok((index, line, value)) => {
                // Empty documents (comments only, `null`) are left out, not returned as null.
                assert!(!value.is_null(), "document {index} returned as null");
                (*index, *line)
            }
            Err(error) => {
                assert_eq!(error.file, FILE, "{error}");
                assert!(!error.message.trim().is_empty(), "{error:?}");
                let index = error
                    .document
                    .unwrap_or_else(|| panic!("a YAML error names no document: {error}"));
                let line = error.line.unwrap_or(1);
                (index, line)
            }
        };
        assert!(
            previous.is_none_or(|previous| index > previous),
            "document {index} after {previous:?}"
        );
        assert!(
            (1..=last_line).contains(&line),
            "document {index} at line {line} of {last_line}"
        );
        previous = Some(index);
        seen.push((index, document.as_ref().ok().map(|(_, _, value)| value)));
    }

    let path = scratch_file();
    std::fs::write(path, text).expect("the scratch file is writable");
    let loaded = load(&[path.display().to_string()]);
    let whole_file_skipped = loaded.skipped.iter().any(|skip| skip.document.is_none());
    assert!(
        !loaded.objects.is_empty() || !loaded.errors.is_empty() || !loaded.skipped.is_empty(),
        "{text:?} yields nothing and says nothing"
    );
    if whole_file_skipped {
        return;
    }
    for (index, value) in seen {
        let accounted = loaded.objects.iter().any(|object| object.identity.document == index)
            || loaded
                .errors
                .iter()
                .any(|error| error.document == Some(index))
            || loaded
                .skipped
                .iter()
                .any(|skip| skip.document == Some(index));
        // A List whose items are all null or absent holds nothing to report.
        let empty_list = value.is_some_and(|value| {
            value
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|kind| kind.ends_with("List"))
                && value
                    .get("items")
                    .and_then(Value::as_array)
                    .is_some_and(|items| items.iter().all(Value::is_null))
        });
        assert!(
            accounted || empty_list,
            "document {index} of {text:?} is dropped in silence: {loaded:?}"
        );
    }
});
