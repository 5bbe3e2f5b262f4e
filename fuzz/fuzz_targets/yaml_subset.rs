//! The YAML subset reader of ProxyConfig annotations (`policy/src/yaml_subset.rs`).
//!
//! What it promises, and so what is asserted: it never panics and stays within its nesting
//! bound; and where it accepts a text, it reads what a YAML parser reads (its module docs: it
//! "covers what users write there", and refuses rather than guesses what it does not support).
//! The reference is serde_yaml_ng, the CLI's YAML library, with the differences the reader
//! documents taken out: floats stay text, keys become strings (JSON has no other keys), and
//! duplicate keys are not compared (serde_yaml_ng refuses them; YAML leaves them undefined).
//! Texts it refuses are not compared: refusing is always allowed.
//!
//! The first runs found that the reader accepted much that YAML refuses and misread block
//! scalars, comments after a quote, `- - a`, `a:\tb` and more: fuzz/regressions/yaml_subset/
//! holds one input of each, all fixed now. `MESHLIFE_FUZZ_YAML_REFUSALS=1` also fails on every
//! text the reader accepts and YAML refuses, to check such fixes.
//!
//! Where go-yaml v2 (Istio's YAML reader, which the reader follows) and YAML 1.2 (serde_yaml_ng)
//! differ, the reader gives go-yaml v2's value, and so the comparison takes it too: YAML 1.1's
//! booleans (`yes`, `off`, `y`) and Go's integers (`010` is 8, `0X1F`, `0b101`, `-0x1F`,
//! `1_000`), as values and as keys (spelled as sigs.k8s.io/yaml spells them).
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshlife_policy::fuzzing::parse_yaml;
use serde_json::Value;
use serde_yaml_ng::Value as Yaml;

/// The reader's `MAX_DEPTH` (32 levels below the top-level value), plus the top-level
/// collection itself and the step where a block value continues as a flow collection.
const DEPTH_BOUND: usize = 34;

fuzz_target!(|input: &[u8]| {
    // Annotation values are JSON strings, so UTF-8.
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let value = match parse_yaml(text) {
        Ok(value) => value,
        Err(problem) => {
            assert!(!problem.trim().is_empty(), "an empty error for {text:?}");
            return;
        }
    };
    assert!(
        depth(&value) <= DEPTH_BOUND,
        "{text:?} read {} levels deep",
        depth(&value)
    );
    if let Some(_reason) = known_open_deviation(text) {
        return;
    }
    // go-yaml skips a leading byte order mark (sigs.k8s.io/yaml v1.6.0 run on such texts), and
    // so does the reader; serde_yaml_ng's libyaml counts it as a column (`\u{feff}a:\n b: 1`
    // is two keys to it) and reads `\u{feff}---` as text. It is compared without the mark.
    let reference_text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let reference = match serde_yaml_ng::from_str::<Yaml>(reference_text) {
        Ok(reference) => reference,
        // Last-wins where YAML leaves it undefined and serde_yaml_ng refuses: not compared.
        Err(error) if error.to_string().contains("duplicate entry") => return,
        // Istio reads the first document of several (the reader too); serde_yaml_ng refuses.
        Err(error) if error.to_string().contains("more than one document") => return,
        // Integers beyond 64 bits: go-yaml reads them (a big.Int or a float), serde_yaml_ng's
        // Value cannot hold them, and the reader keeps them as text (its docs).
        Err(error)
            if error.to_string().contains(" as u128") || error.to_string().contains(" as i128") =>
        {
            return;
        }
        Err(error) if strict_refusals() => {
            panic!("accepted {text:?} as {value}, which YAML refuses: {error}")
        }
        Err(_) => return,
    };
    if let Some(difference) = differs(&value, &reference) {
        panic!("read {text:?} as {value}, YAML reads {reference:?}: {difference}");
    }
});

/// Whether texts the reader accepts and YAML refuses fail the run (see the module docs).
fn strict_refusals() -> bool {
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STRICT
        .get_or_init(|| std::env::var_os("MESHLIFE_FUZZ_YAML_REFUSALS").is_some_and(|v| v == "1"))
}

/// Differences already reported and being fixed in the reader, each skipped so that a run goes
/// on to find new ones: add an entry (naming its file in fuzz/regressions/) when a finding is
/// saved, delete it when its fix lands, and the target holds the fix true. All the findings
/// of the first runs are fixed (yaml_subset.rs has a test for each).
fn known_open_deviation(_text: &str) -> Option<&'static str> {
    None
}

/// Collections nested in `value`, the value itself counted: `1` is 0, `[1]` is 1.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(fields) => 1 + fields.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// How the subset reader's `value` differs from YAML's reading, or `None` when they agree as
/// far as the reader's documented model goes.
fn differs(value: &Value, reference: &Yaml) -> Option<String> {
    match (value, reference) {
        // A tag the reader let through would be a finding of its own, but YAML's value model
        // keeps tagged values apart: say so rather than compare.
        (_, Yaml::Tagged(tagged)) => Some(format!("YAML reads a tag {}", tagged.tag)),
        (Value::Null, Yaml::Null) => None,
        (Value::Bool(a), Yaml::Bool(b)) if a == b => None,
        (Value::Number(a), Yaml::Number(b)) if a.as_i64().is_some() && a.as_i64() == b.as_i64() => {
            None
        }
        // Floats (and integers past i64) stay text: the text must be that number.
        (Value::String(text), Yaml::Number(number)) if number.as_i64().is_none() => {
            let same = match (yaml_float(text), number.as_f64()) {
                (Some(a), Some(b)) => a == b || (a.is_nan() && b.is_nan()),
                _ => false,
            } || number
                .as_u64()
                .is_some_and(|big| go_yaml_v2_unsigned(text) == Some(big));
            (!same).then(|| format!("{text:?} is not the number {number}"))
        }
        (Value::String(a), Yaml::String(b)) if a == b => None,
        // go-yaml v2's readings of plain text YAML 1.2 keeps as text (module docs).
        (Value::Number(number), Yaml::String(text))
            if go_yaml_v2_integer(text).is_some()
                && go_yaml_v2_integer(text) == number.as_i64() =>
        {
            None
        }
        (Value::Bool(flag), Yaml::String(text)) if go_yaml_v2_bool(text) == Some(*flag) => None,
        (Value::Array(items), Yaml::Sequence(reference)) => {
            if items.len() != reference.len() {
                return Some(format!(
                    "{} items, YAML reads {}",
                    items.len(),
                    reference.len()
                ));
            }
            items
                .iter()
                .zip(reference)
                .find_map(|(item, reference)| differs(item, reference))
        }
        (Value::Object(fields), Yaml::Mapping(reference)) => {
            // Keys that are one key to go-yaml v2 (`N` and `n` are both false, `02` and `2`
            // both 2): the last wins there, and serde_yaml_ng keeps both, so no comparison.
            let mut spelled: Vec<String> = reference
                .keys()
                .filter_map(|key| match key {
                    Yaml::String(key) => Some(go_yaml_v2_key(key)),
                    Yaml::Number(number) => Some(number.to_string()),
                    Yaml::Bool(flag) => Some(flag.to_string()),
                    _ => None,
                })
                .collect();
            let strings = spelled.len();
            spelled.sort();
            spelled.dedup();
            if spelled.len() != strings {
                return None;
            }
            let mut keys = Vec::new();
            for (key, reference_value) in reference {
                let key = match key {
                    Yaml::String(key) => key.clone(),
                    Yaml::Null => String::new(),
                    Yaml::Bool(flag) => flag.to_string(),
                    Yaml::Number(number) if number.as_i64().is_some() => number.to_string(),
                    // A float or collection key has no one spelling to compare with.
                    _ => return None,
                };
                let Some(field) = fields
                    .get(&key)
                    .or_else(|| fields.get(&go_yaml_v2_key(&key)))
                else {
                    return Some(format!("no key {key:?}"));
                };
                if let Some(difference) = differs(field, reference_value) {
                    return Some(format!("at {key:?}: {difference}"));
                }
                // Keys as go-yaml v2 spells them: `02` and `2` are one key there.
                keys.push(go_yaml_v2_key(&key));
            }
            keys.sort();
            keys.dedup();
            // Two YAML keys with one spelling as text (`1` and `"1"`) are one JSON key: the
            // counts are not comparable then.
            if keys.len() == reference.len() && keys.len() != fields.len() {
                return Some(format!(
                    "{} keys, YAML reads {}",
                    fields.len(),
                    reference.len()
                ));
            }
            None
        }
        _ => Some(format!("{value} is not YAML's {reference:?}")),
    }
}

/// A YAML float spelling (`1.5`, `-.inf`, `.NaN`, `1e3`) as a number.
fn yaml_float(text: &str) -> Option<f64> {
    let unsigned = text.trim_start_matches(['+', '-']);
    let negative = text.starts_with('-');
    let magnitude = match unsigned {
        ".inf" | ".Inf" | ".INF" => f64::INFINITY,
        ".nan" | ".NaN" | ".NAN" => return Some(f64::NAN),
        _ if unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.') => {
            unsigned.parse().ok()?
        }
        _ => return None,
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// YAML 1.1's booleans as go-yaml v2 (resolve.go `resolveMap`) reads them.
fn go_yaml_v2_bool(text: &str) -> Option<bool> {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

/// An integer as go-yaml v2 reads it: `_` dropped, then Go's `strconv.ParseInt(text, 0, 64)`.
fn go_yaml_v2_integer(text: &str) -> Option<i64> {
    if !text.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-') {
        return None;
    }
    let plain = text.replace('_', "");
    let (negative, unsigned) = match plain.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, plain.strip_prefix('+').unwrap_or(&plain)),
    };
    let (radix, digits) =
        if let Some(hex) = unsigned.strip_prefix("0x").or(unsigned.strip_prefix("0X")) {
            (16, hex)
        } else if let Some(octal) = unsigned.strip_prefix("0o").or(unsigned.strip_prefix("0O")) {
            (8, octal)
        } else if let Some(binary) = unsigned.strip_prefix("0b").or(unsigned.strip_prefix("0B")) {
            (2, binary)
        } else if unsigned.len() > 1 && unsigned.starts_with('0') {
            (8, &unsigned[1..])
        } else {
            (10, unsigned)
        };
    // `0b-101`: go-yaml v2 parses what follows `0b` with a sign allowed.
    let (negative, digits) = match digits.strip_prefix(['-', '+']) {
        Some(rest) if radix == 2 && unsigned.len() == plain.len() => {
            (digits.starts_with('-'), rest)
        }
        _ => (negative, digits),
    };
    // `08`, `-019`: not octal, so a float to go-yaml, the integer it is in JSON.
    let leading_zero_decimal = radix == 8
        && unsigned.len() > 1
        && unsigned.starts_with('0')
        && unsigned.bytes().all(|b| b.is_ascii_digit());
    if !leading_zero_decimal && (digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix))) {
        return None;
    }
    let magnitude = match i128::from_str_radix(digits, radix) {
        Ok(magnitude) => magnitude,
        // `08`, `-019`: not octal, so a float to go-yaml, the integer it is in JSON.
        Err(_) if radix == 8 && unsigned.len() > 1 => unsigned.parse::<i128>().ok()?,
        Err(_) => return None,
    };
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

/// An unsigned integer as go-yaml v2 reads one (`strconv.ParseUint(text, 0, 64)`), for the
/// range past i64.
fn go_yaml_v2_unsigned(text: &str) -> Option<u64> {
    let plain = text.replace('_', "");
    let lower = plain.to_ascii_lowercase();
    match lower.get(..2) {
        Some("0x") => u64::from_str_radix(&plain[2..], 16).ok(),
        Some("0o") => u64::from_str_radix(&plain[2..], 8).ok(),
        Some("0b") => u64::from_str_radix(&plain[2..], 2).ok(),
        _ => plain.parse().ok(),
    }
}

/// A plain key's JSON spelling after go-yaml v2 and sigs.k8s.io/yaml: `yes` is "true", `010`
/// is "8".
fn go_yaml_v2_key(key: &str) -> String {
    match (go_yaml_v2_bool(key), go_yaml_v2_integer(key)) {
        (Some(flag), _) => flag.to_string(),
        (_, Some(number)) => number.to_string(),
        _ => key.to_string(),
    }
}
