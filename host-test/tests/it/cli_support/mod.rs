//! Running the real `meshlife` binary on files in a temporary folder.

#![allow(dead_code)] // each cli_*.rs test crate uses a different part of this

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// The findings of `-o json`'s envelope (or of `-o json-array`'s bare array), parsed.
    pub fn json(&self) -> Vec<serde_json::Value> {
        let value = self.json_envelope();
        let findings = if value.is_array() {
            value
        } else {
            value["findings"].clone()
        };
        serde_json::from_value(findings).unwrap_or_else(|error| {
            panic!(
                "no findings array ({error}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// `-o json` output, the whole envelope.
    pub fn json_envelope(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|error| {
            panic!(
                "stdout is not JSON ({error}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// The `rule` of every JSON finding, in order.
    pub fn rules(&self) -> Vec<String> {
        self.json()
            .iter()
            .map(|finding| finding["rule"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `meshlife ARGS` in `folder` with `stdin` (empty when `None`), colour off, no
/// `COLUMNS` from the shell running the tests.
pub fn run_in(folder: &Path, args: &[&str], stdin: Option<&str>) -> Outcome {
    run_in_with_path(folder, args, stdin, None)
}

/// [`run_in`] with the child's `PATH` set to `path`, for the commands meshlife looks up there
/// (kustomize, kubectl, helm): a test says which of them exist instead of taking the machine's.
pub fn run_in_with_path(
    folder: &Path,
    args: &[&str],
    stdin: Option<&str>,
    path: Option<&Path>,
) -> Outcome {
    let mut command = Command::new(env!("CARGO_BIN_EXE_meshlife"));
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let mut child = command
        .args(args)
        .current_dir(folder)
        .env("NO_COLOR", "1")
        .env_remove("COLUMNS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the meshlife binary runs");
    let input = stdin.unwrap_or("").to_string();
    let mut child_stdin = child.stdin.take().expect("stdin is piped");
    // Written from a thread: a large stdin must not deadlock against a full stdout pipe.
    let writer = std::thread::spawn(move || {
        let _ = child_stdin.write_all(input.as_bytes());
    });
    let output = child.wait_with_output().expect("meshlife finishes");
    writer.join().expect("stdin writer");
    Outcome {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `meshlife ARGS` in `folder` with `stdin` as given (a file, a device, a folder), and
/// kills it after `limit`: a run that hangs (on a FIFO, say) fails the test instead of hanging
/// it.
pub fn run_bounded(folder: &Path, args: &[&str], stdin: Stdio, limit: Duration) -> Outcome {
    let mut child = Command::new(env!("CARGO_BIN_EXE_meshlife"))
        .args(args)
        .current_dir(folder)
        .env("NO_COLOR", "1")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the meshlife binary runs");
    // Read on threads, so a full pipe cannot stall the child while we wait.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as _));
    let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as _));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for meshlife") {
            break status;
        }
        let grown = resident_bytes(child.id()).filter(|&bytes| bytes > MAX_RESIDENT_BYTES);
        if started.elapsed() > limit || grown.is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "meshlife {args:?} killed: {}; stderr so far:\n{}",
                match grown {
                    Some(bytes) => format!("{} MiB resident", bytes >> 20),
                    None => format!("not finished within {limit:?}"),
                },
                stderr.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// What [`run_bounded`] lets a run hold before killing it: a read that never ends (say of
/// /dev/zero) fails the test quickly instead of taking the machine's memory.
const MAX_RESIDENT_BYTES: u64 = 1 << 30;

/// The resident memory of a process (Linux `/proc`; `None` elsewhere or once it has ended).
fn resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A temporary folder with files written into it.
pub struct Workspace {
    pub folder: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Workspace {
        Workspace {
            folder: tempfile::tempdir().expect("a temporary folder"),
        }
    }

    pub fn path(&self) -> &Path {
        self.folder.path()
    }

    pub fn write(&self, relative: &str, contents: &str) -> PathBuf {
        let path = self.folder.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("folders");
        std::fs::write(&path, contents).expect("write");
        path
    }

    pub fn run(&self, args: &[&str]) -> Outcome {
        run_in(self.path(), args, None)
    }

    /// [`Workspace::run`] with `PATH` set to `path` only.
    pub fn run_with_path(&self, args: &[&str], path: &Path) -> Outcome {
        run_in_with_path(self.path(), args, None, Some(path))
    }

    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Outcome {
        run_in(self.path(), args, Some(stdin))
    }

    /// Writes to `file` the constraint `meshlife constraint FLAGS` prints; panics if it fails.
    pub fn write_constraint(&self, file: &str, flags: &[&str]) {
        let generated = self.run(&[&["constraint"][..], flags].concat());
        assert_eq!(
            generated.code, 0,
            "meshlife constraint {flags:?}: {generated:?}"
        );
        self.write(file, &generated.stdout);
    }
}

// Fixtures. Predicted rule behaviour from rules.md: a template with
// `sidecar.istio.io/inject: "true"`, classic sidecars and no hold is ML101 (warning); a Job so
// meshed has no exit mechanism either, so also ML301 (error) and ML303 (info, no deadline).
// Both keep classic sidecars with `sidecar.istio.io/nativeSidecar: "false"`, so that they hold
// on today's releases, which a run without facts judges as.

/// An Istio-meshed Deployment without hold: exactly ML101.
pub fn meshed_deployment(name: &str, namespace: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels:
        app: {name}
        sidecar.istio.io/inject: "true"
      annotations:
        sidecar.istio.io/nativeSidecar: "false"
    spec:
      containers:
      - name: app
        image: registry.example/app:1
"#
    )
}

/// A Job meshed with classic Istio: ML101, ML301 (error) and ML303.
pub fn meshed_job(name: &str, namespace: &str) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: {namespace}
spec:
  template:
    metadata:
      labels:
        sidecar.istio.io/inject: "true"
      annotations:
        sidecar.istio.io/nativeSidecar: "false"
    spec:
      restartPolicy: Never
      containers:
      - name: task
        image: registry.example/task:1
"#
    )
}

/// A Deployment no mesh touches: no findings.
pub fn plain_deployment(name: &str, namespace: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: app
        image: registry.example/app:1
"#
    )
}

/// A Deployment in `namespace` that only the namespace's injection label can mesh, with classic
/// sidecars there: ML101.
pub fn unlabelled_deployment(name: &str, namespace: &str) -> String {
    plain_deployment(name, namespace).replace(
        "      labels: {app: ",
        "      annotations: {sidecar.istio.io/nativeSidecar: \"false\"}\n      labels: {app: ",
    )
}

pub fn namespace(name: &str, labels: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\n")
}

pub fn stream(documents: &[String]) -> String {
    documents.join("---\n")
}

pub fn sorted(mut rules: Vec<String>) -> Vec<String> {
    rules.sort();
    rules
}

/// `text` without the classic-sidecar opt-out (`sidecar.istio.io/nativeSidecar: "false"`,
/// `config.linkerd.io/proxy-enable-native-sidecar: "false"`) the classic examples carry, and
/// without an `annotations:` key it leaves empty: the manifest as the cluster's own default
/// would inject it, for tests about what the versions decide.
pub fn without_classic_opt_out(text: &str) -> String {
    let opt_outs = [
        "sidecar.istio.io/nativeSidecar: \"false\"",
        "config.linkerd.io/proxy-enable-native-sidecar: \"false\"",
    ];
    let indent = |line: &str| line.len() - line.trim_start().len();
    let lines: Vec<&str> = text.lines().collect();
    let mut kept: Vec<&str> = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if !opt_outs.contains(&line.trim()) {
            kept.push(line);
            continue;
        }
        let next_is_sibling = lines
            .get(index + 1)
            .is_some_and(|next| indent(next) == indent(line));
        if !next_is_sibling
            && kept
                .last()
                .is_some_and(|last| last.trim() == "annotations:")
        {
            kept.pop();
        }
    }
    kept.join("\n") + "\n"
}
