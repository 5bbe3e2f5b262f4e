//! Gatekeeper MeshLifecycle constraints: reading them, matching objects and building the
//! module's input (`constraint`), and writing one from a cluster's facts (`facts`).

pub mod constraint;
pub mod facts;
mod fields;
pub mod generate;
mod istio;
mod linkerd;
pub mod matching;
mod parameters;
pub mod selectors;
mod yaml_writer;

use std::path::PathBuf;

use constraint::Constraint;

use crate::inputs::files::ReadLimit;
use crate::module::engine::Engine;
use crate::terminal::print_warning;

/// The constraints to judge under: the `--constraint` files, or the one the cluster-fact flags
/// make, or, with neither, the one today's releases make (everything matched). `check` and
/// `explain` take the same.
pub fn constraints_of(
    constraint_files: &[PathBuf],
    facts: &facts::ClusterFactArgs,
    include_control_planes: bool,
    limit: ReadLimit,
    engine: &Engine,
) -> Result<Vec<Constraint>, String> {
    if !constraint_files.is_empty() {
        if facts.any_given() {
            return Err(
                "--constraint and the cluster-fact flags (--kubernetes, --istio, \
                        --linkerd, ...) both state the cluster's facts; give one or the other"
                    .into(),
            );
        }
        return constraint::load_constraint_files(constraint_files, limit, engine);
    }
    let (constraint, warnings) = generate::constraint_for_check(
        facts.clone().or_todays_releases(),
        include_control_planes,
        None,
    )?;
    for warning in warnings {
        print_warning(warning);
    }
    constraint
        .validate_parameters(engine)
        .map_err(|error| error.to_string())?;
    if facts.any_given() {
        return Ok(vec![constraint]);
    }
    // No flag at all: today's parameters under the built-in constraint, which matches every
    // namespace as a run without facts always has.
    Ok(vec![Constraint {
        parameters: constraint.parameters,
        ..Constraint::default_constraint()
    }])
}
