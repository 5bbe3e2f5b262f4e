//! Which admission operations are judged: asked by both readers (`evaluate`'s exact reader and
//! `one_pass`), so it lives below them and neither imports the other for it.

/// Operations of an AdmissionRequest that are judged (an absent one too: a hand-made input).
/// An empty operation is an absent one: gator verify and Gatekeeper's audit send `""`.
pub(crate) fn is_judged_operation(operation: Option<&str>) -> bool {
    matches!(operation, None | Some("" | "CREATE" | "UPDATE"))
}

/// DELETE and CONNECT never yield violations (both readers ask).
pub(crate) fn is_skipped_operation(operation: Option<&str>) -> bool {
    matches!(operation, Some("DELETE" | "CONNECT"))
}
