//! The `--run` filter, with gator's semantics.

use regex::Regex;

use super::suite::TestDocument;

#[derive(Debug)]
pub(super) enum Filter {
    All,
    /// One regex: a test runs when its name or one of its cases matches; a case runs when its
    /// name or its test's name matches.
    Either(Regex),
    /// `test//case`: cases matching the second regex in tests matching the first.
    Both(Regex, Regex),
}

impl Filter {
    pub(super) fn new(text: &str) -> Result<Filter, String> {
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

    pub(super) fn matches_test(&self, test: &TestDocument) -> bool {
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

    pub(super) fn matches_case(&self, test: &str, case: &str) -> bool {
        match self {
            Filter::All => true,
            Filter::Either(regex) => regex.is_match(case) || regex.is_match(test),
            Filter::Both(test_regex, case_regex) => {
                test_regex.is_match(test) && case_regex.is_match(case)
            }
        }
    }
}
