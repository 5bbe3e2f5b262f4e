//! `meshlife action`: the entrypoint of the GitHub Action (action.yml at the repository root).
//! The runner starts the action image in the workspace with each input as an `INPUT_<NAME>`
//! variable (upper case, hyphens kept); this turns them into one `meshlife check` (so the
//! repository config applies as it does on a laptop), writes the SARIF file for code scanning,
//! prints annotations for the pull request, and hands the outcome to the workflow through
//! `GITHUB_OUTPUT` and the job summary.

use std::ffi::OsString;
use std::io::Write;

use clap::Args;

use crate::report::plural;
use crate::terminal::{EXIT_ERROR, print_error, print_note};

#[derive(Args, Debug)]
pub struct ActionArgs {}

/// The inputs of action.yml, as the runner passes them.
struct Inputs {
    paths: Vec<String>,
    config: Option<String>,
    format: String,
    fail_on: Option<String>,
    sarif_file: String,
}

impl Inputs {
    fn from_environment() -> Inputs {
        let input = |name: &str| {
            std::env::var(format!("INPUT_{}", name.to_uppercase()))
                .ok()
                .map(|value| value.trim().to_string())
                .filter(|value| !value.is_empty())
        };
        let paths = input("paths")
            .map(|paths| paths.split_whitespace().map(str::to_string).collect())
            .unwrap_or_else(|| vec![".".to_string()]);
        Inputs {
            paths,
            config: input("config"),
            format: input("format").unwrap_or_else(|| "github".into()),
            fail_on: input("fail-on"),
            sarif_file: input("sarif-file").unwrap_or_else(|| "meshlife.sarif".into()),
        }
    }

    /// The `meshlife check` these inputs stand for.
    fn check_command(&self) -> Vec<String> {
        let mut command = vec!["meshlife".to_string(), "check".to_string()];
        command.extend(self.paths.iter().cloned());
        command.extend(["-o".into(), self.format.clone()]);
        command.extend(["--output-file".into(), format!("sarif={}", self.sarif_file)]);
        if let Some(config) = &self.config {
            command.extend(["--config".into(), config.clone()]);
        }
        if let Some(fail_on) = &self.fail_on {
            command.extend(["--fail-on".into(), fail_on.clone()]);
        }
        command
    }
}

pub fn run(_args: &ActionArgs) -> u8 {
    let inputs = Inputs::from_environment();
    let command = inputs.check_command();
    print_note(format_args!("running {}", command.join(" ")));
    let code = crate::cli::main(command.iter().map(OsString::from).collect());
    let results = count_results(&inputs.sarif_file);
    if let Err(error) = report_to_workflow(&inputs, code, results) {
        print_error(error);
        return EXIT_ERROR;
    }
    code
}

/// The findings of the SARIF file the check wrote, by level; `None` when it wrote none (an
/// input error before the report).
fn count_results(sarif_file: &str) -> Option<(usize, usize, usize)> {
    let text = std::fs::read_to_string(sarif_file).ok()?;
    let sarif: serde_json::Value = serde_json::from_str(&text).ok()?;
    let results = sarif["runs"][0]["results"].as_array()?;
    let level = |wanted: &str| {
        results
            .iter()
            .filter(|result| result["level"].as_str() == Some(wanted))
            .count()
    };
    Some((level("error"), level("warning"), level("note")))
}

/// `GITHUB_OUTPUT` (sarif-file, findings, exit-code) and the job summary, when the runner
/// gives them.
fn report_to_workflow(
    inputs: &Inputs,
    code: u8,
    results: Option<(usize, usize, usize)>,
) -> Result<(), String> {
    let findings = results.map_or(0, |(errors, warnings, notes)| errors + warnings + notes);
    let mut outputs = format!("exit-code={code}\nfindings={findings}\n");
    if results.is_some() {
        outputs.push_str(&format!("sarif-file={}\n", inputs.sarif_file));
    }
    append_to_variable_file("GITHUB_OUTPUT", &outputs)?;
    let summary = match results {
        Some((errors, warnings, notes)) => format!(
            "### meshlife\n\n{}, {}, {} info in {}; exit code {code}. SARIF: `{}`.\n",
            plural(errors, "error"),
            plural(warnings, "warning"),
            notes,
            inputs.paths.join(" "),
            inputs.sarif_file
        ),
        None => format!(
            "### meshlife\n\nThe check did not get to a report (exit code {code}): its error is \
             in the step's log.\n"
        ),
    };
    append_to_variable_file("GITHUB_STEP_SUMMARY", &summary)
}

fn append_to_variable_file(variable: &str, text: &str) -> Result<(), String> {
    let Some(path) = std::env::var_os(variable) else {
        return Ok(());
    };
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|error| format!("{variable} ({}): cannot open: {error}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|error| format!("{variable} ({}): cannot write: {error}", path.display()))
}
