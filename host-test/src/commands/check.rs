//! `meshlife check`: manifests in, findings out. Reads the inputs, judges every object under
//! the constraints that match it, and reports in the chosen format with what was not judged.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use meshlife_policy::Severity;
use meshlife_policy::verdicts::MeshVerdict;

use crate::constraints::constraint::Constraint;
use crate::inputs::manifests::{self, InputError};
use crate::inputs::namespaces::NamespaceDefinitions;
use crate::inputs::services::ServiceIndex;
use crate::judging::{self, Context, Evaluation};
use crate::module::engine::Engine;
use crate::report::coverage::{self, Coverage};
use crate::report::{self, Exemption, Finding, Format, ObjectReport, Report};
use crate::terminal::{
    EXIT_ERROR, EXIT_FAILED, EXIT_OK, no_colour_requested, print_error, print_note, print_warning,
};

/// Above this many files a progress bar is worth its flicker (and only on a terminal).
const PROGRESS_MIN_FILES: usize = 300;

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

/// Runs `meshlife check` and returns the process exit code.
pub fn run(args: &CheckArgs) -> u8 {
    let started = Instant::now();
    if args.explain && args.format != Format::Text {
        print_error(format_args!(
            "--explain adds timelines to the text report, not to -o {}; `meshlife explain -o \
             json|svg|html` gives them in other formats",
            format!("{:?}", args.format).to_lowercase()
        ));
        return EXIT_ERROR;
    }
    let limit = crate::inputs::files::ReadLimit::flag(args.max_file_size);
    let engine = match &args.module {
        Some(path) => Engine::from_file(path, limit),
        None => Engine::embedded(),
    };
    let engine = match engine {
        Ok(engine) => engine,
        Err(error) => {
            print_error(format_args!("{error:#}"));
            return EXIT_ERROR;
        }
    };
    let constraints = match load_constraints(args, &engine) {
        Ok(constraints) => constraints,
        Err(error) => {
            // A run with the defaults instead would look like a pass under the wrong rules.
            print_error(error);
            return EXIT_ERROR;
        }
    };

    let progress: OnceLock<ProgressBar> = OnceLock::new();
    let show_progress = |length: usize| {
        if length > PROGRESS_MIN_FILES && std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(length as u64);
            if let Ok(style) = ProgressStyle::with_template("{msg:10} [{bar:40}] {pos}/{len}") {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message("reading");
            let _ = progress.set(bar);
        }
    };
    let tick = || {
        if let Some(bar) = progress.get() {
            bar.inc(1);
        }
    };
    let module_loaded = Instant::now();
    let options = manifests::LoadOptions {
        exclude: args.exclude.clone(),
        limit,
    };
    let mut loaded = manifests::load_with_progress(&args.paths, &options, &show_progress, &tick);
    let inputs_read = Instant::now();
    for folder in &loaded.empty_folders {
        print_warning(format_args!(
            "{folder}: no .yaml, .yml or .json files found (outside \
             --exclude globs and .meshlifeignore entries)"
        ));
    }
    for note in &loaded.notes {
        print_note(note);
    }

    let moved =
        crate::inputs::namespaces::apply_default_namespace(&mut loaded.objects, &args.namespace);
    if let Some(note) =
        crate::inputs::namespaces::default_namespace_note(&loaded.objects, moved, &args.namespace)
    {
        print_note(note);
    }
    let namespaces = NamespaceDefinitions::from_objects(&loaded.objects);
    let mut notices: Vec<String> = namespaces
        .conflicts()
        .iter()
        .map(ToString::to_string)
        .collect();
    let services = ServiceIndex::from_objects(&loaded.objects);
    let mut errors = loaded.errors.clone();
    let mut coverage = Coverage::default();
    if args.strict {
        errors.extend(
            loaded
                .skipped
                .iter()
                .cloned()
                .map(manifests::Skipped::into_error),
        );
    } else {
        coverage.skipped = loaded.skipped.clone();
    }
    // `helm template ... | meshlife check -` with a failed helm reads nothing; "0 objects
    // checked" would pass it. Said only when no other error has failed the run already.
    if loaded.objects.is_empty() && errors.is_empty() && !args.allow_empty {
        errors.push(no_object_error(&args.paths, &loaded));
    }
    let context = Context {
        namespaces: &namespaces,
        services: &services,
    };
    let plan = judging::plan(
        &loaded.objects,
        &constraints,
        &context,
        args.constraints.is_empty() && !args.include_control_planes,
    );
    for &object_index in &plan.control_plane {
        coverage
            .control_plane
            .push(loaded.objects[object_index].listing());
    }
    for (object_index, message) in &plan.unmatchable {
        errors
            .push(loaded.objects[*object_index].error(Some("metadata.namespace"), message.clone()));
    }
    for &object_index in &plan.unmatched {
        let reason = if constraints.len() == 1 {
            format!(
                "not matched by constraint {}",
                constraint_title(&constraints[0])
            )
        } else {
            "not matched by any of the constraints".to_string()
        };
        coverage
            .unmatched
            .entry(reason)
            .or_default()
            .push(loaded.objects[object_index].listing());
    }
    let jobs = plan.jobs;
    let mut disagreements = std::collections::BTreeSet::new();
    for &(object_index, constraint_index) in &jobs {
        let object = &loaded.objects[object_index];
        if let (Some(namespace_object), Some(file)) =
            (context.namespace_of(object), namespaces.location_of(object))
        {
            disagreements.extend(crate::inputs::namespaces::facts_disagreement(
                &constraints[constraint_index].parameters,
                &object.identity.namespace,
                namespace_object,
                &file,
            ));
        }
    }
    notices.extend(crate::inputs::namespaces::facts_win_notices(&disagreements));
    if let Some(bar) = progress.get() {
        bar.set_position(0);
        bar.set_length(jobs.len() as u64);
        bar.set_message("checking");
    }
    let Evaluation { outcomes, verdicts } = judging::evaluate(
        &engine,
        &loaded.objects,
        &constraints,
        &context,
        &jobs,
        &tick,
    );
    let evaluated = Instant::now();
    if let Some(bar) = progress.get() {
        bar.finish_and_clear();
    }

    let mut findings: Vec<Vec<Finding>> = vec![Vec::new(); loaded.objects.len()];
    let fail_on = args.fail_on.severity();
    let mut required_mesh_findings: Vec<(usize, Finding)> = Vec::new();
    for (object_index, constraint_index, verdicts) in &verdicts {
        let object = &loaded.objects[*object_index];
        let listed = object.listing();
        let namespace = coverage::NamespaceFacts {
            in_input: context.namespace_of(object).is_some(),
            defined_elsewhere: namespaces.defines(&object.identity.namespace)
                && context.namespace_of(object).is_none(),
        };
        for verdict in verdicts {
            for misplaced in &verdict.misplaced {
                notices.push(coverage::misplaced_notice(&listed, misplaced));
            }
            match &verdict.verdict {
                MeshVerdict::NotMeshed(reason) => {
                    let reason = coverage::not_meshed_reason(reason, &namespace);
                    let pod_spec = verdict.path.as_deref().unwrap_or("");
                    if args.require_mesh {
                        required_mesh_findings.push((
                            *object_index,
                            judging::require_mesh_finding(
                                &reason,
                                pod_spec,
                                &constraints[*constraint_index],
                                fail_on,
                            ),
                        ));
                    }
                    let listed = if verdicts.len() > 1 {
                        format!("{listed} at {pod_spec}")
                    } else {
                        listed.clone()
                    };
                    coverage.not_meshed.entry(reason).or_default().push(listed);
                }
                MeshVerdict::NotJudged(reason) => {
                    if let Some(reason) = coverage::not_judged_reason(reason) {
                        coverage
                            .unmatched
                            .entry(reason)
                            .or_default()
                            .push(listed.clone());
                    }
                }
                MeshVerdict::Meshed { .. } | MeshVerdict::Gateway => {}
            }
        }
    }
    for (object_index, finding) in required_mesh_findings {
        findings[object_index].push(finding);
    }
    for (&(object_index, constraint_index), outcome) in jobs.iter().zip(outcomes) {
        let constraint = &constraints[constraint_index];
        match outcome {
            Ok(violations) => {
                findings[object_index].extend(judging::findings_of(violations, constraint, fail_on))
            }
            Err(error) => errors.push(judging::evaluation_error(
                &loaded.objects[object_index],
                &error,
            )),
        }
    }
    let terminal = std::io::stdout().is_terminal();
    let colour = args.format == Format::Text && terminal && !no_colour_requested();
    let timelines = if args.explain {
        let input_of = |object_index: usize, constraint_index: usize| {
            context.module_input(
                &constraints[constraint_index],
                &loaded.objects[object_index],
            )
        };
        let explained = explain_findings(
            &loaded.objects,
            &mut findings,
            &jobs,
            &constraints,
            &input_of,
            &mut notices,
        );
        crate::commands::explain::check_timelines(&explained, colour, terminal)
    } else {
        String::new()
    };
    locate_findings(&loaded.objects, &mut findings);
    let exemptions: Vec<Exemption> = loaded.objects.iter().filter_map(Exemption::of).collect();
    for exemption in &exemptions {
        notices.extend(exemption.unknown_entry_warnings());
    }
    // Moved, not copied: a long stream's objects are most of what the run holds.
    let objects = loaded
        .objects
        .into_iter()
        .zip(findings)
        .map(|(object, findings)| ObjectReport {
            identity: object.identity,
            findings,
        })
        .collect();
    let report = Report {
        files: loaded.files,
        objects,
        errors,
        exemptions,
        fail_on,
        not_judged: coverage.summary(),
        skipped: coverage.skipped.clone(),
        not_judged_groups: coverage.groups(),
    };

    for notice in &notices {
        print_warning(notice);
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

    if args.stats {
        let elapsed = started.elapsed().as_secs_f64();
        let objects = report.objects.len();
        let seconds = |from: Instant, to: Instant| to.duration_since(from).as_secs_f64();
        eprintln!(
            "meshlife: {}, {}, {} in {elapsed:.3} s ({:.0} objects/s; \
             module {:.3} s, reading {:.3} s, evaluating {:.3} s, reporting {:.3} s)",
            report::plural(objects, "object"),
            report::plural(report.files.len(), "file"),
            report::plural(jobs.len(), "evaluation"),
            objects as f64 / elapsed.max(1e-9),
            seconds(started, module_loaded),
            seconds(module_loaded, inputs_read),
            seconds(inputs_read, evaluated),
            seconds(evaluated, Instant::now()),
        );
    }

    if !report.errors.is_empty() {
        EXIT_ERROR
    } else if report.fails() {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}

/// Each finding's line and column in its file, for the files that can be read again (not stdin)
/// and objects that are documents of their own (a List item's path starts inside the List).
fn locate_findings(objects: &[manifests::ManifestObject], findings: &mut [Vec<Finding>]) {
    use crate::inputs::source_location::{DocumentLines, line_starts};
    let mut texts: BTreeMap<&str, Option<(String, Vec<usize>)>> = BTreeMap::new();
    for (object, findings) in objects.iter().zip(findings.iter_mut()) {
        if findings.is_empty()
            || object.identity.item.is_some()
            || object.identity.file == manifests::STDIN_NAME
        {
            continue;
        }
        let text = texts
            .entry(object.identity.file.as_str())
            .or_insert_with(|| {
                let text = std::fs::read_to_string(&object.identity.file).ok()?;
                let starts = line_starts(&text);
                Some((text, starts))
            });
        let Some((text, starts)) = text else {
            continue;
        };
        let document = DocumentLines::new(text, starts, object.identity.line);
        for finding in findings.iter_mut() {
            finding.location = document.locate(&finding.path);
        }
    }
}

/// `check --explain`: the timeline of each object under each constraint that gave it findings,
/// with those findings on it; each finding is told where it is drawn.
fn explain_findings(
    objects: &[manifests::ManifestObject],
    findings: &mut [Vec<Finding>],
    jobs: &[(usize, usize)],
    constraints: &[Constraint],
    input_of: &dyn Fn(usize, usize) -> Vec<u8>,
    notices: &mut Vec<String>,
) -> Vec<crate::commands::explain::Explained> {
    let mut explained = Vec::new();
    for &(object_index, constraint_index) in jobs {
        let object = &objects[object_index];
        let constraint = &constraints[constraint_index];
        let theirs: Vec<usize> = (0..findings[object_index].len())
            .filter(|&index| {
                constraints.len() == 1
                    || findings[object_index][index].constraint == constraint.name
            })
            .collect();
        if theirs.is_empty() {
            continue;
        }
        let subset: Vec<Finding> = theirs
            .iter()
            .map(|&index| findings[object_index][index].clone())
            .collect();
        match crate::commands::explain::explain_object(
            object,
            &input_of(object_index, constraint_index),
            &subset,
            &meshlife_policy::timeline::Assumptions::default(),
        ) {
            Ok(mut more) => {
                if constraints.len() > 1 {
                    for one in &mut more {
                        one.constraint = Some(constraint.name.clone());
                    }
                }
                for index in theirs {
                    let finding = &mut findings[object_index][index];
                    finding.timeline_place = crate::commands::explain::place_of(&more, finding);
                }
                explained.extend(more);
            }
            Err(problem) => notices.push(format!(
                "{}: no timeline to draw: {problem}",
                object.listing()
            )),
        }
    }
    explained
}

fn load_constraints(args: &CheckArgs, engine: &Engine) -> Result<Vec<Constraint>, String> {
    crate::constraints::constraints_of(
        &args.constraints,
        &args.facts,
        args.include_control_planes,
        crate::inputs::files::ReadLimit::flag(args.max_file_size),
        engine,
    )
}

/// The error of a run whose inputs held no object: what was read, and what to do.
fn no_object_error(paths: &[String], loaded: &manifests::LoadedInputs) -> InputError {
    let named = match paths {
        [path] if path == "-" => manifests::STDIN_NAME.to_string(),
        [path] => path.clone(),
        _ => "the input".to_string(),
    };
    let mut read = match loaded.files.len() {
        0 => "no manifest file found".to_string(),
        1 => "1 file read".to_string(),
        count => format!("{count} files read"),
    };
    if !loaded.skipped.is_empty() {
        read.push_str(&format!(
            ", {} skipped (see the notes above)",
            loaded.skipped.len()
        ));
    }
    let stdin_empty = loaded
        .skipped
        .iter()
        .any(|skip| skip.file == manifests::STDIN_NAME && skip.reason == manifests::EMPTY_STDIN);
    let stdin_hint = if stdin_empty {
        "; an empty stdin is what a failed command before the pipe leaves (`set -o pipefail` \
         makes the shell fail on it)"
    } else if loaded
        .files
        .iter()
        .any(|file| file == manifests::STDIN_NAME)
    {
        "; stdin held documents, none of them a Kubernetes object (each needs apiVersion and kind)"
    } else {
        ""
    };
    InputError::file(
        &named,
        format!(
            "no Kubernetes object to check ({read}){stdin_hint}; name the manifests to check \
             (templates rendered first), or pass --allow-empty if an input without objects is \
             expected"
        ),
    )
}
fn constraint_title(constraint: &Constraint) -> String {
    if constraint.file.is_empty() || constraint.file == crate::constraints::facts::FACTS_SOURCE {
        format!("{} (from the command-line facts)", constraint.name)
    } else {
        format!("{} ({})", constraint.name, constraint.file)
    }
}
