//! `meshlife explain`: the timeline drawing and its JSON, from the CLI as users run it.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

fn meshlife(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_meshlife"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .env_remove("COLUMNS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_drawing_fits_100_columns_in_plain_ascii_when_not_a_terminal() {
    let (code, stdout, stderr) = meshlife(&["explain", "examples/"], None);
    assert_eq!(code, 0, "{stderr}");
    for line in stdout.lines() {
        assert!(
            line.chars().count() <= 100,
            "wider than 100 columns: {line}"
        );
        assert!(line.is_ascii(), "not plain ASCII: {line}");
    }
    assert!(!stdout.contains('\x1b'));
    // Every pod spec of the examples is drawn, each with both phases.
    let (_, json, _) = meshlife(&["explain", "examples/", "-o", "json"], None);
    let explained: Vec<Value> = serde_json::from_str(&json).unwrap();
    assert!(explained.len() > 40, "{}", explained.len());
    assert_eq!(stdout.matches("\nStartup\n").count(), explained.len());
    assert_eq!(stdout.matches("SIGKILL at ").count(), explained.len());
}

#[test]
fn a_classic_istio_pod_without_hold_shows_the_startup_race_and_the_drain() {
    let (code, stdout, stderr) =
        meshlife(&["explain", "examples/istio/deployment-no-hold.yaml"], None);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("istio, classic sidecar (predicted: the injector adds the proxy)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("-> the app's outbound calls at startup: refused 1s-3s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("istio-proxy drains inbound for terminationDrainDuration 5s"),
        "{stdout}"
    );
    assert!(stdout.contains("^ SIGKILL at 30s") || stdout.contains("SIGKILL at 30s ^"));
    // The assumption flags move the figures they name.
    let (_, slower, _) = meshlife(
        &[
            "explain",
            "examples/istio/deployment-no-hold.yaml",
            "--proxy-ready",
            "5s",
        ],
        None,
    );
    assert!(slower.contains("refused 1s-6s"), "{slower}");
}

#[test]
fn json_gives_every_event_its_source_and_every_request_its_fate() {
    let (code, json, stderr) = meshlife(&["explain", "examples/", "-o", "json"], None);
    assert_eq!(code, 0, "{stderr}");
    let explained: Vec<Value> = serde_json::from_str(&json).unwrap();
    for one in &explained {
        let timeline = &one["timeline"];
        for event in timeline["events"].as_array().unwrap() {
            assert!(event["source"]["kind"].is_string(), "{event}");
        }
        let fates: Vec<&str> = timeline["fates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|fate| fate["request"].as_str().unwrap())
            .collect();
        if timeline["mesh"].is_string() {
            assert_eq!(
                fates,
                [
                    "startup-outbound",
                    "in-flight-at-sigterm",
                    "new-during-drain",
                    "long-lived-stream"
                ],
                "{}",
                one["object"]
            );
        }
        assert!(one["file"].as_str().unwrap().starts_with("examples/"));
    }
}

#[test]
fn an_unreadable_input_is_an_error_naming_it_and_the_rest_is_still_drawn() {
    let (code, stdout, stderr) = meshlife(
        &["explain", "-", "examples/istio/deployment-no-hold.yaml"],
        Some("kind: [unclosed\n"),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("<stdin>"), "{stderr}");
    assert!(stdout.contains("Deployment shop/checkout"), "{stdout}");
    let (code, _, stderr) = meshlife(&["explain", "/nonexistent.yaml"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("/nonexistent.yaml"), "{stderr}");
    let (code, _, stderr) = meshlife(
        &[
            "explain",
            "examples/istio/deployment-no-hold.yaml",
            "--proxy-ready",
            "soon",
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("--proxy-ready"), "{stderr}");
}
