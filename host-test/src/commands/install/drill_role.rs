//! `meshlife install drill-role -n NAMESPACE`: the Role `meshlife drill` needs in the namespace
//! of its target (from `commands::drill::cluster::PERMISSIONS`, which the drill also checks
//! before it changes anything), and a binding for whoever runs it.

use std::fmt::Write as _;

use clap::Args;

use super::rbac;
use crate::commands::drill::cluster::PERMISSIONS;
use crate::constraints::facts::parse_name;

#[derive(Args, Debug)]
pub struct DrillRoleInstall {
    /// The namespace of the workloads to drill: the Role and its binding are made there.
    #[arg(short, long, value_parser = parse_name)]
    pub namespace: String,

    /// Name of the Role (and of its binding).
    #[arg(long, default_value = "meshlife-drill", value_parser = parse_name)]
    pub name: String,

    #[command(flatten)]
    pub subjects: rbac::BindingSubjects,
}

pub fn manifests(args: &DrillRoleInstall) -> Result<String, String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# What `meshlife drill` does in namespace {0}: it reads the target and its Service,\n\
         # restarts the target (or deletes or evicts one pod), runs one load pod (labelled\n\
         # app.kubernetes.io/managed-by: meshlife-drill, deleted on every way out) and watches\n\
         # pods, EndpointSlices and events. Nothing outside the namespace. Bind it below, or:\n\
         #   kubectl -n {0} create rolebinding {1} --role {1} --user YOU",
        args.namespace, args.name
    );
    let _ = writeln!(
        out,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {}\n  \
         namespace: {}\n  labels:\n    app.kubernetes.io/name: meshlife\nrules:",
        args.name, args.namespace
    );
    out.push_str(&rbac::rules(&PERMISSIONS));
    let subjects = rbac::subjects(&args.subjects);
    if !subjects.is_empty() {
        let _ = writeln!(
            out,
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  \
             name: {0}\n  namespace: {1}\n  labels:\n    app.kubernetes.io/name: meshlife\n\
             roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {0}\n\
             subjects:{subjects}",
            args.name, args.namespace
        );
    }
    Ok(out)
}
