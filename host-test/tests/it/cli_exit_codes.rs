//! Exit codes, `--fail-on`, `--module`, `--stats` and the command line itself.

use crate::cli_support;

use cli_support::*;

#[test]
fn exit_0_when_nothing_fires() {
    let workspace = Workspace::new();
    workspace.write(
        "ok.yaml",
        &stream(&[
            plain_deployment("a", "b"),
            "apiVersion: example.com/v1\nkind: Foo\nmetadata: {name: f}\n".into(),
        ]),
    );
    let outcome = workspace.run(&["check", "ok.yaml"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome
            .stdout
            .ends_with("2 objects checked in 1 file: 0 errors, 0 warnings, 0 info findings; 1 workload judged as not meshed (see the notes above)\n"),
        "{outcome:?}"
    );
}

#[test]
fn exit_1_on_a_deny_finding_at_or_above_fail_on() {
    let workspace = Workspace::new();
    workspace.write("web.yaml", &meshed_deployment("web", "shop"));
    // ML101 is a warning: fails at the default --fail-on warning and at info, not at error.
    assert_eq!(workspace.run(&["check", "web.yaml"]).code, 1);
    assert_eq!(
        workspace
            .run(&["check", "web.yaml", "--fail-on", "info"])
            .code,
        1
    );
    let outcome = workspace.run(&["check", "web.yaml", "--fail-on", "error"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stdout.contains("ML101"),
        "still reported: {outcome:?}"
    );

    workspace.write("job.yaml", &meshed_job("job", "shop"));
    assert_eq!(
        workspace
            .run(&["check", "job.yaml", "--fail-on", "error"])
            .code,
        1
    );
}

#[test]
fn exit_2_beats_exit_1() {
    let workspace = Workspace::new();
    workspace.write("job.yaml", &meshed_job("job", "shop"));
    workspace.write("broken.yaml", "kind: {\n");
    let outcome = workspace.run(&["check", "job.yaml", "broken.yaml"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stdout.contains("ML301"),
        "findings are still reported: {outcome:?}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let workspace = Workspace::new();
    assert_eq!(workspace.run(&["check"]).code, 2);
    assert_eq!(workspace.run(&["check", "x.yaml", "-o", "xml"]).code, 2);
    assert_eq!(
        workspace
            .run(&["check", "x.yaml", "--fail-on", "fatal"])
            .code,
        2
    );
    assert_eq!(workspace.run(&["frobnicate"]).code, 2);
    let help = workspace.run(&["check", "--help"]);
    assert_eq!(help.code, 0);
    for option in [
        "--constraint",
        "--output",
        "--fail-on",
        "--module",
        "--stats",
    ] {
        assert!(help.stdout.contains(option), "{option} in {}", help.stdout);
    }
}

#[test]
fn stats_go_to_stderr() {
    let workspace = Workspace::new();
    workspace.write(
        "a.yaml",
        &stream(&[plain_deployment("a", "b"), plain_deployment("c", "b")]),
    );
    let outcome = workspace.run(&["check", "a.yaml", "--stats", "-o", "json"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    // "1 file", not "1 files".
    assert!(
        outcome.stderr.contains("meshlife: 2 objects, 1 file, "),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("objects/s"), "{outcome:?}");
    assert_eq!(outcome.json().len(), 0, "stdout stays machine-readable");
}

#[test]
fn module_option_loads_the_same_module_from_a_file() {
    let workspace = Workspace::new();
    workspace.write("job.yaml", &meshed_job("job", "shop"));
    let module = concat!(env!("OUT_DIR"), "/meshlife.wasm");
    let embedded = workspace.run(&["check", "job.yaml", "-o", "json"]);
    let from_file = workspace.run(&["check", "job.yaml", "-o", "json", "--module", module]);
    assert_eq!(from_file.code, 1, "{from_file:?}");
    assert_eq!(embedded.stdout, from_file.stdout);
}

#[test]
fn module_option_errors_are_clear() {
    let workspace = Workspace::new();
    workspace.write("ok.yaml", &plain_deployment("a", "b"));

    let outcome = workspace.run(&["check", "ok.yaml", "--module", "missing.wasm"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("cannot read module missing.wasm"),
        "{outcome:?}"
    );

    workspace.write("text.wasm", "(module)");
    let outcome = workspace.run(&["check", "ok.yaml", "--module", "text.wasm"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("text.wasm is not a WebAssembly module"),
        "{outcome:?}"
    );

    let path = workspace.path().join("empty.wasm");
    std::fs::write(&path, wasm_encoder::Module::new().finish()).unwrap();
    let outcome = workspace.run(&["check", "ok.yaml", "--module", "empty.wasm"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("empty.wasm is not an OPA module"),
        "{outcome:?}"
    );

    // Memory imported as the ABI asks, but no OPA exports.
    let mut module = wasm_encoder::Module::new();
    let mut imports = wasm_encoder::ImportSection::new();
    imports.import(
        "env",
        "memory",
        wasm_encoder::MemoryType {
            minimum: 2,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        },
    );
    module.section(&imports);
    std::fs::write(workspace.path().join("bare.wasm"), module.finish()).unwrap();
    let outcome = workspace.run(&["check", "ok.yaml", "--module", "bare.wasm"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("bare.wasm is not an OPA module: it has no `opa_eval` export"),
        "{outcome:?}"
    );
}

#[test]
fn fail_on_none_reports_but_exits_0_and_input_errors_still_exit_2() {
    let workspace = Workspace::new();
    workspace.write("job.yaml", &meshed_job("job", "shop"));
    let outcome = workspace.run(&["check", "job.yaml", "--fail-on", "none"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stdout.contains("ML301"),
        "still reported: {outcome:?}"
    );
    assert!(
        outcome.stdout.contains("(none failing the run)"),
        "{outcome:?}"
    );
    let json = workspace.run(&["check", "job.yaml", "--fail-on", "none", "-o", "json"]);
    assert_eq!(json.code, 0, "{json:?}");
    assert!(
        json.json()
            .iter()
            .all(|finding| finding["failsRun"] == false),
        "{json:?}"
    );

    workspace.write("broken.yaml", "kind: {\n");
    let outcome = workspace.run(&["check", "job.yaml", "broken.yaml", "--fail-on", "none"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
}
