//! `POST /validate`: Gatekeeper External Data (`externaldata.gatekeeper.sh/v1beta1`
//! `ProviderRequest` in, `ProviderResponse` out; serving.md §1.1).
//!
//! Every key is answered and echoed as it came: `value` is the module's violation list (`[]`
//! when clean), a per-key `error` says why a key was not evaluated (not an input, too large,
//! deadline). `systemError` is kept for the case where nothing could be evaluated (a request
//! that is not a ProviderRequest, too large, overloaded, unauthenticated). Always HTTP 200:
//! Gatekeeper never reads the status, and any body that is not a ProviderResponse becomes a
//! system error for the whole batch.

use std::sync::Arc;

use bytes::Bytes;
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::exchange::{
    Answer, BodyError, Routes, evaluation_failure, input_shape_problem, json_response,
};
use super::metrics::RequestOutcome;
use super::pool::{KeyOutcome, PendingKey};

pub const PATH: &str = "/validate";

const API_GROUP: &str = "externaldata.gatekeeper.sh";
const RESPONSE_API_VERSION: &str = "externaldata.gatekeeper.sh/v1beta1";

/// The rule id of the module's "cannot evaluate this input" answer.
const INVALID_INPUT_ID: &str = meshlife_policy::catalogue::INVALID_INPUT.id;

#[derive(Deserialize)]
struct ProviderRequest<'a> {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(borrow)]
    request: Option<RequestBody<'a>>,
}

#[derive(Deserialize)]
struct RequestBody<'a> {
    #[serde(default, borrow)]
    keys: Option<Vec<&'a RawValue>>,
}

/// One key: its text, the module's input, and the JSON string it came as, echoed back as it
/// is (decoded once, never escaped again).
#[derive(Debug)]
struct Key<'a> {
    text: Arc<String>,
    as_sent: &'a str,
}

#[derive(Deserialize)]
struct ResultBinding<'a> {
    #[serde(borrow)]
    result: &'a RawValue,
}

/// One key's answer: its violation list, or the reason it has none.
enum Item {
    Value(String),
    Error {
        reason: &'static str,
        message: String,
    },
}

pub async fn validate(
    routes: &Routes,
    body: Result<Bytes, BodyError>,
    connection: &super::listener::ConnectionInfo,
) -> Answer {
    if routes.client_ca && !connection.client_certificate {
        routes.metrics.refused("client_certificate");
        tracing::warn!(peer = %connection.peer, "request without a client certificate refused");
        return system_error(
            "this route requires a client certificate chained to --client-ca (Gatekeeper presents \
             its webhook certificate since 3.9: enable it, or start meshlife serve without \
             --client-ca)",
        );
    }
    let body = match body {
        Ok(body) => body,
        Err(error) => {
            routes.metrics.refused(error.reason());
            tracing::warn!(peer = %connection.peer, %error, "request refused");
            return system_error(&error.to_string());
        }
    };
    let keys = match read_request(&body) {
        Ok(keys) => keys,
        Err(message) => {
            routes.metrics.refused("malformed");
            tracing::warn!(peer = %connection.peer, %message, "malformed ProviderRequest");
            return system_error(&message);
        }
    };

    let mut items: Vec<Option<Item>> = Vec::with_capacity(keys.len());
    let mut evaluable = Vec::new();
    for (index, key) in keys.iter().enumerate() {
        match check_key(&key.text, routes.limits.max_key) {
            Ok(()) => {
                evaluable.push(index);
                items.push(None);
            }
            Err(item) => items.push(Some(item)),
        }
    }
    let mut admission = match routes.pool.admit(evaluable.len()) {
        Ok(admission) => admission,
        Err(refusal) => {
            routes.metrics.refused("overloaded");
            tracing::warn!(keys = keys.len(), %refusal, "request refused");
            return system_error(&refusal.to_string());
        }
    };
    let pending: Vec<(usize, PendingKey)> = evaluable
        .iter()
        .map(|&index| {
            (
                index,
                routes
                    .pool
                    .submit(&mut admission, Arc::clone(&keys[index].text)),
            )
        })
        .collect();
    for (index, key) in pending {
        items[index] = Some(item_of(key.outcome().await, &keys[index].text, routes));
    }

    let mut out = Vec::with_capacity(256 + keys.iter().map(|key| key.as_sent.len()).sum::<usize>());
    out.extend_from_slice(
        br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderResponse","response":{"idempotent":true,"items":["#,
    );
    for (position, (key, item)) in keys.iter().zip(items).enumerate() {
        if position > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"key":"#);
        out.extend_from_slice(key.as_sent.as_bytes());
        match item {
            Some(Item::Value(value)) => {
                routes
                    .metrics
                    .key_done(if value == "[]" { "clean" } else { "violations" });
                out.extend_from_slice(br#","value":"#);
                out.extend_from_slice(value.as_bytes());
            }
            Some(Item::Error { reason, message }) => {
                routes.metrics.key_done(reason);
                out.extend_from_slice(br#","error":"#);
                write_json_string(&mut out, &message);
            }
            None => {
                routes.metrics.key_done("unanswered");
                out.extend_from_slice(br#","error":"internal error: the key was not evaluated""#);
            }
        }
        out.push(b'}');
    }
    out.extend_from_slice(br#"],"systemError":""}}"#);
    Answer {
        response: json_response(StatusCode::OK, out),
        outcome: RequestOutcome::Answered,
    }
}

/// The keys of a ProviderRequest, or why it is not one.
fn read_request(body: &[u8]) -> Result<Vec<Key<'_>>, String> {
    let request: ProviderRequest = serde_json::from_slice(body).map_err(|error| {
        format!("the request is not a ProviderRequest: it is not JSON of that shape ({error})")
    })?;
    if request.kind.as_deref() != Some("ProviderRequest") {
        return Err(format!(
            "the request is not a ProviderRequest: kind is {}",
            describe(request.kind.as_deref())
        ));
    }
    let api_version = request.api_version.as_deref().unwrap_or("");
    if api_version.split('/').next() != Some(API_GROUP) {
        return Err(format!(
            "the request is not a ProviderRequest: apiVersion is {}, expected {RESPONSE_API_VERSION}",
            describe(request.api_version.as_deref())
        ));
    }
    let keys = request
        .request
        .and_then(|body| body.keys)
        .unwrap_or_default();
    keys.into_iter()
        .enumerate()
        .map(|(index, key)| match decode_key(key.get()) {
            Ok(text) => Ok(Key {
                text: Arc::new(text),
                as_sent: key.get(),
            }),
            Err(_) => Err(format!(
                "request.keys[{index}] is {}, not a string: each key is the JSON text of one \
                 module input",
                serde_json::from_str::<Value>(key.get())
                    .map_or("not JSON", |value| json_type(&value))
            )),
        })
        .collect()
}

/// The text of a key's JSON string token (its quotes included), as serde_json decodes it.
fn decode_key(token: &str) -> serde_json::Result<String> {
    match unescape_checked(token) {
        Some(text) => Ok(text),
        None => serde_json::from_str(token),
    }
}

/// A string token serde_json has already checked (read as a `RawValue`), decoded by jumping
/// from backslash to backslash: a key is JSON text inside a JSON string, an escaped quote every
/// few bytes, where this is faster than serde_json's general string reader (profiled under
/// `meshlife bench serve`). `None` for what it leaves to serde_json: a `\u` escape (Go's
/// json.Marshal writes `<`, `>` and `&` so), or anything that is not a string token.
fn unescape_checked(token: &str) -> Option<String> {
    let inner = token.strip_prefix('"')?.strip_suffix('"')?;
    let bytes = inner.as_bytes();
    let mut text = String::with_capacity(inner.len());
    let mut start = 0;
    while let Some(offset) = memchr::memchr(b'\\', &bytes[start..]) {
        let backslash = start + offset;
        text.push_str(&inner[start..backslash]);
        text.push(match bytes.get(backslash + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            _ => return None,
        });
        start = backslash + 2;
    }
    text.push_str(&inner[start..]);
    Some(text)
}

fn describe(value: Option<&str>) -> String {
    match value {
        Some(value) => format!("\"{value}\""),
        None => "missing".into(),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A key over `--max-key` is answered here, as a per-key error, without evaluating it.
fn check_key(key: &str, max_key: usize) -> Result<(), Item> {
    if key.len() > max_key {
        return Err(Item::Error {
            reason: "too_large",
            message: format!(
                "the key is {} bytes, above the server's limit of {max_key} bytes (--max-key)",
                key.len()
            ),
        });
    }
    Ok(())
}

/// A key that is not a module input at all (not JSON, no `review` object) is answered as a
/// per-key error: it is the caller's mistake, not a finding about an object. Checked only when
/// the module's answer holds ML000 (which it gives for such a key), so a good key is read once,
/// by the module.
fn not_an_input(key: &str) -> Option<Item> {
    let detail = input_shape_problem(key)?;
    Some(Item::Error {
        reason: "not_an_input",
        message: format!(
            "the key is not a meshlife input: expected the JSON text of {{\"review\": \
             <AdmissionRequest>, \"parameters\": {{...}}}}, as the meshlife template builds it \
             with json.marshal; {detail}"
        ),
    })
}

fn item_of(outcome: KeyOutcome, key: &str, routes: &Routes) -> Item {
    match outcome {
        KeyOutcome::Evaluated(text) if text.contains(INVALID_INPUT_ID) => {
            not_an_input(key).unwrap_or_else(|| value_item(&text))
        }
        KeyOutcome::Evaluated(text) => value_item(&text),
        KeyOutcome::Failed(failure) => {
            let (reason, message) = evaluation_failure(failure, &routes.limits);
            Item::Error { reason, message }
        }
    }
}

fn value_item(text: &str) -> Item {
    match violation_list(text) {
        Ok(value) => Item::Value(value),
        Err(message) => Item::Error {
            reason: "bad_result",
            message,
        },
    }
}

/// The violations of a result set `[{"result": [...]}]` as one JSON list.
fn violation_list(result_set: &str) -> Result<String, String> {
    let bindings: Vec<ResultBinding> = serde_json::from_str(result_set)
        .map_err(|error| format!("the module's result is not a result set: {error}"))?;
    match bindings.as_slice() {
        [] => Ok("[]".into()),
        [only] if only.result.get().starts_with('[') => Ok(only.result.get().to_string()),
        _ => {
            let mut all: Vec<&RawValue> = Vec::new();
            for binding in &bindings {
                let list: Vec<&RawValue> = serde_json::from_str(binding.result.get())
                    .map_err(|error| format!("the module's result is not a list: {error}"))?;
                all.extend(list);
            }
            serde_json::to_string(&all).map_err(|error| error.to_string())
        }
    }
}

fn write_json_string(out: &mut Vec<u8>, text: &str) {
    // serde_json's escaping, which Go's decoder reads back to the same string.
    let _ = serde_json::to_writer(&mut *out, text);
}

fn system_error(message: &str) -> Answer {
    let body = serde_json::json!({
        "apiVersion": RESPONSE_API_VERSION,
        "kind": "ProviderResponse",
        "response": {"idempotent": true, "items": [], "systemError": message},
    });
    Answer {
        response: json_response(
            StatusCode::OK,
            serde_json::to_vec(&body).unwrap_or_default(),
        ),
        outcome: RequestOutcome::SystemError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_that_are_not_provider_requests_say_why() {
        let wrong_kind = read_request(
            br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"Pod","request":{"keys":[]}}"#,
        );
        assert!(wrong_kind.unwrap_err().contains("kind is \"Pod\""));
        let number_key = read_request(
            br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{"keys":["{}",7]}}"#,
        );
        assert!(
            number_key
                .unwrap_err()
                .contains("request.keys[1] is a number")
        );
        assert!(read_request(b"not json").unwrap_err().contains("not JSON"));
        let empty = read_request(
            br#"{"apiVersion":"externaldata.gatekeeper.sh/v1alpha1","kind":"ProviderRequest","request":{}}"#,
        );
        assert_eq!(empty.unwrap().len(), 0);
        // Go's json.Marshal escapes `<`, `>` and `&`: the key is decoded for the module and
        // echoed as it came, so Gatekeeper finds its own key string again.
        let escaped = read_request(
            br#"{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{"keys":["{\"a\":\"\u003c\"}"]}}"#,
        )
        .unwrap();
        assert_eq!(escaped[0].text.as_str(), r#"{"a":"<"}"#);
        assert_eq!(escaped[0].as_sent, r#""{\"a\":\"\u003c\"}""#);
    }

    #[test]
    fn keys_decode_as_serde_json_decodes_them() {
        for text in [
            "",
            "plain",
            r#"{"review":{"object":{"a":"b\\c"}}}"#,
            "tab\there, line\nbreak, quote \" slash / \u{8}\u{c}\r",
            "ünïcödé ✓ and <&>",
            "\\\\\"\"",
        ] {
            let token = serde_json::to_string(text).unwrap();
            assert_eq!(decode_key(&token).unwrap(), text, "{token}");
            let go_style = token.replace('<', "\\u003c");
            assert_eq!(decode_key(&go_style).unwrap(), text, "{go_style}");
        }
        assert!(decode_key("7").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_key_decodes_as_serde_json_decodes_it(text in "(\\PC|[\"\\\\\u{0}-\u{1f}<>&])*") {
            let token = serde_json::to_string(&text).unwrap();
            proptest::prop_assert_eq!(decode_key(&token).unwrap(), text.clone());
            let go_style = token.replace('<', "\\u003c").replace('&', "\\u0026");
            proptest::prop_assert_eq!(decode_key(&go_style).unwrap(), text);
        }
    }

    #[test]
    fn keys_are_checked_for_size_and_shape() {
        assert!(check_key(r#"{"review":{"kind":{}},"parameters":{}}"#, 100).is_ok());
        assert!(not_an_input(r#"{"review":{"kind":{}},"parameters":{}}"#).is_none());
        for bad in [r#"{"parameters":{}}"#, r#"{"review":"x"}"#, "[1]", "{", ""] {
            assert!(
                matches!(
                    not_an_input(bad),
                    Some(Item::Error {
                        reason: "not_an_input",
                        ..
                    })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            check_key(
                &format!(r#"{{"review":{{"a":"{}"}}}}"#, "x".repeat(200)),
                100
            ),
            Err(Item::Error {
                reason: "too_large",
                ..
            })
        ));
    }

    #[test]
    fn result_sets_become_one_violation_list() {
        assert_eq!(violation_list("[]").unwrap(), "[]");
        assert_eq!(violation_list(r#"[{"result":[]}]"#).unwrap(), "[]");
        assert_eq!(
            violation_list(r#"[{"result":[{"msg":"a"}]},{"result":[{"msg":"b"}]}]"#).unwrap(),
            r#"[{"msg":"a"},{"msg":"b"}]"#
        );
        assert!(violation_list("{").is_err());
    }
}
