//! `meshlife diagnose`: pods' status, events, logs and describe text as Kubernetes, Istio and
//! Linkerd write them (host-test/tests/data/diagnose/, each case's README.md cites the source of
//! every line format), judged rule by rule; and bad input said, never guessed at.

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

fn diagnose(args: &[String]) -> Outcome {
    let mut all = vec!["diagnose".to_string()];
    all.extend(args.iter().cloned());
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    cli_support::run_in(std::path::Path::new(DATA), &refs, None)
}

/// Each rule's status in a `-o json` run.
fn statuses(outcome: &Outcome) -> Vec<(String, String)> {
    let run = outcome.json_envelope();
    let diagnoses = run["diagnoses"].as_array().expect("diagnoses");
    assert_eq!(diagnoses.len(), 1, "{outcome:?}");
    diagnoses[0]["conclusions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|conclusion| {
            (
                conclusion["rule"].as_str().unwrap().to_string(),
                conclusion["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn status_of(outcome: &Outcome, rule: &str) -> String {
    statuses(outcome)
        .into_iter()
        .find(|(id, _)| id == rule)
        .map(|(_, status)| status)
        .unwrap_or_else(|| panic!("no {rule} conclusion: {outcome:?}"))
}

fn conclusion(outcome: &Outcome, rule: &str) -> Value {
    outcome.json_envelope()["diagnoses"][0]["conclusions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|conclusion| conclusion["rule"] == rule)
        .cloned()
        .unwrap()
}

fn json_run(files: &[String]) -> Outcome {
    let mut args = files.to_vec();
    args.extend(["-o".to_string(), "json".to_string()]);
    diagnose(&args)
}

#[test]
fn each_bug_class_is_confirmed_from_its_own_data_and_the_others_are_not() {
    let expected: [(&str, [(&str, &str); 6]); 8] = [
        (
            "istio-startup-race",
            [
                ("ML101", "confirmed"),
                ("ML201", "ruled-out"),
                ("ML202", "ruled-out"),
                ("ML301", "ruled-out"),
                ("ML401", "cannot-tell"),
                ("ML404", "cannot-tell"),
            ],
        ),
        (
            "istio-hold",
            [
                ("ML101", "ruled-out"),
                ("ML201", "ruled-out"),
                ("ML202", "ruled-out"),
                ("ML301", "ruled-out"),
                ("ML401", "cannot-tell"),
                ("ML404", "cannot-tell"),
            ],
        ),
        (
            "istio-job-never-completes",
            [
                ("ML101", "cannot-tell"),
                ("ML201", "ruled-out"),
                ("ML202", "ruled-out"),
                ("ML301", "confirmed"),
                ("ML401", "cannot-tell"),
                ("ML404", "cannot-tell"),
            ],
        ),
        (
            "istio-drain-killed",
            [
                ("ML101", "cannot-tell"),
                ("ML201", "ruled-out"),
                ("ML202", "ruled-out"),
                ("ML301", "ruled-out"),
                ("ML401", "confirmed"),
                ("ML404", "confirmed"),
            ],
        ),
        (
            "linkerd-init-no-network",
            [
                ("ML101", "cannot-tell"),
                ("ML201", "confirmed"),
                ("ML202", "ruled-out"),
                ("ML301", "ruled-out"),
                ("ML401", "cannot-tell"),
                ("ML404", "cannot-tell"),
            ],
        ),
        (
            "istio-real-init-after-redirect",
            [
                ("ML101", "cannot-tell"),
                ("ML201", "ruled-out"),
                ("ML202", "confirmed"),
                ("ML301", "ruled-out"),
                ("ML401", "cannot-tell"),
                ("ML404", "cannot-tell"),
            ],
        ),
        (
            "istio-real-init-before-redirect",
            [
                ("ML101", "confirmed"),
                ("ML201", "ruled-out"),
                ("ML202", "ruled-out"),
                ("ML301", "ruled-out"),
                ("ML401", "cannot-tell"),
                ("ML404", "cannot-tell"),
            ],
        ),
        (
            "linkerd-job-shutdown",
            [
                ("ML101", "ruled-out"),
                ("ML201", "ruled-out"),
                ("ML202", "ruled-out"),
                ("ML301", "ruled-out"),
                ("ML401", "ruled-out"),
                ("ML404", "cannot-tell"),
            ],
        ),
    ];
    for (case, rules) in expected {
        let outcome = json_run(&case_files(case));
        let wanted: Vec<(String, String)> = rules
            .iter()
            .map(|(rule, status)| (rule.to_string(), status.to_string()))
            .collect();
        // The rules added since (ML102, ML103, ML402, ML405, ML502) are judged on their own pods
        // below.
        let judged: Vec<(String, String)> = statuses(&outcome)
            .into_iter()
            .filter(|(rule, _)| wanted.iter().any(|(listed, _)| listed == rule))
            .collect();
        assert_eq!(judged, wanted, "{case}: {outcome:?}");
        // Nor may they be confirmed here: none of these pods is theirs.
        let unlisted_confirmed: Vec<(String, String)> = statuses(&outcome)
            .into_iter()
            .filter(|(rule, status)| {
                status == "confirmed" && !wanted.iter().any(|(listed, _)| listed == rule)
            })
            .collect();
        assert!(
            unlisted_confirmed.is_empty(),
            "{case}: {unlisted_confirmed:?} {outcome:?}"
        );
        let confirmed = statuses(&outcome)
            .iter()
            .any(|(_, status)| status == "confirmed");
        assert_eq!(outcome.code, i32::from(confirmed), "{case}: {outcome:?}");
    }
}

#[test]
fn a_confirmed_race_rests_on_the_moments_it_names() {
    let outcome = json_run(&case_files("istio-startup-race"));
    let race = conclusion(&outcome, "ML101");
    let summary = race["summary"].as_str().unwrap();
    assert!(
        summary.contains("web started at 10:00:03")
            && summary.contains("istio-proxy was ready (at 10:00:06.210)")
            && summary.contains("3 connection errors in between"),
        "{summary}"
    );
    let places: Vec<String> = race["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cited| {
            format!(
                "{}:{}",
                cited["file"].as_str().unwrap().rsplit('/').next().unwrap(),
                cited["line"].as_u64().map_or_else(
                    || cited["field"].as_str().unwrap().to_string(),
                    |line| line.to_string()
                )
            )
        })
        .collect();
    assert_eq!(
        places,
        [
            "pod.json:status.containerStatuses[0].state.running.startedAt",
            "web.log:2",
            "web.log:3",
            "web.log:4",
            "istio-proxy.log:10"
        ]
    );
    assert_eq!(
        race["evidence"][4]["time"]["earliest"],
        "2024-01-15T10:00:06.210Z"
    );
    assert!(
        race["fix"]
            .as_str()
            .unwrap()
            .contains("holdApplicationUntilProxyStarts")
    );
    // The prediction from the pod's own spec agrees: a classic proxy without hold.
    let diagnosis = &outcome.json_envelope()["diagnoses"][0];
    let predicted: Vec<&str> = diagnosis["predicted"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| finding["rule"].as_str().unwrap())
        .collect();
    assert!(predicted.contains(&"ML101"), "{predicted:?}");
    assert_eq!(diagnosis["differences"], Value::Array(Vec::new()));
}

#[test]
fn the_drain_killed_at_the_grace_period_is_timed_from_sigterm() {
    let outcome = json_run(&case_files("istio-drain-killed"));
    let drain = conclusion(&outcome, "ML401");
    let summary = drain["summary"].as_str().unwrap();
    assert!(
        summary.contains("killed (exit 137)")
            && summary.contains("after SIGTERM")
            && summary.contains("at the grace period (30 s")
            && summary.contains("while draining"),
        "{summary}"
    );
    let streams = conclusion(&outcome, "ML404");
    assert!(
        streams["summary"]
            .as_str()
            .unwrap()
            .starts_with("2 stream(s) or request(s) cut after SIGTERM"),
        "{streams}"
    );
    // The shutdown's failed readiness probes say nothing of the startup.
    let race = conclusion(&outcome, "ML101");
    assert!(
        race["summary"]
            .as_str()
            .unwrap()
            .contains("does not say when istio-proxy was ready"),
        "{race}"
    );
}

#[test]
fn describe_text_in_local_time_lines_up_with_utc_logs() {
    let folder = format!("{DATA}/istio-startup-race-describe");
    let alone = json_run(&[format!("{folder}/describe.txt")]);
    assert_eq!(status_of(&alone, "ML101"), "cannot-tell", "{alone:?}");
    let missing = conclusion(&alone, "ML101")["missing"].to_string();
    assert!(
        missing.contains("kubectl logs POD -c istio-proxy --timestamps"),
        "{missing}"
    );
    assert!(
        alone.stderr.contains("describe text holds no pod spec"),
        "{alone:?}"
    );

    let with_log = json_run(&[
        format!("{folder}/describe.txt"),
        format!("{folder}/istio-proxy.log"),
    ]);
    assert_eq!(status_of(&with_log, "ML101"), "confirmed", "{with_log:?}");
    let summary = conclusion(&with_log, "ML101")["summary"].to_string();
    // describe's `11:00:03 +0100` is 10:00:03 UTC.
    assert!(summary.contains("web started at 10:00:03"), "{summary}");
}

#[test]
fn the_text_report_says_each_conclusion_with_its_evidence_and_fix() {
    let outcome = diagnose(&case_files("istio-job-never-completes"));
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let text = &outcome.stdout;
    assert!(
        text.contains("ML301 job-sidecar-never-exits: confirmed: the app finished at 02:03:41, and istio-proxy was still running"),
        "{text}"
    );
    assert!(
        text.contains(
            "fix: end the app's command with `curl -fsX POST localhost:15020/quitquitquit`"
        )
    );
    assert!(text.contains("Predicted from the pod's spec"));
    assert!(text.contains("? ML401 drain-exceeds-grace: cannot tell"));
}

#[test]
fn svg_and_html_are_well_formed_pictures_of_the_observed_timeline() {
    let mut args = case_files("istio-drain-killed");
    args.extend(["-o".to_string(), "svg".to_string()]);
    let svg = diagnose(&args);
    assert_eq!(svg.code, 1, "{svg:?}");
    let mut reader = quick_xml::Reader::from_str(&svg.stdout);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(error) => panic!("not well-formed: {error}\n{}", svg.stdout),
        }
    }
    assert!(svg.stdout.contains("ML401 drain-exceeds-grace: confirmed"));
    let mut args = case_files("istio-drain-killed");
    args.extend(["-o".to_string(), "html".to_string()]);
    let html = diagnose(&args);
    assert!(
        html.stdout.contains("<h3>Observed</h3>")
            && html
                .stdout
                .contains("<h3>Predicted from the pod's spec</h3>")
    );
}

#[test]
fn a_newest_first_paste_reads_as_the_file_in_time_order() {
    let workspace = Workspace::new();
    let original = std::fs::read_to_string(format!("{DATA}/istio-startup-race/web.log")).unwrap();
    let reversed: Vec<&str> = original.lines().rev().collect();
    let web = workspace.write("web.log", &(reversed.join("\n") + "\n"));
    let files = vec![
        format!("{DATA}/istio-startup-race/pod.json"),
        format!("{DATA}/istio-startup-race/istio-proxy.log"),
        web.display().to_string(),
    ];
    let outcome = json_run(&files);
    assert_eq!(status_of(&outcome, "ML101"), "confirmed", "{outcome:?}");
    assert!(outcome.stderr.contains("newest line first"), "{outcome:?}");
    assert!(
        conclusion(&outcome, "ML101")["summary"]
            .as_str()
            .unwrap()
            .contains("3 connection errors")
    );
}

#[test]
fn bad_input_is_said_and_never_concluded_from() {
    let workspace = Workspace::new();
    // A pod cut short: said with its file, the rest still read.
    let pod = std::fs::read_to_string(format!("{DATA}/istio-startup-race/pod.json")).unwrap();
    let cut = workspace.write("pod.json", &pod[..pod.len() / 2]);
    let outcome = json_run(&[
        cut.display().to_string(),
        format!("{DATA}/istio-startup-race/istio-proxy.log"),
    ]);
    assert_ne!(outcome.code, 101, "{outcome:?}");
    assert!(
        outcome.stderr.contains("pod.json") && outcome.stderr.contains("not used"),
        "{outcome:?}"
    );
    assert_eq!(status_of(&outcome, "ML101"), "cannot-tell", "{outcome:?}");

    // Logs without timestamps: what they say is used, never when.
    let untimed: String = std::fs::read_to_string(format!("{DATA}/istio-startup-race/web.log"))
        .unwrap()
        .lines()
        .map(|line| line.split_once(' ').unwrap().1.to_string() + "\n")
        .collect::<String>()
        .replace("\"ts\":", "\"at\":");
    let web = workspace.write("web.log", &untimed);
    let outcome = json_run(&[
        format!("{DATA}/istio-startup-race-describe/describe.txt"),
        web.display().to_string(),
    ]);
    assert!(outcome.stderr.contains("no line has a time"), "{outcome:?}");
    assert_eq!(status_of(&outcome, "ML101"), "cannot-tell", "{outcome:?}");
    assert!(
        conclusion(&outcome, "ML101")["summary"]
            .as_str()
            .unwrap()
            .contains("3 connection error(s), but they cannot be placed")
    );

    // A describe whose times are in another form: each is said, and not used.
    let describe =
        std::fs::read_to_string(format!("{DATA}/istio-startup-race-describe/describe.txt"))
            .unwrap()
            .replace(
                "Mon, 15 Jan 2024 11:00:03 +0100",
                "lun., 15 janv. 2024 11:00:03 CET",
            );
    let other = workspace.write("describe-fr.txt", &describe);
    let outcome = json_run(&[
        other.display().to_string(),
        format!("{DATA}/istio-startup-race-describe/istio-proxy.log"),
    ]);
    assert!(
        outcome.stderr.contains("is not a time kubectl writes"),
        "{outcome:?}"
    );
    assert_eq!(status_of(&outcome, "ML101"), "cannot-tell", "{outcome:?}");

    // Clocks that disagree: the app's log starts five minutes before its container did.
    let skewed = std::fs::read_to_string(format!("{DATA}/istio-startup-race/web.log"))
        .unwrap()
        .replace("2024-01-15T10:00:0", "2024-01-15T09:55:0");
    let web = workspace.write("web.log", &skewed);
    let outcome = json_run(&[
        format!("{DATA}/istio-startup-race/pod.json"),
        web.display().to_string(),
    ]);
    let run = outcome.json_envelope();
    let notes = run["diagnoses"][0]["observed"]["notes"].to_string();
    assert!(notes.contains("clock"), "{notes}");
    assert_ne!(status_of(&outcome, "ML101"), "confirmed", "{outcome:?}");

    // Nothing readable at all: an error, exit 2.
    let empty = workspace.write("empty.log", "");
    let outcome = diagnose(&[empty.display().to_string()]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("nothing to diagnose"),
        "{outcome:?}"
    );
}

#[test]
fn a_live_target_without_a_cluster_is_a_clear_error() {
    let workspace = Workspace::new();
    let outcome = workspace.run(&[
        "diagnose",
        "pod/web",
        "-n",
        "shop",
        "--kubeconfig",
        "no-such-kubeconfig",
    ]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(outcome.stderr.contains("no-such-kubeconfig"), "{outcome:?}");
}

#[test]
fn pasted_tables_and_several_pods_are_read_as_kubectl_prints_them() {
    let workspace = Workspace::new();
    let table = workspace.write(
        "events.txt",
        "LAST SEEN   TYPE      REASON      OBJECT                          MESSAGE\n\
         5m          Normal    Started     pod/web-7d4b9c6f5-x2vkq         Started container web\n\
         4m          Warning   Unhealthy   pod/web-7d4b9c6f5-x2vkq         Readiness probe failed: HTTP probe failed with statuscode: 503\n\
         30s         Normal    Killing     pod/web-7d4b9c6f5-x2vkq         Stopping container istio-proxy\n",
    );
    let describe = format!("{DATA}/istio-startup-race-describe/describe.txt");
    let outcome = json_run(&[table.display().to_string(), describe.clone()]);
    assert!(
        outcome
            .stderr
            .contains("a `kubectl get events` table (3 event(s)"),
        "{outcome:?}"
    );
    let run = outcome.json_envelope();
    let proxy = run["diagnoses"][0]["observed"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|container| container["name"] == "istio-proxy")
        .unwrap()
        .clone();
    let moments = proxy["moments"].to_string();
    assert!(
        moments.contains("Stopping container istio-proxy"),
        "{moments}"
    );
    // No line of the table became a log line of a container named `events`.
    assert!(!run.to_string().contains("\"name\":\"events\""));

    // `kubectl describe pods -l app=web`: one pod after another, each diagnosed.
    let one = std::fs::read_to_string(&describe).unwrap();
    let two = workspace.write(
        "two.txt",
        &format!("{one}\n{}", one.replace("x2vkq", "abcde")),
    );
    let outcome = json_run(&[two.display().to_string()]);
    let pods: Vec<String> = outcome.json_envelope()["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|diagnosis| diagnosis["pod"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        pods,
        ["shop/web-7d4b9c6f5-x2vkq", "shop/web-7d4b9c6f5-abcde"]
    );

    // `kubectl logs --previous` saved as NAME.previous.log is NAME's.
    let log =
        std::fs::read_to_string(format!("{DATA}/istio-startup-race/istio-proxy.log")).unwrap();
    let previous = workspace.write("istio-proxy.previous.log", &log);
    let outcome = json_run(&[describe, previous.display().to_string()]);
    assert_eq!(status_of(&outcome, "ML101"), "confirmed", "{outcome:?}");
}

#[test]
fn an_oom_kill_and_a_native_proxy_are_not_mistaken_for_the_rules_bugs() {
    let workspace = Workspace::new();
    let read = |case: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{DATA}/{case}/pod.json")).unwrap())
            .unwrap()
    };
    // istio-proxy OOM-killed: exit 137, but not the grace period's kill.
    let mut pod = read("istio-drain-killed");
    pod["status"]["containerStatuses"][1]["state"]["terminated"]["reason"] =
        Value::from("OOMKilled");
    let file = workspace.write("pod.json", &pod.to_string());
    let outcome = json_run(&[
        file.display().to_string(),
        format!("{DATA}/istio-drain-killed/events.json"),
    ]);
    assert_eq!(status_of(&outcome, "ML401"), "cannot-tell", "{outcome:?}");
    assert!(
        conclusion(&outcome, "ML401")["summary"]
            .as_str()
            .unwrap()
            .contains("OOMKilled")
    );

    // linkerd-proxy as a native sidecar before `migrate`: its refused connections are not the
    // capture without a proxy.
    let mut pod = read("linkerd-init-no-network");
    let mut proxy = pod["spec"]["containers"][0].clone();
    proxy["restartPolicy"] = Value::from("Always");
    let spec = pod["spec"].as_object_mut().unwrap();
    spec.get_mut("containers")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .remove(0);
    spec.get_mut("initContainers")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .insert(1, proxy);
    let status = pod["status"].as_object_mut().unwrap();
    let proxy_status = status
        .get_mut("containerStatuses")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .remove(0);
    status
        .get_mut("initContainerStatuses")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .insert(1, proxy_status);
    let file = workspace.write("native.json", &pod.to_string());
    let outcome = json_run(&[
        file.display().to_string(),
        format!("{DATA}/linkerd-init-no-network/migrate.log"),
    ]);
    assert_eq!(status_of(&outcome, "ML201"), "ruled-out", "{outcome:?}");
    assert!(
        conclusion(&outcome, "ML201")["summary"]
            .as_str()
            .unwrap()
            .contains("ran after the native linkerd-proxy")
    );
}

/// The pod's own native sidecar is stopped by the kubelet after every regular container, the
/// classic proxy included: ending after the proxy is its order, not ML402's app outliving it.
#[test]
fn a_native_sidecar_of_the_pods_own_ending_after_the_proxy_is_not_ml402() {
    let workspace = Workspace::new();
    let mut pod: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{DATA}/istio-real-exits-drain-long/pod.json")).unwrap(),
    )
    .unwrap();
    pod["spec"]["initContainers"].as_array_mut().unwrap().push(
        serde_json::json!({"name": "vault-agent", "image": "vault:1", "restartPolicy": "Always"}),
    );
    pod["status"]["initContainerStatuses"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "name": "vault-agent", "ready": false, "restartCount": 0, "image": "vault:1",
            "imageID": "", "started": false,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                "startedAt": "2026-12-05T01:04:03Z", "finishedAt": "2026-12-05T01:04:37Z"}}
        }));
    let file = workspace.write("pod.json", &pod.to_string());
    let outcome = json_run(&[file.display().to_string()]);
    assert_eq!(status_of(&outcome, "ML402"), "ruled-out", "{outcome:?}");
}

#[test]
fn a_jobs_describe_alone_shows_the_proxy_running_on_and_merges_with_its_object() {
    let describe = format!("{DATA}/istio-job-never-completes/describe.txt");
    let alone = json_run(std::slice::from_ref(&describe));
    assert_eq!(status_of(&alone, "ML301"), "confirmed", "{alone:?}");
    let summary = conclusion(&alone, "ML301")["summary"].to_string();
    // describe's `03:03:41 +0100` is 02:03:41 UTC.
    assert!(summary.contains("finished at 02:03:41"), "{summary}");

    // Given with the pod's object, it is the same pod, diagnosed once from the object.
    let both = json_run(&[
        format!("{DATA}/istio-job-never-completes/pod.json"),
        describe,
    ]);
    assert_eq!(status_of(&both, "ML301"), "confirmed", "{both:?}");
    assert!(
        both.stderr.contains("given with its object too"),
        "{both:?}"
    );
}

#[test]
fn a_predicted_hold_beside_an_observed_race_is_said_where_they_part() {
    let workspace = Workspace::new();
    // The held pod's proxy, ready only after its app started.
    let late = std::fs::read_to_string(format!("{DATA}/istio-hold/istio-proxy.log"))
        .unwrap()
        .replace("10:00:05.2", "10:00:08.2");
    let log = workspace.write("istio-proxy.log", &late);
    let outcome = json_run(&[
        format!("{DATA}/istio-hold/pod.json"),
        log.display().to_string(),
    ]);
    assert_eq!(status_of(&outcome, "ML101"), "confirmed", "{outcome:?}");
    let differences = outcome.json_envelope()["diagnoses"][0]["differences"].to_string();
    assert!(
        differences.contains(
            "the spec predicts the app held until the proxy is ready, but it started first"
        ),
        "{differences}"
    );
    // And the other way: the race predicted for the startup-race pod, not seen in a run where
    // the proxy happened to be ready first.
    let early = std::fs::read_to_string(format!("{DATA}/istio-startup-race/istio-proxy.log"))
        .unwrap()
        .replace("10:00:06.2", "10:00:02.9");
    let log = workspace.write("early/istio-proxy.log", &early);
    let pod = std::fs::read_to_string(format!("{DATA}/istio-startup-race/pod.json"))
        .unwrap()
        .replace(
            "\"startedAt\": \"2024-01-15T10:00:03Z\"",
            "\"startedAt\": \"2024-01-15T10:00:04Z\"",
        );
    let pod = workspace.write("early/pod.json", &pod);
    let outcome = json_run(&[pod.display().to_string(), log.display().to_string()]);
    assert_eq!(status_of(&outcome, "ML101"), "ruled-out", "{outcome:?}");
    let differences = outcome.json_envelope()["diagnoses"][0]["differences"].to_string();
    assert!(
        differences.contains("predicted") && differences.contains("a race can go either way"),
        "{differences}"
    );
}

/// The shapes of real pastes in public issue threads (written here after them): a describe cut
/// short, a terminal's `▸` for tabs, logfmt times, an Events table with `...` or without its
/// header, a text that is none of the inputs.
#[test]
fn pastes_as_issue_threads_hold_them_are_read_or_said_unreadable() {
    let workspace = Workspace::new();
    // A describe cut inside the init containers: the mesh is there, its proxy unseen.
    let cut = workspace.write(
        "describe.txt",
        "Name:             certgen-7xq2p\nNamespace:        gateway\nControlled By:    Job/certgen\n\
         Annotations:      linkerd.io/created-by: linkerd/proxy-injector edge-24.5.1\n\
         \x20                 linkerd.io/inject: enabled\n\
         \x20                 linkerd.io/proxy-version: edge-24.5.1\n\
         Init Containers:\n  linkerd-init:\n    Container ID:    contain\n",
    );
    let outcome = json_run(&[cut.display().to_string()]);
    for (rule, status) in statuses(&outcome) {
        assert_eq!(status, "cannot-tell", "{rule}: {outcome:?}");
    }
    assert!(
        conclusion(&outcome, "ML301")["summary"]
            .as_str()
            .unwrap()
            .contains("meshed (Linkerd), but the data does not list its containers")
    );

    // `▸` where the terminal drew pilot-agent's tabs; logfmt's `time="..."`.
    let proxy = workspace.write(
        "istio-proxy.log",
        "2022-12-27T22:59:25.041071Z\u{25b8}info\u{25b8}Agent draining Proxy\n\
         2022-12-27T22:59:25.041102Z\u{25b8}info\u{25b8}Graceful termination period is 5s, starting...\n\
         2022-12-27T22:59:30.041302Z\u{25b8}info\u{25b8}Graceful termination period complete, terminating remaining proxies.\n",
    );
    let migrate = workspace.write(
        "migrate.log",
        "time=\"2020-10-05T16:16:59Z\" level=error msg=\"dial tcp 10.0.0.9:8200: connect: connection refused\"\n",
    );
    let outcome = json_run(&[proxy.display().to_string(), migrate.display().to_string()]);
    assert!(
        !outcome.stderr.contains("no line has a time"),
        "{outcome:?}"
    );
    let drain = conclusion(&outcome, "ML401")["summary"].to_string();
    assert!(
        drain.contains("draining at 22:59:25.041 and exiting at 22:59:30.041"),
        "{drain}"
    );

    // describe's Events pasted alone, with a `...` row, and rows without their header.
    let table = workspace.write(
        "events.txt",
        "  Type     Reason               Age    From     Message\n  ----     ------               ----   ----     -------\n...\n\
         \x20 Warning  FailedPostStartHook  3m15s  kubelet  Exec lifecycle hook ([pilot-agent wait]) for Container \"istio-proxy\" in Pod web failed\n",
    );
    let rows = workspace.write(
        "rows.txt",
        " Normal   Killing    37m   kubelet            Stopping container linkerd-proxy\n",
    );
    for file in [table, rows] {
        let outcome = json_run(&[file.display().to_string()]);
        assert_eq!(outcome.code, 0, "{outcome:?}");
        let containers =
            outcome.json_envelope()["diagnoses"][0]["observed"]["containers"].to_string();
        assert!(containers.contains("-proxy"), "{containers}");
    }

    // Text that is none of the inputs is said, not made a container's log.
    let other = workspace.write("notes.txt", "the pod restarts every night\nno idea why\n");
    let outcome = json_run(&[other.display().to_string()]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains("notes.txt: not recognised"),
        "{outcome:?}"
    );
    assert_eq!(
        outcome.json_envelope()["diagnoses"],
        Value::Array(Vec::new())
    );
}

/// The startup race under a real kubelet (v1.35.4) and Istio (1.31-dev, Envoy 1.40.0), from
/// the reality stage of compat/cluster: the broken pod's app started seconds before its proxy
/// was ready; the two fixed pods' apps started within the second of it, too close for the
/// moments to order, so the kubelet's own order decides: the postStart hook `pilot-agent wait`
/// of a classic proxy listed first, the startupProbe of a native one.
#[test]
fn real_pods_under_a_kubelet_are_ordered_by_its_hold_or_startup_probe() {
    for (case, status, exit) in [
        ("istio-real-startup-no-hold", "confirmed", 1),
        ("istio-real-startup-hold", "ruled-out", 0),
        ("istio-real-startup-native", "ruled-out", 0),
    ] {
        let outcome = json_run(&case_files(case));
        assert_eq!(status_of(&outcome, "ML101"), status, "{case}: {outcome:?}");
        assert_eq!(outcome.code, exit, "{case}: {outcome:?}");
        // The API server's data alone (the pod and its events, no log) judges it alike.
        let outcome = json_run(&[
            format!("{DATA}/{case}/pod.json"),
            format!("{DATA}/{case}/events.json"),
        ]);
        assert_eq!(status_of(&outcome, "ML101"), status, "{case}: {outcome:?}");
    }

    let places = |race: &Value| -> Vec<String> {
        race["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|cited| {
                format!(
                    "{} {}",
                    cited["file"].as_str().unwrap().rsplit('/').next().unwrap(),
                    cited["line"].as_u64().map_or_else(
                        || cited["field"].as_str().unwrap().to_string(),
                        |line| line.to_string()
                    )
                )
            })
            .collect()
    };
    let hold = conclusion(&json_run(&case_files("istio-real-startup-hold")), "ML101");
    let summary = hold["summary"].as_str().unwrap();
    assert!(
        summary.contains("istio-proxy's postStart hook (`pilot-agent wait`) holds app")
            && summary.contains("no FailedPostStartHook event")
            && summary.contains("istio-proxy was ready at 21:22:11.149")
            && summary.contains("app's first log line (at 21:22:11.236) comes after it"),
        "{summary}"
    );
    assert_eq!(
        places(&hold),
        [
            "pod.json spec.containers[0].lifecycle.postStart.exec.command",
            "events.json items[7]",
            "pod.json status.containerStatuses[0].state.running.startedAt",
            "istio-proxy.log 61",
            "app.log 1",
        ]
    );
    assert_eq!(hold["evidence"][0]["text"], "pilot-agent wait");

    let native = conclusion(&json_run(&case_files("istio-real-startup-native")), "ML101");
    let summary = native["summary"].as_str().unwrap();
    assert!(
        summary.contains(
            "istio-proxy is a native sidecar with a startupProbe (httpGet :15021/healthz/ready)"
        ) && summary.contains("app's first log line (at 21:22:11.923) comes after it"),
        "{summary}"
    );
    assert_eq!(
        places(&native)[0],
        "pod.json spec.initContainers[1].startupProbe"
    );

    // Without the events, whether the hold's hook failed is not known: said, with the command.
    let outcome = json_run(&[
        format!("{DATA}/istio-real-startup-hold/pod.json"),
        format!("{DATA}/istio-real-startup-hold/istio-proxy.log"),
        format!("{DATA}/istio-real-startup-hold/app.log"),
    ]);
    assert_eq!(status_of(&outcome, "ML101"), "cannot-tell", "{outcome:?}");
    let race = conclusion(&outcome, "ML101");
    assert!(
        race["summary"]
            .as_str()
            .unwrap()
            .contains("whether the hook failed (FailedPostStartHook) is not known"),
        "{race}"
    );
    assert!(
        race["missing"].to_string().contains("kubectl get events"),
        "{race}"
    );
}

/// A failed postStart hook of the hold (`FailedPostStartHook`): the kubelet stops the proxy and
/// starts the containers after it anyway (kuberuntime_container.go startContainer,
/// kuberuntime_manager.go SyncPod). The fixture is derived from the real hold pod (its README
/// says how).
#[test]
fn a_failed_hold_hook_is_evidence_of_the_race() {
    let outcome = json_run(&case_files("istio-startup-hold-hook-failed"));
    assert_eq!(status_of(&outcome, "ML101"), "confirmed", "{outcome:?}");
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let race = conclusion(&outcome, "ML101");
    assert!(
        race["summary"]
            .as_str()
            .unwrap()
            .contains("istio-proxy's postStart hook had failed (at 21:23:08 (to the second))"),
        "{race}"
    );
    assert!(
        race["fix"].as_str().unwrap().contains("the hold is there"),
        "{race}"
    );
    // The kubelet's Killing for the failed hook is no shutdown of the pod.
    assert_eq!(status_of(&outcome, "ML404"), "cannot-tell", "{outcome:?}");
    // The spec predicts the hold, and it was there: what failed is said.
    let differences = outcome.json_envelope()["diagnoses"][0]["differences"].to_string();
    assert!(
        differences.contains("the hold is there, but its postStart hook failed"),
        "{differences}"
    );

    // The pod's spec without its status: only the events order the app against the proxy, and
    // the failed hook alone confirms the race.
    let workspace = Workspace::new();
    let mut pod: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{DATA}/istio-startup-hold-hook-failed/pod.json"))
            .unwrap(),
    )
    .unwrap();
    pod.as_object_mut().unwrap().remove("status");
    let spec = workspace.write("pod.json", &pod.to_string());
    let events = format!("{DATA}/istio-startup-hold-hook-failed/events.json");
    let outcome = json_run(&[spec.display().to_string(), events.clone()]);
    assert_eq!(status_of(&outcome, "ML101"), "confirmed", "{outcome:?}");
    let race = conclusion(&outcome, "ML101");
    assert!(
        race["summary"].as_str().unwrap().starts_with(
            "istio-proxy's postStart hook failed (at 21:23:08 (to the second)): the kubelet \
             stops the proxy and starts the containers after it anyway, so app started at \
             21:23:13 (to the second) with no ready proxy"
        ),
        "{race}"
    );
    assert_eq!(race["evidence"][0]["field"], "items[8]", "{race}");
    assert_eq!(
        race["evidence"][0]["text"], "PostStartHook failed",
        "{race}"
    );

    // The same events with the app listed before the proxy: the hook never held it, so its
    // failure says nothing of the app's start.
    let containers = pod["spec"]["containers"].as_array_mut().unwrap();
    containers.reverse();
    let reordered = workspace.write("reordered.json", &pod.to_string());
    let outcome = json_run(&[reordered.display().to_string(), events]);
    assert_eq!(status_of(&outcome, "ML101"), "cannot-tell", "{outcome:?}");
}

/// describe's Events rows pasted without their `Events:` line and header, a long message going
/// on in a line of its own under the Message column: read as events by the rows' shape, the
/// message joined, not taken for the log of a container named after the file.
#[test]
fn headerless_event_rows_with_a_wrapped_message_are_events() {
    let folder = format!("{DATA}/istio-drain-killed-events-rows");
    let outcome = json_run(&[format!("{folder}/events")]);
    assert_eq!(outcome.code, 0, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "events: rows of `kubectl describe`'s Events table, without its header (3 event(s)"
        ),
        "{outcome:?}"
    );
    let run = outcome.json_envelope();
    assert!(!run.to_string().contains("\"name\":\"events\""), "{run}");
    let proxy = run["diagnoses"][0]["observed"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|container| container["name"] == "istio-proxy")
        .unwrap()
        .clone();
    assert_eq!(proxy["moments"][0]["kind"], "sigterm", "{proxy}");
    assert_eq!(proxy["moments"][0]["evidence"]["line"], 2, "{proxy}");
    let streams = conclusion(&outcome, "ML404");
    assert_eq!(streams["status"], "cannot-tell", "{streams}");
    assert!(
        streams["summary"]
            .as_str()
            .unwrap()
            .starts_with("the pod stopped"),
        "{streams}"
    );

    // With the proxy's log, which drains and never says the drain ended, and the container's
    // block, killed: the row's Killing is the SIGTERM ML401 cites.
    let mut files = case_files("istio-drain-killed-events-rows");
    files.extend(case_files("istio-drain-killed-container-blocks"));
    let outcome = json_run(&files);
    assert_eq!(status_of(&outcome, "ML401"), "confirmed", "{outcome:?}");
    let drain = conclusion(&outcome, "ML401");
    let cited: Vec<(String, u64, String)> = drain["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cited| {
            (
                cited["file"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string(),
                cited["line"].as_u64().unwrap(),
                cited["shows"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        cited,
        [
            ("events".to_string(), 2, "SIGTERM".to_string()),
            (
                "istio-proxy.log".to_string(),
                2,
                "the proxy began to drain".to_string()
            ),
            (
                "istio-proxy.txt".to_string(),
                19,
                "the proxy ended".to_string()
            ),
        ],
        "{drain}"
    );
    assert_eq!(
        drain["evidence"][0]["text"],
        "  Normal   Killing    2m                  kubelet  Stopping container istio-proxy",
        "{drain}"
    );

    // Rows with a header-less wrapped message in the old `kubelet, NODE` source form, and a
    // line that is no row: the rows are read; the other text is not taken for them.
    let workspace = Workspace::new();
    let old = workspace.write(
        "old-rows.txt",
        "  Warning  BackOff  12s (x5 over 1m)  kubelet, node-1  Back-off restarting failed \
         container migrate in pod\n\
         \x20                                                   web-0_shop(6f1c2a4e-0000-4b1e-9f3a-000000000000)\n",
    );
    let outcome = json_run(&[old.display().to_string()]);
    let containers = outcome.json_envelope()["diagnoses"][0]["observed"]["containers"].clone();
    let migrate = containers
        .as_array()
        .unwrap()
        .iter()
        .find(|container| container["name"] == "migrate")
        .unwrap_or_else(|| panic!("{containers}"));
    let text = migrate["moments"][0]["evidence"]["text"].as_str().unwrap();
    assert!(
        text.ends_with("in pod web-0_shop(6f1c2a4e-0000-4b1e-9f3a-000000000000)"),
        "{text}"
    );
    assert_eq!(migrate["moments"][0]["count"], 5, "{migrate}");
    let mixed = workspace.write(
        "mixed.txt",
        "  Normal   Killing    2m    kubelet  Stopping container istio-proxy\nthe pod restarts \
         every night\n",
    );
    let outcome = json_run(&[mixed.display().to_string()]);
    assert!(
        outcome.stderr.contains("mixed.txt: not recognised"),
        "{outcome:?}"
    );
}

/// One container's block of a describe, pasted alone (with describe's indentation, or without
/// it): read as that container's status, as describe's Containers section is; the app's and the
/// proxy's blocks in two files are one pod's.
#[test]
fn container_blocks_pasted_alone_are_read_as_their_containers_status() {
    let folder = format!("{DATA}/istio-drain-killed-container-blocks");
    let outcome = json_run(&[format!("{folder}/istio-proxy.txt")]);
    assert!(
        outcome
            .stderr
            .contains("istio-proxy.txt: `kubectl describe`'s block of container istio-proxy"),
        "{outcome:?}"
    );
    let drain = conclusion(&outcome, "ML401");
    assert_eq!(drain["status"], "cannot-tell", "{drain}");
    assert!(
        drain["summary"]
            .as_str()
            .unwrap()
            .contains("istio-proxy was killed (exit 137), but the data does not place it"),
        "{drain}"
    );
    assert_eq!(drain["evidence"][0]["line"], 19, "{drain}");
    assert_eq!(
        drain["evidence"][0]["text"], "    Finished:     Thu, 03 Dec 2026 11:14:32 +0100",
        "{drain}"
    );
    // A block alone lists no pod's init containers: none is ruled out for want of them.
    assert_eq!(status_of(&outcome, "ML201"), "cannot-tell", "{outcome:?}");

    let outcome = json_run(&case_files("istio-drain-killed-container-blocks"));
    let run = outcome.json_envelope();
    assert_eq!(run["diagnoses"].as_array().unwrap().len(), 1, "{run}");
    let containers = &run["diagnoses"][0]["observed"]["containers"];
    let checkout = containers
        .as_array()
        .unwrap()
        .iter()
        .find(|container| container["name"] == "checkout")
        .unwrap_or_else(|| panic!("{containers}"));
    assert_eq!(checkout["role"], "app", "{checkout}");
    assert_eq!(checkout["exitCode"], 0, "{checkout}");
    // describe's `11:14:03 +0100` is 10:14:03 UTC.
    assert_eq!(
        checkout["finished"]["earliest"], "2026-12-03T10:14:03.000Z",
        "{checkout}"
    );
    let summary = conclusion(&outcome, "ML101")["summary"].to_string();
    assert!(
        summary.contains("does not say when istio-proxy was ready"),
        "{summary}"
    );
}

/// pilot-agent's planned drain and Envoy's SIGTERM before it ended, in istio-proxy's log: the
/// drain was cut short, ML401 confirmed from the log alone; a SIGTERM after the planned drain
/// ended is no such evidence.
#[test]
fn a_planned_drain_cut_by_envoys_sigterm_confirms_the_drain_outlasting_grace() {
    let outcome = json_run(&case_files("istio-drain-cut-envoy-sigterm"));
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let drain = conclusion(&outcome, "ML401");
    assert_eq!(drain["status"], "confirmed", "{drain}");
    assert_eq!(
        drain["summary"],
        "istio-proxy's drain, planned for 5 min 10 s at 10:00:01.120, was cut 30 s in: Envoy \
         caught SIGTERM at 10:00:31.080, 4 min 40 s before the drain's planned end",
        "{drain}"
    );
    let cited: Vec<(u64, &str)> = drain["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cited| {
            (
                cited["line"].as_u64().unwrap(),
                cited["shows"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cited,
        [
            (3, "pilot-agent planned a drain of 5 min 10 s"),
            (
                4,
                "Envoy stopped 30 s into the drain, 4 min 40 s before its planned end"
            ),
        ],
        "{drain}"
    );
    assert!(
        drain["fix"]
            .as_str()
            .unwrap()
            .contains("terminationDrainDuration")
    );

    let log = std::fs::read_to_string(format!(
        "{DATA}/istio-drain-cut-envoy-sigterm/istio-proxy.log"
    ))
    .unwrap();
    let workspace = Workspace::new();
    // Envoy before 1.17 words it `caught SIGTERM`; pilot-agent then says Envoy exited.
    let old = workspace.write(
        "old/istio-proxy.log",
        &format!(
            "{}2026-12-03T10:00:31.081734556Z 2026-12-03T10:00:31.081650Z\tinfo\tEnvoy exited \
             with status <nil>\n",
            log.replace("caught ENVOY_SIGTERM", "caught SIGTERM")
        ),
    );
    let outcome = json_run(&[old.display().to_string()]);
    assert_eq!(status_of(&outcome, "ML401"), "confirmed", "{outcome:?}");
    assert_eq!(
        conclusion(&outcome, "ML401")["evidence"][2]["line"],
        5,
        "{outcome:?}"
    );
    // The planned drain (5 s) ended long before Envoy's SIGTERM: it fitted.
    let fitted = workspace.write(
        "fitted/istio-proxy.log",
        &log.replace("period is 5m10s", "period is 5s"),
    );
    let outcome = json_run(&[fitted.display().to_string()]);
    assert_ne!(status_of(&outcome, "ML401"), "confirmed", "{outcome:?}");
}

/// ML103 on two real native pods (compat/cluster `reality-istio-gate`): istio-proxy's
/// startupProbe stripped, the app started at once and 17 of its 40 first calls were refused;
/// the injector's startupProbe kept, the kubelet held the app until it passed.
#[test]
fn a_native_sidecar_without_a_startup_gate_lets_the_app_race_it() {
    let stripped = json_run(&case_files("istio-real-gate-stripped"));
    assert_eq!(status_of(&stripped, "ML103"), "confirmed", "{stripped:?}");
    let gate = conclusion(&stripped, "ML103");
    let summary = gate["summary"].as_str().unwrap();
    assert!(
        summary.contains("istio-proxy is a native sidecar with neither a startupProbe nor a postStart hook")
            && summary.contains("app started at 00:33:09 (to the second), before istio-proxy was ready (at 00:33:21.461): 17 connection errors in between"),
        "{summary}"
    );
    assert_eq!(gate["evidence"][0]["field"], "spec.initContainers[1]");
    assert!(
        gate["fix"].as_str().unwrap().contains("startupProbe"),
        "{gate}"
    );

    let kept = json_run(&case_files("istio-real-gate-kept"));
    assert_eq!(status_of(&kept, "ML103"), "ruled-out", "{kept:?}");
    let gate = conclusion(&kept, "ML103");
    assert!(
        gate["summary"]
            .as_str()
            .unwrap()
            .contains("native sidecar with a startupProbe (httpGet :15021/healthz/ready)"),
        "{gate}"
    );
    assert_eq!(
        gate["evidence"][0]["field"],
        "spec.initContainers[1].startupProbe"
    );

    // A classic proxy is ML101's.
    let classic = conclusion(
        &json_run(&case_files("istio-real-startup-no-hold")),
        "ML103",
    );
    assert_eq!(classic["status"], "ruled-out", "{classic}");
    assert!(
        classic["summary"].as_str().unwrap().contains("ML101"),
        "{classic}"
    );

    // The logs alone do not say what the proxy is.
    let logs = json_run(&[
        format!("{DATA}/istio-real-gate-stripped/istio-proxy.log"),
        format!("{DATA}/istio-real-gate-stripped/app.log"),
    ]);
    assert_eq!(status_of(&logs, "ML103"), "cannot-tell", "{logs:?}");
    assert!(
        conclusion(&logs, "ML103")["missing"]
            .to_string()
            .contains("kubectl get pod POD -o json"),
        "{logs:?}"
    );
}

/// ML405 on four real pods (compat/cluster `reality-istio-prestop`): the kubelet runs an app's
/// preStop for at most the grace period, then gives it 2 s after SIGTERM; the test workload needs
/// 3 s to stop after SIGTERM.
#[test]
fn a_prestop_reaching_the_grace_period_gets_the_app_killed() {
    for (case, status) in [
        ("istio-real-prestop-exec-past", "confirmed"),
        ("istio-real-prestop-sleep-at", "confirmed"),
        ("istio-real-prestop-within", "ruled-out"),
        ("istio-real-prestop-none", "ruled-out"),
    ] {
        let outcome = json_run(&case_files(case));
        assert_eq!(status_of(&outcome, "ML405"), status, "{case}: {outcome:?}");
    }
    let sleep_at = conclusion(
        &json_run(&case_files("istio-real-prestop-sleep-at")),
        "ML405",
    );
    let summary = sleep_at["summary"].as_str().unwrap();
    assert!(
        summary
            .contains("app's preStop (`sleep 5s`, 5 s) is not shorter than the grace period (5 s)")
            && summary.contains("at 00:33:29 (to the second)")
            && summary.contains("gave the app 2 s after SIGTERM")
            && summary.contains("exit 137 at 00:33:36 (to the second), 7 s after the Killing"),
        "{summary}"
    );
    let fields: Vec<&str> = sleep_at["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cited| cited["field"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        fields,
        [
            "spec.containers[0].lifecycle.preStop",
            // The pod's deletionGracePeriodSeconds of 0 is the kubelet's final delete.
            "spec.terminationGracePeriodSeconds",
            "items[13]",
            "status.containerStatuses[0].state.terminated.finishedAt",
        ]
    );
    assert!(
        sleep_at["fix"]
            .as_str()
            .unwrap()
            .contains("terminationGracePeriodSeconds")
    );

    // `/workload sleep -exit-after 8s` is no delay the spec says; the hook failing as the
    // container was killed under it, at the grace period's end, shows it still running.
    let exec_past = conclusion(
        &json_run(&case_files("istio-real-prestop-exec-past")),
        "ML405",
    );
    assert!(
        exec_past["summary"]
            .as_str()
            .unwrap()
            .contains("FailedPreStopHook at 00:33:36"),
        "{exec_past}"
    );
    // Without the events, that delay cannot be told.
    let outcome = json_run(&[
        format!("{DATA}/istio-real-prestop-exec-past/pod.json"),
        format!("{DATA}/istio-real-prestop-exec-past/app.log"),
    ]);
    assert_eq!(status_of(&outcome, "ML405"), "cannot-tell", "{outcome:?}");
    let within = conclusion(&json_run(&case_files("istio-real-prestop-within")), "ML405");
    assert!(
        within["summary"]
            .as_str()
            .unwrap()
            .contains("app exited 0 at 00:33:35 (to the second), by itself"),
        "{within}"
    );
    // Apps with no preStop rule it out even while the pod runs; logs alone cannot tell.
    let running = json_run(&case_files("istio-real-gate-kept"));
    assert_eq!(status_of(&running, "ML405"), "ruled-out", "{running:?}");
    let logs = json_run(&[format!("{DATA}/istio-real-prestop-sleep-at/app.log")]);
    assert_eq!(status_of(&logs, "ML405"), "cannot-tell", "{logs:?}");
}

/// ML502 on two real Deployment pods (compat/cluster `reality-istio-readiness`): the app loads
/// 8 s before it listens; without a readinessProbe the pod is Ready once the proxy is.
#[test]
fn a_pod_ready_before_its_unprobed_app_serves_is_missing_readiness() {
    let no_probe = json_run(&case_files("istio-real-readiness-no-probe"));
    assert_eq!(status_of(&no_probe, "ML502"), "confirmed", "{no_probe:?}");
    let missing = conclusion(&no_probe, "ML502");
    let summary = missing["summary"].as_str().unwrap();
    assert!(
        summary.contains("app serves \"http\" (8080) with no readinessProbe")
            && summary.contains("the pod turned Ready at 00:33:41 (to the second), 4.9 to 5.9 s before app's first serving line (at 00:33:46.907)"),
        "{summary}"
    );
    let places: Vec<String> = missing["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cited| {
            cited["line"].as_u64().map_or_else(
                || cited["field"].as_str().unwrap().to_string(),
                |line| line.to_string(),
            )
        })
        .collect();
    assert_eq!(
        places,
        [
            "status.conditions[2].lastTransitionTime",
            "spec.containers[0].ports[0]",
            "spec.containers[0]",
            "3",
        ]
    );
    assert!(missing["fix"].as_str().unwrap().contains("readinessProbe"));

    let probe = conclusion(
        &json_run(&case_files("istio-real-readiness-probe")),
        "ML502",
    );
    assert_eq!(probe["status"], "ruled-out", "{probe}");
    assert_eq!(
        probe["evidence"][0]["field"],
        "spec.containers[0].readinessProbe"
    );

    // The pod without the app's log: no serving line to set against Ready.
    let outcome = json_run(&[
        format!("{DATA}/istio-real-readiness-no-probe/pod.json"),
        format!("{DATA}/istio-real-readiness-no-probe/istio-proxy.log"),
    ]);
    assert_eq!(status_of(&outcome, "ML502"), "cannot-tell", "{outcome:?}");
    assert!(
        conclusion(&outcome, "ML502")["missing"]
            .to_string()
            .contains("kubectl logs POD -c app --timestamps"),
        "{outcome:?}"
    );
    // The logs alone: no spec.
    let logs = json_run(&[format!("{DATA}/istio-real-readiness-no-probe/app.log")]);
    assert_eq!(status_of(&logs, "ML502"), "cannot-tell", "{logs:?}");
}

/// ML102 on two real pods (compat/cluster `reality-istio-order`): istio-proxy with the hold
/// hook (`pilot-agent wait`), after the app in spec.containers or before it (the injector's
/// order); the app calls a Service 40 times from its start.
#[test]
fn an_app_listed_before_the_held_proxy_is_not_held() {
    let app_first = json_run(&case_files("istio-real-order-app-first"));
    assert_eq!(status_of(&app_first, "ML102"), "confirmed", "{app_first:?}");
    let order = conclusion(&app_first, "ML102");
    let summary = order["summary"].as_str().unwrap();
    assert!(
        summary.contains("app (spec.containers[0]) comes before istio-proxy (spec.containers[1]) and its hold hook (`pilot-agent wait`)")
            && summary.contains("it started at 01:03:49 (to the second), before istio-proxy was ready (at 01:03:52.691): 24 connection errors in between"),
        "{summary}"
    );
    let places: Vec<String> = order["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cited| {
            cited["line"].as_u64().map_or_else(
                || cited["field"].as_str().unwrap().to_string(),
                |line| line.to_string(),
            )
        })
        .collect();
    assert_eq!(
        places,
        [
            "spec.containers[1].lifecycle.postStart.exec.command",
            "spec.containers[0]",
            "status.containerStatuses[0].state.running.startedAt",
            "3",
            "4",
            "5",
            "61",
        ]
    );
    assert!(
        order["fix"]
            .as_str()
            .unwrap()
            .contains("move istio-proxy to spec.containers[0]"),
        "{order}"
    );
    // ML101 sees the same race, and its fix is the order, not the annotation already there.
    let race = conclusion(&app_first, "ML101");
    assert_eq!(race["status"], "confirmed", "{race}");
    assert!(race["fix"].as_str().unwrap().contains("(ML102)"), "{race}");

    let proxy_first = conclusion(
        &json_run(&case_files("istio-real-order-proxy-first")),
        "ML102",
    );
    assert_eq!(proxy_first["status"], "ruled-out", "{proxy_first}");
    assert!(
        proxy_first["summary"]
            .as_str()
            .unwrap()
            .contains("istio-proxy is spec.containers[0], with its hold hook (`pilot-agent wait`), before every app container"),
        "{proxy_first}"
    );

    // No hold hook: ML101's race, not this rule's; a native sidecar: no order among apps.
    for case in ["istio-real-startup-no-hold", "istio-real-startup-native"] {
        let outcome = json_run(&case_files(case));
        assert_eq!(
            status_of(&outcome, "ML102"),
            "ruled-out",
            "{case}: {outcome:?}"
        );
    }

    // The logs alone do not hold the order.
    let logs = json_run(&[
        format!("{DATA}/istio-real-order-app-first/istio-proxy.log"),
        format!("{DATA}/istio-real-order-app-first/app.log"),
    ]);
    assert_eq!(status_of(&logs, "ML102"), "cannot-tell", "{logs:?}");
    assert!(
        conclusion(&logs, "ML102")["missing"]
            .to_string()
            .contains("for the order of spec.containers"),
        "{logs:?}"
    );
}

/// ML402 on two real pods (compat/cluster `reality-istio-exits`): a classic istio-proxy and an
/// app whose preStop is `sleep 8` (grace 20), the app calling a Service every 250 ms once it has
/// SIGTERM; istio-proxy drains 5 s or, by `proxy.istio.io/config`, 12 s.
#[test]
fn a_proxy_drain_shorter_than_the_apps_prestop_leaves_it_without_a_proxy() {
    let short = json_run(&case_files("istio-real-exits-drain-short"));
    assert_eq!(status_of(&short, "ML402"), "confirmed", "{short:?}");
    let exits = conclusion(&short, "ML402");
    let summary = exits["summary"].as_str().unwrap();
    assert!(
        summary.contains("istio-proxy ended (exit 0) at 01:04:13 (to the second), 5 s before app, which still ran (it ended at 01:04:18 (to the second))")
            && summary.contains("app's preStop (`sleep 8`, 8 s) held its SIGTERM back")
            && summary.contains("9 connection error(s) in app's log after istio-proxy ended, the first at 01:04:16.956")
            && summary.contains("pilot-agent planned a drain of 5 s at 01:04:08.899"),
        "{summary}"
    );
    let places: Vec<String> = exits["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cited| {
            cited["line"].as_u64().map_or_else(
                || cited["field"].as_str().unwrap().to_string(),
                |line| line.to_string(),
            )
        })
        .collect();
    assert_eq!(
        places,
        [
            "status.containerStatuses[1].state.terminated.finishedAt",
            "status.containerStatuses[0].state.terminated.finishedAt",
            "spec.containers[0].lifecycle.preStop.exec.command",
            "items[13]",
            "5",
            "6",
            "7",
            "63",
            "64",
        ]
    );
    assert!(
        exits["fix"]
            .as_str()
            .unwrap()
            .contains("terminationDrainDuration in `proxy.istio.io/config` above the apps' preStop delay (8 s)"),
        "{exits}"
    );

    let long = conclusion(
        &json_run(&case_files("istio-real-exits-drain-long")),
        "ML402",
    );
    assert_eq!(long["status"], "ruled-out", "{long}");
    assert!(
        long["summary"].as_str().unwrap().contains(
            "istio-proxy ended at 01:04:32 (to the second) (exit 0), app ended at 01:04:30 (to \
             the second): the proxy outlived it"
        ),
        "{long}"
    );

    // A proxy killed at the grace period with the app is the kubelet's kill, not its own exit
    // (ML401's, and ML405's for the app's 2 s after its preStop); a native sidecar is stopped
    // after the apps.
    for case in [
        "istio-real-prestop-sleep-at",
        "istio-drain-killed",
        "istio-real-gate-kept",
    ] {
        let outcome = json_run(&case_files(case));
        assert_eq!(
            status_of(&outcome, "ML402"),
            "ruled-out",
            "{case}: {outcome:?}"
        );
    }

    // Without the pod's object, the ends are not known; nor while the pod runs.
    let logs = json_run(&[
        format!("{DATA}/istio-real-exits-drain-short/istio-proxy.log"),
        format!("{DATA}/istio-real-exits-drain-short/app.log"),
    ]);
    assert_eq!(status_of(&logs, "ML402"), "cannot-tell", "{logs:?}");
    assert!(
        conclusion(&logs, "ML402")["missing"]
            .to_string()
            .contains("the Finished time of istio-proxy"),
        "{logs:?}"
    );
    let running = json_run(&case_files("istio-real-order-proxy-first"));
    assert_eq!(status_of(&running, "ML402"), "cannot-tell", "{running:?}");
}

/// The one diagnosis of a workload whose pods the API server refused, in a `-o json` run.
fn refused_diagnosis(outcome: &Outcome) -> Value {
    let run = outcome.json_envelope();
    let refused: Vec<&Value> = run["diagnoses"]
        .as_array()
        .expect("diagnoses")
        .iter()
        .filter(|diagnosis| diagnosis.get("refused").is_some())
        .collect();
    assert_eq!(refused.len(), 1, "{outcome:?}");
    refused[0].clone()
}

/// The ML104 conclusion of a refused workload's diagnosis: its only one.
fn ml104_of(diagnosis: &Value) -> Value {
    let conclusions = diagnosis["conclusions"].as_array().unwrap();
    assert_eq!(conclusions.len(), 1, "{diagnosis:#}");
    assert_eq!(conclusions[0]["rule"], "ML104", "{diagnosis:#}");
    conclusions[0].clone()
}

/// What a conclusion's evidence shows, each as `place: shows`.
fn evidence_lines(conclusion: &Value) -> Vec<String> {
    conclusion["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cited| {
            format!(
                "{} {}: {}",
                cited["file"].as_str().unwrap_or(""),
                cited["field"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| cited["line"].as_u64().map(|line| line.to_string()))
                    .unwrap_or_default(),
                cited["shows"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn a_replicasets_failed_creates_alone_confirm_ml104_and_say_what_is_missing() {
    let outcome = json_run(&case_files("istio-native-restartpolicy-removed"));
    assert_eq!(outcome.code, 1, "{outcome:?}");
    // Only the workload's events: no pod is diagnosed beside it.
    assert_eq!(
        outcome.json_envelope()["diagnoses"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{outcome:?}"
    );
    let diagnosis = refused_diagnosis(&outcome);
    assert_eq!(
        diagnosis["pod"],
        "the pods of ReplicaSet shop/web-7d9c5f8b4"
    );
    let refused = &diagnosis["refused"];
    assert_eq!(refused["workload"], "ReplicaSet shop/web-7d9c5f8b4");
    assert_eq!(refused["events"][1]["count"], 13);
    assert_eq!(refused["events"][1]["pod"], "web-7d9c5f8b4-q9zt6");
    assert_eq!(
        refused["events"][1]["initContainers"],
        serde_json::json!([{"index": 1, "fields": ["readinessProbe", "startupProbe"]}])
    );
    assert_eq!(
        refused["events"][1]["time"],
        serde_json::json!({"earliest": "2026-03-02T10:14:17.000Z", "latest": "2026-03-02T10:37:52.000Z"})
    );
    let ml104 = ml104_of(&diagnosis);
    assert_eq!(ml104["status"], "confirmed");
    assert_eq!(
        ml104["summary"],
        "the API server refused the pods of ReplicaSet shop/web-7d9c5f8b4 14 times, from \
         10:14:07 to 10:37:52: spec.initContainers[1] (which container is not told: Istio and \
         Linkerd put their proxy (istio-proxy, linkerd-proxy) there, after their own init \
         container, but nothing in the data says which mesh injects these pods) holds \
         readinessProbe and startupProbe, which only a native sidecar may, but not \
         restartPolicy: Always. The mesh's injector sets it, so a mutating webhook that runs \
         after the injector removed it (one built on a k8s.io/api older than 0.28, whose \
         Container has no restartPolicy, drops the field as it encodes the pod again), unless \
         the API server lacks the SidecarContainers feature (Kubernetes 1.28 and older) and \
         drops the field itself"
    );
    let evidence = evidence_lines(&ml104);
    assert!(
        evidence[0].ends_with(
            "events.json items[1]: the API server refused pod web-7d9c5f8b4-x7k2p: \
             spec.initContainers[1] holds readinessProbe and startupProbe without restartPolicy: \
             Always"
        ),
        "{evidence:#?}"
    );
    assert!(
        evidence[1].ends_with("without restartPolicy: Always (13 times)"),
        "{evidence:#?}"
    );
    let missing = ml104["missing"].to_string();
    assert!(
        missing.contains("which mesh injects these pods")
            && missing.contains("the MutatingWebhookConfigurations that run after the injector"),
        "{missing}"
    );
    let fix = ml104["fix"].as_str().unwrap();
    assert!(
        fix.starts_with(
            "make the mutating webhook that removes it keep the field, or keep it off the meshed \
             pods: run a release of it built on k8s.io/api 0.28 or later"
        ) && fix.contains("objectSelector or namespaceSelector")
            && fix.contains("reinvocationPolicy: Never")
            && fix.ends_with(
                "take the workload off native sidecars: `sidecar.istio.io/nativeSidecar: \
                 \"false\"` (Istio) or `config.linkerd.io/proxy-enable-native-sidecar: \
                 \"false\"` (Linkerd) on the pod template"
            ),
        "{fix}"
    );
}

#[test]
fn a_replicasets_describe_names_istio_proxy_from_the_template_it_asks_istio_for() {
    let describe = format!("{DATA}/istio-native-restartpolicy-removed-describe/describe.txt");
    let outcome = json_run(std::slice::from_ref(&describe));
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "`kubectl describe` of ReplicaSet shop/web-7d9c5f8b4 (its pod template, 0 init \
             container(s) of its own, 2 event(s))"
        ),
        "{outcome:?}"
    );
    let diagnosis = refused_diagnosis(&outcome);
    assert_eq!(diagnosis["refused"]["mesh"], "istio");
    let ml104 = ml104_of(&diagnosis);
    let summary = ml104["summary"].as_str().unwrap();
    // describe's table gives ages, not times: no time is said.
    assert!(
        summary.starts_with(
            "the API server refused the pods of ReplicaSet shop/web-7d9c5f8b4 14 times: \
             spec.initContainers[1], istio-proxy, where Istio's injector puts its native sidecar \
             after istio-init (istio-validation under istio-cni), holds readinessProbe and \
             startupProbe, which only a native sidecar may, but not restartPolicy: Always. \
             Istio's injector sets it, so a mutating webhook that runs after the injector \
             removed it"
        ),
        "{summary}"
    );
    let evidence = evidence_lines(&ml104);
    assert!(
        evidence.iter().any(|line| line.ends_with(
            "describe.txt 16: the pods ask for Istio's injection: the pod template's label \
             sidecar.istio.io/inject: \"true\""
        )),
        "{evidence:#?}"
    );
    assert!(
        evidence.iter().any(|line| line
            .ends_with("describe.txt 13: the pod template has no init container of its own")),
        "{evidence:#?}"
    );
    // Only Istio's way off native sidecars.
    let fix = ml104["fix"].as_str().unwrap();
    assert!(
        fix.ends_with("`sidecar.istio.io/nativeSidecar: \"false\"` on the pod template")
            && !fix.contains("linkerd"),
        "{fix}"
    );

    // The text report says it as such.
    let text = diagnose(std::slice::from_ref(&describe));
    assert_eq!(text.code, 1, "{text:?}");
    for said in [
        "Pods of ReplicaSet shop/web-7d9c5f8b4 (istio mesh): none created, the API server refused \
         them",
        "(no time), 13 times: pod web-7d9c5f8b4-q9zt6: spec.initContainers[1] readinessProbe, \
         startupProbe without restartPolicy: Always  [",
        "✗ ML104 native-sidecar-unsupported: confirmed: the API server refused the pods of \
         ReplicaSet shop/web-7d9c5f8b4 14 times: spec.initContainers[1], istio-proxy,",
        "      fix: make the mutating webhook that removes it keep the field",
    ] {
        assert!(text.stdout.contains(said), "{said}\n{text:?}");
    }

    // Given with the same ReplicaSet's events, it is one workload: the dated events are counted,
    // describe's undated rows of the same refusals are not counted twice.
    let mut both = case_files("istio-native-restartpolicy-removed");
    both.push(describe);
    let outcome = json_run(&both);
    let diagnosis = refused_diagnosis(&outcome);
    assert_eq!(diagnosis["refused"]["mesh"], "istio");
    let summary = ml104_of(&diagnosis)["summary"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        summary.starts_with(
            "the API server refused the pods of ReplicaSet shop/web-7d9c5f8b4 14 times, from \
             10:14:07 to 10:37:52: spec.initContainers[1], istio-proxy,"
        ),
        "{summary}"
    );
    assert!(
        outcome
            .stderr
            .contains("are left out: the dated events of the same workload were given too"),
        "{outcome:?}"
    );
}

#[test]
fn a_jobs_describe_under_linkerd_names_linkerd_proxy_before_the_templates_own_init_container() {
    let outcome = json_run(&case_files("linkerd-native-restartpolicy-removed-job"));
    assert_eq!(outcome.code, 1, "{outcome:?}");
    let diagnosis = refused_diagnosis(&outcome);
    assert_eq!(
        diagnosis["refused"]["workload"],
        "Job reports/nightly-report"
    );
    assert_eq!(diagnosis["refused"]["mesh"], "linkerd");
    let ml104 = ml104_of(&diagnosis);
    assert_eq!(ml104["status"], "confirmed");
    let summary = ml104["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(
            "the API server refused the pods of Job reports/nightly-report 6 times: \
             spec.initContainers[1], linkerd-proxy, where Linkerd's injector puts its native \
             sidecar after linkerd-init (linkerd-network-validator under linkerd-cni), holds \
             livenessProbe, readinessProbe and startupProbe"
        ),
        "{summary}"
    );
    let evidence = evidence_lines(&ml104);
    assert!(
        evidence.iter().any(|line| line
            .ends_with("the pod template's own init containers, after the mesh's: fetch-config")),
        "{evidence:#?}"
    );
    assert!(
        evidence
            .iter()
            .any(|line| line.ends_with("the pod template's annotation linkerd.io/inject: enabled")),
        "{evidence:#?}"
    );
    let fix = ml104["fix"].as_str().unwrap();
    assert!(
        fix.contains("sorts before linkerd-proxy-injector-webhook-config")
            && fix.ends_with(
                "`config.linkerd.io/proxy-enable-native-sidecar: \"false\"` on the pod template"
            ),
        "{fix}"
    );
}

#[test]
fn other_failed_creates_never_confirm_ml104_and_a_pods_own_diagnosis_is_unchanged() {
    // A quota exceeded and Pod Security refusing istio-init: not ML104's; the run is what it was.
    let outcome = json_run(&case_files("failedcreate-other-reasons"));
    assert_eq!(outcome.code, 0, "{outcome:?}");
    let run = outcome.json_envelope();
    for diagnosis in run["diagnoses"].as_array().unwrap() {
        assert!(diagnosis.get("refused").is_none(), "{outcome:?}");
        assert!(
            diagnosis["conclusions"]
                .as_array()
                .unwrap()
                .iter()
                .all(|conclusion| conclusion["rule"] != "ML104"),
            "{outcome:?}"
        );
    }

    // A pod's own files with a workload's refusals beside them: the pod is diagnosed as alone,
    // and the refused pods apart.
    let pod_files = case_files("istio-startup-race");
    let alone = json_run(&pod_files);
    let mut with_refusals = pod_files.clone();
    with_refusals.extend(case_files("istio-native-restartpolicy-removed"));
    let beside = json_run(&with_refusals);
    let diagnoses = beside.json_envelope()["diagnoses"].clone();
    assert_eq!(diagnoses.as_array().unwrap().len(), 2, "{beside:?}");
    assert_eq!(
        diagnoses[0]["conclusions"],
        alone.json_envelope()["diagnoses"][0]["conclusions"],
        "{beside:?}"
    );
    assert_eq!(
        diagnoses[1]["pod"],
        "the pods of ReplicaSet shop/web-7d9c5f8b4"
    );
}

/// The cluster of the live cases: Istio 1.27 with native sidecars, its neighbours' webhooks, and
/// the Deployment shop/web whose newest ReplicaSet created no pod.
fn live_cluster(keep: impl Fn(&str) -> bool) -> String {
    let webhooks = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/mesh-installs/istio-1.27-native-webhooks.yaml"
    ))
    .unwrap();
    let workload = std::fs::read_to_string(format!(
        "{DATA}/istio-native-restartpolicy-removed-live/workload.yaml"
    ))
    .unwrap();
    let documents: Vec<&str> = workload
        .split("\n---\n")
        .filter(|document| keep(document))
        .collect();
    format!("{webhooks}\n---\n{}", documents.join("\n---\n"))
}

#[test]
fn a_deployment_without_pods_is_diagnosed_from_its_newest_replicaset_and_the_cluster_webhooks() {
    let server = fake_api_server::FakeApiServer::serve(&live_cluster(|_| true), "v1.33.2");
    let workspace = Workspace::new();
    let kubeconfig = server.kubeconfig(workspace.path());
    let kubeconfig = kubeconfig.to_str().unwrap();
    let outcome = workspace.run(&[
        "diagnose",
        "deployment/web",
        "-n",
        "shop",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]);
    assert_eq!(outcome.code, 1, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "deployment/web: no pod (selector app=web): replicaset/web-7d9c5f8b4's FailedCreate \
             events say why"
        ),
        "{outcome:?}"
    );
    // The newest ReplicaSet's events were asked for, not the older one's.
    let requests = server.requests();
    assert!(
        requests.iter().any(
            |request| request.starts_with("/api/v1/namespaces/shop/events")
                && request.contains("web-7d9c5f8b4")
        ),
        "{requests:#?}"
    );
    assert!(
        !requests
            .iter()
            .any(|request| request.contains("web-5f6d8b9c7")),
        "{requests:#?}"
    );
    let diagnosis = refused_diagnosis(&outcome);
    assert_eq!(
        diagnosis["refused"]["workload"],
        "ReplicaSet shop/web-7d9c5f8b4"
    );
    // Only the FailedCreate events are read: the ReplicaSet's SuccessfulCreate is no refusal.
    assert_eq!(
        diagnosis["refused"]["events"].as_array().unwrap().len(),
        2,
        "{diagnosis:#}"
    );
    assert_eq!(diagnosis["refused"]["mesh"], "istio");
    let ml104 = ml104_of(&diagnosis);
    let summary = ml104["summary"].as_str().unwrap();
    for said in [
        "spec.initContainers[1], istio-proxy, where Istio's injector puts its native sidecar \
         after istio-init (istio-validation under istio-cni), holds readinessProbe and \
         startupProbe",
        "; the API server (v1.33.2) keeps the field itself (SidecarContainers is on by default \
         from Kubernetes 1.29). The webhooks that see the pods after Istio's injector: \
         datadog-webhook (the Datadog Cluster Agent's admission controller, known to do this), \
         pod-identity-webhook (the EKS pod identity webhook, known to do this), \
         vault-agent-injector-cfg",
    ] {
        assert!(summary.contains(said), "{said}\n{summary}");
    }
    assert!(!summary.contains("gatekeeper"), "{summary}");
    let evidence = evidence_lines(&ml104);
    let cluster = format!("context fake (http://{}/)", server.address);
    for said in [
        "namespace/shop metadata.labels[istio-injection]: the pods ask for Istio's injection: \
         namespace shop's label istio-injection=enabled"
            .to_string(),
        format!(
            "MutatingWebhookConfiguration datadog-webhook ({cluster}) webhooks[0]: sorts before \
             Istio's injector (istio-sidecar-injector) but has reinvocationPolicy: IfNeeded, so \
             it runs again after it; the Datadog Cluster Agent's admission controller, whose \
             releases built on k8s.io/api older than 0.28 remove restartPolicy from native \
             sidecars"
        ),
        format!("{cluster} /version gitVersion: the API server is v1.33.2"),
        "replicaset/web-7d9c5f8b4 (API server) spec.template: the pod template has no init \
         container of its own"
            .to_string(),
    ] {
        assert!(
            evidence.iter().any(|line| line.starts_with(&said)),
            "{said}\n{evidence:#?}"
        );
    }
    assert!(ml104.get("missing").is_none(), "{ml104:#}");
    let fix = ml104["fix"].as_str().unwrap();
    assert!(
        fix.starts_with(
            "make datadog-webhook, pod-identity-webhook, vault-agent-injector-cfg keep the field"
        ) && fix.contains("a configuration name that sorts before istio-sidecar-injector"),
        "{fix}"
    );
}

#[test]
fn a_deployment_with_no_pod_and_no_refusal_is_still_an_error() {
    let server = fake_api_server::FakeApiServer::serve(
        &live_cluster(|document| !document.contains("reason: FailedCreate")),
        "v1.33.2",
    );
    let workspace = Workspace::new();
    let kubeconfig = server.kubeconfig(workspace.path());
    let outcome = workspace.run(&[
        "diagnose",
        "deployment/web",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    assert_eq!(outcome.code, 2, "{outcome:?}");
    assert!(
        outcome.stderr.contains(
            "deployment/web has no pod (selector app=web), and replicaset/web-7d9c5f8b4 records \
             no FailedCreate event saying why"
        ),
        "{outcome:?}"
    );
    // Nothing refused: the cluster's webhooks are not read.
    assert!(
        !server
            .requests()
            .iter()
            .any(|request| request.contains("mutatingwebhookconfigurations")),
        "{:#?}",
        server.requests()
    );
}
