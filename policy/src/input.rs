//! The typed view of a Gatekeeper input: the admission request, the object under review and the
//! pod spec wherever it lives. Only the fields the rules read are typed, and strings borrow from
//! the input. Two readers fill it: `one_pass` (serde derive, below) for valid input, and
//! `Fields` over the sparse tree of `node`, where a field with the wrong JSON type becomes one
//! `InputError` naming its path.

use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};

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

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string")
            }

            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E: de::Error>(self, text: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
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

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub namespace: Option<Text<'a>>,
    #[serde(borrow)]
    pub labels: Option<BTreeMap<Text<'a>, Text<'a>>>,
    #[serde(borrow)]
    pub annotations: Option<BTreeMap<Text<'a>, Text<'a>>>,
    #[serde(borrow, default, deserialize_with = "objects")]
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

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference<'a> {
    #[serde(borrow)]
    pub kind: Option<Text<'a>>,
}

/// Deployment `strategy` and Argo Rollout `strategy` share this shape.
#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Strategy<'a> {
    #[serde(borrow, rename = "type")]
    pub kind: Option<Text<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub rolling_update: Option<RollingUpdate<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub canary: Option<RollingUpdate<'a>>,
    #[serde(default, deserialize_with = "is_present")]
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

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdate<'a> {
    #[serde(borrow)]
    pub max_unavailable: Option<IntOrString<'a>>,
    #[serde(borrow)]
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

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec<'a> {
    #[serde(borrow, default, deserialize_with = "objects")]
    pub containers: Option<Vec<Container<'a>>>,
    #[serde(borrow, default, deserialize_with = "objects")]
    pub init_containers: Option<Vec<Container<'a>>>,
    pub termination_grace_period_seconds: Option<i64>,
    pub active_deadline_seconds: Option<i64>,
    #[serde(borrow)]
    pub restart_policy: Option<Text<'a>>,
    pub host_network: Option<bool>,
    #[serde(default, deserialize_with = "object")]
    pub security_context: Option<SecurityContext>,
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
        })
    }

    pub fn containers(&self) -> &[Container<'a>] {
        self.containers.as_deref().unwrap_or(&[])
    }

    pub fn init_containers(&self) -> &[Container<'a>] {
        self.init_containers.as_deref().unwrap_or(&[])
    }

    /// Kubernetes' default when the field is absent.
    pub fn grace_period_seconds(&self) -> i64 {
        self.termination_grace_period_seconds.unwrap_or(30)
    }
}

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub image: Option<Text<'a>>,
    #[serde(borrow)]
    pub command: Option<Vec<Text<'a>>>,
    #[serde(borrow)]
    pub args: Option<Vec<Text<'a>>>,
    #[serde(borrow, default, deserialize_with = "objects")]
    pub env: Option<Vec<EnvVar<'a>>>,
    #[serde(borrow, default, deserialize_with = "objects")]
    pub ports: Option<Vec<ContainerPort<'a>>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub lifecycle: Option<Lifecycle<'a>>,
    #[serde(rename = "readinessProbe", default, deserialize_with = "is_object")]
    pub has_readiness_probe: bool,
    #[serde(rename = "startupProbe", default, deserialize_with = "is_object")]
    pub has_startup_probe: bool,
    #[serde(borrow)]
    pub restart_policy: Option<Text<'a>>,
    #[serde(default, deserialize_with = "object")]
    pub security_context: Option<SecurityContext>,
}

impl<'a> Container<'a> {
    pub fn read(fields: &Fields<'a, '_>) -> Parsed<Container<'a>> {
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
                })
            })?,
            has_readiness_probe: fields.object("readinessProbe", |_| Ok(()))?.is_some(),
            has_startup_probe: fields.object("startupProbe", |_| Ok(()))?.is_some(),
            restart_policy: fields.string("restartPolicy")?,
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

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub value: Option<Text<'a>>,
}

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub container_port: Option<IntOrString<'a>>,
    #[serde(borrow)]
    pub app_protocol: Option<Text<'a>>,
}

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle<'a> {
    #[serde(borrow, default, deserialize_with = "object")]
    pub post_start: Option<Handler<'a>>,
    #[serde(borrow, default, deserialize_with = "object")]
    pub pre_stop: Option<Handler<'a>>,
}

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handler<'a> {
    #[serde(borrow, default, deserialize_with = "object")]
    pub exec: Option<ExecAction<'a>>,
    #[serde(default, deserialize_with = "object")]
    pub sleep: Option<SleepAction>,
    #[serde(borrow, default, deserialize_with = "object")]
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

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecAction<'a> {
    #[serde(borrow)]
    pub command: Option<Vec<Text<'a>>>,
}

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SleepAction {
    pub seconds: Option<i64>,
}

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpGetAction<'a> {
    #[serde(borrow)]
    pub path: Option<Text<'a>>,
}

#[derive(Default, Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
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

impl<'de: 'a, 'a> Deserialize<'de> for IntOrString<'a> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntOrStringVisitor;
        impl<'de> Visitor<'de> for IntOrStringVisitor {
            type Value = IntOrString<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("an integer or a string")
            }

            fn visit_i64<E: de::Error>(self, number: i64) -> Result<IntOrString<'de>, E> {
                Ok(IntOrString::Int(number))
            }

            fn visit_u64<E: de::Error>(self, number: u64) -> Result<IntOrString<'de>, E> {
                i64::try_from(number)
                    .map(IntOrString::Int)
                    .map_err(|_| E::custom("integer out of range"))
            }

            fn visit_borrowed_str<E: de::Error>(
                self,
                text: &'de str,
            ) -> Result<IntOrString<'de>, E> {
                Ok(IntOrString::Str(Text(Cow::Borrowed(text))))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<IntOrString<'de>, E> {
                Ok(IntOrString::Str(Text(Cow::Owned(text.to_owned()))))
            }
        }
        deserializer.deserialize_any(IntOrStringVisitor)
    }
}

/// An object and nothing else: serde's derived structs also accept a JSON array of the field
/// values, which the exact reader refuses.
pub(crate) struct ObjectOnly<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = ObjectOnly<T>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectOnly<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(ObjectOnly)
            }
        }
        deserializer.deserialize_map(ObjectVisitor(std::marker::PhantomData))
    }
}

/// An optional object field (`deserialize_with`), read as the exact reader's `object` reads it.
pub(crate) fn object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: de::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<ObjectOnly<T>>::deserialize(deserializer)?.map(|object| object.0))
}

/// An optional list of objects, read as the exact reader's `objects` reads it (except null
/// items, which it refuses and leaves to the exact reader).
pub(crate) fn objects<'de, D, T>(deserializer: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: de::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<ObjectOnly<T>>>::deserialize(deserializer)?
        .map(|objects| objects.into_iter().map(|object| object.0).collect()))
}

/// `present(key)` of the exact reader: any value but null.
fn is_present<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(Option::<IgnoredAny>::deserialize(deserializer)?.is_some())
}

/// `object(key, ..).is_some()` of the exact reader: an object, or null for absent.
fn is_object<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    struct AnyObject;
    impl<'de> Deserialize<'de> for AnyObject {
        fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct ObjectVisitor;
            impl<'de> Visitor<'de> for ObjectVisitor {
                type Value = AnyObject;

                fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                    formatter.write_str("an object")
                }

                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AnyObject, A::Error> {
                    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                    Ok(AnyObject)
                }
            }
            deserializer.deserialize_map(ObjectVisitor)
        }
    }
    Ok(Option::<AnyObject>::deserialize(deserializer)?.is_some())
}
