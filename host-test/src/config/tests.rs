use std::ffi::OsString;

use clap::CommandFactory;

use super::*;
use crate::cli::Cli;

fn check_keys() -> Vec<Key> {
    keys_of(Cli::command().find_subcommand("check").unwrap())
}

#[test]
fn the_facts_keys_are_the_fact_flags_in_camel_case() {
    let keys = check_keys();
    let paths: Vec<&str> = keys.iter().map(|key| key.path.as_str()).collect();
    for expected in [
        "constraints",
        "failOn",
        "output",
        "exclude",
        "rules",
        "excludeRules",
        "exemptImages",
        "facts.kubernetes",
        "facts.istio",
        "facts.istioNativeSidecars",
        "facts.istioDrainDuration",
        "facts.linkerdAwait",
    ] {
        assert!(
            paths.contains(&expected),
            "{expected} missing from {paths:?}"
        );
    }
    assert!(!paths.contains(&"facts.rules"), "{paths:?}");
}

#[test]
fn camel_case_and_unknown_key_suggestions() {
    let keys = check_keys();
    let message = unknown_key("c.yaml:3", "failon", "", &keys);
    assert!(message.contains("did you mean `failOn`"), "{message}");
    let message = unknown_key("c.yaml:5", "facts.istoi", "facts.", &keys);
    assert!(message.contains("did you mean `facts.istio`"), "{message}");
    let message = unknown_key("c.yaml:5", "wholly-unrelated-thing", "", &keys);
    assert!(message.contains("the keys: "), "{message}");
}

#[test]
fn values_become_the_flags_they_stand_for() {
    let keys = check_keys();
    let key = |path: &str| keys.iter().find(|key| key.path == path).unwrap().clone();
    let folder = std::path::Path::new("/repo");
    let yaml = |text: &str| serde_yaml_ng::from_str::<Value>(text).unwrap();
    let flags = |path: &str, value: &str| -> Result<Vec<OsString>, String> {
        key(path).flags(&yaml(value), folder)
    };
    assert_eq!(
        flags("failOn", "error").unwrap(),
        vec![OsString::from("--fail-on=error")]
    );
    assert_eq!(
        flags("rules", "[ML301, ML401]").unwrap(),
        vec![OsString::from("--rules=ML301,ML401")]
    );
    assert_eq!(
        flags("exclude", "[a/**, b]").unwrap(),
        vec![
            OsString::from("--exclude=a/**"),
            OsString::from("--exclude=b")
        ]
    );
    assert_eq!(
        flags("constraints", "[cluster.yaml, /abs.yaml]").unwrap(),
        vec![
            OsString::from("--constraint=/repo/cluster.yaml"),
            OsString::from("--constraint=/abs.yaml")
        ]
    );
    assert_eq!(
        flags("requireMesh", "true").unwrap(),
        vec![OsString::from("--require-mesh")]
    );
    assert!(flags("requireMesh", "false").unwrap().is_empty());
    assert_eq!(
        flags("facts.istioNativeSidecars", "false").unwrap(),
        vec![OsString::from("--istio-native-sidecars=false")]
    );
    let float = flags("facts.kubernetes", "1.30").unwrap_err();
    assert!(float.contains("in quotes"), "{float}");
    assert_eq!(
        flags("facts.kubernetes", "\"1.30\"").unwrap(),
        vec![OsString::from("--kubernetes=1.30")]
    );
    assert!(
        flags("failOn", "[error]")
            .unwrap_err()
            .contains("not a list")
    );
    assert!(
        flags("strict", "yes please")
            .unwrap_err()
            .contains("true or false")
    );
}
