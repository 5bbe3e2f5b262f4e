//! The module's two input readers against each other. `evaluate` reads an input in one pass
//! (`one_pass` over `json_cursor`) and falls back to the exact reader (`node` + `input`) when the
//! pass gives up; `evaluate_with_exact_reader` always takes the exact one. Wherever the one pass
//! answers it must answer what the exact reader would, so the violations (rules, paths,
//! messages, in their sorted order) must be equal for any bytes, and neither may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshlife_policy::{evaluate, evaluate_if_json, evaluate_with_exact_reader};

fuzz_target!(|input: &[u8]| {
    let one_pass = evaluate(input);
    let exact = evaluate_with_exact_reader(input);
    assert_eq!(
        one_pass,
        exact,
        "the one-pass and exact readers disagree on {:?}",
        String::from_utf8_lossy(input)
    );
    // The ABI glue's entry (`None` only for text that is not JSON, which it converts first)
    // must answer what `evaluate` answers whenever it answers.
    if let Some(glue) = evaluate_if_json(input) {
        assert_eq!(glue, one_pass, "evaluate_if_json differs from evaluate");
    }
});
