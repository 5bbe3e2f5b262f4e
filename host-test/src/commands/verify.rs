//! `meshlife verify`: runs gator `verify` suites (`test.gatekeeper.sh/v1alpha1` `Suite`) against
//! the meshlife ConstraintTemplate, with the wasm module standing in for the template's Rego.
//!
//! The suite format is gator's: `tests[]` with `name`, `template`, `constraint`, `invalid`,
//! `skip` and `cases[]` (`name`, `object`, `inventory`, `skip`, `assertions[]` with `violations`
//! and `message`). Paths are relative to the suite file. Output mimics `go test` as gator's does.
//!
//! Where meshlife differs from gator, on purpose:
//! - The template must be the meshlife ConstraintTemplate (kind `MeshLifecycle`): the module
//!   implements exactly that template, so any other one is refused instead of guessed at.
//! - A constraint is invalid when it cannot be read as a Gatekeeper constraint (unknown
//!   `spec`/`spec.match` fields, bad selectors or enforcement actions) or when the module
//!   rejects its parameters (an unknown key such as a typo, a wrong type): `invalid: true`
//!   tests pass on either.
//! - A case without assertions expects zero violations (gator refuses such cases).
//! - The `object` file may hold Namespace objects next to the one object under review: they
//!   count as inventory, so the manifests `meshlife check` reads can be suite objects as they
//!   are. gator requires exactly one object.
//! - `inventory` objects are not passed as `data.inventory`: the module reads no data document
//!   (the meshlife rules need none). A Namespace in the inventory (or in the object file) whose
//!   name is the object's namespace becomes the review's `namespaceObject`, as Gatekeeper
//!   provides it, and serves `spec.match.namespaceSelector`.
//! - Unknown fields in a suite are errors: a misspelt `assertions` must not turn a test into a
//!   silent pass.
//! - Exit code 2 (not 1) when a suite, or a file it names, cannot be read or used (missing or
//!   absolute paths, a template that is not meshlife's, an object file with several objects, an
//!   invalid assertion or regular expression, an evaluation failure), and when a path given
//!   holds no Suite at all (a folder searched in vain is a wrong path, not a pass).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use meshlife_policy::Violation;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::constraints::constraint::{self, CONSTRAINT_KIND, Constraint};
use crate::inputs::files::{self, ReadLimit};
use crate::inputs::manifests::{self, ManifestObject};
use crate::module::engine::Engine;
use crate::terminal::print_error;
use crate::terminal::{EXIT_ERROR, EXIT_FAILED, EXIT_OK};

pub const SUITE_GROUP: &str = "test.gatekeeper.sh";
pub const SUITE_KIND: &str = "Suite";
pub const TEMPLATE_GROUP: &str = "templates.gatekeeper.sh";
/// `metadata.name` of the meshlife template: Gatekeeper requires the lowercase kind.
pub const TEMPLATE_NAME: &str = "meshlifecycle";

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Suite files, or folders searched recursively for `.yaml`/`.yml` files holding a
    /// `test.gatekeeper.sh` Suite (other files are ignored).
    #[arg(required = true, value_name = "SUITE|DIR")]
    pub paths: Vec<PathBuf>,

    /// Print `=== RUN`, `--- PASS` and `=== SKIP` lines for every test and case.
    #[arg(short, long)]
    pub verbose: bool,

    /// Run only matching tests and cases: `TEST_REGEX//CASE_REGEX`, or one regex matched
    /// against test or case names (gator's `--run`).
    #[arg(long = "run", value_name = "REGEX")]
    pub run: Option<String>,

    /// Evaluate this OPA wasm module instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    pub module: Option<PathBuf>,

    /// The most a suite, or a file it names, or the --module file may hold (as `meshlife
    /// check --max-file-size`).
    #[arg(long, value_name = "SIZE", default_value_t = crate::inputs::files::DEFAULT_MAX_FILE_SIZE)]
    pub max_file_size: crate::inputs::files::FileSize,
}

/// Runs `meshlife verify` and returns the exit code.
pub fn run_verify(args: &VerifyArgs) -> u8 {
    let filter = match Filter::new(args.run.as_deref().unwrap_or("")) {
        Ok(filter) => filter,
        Err(message) => {
            print_error(format_args!("--run: {message}"));
            return EXIT_ERROR;
        }
    };
    let limit = ReadLimit::flag(args.max_file_size);
    let engine = match &args.module {
        Some(path) => Engine::from_file(path, limit),
        None => Engine::embedded(),
    };
    let engine = match engine {
        Ok(engine) => engine,
        Err(error) => {
            print_error(format_args!("{error:#}"));
            return EXIT_ERROR;
        }
    };

    let found = find_suites(&args.paths, limit);
    for error in &found.errors {
        print_error(error);
    }
    let runner = Runner {
        engine: &engine,
        filter: &filter,
        limit,
    };
    let results: Vec<SuiteResult> = found
        .suites
        .iter()
        .map(|suite| runner.run_suite(suite))
        .collect();
    let mut report = render(&results, args.verbose);
    // A --run that selects nothing verified nothing: no pass. (Suites skipped by their own
    // `skip: true` say so on their line, as gator does.)
    let cases_run = results
        .iter()
        .flat_map(|suite| &suite.tests)
        .filter(|test| !test.skipped)
        .map(|test| {
            test.cases
                .iter()
                .filter(|case| !case.skipped)
                .count()
                .max(1)
        })
        .sum::<usize>();
    let nothing_run = args.run.is_some() && found.errors.is_empty() && cases_run == 0;
    if nothing_run {
        let tests: usize = results.iter().map(|suite| suite.tests.len()).sum();
        print_error(format_args!(
            "no test ran: {} suite(s) with {tests} test(s) found, and --run \
             {:?} matches none of them (nor any case not skipped); nothing was verified",
            results.len(),
            args.run.as_deref().unwrap_or_default()
        ));
    }
    if (!found.errors.is_empty() || nothing_run) && report.ends_with("PASS\n") {
        // A suite that could not be read, or no test run at all, did not pass.
        report.truncate(report.len() - "PASS\n".len());
        report.push_str("FAIL\n");
    }
    if let Err(error) = crate::terminal::write_stdout(&report) {
        print_error(error);
        return EXIT_ERROR;
    }

    let broken =
        nothing_run || !found.errors.is_empty() || results.iter().any(SuiteResult::is_broken);
    if broken {
        EXIT_ERROR
    } else if results.iter().any(SuiteResult::is_failure) {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

// ---------------------------------------------------------------------------------------------
// The suite format.

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SuiteDocument {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<Value>,
    #[serde(default)]
    skip: bool,
    #[serde(default)]
    tests: Vec<TestDocument>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TestDocument {
    #[serde(default)]
    name: String,
    #[serde(default)]
    template: String,
    #[serde(default)]
    constraint: String,
    #[serde(default)]
    expansion: Option<String>,
    #[serde(default)]
    invalid: bool,
    #[serde(default)]
    skip: bool,
    #[serde(default)]
    cases: Vec<CaseDocument>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaseDocument {
    #[serde(default)]
    name: String,
    #[serde(default)]
    object: String,
    #[serde(default)]
    inventory: Vec<String>,
    #[serde(default)]
    skip: bool,
    #[serde(default)]
    assertions: Vec<AssertionDocument>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct AssertionDocument {
    #[serde(default)]
    violations: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

/// One suite read from a file.
#[derive(Debug)]
struct Suite {
    /// The file, as named on the command line or found under a named folder.
    path: PathBuf,
    document: SuiteDocument,
}

#[derive(Default)]
struct FoundSuites {
    suites: Vec<Suite>,
    /// Paths or suite files that cannot be read.
    errors: Vec<String>,
}

/// Reads the suites under `paths`: named files must hold a Suite; in folders (walked
/// recursively, sorted, hidden folders skipped) `.yaml`/`.yml` files without one are ignored,
/// but a folder must hold at least one.
fn find_suites(paths: &[PathBuf], limit: ReadLimit) -> FoundSuites {
    let mut found = FoundSuites::default();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(metadata) if metadata.is_dir() => {
                let (suites_before, errors_before) = (found.suites.len(), found.errors.len());
                let mut files = Vec::new();
                walk(path, &mut files, &mut found.errors);
                for file in files {
                    read_suite_file(&file, false, limit, &mut found);
                }
                // A folder without suites is a wrong path, not a pass with nothing to run.
                if found.suites.len() == suites_before && found.errors.len() == errors_before {
                    found.errors.push(format!(
                        "{}: no {SUITE_GROUP} Suite found (searched recursively for .yaml and \
                         .yml files with apiVersion: {SUITE_GROUP}/v1alpha1, kind: {SUITE_KIND})",
                        path.display()
                    ));
                }
            }
            Ok(_) => read_suite_file(path, true, limit, &mut found),
            Err(error) => found
                .errors
                .push(format!("{}: cannot read: {error}", path.display())),
        }
    }
    found
}

fn walk(folder: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<String>) {
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(error) => {
            errors.push(format!("{}: cannot read folder: {error}", folder.display()));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    paths.sort();
    for path in paths {
        let hidden = path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with('.'));
        let yaml = path
            .extension()
            .and_then(|extension| extension.to_str())
            .is_some_and(|extension| {
                matches!(extension.to_ascii_lowercase().as_str(), "yaml" | "yml")
            });
        match std::fs::metadata(&path) {
            Ok(metadata) if metadata.is_dir() => {
                if !hidden {
                    walk(&path, files, errors);
                }
            }
            // Regular files only: a FIFO would block the run, a device never end. Neither can
            // be known to hold no suite, so each is an error, not a silent skip.
            Ok(metadata) if yaml => match files::irregular_kind(&metadata) {
                None => files.push(path),
                Some(kind) => errors.push(format!(
                    "{}: not a regular file but {kind}: not read",
                    files::escaped_path(&path)
                )),
            },
            Ok(_) => {}
            // A dangling symlink (or a loop of them) named as a suite could have held one.
            Err(error) if yaml => errors.push(format!(
                "{}: cannot read: {error}",
                files::escaped_path(&path)
            )),
            Err(_) => {}
        }
    }
}

fn is_suite(value: &Value) -> bool {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    manifests::split_api_version(api_version).0 == SUITE_GROUP && kind == SUITE_KIND
}

/// Reads the Suites of one file. A file found in a folder that is not YAML, or holds no Suite,
/// is ignored (unless it mentions the suite group: then a syntax error is reported).
fn read_suite_file(path: &Path, named: bool, limit: ReadLimit, found: &mut FoundSuites) {
    let display = path.display().to_string();
    let text = match files::read_text(path, limit) {
        Ok(text) => text,
        Err(files::ReadError::NotUtf8(_)) if !named => return,
        Err(error) => {
            found.errors.push(format!("{display}: {error}"));
            return;
        }
    };
    let mut suites = 0;
    for document in manifests::parse_documents(&display, &text) {
        match document {
            Ok((index, _line, value)) if is_suite(&value) => {
                match serde_json::from_value::<SuiteDocument>(value) {
                    Ok(document) => {
                        suites += 1;
                        found.suites.push(Suite {
                            path: path.to_path_buf(),
                            document,
                        });
                    }
                    Err(error) => {
                        suites += 1;
                        found.errors.push(format!(
                            "{display}: document {}: not a valid Suite: {error}",
                            index + 1
                        ));
                    }
                }
            }
            Ok(_) => {}
            Err(error) if named || text.contains(SUITE_GROUP) => {
                suites += 1;
                found.errors.push(error.to_string());
            }
            Err(_) => {}
        }
    }
    if named && suites == 0 {
        found.errors.push(format!(
            "{display}: holds no Suite (apiVersion: {SUITE_GROUP}/v1alpha1, kind: {SUITE_KIND})"
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// Results.

/// Why something did not pass: a failed expectation (exit 1), or a suite that cannot be run as
/// written (exit 2).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Problem {
    Failed(String),
    Broken(String),
}

impl Problem {
    fn message(&self) -> &str {
        match self {
            Problem::Failed(message) | Problem::Broken(message) => message,
        }
    }

    fn is_broken(&self) -> bool {
        matches!(self, Problem::Broken(_))
    }
}

#[derive(Debug)]
struct CaseResult {
    name: String,
    skipped: bool,
    problem: Option<Problem>,
    runtime: Duration,
}

#[derive(Debug)]
struct TestResult {
    name: String,
    skipped: bool,
    problem: Option<Problem>,
    runtime: Duration,
    cases: Vec<CaseResult>,
}

impl TestResult {
    fn is_failure(&self) -> bool {
        self.problem.is_some() || self.cases.iter().any(|case| case.problem.is_some())
    }

    fn is_broken(&self) -> bool {
        self.problem.as_ref().is_some_and(Problem::is_broken)
            || self
                .cases
                .iter()
                .any(|case| case.problem.as_ref().is_some_and(Problem::is_broken))
    }
}

#[derive(Debug)]
struct SuiteResult {
    path: String,
    skipped: bool,
    runtime: Duration,
    tests: Vec<TestResult>,
}

impl SuiteResult {
    fn is_failure(&self) -> bool {
        self.tests.iter().any(TestResult::is_failure)
    }

    fn is_broken(&self) -> bool {
        self.tests.iter().any(TestResult::is_broken)
    }
}

/// gator's duration format: seconds with three decimals.
fn seconds(duration: Duration) -> String {
    format!("{:.3}s", duration.as_secs_f64())
}

/// Indents every line after the first of a multi-line message.
fn indent_rest(message: &str, indent: &str) -> String {
    message.replace('\n', &format!("\n{indent}"))
}

/// The `go test`-like report gator prints, with cases named `test/case`.
fn render(results: &[SuiteResult], verbose: bool) -> String {
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

// ---------------------------------------------------------------------------------------------
// The `--run` filter, with gator's semantics.

#[derive(Debug)]
enum Filter {
    All,
    /// One regex: a test runs when its name or one of its cases matches; a case runs when its
    /// name or its test's name matches.
    Either(Regex),
    /// `test//case`: cases matching the second regex in tests matching the first.
    Both(Regex, Regex),
}

impl Filter {
    fn new(text: &str) -> Result<Filter, String> {
        if text.is_empty() {
            return Ok(Filter::All);
        }
        let compile = |pattern: &str| {
            Regex::new(pattern).map_err(|error| format!("invalid regular expression: {error}"))
        };
        let parts: Vec<&str> = text.split("//").collect();
        match parts.as_slice() {
            [one] => Ok(Filter::Either(compile(one)?)),
            [test, case] => Ok(Filter::Both(compile(test)?, compile(case)?)),
            _ => Err(r#"a filter may include at most one "//""#.into()),
        }
    }

    fn matches_test(&self, test: &TestDocument) -> bool {
        match self {
            Filter::All => true,
            Filter::Either(regex) => {
                regex.is_match(&test.name)
                    || test
                        .cases
                        .iter()
                        .any(|case| self.matches_case(&test.name, &case.name))
            }
            Filter::Both(test_regex, _) => test_regex.is_match(&test.name),
        }
    }

    fn matches_case(&self, test: &str, case: &str) -> bool {
        match self {
            Filter::All => true,
            Filter::Either(regex) => regex.is_match(case) || regex.is_match(test),
            Filter::Both(test_regex, case_regex) => {
                test_regex.is_match(test) && case_regex.is_match(case)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Assertions.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expected {
    Yes,
    No,
    Exactly(u64),
}

impl Expected {
    fn parse(value: Option<&Value>) -> Result<Expected, String> {
        let invalid = || {
            r#"assertion.violations, if set, must be a non-negative integer, "yes", or "no""#
                .to_string()
        };
        match value {
            None | Some(Value::Null) => Ok(Expected::Yes),
            Some(Value::String(text)) if text == "yes" => Ok(Expected::Yes),
            Some(Value::String(text)) if text == "no" => Ok(Expected::No),
            Some(Value::Number(number)) => {
                number.as_u64().map(Expected::Exactly).ok_or_else(invalid)
            }
            Some(_) => Err(invalid()),
        }
    }
}

/// Checks one assertion against the violations; the error reads like gator's.
fn check_assertion(assertion: &AssertionDocument, violations: &[Violation]) -> Result<(), Problem> {
    let expected = Expected::parse(assertion.violations.as_ref()).map_err(Problem::Broken)?;
    let regex = match &assertion.message {
        Some(pattern) => Some(Regex::new(pattern).map_err(|error| {
            Problem::Broken(format!(
                "assertion.message {pattern:?} is not a valid regular expression: {error}"
            ))
        })?),
        None => None,
    };
    let matching = violations
        .iter()
        .filter(|violation| {
            regex
                .as_ref()
                .is_none_or(|regex| regex.is_match(&violation.msg))
        })
        .count() as u64;
    let containing = match &assertion.message {
        Some(pattern) => format!(" containing {pattern:?}"),
        None => String::new(),
    };
    let want = match expected {
        Expected::Yes if matching == 0 => "at least 1".to_string(),
        Expected::No if matching > 0 => "none".to_string(),
        Expected::Exactly(count) if matching != count => format!("exactly {count}"),
        _ => return Ok(()),
    };
    Err(Problem::Failed(format!(
        "unexpected number of violations: got {matching} violations{containing} but want {want}{}",
        got_messages(violations)
    )))
}

/// `; got messages:` and one quoted message per line, or `; got no violations`.
fn got_messages(violations: &[Violation]) -> String {
    if violations.is_empty() {
        return "; got no violations".into();
    }
    let mut text = String::from("; got messages:");
    for violation in violations {
        let _ = write!(text, "\n  {:?}", violation.msg);
    }
    text
}

// ---------------------------------------------------------------------------------------------
// Running.

struct Runner<'a> {
    engine: &'a Engine,
    filter: &'a Filter,
    /// The cap on every file a suite names.
    limit: ReadLimit,
}

/// A usable constraint, or why the test cannot use it.
enum ConstraintOutcome {
    Accepted(Box<Constraint>),
    /// Gatekeeper would reject it (the `invalid: true` case).
    Rejected(String),
}

impl Runner<'_> {
    fn run_suite(&self, suite: &Suite) -> SuiteResult {
        let started = Instant::now();
        let path = suite.path.display().to_string();
        if suite.document.skip {
            return SuiteResult {
                path,
                skipped: true,
                runtime: Duration::ZERO,
                tests: Vec::new(),
            };
        }
        let suite_dir = suite.path.parent().unwrap_or(Path::new("")).to_path_buf();
        let tests = suite
            .document
            .tests
            .iter()
            .map(|test| self.run_test(&suite_dir, test))
            .collect();
        SuiteResult {
            path,
            skipped: false,
            runtime: started.elapsed(),
            tests,
        }
    }

    fn run_test(&self, suite_dir: &Path, test: &TestDocument) -> TestResult {
        let started = Instant::now();
        let mut result = TestResult {
            name: test.name.clone(),
            skipped: false,
            problem: None,
            runtime: Duration::ZERO,
            cases: Vec::new(),
        };
        if test.skip || !self.filter.matches_test(test) {
            result.skipped = true;
            return result;
        }
        let outcome = self.prepare_test(suite_dir, test);
        match (outcome, test.invalid) {
            (Err(problem), _) => result.problem = Some(problem),
            (Ok(ConstraintOutcome::Rejected(_)), true) => {}
            (Ok(ConstraintOutcome::Accepted(_)), true) => {
                result.problem = Some(Problem::Failed(format!(
                    "constraint {} was accepted, but the test sets invalid: true and expects it to be rejected",
                    test.constraint
                )));
            }
            (Ok(ConstraintOutcome::Rejected(message)), false) => {
                result.problem = Some(Problem::Failed(format!("invalid constraint: {message}")));
            }
            (Ok(ConstraintOutcome::Accepted(constraint)), false) => {
                result.cases = test
                    .cases
                    .iter()
                    .map(|case| self.run_case(suite_dir, test, case, &constraint))
                    .collect();
            }
        }
        result.runtime = started.elapsed();
        result
    }

    /// Checks the template and reads the constraint.
    fn prepare_test(
        &self,
        suite_dir: &Path,
        test: &TestDocument,
    ) -> Result<ConstraintOutcome, Problem> {
        if test
            .expansion
            .as_deref()
            .is_some_and(|expansion| !expansion.is_empty())
        {
            return Err(Problem::Broken(
                "expansion templates are not supported by meshlife verify (meshlife reviews pod templates itself)".into(),
            ));
        }
        let template_path = resolve(suite_dir, "template", &test.template)?;
        check_template(&template_path, self.limit)?;
        let constraint_path = resolve(suite_dir, "constraint", &test.constraint)?;
        self.read_constraint(&constraint_path)
    }

    fn read_constraint(&self, path: &Path) -> Result<ConstraintOutcome, Problem> {
        let display = path.display().to_string();
        let text = files::read_text(path, self.limit)
            .map_err(|error| Problem::Broken(format!("reading constraint {display}: {error}")))?;
        if let Some(Err(error)) = manifests::parse_documents(&display, &text)
            .into_iter()
            .find(Result::is_err)
        {
            return Err(Problem::Broken(format!("reading constraint {error}")));
        }
        // The text read above, not a second read that could find another file.
        let constraints = match constraint::parse_constraints_text(&display, &text) {
            Ok(constraints) => constraints,
            // Not a MeshLifecycle constraint at all: the suite pairs it with the wrong template.
            Err(error) if matches!(error.field.as_deref(), Some("kind" | "apiVersion") | None) => {
                return Err(Problem::Broken(error.to_string()));
            }
            Err(error) => return Ok(ConstraintOutcome::Rejected(error.to_string())),
        };
        if constraints.len() != 1 {
            return Err(Problem::Broken(format!(
                "constraint {display} defines {} {CONSTRAINT_KIND} constraints; a test uses exactly one",
                constraints.len()
            )));
        }
        let constraint = constraints.into_iter().next().expect("one constraint");
        match constraint.validate_parameters(self.engine) {
            Ok(()) => Ok(ConstraintOutcome::Accepted(Box::new(constraint))),
            Err(error) => Ok(ConstraintOutcome::Rejected(error.to_string())),
        }
    }

    fn run_case(
        &self,
        suite_dir: &Path,
        test: &TestDocument,
        case: &CaseDocument,
        constraint: &Constraint,
    ) -> CaseResult {
        let started = Instant::now();
        if case.skip || !self.filter.matches_case(&test.name, &case.name) {
            return CaseResult {
                name: case.name.clone(),
                skipped: true,
                problem: None,
                runtime: Duration::ZERO,
            };
        }
        let problem = self.check_case(suite_dir, case, constraint).err();
        CaseResult {
            name: case.name.clone(),
            skipped: false,
            problem,
            runtime: started.elapsed(),
        }
    }

    fn check_case(
        &self,
        suite_dir: &Path,
        case: &CaseDocument,
        constraint: &Constraint,
    ) -> Result<(), Problem> {
        let object_path = resolve(suite_dir, "object", &case.object)?;
        let (object, mut namespaces) = read_case_object(&object_path, self.limit)?;
        for inventory in &case.inventory {
            let inventory_path = resolve(suite_dir, "inventory", inventory)?;
            namespaces.extend(read_namespaces(&inventory_path, self.limit)?);
        }
        let namespace_object = if object.is_namespace() || object.namespace.is_empty() {
            None
        } else {
            namespaces.get(&object.namespace)
        };
        let violations = match constraint.matches(&object, namespace_object) {
            Ok(false) => Vec::new(),
            Ok(true) => {
                let input = constraint.input_for(&object, namespace_object, &[]);
                let mut violations = self.engine.evaluate(&input).map_err(|error| {
                    Problem::Broken(format!(
                        "the policy could not evaluate {}: {error:#}",
                        object.display_name()
                    ))
                })?;
                // A Rego `violation` set holds each {msg, details} once.
                violations.sort();
                violations.dedup();
                violations
            }
            Err(message) => {
                return Err(Problem::Failed(format!(
                    "{message} (give the Namespace in the case's inventory)"
                )));
            }
        };
        if case.assertions.is_empty() {
            if violations.is_empty() {
                return Ok(());
            }
            return Err(Problem::Failed(format!(
                "unexpected number of violations: got {} violations but want none (the case has no assertions){}",
                violations.len(),
                got_messages(&violations)
            )));
        }
        for assertion in &case.assertions {
            check_assertion(assertion, &violations)?;
        }
        Ok(())
    }
}

/// `suite_dir/relative`; absolute paths and empty fields are refused, as gator does.
fn resolve(suite_dir: &Path, field: &str, relative: &str) -> Result<PathBuf, Problem> {
    if relative.is_empty() {
        return Err(Problem::Broken(format!("missing {field}")));
    }
    if Path::new(relative).is_absolute() {
        return Err(Problem::Broken(format!(
            "{field} path {relative:?} is absolute; paths in a suite are relative to the suite file"
        )));
    }
    Ok(suite_dir.join(relative))
}

/// The template must be meshlife's: the module stands in for exactly that template's Rego.
fn check_template(path: &Path, limit: ReadLimit) -> Result<(), Problem> {
    let display = path.display().to_string();
    let text = files::read_text(path, limit)
        .map_err(|error| Problem::Broken(format!("reading template {display}: {error}")))?;
    let mut templates = Vec::new();
    for document in manifests::parse_documents(&display, &text) {
        let (_, _, value) =
            document.map_err(|error| Problem::Broken(format!("reading template {error}")))?;
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind == "ConstraintTemplate"
            && manifests::split_api_version(api_version).0 == TEMPLATE_GROUP
        {
            templates.push(value);
        }
    }
    let [template] = templates.as_slice() else {
        return Err(Problem::Broken(format!(
            "template {display} must hold exactly one ConstraintTemplate ({TEMPLATE_GROUP}/v1), found {}",
            templates.len()
        )));
    };
    let crd_kind = template
        .pointer("/spec/crd/spec/names/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    if crd_kind != CONSTRAINT_KIND {
        return Err(Problem::Broken(format!(
            "template {display} defines kind {crd_kind:?}; meshlife verify runs only the meshlife ConstraintTemplate \
             (kind {CONSTRAINT_KIND}), whose Rego the meshlife module stands in for"
        )));
    }
    let name = template
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name != TEMPLATE_NAME {
        return Err(Problem::Broken(format!(
            "template {display}: metadata.name is {name:?}; Gatekeeper requires the lowercase kind, {TEMPLATE_NAME:?}"
        )));
    }
    Ok(())
}

/// Every object of a file, or a Broken problem naming the file.
fn read_objects(path: &Path, what: &str, limit: ReadLimit) -> Result<Vec<ManifestObject>, Problem> {
    let display = path.display().to_string();
    let options = manifests::LoadOptions {
        limit,
        ..manifests::LoadOptions::default()
    };
    let loaded =
        manifests::load_with_progress(std::slice::from_ref(&display), &options, &|_| {}, &|| {});
    if let Some(error) = loaded.errors.first() {
        return Err(Problem::Broken(format!("reading {what} {error}")));
    }
    if loaded.objects.is_empty() {
        return Err(Problem::Broken(format!(
            "{what} {display} defines no objects"
        )));
    }
    Ok(loaded.objects)
}

/// The object under review, and the Namespaces that came with it in the same file.
fn read_case_object(
    path: &Path,
    limit: ReadLimit,
) -> Result<(ManifestObject, BTreeMap<String, Value>), Problem> {
    let objects = read_objects(path, "object", limit)?;
    if objects.len() == 1 {
        let object = objects.into_iter().next().expect("one object");
        return Ok((object, BTreeMap::new()));
    }
    let total = objects.len();
    let (namespaces, mut others): (Vec<ManifestObject>, Vec<ManifestObject>) =
        objects.into_iter().partition(ManifestObject::is_namespace);
    if others.len() != 1 {
        return Err(Problem::Broken(format!(
            "object {} defines {total} objects; a case reviews exactly one (Namespaces may accompany it)",
            path.display()
        )));
    }
    Ok((others.remove(0), namespace_map(namespaces)))
}

/// The Namespace objects of an inventory file, by name (other objects are not used).
fn read_namespaces(path: &Path, limit: ReadLimit) -> Result<BTreeMap<String, Value>, Problem> {
    Ok(namespace_map(
        read_objects(path, "inventory", limit)?
            .into_iter()
            .filter(ManifestObject::is_namespace)
            .collect(),
    ))
}

fn namespace_map(objects: Vec<ManifestObject>) -> BTreeMap<String, Value> {
    objects
        .into_iter()
        .filter(|object| !object.name.is_empty())
        .map(|object| (object.name, object.object.value()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshlife_policy::Severity;

    fn violation(msg: &str) -> Violation {
        Violation {
            msg: msg.into(),
            details: meshlife_policy::violation::Details {
                rule: "ML101".into(),
                name: "startup-no-hold".into(),
                severity: Severity::Warning,
                path: "spec".into(),
                fix: "fix".into(),
                mesh: None,
                container: None,
            },
        }
    }

    fn assertion(violations: Option<Value>, message: Option<&str>) -> AssertionDocument {
        AssertionDocument {
            violations,
            message: message.map(str::to_string),
        }
    }

    #[test]
    fn filters_follow_gator() {
        let test = |name: &str, cases: &[&str]| TestDocument {
            name: name.into(),
            cases: cases
                .iter()
                .map(|case| CaseDocument {
                    name: (*case).into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let either = Filter::new("quit").unwrap();
        assert!(either.matches_test(&test("batch", &["job-quitquitquit"])));
        assert!(!either.matches_test(&test("batch", &["job-no-exit"])));
        assert!(either.matches_case("batch", "job-quitquitquit"));
        assert!(!either.matches_case("batch", "job-no-exit"));
        assert!(either.matches_case("quit-tests", "anything"));

        let both = Filter::new("^batch$//no-exit").unwrap();
        assert!(both.matches_test(&test("batch", &[])));
        assert!(!both.matches_test(&test("batch-linkerd", &[])));
        assert!(both.matches_case("batch", "job-no-exit"));
        assert!(!both.matches_case("batch", "job-quitquitquit"));

        assert!(Filter::new("a//b//c").is_err());
        assert!(Filter::new("(").is_err());
        assert!(matches!(Filter::new("").unwrap(), Filter::All));
    }

    #[test]
    fn assertions_count_matching_messages() {
        let found = [
            violation("[ML101 startup-no-hold] a"),
            violation("[ML404 long-lived-streams] b"),
        ];
        assert!(check_assertion(&assertion(None, None), &found).is_ok());
        assert!(check_assertion(&assertion(Some("no".into()), Some("ML3")), &found).is_ok());
        assert!(check_assertion(&assertion(Some(1.into()), Some("ML101")), &found).is_ok());
        assert!(check_assertion(&assertion(Some(2.into()), None), &found).is_ok());
        let failure =
            check_assertion(&assertion(Some("yes".into()), Some("ML301")), &found).unwrap_err();
        assert!(
            matches!(&failure, Problem::Failed(message)
            if message.starts_with(r#"unexpected number of violations: got 0 violations containing "ML301" but want at least 1; got messages:"#)
                && message.contains("[ML404 long-lived-streams] b")),
            "{failure:?}"
        );
        let failure = check_assertion(&assertion(Some(0.into()), None), &found).unwrap_err();
        assert!(
            failure
                .message()
                .contains("got 2 violations but want exactly 0"),
            "{failure:?}"
        );
        assert!(check_assertion(&assertion(Some("no".into()), None), &[]).is_ok());
    }

    #[test]
    fn malformed_assertions_are_broken_not_failed() {
        assert!(
            check_assertion(&assertion(Some("maybe".into()), None), &[])
                .unwrap_err()
                .is_broken()
        );
        assert!(
            check_assertion(&assertion(Some((-1).into()), None), &[])
                .unwrap_err()
                .is_broken()
        );
        assert!(
            check_assertion(&assertion(Some(true.into()), None), &[])
                .unwrap_err()
                .is_broken()
        );
        assert!(
            check_assertion(&assertion(None, Some("(")), &[])
                .unwrap_err()
                .is_broken()
        );
    }

    #[test]
    fn paths_are_relative_to_the_suite() {
        assert_eq!(
            resolve(Path::new("suites"), "object", "../x.yaml").unwrap(),
            Path::new("suites/../x.yaml")
        );
        assert!(
            resolve(Path::new("suites"), "object", "/etc/x.yaml")
                .unwrap_err()
                .message()
                .contains("absolute")
        );
        assert_eq!(
            resolve(Path::new("suites"), "template", "").unwrap_err(),
            Problem::Broken("missing template".into())
        );
    }

    #[test]
    fn report_mimics_go_test() {
        let results = vec![SuiteResult {
            path: "suites/batch.yaml".into(),
            skipped: false,
            runtime: Duration::from_millis(12),
            tests: vec![
                TestResult {
                    name: "batch".into(),
                    skipped: false,
                    problem: None,
                    runtime: Duration::from_millis(10),
                    cases: vec![
                        CaseResult {
                            name: "fires".into(),
                            skipped: false,
                            problem: None,
                            runtime: Duration::from_millis(1),
                        },
                        CaseResult {
                            name: "near-miss".into(),
                            skipped: false,
                            problem: Some(Problem::Failed("why\nmore".into())),
                            runtime: Duration::from_millis(2),
                        },
                        CaseResult {
                            name: "later".into(),
                            skipped: true,
                            problem: None,
                            runtime: Duration::ZERO,
                        },
                    ],
                },
                TestResult {
                    name: "off".into(),
                    skipped: true,
                    problem: None,
                    runtime: Duration::ZERO,
                    cases: vec![],
                },
            ],
        }];
        assert_eq!(
            render(&results, false),
            "    --- FAIL: batch/near-miss\t(0.002s)\n        why\n        more\n--- FAIL: batch\t(0.010s)\nFAIL\tsuites/batch.yaml\t0.012s\nFAIL\n"
        );
        let verbose = render(&results, true);
        assert!(
            verbose.starts_with(
                "=== RUN   batch\n    === RUN   batch/fires\n    --- PASS: batch/fires\t(0.001s)\n"
            ),
            "{verbose}"
        );
        assert!(verbose.contains("    === SKIP  batch/later\n"), "{verbose}");
        assert!(verbose.contains("=== SKIP  off\n"), "{verbose}");
    }
}
