//! Moments as the inputs write them, read into milliseconds since the Unix epoch (UTC), and the
//! bounds a moment is known within.
//!
//! Kubernetes writes status and event times in RFC 3339 to the second (`metav1.Time`); `kubectl
//! logs --timestamps` prefixes each line with RFC 3339 to the nanosecond in UTC; `kubectl
//! describe` prints `Mon, 02 Jan 2006 15:04:05 -0700` (Go's RFC1123Z) in the reader's local
//! time. Each is read with its offset, so pastes from any time zone line up.

use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::{Rfc2822, Rfc3339};

/// Milliseconds since the Unix epoch, UTC.
pub type Millis = i64;

/// How close a source places a moment: a status time (whole seconds) covers the second after
/// it; a log timestamp is as good as exact.
pub const SECOND: Millis = 1_000;

/// An RFC 3339 time (`2024-01-15T10:00:01Z`, `2024-01-15T11:00:01.123456789+01:00`).
pub fn rfc3339(text: &str) -> Option<Millis> {
    let text = text.trim();
    let parsed = OffsetDateTime::parse(text, &Rfc3339)
        // `2024-01-15 10:00:01.123Z`: the space some aggregators write for the `T`.
        .or_else(|_| {
            if text.len() > 10 && text.as_bytes()[10] == b' ' {
                let mut fixed = text.to_string();
                fixed.replace_range(10..11, "T");
                OffsetDateTime::parse(&fixed, &Rfc3339)
            } else {
                OffsetDateTime::parse(text, &Rfc3339)
            }
        })
        .ok()?;
    Some(millis_of(parsed))
}

/// kubectl describe's `Mon, 15 Jan 2024 11:00:01 +0100`.
pub fn rfc1123z(text: &str) -> Option<Millis> {
    OffsetDateTime::parse(text.trim(), &Rfc2822)
        .ok()
        .map(millis_of)
}

fn millis_of(time: OffsetDateTime) -> Millis {
    (time.unix_timestamp_nanos() / 1_000_000) as Millis
}

/// `2024-01-15T10:00:01.234Z`, for JSON.
pub fn iso(at: Millis) -> String {
    match OffsetDateTime::from_unix_timestamp_nanos(i128::from(at) * 1_000_000) {
        Ok(time) => {
            let (hour, minute, second) = time.to_hms();
            format!(
                "{:04}-{:02}-{:02}T{hour:02}:{minute:02}:{second:02}.{:03}Z",
                time.year(),
                u8::from(time.month()),
                time.day(),
                time.millisecond()
            )
        }
        Err(_) => format!("{at} ms"),
    }
}

/// `10:00:01.234` (UTC), for text; the date is said once, where the timeline begins.
pub fn clock(at: Millis) -> String {
    let full = iso(at);
    match full.get(11..23) {
        Some(clock) => clock.trim_end_matches(".000").to_string(),
        None => full,
    }
}

/// `1.5 s`, `250 ms`, `2 min 5 s`.
pub fn span(ms: Millis) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    if ms < 1_000 {
        format!("{sign}{ms} ms")
    } else if ms < 120_000 {
        let tenths = (ms + 50) / 100;
        if tenths.is_multiple_of(10) {
            format!("{sign}{} s", tenths / 10)
        } else {
            format!("{sign}{}.{} s", tenths / 10, tenths % 10)
        }
    } else {
        format!("{sign}{} min {} s", ms / 60_000, (ms % 60_000) / 1_000)
    }
}

/// Where a moment lies: `earliest..=latest`, either end open when the data does not bound it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bound {
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "iso_option")]
    pub earliest: Option<Millis>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "iso_option")]
    pub latest: Option<Millis>,
}

fn iso_option<S: serde::Serializer>(at: &Option<Millis>, out: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => out.serialize_str(&iso(*at)),
        None => out.serialize_none(),
    }
}

impl Bound {
    /// A moment known to `precision` (a status time's second, a log line's instant).
    pub fn at(at: Millis, precision: Millis) -> Bound {
        Bound {
            earliest: Some(at),
            latest: Some(at + precision.max(1) - 1),
        }
    }

    pub fn between(earliest: Option<Millis>, latest: Option<Millis>) -> Bound {
        Bound { earliest, latest }
    }

    /// Certainly before `other`, allowing `tolerance` for clocks that may disagree.
    pub fn before(&self, other: &Bound, tolerance: Millis) -> bool {
        matches!((self.latest, other.earliest), (Some(mine), Some(theirs)) if mine + tolerance < theirs)
    }

    /// The moment's best single value (its earliest, else its latest), for drawing.
    pub fn point(&self) -> Option<Millis> {
        self.earliest.or(self.latest)
    }

    /// `at 10:00:01.234`, `at 10:00:01 (to the second)`, `between 10:00:01 and 10:00:03`,
    /// `after 10:00:01`, `before 10:00:03`.
    pub fn phrase(&self) -> String {
        match (self.earliest, self.latest) {
            (Some(earliest), Some(latest)) if latest - earliest < 10 => {
                format!("at {}", clock(earliest))
            }
            (Some(earliest), Some(latest)) if latest - earliest < SECOND => {
                format!("at {} (to the second)", clock(earliest))
            }
            (Some(earliest), Some(latest)) => {
                format!("between {} and {}", clock(earliest), clock(latest))
            }
            (Some(earliest), None) => format!("after {}", clock(earliest)),
            (None, Some(latest)) => format!("before {}", clock(latest)),
            (None, None) => "at a moment the data does not tell".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_any_offset_line_up() {
        let utc = rfc3339("2024-01-15T10:00:01Z").unwrap();
        assert_eq!(rfc3339("2024-01-15T11:00:01+01:00"), Some(utc));
        assert_eq!(rfc1123z("Mon, 15 Jan 2024 11:00:01 +0100"), Some(utc));
        assert_eq!(rfc3339("2024-01-15T10:00:01.123456789Z"), Some(utc + 123));
        assert_eq!(rfc3339("2024-01-15 10:00:01.5Z"), Some(utc + 500));
        assert_eq!(rfc3339("2024-01-15T10:00"), None);
        assert_eq!(iso(utc + 5), "2024-01-15T10:00:01.005Z");
        assert_eq!(clock(utc), "10:00:01");
    }

    #[test]
    fn a_status_time_covers_its_second() {
        let start = rfc3339("2024-01-15T10:00:01Z").unwrap();
        let status = Bound::at(start, SECOND);
        let log = Bound::at(start + 400, 1);
        assert!(!status.before(&log, 0), "the same second cannot be ordered");
        assert!(Bound::at(start - 1_000, SECOND).before(&log, 0));
        assert_eq!(status.phrase(), "at 10:00:01 (to the second)");
        assert_eq!(log.phrase(), "at 10:00:01.400");
        assert_eq!(span(1_500), "1.5 s");
        assert_eq!(span(30_000), "30 s");
    }
}
