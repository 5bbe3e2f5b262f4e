//! Go durations (`5s`, `1m30s`, `500ms`, `1.5h`), as Istio and Linkerd read them.

/// Parses a Go duration into whole milliseconds (sub-millisecond parts are dropped).
/// Negative durations are refused: no lifecycle setting can be negative.
pub fn parse_go_duration(text: &str) -> Result<u64, String> {
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
    let mut total_ns: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." {
            return Err(format!("invalid duration \"{text}\""));
        }
        let value: f64 = number.parse().map_err(|_| format!("invalid duration \"{text}\""))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_ns = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("missing unit in duration \"{text}\"")),
            unit => return Err(format!("unknown unit \"{unit}\" in duration \"{text}\"")),
        };
        rest = &rest[unit_len..];
        total_ns += value * unit_ns;
    }
    Ok((total_ns / 1e6) as u64)
}

/// Renders milliseconds the way people write them: `5s`, `1m30s`, `500ms`.
pub fn format_ms(ms: u64) -> String {
    if ms % 1000 != 0 {
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
