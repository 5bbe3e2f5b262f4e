//! The typed view of a Gatekeeper input: the admission request, the object under review and the
//! pod spec wherever it lives. Only the fields the rules read are typed, and strings borrow from
//! the input. Two readers fill it: `one_pass` for valid input, and
//! `Fields` over the sparse tree of `node`, where a field with the wrong JSON type becomes one
//! `InputError` naming its path.

use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;

use crate::node::Node;

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
        InputError {
            path: path.into(),
            problem: problem.into(),
        }
    }
}

pub type Parsed<T> = Result<T, InputError>;

/// A string of the input: borrowed from it, owned only when the JSON string held escapes.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Text<'a>(pub Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Text<'_> {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Text<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), formatter)
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str(self)
    }
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(text: &'a str) -> Self {
        Text(Cow::Borrowed(text))
    }
}

/// Where a field sits, built only when an error needs it: each level borrows its parent.
#[derive(Clone, Copy)]
pub enum Path<'p> {
    Root(&'p str),
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl Path<'_> {
    /// `spec.containers[0].ports`; keys that hold dots or slashes (annotation and label names)
    /// go in brackets, `annotations["proxy.istio.io/config"]`, as in the rules' paths.
    pub fn render(&self) -> String {
        match self {
            Path::Root(root) => root.to_string(),
            Path::Key(parent, key) => {
                let parent = parent.render();
                if key.contains(['.', '/']) {
                    format!("{parent}[\"{key}\"]")
                } else if parent.is_empty() {
                    key.to_string()
                } else {
                    format!("{parent}.{key}")
                }
            }
            Path::Index(parent, index) => format!("{}[{index}]", parent.render()),
        }
    }
}

fn type_error(path: Path, expected: &str, node: &Node) -> InputError {
    InputError::new(
        path.render(),
        format!("expected {expected}, got {}", node.describe()),
    )
}

/// Reads the fields of one JSON object; paths are rendered only for errors. `null` reads as
/// absent, as the API server treats it.
pub struct Fields<'n, 'p> {
    entries: &'n [(Cow<'n, str>, Node<'n>)],
    path: Path<'p>,
}

impl<'n, 'p> Fields<'n, 'p> {
    /// `None` for null; an error for anything but an object.
    pub fn of(node: &'n Node<'n>, path: Path<'p>) -> Parsed<Option<Fields<'n, 'p>>> {
        match node {
            Node::Null => Ok(None),
            Node::Map(entries) => Ok(Some(Fields { entries, path })),
            other => Err(type_error(path, "an object", other)),
        }
    }

    pub fn child_path(&self, key: &str) -> String {
        Path::Key(&self.path, key).render()
    }

    pub fn get(&self, key: &str) -> Option<&'n Node<'n>> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .filter(|v| **v != Node::Null)
    }

    pub fn keys(&self) -> impl Iterator<Item = &'n str> {
        self.entries.iter().map(|(k, _)| k.as_ref())
    }

    pub fn string(&self, key: &str) -> Parsed<Option<Text<'n>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Node::Str(text)) => Ok(Some(Text(text.clone()))),
            Some(other) => Err(type_error(Path::Key(&self.path, key), "a string", other)),
        }
    }

    pub fn int(&self, key: &str) -> Parsed<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(Node::Int(number)) => Ok(Some(*number)),
            Some(other) => Err(type_error(Path::Key(&self.path, key), "an integer", other)),
        }
    }

    pub fn boolean(&self, key: &str) -> Parsed<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Node::Bool(flag)) => Ok(Some(*flag)),
            Some(other) => Err(type_error(Path::Key(&self.path, key), "a boolean", other)),
        }
    }

    pub fn present(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn object<T>(
        &self,
        key: &str,
        read: impl FnOnce(&Fields<'n, '_>) -> Parsed<T>,
    ) -> Parsed<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(node) => match Fields::of(node, Path::Key(&self.path, key))? {
                Some(fields) => read(&fields).map(Some),
                None => Ok(None),
            },
        }
    }

    pub fn list<T>(
        &self,
        key: &str,
        mut read: impl FnMut(&'n Node<'n>, Path<'_>) -> Parsed<T>,
    ) -> Parsed<Option<Vec<T>>> {
        let list_path = Path::Key(&self.path, key);
        match self.get(key) {
            None => Ok(None),
            Some(Node::List(items)) => items
                .iter()
                .enumerate()
                .map(|(index, item)| read(item, Path::Index(&list_path, index)))
                .collect::<Parsed<Vec<T>>>()
                .map(Some),
            Some(other) => Err(type_error(list_path, "a list", other)),
        }
    }

    pub fn objects<T>(
        &self,
        key: &str,
        read: impl Fn(&Fields<'n, '_>) -> Parsed<T>,
    ) -> Parsed<Option<Vec<T>>>
    where
        T: Default,
    {
        self.list(key, |item, path| match Fields::of(item, path)? {
            Some(fields) => read(&fields),
            None => Ok(T::default()),
        })
    }

    pub fn strings(&self, key: &str) -> Parsed<Option<Vec<Text<'n>>>> {
        self.list(key, |item, path| match item {
            Node::Str(text) => Ok(Text(text.clone())),
            other => Err(type_error(path, "a string", other)),
        })
    }

    /// Labels and annotations: every value must be a string.
    pub fn string_map(&self, key: &str) -> Parsed<Option<BTreeMap<Text<'n>, Text<'n>>>> {
        self.object(key, |fields| {
            fields
                .entries
                .iter()
                .filter(|(_, value)| *value != Node::Null)
                .map(|(name, value)| match value {
                    Node::Str(text) => Ok((Text(name.clone()), Text(text.clone()))),
                    other => Err(type_error(Path::Key(&fields.path, name), "a string", other)),
                })
                .collect()
        })
    }

    pub fn int_or_string(&self, key: &str) -> Parsed<Option<IntOrString<'n>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Node::Int(number)) => Ok(Some(IntOrString::Int(*number))),
            Some(Node::Str(text)) => Ok(Some(IntOrString::Str(Text(text.clone())))),
            Some(other) => Err(type_error(
                Path::Key(&self.path, key),
                "an integer or a string",
                other,
            )),
        }
    }
}

#[derive(Default, Debug, Clone)]
pub struct ObjectMeta<'a> {
    pub name: Option<Text<'a>>,
    pub namespace: Option<Text<'a>>,
    pub labels: Option<BTreeMap<Text<'a>, Text<'a>>>,
    pub annotations: Option<BTreeMap<Text<'a>, Text<'a>>>,
    pub owner_references: Option<Vec<OwnerReference<'a>>>,
}

impl<'a> ObjectMeta<'a> {
    pub fn read(fields: &Fields<'a, '_>) -> Parsed<ObjectMeta<'a>> {
        Ok(ObjectMeta {
            name: fields.string("name")?,
            namespace: fields.string("namespace")?,
            labels: fields.string_map("labels")?,
            annotations: fields.string_map("annotations")?,
            owner_references: fields.objects("ownerReferences", |owner| {
                Ok(OwnerReference {
                    kind: owner.string("kind")?,
                })
            })?,
        })
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(Text::as_str)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref()?.get(key).map(Text::as_str)
    }
}

#[derive(Default, Debug, Clone)]
pub struct OwnerReference<'a> {
    pub kind: Option<Text<'a>>,
}

/// Deployment `strategy` and Argo Rollout `strategy` share this shape.
#[derive(Default, Debug, Clone)]
pub struct Strategy<'a> {
    pub kind: Option<Text<'a>>,
    pub rolling_update: Option<RollingUpdate<'a>>,
    pub canary: Option<RollingUpdate<'a>>,
    pub blue_green: bool,
}

impl<'a> Strategy<'a> {
    pub fn read(fields: &Fields<'a, '_>) -> Parsed<Strategy<'a>> {
        Ok(Strategy {
            kind: fields.string("type")?,
            rolling_update: fields.object("rollingUpdate", RollingUpdate::read)?,
            canary: fields.object("canary", RollingUpdate::read)?,
            blue_green: fields.present("blueGreen"),
        })
    }
}

#[derive(Default, Debug, Clone)]
pub struct RollingUpdate<'a> {
    pub max_unavailable: Option<IntOrString<'a>>,
    pub max_surge: Option<IntOrString<'a>>,
}

impl<'a> RollingUpdate<'a> {
    fn read(fields: &Fields<'a, '_>) -> Parsed<RollingUpdate<'a>> {
        Ok(RollingUpdate {
            max_unavailable: fields.int_or_string("maxUnavailable")?,
            max_surge: fields.int_or_string("maxSurge")?,
        })
    }
}

#[derive(Default, Debug, Clone)]
pub struct PodSpec<'a> {
    pub containers: Option<Vec<Container<'a>>>,
    pub init_containers: Option<Vec<Container<'a>>>,
    pub termination_grace_period_seconds: Option<i64>,
    pub active_deadline_seconds: Option<i64>,
    pub restart_policy: Option<Text<'a>>,
    pub host_network: Option<bool>,
    pub security_context: Option<SecurityContext>,
    /// `os.name`: a container's `lifecycle.stopSignal` is valid only beside it.
    pub os_name: Option<Text<'a>>,
}

impl<'a> PodSpec<'a> {
    pub fn read(fields: &Fields<'a, '_>) -> Parsed<PodSpec<'a>> {
        Ok(PodSpec {
            containers: fields.objects("containers", Container::read)?,
            init_containers: fields.objects("initContainers", Container::read)?,
            termination_grace_period_seconds: fields.int("terminationGracePeriodSeconds")?,
            active_deadline_seconds: fields.int("activeDeadlineSeconds")?,
            restart_policy: fields.string("restartPolicy")?,
            host_network: fields.boolean("hostNetwork")?,
            security_context: fields.object("securityContext", SecurityContext::read)?,
            os_name: fields.object("os", |os| os.string("name"))?.flatten(),
        })
    }

    pub fn containers(&self) -> &[Container<'a>] {
        self.containers.as_deref().unwrap_or(&[])
    }

    pub fn init_containers(&self) -> &[Container<'a>] {
        self.init_containers.as_deref().unwrap_or(&[])
    }

    /// Kubernetes' default (30) when the field is absent, and 1 when it is negative. Why 1: the
    /// API server accepts a negative grace period but never applies it; Kubernetes replaces it
    /// by 1 s (its `ValidatePodUpdate` lets a negative value change to 1 and to nothing else).
    pub fn grace_period_seconds(&self) -> i64 {
        match self.termination_grace_period_seconds {
            None => 30,
            Some(seconds) if seconds < 0 => 1,
            Some(seconds) => seconds,
        }
    }
}

#[derive(Default, Debug, Clone)]
pub struct Container<'a> {
    pub name: Option<Text<'a>>,
    pub image: Option<Text<'a>>,
    pub command: Option<Vec<Text<'a>>>,
    pub args: Option<Vec<Text<'a>>>,
    pub env: Option<Vec<EnvVar<'a>>>,
    pub ports: Option<Vec<ContainerPort<'a>>>,
    pub lifecycle: Option<Lifecycle<'a>>,
    pub has_readiness_probe: bool,
    pub has_startup_probe: bool,
    /// Which probes use a `grpc` action (they mark the container as a gRPC server).
    pub grpc_probes: GrpcProbes,
    pub restart_policy: Option<Text<'a>>,
    /// `restartPolicyRules` (KEP-5307; the action `RestartAllContainers` is KEP-5532's).
    pub restart_rules: Option<Vec<RestartRule<'a>>>,
    pub security_context: Option<SecurityContext>,
}

/// One of a container's `restartPolicyRules`.
#[derive(Default, Debug, Clone)]
pub struct RestartRule<'a> {
    pub action: Option<Text<'a>>,
    pub exit_codes: Option<ExitCodes<'a>>,
}

/// `exitCodes` of a restart rule: `operator` `In` or `NotIn` over `values`.
#[derive(Default, Debug, Clone)]
pub struct ExitCodes<'a> {
    pub operator: Option<Text<'a>>,
    pub values: Option<Vec<i64>>,
}

impl RestartRule<'_> {
    /// `exits with 88`, `exits with 1 or 2`, `exits with any code but 0`, `exits`.
    pub fn condition(&self) -> String {
        let Some(codes) = &self.exit_codes else {
            return "exits".into();
        };
        let values: Vec<String> = codes
            .values
            .iter()
            .flatten()
            .map(ToString::to_string)
            .collect();
        let listed = match values.as_slice() {
            [] => return "exits".into(),
            [one] => one.clone(),
            [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
        };
        match codes.operator.as_deref() {
            Some("NotIn") => format!("exits with any code but {listed}"),
            _ => format!("exits with {listed}"),
        }
    }
}

impl<'a> Container<'a> {
    pub fn read(fields: &Fields<'a, '_>) -> Parsed<Container<'a>> {
        let mut grpc_probes = GrpcProbes::default();
        Ok(Container {
            name: fields.string("name")?,
            image: fields.string("image")?,
            command: fields.strings("command")?,
            args: fields.strings("args")?,
            env: fields.objects("env", |var| {
                Ok(EnvVar {
                    name: var.string("name")?,
                    value: var.string("value")?,
                })
            })?,
            ports: fields.objects("ports", |port| {
                Ok(ContainerPort {
                    name: port.string("name")?,
                    container_port: port.int_or_string("containerPort")?,
                    app_protocol: port.string("appProtocol")?,
                })
            })?,
            lifecycle: fields.object("lifecycle", |lifecycle| {
                Ok(Lifecycle {
                    post_start: lifecycle.object("postStart", Handler::read)?,
                    pre_stop: lifecycle.object("preStop", Handler::read)?,
                    stop_signal: lifecycle.string("stopSignal")?,
                })
            })?,
            has_readiness_probe: fields
                .object("readinessProbe", grpc_action)?
                .inspect(|grpc| grpc_probes.readiness = *grpc)
                .is_some(),
            has_startup_probe: fields
                .object("startupProbe", grpc_action)?
                .inspect(|grpc| grpc_probes.startup = *grpc)
                .is_some(),
            grpc_probes: GrpcProbes {
                liveness: fields
                    .object("livenessProbe", grpc_action)?
                    .unwrap_or(false),
                ..grpc_probes
            },
            restart_policy: fields.string("restartPolicy")?,
            restart_rules: fields.objects("restartPolicyRules", |rule| {
                Ok(RestartRule {
                    action: rule.string("action")?,
                    exit_codes: rule.object("exitCodes", |codes| {
                        Ok(ExitCodes {
                            operator: codes.string("operator")?,
                            values: codes.list("values", |item, path| match item {
                                Node::Int(number) => Ok(*number),
                                other => Err(type_error(path, "an integer", other)),
                            })?,
                        })
                    })?,
                })
            })?,
            security_context: fields.object("securityContext", SecurityContext::read)?,
        })
    }

    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    pub fn command(&self) -> &[Text<'a>] {
        self.command.as_deref().unwrap_or(&[])
    }

    pub fn args(&self) -> &[Text<'a>] {
        self.args.as_deref().unwrap_or(&[])
    }

    pub fn ports(&self) -> &[ContainerPort<'a>] {
        self.ports.as_deref().unwrap_or(&[])
    }

    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env
            .as_deref()?
            .iter()
            .find(|var| var.name.as_deref() == Some(name))
            .and_then(|var| var.value.as_deref())
    }

    pub fn post_start(&self) -> Option<&Handler<'a>> {
        self.lifecycle.as_ref()?.post_start.as_ref()
    }

    pub fn pre_stop(&self) -> Option<&Handler<'a>> {
        self.lifecycle.as_ref()?.pre_stop.as_ref()
    }

    /// `lifecycle.stopSignal` as stated (KEP-4960); whether the cluster honours it is
    /// `stop_signal::honoured`'s question.
    pub fn stated_stop_signal(&self) -> Option<&str> {
        self.lifecycle.as_ref()?.stop_signal.as_deref()
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
            .map(Text::as_str)
            .chain(hooks.flat_map(Handler::strings))
    }
}

/// A probe's `grpc` action: present (an object), absent, or of the wrong type.
fn grpc_action(probe: &Fields) -> Parsed<bool> {
    Ok(probe.object("grpc", |_| Ok(()))?.is_some())
}

/// The probes of a container that use a `grpc` action.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrpcProbes {
    pub liveness: bool,
    pub readiness: bool,
    pub startup: bool,
}

impl GrpcProbes {
    /// The first probe with a grpc action, as `readinessProbe.grpc`.
    pub fn first(self) -> Option<&'static str> {
        [
            (self.readiness, "readinessProbe.grpc"),
            (self.liveness, "livenessProbe.grpc"),
            (self.startup, "startupProbe.grpc"),
        ]
        .into_iter()
        .find_map(|(used, name)| used.then_some(name))
    }
}

/// A Service of the object's namespace (the input's top-level `services`).
#[derive(Default, Debug, Clone)]
pub struct Service<'a> {
    pub name: Option<Text<'a>>,
    pub namespace: Option<Text<'a>>,
    pub selector: Option<BTreeMap<Text<'a>, Text<'a>>>,
    pub ports: Option<Vec<ServicePort<'a>>>,
}

#[derive(Default, Debug, Clone)]
pub struct ServicePort<'a> {
    pub name: Option<Text<'a>>,
    pub port: Option<i64>,
    pub target_port: Option<IntOrString<'a>>,
    pub app_protocol: Option<Text<'a>>,
}

impl<'a> Service<'a> {
    pub fn read(fields: &Fields<'a, '_>) -> Parsed<Service<'a>> {
        let meta = fields.object("metadata", |meta| {
            Ok((meta.string("name")?, meta.string("namespace")?))
        })?;
        let (name, namespace) = meta.unwrap_or_default();
        let spec = fields.object("spec", |spec| {
            Ok((
                spec.string_map("selector")?,
                spec.objects("ports", |port| {
                    Ok(ServicePort {
                        name: port.string("name")?,
                        port: port.int("port")?,
                        target_port: port.int_or_string("targetPort")?,
                        app_protocol: port.string("appProtocol")?,
                    })
                })?,
            ))
        })?;
        let (selector, ports) = spec.unwrap_or_default();
        Ok(Service {
            name,
            namespace,
            selector,
            ports,
        })
    }

    pub fn ports(&self) -> &[ServicePort<'a>] {
        self.ports.as_deref().unwrap_or(&[])
    }

    /// A selector that is present and not empty, all of whose entries the labels hold.
    pub fn selects(&self, labels: Option<&BTreeMap<Text<'a>, Text<'a>>>) -> bool {
        let Some(selector) = self.selector.as_ref().filter(|s| !s.is_empty()) else {
            return false;
        };
        let Some(labels) = labels else {
            return false;
        };
        selector
            .iter()
            .all(|(key, value)| labels.get(key.as_str()) == Some(value))
    }
}

#[derive(Default, Debug, Clone)]
pub struct EnvVar<'a> {
    pub name: Option<Text<'a>>,
    pub value: Option<Text<'a>>,
}

#[derive(Default, Debug, Clone)]
pub struct ContainerPort<'a> {
    pub name: Option<Text<'a>>,
    pub container_port: Option<IntOrString<'a>>,
    pub app_protocol: Option<Text<'a>>,
}

#[derive(Default, Debug, Clone)]
pub struct Lifecycle<'a> {
    pub post_start: Option<Handler<'a>>,
    pub pre_stop: Option<Handler<'a>>,
    pub stop_signal: Option<Text<'a>>,
}

#[derive(Default, Debug, Clone)]
pub struct Handler<'a> {
    pub exec: Option<ExecAction<'a>>,
    pub sleep: Option<SleepAction>,
    pub http_get: Option<HttpGetAction<'a>>,
}

impl<'a> Handler<'a> {
    fn read(fields: &Fields<'a, '_>) -> Parsed<Handler<'a>> {
        Ok(Handler {
            exec: fields.object("exec", |exec| {
                Ok(ExecAction {
                    command: exec.strings("command")?,
                })
            })?,
            sleep: fields.object("sleep", |sleep| {
                Ok(SleepAction {
                    seconds: sleep.int("seconds")?,
                })
            })?,
            http_get: fields.object("httpGet", |get| {
                Ok(HttpGetAction {
                    path: get.string("path")?,
                })
            })?,
        })
    }

    pub fn exec_command(&self) -> &[Text<'a>] {
        self.exec
            .as_ref()
            .and_then(|exec| exec.command.as_deref())
            .unwrap_or(&[])
    }

    fn strings(&self) -> impl Iterator<Item = &str> {
        let http = self.http_get.iter().flat_map(|get| get.path.as_deref());
        self.exec_command().iter().map(Text::as_str).chain(http)
    }
}

#[derive(Default, Debug, Clone)]
pub struct ExecAction<'a> {
    pub command: Option<Vec<Text<'a>>>,
}

#[derive(Default, Debug, Clone)]
pub struct SleepAction {
    pub seconds: Option<i64>,
}

#[derive(Default, Debug, Clone)]
pub struct HttpGetAction<'a> {
    pub path: Option<Text<'a>>,
}

#[derive(Default, Debug, Clone)]
pub struct SecurityContext {
    pub run_as_user: Option<i64>,
}

impl SecurityContext {
    fn read(fields: &Fields) -> Parsed<SecurityContext> {
        Ok(SecurityContext {
            run_as_user: fields.int("runAsUser")?,
        })
    }
}

/// Kubernetes' `IntOrString` (`maxUnavailable: 1` or `"25%"`, named ports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntOrString<'a> {
    Int(i64),
    Str(Text<'a>),
}
