//! `meshlife build`: the wasm module and the release artefacts made from it, inside the
//! meshlife workspace.

use std::path::PathBuf;

use clap::Args;

use crate::terminal::{EXIT_ERROR, EXIT_OK, print_error};

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The workspace root; default: the nearest folder upwards holding a workspace Cargo.toml.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// Runs `meshlife build` and returns the process exit code.
pub fn run(args: &BuildArgs) -> u8 {
    let workspace = match args.workspace.clone().or_else(find_workspace_root) {
        Some(workspace) => workspace,
        None => {
            print_error(
                "no workspace Cargo.toml found upwards from the current folder; pass --workspace DIR",
            );
            return EXIT_ERROR;
        }
    };
    // The module, then the Kubewarden module and the OPA bundle made from the same bytes.
    let built = crate::module::build::build_dist(&workspace).and_then(|dist| {
        let module =
            crate::inputs::files::read_bytes(&dist, crate::inputs::files::ReadLimit::default())
                .map_err(|error| format!("reading {}: {error}", dist.display()))?;
        let others = crate::module::artefacts::write_release_artefacts(&workspace, &module)?;
        Ok([vec![dist], others].concat())
    });
    match built {
        Ok(written) => {
            let listing: String = written
                .iter()
                .map(|path| format!("{}\n", path.display()))
                .collect();
            match crate::terminal::write_stdout(&listing) {
                Ok(()) => EXIT_OK,
                Err(error) => {
                    print_error(error);
                    EXIT_ERROR
                }
            }
        }
        Err(error) => {
            print_error(format_args!("build failed: {error}"));
            EXIT_ERROR
        }
    }
}

fn find_workspace_root() -> Option<PathBuf> {
    let mut folder = std::env::current_dir().ok()?;
    loop {
        let manifest = folder.join("Cargo.toml");
        if crate::inputs::files::read_text(&manifest, crate::inputs::files::ReadLimit::default())
            .is_ok_and(|text| text.contains("[workspace]"))
        {
            return Some(folder);
        }
        if !folder.pop() {
            return None;
        }
    }
}
