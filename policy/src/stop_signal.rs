//! A container's `lifecycle.stopSignal` (KEP-4960): the signal the runtime sends in place of
//! SIGTERM when the container is stopped. Alpha in Kubernetes 1.33 (gate `ContainerStopSignals`,
//! off), beta and on by default in 1.37. Where the gate is off, the API server drops the field
//! (`dropContainerStopSignals`, pkg/api/pod/util.go) and the image's own stop signal applies.

use crate::params::Settings;

/// The first minor version whose API server keeps the field by default.
pub const HONOURED_FROM_MINOR: u32 = 37;

/// The signals the API server accepts for Linux pods (`supportedStopSignalsLinux`,
/// pkg/apis/core/validation, Kubernetes v1.35).
const LINUX: &[&str] = &[
    "SIGABRT",
    "SIGALRM",
    "SIGBUS",
    "SIGCHLD",
    "SIGCLD",
    "SIGCONT",
    "SIGFPE",
    "SIGHUP",
    "SIGILL",
    "SIGINT",
    "SIGIO",
    "SIGIOT",
    "SIGKILL",
    "SIGPIPE",
    "SIGPOLL",
    "SIGPROF",
    "SIGPWR",
    "SIGQUIT",
    "SIGSEGV",
    "SIGSTKFLT",
    "SIGSTOP",
    "SIGSYS",
    "SIGTERM",
    "SIGTRAP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGUSR1",
    "SIGUSR2",
    "SIGVTALRM",
    "SIGWINCH",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGRTMIN",
    "SIGRTMAX",
];

/// And for Windows pods (`supportedStopSignalsWindows`).
const WINDOWS: &[&str] = &["SIGKILL", "SIGTERM"];

/// `SIGRTMIN+1` to `SIGRTMIN+15` and `SIGRTMAX-14` to `SIGRTMAX-1`, the real-time signals the
/// Linux list names one by one.
fn is_real_time_offset(signal: &str) -> bool {
    let offset = |rest: &str, max: u8| {
        rest.parse::<u8>()
            .is_ok_and(|n| (1..=max).contains(&n) && !rest.starts_with('0'))
    };
    signal
        .strip_prefix("SIGRTMIN+")
        .is_some_and(|rest| offset(rest, 15))
        || signal
            .strip_prefix("SIGRTMAX-")
            .is_some_and(|rest| offset(rest, 14))
}

/// What the API server says of a stated signal, `None` when it accepts it: the field needs
/// `spec.os.name`, and a signal of that OS's list.
pub fn refusal(signal: &str, os_name: Option<&str>) -> Option<String> {
    match os_name {
        None | Some("") => Some(format!(
            "stopSignal {signal} needs spec.os.name (linux or windows) beside it: the API server refuses a stop signal without it (Kubernetes 1.{HONOURED_FROM_MINOR}+; older ones drop the field, so the signal is never used)"
        )),
        Some("windows") if !WINDOWS.contains(&signal) => Some(format!(
            "\"{signal}\" is not a stop signal for Windows pods; the API server accepts SIGKILL or SIGTERM"
        )),
        Some("linux") if !(LINUX.contains(&signal) || is_real_time_offset(signal)) => {
            Some(format!(
                "\"{signal}\" is not a stop signal the API server accepts: expected a signal name such as SIGTERM, SIGQUIT, SIGINT or SIGKILL (upper case, with the SIG prefix)"
            ))
        }
        // An OS name the API server refuses on its own (spec.os.name is linux or windows)
        // leaves the signal to that refusal.
        _ => None,
    }
}

/// The stated stop signal when the cluster uses it: the field is kept from Kubernetes 1.37,
/// and SIGTERM changes nothing.
pub fn honoured<'c>(stated: Option<&'c str>, settings: &Settings) -> Option<&'c str> {
    let signal = stated?;
    (settings.raw.kubernetes_minor_version >= HONOURED_FROM_MINOR && signal != "SIGTERM")
        .then_some(signal)
}

/// What a signal does to a process whatever its code: SIGKILL ends it at once, SIGSTOP freezes
/// it until the grace period's SIGKILL. Every other signal is the app's to handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Handled,
    KillsAtOnce,
    FreezesUntilKilled,
}

pub fn effect(signal: &str) -> Effect {
    match signal {
        "SIGKILL" => Effect::KillsAtOnce,
        "SIGSTOP" => Effect::FreezesUntilKilled,
        _ => Effect::Handled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_accepts_its_list_and_the_real_time_offsets_only() {
        for signal in [
            "SIGQUIT",
            "SIGKILL",
            "SIGRTMIN",
            "SIGRTMIN+15",
            "SIGRTMAX-1",
        ] {
            assert_eq!(refusal(signal, Some("linux")), None, "{signal}");
        }
        for signal in [
            "SIGTERM ",
            "sigterm",
            "TERM",
            "15",
            "SIGRTMIN+16",
            "SIGRTMIN+0",
            "SIGRTMIN+01",
            "SIGRTMAX-15",
            "SIGRTMAX+1",
        ] {
            assert!(refusal(signal, Some("linux")).is_some(), "{signal}");
        }
    }

    #[test]
    fn windows_accepts_kill_and_term_and_no_os_name_is_refused() {
        assert_eq!(refusal("SIGKILL", Some("windows")), None);
        assert!(refusal("SIGQUIT", Some("windows")).is_some());
        let refused = refusal("SIGQUIT", None).unwrap();
        assert!(refused.contains("spec.os.name"), "{refused}");
    }

    #[test]
    fn the_signal_is_honoured_from_kubernetes_1_37_and_sigterm_is_no_change() {
        let mut settings = Settings::default();
        settings.raw.kubernetes_minor_version = 36;
        assert_eq!(honoured(Some("SIGQUIT"), &settings), None);
        settings.raw.kubernetes_minor_version = 37;
        assert_eq!(honoured(Some("SIGQUIT"), &settings), Some("SIGQUIT"));
        assert_eq!(honoured(Some("SIGTERM"), &settings), None);
        assert_eq!(honoured(None, &settings), None);
    }
}
