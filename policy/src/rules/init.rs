//! Init containers and traffic capture (ML201, ML202): capture that is on before any proxy
//! runs leaves init containers without a network.

use super::{Context, Finding};
use crate::catalogue::{INIT_CONTAINER_AFTER_REDIRECT, INIT_CONTAINER_NO_NETWORK};
use crate::input::Container;
use crate::mesh::Mesh;
use crate::violation::Severity;

const ISTIO_EXCLUSIONS: [&str; 3] = [
    "traffic.sidecar.istio.io/excludeOutboundPorts",
    "traffic.sidecar.istio.io/excludeOutboundIPRanges",
    "traffic.sidecar.istio.io/includeOutboundIPRanges",
];
const LINKERD_EXCLUSIONS: [&str; 2] = [
    "config.linkerd.io/skip-outbound-ports",
    "config.linkerd.io/skip-subnets",
];

pub fn check(context: &Context, findings: &mut Vec<Finding>) {
    if !context.decision.is_classic() {
        return;
    }
    context.run(
        &INIT_CONTAINER_NO_NETWORK,
        findings,
        init_container_no_network,
    );
    context.run(
        &INIT_CONTAINER_AFTER_REDIRECT,
        findings,
        init_container_after_redirect,
    );
}

fn bypass_advice(context: &Context) -> (i64, &'static str, &'static str) {
    let uid = context.mesh().proxy_uid(context.settings);
    match context.mesh() {
        Mesh::Istio => (
            uid,
            "traffic.sidecar.istio.io/excludeOutboundIPRanges or excludeOutboundPorts",
            "sidecar.istio.io/nativeSidecar: \"true\"",
        ),
        Mesh::Linkerd => (
            uid,
            "config.linkerd.io/skip-outbound-ports or skip-subnets",
            "config.linkerd.io/proxy-enable-native-sidecar: \"true\"",
        ),
    }
}

/// ML201: with CNI, capture starts with the pod; a classic proxy starts after the init
/// containers, so their connections go nowhere unless they run as the proxy's UID.
fn init_container_no_network(context: &Context, findings: &mut Vec<Finding>) {
    if !context.decision.cni {
        return;
    }
    let (proxy_uid, exclusion, native) = bypass_advice(context);
    let exclusions: &[&str] = match context.mesh() {
        Mesh::Istio => &ISTIO_EXCLUSIONS,
        Mesh::Linkerd => &LINKERD_EXCLUSIONS,
    };
    // An empty value excludes nothing, and so does includeOutboundIPRanges "*" (capture all).
    let excluded = exclusions.iter().any(|key| {
        context.workload.annotation(key).is_some_and(|value| {
            let value = value.trim();
            let captures_all = value == "*" && key.ends_with("includeOutboundIPRanges");
            !value.is_empty() && !captures_all
        })
    });
    let pod_uid = pod_run_as_user(context);
    for (index, container) in context.user_init_containers() {
        if container.run_as_user().or(pod_uid) == Some(proxy_uid) {
            continue;
        }
        let network = network_use(container);
        let why = match &network {
            NetworkUse::LocalOnly => continue,
            // "its command names ...", "its args name ...".
            NetworkUse::Shown { source: "args", reason } => {
                let plural = reason.strip_prefix("names ").map(|rest| format!("name {rest}"));
                format!("its args {}", plural.as_deref().unwrap_or(reason))
            }
            NetworkUse::Shown { source, reason } => format!("its {source} {reason}"),
            NetworkUse::EntrypointUnknown => "its command is not known (image entrypoint), so meshlife assumes it may use the network".to_string(),
            NetworkUse::UnknownProgram(program) => format!(
                "its command runs \"{program}\", which shows no network tool, but meshlife cannot tell what it does"
            ),
        };
        let name = container.name();
        let mut message = format!(
            "init container \"{name}\" runs while CNI traffic capture is already on but before {} starts, so its outbound connections fail",
            context.proxy_phrase()
        );
        if excluded {
            message.push_str(", unless the pod's capture exclusions cover its destinations");
        }
        message.push_str("; ");
        message.push_str(&why);
        message.push('.');
        let quiet = excluded || matches!(network, NetworkUse::UnknownProgram(_));
        let fix = format!(
            "Run initContainers[{index}] (\"{name}\") as the proxy UID (securityContext.runAsUser: {proxy_uid}), exclude its destinations with {exclusion}, or use native sidecars ({native})."
        );
        let finding = context
            .finding(
                &INIT_CONTAINER_NO_NETWORK,
                context.workload.init_container_path(index),
                message,
                fix,
            )
            .about_container(name);
        findings.push(if quiet {
            finding.with_severity(Severity::Info)
        } else {
            finding
        });
    }
}

/// What an init container's command and args show about its use of the network.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NetworkUse {
    /// A network tool, a URL or a host:port: `source` is "command" or "args", `reason` e.g.
    /// `runs curl`.
    Shown {
        source: &'static str,
        reason: String,
    },
    /// No `command`: the image's entrypoint runs, and nobody can tell what it does.
    EntrypointUnknown,
    /// A known command without any network sign, but with a program meshlife does not know.
    UnknownProgram(String),
    /// Every program is a local tool (cp, mkdir, chmod, echo, ...) and nothing names an address.
    LocalOnly,
}

/// Programs that talk to the network (or exist to).
const NETWORK_TOOLS: &[&str] = &[
    "apk",
    "apt",
    "apt-get",
    "aws",
    "az",
    "consul",
    "cqlsh",
    "curl",
    "dig",
    "dnf",
    "dockerize",
    "etcdctl",
    "flyway",
    "ftp",
    "gcloud",
    "gem",
    "gradle",
    "grpcurl",
    "gsutil",
    "helm",
    "host",
    "kubectl",
    "liquibase",
    "microdnf",
    "mongo",
    "mongodump",
    "mongosh",
    "mvn",
    "mysql",
    "mysqladmin",
    "mysqldump",
    "nc",
    "ncat",
    "netcat",
    "nmap",
    "npm",
    "npx",
    "nslookup",
    "oc",
    "pg_dump",
    "pg_isready",
    "pg_restore",
    "ping",
    "pip",
    "pip3",
    "pnpm",
    "psql",
    "rclone",
    "redis-cli",
    "rsync",
    "s3cmd",
    "scp",
    "sftp",
    "socat",
    "ssh",
    "telnet",
    "traceroute",
    "vault",
    "wait-for-it",
    "wait-for-it.sh",
    "wget",
    "yarn",
    "yum",
];

/// Git subcommands that reach a remote.
const GIT_REMOTE: &[&str] = &["clone", "fetch", "pull", "push", "ls-remote", "submodule"];

/// Programs that only touch local files and the process (shell builtins included).
const LOCAL_TOOLS: &[&str] = &[
    ":",
    "[",
    "[[",
    "base64",
    "basename",
    "bzip2",
    "cat",
    "cd",
    "chgrp",
    "chmod",
    "chown",
    "cmp",
    "cp",
    "cut",
    "date",
    "df",
    "diff",
    "dirname",
    "du",
    "echo",
    "egrep",
    "envsubst",
    "exit",
    "export",
    "false",
    "find",
    "grep",
    "gunzip",
    "gzip",
    "head",
    "id",
    "install",
    "jq",
    "ln",
    "local",
    "ls",
    "md5sum",
    "mkdir",
    "mktemp",
    "mv",
    "printf",
    "pwd",
    "read",
    "readlink",
    "realpath",
    "return",
    "rm",
    "rmdir",
    "sed",
    "set",
    "sha1sum",
    "sha256sum",
    "shift",
    "sleep",
    "sort",
    "stat",
    "sync",
    "tail",
    "tar",
    "tee",
    "test",
    "touch",
    "tr",
    "trap",
    "true",
    "umask",
    "uname",
    "uniq",
    "unset",
    "unzip",
    "wc",
    "whoami",
    "xz",
    "yq",
    "zcat",
    "awk",
];

const SHELLS: &[&str] = &["sh", "bash", "ash", "dash", "zsh", "ksh"];

/// Words that may precede the program of a simple shell command.
const PREFIX_WORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "exec",
    "time", "nohup", "command", "env",
];

/// Shell words that start a segment which runs no program by itself.
const CONTROL_WORDS: &[&str] = &["for", "case", "esac", "select", "function", "in"];

fn program_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn network_use(container: &Container) -> NetworkUse {
    let args: Vec<&str> = container.args().iter().map(|word| word.as_str()).collect();
    let Some(command) = container.command.as_deref() else {
        // Only the image knows what runs; the args may still name an address.
        return match args.iter().find_map(|word| address_in(word)) {
            Some(reason) => NetworkUse::Shown {
                source: "args",
                reason,
            },
            None => NetworkUse::EntrypointUnknown,
        };
    };
    let words: Vec<&str> = command
        .iter()
        .map(|word| word.as_str())
        .chain(args)
        .collect();
    let mut unknown = None;
    for segment in simple_commands(&words) {
        match judge_segment(&segment) {
            Segment::Network(reason) => {
                return NetworkUse::Shown {
                    source: "command",
                    reason,
                };
            }
            Segment::Unknown(program) => {
                unknown.get_or_insert(program);
            }
            Segment::Local => {}
        }
    }
    match unknown {
        Some(program) => NetworkUse::UnknownProgram(program),
        None => NetworkUse::LocalOnly,
    }
}

/// The simple commands the words run: the words themselves, or the commands of the script of a
/// shell's `-c`.
fn simple_commands(words: &[&str]) -> Vec<Vec<String>> {
    let Some(first) = words.first() else {
        return Vec::new();
    };
    if SHELLS.contains(&program_name(first)) {
        let mut index = 1;
        while let Some(word) = words.get(index) {
            if !word.starts_with('-') || word.starts_with("--") {
                break;
            }
            if word.contains('c') {
                return match words.get(index + 1) {
                    Some(script) => script_commands(script),
                    None => Vec::new(),
                };
            }
            index += 1;
        }
    }
    vec![words.iter().map(|word| word.to_string()).collect()]
}

/// Splits a shell script into simple commands: at `;`, `&`, `|`, newlines, parentheses,
/// braces and backticks, dropping redirections' `&` and the comments (a shebang line too).
fn script_commands(script: &str) -> Vec<Vec<String>> {
    let script = without_expansions(&without_comments(script))
        .replace(">&", ">")
        .replace("&>", ">");
    script
        .split([';', '&', '|', '\n', '(', ')', '{', '}', '`'])
        .map(|segment| {
            segment
                .split_whitespace()
                .map(|word| word.trim_matches(|c| c == '"' || c == '\'').to_string())
                .filter(|word| !word.is_empty())
                .collect::<Vec<String>>()
        })
        .filter(|segment| !segment.is_empty())
        .collect()
}

/// The script without its comments: a `#` that begins a word outside quotes (at a line's
/// start, after a blank or after `;`, `&` or `|`) comments out the rest of its line, as in sh.
/// `$#` and `${#name}` are not comments.
fn without_comments(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    for line in script.split_inclusive('\n') {
        let mut quote: Option<char> = None;
        let mut previous: Option<char> = None;
        let mut comment_at = None;
        for (index, character) in line.char_indices() {
            match quote {
                Some(open) if character == open => quote = None,
                Some(_) => {}
                None if character == '\'' || character == '"' => quote = Some(character),
                None if character == '#'
                    && previous.is_none_or(|before| {
                        before.is_whitespace() || matches!(before, ';' | '&' | '|')
                    }) =>
                {
                    comment_at = Some(index);
                    break;
                }
                None => {}
            }
            previous = Some(character);
        }
        match comment_at {
            Some(index) => {
                out.push_str(&line[..index]);
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The script with each `${...}` as a plain `$_`: its braces (and a `#` inside, `${#name}`)
/// are not the script's own.
fn without_expansions(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    let mut rest = script;
    while let Some(start) = rest.find("${") {
        let Some(length) = rest[start..].find('}') else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str("$_");
        rest = &rest[start + length + 1..];
    }
    out.push_str(rest);
    out
}

enum Segment {
    Network(String),
    Unknown(String),
    Local,
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }
        None => false,
    }
}

fn is_redirection(word: &str) -> bool {
    word.trim_start_matches(|c: char| c.is_ascii_digit())
        .starts_with(['<', '>'])
}

/// Programs that run another program named later in their words (`sudo -u app curl ...`,
/// `find . -exec wget ...`, `timeout 30 nc ...`).
const WRAPPERS: &[&str] = &[
    "sudo", "xargs", "timeout", "nice", "ionice", "stdbuf", "watch", "find", "su", "doas",
];

fn judge_segment(words: &[String]) -> Segment {
    // Bash's own sockets need no tool: `until echo > /dev/tcp/db/5432; do sleep 1; done`.
    if let Some(word) = words
        .iter()
        .find(|word| word.contains("/dev/tcp/") || word.contains("/dev/udp/"))
    {
        let socket = &word[word.find("/dev/").unwrap_or(0)..];
        return Segment::Network(format!("opens the socket {socket}"));
    }
    let mut start = 0;
    while let Some(word) = words.get(start) {
        if CONTROL_WORDS.contains(&word.as_str()) {
            return Segment::Local;
        }
        if PREFIX_WORDS.contains(&word.as_str()) || is_assignment(word) || is_redirection(word) {
            start += 1;
        } else {
            break;
        }
    }
    let Some(first) = words.get(start) else {
        return Segment::Local;
    };
    let mut program = program_name(first);
    let mut rest = &words[start + 1..];
    if program == "busybox"
        && let Some((applet, tail)) = rest.split_first()
    {
        program = program_name(applet);
        rest = tail;
    }
    if NETWORK_TOOLS.contains(&program) {
        return Segment::Network(format!("runs {program}"));
    }
    if WRAPPERS.contains(&program)
        && let Some(tool) = rest
            .iter()
            .map(|word| program_name(word))
            .find(|word| NETWORK_TOOLS.contains(word))
    {
        return Segment::Network(format!("runs {tool} (through {program})"));
    }
    if program == "git"
        && let Some(sub) = rest.iter().find(|word| !word.starts_with('-'))
        && GIT_REMOTE.contains(&sub.as_str())
    {
        return Segment::Network(format!("runs git {sub}"));
    }
    let owner_words = matches!(program, "chown" | "chgrp");
    for word in rest {
        if let Some(reason) = url_in(word) {
            return Segment::Network(reason);
        }
        if !owner_words && let Some(reason) = host_port_in(word) {
            return Segment::Network(reason);
        }
    }
    if LOCAL_TOOLS.contains(&program) || program == "git" {
        Segment::Local
    } else {
        Segment::Unknown(first.clone())
    }
}

/// A URL or host:port in one word.
fn address_in(word: &str) -> Option<String> {
    url_in(word).or_else(|| host_port_in(word))
}

fn url_in(word: &str) -> Option<String> {
    let at = word.find("://")?;
    let start = word[..at]
        .char_indices()
        .rev()
        .find(|(_, c)| !c.is_ascii_alphanumeric() && !matches!(c, '+' | '-' | '.'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let url = &word[start..];
    let scheme = &word[start..at];
    if scheme.is_empty() || scheme.eq_ignore_ascii_case("file") {
        return None;
    }
    Some(format!("names the URL \"{url}\""))
}

/// `db:5432`, `--addr=postgres.db:5432`, `localhost:15020/path`: a host with a letter in it,
/// then a port number.
fn host_port_in(word: &str) -> Option<String> {
    let text = word.rsplit('=').next().unwrap_or(word);
    let (host, rest) = text.rsplit_once(':')?;
    let port = rest.split('/').next().unwrap_or(rest);
    let host_ok = !host.is_empty()
        && host.bytes().any(|b| b.is_ascii_alphabetic())
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    let port_ok = (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit());
    (host_ok && port_ok).then(|| format!("names the address \"{text}\""))
}

fn pod_run_as_user(context: &Context) -> Option<i64> {
    context.workload.spec.security_context.as_ref()?.run_as_user
}

/// ML202: an init container placed after the redirect step (often by a later webhook).
fn init_container_after_redirect(context: &Context, findings: &mut Vec<Finding>) {
    let Some(redirect_index) = context.decision.redirect_init_index else {
        return;
    };
    let redirect = context.workload.spec.init_containers()[redirect_index].name();
    let (proxy_uid, _, native) = bypass_advice(context);
    let pod_uid = pod_run_as_user(context);
    // The redirect rules let the proxy's UID through, so such an init container keeps its network.
    for (index, container) in context.user_init_containers().filter(|(index, container)| {
        *index > redirect_index && container.run_as_user().or(pod_uid) != Some(proxy_uid)
    }) {
        let name = container.name();
        let message = format!(
            "init container \"{name}\" runs after \"{redirect}\" has redirected the pod's traffic but before any proxy exists, so its network connections fail."
        );
        let fix = format!(
            "Move initContainers[{index}] (\"{name}\") before \"{redirect}\" (or order the webhooks so the mesh injects last), run it as UID {proxy_uid}, or use native sidecars ({native})."
        );
        findings.push(
            context
                .finding(
                    &INIT_CONTAINER_AFTER_REDIRECT,
                    context.workload.init_container_path(index),
                    message,
                    fix,
                )
                .about_container(name),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Text;

    fn container<'a>(command: Option<&[&'a str]>, args: &[&'a str]) -> Container<'a> {
        Container {
            command: command.map(|words| words.iter().map(|&w| Text::from(w)).collect()),
            args: Some(args.iter().map(|&w| Text::from(w)).collect()),
            ..Container::default()
        }
    }

    #[test]
    fn judges_what_the_command_shows() {
        let local = container(
            Some(&["sh", "-c"]),
            &["cp /a /b 2>&1 && echo ok >/dev/null"],
        );
        assert_eq!(network_use(&local), NetworkUse::LocalOnly);
        let curl = container(Some(&["sh", "-c", "x=$(curl -s http://a/b); echo $x"]), &[]);
        assert!(
            matches!(network_use(&curl), NetworkUse::Shown { reason, .. } if reason == "runs curl")
        );
        let busybox = container(Some(&["busybox", "wget", "-O", "/x", "config"]), &[]);
        assert!(
            matches!(network_use(&busybox), NetworkUse::Shown { reason, .. } if reason == "runs wget")
        );
        let entrypoint = container(None, &["--verbose"]);
        assert_eq!(network_use(&entrypoint), NetworkUse::EntrypointUnknown);
        let owner = container(Some(&["chown", "app:1000", "/data"]), &[]);
        assert_eq!(network_use(&owner), NetworkUse::LocalOnly);
        let git_local = container(Some(&["git", "config", "--global", "x", "y"]), &[]);
        assert_eq!(network_use(&git_local), NetworkUse::LocalOnly);
        for (command, expected) in [
            (
                "until echo > /dev/tcp/db/5432; do sleep 1; done",
                "opens the socket /dev/tcp/db/5432",
            ),
            (
                "while ! </dev/tcp/postgres/5432; do sleep 1; done",
                "opens the socket /dev/tcp/postgres/5432",
            ),
            ("sudo -u app nc -z db 5432", "runs nc (through sudo)"),
            (
                "find /hooks -name '*.sh' -exec wget -q {} ;",
                "runs wget (through find)",
            ),
            ("cat urls | xargs wget", "runs wget (through xargs)"),
        ] {
            let shell = container(Some(&["sh", "-c", command]), &[]);
            assert!(
                matches!(network_use(&shell), NetworkUse::Shown { ref reason, .. } if reason == expected),
                "{command}: {:?}",
                network_use(&shell)
            );
        }
        let script = container(Some(&["/bin/bash", "/scripts/init.sh"]), &[]);
        assert_eq!(
            network_use(&script),
            NetworkUse::UnknownProgram("/bin/bash".into())
        );
    }

    #[test]
    fn odd_text_is_read_without_panicking() {
        for word in [
            "é://x",
            "ü:80",
            "://",
            ":",
            "a:",
            "=",
            "\u{1F600}://é",
            "sh",
            "-c",
            "",
        ] {
            let _ = network_use(&container(Some(&[word, word]), &[word]));
            let _ = network_use(&container(Some(&["sh", "-c", word]), &[]));
            let _ = network_use(&container(None, &[word]));
        }
        assert!(url_in("é://x").is_none());
        assert_eq!(
            url_in("xé+https://h/").as_deref(),
            Some("names the URL \"+https://h/\"")
        );
    }
}
