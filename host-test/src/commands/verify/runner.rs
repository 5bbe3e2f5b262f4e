//! Running a suite's tests and cases: the constraint read and validated, each object judged
//! under it by the module.

use std::path::Path;
use std::time::{Duration, Instant};

use super::assertions::{check_assertion, got_messages};
use super::filter::Filter;
use super::outcome::{CaseResult, Problem, SuiteResult, TestResult};
use super::suite::{
    CaseDocument, Suite, TestDocument, check_template, read_case_object, read_namespaces, resolve,
};
use crate::constraints::constraint;
use crate::constraints::constraint::{CONSTRAINT_KIND, Constraint};
use crate::inputs::files::ReadLimit;
use crate::inputs::{files, manifests};
use crate::module::engine::Engine;

pub(super) struct Runner<'a> {
    pub(super) engine: &'a Engine,
    pub(super) filter: &'a Filter,
    /// The cap on every file a suite names.
    pub(super) limit: ReadLimit,
}

/// A usable constraint, or why the test cannot use it.
pub(super) enum ConstraintOutcome {
    Accepted(Box<Constraint>),
    /// Gatekeeper would reject it (the `invalid: true` case).
    Rejected(String),
}

impl Runner<'_> {
    pub(super) fn run_suite(&self, suite: &Suite) -> SuiteResult {
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

    pub(super) fn run_test(&self, suite_dir: &Path, test: &TestDocument) -> TestResult {
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
    pub(super) fn prepare_test(
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

    pub(super) fn read_constraint(&self, path: &Path) -> Result<ConstraintOutcome, Problem> {
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

    pub(super) fn run_case(
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

    pub(super) fn check_case(
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
        let namespace_object = if object.is_namespace() || object.identity.namespace.is_empty() {
            None
        } else {
            namespaces.get(&object.identity.namespace)
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
