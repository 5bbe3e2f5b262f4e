//! The typed view of a Gatekeeper input: the admission request, the object under review and the
//! pod spec wherever it lives. Only the fields the rules read are typed; everything else is
//! skipped unparsed. A field with the wrong JSON type becomes one `InputError` naming its path.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::params::Parameters;

/// Deeper nesting than this is refused before parsing: the wasm stack is 32 KiB, and no
/// Kubernetes object nests anywhere near this deep.
pub const MAX_DEPTH: usize = 64;

/// Why the input cannot be evaluated: becomes the single `ML000` violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// Where, e.g. `spec.template.spec.terminationGracePeriodSeconds` or `parameters.istio`.
    pub path: String,
    /// What is wrong, e.g. `expected an integer, got string "30"`.
    pub problem: String,
}

impl InputError {
    pub fn new(path: impl Into<String>, problem: impl Into<String>) -> Self {
        InputError { path: path.into(), problem: problem.into() }
    }
}

/// The top-level input, `{"review": ..., "parameters": ...}`.
#[derive(Deserialize)]
pub struct InputDoc<'a> {
    #[serde(borrow, default)]
    pub review: Option<&'a RawValue>,
    #[serde(default)]
    pub parameters: Option<Parameters>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewDoc<'a> {
    #[serde(default)]
    pub operation: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub kind: Option<GroupVersionKind>,
    #[serde(borrow, default)]
    pub object: Option<&'a RawValue>,
    #[serde(default)]
    pub namespace_object: Option<NamespaceDoc>,
}

#[derive(Deserialize, Default)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub kind: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct NamespaceDoc {
    #[serde(default)]
    pub metadata: Option<ObjectMeta>,
}

/// The object under review: kind first, the rest parsed only for reviewed kinds.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectDoc<'a> {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(borrow, default)]
    pub metadata: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub spec: Option<&'a RawValue>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub owner_references: Option<Vec<OwnerReference>>,
}

impl ObjectMeta {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(String::as_str)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref()?.get(key).map(String::as_str)
    }
}

#[derive(Deserialize, Debug, Clone)]
pub struct OwnerReference {
    #[serde(default)]
    pub kind: Option<String>,
}

/// `spec` of the controllers whose pod template sits at `spec.template` (and CronJob's
/// `spec.jobTemplate`). One struct serves them all: the fields do not clash between kinds.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ControllerSpec<'a> {
    #[serde(default)]
    pub replicas: Option<i64>,
    #[serde(default)]
    pub strategy: Option<Strategy>,
    #[serde(default)]
    pub active_deadline_seconds: Option<i64>,
    #[serde(default)]
    pub workload_ref: Option<IgnoredAny>,
    #[serde(borrow, default)]
    pub template: Option<PodTemplate<'a>>,
    #[serde(borrow, default)]
    pub job_template: Option<JobTemplate<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobTemplate<'a> {
    #[serde(borrow, default)]
    pub spec: Option<JobSpec<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec<'a> {
    #[serde(default)]
    pub active_deadline_seconds: Option<i64>,
    #[serde(borrow, default)]
    pub template: Option<PodTemplate<'a>>,
}

#[derive(Deserialize)]
pub struct PodTemplate<'a> {
    #[serde(default)]
    pub metadata: Option<ObjectMeta>,
    #[serde(borrow, default)]
    pub spec: Option<&'a RawValue>,
}

/// Deployment `strategy` and Argo Rollout `strategy` share this shape.
#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub rolling_update: Option<RollingUpdate>,
    #[serde(default)]
    pub canary: Option<RollingUpdate>,
    #[serde(default)]
    pub blue_green: Option<IgnoredAny>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdate {
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default)]
    pub max_surge: Option<IntOrString>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default)]
    pub containers: Option<Vec<Container>>,
    #[serde(default)]
    pub init_containers: Option<Vec<Container>>,
    #[serde(default)]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(default)]
    pub active_deadline_seconds: Option<i64>,
    #[serde(default)]
    pub restart_policy: Option<String>,
    #[serde(default)]
    pub host_network: Option<bool>,
    #[serde(default)]
    pub security_context: Option<SecurityContext>,
}

impl PodSpec {
    pub fn containers(&self) -> &[Container] {
        self.containers.as_deref().unwrap_or(&[])
    }

    pub fn init_containers(&self) -> &[Container] {
        self.init_containers.as_deref().unwrap_or(&[])
    }

    /// Kubernetes' default when the field is absent.
    pub fn grace_period_seconds(&self) -> i64 {
        self.termination_grace_period_seconds.unwrap_or(30)
    }
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub args: Option<Vec<String>>,
    #[serde(default)]
    pub env: Option<Vec<EnvVar>>,
    #[serde(default)]
    pub ports: Option<Vec<ContainerPort>>,
    #[serde(default)]
    pub lifecycle: Option<Lifecycle>,
    #[serde(default)]
    pub readiness_probe: Option<IgnoredAny>,
    #[serde(default)]
    pub startup_probe: Option<IgnoredAny>,
    #[serde(default)]
    pub restart_policy: Option<String>,
    #[serde(default)]
    pub security_context: Option<SecurityContext>,
}

impl Container {
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    pub fn command(&self) -> &[String] {
        self.command.as_deref().unwrap_or(&[])
    }

    pub fn args(&self) -> &[String] {
        self.args.as_deref().unwrap_or(&[])
    }

    pub fn ports(&self) -> &[ContainerPort] {
        self.ports.as_deref().unwrap_or(&[])
    }

    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env
            .as_deref()?
            .iter()
            .find(|var| var.name.as_deref() == Some(name))
            .and_then(|var| var.value.as_deref())
    }

    pub fn post_start(&self) -> Option<&Handler> {
        self.lifecycle.as_ref()?.post_start.as_ref()
    }

    pub fn pre_stop(&self) -> Option<&Handler> {
        self.lifecycle.as_ref()?.pre_stop.as_ref()
    }

    pub fn is_restartable_init(&self) -> bool {
        self.restart_policy.as_deref() == Some("Always")
    }

    pub fn run_as_user(&self) -> Option<i64> {
        self.security_context.as_ref()?.run_as_user
    }

    /// Every string of the container that could hold a shutdown call: command, args, and the
    /// lifecycle hooks' commands and HTTP targets.
    pub fn script_strings(&self) -> impl Iterator<Item = &str> {
        let hooks = self
            .lifecycle
            .iter()
            .flat_map(|lifecycle| [lifecycle.post_start.as_ref(), lifecycle.pre_stop.as_ref()])
            .flatten();
        self.command()
            .iter()
            .chain(self.args())
            .map(String::as_str)
            .chain(hooks.flat_map(Handler::strings))
    }
}

#[derive(Deserialize, Default, Debug, Clone)]
pub struct EnvVar {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub container_port: Option<IntOrString>,
    #[serde(default)]
    pub app_protocol: Option<String>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    #[serde(default)]
    pub post_start: Option<Handler>,
    #[serde(default)]
    pub pre_stop: Option<Handler>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Handler {
    #[serde(default)]
    pub exec: Option<ExecAction>,
    #[serde(default)]
    pub sleep: Option<SleepAction>,
    #[serde(default)]
    pub http_get: Option<HttpGetAction>,
}

impl Handler {
    pub fn exec_command(&self) -> &[String] {
        self.exec.as_ref().and_then(|exec| exec.command.as_deref()).unwrap_or(&[])
    }

    fn strings(&self) -> impl Iterator<Item = &str> {
        let http = self.http_get.iter().flat_map(|get| get.path.as_deref());
        self.exec_command().iter().map(String::as_str).chain(http)
    }
}

#[derive(Deserialize, Default, Debug, Clone)]
pub struct ExecAction {
    #[serde(default)]
    pub command: Option<Vec<String>>,
}

#[derive(Deserialize, Default, Debug, Clone)]
pub struct SleepAction {
    #[serde(default)]
    pub seconds: Option<i64>,
}

#[derive(Deserialize, Default, Debug, Clone)]
pub struct HttpGetAction {
    #[serde(default)]
    pub path: Option<String>,
}

#[derive(Deserialize, Default, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    #[serde(default)]
    pub run_as_user: Option<i64>,
}

/// Kubernetes' `IntOrString` (`maxUnavailable: 1` or `"25%"`, named ports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntOrString {
    Int(i64),
    Str(String),
}

impl<'de> Deserialize<'de> for IntOrString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntOrStringVisitor;

        impl Visitor<'_> for IntOrStringVisitor {
            type Value = IntOrString;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("an integer or a string")
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<IntOrString, E> {
                Ok(IntOrString::Int(value))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<IntOrString, E> {
                i64::try_from(value)
                    .map(IntOrString::Int)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(value), &self))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<IntOrString, E> {
                Ok(IntOrString::Str(value.to_owned()))
            }
        }

        deserializer.deserialize_any(IntOrStringVisitor)
    }
}

/// Parses `json` as `T`, turning a type error into an `InputError` whose path starts with
/// `prefix` (the location of `json` inside the reviewed object).
pub fn parse_at<'a, T: Deserialize<'a>>(json: &'a str, prefix: &str) -> Result<T, InputError> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = join_path(prefix, error.path());
        InputError::new(path, describe_serde_error(&error.into_inner()))
    })
}

fn join_path(prefix: &str, path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::from(prefix);
    for segment in path {
        match segment {
            Segment::Seq { index } => {
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
            Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    out
}

/// serde's wording, minus the byte position and with Kubernetes' names for JSON types.
fn describe_serde_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let text = match text.rfind(" at line ") {
        Some(position) => &text[..position],
        None => text.as_str(),
    };
    let mut text = text
        .replace("invalid type: ", "got ")
        .replace("expected i64", "expected an integer")
        .replace("expected u32", "expected a non-negative integer")
        .replace("expected a sequence", "expected a list")
        .replace("expected a map", "expected an object")
        .replace("got map", "got an object")
        .replace("got sequence", "got a list");
    if let Some(position) = text.find("expected struct ") {
        text.replace_range(position.., "expected an object");
    }
    // "got string \"30\", expected an integer" reads better with the expectation first.
    if let Some((got, expected)) = text.split_once(", expected ") {
        if got.starts_with("got ") {
            return format!("expected {expected}, {got}");
        }
    }
    text
}

/// Refuses input nested deeper than `MAX_DEPTH` without recursing: brackets are counted
/// outside strings.
pub fn check_depth(json: &[u8]) -> Result<(), InputError> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in json {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(InputError::new(
                        "",
                        format!("input nests deeper than {MAX_DEPTH} levels"),
                    ));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// True when the raw JSON value is an object (its first significant byte is `{`).
pub fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

/// The JSON type of a raw value, for error messages.
pub fn json_type_name(raw: &RawValue) -> &'static str {
    match raw.get().trim_start().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "a list",
        Some(b'"') => "a string",
        Some(b't') | Some(b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}
