//! Reading one document (YAML or JSON) into a JSON value the way the API server would take it.
//!
//! serde_json's own `Value` reading keeps the last of duplicate keys, turns `.inf` and `.nan`
//! into `null` when written out, rounds integers beyond 64 bits into floats, and stops at 128
//! levels even inside fields the module never reads. Here each of those is a refusal naming
//! the field, and nesting past [`KEPT_DEPTH`] is skipped instead of refused.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Levels kept in the value; deeper subtrees become `null`. The module refuses kept nesting
/// past `MAX_DEPTH` (64) levels of its input and skips every other subtree unread, so what is
/// cut here changes no verdict: a deep field the module reads still shows 64 levels of nesting
/// and is refused by the module itself, as in the cluster. The margin covers the input's
/// `review.object` envelope and Lists around the object. Below serde_yaml_ng's fixed limit of
/// 128, so that limit never fires.
pub(super) const KEPT_DEPTH: usize = 100;

/// A value the API server would not take, found while reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ValueProblem {
    /// Dotted path, `spec.template.spec.containers[0].ports[0].containerPort`, the form of an
    /// ML000 finding's path; empty for the document itself.
    pub field: String,
    pub message: String,
}

thread_local! {
    // The problem behind the last error raised here: the parsers carry errors as text, the
    // report wants the field apart.
    static PROBLEM: RefCell<Option<ValueProblem>> = const { RefCell::new(None) };
}

/// Reads a value with the checks; on an error, the problem when it was one of ours.
pub(super) fn read<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Value, (D::Error, Option<ValueProblem>)> {
    PROBLEM.with(|problem| problem.borrow_mut().take());
    ValueSeed {
        path: &Path::Root,
        depth: 0,
    }
    .deserialize(deserializer)
    .map_err(|error| (error, PROBLEM.with(|problem| problem.borrow_mut().take())))
}

/// [`read`] as a `Deserialize` type, for serde_json's stream of concatenated values.
pub(super) struct Checked(pub Value);

impl<'de> de::Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Checked, D::Error> {
        ValueSeed {
            path: &Path::Root,
            depth: 0,
        }
        .deserialize(deserializer)
        .map(Checked)
    }
}

/// The problem behind the last error of [`Checked`] on this thread.
pub(super) fn take_problem() -> Option<ValueProblem> {
    PROBLEM.with(|problem| problem.borrow_mut().take())
}

enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(Path::Root, key) => write!(formatter, "{key}"),
            Path::Key(parent, key) => write!(formatter, "{parent}.{key}"),
            Path::Index(parent, index) => write!(formatter, "{parent}[{index}]"),
        }
    }
}

fn refuse<E: de::Error>(path: &Path<'_>, message: String) -> E {
    let error = E::custom(&message);
    PROBLEM.with(|problem| {
        *problem.borrow_mut() = Some(ValueProblem {
            field: path.to_string(),
            message,
        })
    });
    error
}

#[derive(Clone, Copy)]
struct ValueSeed<'a> {
    path: &'a Path<'a>,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        if self.depth >= KEPT_DEPTH {
            // Skipped iteratively by both parsers, at any depth.
            <IgnoredAny as de::Deserialize>::deserialize(deserializer)?;
            return Ok(Value::Null);
        }
        deserializer.deserialize_any(self)
    }
}

/// The largest magnitude a float may have and still stand for itself: beyond it, an integral
/// number is one a YAML or JSON reader rounded from an integer literal beyond 64 bits.
const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a value JSON can hold")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Value, E> {
        i64::try_from(value)
            .map(|value| Value::Number(value.into()))
            .map_err(|_| refuse(self.path, beyond_64_bits(&value.to_string())))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Value, E> {
        u64::try_from(value)
            .map(|value| Value::Number(value.into()))
            .map_err(|_| refuse(self.path, beyond_64_bits(&value.to_string())))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        if !value.is_finite() {
            return Err(refuse(
                self.path,
                format!(
                    "`{}` is not a number JSON can hold: the API server refuses it",
                    if value.is_nan() {
                        ".nan"
                    } else if value > 0.0 {
                        ".inf"
                    } else {
                        "-.inf"
                    }
                ),
            ));
        }
        if value.fract() == 0.0 && value.abs() >= TWO_TO_63 {
            return Err(refuse(self.path, beyond_64_bits(&format!("{value:e}"))));
        }
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let path = Path::Index(self.path, items.len());
            let seed = ValueSeed {
                path: &path,
                depth: self.depth + 1,
            };
            match seq.next_element_seed(seed)? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = Path::Key(self.path, &key);
            if fields.contains_key(&key) {
                // Raised while reading the second value, so the parser's position (and the line
                // it reports) is the duplicate's, not the mapping's.
                return map.next_value_seed(Duplicate { path: &path });
            }
            let value = map.next_value_seed(ValueSeed {
                path: &path,
                depth: self.depth + 1,
            })?;
            fields.insert(key, value);
        }
        Ok(Value::Object(fields))
    }
}

fn beyond_64_bits(literal: &str) -> String {
    format!(
        "the number {literal} is beyond the 64-bit integers the API server holds (it would \
         be rounded); write it in range, or quote it if it is meant as text"
    )
}

/// Refuses the value of a repeated key. Through `deserialize_any`, so that the YAML parser
/// marks the error with the value's position.
struct Duplicate<'a> {
    path: &'a Path<'a>,
}

impl<'de> DeserializeSeed<'de> for Duplicate<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Duplicate<'_> {
    fn refuse<E: de::Error>(&self) -> E {
        let key = match self.path {
            Path::Key(_, key) => *key,
            _ => "",
        };
        refuse(
            self.path,
            format!(
                "duplicate key `{key}`: the API server's strict field validation (kubectl's \
                 default) refuses it"
            ),
        )
    }
}

impl<'de> Visitor<'de> for Duplicate<'_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("no second value for a key")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Err(self.refuse())
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Err(self.refuse())
    }

    fn visit_some<D: Deserializer<'de>>(self, _: D) -> Result<Value, D::Error> {
        Err(self.refuse())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Value, E> {
        Err(self.refuse())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Value, E> {
        Err(self.refuse())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Value, E> {
        Err(self.refuse())
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Value, E> {
        Err(self.refuse())
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Value, E> {
        Err(self.refuse())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Value, E> {
        Err(self.refuse())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Value, E> {
        Err(self.refuse())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Value, A::Error> {
        Err(self.refuse())
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Value, A::Error> {
        Err(self.refuse())
    }
}
