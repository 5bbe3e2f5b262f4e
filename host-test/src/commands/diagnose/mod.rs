//! `meshlife diagnose`: what really happened to a pod, read from its status, events, logs and
//! `kubectl describe` text (files, or the API server), beside what the mesh predicts for its
//! spec. Each conclusion names a rule's bug class and says `confirmed`, `ruled-out` or
//! `cannot-tell`, with the evidence it rests on.
//!
//! Reading is kept apart from meaning: `sources` recognises each file (`pod`, `events`, `logs`,
//! `describe`), `live` reads the same from the API server; `observed` builds each container's
//! timeline from them (`patterns` says what a proxy's or an app's log line means, `clock` reads
//! times into bounds); `conclusions` judges it rule by rule; `draw` renders it. Pods the API
//! server refused to create have no timeline: `refused` reads their workload's `FailedCreate`
//! events (with its pod template, `workload`), and they are diagnosed apart, per workload.

mod clock;
mod conclusions;
mod describe;
mod draw;
mod events;
mod evidence;
mod live;
mod logs;
mod observed;
mod patterns;
mod pod;
mod refused;
mod sources;
mod workload;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::commands::explain::{AssumptionArgs, Explained, Predictor};
use crate::inputs::manifests::{ManifestObject, ObjectBody, ObjectIdentity};
use crate::terminal::{
    EXIT_ERROR, EXIT_FAILED, EXIT_OK, no_colour_requested, print_error, print_note,
};

pub use conclusions::{Conclusion, Status};
pub use observed::Observed;

#[derive(Args, Debug)]
pub struct DiagnoseArgs {
    /// What to read: files (a pod as JSON or YAML, its events, container logs saved with
    /// `kubectl logs --timestamps`, `kubectl describe pod` text, `kubectl describe replicaset|job`
    /// text; the kind of each is recognised from its content), or one of `pod/NAME`, `job/NAME`,
    /// `deployment/NAME`, `replicaset/NAME` to read them from the API server.
    #[arg(required = true, value_name = "FILE|pod/NAME")]
    pub inputs: Vec<String>,

    /// The container a log file is of, when its name (without `.log`) is not the container's.
    #[arg(long = "log", value_name = "CONTAINER=FILE")]
    pub logs: Vec<String>,

    /// The namespace of `pod/NAME` (default: the kubeconfig context's, else `default`).
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,

    /// Output format: a report for the terminal (text), the diagnosis as data (json), one SVG
    /// picture of the observed timeline (svg), or one HTML page with the pictures (html).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub format: DiagnoseFormat,

    /// The most log lines read from the API server per container and run (current, previous).
    #[arg(long, value_name = "LINES", default_value_t = 5_000)]
    pub tail: i64,

    /// A Gatekeeper MeshLifecycle constraint whose parameters (the cluster's facts) the
    /// prediction is drawn under.
    #[arg(long = "constraint", value_name = "FILE")]
    pub constraints: Vec<PathBuf>,

    #[command(flatten)]
    pub assumptions: AssumptionArgs,

    /// The cluster's facts for the prediction, as `meshlife constraint` takes them.
    #[command(flatten)]
    pub facts: crate::constraints::facts::ClusterFactArgs,

    /// The cluster: read the pod from it (`pod/NAME`), and its facts for the prediction.
    #[command(flatten)]
    pub cluster: crate::cluster::ClusterSourceArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiagnoseFormat {
    Text,
    Json,
    Svg,
    Html,
}

/// One pod's diagnosis.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    pub pod: String,
    pub observed: Observed,
    pub conclusions: Vec<Conclusion>,
    /// The timeline the pod's own spec predicts under the facts (the same as `meshlife
    /// explain`'s), when the pod's object was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Explained>,
    /// Where what was observed and what was predicted part.
    pub differences: Vec<String>,
    /// For a workload whose pods the API server refused to create (no pod to observe): the
    /// refusals, read from its events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<refused::RefusedPods>,
}

/// Everything one run produced.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiagnoseRun {
    pub diagnoses: Vec<Diagnosis>,
    /// What was read and how, and what could not be used.
    pub notes: Vec<String>,
    pub errors: Vec<String>,
}

pub fn run(args: &DiagnoseArgs) -> u8 {
    let run = match diagnose(args) {
        Ok(run) => run,
        Err(error) => {
            // A pipeline reading `-o json` gets JSON even when nothing could be read.
            if args.format == DiagnoseFormat::Json {
                let empty = DiagnoseRun {
                    diagnoses: Vec::new(),
                    notes: Vec::new(),
                    errors: vec![error.clone()],
                };
                if let Ok(json) = serde_json::to_string_pretty(&empty) {
                    let _ = crate::terminal::write_stdout(&(json + "\n"));
                }
            }
            print_error(error);
            return EXIT_ERROR;
        }
    };
    for note in &run.notes {
        print_note(note);
    }
    for error in &run.errors {
        print_error(error);
    }
    let rendered = match args.format {
        DiagnoseFormat::Json => match serde_json::to_string_pretty(&run) {
            Ok(json) => json + "\n",
            Err(error) => {
                print_error(error);
                return EXIT_ERROR;
            }
        },
        DiagnoseFormat::Text => {
            let terminal = std::io::stdout().is_terminal();
            draw::text(&run, terminal && !no_colour_requested())
        }
        DiagnoseFormat::Svg => match run.diagnoses.as_slice() {
            [one] => draw::svg(one),
            [] => {
                print_error("no pod to draw");
                return EXIT_ERROR;
            }
            many => {
                print_error(format!(
                    "{} pods to draw: -o svg draws one; use -o html for all",
                    many.len()
                ));
                return EXIT_ERROR;
            }
        },
        DiagnoseFormat::Html => draw::html(&run),
    };
    if let Err(error) = crate::terminal::write_stdout(&rendered) {
        print_error(error);
        return EXIT_ERROR;
    }
    if !run.errors.is_empty() || run.diagnoses.is_empty() {
        EXIT_ERROR
    } else if run
        .diagnoses
        .iter()
        .flat_map(|diagnosis| &diagnosis.conclusions)
        .any(|conclusion| conclusion.status == Status::Confirmed)
    {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

/// `pod/web`, `job/migrate`, `deployment/web`, `replicaset/web-7d9c5f8b4` (and kubectl's other
/// spellings of them).
fn live_target(input: &str) -> Option<live::Target> {
    if std::path::Path::new(input).exists() {
        return None;
    }
    let (kind, name) = input.split_once('/')?;
    let kind = match kind.to_ascii_lowercase().as_str() {
        "pod" | "pods" | "po" => live::Kind::Pod,
        "job" | "jobs" | "job.batch" | "jobs.batch" => live::Kind::Job,
        "deployment" | "deployments" | "deploy" | "deployment.apps" | "deployments.apps" => {
            live::Kind::Deployment
        }
        "replicaset" | "replicasets" | "rs" | "replicaset.apps" | "replicasets.apps" => {
            live::Kind::ReplicaSet
        }
        _ => return None,
    };
    (!name.is_empty() && !name.contains('/')).then(|| live::Target {
        kind,
        name: name.to_string(),
    })
}

/// Reads the inputs (files or the API server), and diagnoses each pod in them.
pub fn diagnose(args: &DiagnoseArgs) -> Result<DiagnoseRun, String> {
    let mut log_names = BTreeMap::new();
    for given in &args.logs {
        let (container, file) = given
            .split_once('=')
            .filter(|(container, file)| !container.is_empty() && !file.is_empty())
            .ok_or_else(|| format!("--log {given}: expected CONTAINER=FILE"))?;
        log_names.insert(file.to_string(), container.to_string());
    }
    let targets: Vec<live::Target> = args
        .inputs
        .iter()
        .filter_map(|input| live_target(input))
        .collect();
    let mut sources = if targets.is_empty() {
        let mut paths = args.inputs.clone();
        for file in log_names.keys() {
            if !paths.contains(file) {
                paths.push(file.clone());
            }
        }
        sources::Sources::read(&paths, &log_names)
    } else {
        if targets.len() != args.inputs.len() {
            return Err(
                "give either files or pod/NAME, job/NAME, deployment/NAME, replicaset/NAME to \
                 read from the cluster, not both"
                    .into(),
            );
        }
        let target = crate::cluster::reader::Target {
            kubeconfig: args.cluster.kubeconfig.clone(),
            context: args.cluster.context.clone(),
        };
        live::read_blocking(&target, args.namespace.as_deref(), &targets, args.tail)?
    };
    // Pods the API server refused to create: diagnosed apart, per workload; the events left are
    // the pods' own.
    let refused = refused::gather(&mut sources);
    let mut notes = std::mem::take(&mut sources.notes);
    if sources.pods.is_empty()
        && sources.logs.is_empty()
        && sources.events.is_empty()
        && refused.is_empty()
    {
        if !sources.errors.is_empty() {
            return Ok(DiagnoseRun {
                diagnoses: Vec::new(),
                notes,
                errors: sources.errors,
            });
        }
        // The notes say why each input could not be used.
        return Ok(DiagnoseRun {
            diagnoses: Vec::new(),
            notes,
            errors: vec![format!(
                "{}: nothing to diagnose: no pod, event, log or describe text could be read",
                args.inputs.join(", ")
            )],
        });
    }
    // The prediction's constraints and facts: read once, for every pod that brings its spec.
    let predictor = if sources.pods.iter().any(|pod| pod.object.is_some()) {
        let limit =
            crate::inputs::files::ReadLimit::flag(crate::inputs::files::DEFAULT_MAX_FILE_SIZE);
        let cluster = if targets.is_empty() {
            args.cluster.clone()
        } else {
            // Reading the pod from a cluster is not a request for its facts: `--from-cluster` is.
            crate::cluster::ClusterSourceArgs {
                from_cluster: args.cluster.from_cluster,
                kubeconfig: args
                    .cluster
                    .kubeconfig
                    .clone()
                    .filter(|_| args.cluster.from_cluster),
                context: args
                    .cluster
                    .context
                    .clone()
                    .filter(|_| args.cluster.from_cluster),
            }
        };
        match Predictor::new(&args.constraints, &args.facts, &cluster, limit, &mut notes) {
            Ok(predictor) => Some(predictor),
            Err(error) => {
                notes.push(format!("no prediction: {error}"));
                None
            }
        }
    } else {
        None
    };
    let assumptions = args.assumptions.assumptions();
    // Only a workload's own events beside its refusals: nothing about a pod to diagnose.
    let only_refusals = !refused.is_empty()
        && sources.pods.is_empty()
        && sources.logs.is_empty()
        && !sources.events.iter().any(about_a_pod);
    let pods: Vec<Option<&pod::PodRecord>> = if only_refusals {
        Vec::new()
    } else if sources.pods.is_empty() {
        notes.push(
            "no pod object or describe text given: the timeline is built from the events and \
             logs alone, and nothing is predicted"
                .into(),
        );
        vec![None]
    } else {
        sources.pods.iter().map(Some).collect()
    };
    let several = pods.len() > 1;
    let mut diagnoses = Vec::new();
    for pod in pods {
        let name = pod.map(|pod| pod.name.as_str());
        let events: Vec<events::EventRecord> = sources
            .events
            .iter()
            .filter(|event| !several || event.pod.is_none() || event.pod.as_deref() == name)
            .cloned()
            .collect();
        let logs: Vec<logs::LogRecord> = sources
            .logs
            .iter()
            .filter(|log| !several || log.pod.is_none() || log.pod.as_deref() == name)
            .cloned()
            .collect();
        let mut observed = observed::observe(pod, &events, &logs);
        if !targets.is_empty() {
            // Read from the API server just now: its status held until this moment.
            observed.read_at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .and_then(|since| clock::Millis::try_from(since.as_millis()).ok());
        }
        let conclusions = conclusions::conclude(&observed);
        let predicted = match (pod, &predictor) {
            (Some(pod), Some(predictor)) => predict(
                pod,
                &sources.namespaces,
                predictor,
                &assumptions,
                &mut notes,
            ),
            (Some(pod), None) if pod.object.is_none() => {
                notes.push(format!(
                    "{}: describe text holds no pod spec: nothing predicted (give the pod as \
                     YAML or JSON for the prediction)",
                    pod.title()
                ));
                None
            }
            _ => None,
        };
        let differences = differences(&conclusions, predicted.as_ref());
        diagnoses.push(Diagnosis {
            pod: observed.pod.clone(),
            observed,
            conclusions,
            predicted,
            differences,
            refused: None,
        });
    }
    for pods in refused {
        let mut observed = observed::observe(None, &[], &[]);
        observed.pod = format!("the pods of {}", pods.workload);
        diagnoses.push(Diagnosis {
            pod: observed.pod.clone(),
            observed,
            conclusions: conclusions::conclude_refused(&pods),
            predicted: None,
            differences: Vec::new(),
            refused: Some(pods),
        });
    }
    Ok(DiagnoseRun {
        diagnoses,
        notes,
        errors: sources.errors,
    })
}

/// Whether an event is about a pod (or may be): not a workload's own event.
fn about_a_pod(event: &events::EventRecord) -> bool {
    event.pod.is_some()
        || event.container.is_some()
        || event.about.as_ref().is_none_or(|about| about.kind == "Pod")
}

/// The explain timeline of the pod's own spec under the facts.
fn predict(
    pod: &pod::PodRecord,
    namespaces: &[serde_json::Value],
    predictor: &Predictor,
    assumptions: &meshlife_policy::timeline::Assumptions,
    notes: &mut Vec<String>,
) -> Option<Explained> {
    let value = pod.object.as_ref()?;
    let object =
        |value: &serde_json::Value, kind: &str, namespace: &str, name: &str| ManifestObject {
            identity: ObjectIdentity {
                file: pod.evidence.file.clone(),
                document: 0,
                item: None,
                inner_items: Vec::new(),
                line: 1,
                api_version: "v1".into(),
                kind: kind.into(),
                namespace: namespace.into(),
                name: name.into(),
            },
            object: ObjectBody::new(value),
            admission_request: None,
        };
    let mut objects = vec![object(value, "Pod", &pod.namespace, &pod.name)];
    for namespace in namespaces {
        let name = namespace
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        objects.push(object(namespace, "Namespace", "", name));
    }
    let mut errors = Vec::new();
    let mut explained = predictor.explain(&objects, assumptions, notes, &mut errors);
    notes.extend(
        errors
            .iter()
            .map(|error| format!("no prediction for {}: {error}", pod.title())),
    );
    (!explained.is_empty()).then(|| explained.remove(0))
}

/// Where the observation and the prediction part, rule by rule.
fn differences(conclusions: &[Conclusion], predicted: Option<&Explained>) -> Vec<String> {
    let Some(predicted) = predicted else {
        return Vec::new();
    };
    let mut differences = Vec::new();
    for conclusion in conclusions {
        let finding = predicted
            .findings
            .iter()
            .find(|finding| finding.rule == conclusion.rule);
        match (conclusion.status, finding) {
            (Status::Confirmed, None) => differences.push(match conclusion.rule {
                // The hold was there: its hook failed, and the kubelet started the app anyway
                // (conclusions/startup.rs says so in the summary).
                "ML101"
                    if conclusion.summary.contains("postStart hook had failed")
                        || conclusion.summary.contains("postStart hook failed") =>
                {
                    format!(
                        "{}: the spec predicts the app held until the proxy is ready, and the \
                         hold is there, but its postStart hook failed and the kubelet started \
                         the app anyway: the proxy's readiness, not the hold, is what failed",
                        conclusion.rule
                    )
                }
                "ML101" => format!(
                    "{}: the spec predicts the app held until the proxy is ready, but it started \
                     first: the hold did not take effect here (did the annotation reach the \
                     pod? is the mesh's version the one the facts say?)",
                    conclusion.rule
                ),
                rule => format!(
                    "{rule}: observed ({}), but the spec under these facts predicts no {} finding: \
                     the facts (mesh version, settings) may not be the cluster's",
                    conclusion.summary, conclusion.name
                ),
            }),
            (Status::RuledOut, Some(finding)) => differences.push(format!(
                "{}: predicted ({}), but not seen in this run: {}{}",
                conclusion.rule,
                finding.message(),
                conclusion.summary,
                if conclusion.rule == "ML101" {
                    "; a race can go either way, so the risk stays"
                } else {
                    ""
                }
            )),
            _ => {}
        }
    }
    differences
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{conclusions, observed, refused, sources};

    const FIXTURES: [&str; 8] = [
        include_str!("../../../tests/data/diagnose/istio-startup-race/pod.json"),
        include_str!("../../../tests/data/diagnose/istio-drain-killed/events.json"),
        include_str!("../../../tests/data/diagnose/istio-startup-race/istio-proxy.log"),
        include_str!("../../../tests/data/diagnose/linkerd-job-shutdown/linkerd-proxy.log"),
        include_str!("../../../tests/data/diagnose/istio-startup-race-describe/describe.txt"),
        include_str!("../../../tests/data/diagnose/istio-real-startup-hold/pod.json"),
        include_str!("../../../tests/data/diagnose/istio-native-restartpolicy-removed/events.json"),
        include_str!(
            "../../../tests/data/diagnose/linkerd-native-restartpolicy-removed-job/describe.txt"
        ),
    ];

    /// Reads `texts` as files of those names and judges them: what must never panic.
    fn judge(texts: &[(String, &str)]) {
        let mut read = sources::Sources::default();
        for (name, text) in texts {
            read.add_text(name, text, None);
        }
        for refused in refused::gather(&mut read) {
            let _ = conclusions::conclude_refused(&refused);
            let _ = serde_json::to_string(&refused).unwrap();
        }
        let pods: Vec<Option<&super::pod::PodRecord>> = if read.pods.is_empty() {
            vec![None]
        } else {
            read.pods.iter().map(Some).collect()
        };
        for pod in pods {
            let observed = observed::observe(pod, &read.events, &read.logs);
            let _ = conclusions::conclude(&observed);
            let _ = serde_json::to_string(&observed).unwrap();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn any_text_is_read_without_a_panic(text in "\\PC{0,400}") {
            judge(&[("any.log".to_string(), &text), ("any.txt".to_string(), &text)]);
        }

        #[test]
        fn cut_or_damaged_inputs_are_read_without_a_panic(
            which in 0..FIXTURES.len(),
            cut in 0.0f64..1.0,
            at in 0.0f64..1.0,
            byte in any::<u8>(),
        ) {
            let text = FIXTURES[which];
            let mut end = (text.len() as f64 * cut) as usize;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let cut_text = &text[..end];
            let mut damaged = text.as_bytes().to_vec();
            let position = ((damaged.len() - 1) as f64 * at) as usize;
            damaged[position] = byte;
            let damaged = String::from_utf8_lossy(&damaged).into_owned();
            let names = [
                "pod.json",
                "events.json",
                "istio-proxy.log",
                "linkerd-proxy.log",
                "describe.txt",
                "pod.json",
                "events.json",
                "describe.txt",
            ];
            judge(&[(names[which].to_string(), cut_text)]);
            judge(&[(names[which].to_string(), &damaged), ("web.log".to_string(), FIXTURES[2])]);
        }
    }
}
