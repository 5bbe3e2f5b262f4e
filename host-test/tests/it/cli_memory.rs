//! What a long stream costs in memory. `meshlife check` holds every object until its report;
//! held as parsed trees, a stream of small documents took 30 to 40 times its size (issue 13:
//! 2.9 GB for 61 MB). Each object is now held as its JSON text.

#![cfg(target_os = "linux")]

use crate::cli_support;

use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use cli_support::Workspace;

/// A run's exit status and the peak resident memory of its process, in bytes, from `wait4`:
/// that child's own figure, whatever else the test process runs. wait4 reaps the child, so
/// `Child::wait` is not called.
#[allow(clippy::zombie_processes)]
fn run_measuring_peak_memory(workspace: &Workspace, args: &[&str]) -> (i32, u64) {
    let output = File::create(workspace.path().join("stdout.txt")).expect("stdout file");
    let child = Command::new(env!("CARGO_BIN_EXE_meshlife"))
        .args(args)
        .current_dir(workspace.path())
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(Stdio::null())
        .spawn()
        .expect("the meshlife binary runs");
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: the pid is our unreaped child; `status` and `usage` are valid out-pointers.
    let reaped = unsafe {
        libc::wait4(
            child.id() as libc::pid_t,
            &mut status,
            0,
            usage.as_mut_ptr(),
        )
    };
    assert_eq!(reaped, child.id() as libc::pid_t, "wait4 reaps the run");
    // SAFETY: wait4 succeeded, so it filled `usage`.
    let usage = unsafe { usage.assume_init() };
    let code = std::process::ExitStatus::from_raw(status)
        .code()
        .unwrap_or(-1);
    // Linux gives ru_maxrss in kibibytes.
    (code, usage.ru_maxrss as u64 * 1024)
}

#[test]
fn a_long_stream_of_small_documents_is_held_in_a_few_times_its_size() {
    let workspace = Workspace::new();
    let mut text = String::new();
    for index in 0..100_000 {
        let _ = write!(
            text,
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-{index}\n  \
             namespace: team-{}\ndata:\n  key: value-{index}\n",
            index % 10
        );
    }
    workspace.write("stream.yaml", &text);
    let (code, peak) = run_measuring_peak_memory(&workspace, &["check", "stream.yaml"]);
    let stdout = std::fs::read_to_string(workspace.path().join("stdout.txt")).unwrap();
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("100000 objects checked in 1 file"),
        "{stdout}"
    );
    // About 8 times the input since the objects are held as text (85 MB for 10.5 MB, a
    // release build; 9 times for a debug build run alone), 32 times before (334 MB). The bound
    // sits between, with room for a debug build's larger binary and for glibc's malloc, which
    // opens another arena whenever a thread finds one locked: with the whole suite running on
    // two cores the parsing threads are preempted holding locks more often, and the same run
    // peaked at 16.2 and 16.5 times its size.
    let size = text.len() as u64;
    assert!(
        peak < 24 * size,
        "peak resident memory {} MB for a {} MB stream: {:.1} times its size",
        peak >> 20,
        size >> 20,
        peak as f64 / size as f64
    );
}
