//! Timelines against the mesh facts (`mesh-lifecycle-background.md`): when the app starts
//! against the proxy's readiness, what each proxy does on SIGTERM, and what becomes of each
//! kind of request.

use meshlife_policy::timeline::{
    Assumptions, EventKind, Outcome, Phase, Request, Timeline, timelines,
};
use serde_json::{Value, json};

const READY: u64 = 2_000;

fn assumptions() -> Assumptions {
    Assumptions {
        proxy_ready_ms: READY,
        init_container_ms: 1_000,
        app_ready_ms: 3_000,
        endpoint_removal_ms: 3_000,
        app_exit_ms: 1_000,
        short_request_ms: 500,
    }
}

/// A Deployment (or `kind`) whose pod template carries `template_meta` and `spec` fields.
fn workload(kind: &str, template_meta: Value, spec: Value) -> Value {
    let mut pod_spec = json!({"containers": [{"name": "web", "image": "web:1"}]});
    pod_spec
        .as_object_mut()
        .unwrap()
        .extend(spec.as_object().unwrap().clone());
    let api = if kind == "Job" { "batch/v1" } else { "apps/v1" };
    json!({"apiVersion": api, "kind": kind, "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"template": {"metadata": template_meta, "spec": pod_spec}}})
}

fn timeline_with(object: Value, parameters: Value) -> Timeline {
    let input =
        json!({"review": {"object": object, "operation": "CREATE"}, "parameters": parameters});
    let mut all = timelines(&serde_json::to_vec(&input).unwrap(), &assumptions()).unwrap();
    assert_eq!(all.len(), 1);
    all.remove(0).timeline
}

fn timeline_of(object: Value) -> Timeline {
    timeline_with(object, json!({}))
}

fn istio(annotations: Value) -> Value {
    json!({"labels": {"sidecar.istio.io/inject": "true"}, "annotations": annotations})
}

fn linkerd(annotations: Value) -> Value {
    let mut annotations = annotations;
    annotations["linkerd.io/inject"] = json!("enabled");
    json!({"annotations": annotations})
}

fn fate(timeline: &Timeline, request: Request) -> (Outcome, Option<(u64, u64)>) {
    let fate = timeline
        .fates
        .iter()
        .find(|fate| fate.request == request)
        .unwrap_or_else(|| panic!("no {request:?} fate in {timeline:#?}"));
    (fate.outcome, fate.window)
}

fn at(timeline: &Timeline, phase: Phase, kind: EventKind) -> u64 {
    timeline
        .events
        .iter()
        .find(|event| event.phase == phase && event.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} in {timeline:#?}"))
        .at_ms
}

fn classic() -> Value {
    json!({"istio": {"nativeSidecars": false}, "linkerd": {"nativeSidecars": false}})
}

fn native() -> Value {
    json!({"istio": {"nativeSidecars": true}, "linkerd": {"nativeSidecars": true},
        "kubernetesMinorVersion": 33})
}

#[test]
fn istio_classic_without_hold_lets_the_app_call_out_before_the_proxy_is_ready() {
    let timeline = timeline_with(
        workload("Deployment", istio(json!({})), json!({})),
        classic(),
    );
    assert_eq!(timeline.mode, "classic sidecar");
    assert_eq!(
        fate(&timeline, Request::StartupOutbound),
        (Outcome::Refused, Some((1_000, 1_000 + READY)))
    );
    // istio-init (predicted) runs first, then proxy and app start together.
    assert_eq!(
        at(&timeline, Phase::Startup, EventKind::CaptureInstalled),
        0
    );
    assert_eq!(
        at(&timeline, Phase::Startup, EventKind::ProxyStarted),
        1_000
    );
    assert_eq!(at(&timeline, Phase::Startup, EventKind::AppStarted), 1_000);
}

#[test]
fn istio_classic_with_hold_starts_the_app_once_the_proxy_is_ready() {
    let template = istio(json!({"proxy.istio.io/config": "holdApplicationUntilProxyStarts: true"}));
    let timeline = timeline_with(workload("Deployment", template, json!({})), classic());
    assert_eq!(timeline.mode, "classic sidecar, app held until ready");
    assert_eq!(fate(&timeline, Request::StartupOutbound).0, Outcome::Served);
    assert_eq!(
        at(&timeline, Phase::Startup, EventKind::AppStarted),
        at(&timeline, Phase::Startup, EventKind::ProxyReady)
    );
}

#[test]
fn istio_native_is_gated_by_its_startup_probe() {
    let timeline = timeline_with(
        workload("Deployment", istio(json!({})), json!({})),
        native(),
    );
    assert_eq!(timeline.mode, "native sidecar");
    assert_eq!(fate(&timeline, Request::StartupOutbound).0, Outcome::Served);
    assert_eq!(
        at(&timeline, Phase::Startup, EventKind::AppStarted),
        1_000 + READY
    );
}

#[test]
fn linkerd_classic_waits_with_await_and_races_without() {
    let held = timeline_with(
        workload("Deployment", linkerd(json!({})), json!({})),
        classic(),
    );
    assert_eq!(held.mode, "classic sidecar, app held until ready");
    assert_eq!(fate(&held, Request::StartupOutbound).0, Outcome::Served);
    let racing = timeline_with(
        workload(
            "Deployment",
            linkerd(json!({"config.linkerd.io/proxy-await": "disabled"})),
            json!({}),
        ),
        classic(),
    );
    assert_eq!(racing.mode, "classic sidecar");
    assert_eq!(fate(&racing, Request::StartupOutbound).0, Outcome::Refused);
}

#[test]
fn linkerd_native_without_await_has_no_startup_probe_to_wait_for() {
    let gated = timeline_with(
        workload("Deployment", linkerd(json!({})), json!({})),
        native(),
    );
    assert_eq!(gated.mode, "native sidecar");
    assert_eq!(fate(&gated, Request::StartupOutbound).0, Outcome::Served);
    let ungated = timeline_with(
        workload(
            "Deployment",
            linkerd(json!({"config.linkerd.io/proxy-await": "disabled"})),
            json!({}),
        ),
        native(),
    );
    assert_eq!(fate(&ungated, Request::StartupOutbound).0, Outcome::Refused);
}

#[test]
fn a_job_completes_only_when_its_classic_proxy_is_told_to_exit() {
    let job = |template: Value, command: Value, parameters: Value| {
        timeline_with(
            workload(
                "Job",
                template,
                json!({"restartPolicy": "Never",
                    "containers": [{"name": "work", "image": "work:1", "command": command}]}),
            ),
            parameters,
        )
    };
    for (template, parameters) in [
        (istio(json!({})), classic()),
        (linkerd(json!({})), classic()),
    ] {
        let never = job(template.clone(), json!(["run"]), parameters.clone());
        let completion = never.completion.expect("a Job has a completion");
        assert!(!completion.completes, "{}", completion.why);
        let native_job = job(template, json!(["run"]), native());
        assert!(native_job.completion.unwrap().completes);
    }
    let quits = job(
        istio(json!({})),
        json!([
            "sh",
            "-c",
            "run && curl -X POST localhost:15020/quitquitquit"
        ]),
        classic(),
    );
    assert!(quits.completion.unwrap().completes);
    let deployment = timeline_of(workload("Deployment", istio(json!({})), json!({})));
    assert!(deployment.completion.is_none());
}

/// A Job that runs to completion gets no requests: its timeline drew endpoint removal, new
/// requests and long-lived streams as a Deployment's does. A Job whose container declares a
/// port selected by a Service of the input keeps them.
#[test]
fn a_job_draws_requests_only_when_it_serves_them() {
    let job = |ports: Value, services: Value| {
        let object = workload(
            "Job",
            istio(json!({})),
            json!({"restartPolicy": "Never",
                "containers": [{"name": "work", "image": "work:1", "ports": ports}]}),
        );
        let input = json!({"review": {"object": object, "operation": "CREATE"},
            "parameters": classic(), "services": services});
        let mut all = timelines(&serde_json::to_vec(&input).unwrap(), &assumptions()).unwrap();
        all.remove(0).timeline
    };
    let has_endpoint = |timeline: &Timeline| {
        timeline
            .events
            .iter()
            .any(|event| event.kind == EventKind::EndpointRemoved)
    };
    let requests = |timeline: &Timeline| -> Vec<Request> {
        timeline.fates.iter().map(|fate| fate.request).collect()
    };
    let service = json!([{"metadata": {"name": "work", "namespace": "shop"},
        "spec": {"selector": {"app": "work"}, "ports": [{"port": 8080}]}}]);

    let batch = job(json!([]), json!([]));
    assert!(!has_endpoint(&batch), "{:?}", batch.events);
    assert!(!requests(&batch).contains(&Request::NewDuringDrain));
    assert!(!requests(&batch).contains(&Request::LongLivedStream));
    // A port alone is not a Service.
    assert!(!has_endpoint(&job(
        json!([{"containerPort": 8080}]),
        json!([])
    )));

    let mut serving = workload(
        "Job",
        istio(json!({})),
        json!({"restartPolicy": "Never",
            "containers": [{"name": "work", "image": "work:1", "ports": [{"containerPort": 8080}]}]}),
    );
    serving["spec"]["template"]["metadata"]["labels"]["app"] = json!("work");
    let input = json!({"review": {"object": serving, "operation": "CREATE"},
        "parameters": classic(), "services": service});
    let serving = timelines(&serde_json::to_vec(&input).unwrap(), &assumptions())
        .unwrap()
        .remove(0)
        .timeline;
    assert!(has_endpoint(&serving));
    assert!(requests(&serving).contains(&Request::LongLivedStream));

    let deployment = timeline_of(workload("Deployment", istio(json!({})), json!({})));
    assert!(has_endpoint(&deployment));
}

fn drain(seconds: u64, grace: u64) -> Timeline {
    let template =
        istio(json!({"proxy.istio.io/config": format!("terminationDrainDuration: {seconds}s")}));
    timeline_with(
        workload(
            "Deployment",
            template,
            json!({"terminationGracePeriodSeconds": grace}),
        ),
        classic(),
    )
}

#[test]
fn the_istio_drain_ends_before_at_or_after_the_grace_period() {
    let shorter = drain(5, 30);
    assert_eq!(at(&shorter, Phase::Shutdown, EventKind::ProxyExit), 5_000);
    assert_eq!(at(&shorter, Phase::Shutdown, EventKind::Sigkill), 30_000);
    let equal = drain(30, 30);
    assert_eq!(at(&equal, Phase::Shutdown, EventKind::ProxyExit), 30_000);
    let longer = drain(45, 30);
    // Killed at the grace period, before the drain ends.
    assert_eq!(at(&longer, Phase::Shutdown, EventKind::ProxyExit), 30_000);
    let end = longer
        .events
        .iter()
        .find(|event| event.kind == EventKind::DrainEnd)
        .unwrap();
    assert!(
        end.what.contains("killed at the grace period"),
        "{}",
        end.what
    );
}

#[test]
fn a_prestop_longer_than_the_drain_outlives_the_proxy() {
    let template = istio(json!({"proxy.istio.io/config": "terminationDrainDuration: 5s"}));
    let timeline = timeline_with(
        workload(
            "Deployment",
            template,
            json!({"containers": [{"name": "web", "image": "web:1",
                "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}}]}),
        ),
        classic(),
    );
    // The app gets SIGTERM at 10 s, after the proxy left at 5 s: new requests routed to the pod
    // meanwhile find no proxy, and a stream is cut when the proxy goes.
    assert_eq!(at(&timeline, Phase::Shutdown, EventKind::ProxyExit), 5_000);
    assert_eq!(at(&timeline, Phase::Shutdown, EventKind::AppExit), 11_000);
    assert_eq!(
        fate(&timeline, Request::LongLivedStream),
        (Outcome::Cut, Some((5_000, 5_000)))
    );
    // The endpoint is gone at 3 s, before anything refuses: new requests are served.
    assert_eq!(fate(&timeline, Request::NewDuringDrain).0, Outcome::Served);
}

/// Seen on a real kubelet v1.35 (the reality stage, docs/rules.md ML405): a preStop that reaches
/// the grace period is abandoned there; the app gets SIGTERM then and SIGKILL 2 s later, the
/// kubelet's least window, so an app needing 3 s is killed at grace + 2 s and one needing 1 s
/// exits.
#[test]
fn a_prestop_reaching_the_grace_period_leaves_the_app_the_kubelets_two_seconds() {
    let object = |seconds: u64, grace: u64| {
        workload(
            "Deployment",
            istio(json!({})),
            json!({"terminationGracePeriodSeconds": grace,
                "containers": [{"name": "web", "image": "web:1",
                "lifecycle": {"preStop": {"exec": {"command": ["sleep", seconds.to_string()]}}}}]}),
        )
    };
    let with_exit = |object: Value, app_exit_ms: u64| {
        let input =
            json!({"review": {"object": object, "operation": "CREATE"}, "parameters": classic()});
        let assumptions = Assumptions {
            app_exit_ms,
            ..assumptions()
        };
        timelines(&serde_json::to_vec(&input).unwrap(), &assumptions)
            .unwrap()
            .remove(0)
            .timeline
    };
    let slow = with_exit(object(8, 5), 3_000);
    assert_eq!(at(&slow, Phase::Shutdown, EventKind::AppExit), 7_000);
    assert_eq!(at(&slow, Phase::Shutdown, EventKind::Sigkill), 7_000);
    let fast = with_exit(object(8, 5), 1_000);
    assert_eq!(at(&fast, Phase::Shutdown, EventKind::AppExit), 6_000);
    assert_eq!(at(&fast, Phase::Shutdown, EventKind::Sigkill), 7_000);
    // A hook well within the grace period: SIGTERM at its end, SIGKILL at the grace period.
    let within = with_exit(object(3, 10), 3_000);
    assert_eq!(at(&within, Phase::Shutdown, EventKind::AppExit), 6_000);
    assert_eq!(at(&within, Phase::Shutdown, EventKind::Sigkill), 10_000);
}

#[test]
fn without_a_prestop_new_requests_during_endpoint_removal_are_refused() {
    let timeline = timeline_with(
        workload("Deployment", istio(json!({})), json!({})),
        classic(),
    );
    assert_eq!(
        fate(&timeline, Request::NewDuringDrain),
        (Outcome::Refused, Some((0, 3_000)))
    );
    assert_eq!(
        fate(&timeline, Request::InFlightAtSigterm).0,
        Outcome::Served
    );
}

#[test]
fn exit_on_zero_active_connections_keeps_the_proxy_until_the_app_is_done() {
    let template = istio(json!({"proxy.istio.io/config":
        "proxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: \"true\"\n"}));
    let timeline = timeline_with(
        workload(
            "Deployment",
            template,
            json!({"containers": [{"name": "web", "image": "web:1",
                "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}}]}),
        ),
        classic(),
    );
    // MINIMUM_DRAIN_DURATION 5 s, then the proxy leaves when the app has (11 s).
    assert_eq!(at(&timeline, Phase::Shutdown, EventKind::ProxyExit), 11_000);
    assert_eq!(
        fate(&timeline, Request::LongLivedStream),
        (Outcome::Cut, Some((11_000, 11_000)))
    );
}

#[test]
fn linkerd_classic_refuses_new_requests_from_sigterm_unless_it_waits() {
    let bare = timeline_with(
        workload("Deployment", linkerd(json!({})), json!({})),
        classic(),
    );
    assert_eq!(
        fate(&bare, Request::NewDuringDrain),
        (Outcome::Refused, Some((0, 3_000)))
    );
    // It still carries what is in flight, and leaves when the app's connections close.
    assert_eq!(fate(&bare, Request::InFlightAtSigterm).0, Outcome::Served);
    assert_eq!(at(&bare, Phase::Shutdown, EventKind::ProxyExit), 1_000);
    let waits = timeline_with(
        workload(
            "Deployment",
            linkerd(json!({"config.alpha.linkerd.io/proxy-wait-before-exit-seconds": "5"})),
            json!({"containers": [{"name": "web", "image": "web:1",
                "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}}]}),
        ),
        classic(),
    );
    assert_eq!(at(&waits, Phase::Shutdown, EventKind::DrainStart), 5_000);
    assert_eq!(fate(&waits, Request::NewDuringDrain).0, Outcome::Served);
}

#[test]
fn native_sidecars_leave_after_the_app() {
    let timeline = timeline_with(
        workload(
            "Deployment",
            istio(json!({})),
            json!({"containers": [{"name": "web", "image": "web:1",
                "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}}]}),
        ),
        native(),
    );
    assert_eq!(at(&timeline, Phase::Shutdown, EventKind::AppExit), 11_000);
    assert_eq!(at(&timeline, Phase::Shutdown, EventKind::ProxyExit), 11_000);
}

/// The app's exit event of a native Istio pod whose one app container states `stop_signal`,
/// on Kubernetes `minor`.
fn app_exit_with_stop_signal(stop_signal: &str, minor: u32) -> (u64, String, u64, Outcome) {
    let mut parameters = native();
    parameters["kubernetesMinorVersion"] = json!(minor);
    let timeline = timeline_with(
        workload(
            "Deployment",
            istio(json!({})),
            json!({"os": {"name": "linux"}, "terminationGracePeriodSeconds": 20,
                "containers": [{"name": "web", "image": "web:1", "lifecycle": {
                    "preStop": {"sleep": {"seconds": 4}}, "stopSignal": stop_signal}}]}),
        ),
        parameters,
    );
    let exit = timeline
        .events
        .iter()
        .find(|event| event.phase == Phase::Shutdown && event.kind == EventKind::AppExit)
        .unwrap();
    (
        exit.at_ms,
        exit.what.clone(),
        at(&timeline, Phase::Shutdown, EventKind::ProxyExit),
        fate(&timeline, Request::InFlightAtSigterm).0,
    )
}

#[test]
fn a_stated_stop_signal_is_named_and_sigkill_and_sigstop_decide_the_exit() {
    // Handled by the app: the usual exit, with its signal named.
    let (exit, what, _, in_flight) = app_exit_with_stop_signal("SIGQUIT", 37);
    assert_eq!((exit, in_flight), (5_000, Outcome::Served));
    assert!(
        what.contains("SIGQUIT at 4s, its lifecycle.stopSignal"),
        "{what}"
    );
    // SIGKILL ends the app at the end of its preStop, cutting what it serves; the native proxy
    // leaves with it.
    let (exit, what, proxy_exit, in_flight) = app_exit_with_stop_signal("SIGKILL", 37);
    assert_eq!((exit, proxy_exit, in_flight), (4_000, 4_000, Outcome::Cut));
    assert!(what.contains("no graceful shutdown"), "{what}");
    // SIGSTOP freezes it until the grace period's SIGKILL.
    let (exit, what, proxy_exit, _) = app_exit_with_stop_signal("SIGSTOP", 37);
    assert_eq!((exit, proxy_exit), (20_000, 20_000));
    assert!(what.contains("frozen at 4s"), "{what}");
    // Below Kubernetes 1.37 the API server drops the field: SIGTERM, and the timeline says so.
    let (exit, what, _, in_flight) = app_exit_with_stop_signal("SIGKILL", 36);
    assert_eq!((exit, in_flight), (5_000, Outcome::Served));
    assert!(
        what.contains(
            "SIGTERM at 4s: its lifecycle.stopSignal SIGKILL is dropped below Kubernetes 1.37"
        ),
        "{what}"
    );
}

#[test]
fn a_pod_without_a_mesh_still_has_its_timeline_and_says_why() {
    let timeline = timeline_of(workload("Deployment", json!({}), json!({})));
    assert!(timeline.mode.starts_with("not meshed"), "{}", timeline.mode);
    assert!(timeline.mesh.is_none());
    assert_eq!(at(&timeline, Phase::Startup, EventKind::AppStarted), 0);
}

#[test]
fn every_figure_says_where_it_comes_from() {
    let timeline = drain(5, 30);
    let json = serde_json::to_value(&timeline).unwrap();
    for event in json["events"].as_array().unwrap() {
        assert!(event["source"]["kind"].is_string(), "{event}");
    }
    let grace = timeline
        .events
        .iter()
        .find(|event| event.kind == EventKind::Sigkill)
        .unwrap();
    assert_eq!(
        serde_json::to_value(&grace.source).unwrap(),
        json!({"kind": "manifest", "detail": "spec.template.spec.terminationGracePeriodSeconds"})
    );
}

#[test]
fn every_rule_but_invalid_input_has_a_place_on_the_timeline() {
    let timeline = timeline_of(workload("Deployment", istio(json!({})), json!({})));
    for rule in meshlife_policy::catalogue::RULES {
        let anchor = timeline.anchor_of(rule.id, None);
        if rule.id == "ML000" {
            assert_eq!(anchor, None, "ML000 has no moment");
        } else {
            assert!(anchor.is_some(), "{} has no place", rule.id);
        }
    }
    assert_eq!(timeline.anchor_of("ML999", None), None);
}

#[test]
fn findings_point_at_the_moment_their_rule_is_about() {
    use meshlife_policy::timeline::Anchor;
    let event_of = |timeline: &Timeline, anchor: Option<Anchor>| match anchor {
        Some(Anchor::Event(index)) => timeline.events[index].clone(),
        other => panic!("not an event: {other:?}"),
    };
    // The drain outlasts the grace period: ML401 points at the drain's end, cut by SIGKILL.
    let long_drain = timeline_of(workload(
        "Deployment",
        istio(json!({"proxy.istio.io/config": "terminationDrainDuration: 60s"})),
        json!({}),
    ));
    let drain_end = event_of(&long_drain, long_drain.anchor_of("ML401", None));
    assert_eq!(drain_end.kind, EventKind::DrainEnd);
    assert_eq!(drain_end.at_ms, 30_000);
    // Startup without hold: ML101 points at the outbound calls' fate.
    let no_hold = timeline_of(workload("Deployment", istio(json!({})), json!({})));
    let Some(Anchor::Fate(index)) = no_hold.anchor_of("ML101", None) else {
        panic!("ML101 is not on a fate");
    };
    assert_eq!(no_hold.fates[index].request, Request::StartupOutbound);
    // Two preStops: ML405 of container "worker" points at worker's, not web's.
    let two = workload(
        "Deployment",
        istio(json!({})),
        json!({"containers": [
            {"name": "web", "image": "web:1",
             "lifecycle": {"preStop": {"sleep": {"seconds": 5}}}},
            {"name": "worker", "image": "worker:1",
             "lifecycle": {"preStop": {"sleep": {"seconds": 40}}}}]}),
    );
    let two = timeline_of(two);
    let pre_stop = event_of(&two, two.anchor_of("ML405", Some("worker")));
    assert_eq!(pre_stop.kind, EventKind::PreStop);
    assert_eq!(pre_stop.container.as_deref(), Some("worker"));
    // A Job's sidecar that never exits: ML301 points at the completion.
    let job = timeline_of(workload(
        "Job",
        istio(json!({})),
        json!({"restartPolicy": "Never"}),
    ));
    assert_eq!(job.anchor_of("ML301", None), Some(Anchor::Completion));
}

#[test]
fn a_job_under_each_mesh_mode_starts_as_its_mode_and_completes_only_with_a_native_proxy() {
    let hold = json!({"proxy.istio.io/config": "holdApplicationUntilProxyStarts: true"});
    let no_await = json!({"config.linkerd.io/proxy-await": "disabled"});
    // (mesh template, parameters, the mode, the startup calls' outcome, completes)
    let cases = [
        (
            istio(json!({})),
            classic(),
            "classic sidecar",
            Outcome::Refused,
            false,
        ),
        (
            istio(hold),
            classic(),
            "classic sidecar, app held until ready",
            Outcome::Served,
            false,
        ),
        (
            istio(json!({})),
            native(),
            "native sidecar",
            Outcome::Served,
            true,
        ),
        (
            linkerd(json!({})),
            classic(),
            "classic sidecar, app held until ready",
            Outcome::Served,
            false,
        ),
        (
            linkerd(no_await.clone()),
            classic(),
            "classic sidecar",
            Outcome::Refused,
            false,
        ),
        (
            linkerd(json!({})),
            native(),
            "native sidecar",
            Outcome::Served,
            true,
        ),
        (
            linkerd(no_await),
            native(),
            "native sidecar",
            Outcome::Refused,
            true,
        ),
    ];
    for (template, parameters, mode, startup, completes) in cases {
        let job = timeline_with(
            workload("Job", template.clone(), json!({"restartPolicy": "Never"})),
            parameters,
        );
        assert_eq!(job.mode, mode, "{template}");
        assert_eq!(
            fate(&job, Request::StartupOutbound).0,
            startup,
            "{template} {mode}"
        );
        let completion = job.completion.expect("a Job has a completion");
        assert_eq!(
            completion.completes, completes,
            "{template} {mode}: {}",
            completion.why
        );
    }
}

#[test]
fn a_linkerd_job_calling_shutdown_completes_only_with_the_endpoint_enabled() {
    let job = |annotations: Value| {
        timeline_with(
            workload(
                "Job",
                linkerd(annotations),
                json!({"restartPolicy": "Never", "containers": [{"name": "work", "image": "work:1",
                    "command": ["sh", "-c", "run && curl -X POST localhost:4191/shutdown"]}]}),
            ),
            classic(),
        )
        .completion
        .expect("a Job has a completion")
    };
    let disabled = job(json!({}));
    assert!(!disabled.completes, "{}", disabled.why);
    assert!(
        disabled.why.contains("shutdown endpoint is disabled"),
        "{}",
        disabled.why
    );
    let enabled = job(json!({"config.linkerd.io/proxy-admin-shutdown": "enabled"}));
    assert!(enabled.completes, "{}", enabled.why);
}

/// Istio's native template drains at the deletion (its preStop `pilot-agent request POST
/// drain`), not after the apps, and keeps its listeners open (`skip_exit`): seen on the real
/// node (docs/rules.md ML406), pilot-agent logged `handling /drain` when the kubelet ran the
/// preStops, and every new connection was answered until the app's SIGTERM 12 s later.
#[test]
fn a_native_istio_proxy_drains_from_the_deletion_and_keeps_its_listeners() {
    let template = istio(json!({"proxy.istio.io/config": "drainDuration: 5s"}));
    let timeline = timeline_with(
        workload(
            "Deployment",
            template,
            json!({"containers": [{"name": "web", "image": "web:1",
                "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}}]}),
        ),
        native(),
    );
    assert_eq!(at(&timeline, Phase::Shutdown, EventKind::DrainStart), 0);
    assert_eq!(at(&timeline, Phase::Shutdown, EventKind::ProxyExit), 11_000);
    assert!(
        timeline
            .events
            .iter()
            .all(|event| event.kind != EventKind::ListenersClosed),
        "{timeline:#?}"
    );
}

/// A classic proxy's SIGTERM drain has no `skip_exit`: Envoy stops the inbound listeners after
/// drainDuration while pilot-agent keeps it for terminationDrainDuration (ML406; seen on the
/// real node: refused from 4.3 s to 12 s).
#[test]
fn a_classic_istio_proxy_closes_its_listeners_after_drain_duration() {
    let template = istio(json!({"proxy.istio.io/config":
        "drainDuration: 4s\nterminationDrainDuration: 12s"}));
    let timeline = timeline_with(
        workload(
            "Deployment",
            template,
            json!({"containers": [{"name": "web", "image": "web:1",
                "lifecycle": {"preStop": {"sleep": {"seconds": 12}}}}]}),
        ),
        classic(),
    );
    assert_eq!(at(&timeline, Phase::Shutdown, EventKind::DrainStart), 0);
    assert_eq!(
        at(&timeline, Phase::Shutdown, EventKind::ListenersClosed),
        4_000
    );
    assert_eq!(at(&timeline, Phase::Shutdown, EventKind::ProxyExit), 12_000);
    let closed = timeline
        .events
        .iter()
        .position(|event| event.kind == EventKind::ListenersClosed)
        .unwrap();
    assert_eq!(
        timeline.anchor_of("ML406", None),
        Some(meshlife_policy::timeline::Anchor::Event(closed))
    );
}
