//! Go durations (`5s`, `1m30s`, `500ms`, `1.5h`), as Istio and Linkerd read them.

/// Parses a Go duration into whole milliseconds (sub-millisecond parts are dropped).
/// Negative durations are refused: no lifecycle setting can be negative. Integer arithmetic
/// only, so the wasm module carries no float parsing code.
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
    let mut total_ns: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (whole, fraction) = rest[..number_len]
            .split_once('.')
            .unwrap_or((&rest[..number_len], ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(invalid());
        }
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_ns: u128 = match &rest[..unit_len] {
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
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        // Nine fraction digits are more than any unit can use (ns resolution of seconds).
        let digits = &fraction[..fraction.len().min(9)];
        let fraction_value: u128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| invalid())?
        };
        let scale = 10u128.pow(digits.len() as u32);
        total_ns = total_ns
            .checked_add(whole.checked_mul(unit_ns).ok_or_else(invalid)?)
            .and_then(|sum| sum.checked_add(fraction_value * unit_ns / scale))
            .ok_or_else(invalid)?;
    }
    u64::try_from(total_ns / 1_000_000).map_err(|_| invalid())
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
    fn formats_durations() {
        assert_eq!(format_ms(5000), "5s");
        assert_eq!(format_ms(90_000), "1m30s");
        assert_eq!(format_ms(120_000), "2m");
        assert_eq!(format_ms(500), "500ms");
    }
}
