//! The judging pipeline `check`, `explain` and `serve`'s `/admission` share, in the order data
//! flows: objects with their context (the Namespaces and Services around them) → which
//! constraints apply to each ([`Applicable`], and for a whole input the [`Plan`]) → the module's
//! input ([`Context::module_input`]) → the module's violations ([`evaluate`]) → findings
//! ([`findings_of`]). [`judge`] runs it over a whole input, as `check` does, with what was not
//! judged and why. Each command keeps only what it does with the result: a report, timelines,
//! an AdmissionReview answer. One pipeline, so a verdict cannot depend on the door it came in by.

use std::collections::{BTreeMap, BTreeSet};

use meshlife_policy::mesh::NotMeshed;
use meshlife_policy::verdicts::{MeshVerdict, NotJudged, PodSpecVerdict};
use meshlife_policy::{Details, Severity, Violation};
use rayon::prelude::*;
use serde_json::Value;

use crate::constraints::constraint::{Constraint, EnforcementAction};
use crate::constraints::facts::is_control_plane_namespace;
use crate::inputs::manifests::{InputError, ManifestObject};
use crate::inputs::namespaces::{self, NamespaceDefinitions};
use crate::inputs::services::ServiceIndex;
use crate::module::engine::Engine;
use crate::report::Finding;
use crate::report::coverage::{self, Coverage};
use crate::terminal::Progress;

/// Evaluations whose inputs are held at once: enough to keep every core busy, few enough that
/// the inputs stay small beside the objects.
const EVALUATION_CHUNK: usize = 4096;

/// What the inputs define around each object: its Namespace (labels for `namespaceSelector`,
/// injection labels for the mesh decision) and the Services that select its pods.
pub struct Context<'a> {
    pub namespaces: &'a NamespaceDefinitions,
    pub services: &'a ServiceIndex<'a>,
}

impl Context<'_> {
    pub fn namespace_of(&self, object: &ManifestObject) -> Option<&Value> {
        self.namespaces.for_object(object)
    }

    /// The module's input for `object` under `constraint`: Gatekeeper's review and parameters,
    /// with the object's Namespace and Services.
    pub fn module_input(&self, constraint: &Constraint, object: &ManifestObject) -> Vec<u8> {
        constraint.input_for(
            object,
            self.namespace_of(object),
            &self.services.selecting(object),
        )
    }
}

/// Which constraints apply to one object, each list in the constraints' order.
pub struct Applicable {
    pub constraints: Vec<usize>,
    /// Constraints whose match cannot be decided (a `namespaceSelector` on an object whose
    /// Namespace is unknown), with why.
    pub unmatchable: Vec<(usize, String)>,
}

impl Applicable {
    pub fn of(
        constraints: &[Constraint],
        object: &ManifestObject,
        namespace_object: Option<&Value>,
    ) -> Applicable {
        let mut applicable = Applicable {
            constraints: Vec::new(),
            unmatchable: Vec::new(),
        };
        for (index, constraint) in constraints.iter().enumerate() {
            match constraint.matches(object, namespace_object) {
                Ok(true) => applicable.constraints.push(index),
                Ok(false) => {}
                Err(message) => applicable.unmatchable.push((index, message)),
            }
        }
        applicable
    }

    /// The first constraint, in order, that applies (`Ok`) or cannot be matched (`Err`).
    pub fn first(&self) -> Option<Result<usize, &str>> {
        let applies = self.constraints.first().copied();
        let unmatchable = self.unmatchable.first();
        match (applies, unmatchable) {
            (Some(index), Some((other, message))) if *other < index => Some(Err(message)),
            (Some(index), _) => Some(Ok(index)),
            (None, Some((_, message))) => Some(Err(message)),
            (None, None) => None,
        }
    }
}

/// A whole input's evaluations: one job per (object, constraint that applies to it).
pub struct Plan {
    /// `(object, constraint)` indices, in object order.
    pub jobs: Vec<(usize, usize)>,
    /// Objects with a constraint that cannot be matched, and why (one entry per constraint).
    pub unmatchable: Vec<(usize, String)>,
    /// Objects the policy reviews that no constraint applies to.
    pub unmatched: Vec<usize>,
    /// Objects in a mesh's own control plane, left out (see [`plan`]).
    pub control_plane: Vec<usize>,
}

/// The plan for `objects`. With `skip_control_planes`, reviewed objects in a mesh's own
/// namespaces are left out, as the generated constraints leave them out (linkerd-identity runs
/// without a proxy on purpose); a constraint file decides for itself.
pub fn plan(
    objects: &[ManifestObject],
    constraints: &[Constraint],
    context: &Context,
    skip_control_planes: bool,
) -> Plan {
    let mut plan = Plan {
        jobs: Vec::new(),
        unmatchable: Vec::new(),
        unmatched: Vec::new(),
        control_plane: Vec::new(),
    };
    for (object_index, object) in objects.iter().enumerate() {
        if skip_control_planes
            && object.is_reviewed_kind()
            && is_control_plane_namespace(&object.identity.namespace)
        {
            plan.control_plane.push(object_index);
            continue;
        }
        let applicable = Applicable::of(constraints, object, context.namespace_of(object));
        // An unmatchable constraint is said as an error, not as "not matched".
        let decided = !applicable.constraints.is_empty() || !applicable.unmatchable.is_empty();
        plan.jobs.extend(
            applicable
                .constraints
                .iter()
                .map(|&constraint_index| (object_index, constraint_index)),
        );
        plan.unmatchable.extend(
            applicable
                .unmatchable
                .into_iter()
                .map(|(_, message)| (object_index, message)),
        );
        if !decided && object.is_reviewed_kind() {
            plan.unmatched.push(object_index);
        }
    }
    plan
}

/// The module's answers for a plan's jobs, in job order, and each reviewed object's mesh
/// verdicts (what was not judged, and why), read from the same input.
pub struct Evaluation {
    pub outcomes: Vec<anyhow::Result<Vec<Violation>>>,
    /// `(object, constraint, verdicts)`, once per reviewed object: under its first job, since
    /// several constraints would ask the same question again.
    pub verdicts: Vec<(usize, usize, Vec<PodSpecVerdict>)>,
}

/// Evaluates every job of `jobs`, calling `on_done` after each (progress bars).
pub fn evaluate(
    engine: &Engine,
    objects: &[ManifestObject],
    constraints: &[Constraint],
    context: &Context,
    jobs: &[(usize, usize)],
    on_done: &(dyn Fn() + Sync),
) -> Evaluation {
    let mut first_job = BTreeMap::new();
    for (job_index, &(object_index, _)) in jobs.iter().enumerate() {
        first_job.entry(object_index).or_insert(job_index);
    }
    // The inputs (each object again, as JSON, with the parameters) are made, evaluated and
    // dropped a chunk at a time: all at once they were a second copy of the whole input.
    let mut evaluation = Evaluation {
        outcomes: Vec::with_capacity(jobs.len()),
        verdicts: Vec::new(),
    };
    for (chunk_index, chunk) in jobs.chunks(EVALUATION_CHUNK).enumerate() {
        let first_of_chunk = chunk_index * EVALUATION_CHUNK;
        let inputs: Vec<Vec<u8>> = chunk
            .par_iter()
            .map(|&(object_index, constraint_index)| {
                context.module_input(&constraints[constraint_index], &objects[object_index])
            })
            .collect();
        evaluation
            .outcomes
            .extend(engine.evaluate_many_with_progress(&inputs, on_done));
        evaluation.verdicts.par_extend(
            chunk
                .par_iter()
                .zip(inputs.par_iter())
                .enumerate()
                .filter(|&(offset, (&(object_index, _), _))| {
                    first_job.get(&object_index) == Some(&(first_of_chunk + offset))
                        && objects[object_index].is_reviewed_kind()
                })
                .map(|(_, (&(object_index, constraint_index), input))| {
                    (
                        object_index,
                        constraint_index,
                        meshlife_policy::mesh_verdicts(input),
                    )
                }),
        );
    }
    evaluation
}

/// How a whole input is judged, beyond its constraints (`check`'s flags).
pub struct Options {
    /// Leave out reviewed objects in a mesh's own namespaces (see [`plan`]).
    pub skip_control_planes: bool,
    /// `--require-mesh`: a workload judged as not meshed gets an error finding.
    pub require_mesh: bool,
    /// The lowest severity of a deny finding that fails the run; `None`: none does.
    pub fail_on: Option<Severity>,
}

/// A whole input judged: each object's findings, and everything said about what was not.
pub struct Judgement {
    /// The evaluations made, `(object, constraint)`, in object order.
    pub jobs: Vec<(usize, usize)>,
    /// Each object's findings, in the objects' order.
    pub findings: Vec<Vec<Finding>>,
    /// Objects whose constraints could not be matched, or that could not be evaluated.
    pub errors: Vec<InputError>,
    /// What was not judged and why; `skipped` stays for the reader of the inputs to fill.
    pub coverage: Coverage,
    /// Warnings on the input: Namespaces that disagree with the facts, keys in the wrong place.
    pub notices: Vec<String>,
}

/// Judges every object of an input under the constraints that apply to it: the plan, the
/// module's answers, the findings, and what was left unjudged with why.
pub fn judge(
    engine: &Engine,
    objects: &[ManifestObject],
    constraints: &[Constraint],
    context: &Context,
    options: &Options,
    progress: &Progress,
) -> Judgement {
    let plan = plan(objects, constraints, context, options.skip_control_planes);
    let mut judgement = Judgement {
        jobs: Vec::new(),
        findings: vec![Vec::new(); objects.len()],
        errors: Vec::new(),
        coverage: Coverage::default(),
        notices: facts_disagreements(objects, constraints, context, &plan.jobs),
    };
    judgement.record_plan(objects, constraints, &plan);
    progress.stage("checking", plan.jobs.len());
    let Evaluation { outcomes, verdicts } =
        evaluate(engine, objects, constraints, context, &plan.jobs, &|| {
            progress.tick()
        });
    progress.finish();
    judgement.record_verdicts(objects, constraints, context, options, &verdicts);
    for (&(object_index, constraint_index), outcome) in plan.jobs.iter().zip(outcomes) {
        match outcome {
            Ok(violations) => judgement.findings[object_index].extend(findings_of(
                violations,
                &constraints[constraint_index],
                options.fail_on,
            )),
            Err(error) => judgement
                .errors
                .push(evaluation_error(&objects[object_index], &error)),
        }
    }
    judgement.jobs = plan.jobs;
    judgement
}

impl Judgement {
    /// What the plan leaves unjudged: control planes, objects no constraint matches, and
    /// constraints that cannot be matched (errors, not "not matched").
    fn record_plan(&mut self, objects: &[ManifestObject], constraints: &[Constraint], plan: &Plan) {
        for &object_index in &plan.control_plane {
            self.coverage
                .control_plane
                .push(objects[object_index].listing());
        }
        for (object_index, message) in &plan.unmatchable {
            self.errors
                .push(objects[*object_index].error(Some("metadata.namespace"), message.clone()));
        }
        for &object_index in &plan.unmatched {
            let reason = match constraints {
                [constraint] => format!("not matched by constraint {}", constraint.title()),
                _ => "not matched by any of the constraints".to_string(),
            };
            self.coverage
                .unmatched
                .entry(reason)
                .or_default()
                .push(objects[object_index].listing());
        }
    }

    /// What each workload's mesh verdicts say: not meshed (and, with `--require-mesh`, an
    /// error finding), not judged, and keys placed where the mesh does not read them.
    fn record_verdicts(
        &mut self,
        objects: &[ManifestObject],
        constraints: &[Constraint],
        context: &Context,
        options: &Options,
        verdicts: &[(usize, usize, Vec<PodSpecVerdict>)],
    ) {
        for (object_index, constraint_index, verdicts) in verdicts {
            let object = &objects[*object_index];
            let listed = object.listing();
            let namespace_object = context.namespace_of(object);
            let namespace = coverage::NamespaceFacts {
                in_input: namespace_object.is_some(),
                defined_elsewhere: context.namespaces.defines(&object.identity.namespace)
                    && namespace_object.is_none(),
            };
            for verdict in verdicts {
                for misplaced in &verdict.misplaced {
                    self.notices
                        .push(coverage::misplaced_notice(&listed, misplaced));
                }
                match &verdict.verdict {
                    // Meshed, with no proxy in the pod: said apart from the unmeshed, and no
                    // `--require-mesh` finding.
                    MeshVerdict::NotMeshed(reason @ NotMeshed::Ambient { .. }) => {
                        let reason = coverage::not_meshed_reason(reason, &namespace);
                        let listed = match (&verdict.path, verdicts.len()) {
                            (Some(pod_spec), 2..) => format!("{listed} at {pod_spec}"),
                            _ => listed.clone(),
                        };
                        self.coverage
                            .ambient
                            .entry(reason)
                            .or_default()
                            .push(listed);
                    }
                    MeshVerdict::NotMeshed(reason) => {
                        let reason = coverage::not_meshed_reason(reason, &namespace);
                        let pod_spec = verdict.path.as_deref().unwrap_or("");
                        if options.require_mesh {
                            self.findings[*object_index].push(require_mesh_finding(
                                &reason,
                                pod_spec,
                                &constraints[*constraint_index],
                                options.fail_on,
                            ));
                        }
                        let listed = if verdicts.len() > 1 {
                            format!("{listed} at {pod_spec}")
                        } else {
                            listed.clone()
                        };
                        self.coverage
                            .not_meshed
                            .entry(reason)
                            .or_default()
                            .push(listed);
                    }
                    // Not known to select ambient pods for lack of facts: said, in its own group
                    // (a policy in a namespace known not to be ambient is judged: it holds none).
                    MeshVerdict::NotJudged(NotJudged::NetworkPolicyNotAmbient {
                        namespace,
                        namespace_known,
                    }) => {
                        if !namespace_known {
                            self.coverage
                                .network_policies
                                .entry(coverage::network_policy_reason(namespace))
                                .or_default()
                                .push(listed.clone());
                        }
                    }
                    MeshVerdict::NotJudged(reason) => {
                        if let Some(reason) = coverage::not_judged_reason(reason) {
                            self.coverage
                                .unmatched
                                .entry(reason)
                                .or_default()
                                .push(listed.clone());
                        }
                    }
                    MeshVerdict::Meshed { .. }
                    | MeshVerdict::Gateway
                    | MeshVerdict::AmbientNetworkPolicy { .. } => {}
                }
            }
        }
    }
}

/// The warnings for Namespaces of the input whose injection labels disagree with the facts of
/// a constraint applied to an object in them: the facts win, as they do in the cluster.
fn facts_disagreements(
    objects: &[ManifestObject],
    constraints: &[Constraint],
    context: &Context,
    jobs: &[(usize, usize)],
) -> Vec<String> {
    let mut disagreements = BTreeSet::new();
    for &(object_index, constraint_index) in jobs {
        let object = &objects[object_index];
        if let (Some(namespace_object), Some(file)) = (
            context.namespace_of(object),
            context.namespaces.location_of(object),
        ) {
            disagreements.extend(namespaces::facts_disagreement(
                &constraints[constraint_index].parameters,
                &object.identity.namespace,
                namespace_object,
                &file,
            ));
        }
    }
    namespaces::facts_win_notices(&disagreements)
}

/// The module's violations under `constraint` as findings; `fail_on` decides which deny
/// findings fail the run (`None`: none do).
pub fn findings_of<'a>(
    violations: Vec<Violation>,
    constraint: &'a Constraint,
    fail_on: Option<Severity>,
) -> impl Iterator<Item = Finding> + 'a {
    violations
        .into_iter()
        .map(move |violation| Finding::new(violation, constraint, fail_on))
}

/// The id and name of the finding `--require-mesh` makes of a workload judged as not meshed.
/// Not a rule of the module: the CLI's own check, so it never reaches Gatekeeper.
pub const REQUIRE_MESH_RULE: &str = "require-mesh";
pub const REQUIRE_MESH_NAME: &str = "workload-not-meshed";

/// The error finding `--require-mesh` adds for a pod spec judged as not meshed.
pub fn require_mesh_finding(
    reason: &str,
    pod_spec_path: &str,
    constraint: &Constraint,
    fail_on: Option<Severity>,
) -> Finding {
    let violation = Violation {
        msg: format!(
            "[{REQUIRE_MESH_RULE} {REQUIRE_MESH_NAME}] The pod spec is judged as not meshed \
             ({reason}), and --require-mesh says every workload here is meshed: no mesh rule \
             checked it."
        ),
        details: Details {
            rule: REQUIRE_MESH_RULE.into(),
            name: REQUIRE_MESH_NAME.into(),
            severity: Severity::Error,
            path: pod_spec_path.into(),
            fix: "Turn injection on where the cluster does (the namespace's istio-injection: \
                  enabled label or linkerd.io/inject: enabled annotation, or the pod template's \
                  sidecar.istio.io/inject: \"true\" label), state it with \
                  --istio-injected-namespaces or --linkerd-injected-namespaces, or exclude this \
                  file from the run."
                .into(),
            mesh: None,
            container: None,
        },
    };
    // The flag states what the user knows of every workload, whatever the constraint's action.
    let mut finding = Finding::new(violation, constraint, fail_on);
    finding.enforcement_action = EnforcementAction::Deny;
    finding.fails_run = fail_on.is_some();
    finding
}

/// The input error of an object the module could not evaluate.
pub fn evaluation_error(object: &ManifestObject, error: &anyhow::Error) -> InputError {
    object.error(
        None,
        format!("the policy could not evaluate this object: {error:#}"),
    )
}
