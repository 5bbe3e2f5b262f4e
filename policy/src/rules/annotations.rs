//! ML601: lifecycle annotations the mesh would ignore or reject, silently changing behaviour.

use super::{Context, Finding, capitalised};
use crate::catalogue::INVALID_MESH_ANNOTATION;

pub fn check(context: &Context, findings: &mut Vec<Finding>) {
    let mesh = match context.mesh() {
        crate::mesh::Mesh::Istio => "Istio",
        crate::mesh::Mesh::Linkerd => "Linkerd",
    };
    for problem in &context.decision.annotation_problems {
        let (what, path) = if problem.is_label {
            ("label", context.workload.label_path(problem.key))
        } else {
            ("annotation", context.workload.annotation_path(problem.key))
        };
        let message = format!(
            "{what} {} {}, so {mesh} ignores or rejects it and the pod runs with a setting nobody chose.",
            problem.key, problem.problem
        );
        let fix = capitalised(&problem.fix) + if problem.fix.ends_with('.') { "" } else { "." };
        findings.push(context.finding(&INVALID_MESH_ANNOTATION, path, message, fix));
    }
}
