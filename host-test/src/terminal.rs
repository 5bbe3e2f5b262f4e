//! What the CLI writes: every report goes to stdout through [`write_stdout`], and text that came
//! from a manifest goes through [`printable`] before a terminal or a CI log sees it; a long
//! run's [`Progress`] goes to stderr.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{ErrorKind, IsTerminal, Write};
use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressStyle};

/// Writes `text` to stdout and flushes it.
///
/// A closed pipe (`meshlife check . | head`) is the reader's choice: `Ok`, said nowhere. Any
/// other failure (`> /dev/full`, a closed stdout) is an `Err` sentence: the report was lost, so
/// the run must not look as if it had been read.
pub fn write_stdout(text: &str) -> Result<(), String> {
    if stdout_was_closed() {
        return Err(
            "stdout is closed, so the output has nowhere to go (redirect it to a file or \
             /dev/null instead of closing it)"
                .into(),
        );
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(format!("cannot write the output to stdout: {error}")),
    }
}

/// Rust's runtime reopens a closed stdout on `/dev/null` before `main` (so a write cannot land
/// on whatever file gets descriptor 1 next), which would make a closed stdout an invisible
/// success. It opens it read-write, which no shell redirection (`> /dev/null` is write-only)
/// does, and that tells the two apart.
#[cfg(unix)]
fn stdout_was_closed() -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: fcntl and fstat only read the descriptor's flags and status.
    let flags = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFL) };
    if flags < 0 || flags & libc::O_ACCMODE != libc::O_RDWR {
        return false;
    }
    let mut status = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `status` is a valid out-pointer for one `stat`.
    if unsafe { libc::fstat(libc::STDOUT_FILENO, status.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: fstat succeeded, so it filled `status`.
    let status = unsafe { status.assume_init() };
    let Ok(null) = std::fs::metadata("/dev/null") else {
        return false;
    };
    status.st_mode & libc::S_IFMT == libc::S_IFCHR && status.st_rdev == null.rdev()
}

#[cfg(not(unix))]
fn stdout_was_closed() -> bool {
    false
}

/// `text` with every character that could act on a terminal or a CI log shown as an escape:
/// C0 and C1 controls (a newline in a name could start a `::error::` line in GitHub's log, an
/// ESC could recolour or rewrite the screen), DEL, and the bidirectional overrides that make
/// text read differently from what it is.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        match character {
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            character if needs_escape(character) => {
                let _ = write!(escaped, "\\u{{{:x}}}", character as u32);
            }
            character => escaped.push(character),
        }
    }
    Cow::Owned(escaped)
}

fn needs_escape(character: char) -> bool {
    character.is_control()
        || matches!(character, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The exit codes of every command: one meaning each, whatever the command.
///
/// The command did its job and found nothing wrong: no deny finding at or above `--fail-on`
/// (check), every suite test passed (verify), the output was written, the server stopped cleanly.
pub const EXIT_OK: u8 = 0;
/// The command did its job and the answer is no: a deny finding at or above `--fail-on` (check),
/// a failed test or case (verify), connections still open at the end of `--shutdown-timeout`
/// (serve).
pub const EXIT_FAILED: u8 = 1;
/// The command could not do its job: an input, a flag, a constraint, a suite or the module could
/// not be read or used, the output could not be written, the server could not start.
pub const EXIT_ERROR: u8 = 2;

/// How the user called the program, for its messages and usage: `meshlife`, or `kubectl
/// meshlife` when kubectl runs it as its plugin (an executable named `kubectl-meshlife`).
static PROGRAM: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// The name the program was called by (`meshlife` until [`called_as`] says otherwise).
pub fn program() -> &'static str {
    PROGRAM.get().copied().unwrap_or("meshlife")
}

/// Records how the program was called, from its argv\[0\]: kubectl runs a plugin by its path
/// (`.../kubectl-meshlife`), and the user typed `kubectl meshlife`.
pub fn called_as(argv0: Option<&std::ffi::OsStr>) -> &'static str {
    let plugin = argv0
        .and_then(|path| std::path::Path::new(path).file_stem())
        .and_then(|stem| stem.to_str())
        .is_some_and(|stem| stem == KUBECTL_PLUGIN);
    let name = if plugin {
        "kubectl meshlife"
    } else {
        "meshlife"
    };
    PROGRAM.get_or_init(|| name)
}

/// The executable name kubectl finds the plugin by (`kubectl meshlife` on the command line).
pub const KUBECTL_PLUGIN: &str = "kubectl-meshlife";

/// Messages quote manifests (names, paths, values), so they are made printable: a name cannot
/// write its own line into a CI log or send escape codes to a terminal.
pub(crate) fn print_error(message: impl std::fmt::Display) {
    eprintln!("{}: error: {}", program(), printable(&message.to_string()));
}

/// A warning on stderr: something was judged, or done, in a way the user may not expect.
pub(crate) fn print_warning(message: impl std::fmt::Display) {
    eprintln!(
        "{}: warning: {}",
        program(),
        printable(&message.to_string())
    );
}

/// A note on stderr: what the run did that the report does not say.
pub(crate) fn print_note(message: impl std::fmt::Display) {
    eprintln!("{}: note: {}", program(), printable(&message.to_string()));
}

/// Above this many files a progress bar is worth its flicker (and only on a terminal).
const PROGRESS_MIN_FILES: usize = 300;

/// A long run's progress bar on stderr. It is shown only on a terminal and only for inputs of
/// many files; otherwise every call does nothing.
#[derive(Default)]
pub struct Progress {
    bar: OnceLock<ProgressBar>,
}

impl Progress {
    /// Shows the bar over reading `files` files, if there are enough of them.
    pub fn reading(&self, files: usize) {
        if files > PROGRESS_MIN_FILES && std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(files as u64);
            if let Ok(style) = ProgressStyle::with_template("{msg:10} [{bar:40}] {pos}/{len}") {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message("reading");
            let _ = self.bar.set(bar);
        }
    }

    /// Restarts a shown bar over the next stage's `steps`.
    pub fn stage(&self, message: &'static str, steps: usize) {
        if let Some(bar) = self.bar.get() {
            bar.set_position(0);
            bar.set_length(steps as u64);
            bar.set_message(message);
        }
    }

    pub fn tick(&self) {
        if let Some(bar) = self.bar.get() {
            bar.inc(1);
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}

/// An error with its causes, which say what failed ("Connection refused", the certificate
/// rustls refused) where the error itself says only "client error (Connect)".
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// <https://no-color.org>: a non-empty `NO_COLOR` turns colour off.
pub(crate) fn no_colour_requested() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_overrides_are_escaped_and_plain_text_is_not_copied() {
        assert!(matches!(printable("web-0 café"), Cow::Borrowed(_)));
        assert_eq!(
            printable("a\n::error::x\u{1b}[2J\r\u{9b}\u{202e}"),
            "a\\n::error::x\\u{1b}[2J\\r\\u{9b}\\u{202e}"
        );
    }
}
