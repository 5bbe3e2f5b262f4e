//! `meshlife check`: manifests in, findings out. Reads the inputs, judges every object under
//! the constraints that match it, and reports in the chosen format with what was not judged.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use meshlife_policy::Severity;

use crate::cluster::{ClusterFacts, ClusterRead, ClusterSourceArgs};
use crate::commands::explain;
use crate::constraints::constraint::Constraint;
use crate::inputs::files::ReadLimit;
use crate::inputs::manifests::{self, LoadOptions, LoadedInputs, Skipped};
use crate::inputs::namespaces::{self, NamespaceDefinitions};
use crate::inputs::services::ServiceIndex;
use crate::judging::{self, Context};
use crate::module::engine::Engine;
use crate::report::{self, FactsRead, Format, Report};
use crate::terminal::{
    EXIT_ERROR, EXIT_FAILED, EXIT_OK, Progress, no_colour_requested, print_error, print_note,
    print_warning,
};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Files, folders (searched recursively for .yaml, .yml and .json) or `-` for stdin.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,

    /// A Gatekeeper MeshLifecycle constraint: its parameters, match and enforcementAction
    /// apply. May be repeated; each object is checked under every constraint that matches it.
    #[arg(long = "constraint", value_name = "FILE")]
    pub constraints: Vec<PathBuf>,

    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub format: Format,

    /// Also write the report in FORMAT to FILE (repeatable): `-o github --output-file
    /// sarif=meshlife.sarif` annotates a pull request and feeds code scanning in one run.
    #[arg(long, value_name = "FORMAT=FILE", value_parser = parse_output_file)]
    pub output_file: Vec<OutputFile>,

    /// Lowest severity of a deny finding that makes the run fail (exit 1); `none`: report
    /// only, never exit 1 (input errors still exit 2).
    #[arg(long, value_enum, default_value = "warning")]
    pub fail_on: FailOn,

    /// Evaluate this OPA wasm module instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    pub module: Option<PathBuf>,

    /// Print objects, files, elapsed time and throughput to stderr.
    #[arg(long)]
    pub stats: bool,

    /// The namespace of objects that name none (of namespaced kinds), as `kubectl apply -n`
    /// would put them: `helm template` output names none.
    #[arg(short = 'n', long, value_name = "NS", default_value = crate::inputs::namespaces::DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// A workload judged as not meshed is an error: for teams whose workloads are all meshed,
    /// so that a missing injection label cannot pass as "0 findings".
    #[arg(long)]
    pub require_mesh: bool,

    /// Leave out files and folders matching this glob (gitignore syntax, relative to each folder
    /// named); repeatable. A `.meshlifeignore` file does the same from inside the repository.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,

    /// Inputs that hold nothing to judge (templates, YAML that is not a Kubernetes object) are
    /// errors instead of skipped.
    #[arg(long)]
    pub strict: bool,

    /// A run whose inputs hold no Kubernetes object at all passes (exit 0) instead of being an
    /// input error: for pipelines where an empty render is expected.
    #[arg(long)]
    pub allow_empty: bool,

    /// The most one file, stdin, a --constraint or a --module file may hold (256MiB, 1G,
    /// 500k, bytes); a larger one is an input error naming it, and the rest is still checked.
    #[arg(long, value_name = "SIZE", default_value_t = crate::inputs::files::DEFAULT_MAX_FILE_SIZE)]
    pub max_file_size: crate::inputs::files::FileSize,

    /// Add the startup and shutdown timeline of each object with findings to the text report,
    /// each finding marked where it happens (as `meshlife explain` draws it, with its default
    /// assumptions).
    #[arg(long)]
    pub explain: bool,

    /// Judge the meshes' own namespaces too (istio-system, istio-ingress, istio-egress,
    /// linkerd, linkerd-viz, linkerd-jaeger, linkerd-multicluster, linkerd-cni), which are not
    /// judged by default, as the generated constraints exclude them. A --constraint file's own
    /// match decides instead.
    #[arg(long)]
    pub include_control_planes: bool,

    /// The cluster's facts, as `meshlife constraint` takes them; instead of `--constraint`.
    #[command(flatten)]
    pub facts: crate::constraints::facts::ClusterFactArgs,

    /// The cluster to read the facts and the Namespaces from.
    #[command(flatten)]
    pub cluster: ClusterSourceArgs,

    /// The repository config (`.meshlife.yaml`) to use or not.
    #[command(flatten)]
    pub config: crate::config::ConfigArgs,
}

/// A report written to a file besides stdout's.
#[derive(Clone, Debug)]
pub struct OutputFile {
    pub format: Format,
    pub path: PathBuf,
}

fn parse_output_file(text: &str) -> Result<OutputFile, String> {
    let (format, path) = text
        .split_once('=')
        .filter(|(_, path)| !path.is_empty())
        .ok_or("expected FORMAT=FILE, such as sarif=meshlife.sarif")?;
    let format = Format::from_str(format, false).map_err(|_| {
        let names: Vec<String> = Format::value_variants()
            .iter()
            .filter_map(|variant| variant.to_possible_value())
            .map(|value| value.get_name().to_string())
            .collect();
        format!("no format {format:?}; the formats: {}", names.join(", "))
    })?;
    Ok(OutputFile {
        format,
        path: PathBuf::from(path),
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
    Info,
    /// No finding fails the run.
    None,
}

impl FailOn {
    /// The lowest failing severity; `None` for `--fail-on none`.
    pub fn severity(self) -> Option<Severity> {
        match self {
            FailOn::Error => Some(Severity::Error),
            FailOn::Warning => Some(Severity::Warning),
            FailOn::Info => Some(Severity::Info),
            FailOn::None => None,
        }
    }
}

/// Runs `meshlife check` and returns the process exit code. Its steps, in the order data
/// flows: the module and the constraints, the inputs, the judging pipeline (`crate::judging`),
/// the `--explain` timelines, the report.
pub fn run(args: &CheckArgs) -> u8 {
    let mut timings = Timings::start();
    if args.explain && args.format != Format::Text {
        print_error(format_args!(
            "--explain adds timelines to the text report, not to -o {}; `meshlife explain -o \
             json|svg|html` gives them in other formats",
            format!("{:?}", args.format).to_lowercase()
        ));
        return EXIT_ERROR;
    }
    let limit = ReadLimit::flag(args.max_file_size);
    let cluster = match ClusterRead::of(&args.cluster, &args.facts, !args.constraints.is_empty()) {
        Ok(cluster) => cluster,
        Err(error) => {
            print_error(error);
            return EXIT_ERROR;
        }
    };
    let facts = cluster.as_ref().and_then(ClusterRead::facts);
    let (engine, constraints) = match module_and_constraints(args, facts, limit) {
        Ok(both) => both,
        Err(message) => {
            // A run with the defaults instead would look like a pass under the wrong rules.
            print_error(message);
            return EXIT_ERROR;
        }
    };
    timings.module_loaded = Instant::now();
    let progress = Progress::default();
    let loaded = read_inputs(args, limit, &progress);
    timings.inputs_read = Instant::now();

    let mut namespaces = NamespaceDefinitions::from_objects(&loaded.objects);
    if let Some(cluster) = &cluster {
        namespaces.add_cluster(cluster.cluster(), cluster.namespaces());
    }
    let services = ServiceIndex::from_objects(&loaded.objects);
    let context = Context {
        namespaces: &namespaces,
        services: &services,
    };
    let options = judging::Options {
        skip_control_planes: args.constraints.is_empty() && !args.include_control_planes,
        require_mesh: args.require_mesh,
        fail_on: args.fail_on.severity(),
    };
    let mut judgement = judging::judge(
        &engine,
        &loaded.objects,
        &constraints,
        &context,
        &options,
        &progress,
    );
    timings.evaluated = Instant::now();
    let unicode = std::io::stdout().is_terminal();
    let colour = args.format == Format::Text && unicode && !no_colour_requested();
    let timelines = if args.explain {
        explain::check_timelines(
            &loaded.objects,
            &constraints,
            &context,
            &mut judgement,
            colour,
            unicode,
        )
    } else {
        String::new()
    };

    let evaluations = judgement.jobs.len();
    let mut notices: Vec<String> = namespaces
        .conflicts()
        .iter()
        .map(ToString::to_string)
        .collect();
    notices.append(&mut judgement.notices);
    let mut coverage = judgement.coverage;
    coverage.skipped = loaded.skipped;
    let mut errors = loaded.errors;
    errors.append(&mut judgement.errors);
    let mut report = Report::new(
        loaded.files,
        loaded.objects,
        judgement.findings,
        errors,
        &coverage,
        options.fail_on,
    );
    report.config = args.config.used.clone();
    report.facts_read = cluster.as_ref().map(|cluster| FactsRead {
        cluster: cluster.cluster().to_string(),
        facts: cluster.summary(),
    });
    for exemption in &report.exemptions {
        notices.extend(exemption.unknown_entry_warnings());
    }
    for notice in &notices {
        print_warning(notice);
    }
    if cluster.is_none() && args.constraints.is_empty() && !args.facts.describes_the_cluster() {
        print_note(crate::constraints::facts::todays_releases_note());
    }
    for note in coverage.notes() {
        print_note(note);
    }
    for error in &report.errors {
        print_error(error);
    }
    let rendered = report::render(&report, args.format, colour) + &timelines;
    if let Err(error) = crate::terminal::write_stdout(&rendered) {
        print_error(error);
        return EXIT_ERROR;
    }
    for output in &args.output_file {
        let text = report::render(&report, output.format, false);
        if let Err(error) = std::fs::write(&output.path, text) {
            print_error(format_args!(
                "--output-file {}: cannot write: {error}",
                output.path.display()
            ));
            return EXIT_ERROR;
        }
    }
    if args.stats {
        timings.print(&report, evaluations);
    }
    if !report.errors.is_empty() {
        EXIT_ERROR
    } else if report.fails() {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

/// The module to evaluate and the constraints to judge under: `--constraint` files, or the
/// constraint of the cluster's facts and the fact flags, or the default one.
fn module_and_constraints(
    args: &CheckArgs,
    cluster: Option<&ClusterFacts>,
    limit: ReadLimit,
) -> Result<(Engine, Vec<Constraint>), String> {
    let engine = match &args.module {
        Some(path) => Engine::from_file(path, limit),
        None => Engine::embedded(),
    }
    .map_err(|error| format!("{error:#}"))?;
    let mut notes = Vec::new();
    let constraints = crate::cluster::constraints_for_judging(
        cluster,
        &args.constraints,
        &args.facts,
        args.include_control_planes,
        limit,
        &engine,
        &mut notes,
    );
    for note in notes {
        print_note(note);
    }
    let constraints = constraints?;
    Ok((engine, constraints))
}

/// The inputs as `check` judges them. What the reading noticed is printed; objects that name
/// no namespace are put in `--namespace`; under `--strict` skipped inputs are errors; and an
/// input without any object is an error unless `--allow-empty`.
fn read_inputs(args: &CheckArgs, limit: ReadLimit, progress: &Progress) -> LoadedInputs {
    let options = LoadOptions {
        exclude: args.exclude.clone(),
        limit,
    };
    let mut loaded = manifests::load_with_progress(
        &args.paths,
        &options,
        &|files| progress.reading(files),
        &|| progress.tick(),
    );
    for folder in &loaded.empty_folders {
        print_warning(format_args!(
            "{folder}: no .yaml, .yml or .json files found (outside \
             --exclude globs and .meshlifeignore entries)"
        ));
    }
    for note in &loaded.notes {
        print_note(note);
    }
    let moved = namespaces::apply_default_namespace(&mut loaded.objects, &args.namespace);
    if let Some(note) = namespaces::default_namespace_note(&loaded.objects, moved, &args.namespace)
    {
        print_note(note);
    }
    if args.strict {
        let skipped = std::mem::take(&mut loaded.skipped);
        loaded
            .errors
            .extend(skipped.into_iter().map(Skipped::into_error));
    }
    // `helm template ... | meshlife check -` with a failed helm reads nothing; "0 objects
    // checked" would pass it. Said only when no other error has failed the run already.
    if loaded.objects.is_empty() && loaded.errors.is_empty() && !args.allow_empty {
        let error = loaded.no_object_error(&args.paths);
        loaded.errors.push(error);
    }
    loaded
}

/// When each step of a run ended, for `--stats`.
struct Timings {
    started: Instant,
    module_loaded: Instant,
    inputs_read: Instant,
    evaluated: Instant,
}

impl Timings {
    fn start() -> Timings {
        let now = Instant::now();
        Timings {
            started: now,
            module_loaded: now,
            inputs_read: now,
            evaluated: now,
        }
    }

    fn print(&self, report: &Report, evaluations: usize) {
        let elapsed = self.started.elapsed().as_secs_f64();
        let objects = report.objects.len();
        let seconds = |from: Instant, to: Instant| to.duration_since(from).as_secs_f64();
        eprintln!(
            "meshlife: {}, {}, {} in {elapsed:.3} s ({:.0} objects/s; \
             module {:.3} s, reading {:.3} s, evaluating {:.3} s, reporting {:.3} s)",
            report::plural(objects, "object"),
            report::plural(report.files.len(), "file"),
            report::plural(evaluations, "evaluation"),
            objects as f64 / elapsed.max(1e-9),
            seconds(self.started, self.module_loaded),
            seconds(self.module_loaded, self.inputs_read),
            seconds(self.inputs_read, self.evaluated),
            seconds(self.evaluated, Instant::now()),
        );
    }
}
