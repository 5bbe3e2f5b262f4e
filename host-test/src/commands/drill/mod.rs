//! `meshlife drill deployment/NAME`: a workload's rollout proven under load instead of assumed.
//! A load pod in the target's namespace (`meshlife drill-client`, client.rs; meshed as any
//! client there) calls the target's Service at a fixed rate with no retries; the drill then
//! restarts the target (or deletes or evicts one pod), watches its pods, endpoints and the
//! kubelet's events (observe.rs), and reports each phase's errors and latency, with each error
//! put down to the change that caused it and the rule that predicted it (report.rs). The load
//! pod is deleted on every way out, Ctrl-C included.

pub mod admissions;
pub mod calls;
pub mod client;
pub mod cluster;
pub mod draw;
pub mod grpc;
pub mod observe;
pub mod report;
pub mod stream;
pub mod websocket;

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, ValueEnum};
use futures_util::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::{Event as KubeEvent, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, LogParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};

use self::calls::{Call, ClientSummary, Line};
use self::cluster::{CLIENT_CONTAINER, Endpoint, Event, TargetKind, TargetObject, call};
use self::observe::Observations;
use self::report::{Moments, Report};
use crate::cluster::reader;
use crate::commands::explain::{Explained, Predictor};
use crate::inputs::manifests::{ManifestObject, ObjectBody, ObjectIdentity};
use crate::terminal::{EXIT_ERROR, EXIT_FAILED, EXIT_OK, error_chain, print_error};

#[derive(Args, Debug)]
pub struct DrillArgs {
    /// The workload to drill: deployment/NAME or statefulset/NAME.
    pub target: String,

    /// Its namespace (default: the kubeconfig context's).
    #[arg(short, long)]
    pub namespace: Option<String>,

    /// What to do to it under load.
    #[arg(long, value_enum, default_value = "restart")]
    pub event: Event,

    /// Calls per second on new connections, and as many on kept-alive ones (at most 200).
    #[arg(long, default_value_t = 25)]
    pub rate: u32,

    /// Load before the event, once the load pod is ready.
    #[arg(long, default_value = "10s", value_parser = client::parse_duration)]
    pub before: Duration,

    /// Load after the rollout has settled.
    #[arg(long, default_value = "10s", value_parser = client::parse_duration)]
    pub after: Duration,

    /// The longest the rollout may take to settle; past it the drill reports and fails.
    #[arg(long, default_value = "5m", value_parser = client::parse_duration)]
    pub settle_timeout: Duration,

    /// How long one call may take before it counts as a timeout.
    #[arg(long, default_value = "2s", value_parser = client::parse_duration)]
    pub timeout: Duration,

    /// The Service to call (default: the one whose selector selects the target's pods).
    #[arg(long)]
    pub service: Option<String>,

    /// The Service's port, by name or number (default: its first TCP port).
    #[arg(long)]
    pub port: Option<String>,

    /// The HTTP path called.
    #[arg(long, default_value = "/")]
    pub path: String,

    /// Also hold WebSocket streams open on this path of the same port (`--streams` of them),
    /// each reopened as soon as it ends: a stream the rollout cuts without a close frame counts
    /// as an error, with the time its client took to reopen it.
    #[arg(long, value_name = "PATH")]
    pub websocket: Option<String>,

    /// Also hold gRPC server-streaming calls of this method (`/package.Service/Method`, called
    /// with one empty message), `--streams` of them, each called again as soon as it ends: a
    /// call the rollout cuts (a reset, a status other than OK) counts as an error, with the time
    /// its client took to call again.
    #[arg(long, value_name = "METHOD", conflicts_with = "websocket")]
    pub grpc: Option<String>,

    /// The Service's port of the gRPC streams, by name or number (default: the port whose
    /// appProtocol is grpc, else one named grpc or grpc-*).
    #[arg(long, value_name = "PORT", requires = "grpc")]
    pub grpc_port: Option<String>,

    /// How many streams to hold, with --websocket or --grpc (at most 50).
    #[arg(long, default_value_t = 4)]
    pub streams: u32,

    /// Drill an admission webhook's server instead: the load is the API server's admissions,
    /// pods created with dryRun=All in this namespace (one the webhook's namespaceSelector
    /// selects) at --rate per second by the drill itself, each through the webhook. A failed
    /// call of the webhook is a lost admission. No load pod is started.
    #[arg(long, value_name = "NAMESPACE", conflicts_with_all = ["websocket", "grpc"])]
    pub admissions: Option<String>,

    /// With --admissions: the Pod created (dry run) at each admission (default: a one-container
    /// pod). Give one the webhook denies to see verdicts a `failurePolicy: Ignore` skips.
    #[arg(long, value_name = "FILE", requires = "admissions")]
    pub admission_pod: Option<PathBuf>,

    /// The load pod's image: meshlife's own, which runs `meshlife drill-client`.
    #[arg(long, default_value = concat!("ghcr.io/meshlife/meshlife:", env!("CARGO_PKG_VERSION")))]
    pub image: String,

    /// The load pod's imagePullPolicy.
    #[arg(long, default_value = "IfNotPresent")]
    pub image_pull_policy: String,

    /// The most errors (after warm-up) the drill passes with; more exit 1.
    #[arg(long, default_value_t = 0)]
    pub max_errors: usize,

    /// Run without asking (the drill changes the cluster: it restarts the target).
    #[arg(long)]
    pub yes: bool,

    /// Report format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: DrillFormat,

    /// The kubeconfig (default: KUBECONFIG, ~/.kube/config, or the in-cluster account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DrillFormat {
    Text,
    Json,
    /// The timeline as one picture: calls and errors per second, each pod's life, the cuts.
    Svg,
    /// One page: the phases, the picture, and explain's prediction for the target beside it.
    Html,
}

/// How long the load pod may take to start (its image pulled, its proxy ready).
const LOAD_POD_START: Duration = Duration::from_secs(120);
/// How long the load pod's last lines may take to arrive once it is told to stop.
const LOG_END: Duration = Duration::from_secs(20);

pub fn run(args: &DrillArgs) -> u8 {
    match drill(args) {
        Ok(report) => {
            let text = match args.output {
                DrillFormat::Text => report::text(&report),
                DrillFormat::Json => {
                    serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
                }
                DrillFormat::Svg => draw::svg(&report),
                DrillFormat::Html => draw::html(&report),
            };
            if let Err(error) = crate::terminal::write_stdout(&text) {
                print_error(error);
                return EXIT_ERROR;
            }
            if report.passed() {
                EXIT_OK
            } else {
                EXIT_FAILED
            }
        }
        Err(message) => {
            print_error(format_args!("drill: {message}"));
            EXIT_ERROR
        }
    }
}

fn checked(args: &DrillArgs) -> Result<(TargetKind, String), String> {
    if args.rate == 0 || args.rate > client::MOST_RATE {
        return Err(format!(
            "--rate {}: give 1 to {} calls per second",
            args.rate,
            client::MOST_RATE
        ));
    }
    let total = args.before + args.settle_timeout + args.after;
    if total > client::LONGEST {
        return Err(format!(
            "--before, --settle-timeout and --after add up to {} s, more than a drill's {} minutes",
            total.as_secs(),
            client::LONGEST.as_secs() / 60
        ));
    }
    if !args.path.starts_with('/') {
        return Err(format!("--path {:?}: a path starts with /", args.path));
    }
    client::check_streams(
        args.websocket.as_deref(),
        args.grpc.as_deref(),
        args.streams,
    )?;
    cluster::TargetKind::parse(&args.target)
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the Kubernetes client: {error}"))
}

/// What is read before anything changes.
struct Prepared {
    client: Client,
    cluster: String,
    namespace: String,
    target: TargetObject,
    endpoint: Endpoint,
    /// One of the target's pods as it runs (the injected proxy in it), for the prediction.
    running_pod: Option<serde_json::Value>,
    /// With --admissions: what is created, and the verdict it got before the drill.
    admissions: Option<AdmissionPlan>,
}

struct AdmissionPlan {
    namespace: String,
    pod: Pod,
    admitted: bool,
}

impl Prepared {
    /// The load, as the question and the report state it.
    fn load(&self, rate: u32) -> String {
        match &self.admissions {
            Some(plan) => format!(
                "{rate} admissions/s (pods created with dryRun=All in {}, through the API server and its webhooks; before the drill they were {})",
                plan.namespace,
                if plan.admitted { "admitted" } else { "denied" }
            ),
            None => format!("{rate} calls/s on new connections and {rate} on reused ones"),
        }
    }
}

fn drill(args: &DrillArgs) -> Result<Report, String> {
    let (kind, name) = checked(args)?;
    // The admission pod is read before the cluster is: a bad file changes nothing.
    let admission_pod = match (&args.admissions, &args.admission_pod) {
        (None, _) => None,
        (Some(_), Some(path)) => Some(admissions::read_pod(path)?),
        (Some(_), None) => Some(admissions::default_pod()),
    };
    let cluster_target = reader::Target {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
    };
    // One runtime for the whole drill: the client's connection worker lives in the runtime
    // that made it. The prediction reads the cluster on a runtime of its own, between the two
    // `block_on`s.
    let runtime = runtime()?;
    let prepared = runtime.block_on(prepare(args, &cluster_target, kind, &name, admission_pod))?;
    let mut notes = Vec::new();
    let (predicted, prediction) = predict(&prepared, &cluster_target, &mut notes);
    confirm(args, &prepared)?;
    let report = runtime.block_on(async {
        let load_pod = format!("meshlife-drill-{}", unique_suffix());
        let pods: Api<Pod> = Api::namespaced(prepared.client.clone(), &prepared.namespace);
        let outcome = tokio::select! {
            outcome = run_drill(args, &prepared, &load_pod, predicted, notes) => outcome.map(|report| Report { prediction, ..report }),
            _ = tokio::signal::ctrl_c() => Err("interrupted (Ctrl-C); the load pod is deleted".to_string()),
        };
        // On every way out: the load pod goes (a pod never created is a 404, ignored), and a
        // scale-down is set back.
        let _ = tokio::time::timeout(
            cluster::CALL_TIMEOUT,
            pods.delete(&load_pod, &DeleteParams::default()),
        )
        .await;
        if args.event == Event::ScaleDown {
            return set_back(&prepared, outcome).await;
        }
        outcome
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    report
}

/// Sets a scaled-down target's replicas back to what they were before the drill.
async fn set_back(prepared: &Prepared, outcome: Result<Report, String>) -> Result<Report, String> {
    let replicas = i64::from(prepared.target.replicas);
    let restored = cluster::scale(
        &prepared.client,
        &prepared.namespace,
        &prepared.target,
        replicas,
    )
    .await;
    match (outcome, restored) {
        (Ok(mut report), Ok(())) => {
            report
                .notes
                .push(format!("{} set back to {replicas} replicas", report.target));
            Ok(report)
        }
        (Ok(_), Err(error)) => Err(format!(
            "the drill ran, but setting the replicas back to {replicas} failed: {error}"
        )),
        (Err(error), Ok(())) => Err(error),
        (Err(error), Err(restore)) => Err(format!(
            "{error}; setting the replicas back to {replicas} failed too: {restore}"
        )),
    }
}

async fn prepare(
    args: &DrillArgs,
    cluster_target: &reader::Target,
    kind: TargetKind,
    name: &str,
    admission_pod: Option<Pod>,
) -> Result<Prepared, String> {
    let (config, cluster) = reader::configuration(cluster_target).await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config)
        .map_err(|error| format!("{cluster}: cannot make a client: {}", error_chain(&error)))?;
    let with_cluster = |error: String| format!("{cluster}: {error}");
    let target = cluster::read_target(&client, &namespace, kind, name)
        .await
        .map_err(with_cluster)?;
    let endpoint = cluster::find_service(&client, &namespace, &target, args)
        .await
        .map_err(with_cluster)?;
    cluster::check_permissions(&client, &namespace, kind)
        .await
        .map_err(with_cluster)?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let running_pod = call(
        &format!("list pods ({})", target.selector),
        pods.list(&ListParams::default().labels(&target.selector)),
    )
    .await
    .map_err(with_cluster)?
    .items
    .into_iter()
    .find(|pod| pod.metadata.deletion_timestamp.is_none())
    .and_then(|pod| serde_json::to_value(pod).ok());
    let admissions = match (&args.admissions, admission_pod) {
        (Some(admissions_namespace), Some(pod)) => {
            let api: Api<Pod> = Api::namespaced(client.clone(), admissions_namespace);
            let verdict = admissions::preflight(&api, &pod, args.timeout)
                .await
                .map_err(|error| {
                    format!(
                        "{cluster}: a dry-run creation of the admission pod in namespace {admissions_namespace} fails before the drill changes anything: {error}"
                    )
                })?;
            Some(AdmissionPlan {
                namespace: admissions_namespace.clone(),
                pod,
                admitted: verdict == admissions::Verdict::Admitted,
            })
        }
        _ => None,
    };
    Ok(Prepared {
        client,
        cluster,
        namespace,
        target,
        endpoint,
        running_pod,
        admissions,
    })
}

/// `check`'s findings on the target as it runs: its template with the spec of one of its
/// running pods (the proxy its injector added in it, so the mesh is what runs, not a guess),
/// under the cluster's facts where they can be read, else today's releases' defaults. These are the rules its
/// errors can be put down to.
fn predict(
    prepared: &Prepared,
    cluster: &reader::Target,
    notes: &mut Vec<String>,
) -> (Vec<String>, Option<Explained>) {
    let from_cluster = crate::cluster::ClusterSourceArgs {
        from_cluster: true,
        kubeconfig: cluster.kubeconfig.clone(),
        context: cluster.context.clone(),
    };
    let facts = crate::constraints::facts::ClusterFactArgs::default();
    let limit = crate::inputs::files::ReadLimit::default();
    let mut read_notes = Vec::new();
    let predictor = match Predictor::new(&[], &facts, &from_cluster, limit, &mut read_notes) {
        Ok(predictor) => predictor,
        Err(error) => {
            notes.push(format!(
                "the cluster's facts could not be read ({error}): the prediction uses today's releases' defaults"
            ));
            match Predictor::new(
                &[],
                &facts,
                &crate::cluster::ClusterSourceArgs::default(),
                limit,
                &mut read_notes,
            ) {
                Ok(predictor) => predictor,
                Err(error) => {
                    notes.push(format!("no prediction: {error}"));
                    return (Vec::new(), None);
                }
            }
        }
    };
    let target = &prepared.target;
    // The template as it runs: the running pod's spec (with the containers its injector
    // added) and annotations in the target's own template, so that the template's rules
    // (ML501, ML502) apply beside the pod's.
    let mut value = target.object.clone();
    if let Some(pod) = &prepared.running_pod
        && let Some(template) = value.pointer_mut("/spec/template")
    {
        if let Some(spec) = pod.get("spec") {
            template["spec"] = spec.clone();
        }
        if let Some(annotations) = pod.pointer("/metadata/annotations") {
            template["metadata"]["annotations"] = annotations.clone();
        }
    }
    let kind = target.kind.kind();
    let object = ManifestObject {
        identity: ObjectIdentity {
            file: format!("{}/{}", target.kind.noun(), target.name),
            document: 0,
            item: None,
            inner_items: Vec::new(),
            line: 1,
            api_version: value
                .get("apiVersion")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("apps/v1")
                .into(),
            kind: kind.into(),
            namespace: prepared.namespace.clone(),
            name: target.name.clone(),
        },
        object: ObjectBody::new(&value),
        admission_request: None,
    };
    let mut errors = Vec::new();
    let explained = predictor.explain(
        &[object],
        &meshlife_policy::timeline::Assumptions::default(),
        notes,
        &mut errors,
    );
    notes.extend(errors.iter().map(|error| format!("no prediction: {error}")));
    let findings = explained
        .iter()
        .flat_map(|one| one.findings.iter())
        .map(|finding| format!("{} ({})", finding.rule, finding.severity.as_str()))
        .collect();
    (findings, explained.into_iter().next())
}

/// Where the target's pod template leaves room for the causes the report looks for.
fn template_gaps(object: &serde_json::Value) -> report::TemplateGaps {
    let apps: Vec<&serde_json::Value> = object
        .pointer("/spec/template/spec/containers")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|container| {
            !matches!(
                container.get("name").and_then(serde_json::Value::as_str),
                Some("istio-proxy" | "linkerd-proxy")
            )
        })
        .collect();
    report::TemplateGaps {
        serves_without_readiness: apps.iter().any(|container| {
            container.get("readinessProbe").is_none()
                && container
                    .get("ports")
                    .and_then(serde_json::Value::as_array)
                    .is_some_and(|ports| !ports.is_empty())
        }),
        stops_without_pre_stop: apps
            .iter()
            .any(|container| container.pointer("/lifecycle/preStop").is_none()),
    }
}

fn confirm(args: &DrillArgs, prepared: &Prepared) -> Result<(), String> {
    if args.yes {
        return Ok(());
    }
    let question = format!(
        "Drill {}/{} in {} on {}: {} under {}, to {}, for about {} s plus the rollout?",
        prepared.target.kind.noun(),
        prepared.target.name,
        prepared.namespace,
        prepared.cluster,
        args.event.describe(),
        prepared.load(args.rate),
        prepared.endpoint.describe(),
        (args.before + args.after).as_secs()
    );
    if !std::io::stdin().is_terminal() {
        return Err(format!(
            "{question}\nThe drill changes the cluster, so it asks first; without a terminal, give --yes"
        ));
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err("not confirmed; nothing was changed".into())
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!(
        "{:x}",
        (nanos ^ u128::from(std::process::id())) & 0xff_ffff_ffff
    )
}

/// The drill proper, once confirmed: everything it creates is the load pod, which the caller
/// deletes on every way out.
async fn run_drill(
    args: &DrillArgs,
    prepared: &Prepared,
    load_pod: &str,
    predicted: Vec<String>,
    mut notes: Vec<String>,
) -> Result<Report, String> {
    let client = &prepared.client;
    let namespace = prepared.namespace.as_str();
    let target = &prepared.target;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let initial = call(
        &format!("list pods ({})", target.selector),
        pods.list(&ListParams::default().labels(&target.selector)),
    )
    .await?
    .items;
    let observations = Arc::new(Mutex::new(Observations::begin(&initial, now_ms())));
    let watches = watch(
        client.clone(),
        namespace,
        &target.selector,
        &prepared.endpoint.service,
        Arc::clone(&observations),
    );

    let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
    let stream_lines: Arc<Mutex<Vec<Line>>> = Arc::default();
    let summary: Arc<Mutex<Option<ClientSummary>>> = Arc::default();
    let (load_ready_ms, load) = match &prepared.admissions {
        Some(plan) => {
            let (stop, stopped) = tokio::sync::watch::channel(false);
            let task = tokio::spawn(admissions::send(
                Api::namespaced(client.clone(), &plan.namespace),
                plan.pod.clone(),
                args.rate,
                args.timeout,
                Arc::clone(&calls),
                stopped,
            ));
            (now_ms(), Load::Admissions { stop, task })
        }
        None => {
            let log = start_load_pod(
                args,
                prepared,
                load_pod,
                Arc::clone(&calls),
                Arc::clone(&stream_lines),
                Arc::clone(&summary),
            )
            .await?;
            let (ready_ms, log) = log;
            (ready_ms, Load::Pod { log })
        }
    };

    let live = std::io::stderr().is_terminal();
    let started = now_ms();
    pause(args.before, live, started, &calls, &observations).await;

    let event_ms = now_ms();
    let current: Vec<Pod> = call(
        &format!("list pods ({})", target.selector),
        pods.list(&ListParams::default().labels(&target.selector)),
    )
    .await?
    .items;
    let done = cluster::act(client, namespace, target, args.event, &current).await?;
    notes.push(done.what);

    // Until settled: the old pods the event removes gone and the target's status complete.
    let deadline = tokio::time::Instant::now() + args.settle_timeout;
    let settled_ms = loop {
        let old_left = observations.lock().map_or(0, |seen| {
            done.leaving.left(&seen.pods.values().collect::<Vec<_>>())
        });
        if cluster::settled(client, namespace, target, old_left).await? {
            break now_ms();
        }
        if tokio::time::Instant::now() >= deadline {
            notes.push(format!(
                "the rollout had not settled after --settle-timeout {} s: the report stops there",
                args.settle_timeout.as_secs()
            ));
            break now_ms();
        }
        pause(
            Duration::from_millis(500),
            live,
            started,
            &calls,
            &observations,
        )
        .await;
    };
    pause(args.after, live, started, &calls, &observations).await;
    // Calls sent from now on are cool-down; those already sent get their timeout to end
    // before the load pod (and its proxy, which may leave first) is stopped.
    let end_ms = now_ms();
    pause(args.timeout, live, started, &calls, &observations).await;
    if live {
        eprintln!();
    }

    match load {
        Load::Pod { log } => {
            // Stop the client (SIGTERM: it finishes its calls in flight and writes its
            // summary), then read its log to the end.
            call(
                &format!("delete the load pod {load_pod}"),
                pods.delete(load_pod, &DeleteParams::default()),
            )
            .await?;
            match tokio::time::timeout(LOG_END, log).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(error))) => notes.push(error),
                Ok(Err(error)) => notes.push(format!("reading the load pod's log: {error}")),
                Err(_) => notes.push(format!(
                    "the load pod's log did not end within {} s of its deletion: its last calls may be missing",
                    LOG_END.as_secs()
                )),
            }
        }
        Load::Admissions { stop, task } => {
            let _ = stop.send(true);
            if let Ok(last) = task.await
                && let Ok(mut slot) = summary.lock()
            {
                *slot = Some(last);
            }
            if let (Some(plan), Ok(mut all)) = (&prepared.admissions, calls.lock()) {
                admissions::mark_changed_verdicts(&mut all, plan.admitted);
            }
        }
    }
    watches.abort();

    let calls = calls.lock().map(|all| all.clone()).unwrap_or_default();
    let client_summary = summary.lock().ok().and_then(|slot| slot.clone());
    if client_summary.is_none() {
        notes.push(
            "the load pod's summary line was not read: its count of calls is not compared".into(),
        );
    }
    if let Some(summary) = &client_summary
        && summary.sent != calls.len() as u64
    {
        notes.push(format!(
            "the load pod sent {} calls and the drill read {} of them from its log",
            summary.sent,
            calls.len()
        ));
    }
    let moments = Moments {
        load_ready_ms,
        event_ms,
        settled_ms,
        end_ms,
    };
    let pods_seen: Vec<observe::PodLife> = observations
        .lock()
        .map(|seen| seen.pods.values().cloned().collect())
        .unwrap_or_default();
    let phases = report::phases(&calls, &moments);
    let seconds = report::seconds(&calls, &moments);
    let stream_lines = stream_lines
        .lock()
        .map(|all| all.clone())
        .unwrap_or_default();
    let streams = report::streams(&stream_lines, &moments, &pods_seen, &predicted);
    let (attributions, unattributed) = report::attribute(
        &calls,
        &moments,
        &pods_seen,
        &predicted,
        template_gaps(&target.object),
    );
    Ok(Report {
        target: format!("{}/{}", target.kind.noun(), target.name),
        namespace: namespace.to_string(),
        event: args.event.describe().to_string(),
        service: prepared.endpoint.describe(),
        rate_per_second: args.rate,
        load: prepared.load(args.rate),
        moments,
        phases,
        pods: pods_seen,
        attributions,
        unattributed,
        predicted,
        client: client_summary,
        streams,
        max_errors: args.max_errors,
        seconds,
        prediction: None,
        notes,
    })
}

/// Where the calls come from, and how the drill stops them.
enum Load {
    /// The load pod, its log read by this task.
    Pod {
        log: tokio::task::JoinHandle<Result<(), String>>,
    },
    /// The drill's own admissions (--admissions).
    Admissions {
        stop: tokio::sync::watch::Sender<bool>,
        task: tokio::task::JoinHandle<ClientSummary>,
    },
}

/// Creates the load pod, waits for it to be ready and follows its log into `calls`,
/// `stream_lines` and `summary`; returns when it was ready, and the log's reader.
async fn start_load_pod(
    args: &DrillArgs,
    prepared: &Prepared,
    load_pod: &str,
    calls: Arc<Mutex<Vec<Call>>>,
    stream_lines: Arc<Mutex<Vec<Line>>>,
    summary: Arc<Mutex<Option<ClientSummary>>>,
) -> Result<(u64, tokio::task::JoinHandle<Result<(), String>>), String> {
    let namespace = prepared.namespace.as_str();
    let pods: Api<Pod> = Api::namespaced(prepared.client.clone(), namespace);
    let client_runs = args.before + args.settle_timeout + args.after + Duration::from_secs(60);
    let pod = cluster::load_pod(
        load_pod,
        args,
        &prepared.endpoint,
        namespace,
        client_runs.min(client::LONGEST),
    );
    call(
        &format!("create the load pod {load_pod}"),
        pods.create(&PostParams::default(), &pod),
    )
    .await?;
    let load_ready_ms = wait_ready(&pods, load_pod).await?;
    let log = {
        let load_pod = load_pod.to_string();
        tokio::spawn(async move {
            let params = LogParams {
                follow: true,
                container: Some(CLIENT_CONTAINER.into()),
                ..LogParams::default()
            };
            let stream = pods
                .log_stream(&load_pod, &params)
                .await
                .map_err(|error| format!("reading the load pod's log: {}", error_chain(&error)))?;
            let mut lines = stream.lines();
            while let Some(line) = lines.next().await {
                let Ok(line) = line else { break };
                match Line::parse(&line) {
                    Some(Line::Call(one)) => {
                        if let Ok(mut all) = calls.lock() {
                            all.push(one);
                        }
                    }
                    Some(line @ (Line::StreamOpen { .. } | Line::StreamEnd(_))) => {
                        if let Ok(mut all) = stream_lines.lock() {
                            all.push(line);
                        }
                    }
                    Some(Line::Summary(last)) => {
                        if let Ok(mut slot) = summary.lock() {
                            *slot = Some(last);
                        }
                    }
                    _ => {}
                }
            }
            Ok::<(), String>(())
        })
    };
    Ok((load_ready_ms, log))
}

/// Waits for the load pod to be ready (its proxy too, where one is injected); a pod that cannot
/// start is an error naming why.
async fn wait_ready(pods: &Api<Pod>, name: &str) -> Result<u64, String> {
    let deadline = tokio::time::Instant::now() + LOAD_POD_START;
    loop {
        let pod = call(&format!("get the load pod {name}"), pods.get(name)).await?;
        let status = pod.status.unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|condition| condition.type_ == "Ready" && condition.status == "True");
        if ready {
            return Ok(now_ms());
        }
        let waiting: Vec<String> = status
            .container_statuses
            .iter()
            .flatten()
            .filter_map(|container| {
                let waiting = container.state.as_ref()?.waiting.as_ref()?;
                let reason = waiting.reason.clone()?;
                matches!(
                    reason.as_str(),
                    "ErrImagePull"
                        | "ImagePullBackOff"
                        | "ErrImageNeverPull"
                        | "InvalidImageName"
                        | "CreateContainerError"
                        | "CrashLoopBackOff"
                )
                .then(|| {
                    format!(
                        "{}: {reason}{}",
                        container.name,
                        waiting
                            .message
                            .as_ref()
                            .map(|message| format!(" ({message})"))
                            .unwrap_or_default()
                    )
                })
            })
            .collect();
        if !waiting.is_empty() {
            return Err(format!(
                "the load pod {name} cannot start: {} (give the meshlife image the cluster can run with --image)",
                waiting.join("; ")
            ));
        }
        if status.phase.as_deref() == Some("Failed") {
            return Err(format!("the load pod {name} failed before it was ready"));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the load pod {name} was not ready within {} s",
                LOAD_POD_START.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits `how_long`, showing the run on a terminal: elapsed time, calls and errors so far, the
/// old and new pods.
async fn pause(
    how_long: Duration,
    live: bool,
    started: u64,
    calls: &Arc<Mutex<Vec<Call>>>,
    observations: &Arc<Mutex<Observations>>,
) {
    if !live {
        tokio::time::sleep(how_long).await;
        return;
    }
    let end = tokio::time::Instant::now() + how_long;
    loop {
        let (sent, failed) = calls.lock().map_or((0, 0), |all| {
            (all.len(), all.iter().filter(|one| one.failed()).count())
        });
        let (old, new) = observations.lock().map_or((0, 0), |seen| {
            let alive = seen.pods.values().filter(|life| life.gone_ms.is_none());
            alive.fold((0, 0), |(old, new), life| {
                if life.old {
                    (old + 1, new)
                } else {
                    (old, new + 1)
                }
            })
        });
        eprint!(
            "\r{:>6.1}s  {sent} calls  {failed} errors  old pods {old}  new pods {new}   ",
            now_ms().saturating_sub(started) as f64 / 1000.0
        );
        let _ = std::io::stderr().flush();
        let now = tokio::time::Instant::now();
        if now >= end {
            return;
        }
        tokio::time::sleep((end - now).min(Duration::from_secs(1))).await;
    }
}

/// The watches of the target's pods, the Service's EndpointSlices and the kubelet's Killing
/// events, feeding `observations` until aborted.
fn watch(
    client: Client,
    namespace: &str,
    selector: &str,
    service: &str,
    observations: Arc<Mutex<Observations>>,
) -> tokio::task::JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let events: Api<KubeEvent> = Api::namespaced(client, namespace);
    let pod_config = watcher::Config::default().labels(selector);
    let slice_config =
        watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
    let event_config = watcher::Config::default().fields("reason=Killing");
    tokio::spawn(async move {
        let pod_watch = {
            let observations = Arc::clone(&observations);
            async move {
                let mut stream = watcher(pods, pod_config).boxed();
                while let Some(event) = stream.next().await {
                    let Ok(mut seen) = observations.lock() else {
                        break;
                    };
                    match event {
                        Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                            seen.pod_changed(&pod, now_ms());
                        }
                        Ok(watcher::Event::Delete(pod)) => seen.pod_deleted(&pod, now_ms()),
                        _ => {}
                    }
                }
            }
        };
        let slice_watch = {
            let observations = Arc::clone(&observations);
            async move {
                let mut current: std::collections::BTreeMap<String, EndpointSlice> =
                    std::collections::BTreeMap::new();
                let mut stream = watcher(slices, slice_config).boxed();
                while let Some(event) = stream.next().await {
                    let key =
                        |slice: &EndpointSlice| slice.metadata.name.clone().unwrap_or_default();
                    match event {
                        Ok(watcher::Event::Apply(slice) | watcher::Event::InitApply(slice)) => {
                            current.insert(key(&slice), slice);
                        }
                        Ok(watcher::Event::Delete(slice)) => {
                            current.remove(&key(&slice));
                        }
                        _ => continue,
                    }
                    let all: Vec<EndpointSlice> = current.values().cloned().collect();
                    if let Ok(mut seen) = observations.lock() {
                        seen.endpoints_changed(&all, now_ms());
                    }
                }
            }
        };
        let event_watch = {
            let observations = Arc::clone(&observations);
            async move {
                let mut stream = watcher(events, event_config).boxed();
                while let Some(event) = stream.next().await {
                    if let Ok(watcher::Event::Apply(event)) = event
                        && event.involved_object.kind.as_deref() == Some("Pod")
                        && let Some(pod) = &event.involved_object.name
                        && let Ok(mut seen) = observations.lock()
                    {
                        seen.killing(pod, now_ms());
                    }
                }
            }
        };
        tokio::join!(pod_watch, slice_watch, event_watch);
    })
}
