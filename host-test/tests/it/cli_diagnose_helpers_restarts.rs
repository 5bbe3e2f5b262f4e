//! `meshlife diagnose` on ML304 (job-helper-never-exits), ML407 (in-place-restart-skips-drain) and
//! ML603 (waypoint-short-grace): a Job's pod whose app ended while a helper runs on as a regular
//! container, a meshed pod restarted in place by a `RestartAllContainers` rule, and a waypoint's
//! pod killed mid-drain, each beside its fixed counterpart. The `real-job-helper-*`,
//! `istio-real-restart-*` and `istio-real-waypoint-*` cases are pods of compat/cluster's reality stage
//! (kubelet v1.35.4), saved unedited; the others are made up in the shapes Kubernetes 1.35 prints
//! (each folder's README.md says what and from where).

use serde_json::Value;

use crate::cli_support::{self, Outcome, Workspace};
use crate::fake_api_server;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/diagnose");

fn case_files(case: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(format!("{DATA}/{case}"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_none_or(|extension| extension != "md"))
        .map(|path| path.display().to_string())
        .collect();
    files.sort();
    files
}

fn diagnose(case: &str, format: &str) -> Outcome {
    let mut args = vec!["diagnose".to_string()];
    args.extend(case_files(case));
    args.extend(["-o".to_string(), format.to_string()]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    cli_support::run_in(std::path::Path::new(DATA), &refs, None)
}

/// The conclusion about `rule` of a `-o json` run of one pod.
fn conclusion_of(outcome: &Outcome, rule: &str) -> Value {
    let run = outcome.json_envelope();
    let diagnoses = run["diagnoses"].as_array().expect("diagnoses");
    assert_eq!(diagnoses.len(), 1, "{outcome:?}");
    diagnoses[0]["conclusions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|conclusion| conclusion["rule"] == rule)
        .cloned()
        .unwrap_or_else(|| panic!("no {rule} conclusion: {outcome:?}"))
}

fn summary(conclusion: &Value) -> &str {
    conclusion["summary"].as_str().unwrap()
}

/// `FIELD: SHOWS` of each evidence item.
fn evidence(conclusion: &Value) -> Vec<String> {
    conclusion["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cited| {
            format!(
                "{} {}: {}",
                cited["file"].as_str().unwrap_or(""),
                cited["field"].as_str().unwrap_or(""),
                cited["shows"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn has_evidence(conclusion: &Value, wanted: &str) -> bool {
    evidence(conclusion)
        .iter()
        .any(|line| line.contains(wanted))
}

#[test]
fn diagnose_confirms_ml304_when_the_app_ended_and_cloud_sql_proxy_runs_on() {
    let outcome = diagnose("job-helper-cloud-sql-proxy", "json");
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let ml304 = conclusion_of(&outcome, "ML304");
    assert_eq!(ml304["name"], "job-helper-never-exits");
    assert_eq!(ml304["status"], "confirmed", "{ml304:#}");
    assert_eq!(
        summary(&ml304),
        "report exited 0 at 02:07:41; \"cloud-sql-proxy\" (a helper the rule says runs until \
         stopped) was still running 1 s after the app's end (at 02:07:42, the data's last \
         moment): the pod stays Running and its Job cannot complete"
    );
    let cited = &ml304["evidence"];
    assert_eq!(
        cited[0]["field"],
        "status.containerStatuses[1].state.terminated.finishedAt"
    );
    assert_eq!(cited[0]["time"]["earliest"], "2026-12-04T02:07:41.000Z");
    assert!(
        has_evidence(
            &ml304,
            "status.containerStatuses[0].state.running.startedAt: helper running"
        ),
        "{ml304:#}"
    );
    assert!(
        has_evidence(&ml304, "status.phase: the pod still Running"),
        "{ml304:#}"
    );
    assert!(
        ml304["fix"]
            .as_str()
            .unwrap()
            .starts_with("move \"cloud-sql-proxy\" to initContainers with restartPolicy: Always"),
        "{ml304:#}"
    );
    // Not a mesh proxy: ML301 is not about it.
    assert_eq!(conclusion_of(&outcome, "ML301")["status"], "ruled-out");

    let text = diagnose("job-helper-cloud-sql-proxy", "text");
    assert!(
        text.stdout.contains(
            "ML304 job-helper-never-exits: confirmed: report exited 0 at 02:07:41; \
             \"cloud-sql-proxy\""
        ),
        "{text:?}"
    );
}

#[test]
fn diagnose_rules_out_ml304_once_a_native_sidecar_helper_let_the_job_complete() {
    let outcome = diagnose("job-helper-native-sidecar", "json");
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let ml304 = conclusion_of(&outcome, "ML304");
    assert_eq!(ml304["status"], "ruled-out", "{ml304:#}");
    assert_eq!(
        summary(&ml304),
        "the pod completed (phase Succeeded): report ended at 02:06:56 (exit 0), native sidecar \
         cloud-sql-proxy stopped at 02:06:58, 2 s after the app"
    );
    assert!(
        has_evidence(
            &ml304,
            "status.initContainerStatuses[0].state.terminated.finishedAt: native sidecar stopped"
        ),
        "{ml304:#}"
    );
}

#[test]
fn diagnose_judges_ml304_on_the_real_nodes_helper_jobs() {
    // The reality stage's Job: the app exits 0 after 3 s beside a helper listed in
    // meshlife.io/sidecars; 20 s later the pod was saved, still Running.
    let broken = diagnose("real-job-helper-regular", "json");
    let ml304 = conclusion_of(&broken, "ML304");
    assert_eq!(ml304["status"], "confirmed", "{ml304:#}");
    assert!(
        summary(&ml304).starts_with(
            "app exited 0 at 11:10:49; \"helper\" (a helper the rule says runs until stopped) \
             was still running 19 s after the app's end (at 11:11:08"
        ),
        "{ml304:#}"
    );
    // The same helper as a native sidecar: the Job completed.
    let fixed = diagnose("real-job-helper-native", "json");
    let ml304 = conclusion_of(&fixed, "ML304");
    assert_eq!(ml304["status"], "ruled-out", "{ml304:#}");
    assert!(
        summary(&ml304).starts_with("the pod completed (phase Succeeded): app ended at 11:10:50"),
        "{ml304:#}"
    );
}

#[test]
fn diagnose_rules_out_ml304_where_only_a_mesh_proxy_runs_on() {
    // A Job held by istio-proxy is ML301's: no helper runs on.
    let outcome = diagnose("istio-job-never-completes", "json");
    assert_eq!(conclusion_of(&outcome, "ML301")["status"], "confirmed");
    let ml304 = conclusion_of(&outcome, "ML304");
    assert_eq!(ml304["status"], "ruled-out", "{ml304:#}");
    assert!(
        summary(&ml304).contains("istio-proxy runs on, which is ML301's"),
        "{ml304:#}"
    );
}

#[test]
fn diagnose_counts_a_live_helper_running_until_the_pod_was_read() {
    // Read from the API server, the helper has been running from the app's end until now.
    let pod =
        std::fs::read_to_string(format!("{DATA}/job-helper-cloud-sql-proxy/pod.json")).unwrap();
    let server = fake_api_server::FakeApiServer::serve(&pod, "v1.35.0");
    let workspace = Workspace::new();
    let kubeconfig = server.kubeconfig(workspace.path());
    let outcome = workspace.run(&[
        "diagnose",
        "pod/nightly-report-29412600-x7k2p",
        "-n",
        "reports",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let ml304 = conclusion_of(&outcome, "ML304");
    assert_eq!(ml304["status"], "confirmed", "{ml304:#}");
    // The fixture's app ended on 2026-12-04: now is minutes (or more) later.
    assert!(
        summary(&ml304).contains(" min ")
            && summary(&ml304).contains("when the pod was read from the API server"),
        "{ml304:#}"
    );
}

#[test]
fn diagnose_confirms_ml407_when_the_proxy_restarted_with_the_app() {
    let outcome = diagnose("istio-restart-all-containers", "json");
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let ml407 = conclusion_of(&outcome, "ML407");
    assert_eq!(ml407["name"], "in-place-restart-skips-drain");
    assert_eq!(ml407["status"], "confirmed", "{ml407:#}");
    let said = summary(&ml407);
    for part in [
        "app's RestartAllContainers rule (exit codes In [88]) restarted every container in place: \
         istio-proxy restarted with app (restartCount 1 each)",
        "its earlier run ended at 11:10:39 (Error (exit 137)), 2 s after the app's at 11:10:37",
        "istio-init ran again (restartCount 1)",
        "the pod's AllContainersRestarting condition is False, last changed at 11:10:40",
        "the kubelet killed istio-proxy at 11:10:37",
    ] {
        assert!(said.contains(part), "{part}\n{said}");
    }
    for cited in [
        "spec.containers[1].restartPolicyRules[0]: app's rule restarts every container",
        "status.containerStatuses[1].restartCount: istio-proxy restartCount 1",
        "status.containerStatuses[1].lastState.terminated: the proxy's earlier run ended",
        "status.initContainerStatuses[0].restartCount: init container run again",
        "status.conditions[5].lastTransitionTime: the kubelet restarted every container",
    ] {
        assert!(has_evidence(&ml407, cited), "{cited}\n{ml407:#}");
    }
    let proxy_end = ml407["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|cited| cited["shows"] == "the proxy's earlier run ended")
        .unwrap();
    assert_eq!(proxy_end["time"]["earliest"], "2026-12-05T11:10:39.000Z");

    let text = diagnose("istio-restart-all-containers", "text");
    assert!(
        text.stdout.contains(
            "ML407 in-place-restart-skips-drain: confirmed: app's RestartAllContainers rule"
        ),
        "{text:?}"
    );
}

#[test]
fn diagnose_confirms_ml407_on_the_real_node_where_the_old_containers_left_no_last_state() {
    // The 1.35.4 kubelet removed the killed containers: no lastState, but every restartCount
    // is 1, istio-init ran again and AllContainersRestarting was set.
    let outcome = diagnose("istio-real-restart-all", "json");
    let ml407 = conclusion_of(&outcome, "ML407");
    assert_eq!(ml407["status"], "confirmed", "{ml407:#}");
    let said = summary(&ml407);
    assert!(
        said.contains("istio-proxy restarted with app (restartCount 1 each); istio-init ran again"),
        "{said}"
    );
    assert!(!said.contains("earlier run ended"), "{said}");
    assert!(
        has_evidence(&ml407, "events.json items[12]: the proxy killed"),
        "{ml407:#}"
    );
}

#[test]
fn diagnose_rules_out_ml407_when_the_app_restarted_alone() {
    // The action Restart: the app restarted (exit 88), istio-proxy ran on.
    let outcome = diagnose("istio-real-restart-one", "json");
    let ml407 = conclusion_of(&outcome, "ML407");
    assert_eq!(ml407["status"], "ruled-out", "{ml407:#}");
    assert_eq!(
        summary(&ml407),
        "no container has a restartPolicyRules entry with the action RestartAllContainers; app \
         (restartCount 1, its rule's action Restart) restarted alone, and istio-proxy ran on \
         (restartCount 0, running since 11:10:19)"
    );
    assert!(
        has_evidence(
            &ml407,
            "status.containerStatuses[1].restartCount: istio-proxy restartCount 0"
        ),
        "{ml407:#}"
    );
}

#[test]
fn diagnose_does_not_confirm_ml407_before_the_rule_fires_or_without_the_spec() {
    // The broken pod before its app exited: the rule is there, nothing restarted yet.
    let pod: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{DATA}/istio-restart-all-containers/pod.json")).unwrap(),
    )
    .unwrap();
    let mut before = pod.clone();
    for list in ["containerStatuses", "initContainerStatuses"] {
        for status in before["status"][list].as_array_mut().unwrap() {
            status["restartCount"] = 0.into();
            status["lastState"] = serde_json::json!({});
        }
    }
    before["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .retain(|condition| condition["type"] != "AllContainersRestarting");
    let workspace = Workspace::new();
    workspace.write("pod.json", &before.to_string());
    let outcome = workspace.run(&["diagnose", "pod.json", "-o", "json"]);
    let ml407 = conclusion_of(&outcome, "ML407");
    assert_eq!(ml407["status"], "cannot-tell", "{ml407:#}");
    assert!(
        summary(&ml407).contains("no container has restarted yet"),
        "{ml407:#}"
    );

    // The proxy restarted on its own (the app did not): not the rule's restart.
    let mut proxy_alone = pod.clone();
    proxy_alone["status"]["containerStatuses"][0]["restartCount"] = 0.into();
    proxy_alone["status"]["containerStatuses"][0]["lastState"] = serde_json::json!({});
    workspace.write("pod.json", &proxy_alone.to_string());
    let outcome = workspace.run(&["diagnose", "pod.json", "-o", "json"]);
    let ml407 = conclusion_of(&outcome, "ML407");
    assert_eq!(ml407["status"], "cannot-tell", "{ml407:#}");
    assert!(
        summary(&ml407).starts_with("istio-proxy restarted (restartCount 1), but app did not"),
        "{ml407:#}"
    );
}

#[test]
fn diagnose_confirms_ml406_from_the_proxys_drain_time_and_its_exit_long_after() {
    // The reality stage's pod: drainDuration 4s, terminationDrainDuration 12s, the app sleeping
    // 12 s in its preStop; deleted at 11:09:22.
    let outcome = diagnose("istio-real-listeners-short-drain", "json");
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let ml406 = conclusion_of(&outcome, "ML406");
    assert_eq!(ml406["name"], "listeners-close-before-app");
    assert_eq!(ml406["status"], "confirmed", "{ml406:#}");
    assert_eq!(
        summary(&ml406),
        "istio-proxy began draining at 11:09:22.526; Envoy, started with --drain-time-s 4 \
         (drainDuration), closed its inbound listeners by 11:09:26.526, while pilot-agent kept it \
         running 8 s more, until 11:09:34.524, and the app ran until 11:09:37: new connections \
         to the app were refused for 8 s"
    );
    let lines: Vec<u64> = ml406["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|cited| cited["line"].as_u64())
        .collect();
    // istio-proxy.log: the Envoy command, the drain, the exit.
    assert_eq!(lines, [50, 67, 72], "{ml406:#}");
    assert!(
        ml406["evidence"][0]["text"]
            .as_str()
            .unwrap()
            .contains("--drain-time-s 4"),
        "{ml406:#}"
    );
}

#[test]
fn diagnose_rules_out_ml406_for_a_long_drain_time_or_a_native_proxy() {
    let long = conclusion_of(
        &diagnose("istio-real-listeners-long-drain", "json"),
        "ML406",
    );
    assert_eq!(long["status"], "ruled-out", "{long:#}");
    assert!(
        summary(&long).starts_with(
            "Envoy's drain time (15 s, drainDuration) is not shorter than the 14 s pilot-agent \
             kept istio-proxy draining"
        ),
        "{long:#}"
    );
    let native = conclusion_of(&diagnose("istio-real-listeners-native", "json"), "ML406");
    assert_eq!(native["status"], "ruled-out", "{native:#}");
    assert!(
        summary(&native).starts_with("istio-proxy is a native sidecar"),
        "{native:#}"
    );
    // Without the proxy's start in its log, its drain time is not known: never guessed.
    let cut = conclusion_of(&diagnose("istio-drain-killed", "json"), "ML406");
    assert_eq!(cut["status"], "cannot-tell", "{cut:#}");
}

/// ML603 on the reality stage's waypoint pods: the proxy killed 2 s into its 5 s drain by the
/// 2 s grace period Istio gave waypoints before 1.28, and drained to its end under 30 s. ML401
/// leaves a waypoint's pod to ML603, and ML603 leaves a sidecar's pod to ML401.
#[test]
fn a_waypoint_killed_mid_drain_is_ml603s_and_a_sidecars_is_ml401s() {
    let killed = diagnose("istio-real-waypoint-killed", "json");
    assert_eq!(killed.code, 1, "a confirmed bug: {killed:?}");
    let waypoint = conclusion_of(&killed, "ML603");
    assert_eq!(waypoint["status"], "confirmed", "{waypoint}");
    let summary = waypoint["summary"].as_str().unwrap();
    assert!(
        summary.contains("istio-proxy was killed (exit 137)")
            && summary.contains("at the grace period (2 s, the pod's own), while draining"),
        "{summary}"
    );
    assert!(
        waypoint["fix"].as_str().unwrap().contains("Istio to 1.28"),
        "{waypoint}"
    );
    let sidecar_rule = conclusion_of(&killed, "ML401");
    assert_eq!(sidecar_rule["status"], "ruled-out", "{sidecar_rule}");
    assert!(
        sidecar_rule["summary"]
            .as_str()
            .unwrap()
            .contains("Istio waypoint"),
        "{sidecar_rule}"
    );

    let drained = diagnose("istio-real-waypoint-drained", "json");
    assert_eq!(drained.code, 0, "nothing confirmed: {drained:?}");
    let waypoint = conclusion_of(&drained, "ML603");
    assert_eq!(waypoint["status"], "ruled-out", "{waypoint}");
    assert!(
        waypoint["summary"]
            .as_str()
            .unwrap()
            .contains("exited on its own (exit 0)"),
        "{waypoint}"
    );

    // A sidecar's pod, whole or as describe's container blocks alone (an app beside the proxy).
    for case in ["istio-drain-killed", "istio-drain-killed-container-blocks"] {
        let sidecar = diagnose(case, "json");
        // The container blocks alone carry no SIGTERM to place the kill (ML401 cannot tell).
        assert_ne!(
            conclusion_of(&sidecar, "ML401")["status"],
            "ruled-out",
            "{case}"
        );
        let waypoint = conclusion_of(&sidecar, "ML603");
        assert_eq!(waypoint["status"], "ruled-out", "{case}: {waypoint}");
    }
}
