//! `meshlife completions` loaded by a real bash and `meshlife man` read by a real `man`: what a
//! user installs from them, tried the way the shell and man use them.

use std::process::Command;

use crate::cli_support;

use cli_support::*;

/// What bash's completion offers for `words` (the last one being completed), with the script
/// `meshlife completions bash` printed sourced first, as ~/.bashrc would.
fn bash_completes(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let words_array = words
        .iter()
        .map(|word| format!("'{word}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let current = words.last().copied().unwrap_or_default();
    let previous = words[words.len() - 2];
    let program = format!(
        "source '{}' && complete -p meshlife >/dev/null && COMP_WORDS=({words_array}) && \
         COMP_CWORD={} && _meshlife meshlife '{current}' '{previous}' && \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.len() - 1
    );
    let output = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_commands_flags_values_and_rule_ids() {
    let workspace = Workspace::new();
    let outcome = workspace.run(&["completions", "bash"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let script = workspace.write("meshlife.bash", &outcome.stdout);

    assert_eq!(bash_completes(&script, &["meshlife", "ch"]), ["check"]);
    let commands = bash_completes(&script, &["meshlife", ""]);
    for command in [
        "check",
        "init",
        "explain",
        "diagnose",
        "drill",
        "completions",
        "man",
    ] {
        assert!(
            commands.contains(&command.to_string()),
            "{command}: {commands:?}"
        );
    }
    assert!(
        !commands.contains(&"drill-client".to_string()),
        "{commands:?}"
    );
    assert_eq!(
        bash_completes(&script, &["meshlife", "check", "--fail-on", ""]),
        ["error", "warning", "info", "none"]
    );
    let flags = bash_completes(&script, &["meshlife", "check", "--no-c"]);
    assert_eq!(flags, ["--no-config"], "{flags:?}");
    let rules = bash_completes(&script, &["meshlife", "rules", "ML30"]);
    assert!(rules.contains(&"ML301".to_string()), "{rules:?}");
    assert!(
        rules.iter().all(|rule| rule.starts_with("ML30")),
        "{rules:?}"
    );
    let rules = bash_completes(&script, &["meshlife", "check", "--exclude-rules", "job-"]);
    assert!(
        rules.contains(&"job-sidecar-never-exits".to_string()),
        "{rules:?}"
    );
}

#[test]
fn every_shell_gets_a_script() {
    let workspace = Workspace::new();
    for (shell, marker) in [
        ("zsh", "#compdef meshlife"),
        ("fish", "complete -c meshlife"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[meshlife]"),
    ] {
        let outcome = workspace.run(&["completions", shell]);
        assert_eq!(outcome.code, 0, "{shell}: {outcome:?}");
        assert!(
            outcome.stdout.contains(marker),
            "{shell}: {}",
            outcome.stdout
        );
        assert!(outcome.stdout.contains("ML301"), "{shell}: rule ids");
    }
    let outcome = workspace.run(&["completions", "tcsh"]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stderr.contains("possible values"), "{outcome:?}");
}

#[test]
fn man_reads_a_page_per_command() {
    let workspace = Workspace::new();
    let outcome = workspace.run(&["man", "--dir", "share/man/man1"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let pages = workspace.path().join("share/man/man1");
    for page in [
        "meshlife.1",
        "meshlife-check.1",
        "meshlife-init.1",
        "meshlife-install-webhook.1",
    ] {
        assert!(pages.join(page).is_file(), "{page}");
    }
    assert!(
        !pages.join("meshlife-drill-client.1").exists(),
        "hidden commands have no page"
    );
    let output = Command::new("man")
        .args(["-M"])
        .arg(workspace.path().join("share/man"))
        .arg("meshlife-check")
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
        .expect("man runs");
    let page = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "man: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(page.contains("--fail-on"), "{page}");
    assert!(page.contains("--no-config"), "{page}");

    let outcome = workspace.run(&["man"]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(outcome.stdout.contains(".TH meshlife 1"), "{outcome:?}");
}

/// Installed as `kubectl-meshlife` (a link, as krew or a user makes it), the binary is kubectl's
/// plugin: its usage and its messages name what the user typed, `kubectl meshlife`.
#[test]
fn as_kubectls_plugin_it_names_itself_kubectl_meshlife() {
    let workspace = Workspace::new();
    let plugin = workspace.path().join("kubectl-meshlife");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_meshlife"), &plugin).unwrap();
    let run = |args: &[&str]| {
        let output = Command::new(&plugin)
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .expect("kubectl-meshlife runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, help, _) = run(&["diagnose", "--help"]);
    assert_eq!(code, Some(0));
    assert!(
        help.contains("Usage: kubectl meshlife diagnose [OPTIONS]"),
        "{help}"
    );
    for flag in ["--kubeconfig", "--context", "-n, --namespace"] {
        assert!(help.contains(flag), "kubectl's {flag}: {help}");
    }
    let (code, _, stderr) = run(&["rules", "ML3"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.starts_with("kubectl meshlife: error: no rule `ML3`"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["check"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("Usage: kubectl meshlife check"), "{stderr}");
}
