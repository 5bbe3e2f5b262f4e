//! The rule families, one file each. Every rule is a pure function of the reviewed workload,
//! the mesh decision and the settings, returning findings.

pub(crate) mod ambient;
pub(crate) mod ambient_network_policy;
mod annotations;
pub(crate) mod batch;
pub(crate) mod batch_helpers;
mod init;
mod restarts;
mod rollout;
mod shutdown;
#[cfg(not(target_arch = "wasm32"))]
pub(crate) use shutdown::{classic_listeners_close_ms, native_proxy_drains_at_deletion};
mod startup;

use crate::catalogue::{
    AMBIENT_WITH_SIDECAR, IN_PLACE_RESTART_SKIPS_DRAIN, INVALID_MESH_ANNOTATION, Rule,
};
use crate::input::{Container, Handler};
use crate::mesh::{Mesh, MeshDecision, Placement};
use crate::params::Settings;
use crate::violation::{Details, Severity, Violation};
use crate::workload::{Workload, glob_matches};

/// Whether every rule leaves the container alone (`exemptImages`).
pub(crate) fn image_is_exempt(settings: &Settings, container: &Container) -> bool {
    let image = container.image.as_deref().unwrap_or("");
    settings
        .raw
        .exempt_images
        .iter()
        .any(|pattern| glob_matches(pattern, image))
}

/// What every rule reads.
pub struct Context<'a> {
    pub workload: &'a Workload<'a>,
    pub decision: &'a MeshDecision,
    pub settings: &'a Settings,
}

impl Context<'_> {
    pub fn mesh(&self) -> Mesh {
        self.decision.mesh
    }

    pub fn proxy_name(&self) -> &'static str {
        self.decision.mesh.proxy_name()
    }

    fn image_is_exempt(&self, container: &Container) -> bool {
        image_is_exempt(self.settings, container)
    }

    /// The pod's containers minus the proxy and the containers of exempt images.
    pub fn app_containers(&self) -> impl Iterator<Item = (usize, &Container<'_>)> {
        let proxy = self.proxy_name();
        self.workload
            .spec
            .containers()
            .iter()
            .enumerate()
            .filter(move |(_, container)| {
                container.name() != proxy && !self.image_is_exempt(container)
            })
    }

    /// Init containers the user added: not the mesh's, not native sidecars, not exempt.
    pub fn user_init_containers(&self) -> impl Iterator<Item = (usize, &Container<'_>)> {
        self.workload
            .spec
            .init_containers()
            .iter()
            .enumerate()
            .filter(move |(_, container)| {
                !Mesh::owns_init_container(container.name())
                    && !container.is_restartable_init()
                    && !self.image_is_exempt(container)
            })
    }

    /// Runs the check of `rule` only when the parameters select the rule: its findings would
    /// be dropped, and building their messages is most of a check's cost.
    pub fn run(
        &self,
        rule: &Rule,
        findings: &mut Vec<Finding>,
        check: impl FnOnce(&Context, &mut Vec<Finding>),
    ) {
        if self.settings.selects(rule) {
            check(self, findings);
        }
    }

    /// `container "a"` / `containers "a", "b"`: the app containers, for messages.
    pub fn app_containers_phrase(&self) -> String {
        let names: Vec<String> = self
            .app_containers()
            .map(|(_, container)| format!("\"{}\"", container.name()))
            .collect();
        counted("container", &names)
    }

    pub fn finding(
        &self,
        rule: &'static Rule,
        path: String,
        message: String,
        fix: String,
    ) -> Finding {
        Finding {
            rule,
            severity: rule.severity,
            path,
            message,
            fix,
            mesh: Some(self.mesh()),
            container: None,
        }
    }

    /// Path of the proxy when injected, else of the pod spec the prediction is about.
    pub fn proxy_or_spec_path(&self) -> String {
        self.decision
            .proxy_path(self.workload)
            .unwrap_or_else(|| self.workload.spec_path().to_string())
    }

    /// "the classic istio-proxy sidecar" / "the istio-proxy sidecar the injector will add".
    pub fn proxy_phrase(&self) -> String {
        let style = match self.decision.placement {
            Placement::Native => "native ",
            Placement::Classic { .. } => "classic ",
            Placement::BrokenInit => "",
        };
        if self.decision.injected {
            format!("the {style}{} sidecar", self.proxy_name())
        } else {
            format!(
                "the {style}{} sidecar the injector will add",
                self.proxy_name()
            )
        }
    }
}

/// A rule's finding before it becomes a violation.
pub struct Finding {
    pub rule: &'static Rule,
    pub severity: Severity,
    pub path: String,
    /// The sentence after the `[ML101 startup-no-hold]` prefix.
    pub message: String,
    pub fix: String,
    pub mesh: Option<Mesh>,
    pub container: Option<String>,
}

impl Finding {
    pub fn with_severity(mut self, severity: Severity) -> Finding {
        self.severity = severity;
        self
    }

    pub fn about_container(mut self, name: &str) -> Finding {
        self.container = Some(name.to_string());
        self
    }

    pub fn into_violation(self) -> Violation {
        Violation {
            msg: format!("[{} {}] {}", self.rule.id, self.rule.name, self.message),
            details: Details {
                rule: self.rule.id.to_string(),
                name: self.rule.name.to_string(),
                severity: self.severity,
                path: self.path,
                fix: self.fix,
                mesh: self.mesh.map(|mesh| mesh.as_str().to_string()),
                container: self.container,
            },
        }
    }
}

/// Every family over one meshed workload. Each rule's check runs only when the parameters
/// select the rule (`Context::run`).
pub fn run_all(context: &Context) -> Vec<Finding> {
    let mut findings = Vec::new();
    context.run(&INVALID_MESH_ANNOTATION, &mut findings, annotations::check);
    context.run(&AMBIENT_WITH_SIDECAR, &mut findings, ambient::check);
    startup::check(context, &mut findings);
    if context.decision.placement == Placement::BrokenInit {
        // The pod cannot start at all; every other lifecycle finding would be noise.
        return findings;
    }
    init::check(context, &mut findings);
    batch::check(context, &mut findings);
    shutdown::check(context, &mut findings);
    context.run(
        &IN_PLACE_RESTART_SKIPS_DRAIN,
        &mut findings,
        restarts::check,
    );
    rollout::check(context, &mut findings);
    findings
}

pub fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        // Messages start with ASCII words; skipping Unicode case tables keeps the module small.
        Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    }
}

/// `container "a"` or `containers "a", "b"`.
pub fn counted(noun: &str, quoted: &[String]) -> String {
    let plural = if quoted.len() == 1 { "" } else { "s" };
    format!("{noun}{plural} {}", quoted.join(", "))
}

/// The delay a preStop hook is known to take, in seconds: a `sleep` action, an exec of
/// `sleep N`, or a shell script whose every `sleep` has a literal duration. `None` when the
/// delay cannot be known; it is never guessed.
pub fn prestop_delay_seconds(handler: &Handler) -> Option<i64> {
    if let Some(seconds) = handler.sleep.as_ref().and_then(|sleep| sleep.seconds) {
        return Some(seconds);
    }
    let command = handler.exec_command();
    let program = command.first()?;
    let program_name = program.rsplit('/').next().unwrap_or(program);
    if program_name == "sleep" {
        return command.get(1).and_then(|arg| parse_sleep_seconds(arg));
    }
    if matches!(program_name, "sh" | "bash" | "ash" | "dash" | "zsh") {
        let script = command.iter().skip(1).find(|arg| !arg.starts_with('-'))?;
        return script_sleep_seconds(script);
    }
    None
}

fn script_sleep_seconds(script: &str) -> Option<i64> {
    let words: Vec<&str> = script
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .filter(|word| !word.is_empty())
        .collect();
    let mut total = None;
    for (index, word) in words.iter().enumerate() {
        if word.rsplit('/').next() == Some("sleep") {
            let seconds = parse_sleep_seconds(words.get(index + 1)?)?;
            total = Some(total.unwrap_or(0i64).saturating_add(seconds));
        }
    }
    total
}

/// `sleep`'s argument: `15`, `15s`, `2m`, `1.5` (fractions rounded down).
fn parse_sleep_seconds(arg: &str) -> Option<i64> {
    let arg = arg.trim_matches(|c| c == '"' || c == '\'');
    let (number, multiplier) = match arg.as_bytes().last()? {
        b's' => (&arg[..arg.len() - 1], 1),
        b'm' => (&arg[..arg.len() - 1], 60),
        b'h' => (&arg[..arg.len() - 1], 3600),
        _ => (arg, 1),
    };
    let whole = number.split_once('.').map_or(number, |(whole, fraction)| {
        if fraction.bytes().all(|b| b.is_ascii_digit()) {
            whole
        } else {
            "x"
        }
    });
    let whole = if whole.is_empty() && number.starts_with('.') {
        "0"
    } else {
        whole
    };
    whole
        .parse::<i64>()
        .ok()
        .filter(|value| *value >= 0)
        .map(|value| value.saturating_mul(multiplier))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{ExecAction, SleepAction, Text};

    fn exec<'a>(command: &[&'a str]) -> Handler<'a> {
        Handler {
            exec: Some(ExecAction {
                command: Some(command.iter().map(|&word| Text::from(word)).collect()),
            }),
            ..Handler::default()
        }
    }

    #[test]
    fn reads_known_prestop_delays() {
        let sleep = Handler {
            sleep: Some(SleepAction { seconds: Some(12) }),
            ..Handler::default()
        };
        assert_eq!(prestop_delay_seconds(&sleep), Some(12));
        assert_eq!(prestop_delay_seconds(&exec(&["sleep", "15"])), Some(15));
        assert_eq!(
            prestop_delay_seconds(&exec(&["/bin/sleep", "2m"])),
            Some(120)
        );
        assert_eq!(
            prestop_delay_seconds(&exec(&["/bin/sh", "-c", "sleep 10 && nginx -s quit"])),
            Some(10)
        );
        assert_eq!(
            prestop_delay_seconds(&exec(&["sh", "-c", "sleep 5; kill 1; sleep 5"])),
            Some(10)
        );
    }

    #[test]
    fn does_not_guess_unknown_delays() {
        assert_eq!(
            prestop_delay_seconds(&exec(&["sh", "-c", "sleep $DELAY"])),
            None
        );
        assert_eq!(prestop_delay_seconds(&exec(&["/app/shutdown.sh"])), None);
        assert_eq!(
            prestop_delay_seconds(&exec(&["sh", "-c", "nginx -s quit"])),
            None
        );
        assert_eq!(prestop_delay_seconds(&Handler::default()), None);
    }
}
