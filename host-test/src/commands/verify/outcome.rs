//! What a suite run found, and the `go test`-like report gator prints of it.

use std::fmt::Write;
use std::time::Duration;

/// Why something did not pass: a failed expectation (exit 1), or a suite that cannot be run as
/// written (exit 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Problem {
    Failed(String),
    Broken(String),
}

impl Problem {
    pub(super) fn message(&self) -> &str {
        match self {
            Problem::Failed(message) | Problem::Broken(message) => message,
        }
    }

    pub(super) fn is_broken(&self) -> bool {
        matches!(self, Problem::Broken(_))
    }
}

#[derive(Debug)]
pub(super) struct CaseResult {
    pub(super) name: String,
    pub(super) skipped: bool,
    pub(super) problem: Option<Problem>,
    pub(super) runtime: Duration,
}

#[derive(Debug)]
pub(super) struct TestResult {
    pub(super) name: String,
    pub(super) skipped: bool,
    pub(super) problem: Option<Problem>,
    pub(super) runtime: Duration,
    pub(super) cases: Vec<CaseResult>,
}

impl TestResult {
    pub(super) fn is_failure(&self) -> bool {
        self.problem.is_some() || self.cases.iter().any(|case| case.problem.is_some())
    }

    pub(super) fn is_broken(&self) -> bool {
        self.problem.as_ref().is_some_and(Problem::is_broken)
            || self
                .cases
                .iter()
                .any(|case| case.problem.as_ref().is_some_and(Problem::is_broken))
    }
}

#[derive(Debug)]
pub(super) struct SuiteResult {
    pub(super) path: String,
    pub(super) skipped: bool,
    pub(super) runtime: Duration,
    pub(super) tests: Vec<TestResult>,
}

impl SuiteResult {
    pub(super) fn is_failure(&self) -> bool {
        self.tests.iter().any(TestResult::is_failure)
    }

    pub(super) fn is_broken(&self) -> bool {
        self.tests.iter().any(TestResult::is_broken)
    }
}

/// gator's duration format: seconds with three decimals.
pub(super) fn seconds(duration: Duration) -> String {
    format!("{:.3}s", duration.as_secs_f64())
}

/// Indents every line after the first of a multi-line message.
pub(super) fn indent_rest(message: &str, indent: &str) -> String {
    message.replace('\n', &format!("\n{indent}"))
}

/// The `go test`-like report gator prints, with cases named `test/case`.
pub(super) fn render(results: &[SuiteResult], verbose: bool) -> String {
    let mut out = String::new();
    for suite in results {
        for test in &suite.tests {
            if test.skipped {
                if verbose {
                    let _ = writeln!(out, "=== SKIP  {}", test.name);
                }
                continue;
            }
            if verbose {
                let _ = writeln!(out, "=== RUN   {}", test.name);
            }
            for case in &test.cases {
                let full_name = format!("{}/{}", test.name, case.name);
                if case.skipped {
                    if verbose {
                        let _ = writeln!(out, "    === SKIP  {full_name}");
                    }
                    continue;
                }
                if verbose {
                    let _ = writeln!(out, "    === RUN   {full_name}");
                }
                match &case.problem {
                    Some(problem) => {
                        let _ = writeln!(
                            out,
                            "    --- FAIL: {full_name}\t({})",
                            seconds(case.runtime)
                        );
                        let _ = writeln!(
                            out,
                            "        {}",
                            indent_rest(problem.message(), "        ")
                        );
                    }
                    None if verbose => {
                        let _ = writeln!(
                            out,
                            "    --- PASS: {full_name}\t({})",
                            seconds(case.runtime)
                        );
                    }
                    None => {}
                }
            }
            if test.is_failure() {
                let _ = writeln!(out, "--- FAIL: {}\t({})", test.name, seconds(test.runtime));
                if let Some(problem) = &test.problem {
                    let _ = writeln!(out, "  {}", indent_rest(problem.message(), "  "));
                }
            } else if verbose {
                let _ = writeln!(out, "--- PASS: {}\t({})", test.name, seconds(test.runtime));
            }
        }
        if suite.is_failure() {
            let _ = writeln!(out, "FAIL\t{}\t{}", suite.path, seconds(suite.runtime));
        } else if suite.skipped {
            let _ = writeln!(
                out,
                "ok\t{}\t{}\t[skipped]",
                suite.path,
                seconds(suite.runtime)
            );
        } else {
            let _ = writeln!(out, "ok\t{}\t{}", suite.path, seconds(suite.runtime));
        }
    }
    if results.iter().any(SuiteResult::is_failure) {
        out.push_str("FAIL\n");
    } else {
        out.push_str("PASS\n");
    }
    out
}
