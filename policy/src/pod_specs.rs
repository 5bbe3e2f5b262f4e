//! Where the pod specs of an object are: a Pod's own spec, a controller's (or a Job's, a
//! CronJob's) template, and the templates the embedding kinds hold (Argo analysis Jobs, Katib
//! trials, Kubeflow training jobs, JobSets, Volcano Jobs), each made a workload of its own with
//! paths into its template. Apart from `evaluate` because it is the exact reader's biggest
//! piece and changes with every kind added, not with the pipeline.

use std::borrow::Cow;

use crate::input::{Fields, ObjectMeta, Parsed, Path, PodSpec, Strategy};
use crate::workload::{EmbeddedJob, TrainingKind, Workload, WorkloadKind};

/// The pod template of a controller: metadata and spec, each possibly absent.
struct TemplateParts<'a> {
    metadata: Option<ObjectMeta<'a>>,
    spec: Option<PodSpec<'a>>,
}

fn read_template<'a>(fields: &Fields<'a, '_>) -> Parsed<TemplateParts<'a>> {
    Ok(TemplateParts {
        metadata: fields.object("metadata", ObjectMeta::read)?,
        spec: fields.object("spec", PodSpec::read)?,
    })
}

/// Finds the pod spec of the workload's kind and fills it in; `None` when there is none to review
/// (a Rollout with `workloadRef`, a controller without a template).
pub(crate) fn build_workload<'a>(
    mut workload: Workload<'a>,
    object: &Fields<'a, '_>,
) -> Parsed<Option<Workload<'a>>> {
    let kind = workload.kind;
    if kind == WorkloadKind::Pod {
        let Some(spec) = object.object("spec", PodSpec::read)? else {
            return Ok(None);
        };
        workload.spec = spec;
        workload.pod_meta = workload.object_meta.clone();
        return Ok(Some(workload));
    }
    let template = object.object("spec", |spec| {
        workload.replicas = spec.int("replicas")?;
        workload.strategy = spec.object("strategy", Strategy::read)?;
        if kind == WorkloadKind::CronJob {
            workload.concurrency_policy = spec.string("concurrencyPolicy")?;
            let job = spec.object("jobTemplate", |job| {
                job.object("spec", |job_spec| {
                    workload.job_deadline_seconds = job_spec.int("activeDeadlineSeconds")?;
                    job_spec.object("template", read_template)
                })
            })?;
            return Ok(job.flatten().flatten());
        }
        if kind == WorkloadKind::Job {
            workload.job_deadline_seconds = spec.int("activeDeadlineSeconds")?;
        }
        spec.object("template", read_template)
    })?;
    let Some(TemplateParts {
        metadata,
        spec: Some(spec),
    }) = template.flatten()
    else {
        return Ok(None);
    };
    workload.spec = spec;
    workload.pod_meta = metadata.unwrap_or_default();
    Ok(Some(workload))
}

/// Where an embedded pod template sits: its path in the object, the job that runs it, and the
/// job's own deadline.
struct Embedding<'a> {
    template_path: String,
    template: TemplateParts<'a>,
    job: EmbeddedJob,
    job_deadline_seconds: Option<i64>,
    /// The embedded Job's own metadata, with its path.
    job_meta: Option<(String, ObjectMeta<'a>)>,
}

/// Attaches the metadata of the Job that holds the embeddings found since `from`.
fn attach_job_meta<'a>(
    found: &mut [Embedding<'a>],
    from: usize,
    path: String,
    meta: Option<ObjectMeta<'a>>,
) {
    if let Some(meta) = meta {
        for embedding in found.iter_mut().skip(from) {
            embedding.job_meta = Some((path.clone(), meta.clone()));
        }
    }
}

/// A Job spec (`{activeDeadlineSeconds, template}`) at `path`.
fn job_spec_template<'a>(
    job_spec: &Fields<'a, '_>,
    path: &str,
    phrase: String,
    found: &mut Vec<Embedding<'a>>,
) -> Parsed<()> {
    let deadline = job_spec.int("activeDeadlineSeconds")?;
    if let Some(template) = job_spec.object("template", read_template)? {
        found.push(Embedding {
            template_path: format!("{path}.template"),
            template,
            job: EmbeddedJob {
                phrase,
                deadline_path: format!("{path}.activeDeadlineSeconds"),
            },
            job_deadline_seconds: deadline,
            job_meta: None,
        });
    }
    Ok(())
}

/// A Kubeflow training job's spec at `path`: `runPolicy.activeDeadlineSeconds` and one template
/// per role of `<x>ReplicaSpecs`.
fn training_job_templates<'a>(
    spec: &Fields<'a, '_>,
    path: &str,
    training: TrainingKind,
    owner: &str,
    found: &mut Vec<Embedding<'a>>,
) -> Parsed<()> {
    let deadline = spec
        .object("runPolicy", |policy| policy.int("activeDeadlineSeconds"))?
        .flatten();
    let field = training.replica_specs_field();
    spec.object(field, |roles| {
        for role in roles.keys() {
            let template = roles
                .object(role, |replica| replica.object("template", read_template))?
                .flatten();
            if let Some(template) = template {
                let role_path = Path::Key(&Path::Key(&Path::Root(path), field), role).render();
                found.push(Embedding {
                    template_path: format!("{role_path}.template"),
                    template,
                    job: EmbeddedJob {
                        phrase: format!("the {role} replicas of {owner}"),
                        deadline_path: format!("{path}.runPolicy.activeDeadlineSeconds"),
                    },
                    job_deadline_seconds: deadline,
                    job_meta: None,
                });
            }
        }
        Ok(())
    })?;
    Ok(())
}

/// The pod specs of an embedding kind, each a workload of its own with paths into its template.
pub(crate) fn embedded_workloads<'a>(
    base: &Workload<'a>,
    object: &Fields<'a, '_>,
) -> Parsed<Vec<Workload<'a>>> {
    let kind = base.kind;
    let mut found = Vec::new();
    object.object("spec", |spec| {
        match kind {
            WorkloadKind::AnalysisTemplate | WorkloadKind::ClusterAnalysisTemplate => {
                let kind_name = if kind == WorkloadKind::AnalysisTemplate {
                    "AnalysisTemplate"
                } else {
                    "ClusterAnalysisTemplate"
                };
                let mut index = 0;
                spec.list("metrics", |item, path| {
                    let at = index;
                    index += 1;
                    let Some(metric) = Fields::of(item, path)? else {
                        return Ok(());
                    };
                    let name = metric.string("name")?;
                    let phrase = match &name {
                        Some(name) => format!("the Job of {kind_name} metric \"{name}\""),
                        None => format!("the Job of {kind_name} metric {at}"),
                    };
                    let job_path = format!("spec.metrics[{at}].provider.job.spec");
                    metric.object("provider", |provider| {
                        provider.object("job", |job| {
                            let from = found.len();
                            let meta = job.object("metadata", ObjectMeta::read)?;
                            job.object("spec", |job_spec| {
                                job_spec_template(job_spec, &job_path, phrase, &mut found)
                            })?;
                            let meta_path = format!("spec.metrics[{at}].provider.job.metadata");
                            attach_job_meta(&mut found, from, meta_path, meta);
                            Ok(())
                        })
                    })?;
                    Ok(())
                })?;
            }
            WorkloadKind::KatibExperiment => {
                spec.object("trialTemplate", |trial| {
                    trial.object("trialSpec", |trial_spec| {
                        let from = found.len();
                        let meta = trial_spec.object("metadata", ObjectMeta::read)?;
                        let trial_kind = trial_spec.string("kind")?;
                        let trial_api = trial_spec.string("apiVersion")?;
                        let trial_kind = trial_kind
                            .as_deref()
                            .and_then(|k| WorkloadKind::of(k, trial_api.as_deref()));
                        let path = "spec.trialTemplate.trialSpec.spec";
                        trial_spec.object("spec", |inner| match trial_kind {
                            Some(WorkloadKind::TrainingJob(training)) => training_job_templates(
                                inner,
                                path,
                                training,
                                &format!("the {} of each Katib trial", training.kind()),
                                &mut found,
                            ),
                            // A batch/v1 Job, the usual trial, and the default when `kind` is absent.
                            Some(WorkloadKind::Job) | None => job_spec_template(
                                inner,
                                path,
                                "the Job of each Katib trial".to_string(),
                                &mut found,
                            ),
                            Some(_) => Ok(()),
                        })?;
                        let meta_path = "spec.trialTemplate.trialSpec.metadata".to_string();
                        attach_job_meta(&mut found, from, meta_path, meta);
                        Ok(())
                    })
                })?;
            }
            WorkloadKind::TrainingJob(training) => {
                training_job_templates(
                    spec,
                    "spec",
                    training,
                    &format!("the {}", training.kind()),
                    &mut found,
                )?;
            }
            WorkloadKind::JobSet => {
                let mut index = 0;
                spec.list("replicatedJobs", |item, path| {
                    let at = index;
                    index += 1;
                    let Some(replicated) = Fields::of(item, path)? else {
                        return Ok(());
                    };
                    let name = replicated.string("name")?;
                    let phrase = match &name {
                        Some(name) => format!("the Jobs of JobSet replicatedJob \"{name}\""),
                        None => format!("the Jobs of JobSet replicatedJob {at}"),
                    };
                    let job_path = format!("spec.replicatedJobs[{at}].template.spec");
                    replicated.object("template", |job| {
                        let from = found.len();
                        let meta = job.object("metadata", ObjectMeta::read)?;
                        job.object("spec", |job_spec| {
                            job_spec_template(job_spec, &job_path, phrase, &mut found)
                        })?;
                        let meta_path = format!("spec.replicatedJobs[{at}].template.metadata");
                        attach_job_meta(&mut found, from, meta_path, meta);
                        Ok(())
                    })?;
                    Ok(())
                })?;
            }
            WorkloadKind::VolcanoJob => {
                let mut index = 0;
                spec.list("tasks", |item, path| {
                    let at = index;
                    index += 1;
                    let Some(task) = Fields::of(item, path)? else {
                        return Ok(());
                    };
                    let name = task.string("name")?;
                    let phrase = match &name {
                        Some(name) => format!("the pods of Volcano Job task \"{name}\""),
                        None => format!("the pods of Volcano Job task {at}"),
                    };
                    if let Some(template) = task.object("template", read_template)? {
                        found.push(Embedding {
                            template_path: format!("spec.tasks[{at}].template"),
                            template,
                            job: EmbeddedJob {
                                phrase,
                                deadline_path: format!(
                                    "spec.tasks[{at}].template.spec.activeDeadlineSeconds"
                                ),
                            },
                            job_deadline_seconds: None,
                            job_meta: None,
                        });
                    }
                    Ok(())
                })?;
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(found
        .into_iter()
        .filter_map(|embedding| {
            let spec = embedding.template.spec?;
            let mut workload = base.clone();
            workload.spec = spec;
            workload.pod_meta = embedding.template.metadata.unwrap_or_default();
            workload.spec_path = Cow::Owned(format!("{}.spec", embedding.template_path));
            workload.metadata_path = Cow::Owned(format!("{}.metadata", embedding.template_path));
            workload.job_deadline_seconds = embedding.job_deadline_seconds;
            workload.embedded = Some(embedding.job);
            workload.job_meta = embedding.job_meta;
            Some(workload)
        })
        .collect())
}
