//! ML601: lifecycle annotations the mesh would ignore or reject, silently changing behaviour.

use super::{Context, Finding, capitalised};
use crate::catalogue::INVALID_MESH_ANNOTATION;
use crate::violation::Severity;

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
        let consequence = if problem.unreadable_here {
            format!("{mesh} reads it, but meshlife judges the pod as if it were absent")
        } else {
            format!("{mesh} ignores or rejects it and the pod runs with a setting nobody chose")
        };
        let message = format!(
            "{what} {} {}, so {consequence}.",
            problem.key, problem.problem
        );
        let fix = capitalised(&problem.fix) + if problem.fix.ends_with('.') { "" } else { "." };
        let finding = context.finding(&INVALID_MESH_ANNOTATION, path, message, fix);
        findings.push(if problem.unreadable_here {
            finding.with_severity(Severity::Info)
        } else {
            finding
        });
    }
}
