//! `meshlife action`, the GitHub Action's entrypoint, run as the runner runs it: every input of
//! action.yml an `INPUT_*` variable (its default unless the workflow gives one), in the
//! workspace, with `GITHUB_OUTPUT` and `GITHUB_STEP_SUMMARY` files. (tests/image runs the action
//! image itself the same way.)

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::cli_support;

use cli_support::*;

struct ActionRun {
    code: i32,
    stdout: String,
    stderr: String,
    outputs: BTreeMap<String, String>,
    summary: String,
}

fn run_action(workspace: &Path, given: &[(&str, &str)]) -> ActionRun {
    let action: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../action.yml"))
            .expect("action.yml"),
    )
    .expect("action.yml is YAML");
    let files = tempfile::tempdir().expect("a folder for the runner's files");
    let output_file = files.path().join("set_output");
    let summary_file = files.path().join("step_summary");
    let mut command = Command::new(env!("CARGO_BIN_EXE_meshlife"));
    command
        .arg("action")
        .current_dir(workspace)
        .env_clear()
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_WORKSPACE", workspace)
        .env("GITHUB_OUTPUT", &output_file)
        .env("GITHUB_STEP_SUMMARY", &summary_file)
        .env("NO_COLOR", "1");
    let inputs = action["inputs"].as_mapping().expect("inputs");
    for (name, spec) in inputs {
        let name = name.as_str().expect("an input's name");
        let value = given
            .iter()
            .find(|(wanted, _)| *wanted == name)
            .map(|(_, value)| value.to_string())
            .unwrap_or_else(|| spec["default"].as_str().unwrap_or_default().to_string());
        command.env(format!("INPUT_{}", name.to_uppercase()), value);
    }
    let output = command.output().expect("meshlife action runs");
    let outputs = std::fs::read_to_string(&output_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    ActionRun {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        outputs,
        summary: std::fs::read_to_string(&summary_file).unwrap_or_default(),
    }
}

#[test]
fn the_action_annotates_writes_sarif_and_reports_its_outcome() {
    let workspace = Workspace::new();
    workspace.write("deploy/web.yaml", &meshed_deployment("web", "shop"));
    workspace.write("deploy/job.yaml", &meshed_job("migrate", "shop"));
    let run = run_action(workspace.path(), &[("paths", "deploy")]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.contains("::error file=deploy/job.yaml"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("::warning file=deploy/web.yaml"),
        "{}",
        run.stdout
    );
    let sarif: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace.path().join("meshlife.sarif")).expect("SARIF written"),
    )
    .expect("SARIF is JSON");
    let results = sarif["runs"][0]["results"].as_array().expect("results");
    assert_eq!(run.outputs["findings"], results.len().to_string());
    assert_eq!(run.outputs["exit-code"], "1");
    assert_eq!(run.outputs["sarif-file"], "meshlife.sarif");
    assert!(run.summary.starts_with("### meshlife"), "{}", run.summary);
    assert!(run.summary.contains("exit code 1"), "{}", run.summary);
}

#[test]
fn the_action_takes_the_repository_config_and_its_inputs_win() {
    let workspace = Workspace::new();
    std::fs::create_dir_all(workspace.path().join(".git")).unwrap();
    workspace.write("deploy/web.yaml", &meshed_deployment("web", "shop"));
    workspace.write(".meshlife.yaml", "failOn: error\n");
    let run = run_action(workspace.path(), &[("paths", "deploy")]);
    assert_eq!(
        run.code, 0,
        "a warning passes under the config's failOn: {}",
        run.stderr
    );
    let run = run_action(
        workspace.path(),
        &[
            ("paths", "deploy"),
            ("fail-on", "warning"),
            ("format", "json"),
            ("sarif-file", "out/m.sarif"),
        ],
    );
    // out/ does not exist: the SARIF file cannot be written, which is an error, said.
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--output-file out/m.sarif"),
        "{}",
        run.stderr
    );
    std::fs::create_dir_all(workspace.path().join("out")).unwrap();
    let run = run_action(
        workspace.path(),
        &[
            ("paths", "deploy"),
            ("fail-on", "warning"),
            ("format", "json"),
            ("sarif-file", "out/m.sarif"),
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let envelope: serde_json::Value = serde_json::from_str(&run.stdout).expect("-o json");
    assert_eq!(envelope["config"], ".meshlife.yaml");
    assert_eq!(run.outputs["sarif-file"], "out/m.sarif");
}

#[test]
fn an_input_error_is_exit_2_in_the_outputs() {
    let workspace = Workspace::new();
    let run = run_action(workspace.path(), &[("paths", "missing/")]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.outputs["exit-code"], "2");
    assert_eq!(run.outputs["findings"], "0");
    assert!(run.stderr.contains("missing/"), "{}", run.stderr);
}
