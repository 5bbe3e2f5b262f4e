//! `meshlife constraint`: writes a constraint for one cluster from its facts (the flags are
//! `constraints::generate::ConstraintArgs`, or `--from-cluster` reads them), checks its
//! parameters with the module and prints it or writes it to `--output`.

use clap::Args;
use serde_json::Value;

use crate::cluster::ClusterSourceArgs;
use crate::constraints::constraint::parse_constraints_text;
use crate::constraints::generate::{ConstraintArgs, Generated, generate};
use crate::inputs::manifests::parse_documents;
use crate::module::engine::Engine;
use crate::terminal::{EXIT_ERROR, EXIT_OK, print_error, print_note, print_warning};

#[derive(Args, Debug)]
pub struct ConstraintCommandArgs {
    #[command(flatten)]
    pub constraint: ConstraintArgs,

    #[command(flatten)]
    pub cluster: ClusterSourceArgs,
}

/// Runs `meshlife constraint` and returns the exit code.
pub fn run(command: &ConstraintCommandArgs) -> u8 {
    let args = &command.constraint;
    let generated = match generated(command) {
        Ok(generated) => generated,
        Err(error) => {
            print_error(error);
            return EXIT_ERROR;
        }
    };
    if let Err(error) = validate(&generated) {
        print_error(error);
        return EXIT_ERROR;
    }
    for warning in &generated.warnings {
        print_warning(warning);
    }
    match args.output.as_ref().filter(|path| path.as_os_str() != "-") {
        Some(path) => {
            if let Err(error) = std::fs::write(path, &generated.yaml) {
                print_error(format_args!("cannot write {}: {error}", path.display()));
                return EXIT_ERROR;
            }
        }
        None => {
            if let Err(error) = crate::terminal::write_stdout(&generated.yaml) {
                print_error(error);
                return EXIT_ERROR;
            }
        }
    }
    EXIT_OK
}

/// The constraints of the cluster asked for (each fact's source said on stderr), or of the
/// fact flags alone.
fn generated(command: &ConstraintCommandArgs) -> Result<Generated, String> {
    let Some(read) = command.cluster.read(&command.constraint.facts) else {
        return generate(&command.constraint);
    };
    let facts = read?;
    print_note(format_args!("facts read from {}:", facts.cluster));
    for line in facts.summary() {
        print_note(format_args!("  {line}"));
    }
    let (generated, notes) = facts.generate_constraints(&command.constraint)?;
    for note in facts.notes.iter().chain(&notes) {
        print_note(note);
    }
    Ok(generated)
}

/// Reads the written YAML back as `meshlife check --constraint` does, and has the policy module
/// judge each constraint's parameters: what is written must be what `check` (which takes
/// `generated.documents` for the same flags) and Gatekeeper use.
fn validate(generated: &Generated) -> Result<(), String> {
    let engine = Engine::embedded().map_err(|error| format!("{error:#}"))?;
    let documents: Vec<Value> = parse_documents("(generated)", &generated.yaml)
        .into_iter()
        .map(|document| {
            document
                .map(|(_, _, value)| value)
                .map_err(|error| format!("the generated YAML does not read back: {error}"))
        })
        .collect::<Result<_, _>>()?;
    if documents != generated.documents {
        return Err(format!(
            "the generated YAML reads back as other documents than intended: {documents:?} \
             instead of {:?}",
            generated.documents
        ));
    }
    let read_back = parse_constraints_text("(generated)", &generated.yaml)
        .map_err(|error| format!("the generated YAML does not read back: {error}"))?;
    for constraint in &read_back {
        constraint
            .validate_parameters(&engine)
            .map_err(|error| error.to_string())?;
    }
    Ok(())
}
