//! Every bound the server keeps, each a flag with a default that fits Gatekeeper's behaviour
//! (serving.md §1.4 and §1.8): nothing a client sends can grow memory or hold a worker without
//! limit.

use std::time::Duration;

use clap::Args;

/// Parses `500ms`, `2s`, `1m30s` (Go's duration syntax, as Kubernetes users write it).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    meshlife_policy::duration::parse_go_duration(text)
        .map(Duration::from_millis)
        .map_err(|error| format!("{error} (examples: 500ms, 2s, 1m30s)"))
}

/// Parses `16MiB`, `512KiB`, `3MB` or a plain byte count.
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|character: char| !character.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let count: usize = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size (examples: 16MiB, 512KiB, 1048576)"))?;
    let multiplier: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "Ki" => 1 << 10,
        "MiB" | "Mi" => 1 << 20,
        "GiB" | "Gi" => 1 << 30,
        "KB" | "K" | "k" => 1_000,
        "MB" | "M" => 1_000_000,
        other => {
            return Err(format!(
                "`{other}` in `{text}` is not a size unit (B, KiB, MiB, GiB, KB, MB)"
            ));
        }
    };
    count
        .checked_mul(multiplier)
        .ok_or_else(|| format!("`{text}` is too large"))
}

#[derive(Args, Debug, Clone)]
pub struct Limits {
    /// Evaluation threads, each with its own warm module instance. Default: one per CPU.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,

    /// Keys that may wait for a worker beyond those being evaluated; a request whose keys do
    /// not fit is answered at once with a systemError saying the server is overloaded.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub queue: usize,

    /// Deadline of one evaluation, enforced inside wasmtime; past it the key gets an error and
    /// the instance is replaced. Well below the Provider's 2 s timeout.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub eval_timeout: Duration,

    /// Largest request body. An escaped UPDATE review of a 3 MiB object must fit.
    #[arg(long, value_name = "SIZE", default_value = "16MiB", value_parser = parse_bytes)]
    pub max_body: usize,

    /// Largest single key (the module's input); larger keys get a per-key error.
    #[arg(long, value_name = "SIZE", default_value = "8MiB", value_parser = parse_bytes)]
    pub max_key: usize,

    /// How long a keep-alive connection may stay idle. Above Gatekeeper's 90 s: Go does not
    /// retry a POST on a connection the server has just closed (golang/go#22158).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Time from a request's first byte to its complete headers, and for its whole body.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub read_timeout: Duration,

    /// Time for a TLS handshake.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub handshake_timeout: Duration,

    /// Open connections at most. At the limit a new connection is still accepted and one not
    /// being answered gives way: of the peer address with the most connections, a TLS
    /// handshake unfinished after 1 s first, then an idle one, then a newer handshake, then one
    /// still sending its request.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
}

/// Raises the soft limit of open files to the hard one, as Go's runtime does for every Go
/// server: the default soft limit (1024 on most distributions) is below `--max-connections`
/// plus the server's own files, and an accept that fails for descriptors stalls every caller.
/// Returns the soft limit now in force.
pub fn raise_open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Some(raised.rlim_cur);
        }
    }
    Some(limit.rlim_cur)
}

impl Limits {
    pub fn worker_count(&self) -> usize {
        self.workers.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_as_users_write_them() {
        assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
        assert_eq!(parse_bytes("512KiB"), Ok(512 << 10));
        assert_eq!(parse_bytes("3MB"), Ok(3_000_000));
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert!(parse_bytes("lots").unwrap_err().contains("not a size"));
        assert!(
            parse_bytes("3 parsecs")
                .unwrap_err()
                .contains("not a size unit")
        );
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("invalid duration")
        );
    }
}
