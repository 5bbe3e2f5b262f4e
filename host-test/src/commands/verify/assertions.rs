//! A case's assertions (`violations`, `message`) checked against the module's violations.

use std::fmt::Write;

use meshlife_policy::Violation;
use regex::Regex;
use serde_json::Value;

use super::outcome::Problem;
use super::suite::AssertionDocument;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expected {
    Yes,
    No,
    Exactly(u64),
}

impl Expected {
    pub(super) fn parse(value: Option<&Value>) -> Result<Expected, String> {
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
pub(super) fn check_assertion(
    assertion: &AssertionDocument,
    violations: &[Violation],
) -> Result<(), Problem> {
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
pub(super) fn got_messages(violations: &[Violation]) -> String {
    if violations.is_empty() {
        return "; got no violations".into();
    }
    let mut text = String::from("; got messages:");
    for violation in violations {
        let _ = write!(text, "\n  {:?}", violation.msg);
    }
    text
}
