//! Go durations (`5s`, `1m30s`, `500ms`, `1.5h`), as Istio and Linkerd read them.

/// Go's largest duration, `1<<63 - 1` nanoseconds, as Go prints it.
const MAX_GO_DURATION: &str = "2562047h47m16.854775807s";

/// Parses a Go duration into whole milliseconds (sub-millisecond parts are dropped).
/// Negative durations are refused: no lifecycle setting can be negative.
///
/// Why a port rather than a looser reader: Istio reads ProxyConfig durations through
/// golang/protobuf's jsonpb, which calls `time.ParseDuration` (jsonpb/decode.go, case
/// "Duration", golang/protobuf v1.5.4, the version Istio's go.mod pins), and Linkerd reads its
/// annotations with `time.ParseDuration` too. So this follows `ParseDuration` of Go's
/// src/time/format.go step by step: the same overflow checks (nothing beyond `1<<63 - 1` ns,
/// about 292 years, which Istio refuses as "bad Duration"), and the same float64 arithmetic for
/// fractions, so that a value on a millisecond boundary rounds as Go rounds it. Multiplying
/// floats adds no float parsing code to the module.
pub fn parse_go_duration(text: &str) -> Result<u64, String> {
    let invalid = || format!("invalid duration \"{text}\"");
    let trimmed = text.trim();
    if trimmed == "0" {
        return Ok(0);
    }
    if trimmed.is_empty() {
        return Err("empty duration".into());
    }
    let mut rest = trimmed.strip_prefix('+').unwrap_or(trimmed);
    if rest.starts_with('-') {
        return Err(format!("negative duration \"{text}\""));
    }
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let too_long = || format!("duration \"{text}\" is longer than Go's largest, {MAX_GO_DURATION}");
    const LIMIT: u64 = 1 << 63;
    let mut total_ns: u64 = 0;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        let whole_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let whole = leading_int(&rest[..whole_len]).ok_or_else(too_long)?;
        rest = &rest[whole_len..];
        let mut fraction = (0u64, 1f64);
        let mut has_fraction = false;
        if let Some(after_point) = rest.strip_prefix('.') {
            let digits_len = after_point
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(after_point.len());
            fraction = leading_fraction(&after_point[..digits_len]);
            has_fraction = digits_len > 0;
            rest = &after_point[digits_len..];
        }
        if whole_len == 0 && !has_fraction {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_ns: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("missing unit in duration \"{text}\"")),
            unit => return Err(format!("unknown unit \"{unit}\" in duration \"{text}\"")),
        };
        rest = &rest[unit_len..];
        if whole > LIMIT / unit_ns {
            return Err(too_long());
        }
        let mut value = whole * unit_ns;
        let (numerator, scale) = fraction;
        if numerator > 0 {
            // Go: v += uint64(float64(f) * (float64(unit) / scale)), at most 3.6e12 here.
            value += (numerator as f64 * (unit_ns as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(too_long());
            }
        }
        total_ns = total_ns.checked_add(value).ok_or_else(too_long)?;
        if total_ns > LIMIT {
            return Err(too_long());
        }
    }
    if total_ns > LIMIT - 1 {
        return Err(too_long());
    }
    Ok(total_ns / 1_000_000)
}

/// Go's `leadingInt` over a run of digits: `None` past `1<<63`.
fn leading_int(digits: &str) -> Option<u64> {
    let mut value: u64 = 0;
    for digit in digits.bytes() {
        if value > (1 << 63) / 10 {
            return None;
        }
        value = value * 10 + u64::from(digit - b'0');
        if value > 1 << 63 {
            return None;
        }
    }
    Some(value)
}

/// Go's `leadingFraction` over a run of digits: the digits as an integer and their scale, the
/// digits past int64 precision dropped rather than refused.
fn leading_fraction(digits: &str) -> (u64, f64) {
    let mut value: u64 = 0;
    let mut scale = 1f64;
    for digit in digits.bytes() {
        if value > ((1 << 63) - 1) / 10 {
            break;
        }
        let next = value * 10 + u64::from(digit - b'0');
        if next > 1 << 63 {
            break;
        }
        value = next;
        scale *= 10.0;
    }
    (value, scale)
}

/// Renders milliseconds the way people write them: `5s`, `1m30s`, `500ms`.
pub fn format_ms(ms: u64) -> String {
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let seconds = ms / 1000;
    match (seconds / 60, seconds % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("5s"), Ok(5000));
        assert_eq!(parse_go_duration("1m30s"), Ok(90_000));
        assert_eq!(parse_go_duration("500ms"), Ok(500));
        assert_eq!(parse_go_duration("1.5h"), Ok(5_400_000));
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(parse_go_duration("2h45m"), Ok(9_900_000));
    }

    #[test]
    fn refuses_malformed_durations() {
        for bad in ["", "5", "5x", "abc", "-5s", "s", "1.2.3s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn keeps_to_go_int64_nanosecond_range() {
        // time.ParseDuration's limit: 1<<63-1 ns, 2562047h47m16.854775807s.
        assert_eq!(
            parse_go_duration("9223372036854775807ns"),
            Ok(9_223_372_036_854)
        );
        assert_eq!(
            parse_go_duration("2562047h47m16.854775807s"),
            Ok(9_223_372_036_854)
        );
        for beyond in [
            "9223372036854775808ns",
            "2562047h47m16.854775808s",
            "2562048h",
            "9223372036854775807ns1ns",
            "99999999999999999999999999999999999999999999s",
        ] {
            let error = parse_go_duration(beyond).unwrap_err();
            assert!(
                error.contains("2562047h47m16.854775807s"),
                "{beyond}: {error}"
            );
        }
        // Go computes fractions in float64: 16 nines of a millisecond make 1 ms there (exact
        // arithmetic would say 0), 17 nines 0 (answers of go1 `time.ParseDuration(...)
        // .Milliseconds()`, run for this test).
        assert_eq!(parse_go_duration("0.9999999999999999ms"), Ok(1));
        assert_eq!(parse_go_duration("0.99999999999999999ms"), Ok(0));
        assert_eq!(parse_go_duration("0.999999999999999999999ms"), Ok(1));
        assert_eq!(parse_go_duration("0.6666666666666666666m"), Ok(40_000));
        assert_eq!(parse_go_duration("1.s"), Ok(1000));
        assert_eq!(parse_go_duration(".5s"), Ok(500));
        assert!(parse_go_duration(".s").is_err());
    }

    #[test]
    fn formats_durations() {
        assert_eq!(format_ms(5000), "5s");
        assert_eq!(format_ms(90_000), "1m30s");
        assert_eq!(format_ms(120_000), "2m");
        assert_eq!(format_ms(500), "500ms");
    }
}
