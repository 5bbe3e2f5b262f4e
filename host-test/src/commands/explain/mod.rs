//! `meshlife explain`: each workload's startup and shutdown timeline, as the policy computes it
//! (`meshlife_policy::timeline`), with the object's findings placed on it; drawn for a terminal
//! (`terminal.rs`), as SVG (`svg.rs`), as one HTML page (`html.rs`) or given as JSON.
//! Inputs, constraints and cluster facts are read as `check` reads them, so the timeline is of
//! the same object `check` judges; `check --explain` draws its own findings the same way.

mod bars;
mod html;
pub(crate) mod svg;
pub(crate) mod terminal;

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use meshlife_policy::timeline::{Anchor, Assumptions, PodSpecTimeline, timelines};
use meshlife_policy::violation::Severity;
use serde::Serialize;

use crate::constraints::constraint::Constraint;
use crate::inputs::manifests::{self, ManifestObject};
use crate::inputs::namespaces::NamespaceDefinitions;
use crate::inputs::services::ServiceIndex;
use crate::judging::{self, Applicable, Context, Judgement, REQUIRE_MESH_RULE};
use crate::module::engine::Engine;
use crate::report::Finding;
use crate::terminal::{EXIT_ERROR, EXIT_OK, no_colour_requested, print_error, print_note};

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// Files, folders (searched recursively for .yaml, .yml and .json) or `-` for stdin.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,

    /// A Gatekeeper MeshLifecycle constraint whose parameters (the cluster's facts) apply; the
    /// first one that matches an object is used.
    #[arg(long = "constraint", value_name = "FILE")]
    pub constraints: Vec<PathBuf>,

    /// Output format: a drawing for the terminal (text), one SVG picture per pod spec (svg),
    /// one self-contained HTML page with every timeline beside its findings (html), or the
    /// timeline as data (json).
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub format: ExplainFormat,

    /// With `-o svg`: write one picture per pod spec into this folder (NAME.svg, from the
    /// object); without it the input must hold exactly one pod spec, drawn to stdout.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,

    /// The namespace of objects that name none, as `check -n`.
    #[arg(short = 'n', long, value_name = "NS", default_value = crate::inputs::namespaces::DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// Leave out files and folders matching this glob, as `check --exclude`.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,

    /// The most one file or stdin may hold, as `check --max-file-size`.
    #[arg(long, value_name = "SIZE", default_value_t = crate::inputs::files::DEFAULT_MAX_FILE_SIZE)]
    pub max_file_size: crate::inputs::files::FileSize,

    /// Width of the drawing in columns (default: the terminal's, else 100).
    #[arg(long, value_name = "COLUMNS")]
    pub width: Option<usize>,

    #[command(flatten)]
    pub assumptions: AssumptionArgs,

    /// The cluster's facts, as `meshlife constraint` takes them; instead of `--constraint`.
    #[command(flatten)]
    pub facts: crate::constraints::facts::ClusterFactArgs,

    /// The cluster to read the facts and the Namespaces from.
    #[command(flatten)]
    pub cluster: crate::cluster::ClusterSourceArgs,

    /// The repository config (`.meshlife.yaml`) to use or not.
    #[command(flatten)]
    pub config: crate::config::ConfigArgs,
}

/// The figures no manifest holds; each is drawn with its source, so a reader sees what was
/// assumed. Go durations (`2s`, `500ms`).
#[derive(Args, Debug)]
pub struct AssumptionArgs {
    /// From the proxy's start to its readiness (measure: the proxy's "ready" log line).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration_ms)]
    pub proxy_ready: u64,
    /// How long each user init container runs.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration_ms)]
    pub init_container: u64,
    /// From an app container's start to its readiness.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = duration_ms)]
    pub app_ready: u64,
    /// From the pod's deletion until no load balancer sends it new requests.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = duration_ms)]
    pub endpoint_removal: u64,
    /// From SIGTERM to an app container's exit.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration_ms)]
    pub app_exit: u64,
    /// How long a short request takes.
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = duration_ms)]
    pub short_request: u64,
}

impl AssumptionArgs {
    pub(crate) fn assumptions(&self) -> Assumptions {
        Assumptions {
            proxy_ready_ms: self.proxy_ready,
            init_container_ms: self.init_container,
            app_ready_ms: self.app_ready,
            endpoint_removal_ms: self.endpoint_removal,
            app_exit_ms: self.app_exit,
            short_request_ms: self.short_request,
        }
    }
}

fn duration_ms(text: &str) -> Result<u64, String> {
    meshlife_policy::duration::parse_go_duration(text)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExplainFormat {
    Text,
    Svg,
    Html,
    Json,
}

/// One pod spec's timeline, with the object it belongs to.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explained {
    pub file: String,
    /// `document 2`, `document 1, item 3`.
    pub location: String,
    /// `Deployment shop/web`.
    pub object: String,
    pub pod_spec: String,
    pub timeline: meshlife_policy::timeline::Timeline,
    /// The object's findings on this pod spec, each with its place on the timeline.
    pub findings: Vec<PlacedFinding>,
    /// The constraint whose parameters drew it, where `check --explain` had several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
}

/// A finding of `check`, and where on the timeline it shows.
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PlacedFinding {
    pub rule: String,
    pub name: String,
    pub severity: Severity,
    pub msg: String,
    pub fix: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// `None` for a finding with no moment (ML000: the input could not be read).
    pub anchor: Option<Anchor>,
}

impl PlacedFinding {
    /// The message without its `[ML401 drain-exceeds-grace] ` prefix, for a place that
    /// names the rule already.
    pub fn message(&self) -> &str {
        self.msg
            .strip_prefix(&format!("[{} {}] ", self.rule, self.name))
            .unwrap_or(&self.msg)
    }
}

/// The timelines of `object`'s pod specs (from `input`, the policy's input for it), each with
/// the findings about it ([`owners_of`]).
pub(crate) fn explain_object(
    object: &ManifestObject,
    input: &[u8],
    findings: &[Finding],
    assumptions: &Assumptions,
) -> Result<Vec<Explained>, String> {
    let pod_specs = timelines(input, assumptions)?;
    let pod_spec_paths: Vec<Vec<&str>> = pod_specs
        .iter()
        .map(|pod_spec| path_segments(&pod_spec.path))
        .collect();
    let owners: Vec<Vec<usize>> = findings
        .iter()
        .map(|finding| owners_of(&path_segments(&finding.path), &pod_spec_paths))
        .collect();
    Ok(pod_specs
        .iter()
        .enumerate()
        .map(|(index, PodSpecTimeline { path, timeline })| Explained {
            file: object.identity.file.clone(),
            location: object.location(),
            object: object.display_name(),
            pod_spec: path.clone(),
            findings: findings
                .iter()
                .zip(&owners)
                .filter(|(_, owners)| owners.contains(&index))
                .map(|(finding, _)| PlacedFinding {
                    rule: finding.rule.clone(),
                    name: finding.check.clone(),
                    severity: finding.severity,
                    msg: finding.msg.clone(),
                    fix: finding.fix.clone(),
                    path: finding.path.clone(),
                    container: finding.container.clone(),
                    anchor: timeline
                        .anchor_of(&finding.rule, finding.container.as_deref())
                        .or((finding.rule == REQUIRE_MESH_RULE).then_some(Anchor::Mode)),
                })
                .collect(),
            timeline: timeline.clone(),
            constraint: None,
        })
        .collect())
}

pub fn run_explain(args: &ExplainArgs) -> u8 {
    if let Some(config) = &args.config.used {
        print_note(format_args!("config: {config}"));
    }
    match explain_inputs(args) {
        Err(error) => {
            print_error(error);
            EXIT_ERROR
        }
        Ok(ExplainRun {
            explained,
            errors,
            notes,
        }) => {
            for note in &notes {
                print_note(note);
            }
            for error in &errors {
                print_error(error);
            }
            let rendered = match args.format {
                ExplainFormat::Html => html::page(&args.paths, &explained, &notes, &errors),
                ExplainFormat::Json => match serde_json::to_string_pretty(&explained) {
                    Ok(json) => json + "\n",
                    Err(error) => {
                        print_error(error);
                        return EXIT_ERROR;
                    }
                },
                ExplainFormat::Svg => match svg_output(&explained, args.out_dir.as_deref()) {
                    Ok(rendered) => rendered,
                    Err(error) => {
                        print_error(error);
                        return EXIT_ERROR;
                    }
                },
                ExplainFormat::Text => {
                    let terminal = std::io::stdout().is_terminal();
                    let style = terminal::Style {
                        colour: terminal && !no_colour_requested(),
                        unicode: terminal,
                        width: args.width.unwrap_or_else(terminal_width).max(60),
                        finding_messages: true,
                    };
                    terminal::draw_all(&explained, &style)
                }
            };
            if let Err(error) = crate::terminal::write_stdout(&rendered) {
                print_error(error);
                return EXIT_ERROR;
            }
            if errors.is_empty() {
                EXIT_OK
            } else {
                EXIT_ERROR
            }
        }
    }
}

/// The SVG of the one pod spec for stdout, or every picture written into `out_dir` (what was
/// written is listed on stdout).
fn svg_output(
    explained: &[Explained],
    out_dir: Option<&std::path::Path>,
) -> Result<String, String> {
    let Some(out_dir) = out_dir else {
        return match explained {
            [one] => Ok(svg::draw(one)),
            [] => Err("no pod spec to draw".into()),
            many => Err(format!(
                "{} pod specs to draw, one SVG each: pass --out-dir DIR to write them",
                many.len()
            )),
        };
    };
    std::fs::create_dir_all(out_dir)
        .map_err(|error| format!("--out-dir {}: {error}", out_dir.display()))?;
    let mut written = String::new();
    let mut used = std::collections::BTreeSet::new();
    for one in explained {
        let mut name = file_name_of(one);
        let base = name.clone();
        let mut counter = 2;
        while !used.insert(name.clone()) {
            name = format!("{base}-{counter}");
            counter += 1;
        }
        let path = out_dir.join(format!("{name}.svg"));
        std::fs::write(&path, svg::draw(one))
            .map_err(|error| format!("writing {}: {error}", path.display()))?;
        written.push_str(&format!("{}\n", path.display()));
    }
    Ok(written)
}

/// `deployment-shop-web`, or with the pod spec's place for objects that hold several.
fn file_name_of(explained: &Explained) -> String {
    let mut name: String = explained
        .object
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    if explained.pod_spec != "spec.template.spec" && explained.pod_spec != "spec" {
        name.push('-');
        name.extend(explained.pod_spec.chars().map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        }));
    }
    let collapsed: Vec<&str> = name.split('-').filter(|part| !part.is_empty()).collect();
    collapsed.join("-")
}

/// The pod specs a finding at `path` is about: those whose path shares the most leading
/// segments with it. A finding in one pod spec's subtree (or its Job template's, as JobSet's
/// `spec.replicatedJobs[0].template.spec.activeDeadlineSeconds`) goes to that one; one about
/// the whole object (a Deployment's `spec.strategy`) ties, and goes to all.
fn owners_of(path: &[&str], pod_specs: &[Vec<&str>]) -> Vec<usize> {
    let shared: Vec<usize> = pod_specs
        .iter()
        .map(|pod_spec| {
            pod_spec
                .iter()
                .zip(path)
                .take_while(|(left, right)| left == right)
                .count()
        })
        .collect();
    let most = shared.iter().copied().max().unwrap_or(0);
    (0..pod_specs.len())
        .filter(|&index| shared[index] == most)
        .collect()
}

/// `spec.template.metadata.annotations["a.b/c"]` as its segments: dots inside brackets are
/// part of a key.
fn path_segments(path: &str) -> Vec<&str> {
    let mut segments = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (offset, character) in path.char_indices() {
        match character {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => {
                segments.push(&path[start..offset]);
                start = offset + 1;
            }
            _ => {}
        }
    }
    if start < path.len() {
        segments.push(&path[start..]);
    }
    segments
}

/// Where `finding` is on the first of `explained` that holds it, in words (`shutdown 30s:
/// istio-proxy killed at the grace period ...`), for the line `check --explain` adds under it.
fn place_of(explained: &[Explained], finding: &Finding) -> Option<String> {
    explained.iter().find_map(|one| {
        one.findings
            .iter()
            .find(|placed| {
                placed.rule == finding.rule
                    && placed.path == finding.path
                    && placed.msg == finding.msg
            })
            .and_then(|placed| placed.anchor)
            .map(|anchor| bars::anchor_phrase(&one.timeline, anchor))
    })
}

/// The timelines `check --explain` adds to its text report: every object under each
/// constraint that gave it findings, drawn with them (their messages are in the report above,
/// so only their places are repeated). Each finding is told where it is drawn; an object whose
/// timeline cannot be drawn is said among the judgement's notices.
pub(crate) fn check_timelines(
    objects: &[ManifestObject],
    constraints: &[Constraint],
    context: &Context,
    judgement: &mut Judgement,
    colour: bool,
    unicode: bool,
) -> String {
    let mut explained = Vec::new();
    for &(object_index, constraint_index) in &judgement.jobs {
        let object = &objects[object_index];
        let constraint = &constraints[constraint_index];
        let findings = &mut judgement.findings[object_index];
        let theirs: Vec<usize> = (0..findings.len())
            .filter(|&index| {
                constraints.len() == 1 || findings[index].constraint == constraint.name
            })
            .collect();
        if theirs.is_empty() {
            continue;
        }
        let subset: Vec<Finding> = theirs
            .iter()
            .map(|&index| findings[index].clone())
            .collect();
        match explain_object(
            object,
            &context.module_input(constraint, object),
            &subset,
            &Assumptions::default(),
        ) {
            Ok(mut more) => {
                if constraints.len() > 1 {
                    for one in &mut more {
                        one.constraint = Some(constraint.name.clone());
                    }
                }
                for index in theirs {
                    findings[index].timeline_place = place_of(&more, &findings[index]);
                }
                explained.extend(more);
            }
            Err(problem) => judgement.notices.push(format!(
                "{}: no timeline to draw: {problem}",
                object.listing()
            )),
        }
    }
    if explained.is_empty() {
        return String::new();
    }
    let style = terminal::Style {
        colour,
        unicode,
        width: terminal_width().max(60),
        finding_messages: false,
    };
    format!(
        "\n{}\n{}",
        terminal::wrap(
            "",
            "Timelines of the objects with findings (assumed figures: `meshlife explain --help`)",
            2,
            style.width
        ),
        terminal::draw_all(&explained, &style)
    )
}

/// `COLUMNS` when the shell exports it, else 100.
pub(crate) fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.parse().ok())
        .unwrap_or(100)
}

/// What one run of `meshlife explain` found in its inputs.
struct ExplainRun {
    explained: Vec<Explained>,
    errors: Vec<manifests::InputError>,
    /// What was read but not explained, and why.
    notes: Vec<String>,
}

/// What the timelines are drawn under: the module, the constraints (from files, flags or the
/// cluster's facts) and the cluster read, when one is. `explain` and `diagnose` (its prediction)
/// share it.
pub(crate) struct Predictor {
    engine: Engine,
    constraints: Vec<Constraint>,
    cluster: Option<crate::cluster::ClusterRead>,
}

impl Predictor {
    /// Reads the constraints and the cluster; what was read is said in `notes`.
    pub(crate) fn new(
        constraint_files: &[PathBuf],
        facts: &crate::constraints::facts::ClusterFactArgs,
        cluster: &crate::cluster::ClusterSourceArgs,
        limit: crate::inputs::files::ReadLimit,
        notes: &mut Vec<String>,
    ) -> Result<Predictor, String> {
        let engine = Engine::embedded().map_err(|error| format!("{error:#}"))?;
        let cluster =
            crate::cluster::ClusterRead::of(cluster, facts, !constraint_files.is_empty())?;
        if let Some(cluster) = &cluster {
            notes.push(format!("read from {}:", cluster.cluster()));
            notes.extend(cluster.summary().iter().map(|line| format!("  {line}")));
        } else if constraint_files.is_empty() && !facts.describes_the_cluster() {
            notes.push(crate::constraints::facts::todays_releases_note());
        }
        let constraints = crate::cluster::constraints_for_judging(
            cluster
                .as_ref()
                .and_then(crate::cluster::ClusterRead::facts),
            constraint_files,
            facts,
            false,
            limit,
            &engine,
            notes,
        )?;
        Ok(Predictor {
            engine,
            constraints,
            cluster,
        })
    }

    /// The Namespaces the objects are judged in: their own, and the cluster's when one was read.
    pub(crate) fn namespaces(&self, objects: &[ManifestObject]) -> NamespaceDefinitions {
        let mut namespaces = NamespaceDefinitions::from_objects(objects);
        if let Some(cluster) = &self.cluster {
            namespaces.add_cluster(cluster.cluster(), cluster.namespaces());
        }
        namespaces
    }

    /// Every reviewed object's timelines with its findings, under the first constraint that
    /// matches it; what is not drawn is said in `notes` or `errors`.
    pub(crate) fn explain(
        &self,
        objects: &[ManifestObject],
        assumptions: &Assumptions,
        notes: &mut Vec<String>,
        errors: &mut Vec<manifests::InputError>,
    ) -> Vec<Explained> {
        let namespaces = self.namespaces(objects);
        let services = ServiceIndex::from_objects(objects);
        let context = Context {
            namespaces: &namespaces,
            services: &services,
        };
        let mut explained = Vec::new();
        for object in objects {
            // A NetworkPolicy has no pod of its own, so no timeline: `check` judges it.
            if !object.holds_pod_specs() {
                continue;
            }
            let applicable =
                Applicable::of(&self.constraints, object, context.namespace_of(object));
            let constraint = match applicable.first() {
                Some(Ok(index)) => Some(&self.constraints[index]),
                Some(Err(message)) => {
                    errors.push(object.error(Some("metadata.namespace"), message.to_string()));
                    None
                }
                None => None,
            };
            let Some(constraint) = constraint else {
                notes.push(format!(
                    "{}: not matched by any constraint, not explained",
                    object.listing()
                ));
                continue;
            };
            let input = context.module_input(constraint, object);
            let findings: Vec<Finding> = match self.engine.evaluate(&input) {
                Ok(violations) => judging::findings_of(violations, constraint, None).collect(),
                Err(error) => {
                    errors.push(judging::evaluation_error(object, &error));
                    continue;
                }
            };
            match explain_object(object, &input, &findings, assumptions) {
                Ok(pod_specs) => explained.extend(pod_specs),
                Err(problem) => {
                    errors.push(object.error(None, format!("cannot draw its timeline: {problem}")))
                }
            }
        }
        explained
    }
}

/// Every pod spec's timeline in the inputs with its findings, and the input errors (which do
/// not stop the rest).
fn explain_inputs(args: &ExplainArgs) -> Result<ExplainRun, String> {
    let limit = crate::inputs::files::ReadLimit::flag(args.max_file_size);
    let mut notes = Vec::new();
    let predictor = Predictor::new(
        &args.constraints,
        &args.facts,
        &args.cluster,
        limit,
        &mut notes,
    )?;
    let options = manifests::LoadOptions {
        exclude: args.exclude.clone(),
        limit,
    };
    let mut loaded = manifests::load_with_progress(&args.paths, &options, &|_| {}, &|| {});
    notes.extend(loaded.notes.iter().map(ToString::to_string));
    notes.extend(
        loaded
            .skipped
            .iter()
            .map(|skipped| skipped.clone().into_error().to_string()),
    );
    crate::inputs::namespaces::apply_default_namespace(&mut loaded.objects, &args.namespace);
    let mut errors = loaded.errors.clone();
    if loaded.objects.is_empty() && errors.is_empty() {
        return Err(format!(
            "{}: no Kubernetes object to explain",
            args.paths.join(", ")
        ));
    }
    let explained = predictor.explain(
        &loaded.objects,
        &args.assumptions.assumptions(),
        &mut notes,
        &mut errors,
    );
    Ok(ExplainRun {
        explained,
        errors,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::{owners_of, path_segments};

    #[test]
    fn a_finding_goes_to_the_pod_spec_whose_path_it_shares_most() {
        let leader = path_segments("spec.replicatedJobs[0].template.spec.template.spec");
        let workers = path_segments("spec.replicatedJobs[1].template.spec.template.spec");
        let pod_specs = [leader, workers];
        let owners = |path: &str| owners_of(&path_segments(path), &pod_specs);
        assert_eq!(
            owners("spec.replicatedJobs[1].template.spec.activeDeadlineSeconds"),
            [1]
        );
        assert_eq!(
            owners("spec.replicatedJobs[0].template.spec.template.spec.containers[0]"),
            [0]
        );
        assert_eq!(owners("spec.suspend"), [0, 1]);
        assert_eq!(
            path_segments(r#"spec.template.metadata.annotations["proxy.istio.io/config"]"#),
            [
                "spec",
                "template",
                "metadata",
                r#"annotations["proxy.istio.io/config"]"#
            ]
        );
        // A Pod: its one pod spec is `spec`.
        assert_eq!(
            owners_of(
                &path_segments("metadata.annotations[\"a\"]"),
                &[vec!["spec"]]
            ),
            [0]
        );
    }
}
