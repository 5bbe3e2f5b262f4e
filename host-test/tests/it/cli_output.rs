//! Where the output goes: a stdout that cannot take it is an error (exit 2, said on stderr), a
//! reader that stops reading is not, and nothing from a manifest reaches a terminal or a CI log
//! as a control character.

use crate::cli_support;

use std::fs::File;
use std::io::Read;
use std::process::{Command, Stdio};

use cli_support::*;

fn meshlife() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_meshlife"));
    command.env("NO_COLOR", "1");
    command
}

#[test]
fn a_full_disk_on_stdout_is_an_error_for_every_command_that_prints() {
    let workspace = Workspace::new();
    workspace.write("web.yaml", &meshed_deployment("web", "shop"));
    let commands: [&[&str]; 4] = [
        &["check", "web.yaml"],
        &["rules"],
        &["constraint", "--kubernetes", "1.31", "--istio", "1.26"],
        &["install", "gatekeeper"],
    ];
    for args in commands {
        let output = meshlife()
            .args(args)
            .current_dir(workspace.path())
            .stdout(File::create("/dev/full").expect("/dev/full exists on Linux"))
            .output()
            .expect("meshlife runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("cannot write the output to stdout") && stderr.contains("No space"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_closed_stdout_is_an_error_and_dev_null_is_not() {
    let workspace = Workspace::new();
    workspace.write("web.yaml", &meshed_deployment("web", "shop"));
    // `sh -c '... >&-'` closes descriptor 1 before meshlife starts, as a careless script does.
    let closed = Command::new("sh")
        .arg("-c")
        .arg(format!("'{}' rules >&-", env!("CARGO_BIN_EXE_meshlife")))
        .output()
        .expect("sh runs");
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert_eq!(closed.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("stdout is closed"), "{stderr}");

    let discarded = meshlife()
        .args(["check", "web.yaml"])
        .current_dir(workspace.path())
        .stdout(Stdio::null())
        .output()
        .expect("meshlife runs");
    assert_eq!(
        discarded.status.code(),
        Some(1),
        "findings, written to /dev/null: {}",
        String::from_utf8_lossy(&discarded.stderr)
    );
}

#[test]
fn a_reader_that_stops_reading_ends_the_run_quietly() {
    let workspace = Workspace::new();
    let many: Vec<String> = (0..3000)
        .map(|index| meshed_deployment(&format!("web-{index}"), "shop"))
        .collect();
    workspace.write("many.yaml", &stream(&many));
    let mut child = meshlife()
        .args(["check", "many.yaml"])
        .current_dir(workspace.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("meshlife runs");
    // Read one byte and hang up, as `| head -c 1` does.
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_exact(&mut [0u8]).unwrap();
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "the verdict stands: {stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("error"),
        "{stderr}"
    );
}

#[test]
fn names_from_manifests_cannot_write_lines_or_escape_codes() {
    let workspace = Workspace::new();
    let hostile = meshed_deployment("web", "shop").replace(
        "name: web",
        "name: \"web\\n::error file=x.yaml::forged\\e[2J\\r\\u202e\"",
    );
    assert_ne!(
        hostile,
        meshed_deployment("web", "shop"),
        "the name was replaced"
    );
    workspace.write("hostile.yaml", &hostile);
    let outcome = workspace.run(&["check", "hostile.yaml"]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    for (stream, text) in [("stdout", &outcome.stdout), ("stderr", &outcome.stderr)] {
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
            "{stream} holds a control character: {text:?}"
        );
        assert!(
            !text.lines().any(|line| line.starts_with("::error")),
            "{stream} holds a forged workflow command: {text}"
        );
    }
    assert!(
        outcome
            .stdout
            .contains(r"web\n::error file=x.yaml::forged\u{1b}[2J\r\u{202e}"),
        "the name is shown escaped: {}",
        outcome.stdout
    );
}

/// With stdout and stderr on one pipe (`2>&1 | less`, a CI log), the notes and warnings come
/// before the report they explain, never after its summary.
#[test]
fn notes_come_before_the_report_when_both_streams_share_one_pipe() {
    let workspace = Workspace::new();
    workspace.write("web.yaml", &meshed_deployment("web", "shop"));
    workspace.write("quiet.yaml", &plain_deployment("quiet", "shop"));
    workspace.write(
        "chart/templates/job.yaml",
        "{{- if .Values.x }}\nkind: Job\n{{- end }}\n",
    );
    let runs: [&[&str]; 2] = [
        &["check", "web.yaml", "quiet.yaml", "chart"],
        &["explain", "web.yaml", "chart"],
    ];
    for args in runs {
        let output = Command::new("sh")
            .arg("-c")
            .arg("\"$0\" \"$@\" 2>&1")
            .arg(env!("CARGO_BIN_EXE_meshlife"))
            .args(args)
            .current_dir(workspace.path())
            .env("NO_COLOR", "1")
            .output()
            .expect("sh runs");
        let merged = String::from_utf8_lossy(&output.stdout);
        let lines: Vec<&str> = merged.lines().collect();
        let last_note = lines
            .iter()
            .rposition(|line| line.starts_with("meshlife: note:"))
            .unwrap_or_else(|| panic!("{args:?}: no note in {merged}"));
        let first_report_line = lines
            .iter()
            .position(|line| !line.starts_with("meshlife: "))
            .unwrap_or_else(|| panic!("{args:?}: no report in {merged}"));
        assert!(
            last_note < first_report_line,
            "{args:?}: a note after the report:\n{merged}"
        );
    }
}
