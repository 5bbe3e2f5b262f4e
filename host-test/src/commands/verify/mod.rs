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

use std::path::PathBuf;

use clap::Args;
use filter::Filter;
use outcome::{SuiteResult, render};
use runner::Runner;
use suite::find_suites;

use crate::inputs::files::ReadLimit;
use crate::module::engine::Engine;
use crate::terminal::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, print_error};

mod assertions;
mod filter;
mod outcome;
mod runner;
mod suite;
#[cfg(test)]
mod tests;

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
