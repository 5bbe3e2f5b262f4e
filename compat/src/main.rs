//! `meshlife-compat`: loads `dist/meshlife.wasm` in every OPA wasm host this project knows of,
//! evaluates the same admission fixtures in each, and prints a matrix of where the `msg` strings
//! equal the native build's. `compat/run.sh` (`just compat`) installs the hosts and runs it.
//!
//! Exit codes: 0 every host agrees on every fixture and every check holds; 1 a difference or a
//! failed check; 2 a host could not be run at all.

mod external;
mod fixtures;
mod guest;
mod kubewarden;
mod matrix;
mod module_facts;
mod opa_go;
mod rego_text;
mod rust_opa_wasm;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;

use matrix::{Check, Column};

#[derive(Parser)]
#[command(
    about = "Runs dist/meshlife.wasm in every OPA wasm host and prints the compatibility matrix"
)]
struct Arguments {
    /// The module under test.
    #[arg(long, default_value = "dist/meshlife.wasm")]
    module: PathBuf,
    /// The OPA bundle `meshlife build` writes beside it.
    #[arg(long, default_value = "dist/bundle.tar.gz")]
    bundle: PathBuf,
    /// Where fixtures and the context-path copy of the module are written.
    #[arg(long, default_value = "target/compat")]
    work: PathBuf,
    /// Node.js, for the npm SDK runner (compat/node/run.js).
    #[arg(long, default_value = "node")]
    node: PathBuf,
    /// Python 3.11+ with opa-py-wasm and opa-wasmtime installed.
    #[arg(long)]
    python_3_11: Option<PathBuf>,
    /// Python 3.10 with opa-wasm (wasmer) installed.
    #[arg(long)]
    python_3_10: Option<PathBuf>,
    /// A real OPA: a directory holding its `opa` CLI and `opa-host` (compat/opa/host, linking
    /// the same OPA), as compat/opa/install.sh builds them. Repeat for each version.
    #[arg(long = "opa")]
    opa: Vec<PathBuf>,
    /// Java, for the Java SDK runner (compat/java).
    #[arg(long, default_value = "java")]
    java: PathBuf,
    /// The Java runner's classpath (its classes and the SDK's jars), as compat/run.sh builds it.
    #[arg(long)]
    java_classpath: Option<String>,
    /// Run only these host families (static, rust, kubewarden, opa-go-replay, opa, java, npm,
    /// python-3.11, python-3.10); the matrix then says which ones it left out.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

const FAMILIES: &[&str] = &[
    "static",
    "rust",
    "kubewarden",
    "opa-go-replay",
    "opa",
    "java",
    "npm",
    "python-3.11",
    "python-3.10",
];

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("meshlife-compat: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("compat/ sits in the workspace")
        .to_path_buf()
}

fn run() -> Result<ExitCode> {
    let arguments = Arguments::parse();
    if let Some(unknown) = arguments
        .only
        .iter()
        .find(|f| !FAMILIES.contains(&f.as_str()))
    {
        anyhow::bail!(
            "--only {unknown}: the host families are {}",
            FAMILIES.join(", ")
        );
    }
    let selected =
        |family: &str| arguments.only.is_empty() || arguments.only.iter().any(|f| f == family);
    let workspace = workspace_root();
    let module = std::fs::read(&arguments.module).with_context(|| {
        format!(
            "reading {} (build it with `cargo run --release -- build`)",
            arguments.module.display()
        )
    })?;
    let context_module = module_facts::with_minor_version_1(&module)?;
    let started = Instant::now();
    let fixtures = fixtures::load(&workspace)?;
    std::fs::create_dir_all(&arguments.work)
        .with_context(|| format!("creating {}", arguments.work.display()))?;
    fixtures::write(&arguments.work, &fixtures)?;
    let context_module_path = arguments.work.join("meshlife.abi-1.1.wasm");
    std::fs::write(&context_module_path, &context_module)
        .with_context(|| format!("writing {}", context_module_path.display()))?;
    let index = arguments.work.join("fixtures.json");
    println!(
        "meshlife compatibility matrix: {} ({} bytes), {} fixtures\n",
        arguments.module.display(),
        module.len(),
        fixtures.len()
    );

    let mut columns: Vec<Column> = Vec::new();
    let mut checks: Vec<Check> = Vec::new();
    let mut unrunnable = Vec::new();
    let mut record =
        |family: &str, result: Result<(Vec<Column>, Vec<Check>)>, seconds: f64| match result {
            Ok((new_columns, new_checks)) => {
                eprintln!(
                    "  {family}: {} ways of calling, {seconds:.1} s",
                    new_columns.len()
                );
                columns.extend(new_columns);
                checks.extend(new_checks);
            }
            Err(error) => {
                eprintln!("  {family}: could not run: {error:#}");
                checks.push(Check::new(
                    family,
                    "the host runs",
                    Err(format!("{error:#}")),
                ));
                unrunnable.push(family.to_string());
            }
        };
    let timed = |work: &mut dyn FnMut() -> Result<(Vec<Column>, Vec<Check>)>| {
        let start = Instant::now();
        let result = work();
        (result, start.elapsed().as_secs_f64())
    };

    if selected("static") {
        let (result, seconds) = timed(&mut || Ok((Vec::new(), module_facts::checks(&module))));
        record("static", result, seconds);
    }
    if selected("rust") {
        let (result, seconds) = timed(&mut || {
            rust_opa_wasm::run(
                &workspace,
                &module,
                &context_module,
                &arguments.bundle,
                &fixtures,
            )
        });
        record("rust", result, seconds);
    }
    if selected("kubewarden") {
        let (result, seconds) = timed(&mut || kubewarden::run(&module, &fixtures));
        record("kubewarden", result, seconds);
    }
    if selected("opa-go-replay") {
        let (result, seconds) = timed(&mut || opa_go::run(&module, &fixtures));
        record("opa-go-replay", result, seconds);
    }
    if selected("opa") {
        if arguments.opa.is_empty() {
            record(
                "opa",
                Err(anyhow::anyhow!(
                    "no --opa DIR given (compat/opa/install.sh builds them into compat/opa/bin/)"
                )),
                0.0,
            );
        }
        for directory in &arguments.opa {
            let family = format!("opa {}", directory.display());
            let args = vec![
                "-opa".to_string(),
                directory.join("opa").display().to_string(),
                "-bundle".to_string(),
                arguments.bundle.display().to_string(),
                "-module".to_string(),
                arguments.module.display().to_string(),
                "-fixtures".to_string(),
                index.display().to_string(),
            ];
            let (result, seconds) = timed(&mut || {
                external::run(&family, &directory.join("opa-host"), &args, &fixtures)
            });
            record(&family, result, seconds);
        }
    }
    if selected("java") {
        let (result, seconds) = timed(&mut || {
            let classpath = arguments.java_classpath.as_ref().with_context(
                || "no --java-classpath given (compat/run.sh builds compat/java with Maven)",
            )?;
            let args = vec![
                // Java 17 encodes String.getBytes() in the locale's charset; a service sets UTF-8
                // (Java 18 and later default to it).
                "-Dfile.encoding=UTF-8".to_string(),
                "-cp".to_string(),
                classpath.clone(),
                "dev.meshlife.compat.JavaHost".to_string(),
                "--module".to_string(),
                arguments.module.display().to_string(),
                "--fixtures".to_string(),
                index.display().to_string(),
            ];
            external::run("java", &arguments.java, &args, &fixtures)
        });
        record("java", result, seconds);
    }
    let runner_args = |hosts: &str| -> Vec<String> {
        let mut args = vec![
            "--module".to_string(),
            arguments.module.display().to_string(),
            "--context-module".to_string(),
            context_module_path.display().to_string(),
            "--fixtures".to_string(),
            index.display().to_string(),
            "--exhausting".to_string(),
            arguments
                .work
                .join(fixtures::EXHAUSTING_FILE)
                .display()
                .to_string(),
        ];
        if !hosts.is_empty() {
            args.extend(["--hosts".to_string(), hosts.to_string()]);
        }
        args
    };
    if selected("npm") {
        let script = workspace.join("compat/node/run.js").display().to_string();
        let mut args = vec![script];
        args.extend(runner_args(""));
        let (result, seconds) =
            timed(&mut || external::run("npm opa-wasm", &arguments.node, &args, &fixtures));
        record("npm", result, seconds);
    }
    let python_script = workspace
        .join("compat/python/run_hosts.py")
        .display()
        .to_string();
    for (family, interpreter, hosts) in [
        (
            "python-3.11",
            &arguments.python_3_11,
            "opa-py-wasm,opa-wasmtime",
        ),
        ("python-3.10", &arguments.python_3_10, "opa-wasm"),
    ] {
        if !selected(family) {
            continue;
        }
        let (result, seconds) = timed(&mut || {
            let interpreter = interpreter.as_ref().with_context(|| {
                format!("no --{family} interpreter given (compat/run.sh creates one)")
            })?;
            let mut args = vec![python_script.clone()];
            args.extend(runner_args(hosts));
            external::run(family, interpreter, &args, &fixtures)
        });
        record(family, result, seconds);
    }

    let report = matrix::render(&fixtures, &columns, &checks);
    println!("{}", report.text);
    let left_out: Vec<&str> = FAMILIES.iter().copied().filter(|f| !selected(f)).collect();
    if !left_out.is_empty() {
        println!("Not run (--only): {}", left_out.join(", "));
    }
    let evaluations: usize = columns.iter().map(|c| c.verdicts.len()).sum();
    println!(
        "{} ways of calling {} hosts x {} fixtures = {evaluations} evaluations in {:.1} s",
        columns.len(),
        columns
            .iter()
            .map(|c| c.host.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        fixtures.len(),
        started.elapsed().as_secs_f64()
    );
    if !unrunnable.is_empty() {
        println!("FAIL: could not run {}", unrunnable.join(", "));
        return Ok(ExitCode::from(2));
    }
    if report.failures > 0 {
        println!("FAIL: {} differences and failed checks", report.failures);
        return Ok(ExitCode::from(1));
    }
    println!("PASS: every host agrees with the native build on every fixture");
    Ok(ExitCode::SUCCESS)
}
