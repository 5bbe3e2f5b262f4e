//! `meshlife serve`: the module in the cluster's admission path, behind Gatekeeper's External
//! Data (`POST /validate`), Kyverno's service calls (`POST /kyverno`) and the API server's own
//! validating webhook (`POST /admission`), with health and metrics on a plain port.
//!
//! One file per concern: `listener` (accepting, TLS, HTTP/1.1 and its timeouts), `tls`
//! (certificates and their reload), `routes` (dispatch and bodies), one file per engine's wire
//! format (`gatekeeper`, `kyverno`, `admission`), `namespace_watch` (the Namespaces an
//! AdmissionReview lacks), `pool` (evaluation threads with warm instances and deadlines),
//! `limits` (every bound and its flag), `shedding` (which connection gives way at the
//! connection limit), `shutdown` (signals and draining), `health` and
//! `metrics`.

pub mod admission;
pub mod exchange;
pub mod gatekeeper;
pub mod health;
pub mod kyverno;
pub mod limits;
pub mod listener;
pub mod metrics;
pub mod namespace_watch;
pub mod pool;
pub mod routes;
pub mod shedding;
pub mod shutdown;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};

use crate::module::engine::{Engine, EngineOptions};
use crate::terminal::print_error;
use crate::terminal::{EXIT_ERROR, EXIT_FAILED};
use limits::{Limits, parse_duration};
use listener::ListenerSettings;
use shutdown::{Lifecycle, Phase};
use tls::{Reload, TlsFiles, TlsState};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address of the HTTPS routes (`POST /validate` for Gatekeeper, `POST /kyverno`, `POST
    /// /admission` for a ValidatingWebhookConfiguration).
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,

    /// Address of the plain-HTTP health port (`/healthz`, `/readyz`, `/metrics`).
    #[arg(long, value_name = "ADDR:PORT", default_value = "0.0.0.0:8080")]
    pub health_listen: SocketAddr,

    /// Serving certificate (PEM, leaf first). Reloaded when its content changes.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: PathBuf,

    /// Private key of the serving certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE")]
    pub tls_key: PathBuf,

    /// CA bundle (PEM) that client certificates must chain to; `/validate` then requires one.
    /// For Gatekeeper: `ca.crt` of the Secret `gatekeeper-webhook-server-cert`.
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,

    /// A file holding the token `POST /kyverno` then requires as `Authorization: Bearer
    /// TOKEN` (surrounding whitespace ignored). The policies set that header in their service
    /// call; without this flag the route takes any request, as Kyverno sends no client
    /// certificate.
    #[arg(long, value_name = "FILE")]
    pub kyverno_token_file: Option<PathBuf>,

    /// MeshLifecycle constraint files `POST /admission` judges under, each with its
    /// `spec.match` and `enforcementAction` (constraints/gatekeeper/clusters/*.yaml, or the
    /// output of `meshlife constraint`). May be repeated; without it, the parameter defaults,
    /// every object matched and error findings denied.
    #[arg(long = "constraint", value_name = "FILE")]
    pub constraints: Vec<PathBuf>,

    /// Do not watch Namespaces for `POST /admission`, even with a Kubernetes configuration at
    /// hand: the constraints' parameters (`injectedNamespaces`...) then decide injection.
    #[arg(long)]
    pub no_namespace_watch: bool,

    /// Read the cluster's facts at start (`--from-cluster`; instead of `--constraint`):
    /// `POST /admission` judges under the constraint pair `meshlife constraint --from-cluster`
    /// writes, and `/readyz` names the facts. The Namespace watch uses the same cluster.
    #[command(flatten)]
    pub cluster: crate::cluster::ClusterSourceArgs,

    /// How often the certificate files are compared with what is loaded.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub tls_reload_interval: Duration,

    /// Evaluate this OPA wasm module instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    pub module: Option<PathBuf>,

    /// For `meshlife bench serve` only: answer every request of the routes port with this
    /// file's bytes (a ProviderResponse), reading each body but evaluating nothing. The
    /// server's transport floor: the same listener, TLS and HTTP stack, with no route work.
    #[arg(long, value_name = "FILE", hide = true)]
    pub transport_floor_answer: Option<PathBuf>,

    /// After SIGTERM: how long to go on accepting and serving (with `Connection: close`) while
    /// the endpoint removal propagates, before the listener closes.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub drain_delay: Duration,

    /// After the drain delay: how long requests in flight may take before the process exits
    /// anyway. Drain delay plus this must stay below the pod's terminationGracePeriodSeconds.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,

    #[command(flatten)]
    pub limits: Limits,

    /// Log lines on stderr as text or as one JSON object each.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Lowest level logged. Object contents are never logged above debug.
    #[arg(long, value_enum, default_value = "info")]
    pub log_level: LogLevel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

fn init_logging(format: LogFormat, level: LogLevel) {
    let level = match level {
        LogLevel::Error => tracing::Level::ERROR,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Debug => tracing::Level::DEBUG,
    };
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_target(false);
    let installed = match format {
        LogFormat::Text => builder.with_ansi(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    // Already installed (tests run several servers in one process): keep the first.
    drop(installed);
}

pub fn run_serve(args: &ServeArgs) -> u8 {
    init_logging(args.log_format, args.log_level);
    match start(args) {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            print_error(format_args!("{error:#}"));
            EXIT_ERROR
        }
    }
}

/// The token of `--kyverno-token-file`, without the newline an editor or `kubectl create
/// secret --from-file` leaves.
fn read_token(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let text = crate::inputs::files::read_text(path, Default::default()).map_err(|error| {
        anyhow::anyhow!(
            "cannot read the Kyverno token {} (--kyverno-token-file): {error}",
            path.display()
        )
    })?;
    let token = text.trim();
    if token.is_empty() {
        anyhow::bail!(
            "the Kyverno token file {} (--kyverno-token-file) is empty: a route that takes any \
             token is the default without the flag",
            path.display()
        );
    }
    Ok(token.as_bytes().to_vec())
}

fn start(args: &ServeArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let options = EngineOptions {
        interruptible: true,
    };
    let engine = match &args.module {
        Some(path) => {
            let bytes = crate::module::engine::read_module(path, Default::default())?;
            Engine::with_options(&bytes, &path.display().to_string(), options)?
        }
        None => Engine::with_options(
            crate::module::engine::embedded_module(),
            "embedded module",
            options,
        )?,
    };
    let engine = Arc::new(engine);
    let kyverno_token = args
        .kyverno_token_file
        .as_deref()
        .map(read_token)
        .transpose()?;
    let target = args.cluster.target();
    let mut facts_read = None;
    let constraints = if let Some(target) = &target {
        if !args.constraints.is_empty() {
            anyhow::bail!(
                "--constraint and --from-cluster (--kubeconfig, --context) both give what POST \
                 /admission judges under; give one (the Namespace watch follows --kubeconfig \
                 either way)"
            );
        }
        let (constraints, headline) = cluster_constraints(target, &engine)?;
        if args.no_namespace_watch
            && constraints
                .iter()
                .any(|one| one.matcher.has_namespace_selector())
        {
            anyhow::bail!(
                "the cluster's Istio revisions differ, so each revision's constraints select \
                 its namespaces by label: POST /admission needs the Namespace watch, which \
                 --no-namespace-watch turns off"
            );
        }
        facts_read = Some(headline);
        constraints
    } else if args.constraints.is_empty() {
        vec![crate::constraints::constraint::Constraint::default_constraint()]
    } else {
        crate::constraints::constraint::load_constraint_files(
            &args.constraints,
            Default::default(),
            &engine,
        )
        .map_err(|error| anyhow::anyhow!("{error} (--constraint)"))?
    };
    let tls = Arc::new(TlsState::load(TlsFiles {
        cert: args.tls_cert.clone(),
        key: args.tls_key.clone(),
        client_ca: args.client_ca.clone(),
    })?);
    if let Err(reason) = tls.check_validity() {
        // Served anyway, so a clock skew does not keep the pod down; /readyz reports it.
        tracing::warn!(%reason, "the serving certificate is outside its validity period");
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("meshlife-io")
        .build()?;
    let settings = RouteSettings {
        kyverno_token,
        constraints,
        target,
        facts_read,
    };
    runtime.block_on(serve(args, engine, tls, settings, started))
}

/// What the routes take from the flags, read before the runtime starts.
struct RouteSettings {
    kyverno_token: Option<Vec<u8>>,
    constraints: Vec<crate::constraints::constraint::Constraint>,
    /// The cluster of `--kubeconfig`/`--context`, for the Namespace watch too.
    target: Option<crate::cluster::reader::Target>,
    /// Which facts were read at start, for `/readyz`.
    facts_read: Option<String>,
}

/// The constraint pair `meshlife constraint --from-cluster` writes for the cluster's facts, as
/// `--constraint` files of it would read, and the facts in a line.
fn cluster_constraints(
    target: &crate::cluster::reader::Target,
    engine: &Engine,
) -> anyhow::Result<(Vec<crate::constraints::constraint::Constraint>, String)> {
    let facts =
        crate::cluster::reader::read_blocking(target, crate::cluster::reader::Reading::Facts)
            .and_then(|snapshot| crate::cluster::facts_of(&snapshot, &Default::default()))
            .map_err(|error| anyhow::anyhow!(error))?;
    for line in facts.summary() {
        tracing::info!(cluster = %facts.cluster, "fact read: {line}");
    }
    let base = crate::constraints::generate::ConstraintArgs::new(Default::default());
    let (generated, notes) = facts
        .generate_constraints(&base)
        .map_err(|error| anyhow::anyhow!(error))?;
    for note in facts.notes.iter().chain(&notes) {
        tracing::warn!(cluster = %facts.cluster, "{note}");
    }
    let constraints = crate::constraints::constraint::parse_constraints_text(
        crate::constraints::constraint::FACTS_SOURCE,
        &generated.yaml,
    )
    .map_err(|error| anyhow::anyhow!("the constraints of the cluster's facts: {error}"))?;
    for constraint in &constraints {
        constraint
            .validate_parameters(engine)
            .map_err(|error| anyhow::anyhow!("{error}"))?;
    }
    Ok((
        constraints,
        format!(
            "facts read at start from {}: {}",
            facts.cluster,
            facts.headline()
        ),
    ))
}

async fn serve(
    args: &ServeArgs,
    engine: Arc<Engine>,
    tls: Arc<TlsState>,
    settings: RouteSettings,
    started: Instant,
) -> anyhow::Result<u8> {
    let metrics = Arc::new(metrics::Metrics::default());
    let lifecycle = Lifecycle::default();
    if let Some(open_files) = limits::raise_open_file_limit()
        && (open_files as usize) < args.limits.max_connections.saturating_add(64)
    {
        tracing::warn!(
            open_files,
            max_connections = args.limits.max_connections,
            "the open-file limit is below --max-connections: connections past it are refused by \
             the kernel, not shed"
        );
    }
    let workers = args.limits.worker_count();
    let in_place_key_bytes = if args.module.is_none() {
        pool::IN_PLACE_KEY_BYTES
    } else {
        0
    };
    let pool = pool::EvaluationPool::start(
        Arc::clone(&engine),
        in_place_key_bytes,
        workers,
        args.limits.queue,
        args.limits.eval_timeout,
        Arc::clone(&metrics),
    )?;
    let routes = Arc::new(exchange::Routes {
        pool,
        metrics: Arc::clone(&metrics),
        limits: args.limits.clone(),
        client_ca: tls.requires_client_certificates(),
        kyverno_token: settings.kyverno_token,
        constraints: settings.constraints,
        namespaces: if args.no_namespace_watch {
            namespace_watch::NamespaceWatch::off("--no-namespace-watch")
        } else {
            namespace_watch::NamespaceWatch::start(settings.target.as_ref())
                .await
                .map_err(|error| anyhow::anyhow!(error))?
        },
    });
    let health = Arc::new(health::Health {
        lifecycle: lifecycle.clone(),
        tls: Arc::clone(&tls),
        metrics: Arc::clone(&metrics),
        routes: Arc::clone(&routes),
        facts_read: settings.facts_read,
    });

    let routes_listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|error| anyhow::anyhow!("cannot listen on {} (--listen): {error}", args.listen))?;
    let health_listener = tokio::net::TcpListener::bind(args.health_listen)
        .await
        .map_err(|error| {
            anyhow::anyhow!(
                "cannot listen on {} (--health-listen): {error}",
                args.health_listen
            )
        })?;
    let routes_address = routes_listener.local_addr()?;
    let health_address = health_listener.local_addr()?;

    let settings = |name, tls: Option<Arc<TlsState>>, closes_on_shutdown| ListenerSettings {
        name,
        limits: args.limits.clone(),
        lifecycle: lifecycle.clone(),
        metrics: Arc::clone(&metrics),
        tls,
        closes_on_shutdown,
    };
    let routes_task = match &args.transport_floor_answer {
        None => tokio::spawn(listener::serve(
            routes_listener,
            settings("routes", Some(Arc::clone(&tls)), true),
            Arc::clone(&routes),
        )),
        Some(path) => tokio::spawn(listener::serve(
            routes_listener,
            settings("routes", Some(Arc::clone(&tls)), true),
            Arc::new(routes::FixedAnswer::read(path, args.limits.clone())?),
        )),
    };
    tokio::spawn(listener::serve(
        health_listener,
        settings("health", None, false),
        health,
    ));
    tokio::spawn(reload_certificates(
        Arc::clone(&tls),
        args.tls_reload_interval,
        Arc::clone(&metrics),
    ));
    tracing::info!(
        routes = %routes_address,
        health = %health_address,
        workers,
        queue = args.limits.queue,
        client_certificates = tls.requires_client_certificates(),
        startup_ms = started.elapsed().as_millis() as u64,
        "meshlife serve is ready: POST https://{routes_address}{}",
        gatekeeper::PATH
    );

    let signal = shutdown::termination_signal().await?;
    tracing::info!(
        signal,
        drain_delay = ?args.drain_delay,
        "shutting down: /readyz fails now; still serving, with Connection: close, for the drain delay"
    );
    shutdown::run_drain(lifecycle.clone(), args.drain_delay).await;
    tracing::info!(
        "drain delay over: closing the listener and idle connections, finishing requests in flight"
    );
    debug_assert_eq!(lifecycle.phase(), Phase::Closing);
    match tokio::time::timeout(args.shutdown_timeout, routes_task).await {
        Ok(_) => {
            tracing::info!("every request answered; exiting");
            Ok(0)
        }
        Err(_) => {
            tracing::error!(
                in_flight = metrics.in_flight.load(std::sync::atomic::Ordering::Relaxed),
                "connections still open after --shutdown-timeout; exiting anyway"
            );
            Ok(EXIT_FAILED)
        }
    }
}

async fn reload_certificates(tls: Arc<TlsState>, every: Duration, metrics: Arc<metrics::Metrics>) {
    let mut ticker = tokio::time::interval(every.max(Duration::from_millis(100)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut last_failure = String::new();
    loop {
        ticker.tick().await;
        let checked = Arc::clone(&tls);
        let outcome = tokio::task::spawn_blocking(move || checked.reload_if_changed()).await;
        match outcome {
            Ok(Reload::Unchanged) => {}
            Ok(Reload::Reloaded) => {
                metrics.tls_reloaded("reloaded");
                last_failure.clear();
                tracing::info!("certificates reloaded; new connections use them");
            }
            Ok(Reload::Failed(reason)) => {
                // A Secret update is seen half-done now and then; log each new reason once.
                if reason != last_failure {
                    metrics.tls_reloaded("failed");
                    tracing::warn!(%reason, "certificate files changed but do not load; keeping the previous ones");
                    last_failure = reason;
                }
            }
            Err(error) => tracing::error!(%error, "certificate reload task failed"),
        }
    }
}
