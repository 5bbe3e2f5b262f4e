//! `meshlife install facts-reader`: the ClusterRole that `--from-cluster` and `--kubeconfig`
//! need (get and list on exactly what the reader reads, from `cluster::reader::PERMISSIONS`),
//! and a binding for whoever runs them.

use std::fmt::Write as _;

use clap::Args;

use super::rbac;

use crate::cluster::reader::PERMISSIONS;
use crate::constraints::facts::parse_name;

#[derive(Args, Debug)]
pub struct FactsReaderInstall {
    /// Name of the ClusterRole (and of its binding).
    #[arg(long, default_value = "meshlife-facts-reader", value_parser = parse_name)]
    pub name: String,

    #[command(flatten)]
    pub subjects: rbac::BindingSubjects,
}

pub fn manifests(args: &FactsReaderInstall) -> Result<String, String> {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# What `meshlife constraint --from-cluster` and `meshlife check --kubeconfig` read: \
         read-only, and\n# nothing else (no Secrets, no Pods). Apply it with the binding below, \
         or bind the role yourself:\n#   kubectl create clusterrolebinding {0} \
         --clusterrole {0} --user YOU",
        args.name
    );
    let _ = writeln!(
        out,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {}\n  \
         labels:\n    app.kubernetes.io/name: meshlife\nrules:",
        args.name
    );
    out.push_str(&rbac::rules(&PERMISSIONS));
    let subjects = rbac::subjects(&args.subjects);
    if !subjects.is_empty() {
        let _ = writeln!(
            out,
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  \
             name: {0}\n  labels:\n    app.kubernetes.io/name: meshlife\nroleRef:\n  apiGroup: \
             rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {0}\nsubjects:{subjects}",
            args.name
        );
    }
    Ok(out)
}
