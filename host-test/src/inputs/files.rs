//! The one way the CLI reads a file: manifests, stdin, constraints, modules, suites, the files a
//! suite names, TLS material. Every read here is refused unless it is of a regular file (stdin:
//! a pipe, a socket or a redirected file) and is capped in size, so a symlink to `/dev/zero`, a
//! FIFO nobody writes to or a runaway file cannot grow memory without end or hang a run (or the
//! server, which shares these readers).
//!
//! The file is opened first and then asked what it is (`fstat` of the open file), so what is
//! checked is what is read even when the path is swapped in between; it is opened with
//! `O_NONBLOCK`, so the open of a FIFO cannot block either. A cheap `stat` before the open
//! keeps meshlife from opening a device at all in the usual case (opening some devices has
//! effects of its own, a tape rewinds, a watchdog starts).

use std::fmt;
use std::fs::{File, Metadata};
use std::io::{self, IsTerminal, Read};
use std::path::Path;
use std::str::FromStr;

/// The default cap on one file: 256 MiB. A single object can be 3 MiB at most (the API
/// server's request limit), but one file holds many: a rendered chart is a few MB, a
/// `kubectl get -A -o yaml` export of a large cluster can be a hundred or more. 256 MiB takes
/// the largest such export in while refusing `/dev/zero` or a runaway log before it eats the
/// machine. docs/cli.md says the same.
pub const DEFAULT_MAX_FILE_SIZE: FileSize = FileSize(256 * 1024 * 1024);

/// How many bytes one read may return; parsed from `--max-file-size` (`256MiB`, `64M`, `1G`,
/// `500k`, `1048576`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileSize(pub u64);

impl FileSize {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl Default for FileSize {
    fn default() -> FileSize {
        DEFAULT_MAX_FILE_SIZE
    }
}

const UNITS: [(&str, u64); 4] = [
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("bytes", 1),
];

/// In the largest unit that divides it exactly (`256 MiB`, `1500 bytes`), so a message shows the
/// cap as it was given.
impl fmt::Display for FileSize {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (unit, size) = UNITS
            .iter()
            .find(|(_, size)| self.0 != 0 && self.0.is_multiple_of(*size))
            .copied()
            .unwrap_or(("bytes", 1));
        if self.0 == 1 {
            return write!(formatter, "1 byte");
        }
        write!(formatter, "{} {unit}", self.0 / size)
    }
}

impl FromStr for FileSize {
    type Err = String;

    /// Binary units whatever the spelling (`k`, `K`, `KB`, `KiB` are all 1024): a cap is a
    /// bound, not an accounting figure, and users write `64M` meaning `64MiB`.
    fn from_str(text: &str) -> Result<FileSize, String> {
        let text = text.trim();
        let digits = text
            .find(|character: char| !character.is_ascii_digit())
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(digits);
        let number: u64 = number.parse().map_err(|_| {
            format!(
                "{text:?} is not a size: give a number of bytes, or one with a unit (64MiB, 1G)"
            )
        })?;
        let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            _ => {
                return Err(format!(
                    "{text:?}: unknown unit {unit:?} (use bytes, KiB, MiB or GiB)"
                ));
            }
        };
        let size = number
            .checked_mul(multiplier)
            .ok_or_else(|| format!("{text:?} is too large"))?;
        if size == 0 {
            return Err("the cap must be at least 1 byte".into());
        }
        Ok(FileSize(size))
    }
}

/// The cap of a read and the flag that sets it, for the message that names both.
#[derive(Clone, Copy, Debug)]
pub struct ReadLimit {
    pub max: FileSize,
    /// `Some("--max-file-size")` when the command has the flag; commands without it say only
    /// the cap.
    pub flag: Option<&'static str>,
}

impl ReadLimit {
    /// The cap `--max-file-size` set.
    pub fn flag(max: FileSize) -> ReadLimit {
        ReadLimit {
            max,
            flag: Some("--max-file-size"),
        }
    }
}

impl Default for ReadLimit {
    /// For commands without the flag (`serve`, `install`, `build`, `bench`).
    fn default() -> ReadLimit {
        ReadLimit {
            max: DEFAULT_MAX_FILE_SIZE,
            flag: None,
        }
    }
}

/// Why a file was not read. Its Display does not repeat the file: the caller names it.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// A FIFO, a device, a socket or a folder where a file was wanted; the kind in words.
    NotRegular(&'static str),
    TooLarge(ReadLimit),
    /// Stdin is a terminal: nothing is being piped in, and waiting for typing would hang.
    Terminal,
    NotUtf8(std::string::FromUtf8Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(error) => write!(formatter, "cannot read: {error}"),
            ReadError::NotRegular(kind) => {
                write!(formatter, "not a regular file but {kind}: not read")
            }
            ReadError::TooLarge(limit) => {
                write!(formatter, "larger than {}", limit.max)?;
                match limit.flag {
                    Some(flag) => write!(formatter, " (the {flag} cap): not read"),
                    None => write!(
                        formatter,
                        ", the most meshlife reads from one file: not read"
                    ),
                }
            }
            ReadError::Terminal => formatter.write_str(
                "is a terminal: pipe manifests in (`helm template CHART | meshlife check -`), \
                 or name files and folders instead of `-`",
            ),
            ReadError::NotUtf8(error) => write!(formatter, "not UTF-8 text ({error})"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<io::Error> for ReadError {
    fn from(error: io::Error) -> ReadError {
        ReadError::Io(error)
    }
}

/// The kind of a file that is not a regular one, in words for a message; `None` for a regular
/// file.
pub fn irregular_kind(metadata: &Metadata) -> Option<&'static str> {
    let kind = metadata.file_type();
    if kind.is_file() {
        return None;
    }
    if kind.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if kind.is_char_device() {
            return Some("a character device");
        }
        if kind.is_block_device() {
            return Some("a block device");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a file")
}

/// The bytes of the regular file at `path` (a symlink to one is fine), at most `limit`.
pub fn read_bytes(path: &Path, limit: ReadLimit) -> Result<Vec<u8>, ReadError> {
    // Before opening, so a device is not even opened; the fstat below is the check that counts.
    if let Some(kind) = irregular_kind(&std::fs::metadata(path)?) {
        return Err(ReadError::NotRegular(kind));
    }
    let file = open_without_blocking(path)?;
    let metadata = file.metadata()?;
    if let Some(kind) = irregular_kind(&metadata) {
        return Err(ReadError::NotRegular(kind));
    }
    read_capped(file, Some(metadata.len()), limit)
}

/// [`read_bytes`] as UTF-8 text.
pub fn read_text(path: &Path, limit: ReadLimit) -> Result<String, ReadError> {
    String::from_utf8(read_bytes(path, limit)?).map_err(ReadError::NotUtf8)
}

/// All of stdin, at most `limit`. A terminal or a folder on stdin is refused; a pipe, a socket,
/// a file or a device redirected in is read up to the cap (`< /dev/null` is an empty input,
/// `< /dev/zero` ends at the cap).
pub fn read_stdin(limit: ReadLimit) -> Result<Vec<u8>, ReadError> {
    let stdin = io::stdin();
    if stdin.is_terminal() {
        return Err(ReadError::Terminal);
    }
    let mut known_length = None;
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        // fstat of fd 0 through a duplicate, which shares the open file and reads nothing.
        let metadata = File::from(stdin.as_fd().try_clone_to_owned()?).metadata()?;
        if metadata.is_dir() {
            return Err(ReadError::NotRegular("a folder"));
        }
        if metadata.is_file() {
            known_length = Some(metadata.len());
        }
    }
    read_capped(stdin.lock(), known_length, limit)
}

/// Reads to the end, refusing more than `limit` bytes; `known_length` (a regular file's size)
/// refuses a file known too large without reading it, and sizes the buffer once.
fn read_capped(
    reader: impl Read,
    known_length: Option<u64>,
    limit: ReadLimit,
) -> Result<Vec<u8>, ReadError> {
    let max = limit.max.bytes();
    if known_length.is_some_and(|length| length > max) {
        return Err(ReadError::TooLarge(limit));
    }
    // One byte past the cap tells "exactly the cap" from "more" (a file can grow after fstat).
    let capacity = known_length.map_or(0, |length| length.saturating_add(1));
    let mut bytes = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    reader.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge(limit));
    }
    Ok(bytes)
}

#[cfg(unix)]
fn open_without_blocking(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // Without O_NONBLOCK, opening a FIFO for reading waits for a writer, possibly forever. On a
    // regular file the flag changes nothing; anything else is refused right after the open.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_without_blocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// A path as a report can show it: itself when it is UTF-8, else with each byte that is not
/// UTF-8 escaped as `\xNN`, so two such names stay apart and the user can find the file.
pub fn escaped_path(path: &Path) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    let mut shown = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        shown.push_str(chunk.valid());
        for byte in chunk.invalid() {
            shown.push_str(&format!("\\x{byte:02x}"));
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units_and_print_as_given() {
        for (text, bytes) in [
            ("256MiB", 256 << 20),
            ("64M", 64 << 20),
            ("1g", 1 << 30),
            ("500k", 500 << 10),
            ("1048576", 1 << 20),
            ("12 KB", 12 << 10),
        ] {
            assert_eq!(text.parse::<FileSize>(), Ok(FileSize(bytes)), "{text}");
        }
        for text in ["", "0", "MiB", "-1", "12 parsecs", "99999999999999999999G"] {
            assert!(text.parse::<FileSize>().is_err(), "{text}");
        }
        assert_eq!(DEFAULT_MAX_FILE_SIZE.to_string(), "256 MiB");
        assert_eq!(FileSize(1500).to_string(), "1500 bytes");
        assert_eq!(FileSize(3 << 10).to_string(), "3 KiB");
    }

    #[test]
    fn a_read_stops_at_the_cap() {
        let folder = tempfile::tempdir().expect("a temp dir");
        let path = folder.path().join("f.yaml");
        std::fs::write(&path, "a: 1\n").expect("write");
        let limit = |bytes| ReadLimit::flag(FileSize(bytes));
        assert_eq!(read_text(&path, limit(5)).expect("fits"), "a: 1\n");
        let error = read_text(&path, limit(4)).expect_err("too large");
        assert_eq!(
            error.to_string(),
            "larger than 4 bytes (the --max-file-size cap): not read"
        );
        // A device has no length to check first: the cap ends its read.
        let error =
            read_capped(io::repeat(0), None, limit(1 << 10)).expect_err("an endless stream");
        assert!(matches!(error, ReadError::TooLarge(_)), "{error}");
    }

    #[cfg(unix)]
    #[test]
    fn only_regular_files_are_read() {
        let error = read_bytes(Path::new("/dev/zero"), ReadLimit::default()).expect_err("device");
        assert_eq!(
            error.to_string(),
            "not a regular file but a character device: not read"
        );
        let folder = tempfile::tempdir().expect("a temp dir");
        let error = read_bytes(folder.path(), ReadLimit::default()).expect_err("folder");
        assert_eq!(
            error.to_string(),
            "not a regular file but a folder: not read"
        );
        // A symlink to a regular file is that file.
        let target = folder.path().join("t.yaml");
        std::fs::write(&target, "x").expect("write");
        let link = folder.path().join("l.yaml");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert_eq!(read_text(&link, ReadLimit::default()).expect("read"), "x");
    }

    #[cfg(unix)]
    #[test]
    fn names_that_are_not_utf8_are_escaped() {
        use std::os::unix::ffi::OsStrExt;
        let path = Path::new(std::ffi::OsStr::from_bytes(b"deploy/caf\xe9.yaml"));
        assert_eq!(escaped_path(path), "deploy/caf\\xe9.yaml");
        assert_eq!(escaped_path(Path::new("caf\u{e9}.yaml")), "caf\u{e9}.yaml");
    }
}
