//! What the RBAC printers share (`facts-reader`, `drill-role`): the rules of a permission list,
//! and the subjects a binding names.

use std::fmt::Write as _;

use clap::Args;

use crate::cluster::reader::Permission;

/// Who a printed binding names.
#[derive(Args, Debug)]
pub struct BindingSubjects {
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

/// Each permission as a rule, with why it is needed as its comment.
pub(super) fn rules(permissions: &[Permission]) -> String {
    let mut out = String::new();
    for permission in permissions {
        let _ = writeln!(
            out,
            "# {}\n- apiGroups: [\"{}\"]\n  resources: [{}]\n  verbs: [{}]",
            permission.why,
            permission.group,
            permission.resource,
            permission.verbs.join(", ")
        );
    }
    out
}

/// The subjects of a binding (users, groups, ServiceAccounts as NAMESPACE/NAME), as the YAML
/// list items that follow `subjects:`; empty when none is given.
pub(super) fn subjects(given: &BindingSubjects) -> String {
    let mut subjects = String::new();
    for user in &given.user {
        let _ = write!(
            subjects,
            "\n- kind: User\n  apiGroup: rbac.authorization.k8s.io\n  name: {}",
            quoted(user)
        );
    }
    for group in &given.group {
        let _ = write!(
            subjects,
            "\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: {}",
            quoted(group)
        );
    }
    for (namespace, name) in &given.service_account {
        let _ = write!(
            subjects,
            "\n- kind: ServiceAccount\n  namespace: {namespace}\n  name: {name}"
        );
    }
    subjects
}

/// `NAMESPACE/NAME` of a ServiceAccount, each part a DNS name.
fn parse_service_account(text: &str) -> Result<(String, String), String> {
    let (namespace, name) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?}: give the ServiceAccount as NAMESPACE/NAME"))?;
    Ok((
        crate::constraints::facts::parse_name(namespace)?,
        crate::constraints::facts::parse_name(name)?,
    ))
}

/// A user or group name as a YAML string: they may hold `:` and `@` (`system:serviceaccounts`).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}
