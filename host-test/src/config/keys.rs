//! The config's keys: each is a flag of `meshlife check`. The facts' and the rules' keys are
//! the fact flags' own names in camelCase (`--istio-native-sidecars` is
//! `facts.istioNativeSidecars`, `--exclude-rules` is `excludeRules`), so a fact flag added to
//! the CLI is a key at once; the other keys are listed here.

use std::ffi::OsString;
use std::path::Path;

use clap::{ArgAction, Args, Command};
use serde_yaml_ng::Value;

use crate::constraints::facts::ClusterFactArgs;

/// `check`'s flags that are keys at the top level, besides the rules' own: (key, argument id,
/// whether it describes the cluster, whether only `check` has it).
const TOP_LEVEL: [(&str, &str, bool, bool); 9] = [
    ("constraints", "constraints", true, false),
    ("exclude", "exclude", false, true),
    ("failOn", "fail_on", false, true),
    ("output", "format", false, true),
    ("namespace", "namespace", false, false),
    ("requireMesh", "require_mesh", false, true),
    ("strict", "strict", false, true),
    ("allowEmpty", "allow_empty", false, true),
    (
        "includeControlPlanes",
        "include_control_planes",
        false,
        false,
    ),
];

/// The mapping that holds the cluster's facts.
const FACTS: &str = "facts";

/// The command-line arguments that describe the cluster besides the facts and `constraints`.
const CLUSTER_SOURCES: [&str; 3] = ["from_cluster", "kubeconfig", "context"];

/// One key of the config.
#[derive(Clone, Debug)]
pub struct Key {
    /// As written in the file: `failOn`, `facts.istio`.
    pub path: String,
    /// The clap id of its flag.
    pub arg: String,
    /// Its flag without the dashes.
    pub long: String,
    /// Part of the cluster's description (`constraints`, `facts.*`).
    pub cluster: bool,
    /// A flag of `check` alone (`output`, `failOn`, ...); other commands leave it out.
    pub check_only: bool,
    shape: Shape,
    /// Its values are files, relative to the config's folder.
    paths: bool,
    /// Its value is a version, which YAML reads as a number unless quoted.
    version: bool,
    /// Its flag's help, for the schema.
    help: String,
    /// The values its flag takes, when it names them.
    possible: Vec<String>,
    /// Its flag takes a number.
    number: bool,
    /// Its flag takes true or false.
    boolean: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// A flag without a value: true gives it, false leaves it out.
    Switch,
    /// One value.
    One,
    /// Values, joined with commas when the flag takes them so, else one flag each.
    Many { comma_separated: bool },
}

/// Every key, from `check`'s definition (the command that has them all).
pub fn keys_of(check: &Command) -> Vec<Key> {
    let fact_args = ClusterFactArgs::augment_args(Command::new("facts"));
    let mut keys = Vec::new();
    for (path, id, cluster, check_only) in TOP_LEVEL {
        if let Some(arg) = check.get_arguments().find(|arg| arg.get_id() == id) {
            keys.push(Key::new(path.to_string(), arg, cluster, check_only));
        }
    }
    for fact in fact_args.get_arguments() {
        let id = fact.get_id().as_str();
        let Some(arg) = check.get_arguments().find(|arg| arg.get_id() == id) else {
            continue;
        };
        let rule_setting = arg.get_help_heading() == Some("Rules");
        let path = if rule_setting {
            camel_case(id)
        } else {
            format!("{FACTS}.{}", camel_case(id))
        };
        keys.push(Key::new(path, arg, !rule_setting, false));
    }
    keys
}

/// The arguments of `command` that describe the cluster: a command line giving any of them
/// leaves the config's `constraints` and `facts` out.
pub fn cluster_args(command: &Command) -> Vec<String> {
    let fact_args = ClusterFactArgs::augment_args(Command::new("facts"));
    let facts = fact_args
        .get_arguments()
        .filter(|arg| arg.get_help_heading() != Some("Rules"))
        .map(|arg| arg.get_id().to_string());
    std::iter::once("constraints".to_string())
        .chain(facts)
        .chain(CLUSTER_SOURCES.iter().map(ToString::to_string))
        .filter(|id| command.get_arguments().any(|arg| arg.get_id() == id))
        .collect()
}

/// Whether `path` is a mapping of keys rather than a key.
pub fn is_group(path: &str) -> bool {
    path == FACTS
}

/// The mapping under a level (`prefix` ends in a dot, or is empty for the top), if any.
pub fn group_under(prefix: &str) -> Option<&'static str> {
    prefix.is_empty().then_some(FACTS)
}

/// `istio_native_sidecars` as `istioNativeSidecars`.
pub(crate) fn camel_case(id: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for character in id.chars() {
        if character == '_' {
            upper = true;
        } else if upper {
            out.extend(character.to_uppercase());
            upper = false;
        } else {
            out.push(character);
        }
    }
    out
}

impl Key {
    fn new(path: String, arg: &clap::Arg, cluster: bool, check_only: bool) -> Key {
        let shape = match arg.get_action() {
            ArgAction::SetTrue => Shape::Switch,
            ArgAction::Append => Shape::Many {
                comma_separated: arg.get_value_delimiter().is_some(),
            },
            _ => Shape::One,
        };
        let value_name = arg
            .get_value_names()
            .and_then(|names| names.first())
            .map(|name| name.as_str().to_string())
            .unwrap_or_default();
        Key {
            path,
            arg: arg.get_id().to_string(),
            long: arg.get_long().unwrap_or_default().to_string(),
            cluster,
            check_only,
            shape,
            paths: value_name == "FILE",
            version: value_name == "VERSION",
            help: arg.get_help().map(ToString::to_string).unwrap_or_default(),
            // Rule names are offered to completions but any case is taken: no enum for them.
            possible: if arg.is_hide_possible_values_set() {
                Vec::new()
            } else {
                arg.get_possible_values()
            }
            .iter()
            .filter(|value| !value.is_hide_set())
            .map(|value| value.get_name().to_string())
            .collect(),
            number: value_name == "N" || value_name == "UID",
            boolean: value_name == "true|false",
        }
    }

    /// Whether `command` (named `name`) takes this key.
    pub fn applies_to(&self, command: &Command, name: &str) -> bool {
        (!self.check_only || name == "check")
            && command
                .get_arguments()
                .any(|arg| arg.get_id() == self.arg.as_str())
    }

    /// The flags `value` stands for; files relative to `folder`. Values are checked by the
    /// flag's own parser afterwards; this only checks the shape.
    pub fn flags(&self, value: &Value, folder: &Path) -> Result<Vec<OsString>, String> {
        let flag = format!("--{}", self.long);
        match self.shape {
            Shape::Switch => match value {
                Value::Bool(true) => Ok(vec![flag.into()]),
                Value::Bool(false) => Ok(Vec::new()),
                _ => Err("true or false".into()),
            },
            Shape::One => {
                let text = self.scalar(value)?;
                Ok(vec![format!("{flag}={text}").into()])
            }
            Shape::Many { comma_separated } => {
                let values: Vec<String> = match value {
                    Value::Sequence(items) => items
                        .iter()
                        .map(|item| self.scalar(item))
                        .collect::<Result<_, _>>()?,
                    other => vec![self.scalar(other)?],
                };
                let values: Vec<String> = values
                    .into_iter()
                    .map(|text| {
                        if self.paths && Path::new(&text).is_relative() {
                            folder.join(&text).display().to_string()
                        } else {
                            text
                        }
                    })
                    .collect();
                if values.is_empty() {
                    Ok(Vec::new())
                } else if comma_separated {
                    Ok(vec![format!("{flag}={}", values.join(",")).into()])
                } else {
                    Ok(values
                        .iter()
                        .map(|text| format!("{flag}={text}").into())
                        .collect())
                }
            }
        }
    }

    /// One value as its flag would take it.
    fn scalar(&self, value: &Value) -> Result<String, String> {
        match value {
            Value::String(text) => Ok(text.clone()),
            Value::Bool(flag) => Ok(flag.to_string()),
            Value::Number(number) if self.version && number.is_f64() => Err(format!(
                "write the version in quotes (\"{number}\" is what YAML read): YAML reads \
                 1.30 as the number 1.3"
            )),
            Value::Number(number) => Ok(number.to_string()),
            Value::Sequence(_) => Err("one value, not a list".into()),
            Value::Mapping(_) => Err("a value, not a mapping".into()),
            _ => Err("a value (text, number, true or false)".into()),
        }
    }
}

/// The JSON Schema of the config, for editors (docs/config.schema.json is this, written out):
/// each key's type from its flag's shape, its description from the flag's help.
pub fn schema(keys: &[Key]) -> serde_json::Value {
    use serde_json::{Map, json};
    let property = |key: &Key| {
        let value = if !key.possible.is_empty() {
            json!({ "enum": key.possible })
        } else if key.number {
            json!({ "type": "integer", "minimum": 0 })
        } else {
            json!({ "type": "string" })
        };
        let mut property = match key.shape {
            Shape::Switch => json!({ "type": "boolean" }),
            Shape::One if key.boolean => json!({ "type": "boolean" }),
            Shape::One => value,
            Shape::Many { .. } => json!({
                "oneOf": [value.clone(), { "type": "array", "items": value }]
            }),
        };
        if let Some(fields) = property.as_object_mut() {
            let mut description = key.help.clone();
            if !description.ends_with('.') {
                description.push('.');
            }
            fields.insert("description".into(), json!(description));
        }
        property
    };
    let mut top = Map::new();
    let mut facts = Map::new();
    for key in keys {
        match key.path.strip_prefix(&format!("{FACTS}.")) {
            Some(fact) => facts.insert(fact.to_string(), property(key)),
            None => top.insert(key.path.clone(), property(key)),
        };
    }
    top.insert(
        FACTS.into(),
        json!({
            "type": "object",
            "description": "The cluster's facts, as the fact flags give them; instead of `constraints`.",
            "additionalProperties": false,
            "properties": facts,
        }),
    );
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://raw.githubusercontent.com/meshlife/meshlife/main/docs/config.schema.json",
        "title": "meshlife repository config (.meshlife.yaml)",
        "description": "Each key stands for the flag of `meshlife check` of the same name; a flag on the command line wins over its key. docs/config.md.",
        "type": "object",
        "additionalProperties": false,
        "not": { "required": ["constraints", "facts"] },
        "properties": top,
    })
}
