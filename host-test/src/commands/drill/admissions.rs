//! The drill's load for an admission webhook server (`--admissions NAMESPACE`): instead of a
//! load pod calling a Service, the drill itself asks the API server to create a pod with
//! `dryRun=All`, at the drill's rate, so every call goes through the admission chain, and
//! through the drilled server's webhook, exactly as the cluster's own requests do. Nothing is
//! stored: a dry run is judged and thrown away.
//!
//! An admission is answered when the API server admits or a webhook denies it; it is lost when
//! the API server reports the webhook's call failed (`failed calling webhook`: refused, reset,
//! timed out) or does not answer in time. A webhook with `failurePolicy: Ignore` loses verdicts
//! silently (the API server admits without it), so a verdict that differs from the first
//! answered one is lost too: give a pod the webhook denies (`--admission-pod`) to see those.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use tokio::task::JoinSet;

use super::calls::{Call, ClientSummary, Connection, Failure};
use super::client::now_ms;

/// The pod created (dry run) when no `--admission-pod` is given: the smallest valid pod. Its
/// image is never pulled, since a dry run schedules nothing.
pub fn default_pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "meshlife-drill-admission-",
            "labels": {"app.kubernetes.io/managed-by": "meshlife-drill"},
        },
        "spec": {"containers": [{"name": "app", "image": "meshlife-drill.invalid/none:0"}]},
    }))
    .unwrap_or_default()
}

/// The pod of `--admission-pod FILE`: one Pod manifest. Its namespace is the drill's
/// `--admissions` one; a fixed name is replaced by a generated one so the dry runs never
/// collide with a pod that exists.
pub fn read_pod(path: &std::path::Path) -> Result<Pod, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("--admission-pod {}: {error}", path.display()))?;
    let value: serde_json::Value = serde_yaml_ng::from_str(&text)
        .map_err(|error| format!("--admission-pod {}: not YAML: {error}", path.display()))?;
    let kind = value.get("kind").and_then(|kind| kind.as_str());
    if kind != Some("Pod") {
        return Err(format!(
            "--admission-pod {}: kind {}: the drill creates a Pod (dry run)",
            path.display(),
            kind.unwrap_or("missing")
        ));
    }
    let mut pod: Pod = serde_json::from_value(value).map_err(|error| {
        format!(
            "--admission-pod {}: not a valid Pod: {error}",
            path.display()
        )
    })?;
    let base = pod
        .metadata
        .name
        .take()
        .or_else(|| pod.metadata.generate_name.take())
        .unwrap_or_else(|| "meshlife-drill-admission".into());
    pod.metadata.generate_name = Some(format!("{}-", base.trim_end_matches('-')));
    pod.metadata.namespace = None;
    pod.metadata.resource_version = None;
    pod.metadata.uid = None;
    Ok(pod)
}

/// The answer to one admission.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Admitted,
    /// A webhook (or a built-in admission plugin) denied it, with the API server's message.
    Denied(u16, String),
}

/// One dry-run creation: its verdict, or why it was lost.
pub async fn admit(api: &Api<Pod>, pod: &Pod, timeout: Duration) -> Result<Verdict, Failure> {
    match create_dry_run(api, pod, timeout).await {
        None => Err(Failure::Timeout),
        Some(Ok(())) => Ok(Verdict::Admitted),
        Some(Err(kube::Error::Api(status))) => classify(status.code, &status.message),
        Some(Err(error)) => Err(Failure::Other(format!(
            "the API server: {}",
            crate::terminal::error_chain(&error)
        ))),
    }
}

/// The creation with dryRun=All: judged by the whole admission chain, stored nowhere. `None`
/// when no answer came within `timeout`.
async fn create_dry_run(
    api: &Api<Pod>,
    pod: &Pod,
    timeout: Duration,
) -> Option<Result<(), kube::Error>> {
    let params = PostParams {
        dry_run: true,
        field_manager: Some("meshlife-drill".into()),
    };
    tokio::time::timeout(timeout, api.create(&params, pod))
        .await
        .ok()
        .map(|created| created.map(drop))
}

/// One admission before the drill: its verdict, or what stops the drill (the drill may not
/// create pods there, the pod is invalid, the webhook already fails), in the API server's words.
pub async fn preflight(api: &Api<Pod>, pod: &Pod, timeout: Duration) -> Result<Verdict, String> {
    match create_dry_run(api, pod, timeout).await {
        None => Err(format!(
            "no answer within --timeout {} ms",
            timeout.as_millis()
        )),
        Some(Ok(())) => Ok(Verdict::Admitted),
        Some(Err(kube::Error::Api(status))) => classify(status.code, &status.message)
            .map_err(|_| format!("HTTP {}: {}", status.code, status.message)),
        Some(Err(error)) => Err(crate::terminal::error_chain(&error)),
    }
}

/// The API server's error answer: a webhook that could not be called is a lost admission (the
/// reason as the HTTP load names it); a denial is an answer.
fn classify(code: u16, message: &str) -> Result<Verdict, Failure> {
    if message.contains("failed calling webhook") {
        let reason = if message.contains("connection refused") {
            Failure::Refused
        } else if message.contains("EOF") || message.contains("connection reset") {
            Failure::Reset
        } else if message.contains("deadline exceeded") || message.contains("Timeout") {
            Failure::Timeout
        } else {
            let tail = message.rsplit(": ").next().unwrap_or(message);
            Failure::Other(format!("the webhook's call failed: {tail}"))
        };
        return Err(reason);
    }
    if (400..500).contains(&code) && message.contains("denied the request") {
        return Ok(Verdict::Denied(code, message.to_string()));
    }
    Err(Failure::Status(code))
}

/// Sends admissions at `rate` per second until `stop` turns true, then waits for those in
/// flight; every one goes to `calls`.
pub async fn send(
    api: Api<Pod>,
    pod: Pod,
    rate: u32,
    timeout: Duration,
    calls: Arc<Mutex<Vec<Call>>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> ClientSummary {
    let api = Arc::new(api);
    let pod = Arc::new(pod);
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / rate.max(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut in_flight = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = ticks.tick() => {
                let (api, pod, calls) = (Arc::clone(&api), Arc::clone(&pod), Arc::clone(&calls));
                in_flight.spawn(async move {
                    let at_ms = now_ms();
                    let started = Instant::now();
                    let outcome = admit(&api, &pod, timeout).await;
                    let call = Call {
                        at_ms,
                        connection: Connection::Admission,
                        latency_us: started.elapsed().as_micros() as u64,
                        status: match &outcome {
                            Ok(Verdict::Admitted) => Some(201),
                            Ok(Verdict::Denied(code, _)) => Some(*code),
                            Err(Failure::Status(code)) => Some(*code),
                            Err(_) => None,
                        },
                        failure: outcome.err(),
                        closed_by_server: false,
                        served_by: None,
                    };
                    if let Ok(mut all) = calls.lock() {
                        all.push(call);
                    }
                });
                while in_flight.try_join_next().is_some() {}
            }
        }
    }
    let drained = in_flight.len() as u64;
    while in_flight.join_next().await.is_some() {}
    let (sent, failed) = calls.lock().map_or((0, 0), |all| {
        (
            all.len() as u64,
            all.iter().filter(|call| call.failed()).count() as u64,
        )
    });
    ClientSummary {
        target: "the API server (dry-run pod creations)".into(),
        rate_per_second: rate,
        sent,
        failed,
        drained,
        stopped_by: "the drill".into(),
    }
}

/// A verdict that differs from the first answered one: with `failurePolicy: Ignore` the API
/// server admits what the webhook would have denied when it cannot call it, so a changed
/// verdict is an admission the webhook lost. `expected` is the preflight's verdict.
pub fn mark_changed_verdicts(calls: &mut [Call], expected_admitted: bool) {
    for call in calls.iter_mut().filter(|call| call.failure.is_none()) {
        let admitted = call.status == Some(201);
        if admitted != expected_admitted {
            call.failure = Some(Failure::Other(if admitted {
                "admitted where the webhook denies: its verdict was skipped (failurePolicy: Ignore)"
                    .into()
            } else {
                "denied where the webhook admits".into()
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_webhook_call_is_lost_and_a_denial_is_an_answer() {
        let refused = r#"Internal error occurred: failed calling webhook "meshlife.dev": failed to call webhook: Post "https://meshlife.meshlife.svc:443/admission?timeout=10s": dial tcp 10.96.0.9:443: connect: connection refused"#;
        assert_eq!(classify(500, refused), Err(Failure::Refused));
        let eof = r#"Internal error occurred: failed calling webhook "meshlife.dev": failed to call webhook: Post "https://meshlife.meshlife.svc:443/admission?timeout=10s": EOF"#;
        assert_eq!(classify(500, eof), Err(Failure::Reset));
        let denied = r#"admission webhook "meshlife.dev" denied the request: ML301 ..."#;
        assert_eq!(
            classify(403, denied),
            Ok(Verdict::Denied(403, denied.into()))
        );
        assert_eq!(
            classify(422, "Pod \"x\" is invalid"),
            Err(Failure::Status(422))
        );
    }

    #[test]
    fn a_changed_verdict_is_a_lost_one() {
        let call = |status| Call {
            at_ms: 0,
            connection: Connection::Admission,
            latency_us: 0,
            status: Some(status),
            failure: None,
            closed_by_server: false,
            served_by: None,
        };
        let mut calls = vec![call(403), call(201), call(403)];
        mark_changed_verdicts(&mut calls, false);
        let failed: Vec<bool> = calls.iter().map(Call::failed).collect();
        assert_eq!(failed, [false, true, false]);
    }
}
