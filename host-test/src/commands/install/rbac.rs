//! What the RBAC printers share (`facts-reader`, `drill-role`): the rules of a permission list,
//! and the subjects a binding names.

use std::fmt::Write as _;

use crate::cluster::reader::Permission;

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
pub(super) fn subjects(
    users: &[String],
    groups: &[String],
    service_accounts: &[(String, String)],
) -> String {
    let mut subjects = String::new();
    for user in users {
        let _ = write!(
            subjects,
            "\n- kind: User\n  apiGroup: rbac.authorization.k8s.io\n  name: {}",
            quoted(user)
        );
    }
    for group in groups {
        let _ = write!(
            subjects,
            "\n- kind: Group\n  apiGroup: rbac.authorization.k8s.io\n  name: {}",
            quoted(group)
        );
    }
    for (namespace, name) in service_accounts {
        let _ = write!(
            subjects,
            "\n- kind: ServiceAccount\n  namespace: {namespace}\n  name: {name}"
        );
    }
    subjects
}

/// `NAMESPACE/NAME` of a ServiceAccount, each part a DNS name.
pub(super) fn parse_service_account(text: &str) -> Result<(String, String), String> {
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
