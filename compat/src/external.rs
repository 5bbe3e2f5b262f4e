//! Hosts in other languages (npm on Node.js, the PyPI packages, the real OPA in Go, the Java
//! SDK), run as child processes that
//! read the fixture index and print what each host returned, as JSON on stdout:
//!
//! ```json
//! {"columns": [{"host", "version", "how", "memory_capped",
//!               "results": {"<fixture id>": {"msgs": [..]} | {"error": ".."} | {"not_applicable": ".."}},
//!               "refusals": {"<fixture id>": <a result>}}],
//!  "checks": [{"host", "name", "ok", "detail"}]}
//! ```
//!
//! `refusals`, in a "refusals then valid inputs" column only, holds what the host answered for
//! the exhausting input (`--exhausting`) it evaluated on the same instance just before each
//! fixture; the matrix turns it into that column's check.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::fixtures::{Fixture, native_msgs_of_value_text};
use crate::matrix::{
    Check, Column, Outcome, Verdict, judge, judge_against, mask_positions, refusals_check,
};

#[derive(Deserialize)]
struct RunnerOutput {
    columns: Vec<RunnerColumn>,
    #[serde(default)]
    checks: Vec<RunnerCheck>,
}

#[derive(Deserialize)]
struct RunnerColumn {
    host: String,
    version: String,
    how: String,
    #[serde(default)]
    memory_capped: bool,
    results: serde_json::Map<String, Value>,
    #[serde(default)]
    refusals: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize)]
struct RunnerCheck {
    host: String,
    name: String,
    ok: bool,
    detail: String,
}

/// Runs `program args...` and judges every column it reports.
pub fn run(
    description: &str,
    program: &Path,
    args: &[String],
    fixtures: &[Fixture],
) -> Result<(Vec<Column>, Vec<Check>)> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("{description}: starting {}", program.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!(
            "{description}: {} {} exited with {}:\n{stderr}",
            program.display(),
            args.join(" "),
            output.status
        );
    }
    let parsed: RunnerOutput = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "{description}: the runner's output is not the matrix JSON (stderr: {stderr:.2000})"
        )
    })?;
    let mut checks = Vec::new();
    let mut columns = Vec::new();
    for column in parsed.columns {
        let mut resent = Vec::new();
        let verdicts: Vec<Verdict> = fixtures
            .iter()
            .map(|fixture| match column.results.get(&fixture.id) {
                None => Verdict::Differs("the runner reported nothing for this fixture".into()),
                Some(result) => match result.get("sent").and_then(Value::as_str) {
                    // The host sent other bytes than the fixture's: judge against those.
                    Some(sent) => {
                        let expected = native_msgs_of_value_text(sent.as_bytes());
                        let masked = |msgs: &[String]| -> Vec<String> {
                            msgs.iter().map(|msg| mask_positions(msg)).collect()
                        };
                        let changed = (masked(&expected) != masked(&fixture.expected))
                            .then(|| fixture.id.clone());
                        resent.push(changed);
                        judge_against(&expected, sent.len(), outcome(result), column.memory_capped)
                    }
                    None => judge(fixture, outcome(result), column.memory_capped),
                },
            })
            .collect();
        if let Some(refused) = &column.refusals {
            let refusals: Vec<Outcome> = fixtures
                .iter()
                .map(|fixture| match refused.get(&fixture.id) {
                    Some(result) => outcome(result),
                    None => Outcome::Error("the runner sent no exhausting input here".into()),
                })
                .collect();
            checks.push(refusals_check(
                &column.host,
                &column.how,
                &refusals,
                &verdicts,
            ));
        }
        if !resent.is_empty() {
            // Hosts that print the input their own way (OPA sends Rego text) change the bytes of
            // almost every fixture; only those whose verdict changes with them are named.
            let judged_otherwise: Vec<&str> = resent.iter().flatten().map(String::as_str).collect();
            checks.push(Check::new(
                &column.host,
                &format!("input as the host re-serialised it ({})", column.how),
                Ok(format!(
                    "{} fixtures reach the module as other bytes than the fixture's, judged \
                     against the native build on the bytes the host sent; {} of them judged \
                     otherwise than the fixture's own bytes (positions aside){}",
                    resent.len(),
                    judged_otherwise.len(),
                    if judged_otherwise.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", judged_otherwise.join(", "))
                    }
                )),
            ));
        }
        columns.push(Column {
            host: column.host,
            version: column.version,
            how: column.how,
            verdicts,
        });
    }
    checks.extend(parsed.checks.into_iter().map(|check| {
        let outcome = if check.ok {
            Ok(check.detail)
        } else {
            Err(check.detail)
        };
        Check::new(&check.host, &check.name, outcome)
    }));
    Ok((columns, checks))
}

fn outcome(result: &Value) -> Outcome {
    if let Some(msgs) = result.get("msgs").and_then(Value::as_array) {
        let strings: Option<Vec<String>> = msgs
            .iter()
            .map(|msg| msg.as_str().map(str::to_string))
            .collect();
        return match strings {
            Some(strings) => Outcome::Msgs(strings),
            None => Outcome::Error(format!("msgs that are not all strings: {result}")),
        };
    }
    if let Some(reason) = result.get("not_applicable").and_then(Value::as_str) {
        return Outcome::NotApplicable(reason.into());
    }
    match result.get("error").and_then(Value::as_str) {
        Some(error) => Outcome::Error(error.into()),
        None => Outcome::Error(format!("an answer the matrix cannot read: {result}")),
    }
}
