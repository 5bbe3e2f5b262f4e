//! `meshlife install facts-reader`: the ClusterRole that `--from-cluster` and `--kubeconfig`
//! need (get and list on exactly what the reader reads, from `cluster::reader::PERMISSIONS`),
//! and a binding for whoever runs them.

use std::fmt::Write as _;

use clap::Args;

use crate::cluster::reader::PERMISSIONS;
use crate::constraints::facts::parse_name;

#[derive(Args, Debug)]
pub struct FactsReaderInstall {
    /// Name of the ClusterRole (and of its binding).
    #[arg(long, default_value = "meshlife-facts-reader", value_parser = parse_name)]
    pub name: String,

    /// Bind it to this user (as the kubeconfig authenticates them); repeatable.
    #[arg(long, value_name = "NAME")]
    pub user: Vec<String>,

    /// Bind it to this group; repeatable.
    #[arg(long, value_name = "NAME")]
    pub group: Vec<String>,

    /// Bind it to this ServiceAccount, as NAMESPACE/NAME (a CI job's, say); repeatable.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = parse_service_account)]
    pub service_account: Vec<(String, String)>,
}

pub(super) fn parse_service_account(text: &str) -> Result<(String, String), String> {
    let (namespace, name) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?}: give the ServiceAccount as NAMESPACE/NAME"))?;
    Ok((parse_name(namespace)?, parse_name(name)?))
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
    for permission in &PERMISSIONS {
        let _ = writeln!(
            out,
            "# {}\n- apiGroups: [\"{}\"]\n  resources: [{}]\n  verbs: [{}]",
            permission.why,
            permission.group,
            permission.resource,
            permission.verbs.join(", ")
        );
    }
    let mut subjects = String::new();
    for user in &args.user {
        let _ = write!(
            subjects,
            "\n- kind: User\n  apiGroup: rbac.authorization.k8s.io\n  name: {}",
            quoted(user)
        );
    }
    for group in &args.group {
        let _ = write!(
            subjects,
            "\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: {}",
            quoted(group)
        );
    }
    for (namespace, name) in &args.service_account {
        let _ = write!(
            subjects,
            "\n- kind: ServiceAccount\n  namespace: {namespace}\n  name: {name}"
        );
    }
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

/// A user or group name as a YAML string: they may hold `:` and `@` (`system:serviceaccounts`).
pub(super) fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}
