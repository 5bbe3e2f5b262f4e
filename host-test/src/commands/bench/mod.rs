//! `meshlife bench`: evaluation latency of the module, side by side with the native build, the
//! cost of reading the bytes at all, a Rego rendition in regorus and the npm SDK, on the same
//! inputs in one run. Figures are measured, never asserted; `--markdown` writes BENCHMARKS.md
//! from them.

pub mod client;
mod inputs;
mod report;
pub mod serve;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use clap::Args;
use rayon::prelude::*;
use serde::Serialize;
use serde::de::IgnoredAny;

use crate::module::engine::Engine;
pub use inputs::{BenchInput, bench_inputs, three_rule_input};

/// The Rego rendition of ML101, ML301 and ML401 that regorus evaluates.
const THREE_RULES_REGO: &str = include_str!("three_rules.rego");
const THREE_RULES_QUERY: &str = "data.meshlife.bench.violation";

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub mode: Option<BenchMode>,
    /// Print one JSON object (results, module_bytes, compile_ms, ...) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also measure the instance's memory after 1,000 and 1,000,000 evaluations (about a
    /// minute more).
    #[arg(long)]
    pub memory: bool,
    /// Write the figures as Markdown to FILE (BENCHMARKS.md).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Time spent measuring each input and engine, in milliseconds.
    #[arg(long, default_value_t = 700, value_name = "MS")]
    pub budget_ms: u64,
    /// Also write each input to DIR/<input>.json, to profile or measure it elsewhere.
    #[arg(long, value_name = "DIR")]
    pub save_inputs: Option<PathBuf>,
    /// The module to measure; default: the one built into this binary.
    #[arg(long, value_name = "FILE")]
    pub module: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchMode {
    /// Drive `meshlife serve` over HTTPS keep-alive (and OPA's server on the three-rule
    /// comparison): throughput and p50/p99/p99.9 at fixed concurrencies.
    Serve(serve::ServeBenchArgs),
}

/// Median and 99th percentile of one input under one engine.
#[derive(Serialize, Clone, Debug)]
pub struct Measurement {
    pub input: &'static str,
    pub engine: &'static str,
    pub median_ns: u64,
    pub p99_ns: u64,
    #[serde(skip)]
    pub samples: usize,
}

#[derive(Serialize, Clone, Debug)]
pub struct Throughput {
    pub threads: usize,
    pub input: &'static str,
    pub evaluations_per_second: f64,
}

#[derive(Serialize, Debug)]
pub struct BenchReport {
    pub results: Vec<Measurement>,
    pub module_bytes: usize,
    pub compile_ms: f64,
    pub throughput: Vec<Throughput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes_after_1e3: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes_after_1e6: Option<usize>,
    pub input_bytes: Vec<(&'static str, usize)>,
    pub machine: String,
    pub versions: Vec<(String, String)>,
    /// Engines that could not be measured here, with the reason.
    pub not_measured: Vec<(String, String)>,
}

/// Rounds `measure_interleaved` splits each engine's budget into.
const ROUNDS: u32 = 10;

/// One engine under measurement: its name and one evaluation.
pub type Work<'w> = (&'static str, Box<dyn FnMut() + 'w>);

/// Times every engine for about `budget` each (at least 15 samples) after a short warm-up, in
/// interleaved rounds: on a shared machine whose speed drifts, every engine meets the same
/// conditions, so the ratios between them hold even when the absolute figures move. Answers
/// (median, p99, samples) per engine, in order.
pub fn measure_interleaved(budget: Duration, engines: &mut [Work]) -> Vec<(u64, u64, usize)> {
    let mut samples: Vec<Vec<u64>> = vec![Vec::new(); engines.len()];
    for (_, work) in engines.iter_mut() {
        for _ in 0..3 {
            work();
        }
    }
    let slice = budget / ROUNDS;
    for _ in 0..ROUNDS {
        for ((_, work), taken) in engines.iter_mut().zip(&mut samples) {
            let start = Instant::now();
            let mut in_round = 0;
            while in_round < 2 || (start.elapsed() < slice && taken.len() < 2_000_000) {
                let began = Instant::now();
                work();
                taken.push(began.elapsed().as_nanos() as u64);
                in_round += 1;
            }
        }
    }
    samples
        .into_iter()
        .map(|mut taken| {
            taken.sort_unstable();
            let percentile = |fraction: f64| {
                let index = ((taken.len() as f64 - 1.0) * fraction).round() as usize;
                taken[index]
            };
            (percentile(0.5), percentile(0.99), taken.len())
        })
        .collect()
}

/// regorus with the three-rule Rego rendition loaded.
pub fn regorus_engine() -> Result<regorus::Engine> {
    let mut engine = regorus::Engine::new();
    engine
        .add_policy("three_rules.rego".into(), THREE_RULES_REGO.into())
        .map_err(|error| anyhow!("the bench Rego does not compile: {error}"))?;
    Ok(engine)
}

/// Evaluates the Rego rendition on `input`; the number of violations.
pub fn regorus_violations(engine: &mut regorus::Engine, input: &[u8]) -> Result<usize> {
    let value = regorus::Value::from_json_str(std::str::from_utf8(input)?)
        .map_err(|error| anyhow!("regorus cannot read the input: {error}"))?;
    engine.set_input(value);
    let result = engine
        .eval_rule(THREE_RULES_QUERY.into())
        .map_err(|error| anyhow!("regorus evaluation failed: {error}"))?;
    Ok(result.as_set().map(|set| set.len()).unwrap_or(0))
}

/// Runs the benchmark and prints it.
pub fn run_bench(args: &BenchArgs) -> u8 {
    if let Some(BenchMode::Serve(serve_args)) = &args.mode {
        return serve::run_serve_bench(serve_args);
    }
    match bench(args) {
        Ok(report) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string(&report).expect("the report serialises")
                );
            } else {
                print!("{}", report::text(&report));
            }
            if let Some(path) = &args.markdown {
                if let Err(error) = std::fs::write(path, report::markdown(&report)) {
                    eprintln!("meshlife bench: writing {}: {error}", path.display());
                    return crate::terminal::EXIT_ERROR;
                }
                eprintln!("wrote {}", path.display());
            }
            crate::terminal::EXIT_OK
        }
        Err(error) => {
            eprintln!("meshlife bench: {error:#}");
            crate::terminal::EXIT_ERROR
        }
    }
}

fn module_bytes(args: &BenchArgs) -> Result<Vec<u8>> {
    match &args.module {
        Some(path) => crate::module::engine::read_module(path, Default::default()),
        None => Ok(crate::module::engine::embedded_module().to_vec()),
    }
}

fn bench(args: &BenchArgs) -> Result<BenchReport> {
    let budget = Duration::from_millis(args.budget_ms);
    let bytes = module_bytes(args)?;
    let compile_started = Instant::now();
    wasmtime::Module::new(&wasmtime::Engine::default(), &bytes)
        .map_err(|error| anyhow!("compiling the module: {error:#}"))?;
    let compile_ms = compile_started.elapsed().as_secs_f64() * 1000.0;
    let engine = Engine::from_bytes(&bytes, "the benchmarked module")?;
    let mut rego = regorus_engine()?;
    let inputs = bench_inputs();
    if let Some(directory) = &args.save_inputs {
        std::fs::create_dir_all(directory)
            .with_context(|| format!("creating {}", directory.display()))?;
        for input in &inputs {
            let path = directory.join(format!("{}.json", input.name));
            std::fs::write(&path, &input.bytes)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    let mut results = Vec::new();
    let mut not_measured = Vec::new();
    let mut record = |input: &'static str, engine: &'static str, figures: (u64, u64, usize)| {
        eprintln!(
            "  {input:<20} {engine:<18} median {:>12} p99 {:>12}",
            report::duration(figures.0),
            report::duration(figures.1)
        );
        results.push(Measurement {
            input,
            engine,
            median_ns: figures.0,
            p99_ns: figures.1,
            samples: figures.2,
        });
    };
    for input in &inputs {
        let bytes = &input.bytes;
        let three = three_rule_input(bytes)?;
        // Each engine must see the same answer shape before it is timed.
        let native_count = meshlife_policy::evaluate(bytes).len();
        let wasm_count = engine.evaluate(bytes)?.len();
        if native_count != wasm_count {
            return Err(anyhow!(
                "{}: the module found {wasm_count} violations, the native build {native_count}",
                input.name
            ));
        }
        regorus_violations(&mut rego, &three)?;
        let mut engines: Vec<Work> = vec![
            (
                "wasm-warm",
                Box::new(|| {
                    engine.evaluate(bytes).expect("evaluates");
                }),
            ),
            (
                "wasm-fresh",
                Box::new(|| {
                    engine.evaluate_in_fresh_instance(bytes).expect("evaluates");
                }),
            ),
            (
                "native",
                Box::new(|| {
                    std::hint::black_box(meshlife_policy::evaluate(bytes));
                }),
            ),
            (
                "parse-floor",
                Box::new(|| {
                    let parsed: IgnoredAny = serde_json::from_slice(bytes).expect("valid JSON");
                    std::hint::black_box(parsed);
                }),
            ),
            (
                "wasm-warm-3-rules",
                Box::new(|| {
                    engine.evaluate(&three).expect("evaluates");
                }),
            ),
            (
                "regorus-3-rules",
                Box::new(|| {
                    regorus_violations(&mut rego, &three).expect("evaluates");
                }),
            ),
        ];
        let figures = measure_interleaved(budget, &mut engines);
        let names: Vec<&'static str> = engines.iter().map(|(name, _)| *name).collect();
        drop(engines);
        for (name, figures) in names.into_iter().zip(figures) {
            record(input.name, name, figures);
        }
    }
    match node_sdk(&inputs, &bytes, budget) {
        Ok(node) => {
            for measurement in node {
                record(
                    measurement.input,
                    "node-sdk",
                    (
                        measurement.median_ns,
                        measurement.p99_ns,
                        measurement.samples,
                    ),
                );
            }
        }
        Err(error) => not_measured.push(("node-sdk".to_string(), format!("{error:#}"))),
    }
    let throughput = throughput(&engine, &inputs)?;
    let (memory_bytes_after_1e3, memory_bytes_after_1e6) = if args.memory {
        let (after_1e3, after_1e6) = memory_growth(&bytes, &inputs)?;
        (Some(after_1e3), Some(after_1e6))
    } else {
        (None, None)
    };
    Ok(BenchReport {
        results,
        module_bytes: bytes.len(),
        compile_ms,
        throughput,
        memory_bytes_after_1e3,
        memory_bytes_after_1e6,
        input_bytes: inputs
            .iter()
            .map(|input| (input.name, input.bytes.len()))
            .collect(),
        machine: report::machine(),
        versions: report::versions(),
        not_measured,
    })
}

/// Evaluations per second of the typical Deployment with 1 and 2 worker threads.
fn throughput(engine: &Engine, inputs: &[BenchInput]) -> Result<Vec<Throughput>> {
    let typical = inputs
        .iter()
        .find(|input| input.name == "deployment-typical")
        .context("no typical Deployment input")?;
    const EVALUATIONS: usize = 20_000;
    // The same parallel loop as `Engine::evaluate_many`, over one shared input instead of
    // 20,000 copies of it.
    let run = |count: usize| -> Result<()> {
        (0..count)
            .into_par_iter()
            .try_for_each(|_| engine.evaluate(&typical.bytes).map(drop))
    };
    let mut figures = Vec::new();
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        pool.install(|| run(1000))?;
        let started = Instant::now();
        pool.install(|| run(EVALUATIONS))?;
        let seconds = started.elapsed().as_secs_f64();
        figures.push(Throughput {
            threads,
            input: typical.name,
            evaluations_per_second: EVALUATIONS as f64 / seconds,
        });
    }
    Ok(figures)
}

/// The warm instance's memory after 1,000 and after 1,000,000 evaluations (mostly the small
/// inputs, every 250th one of all four in turn), on one instance reused as the CLI reuses it.
fn memory_growth(bytes: &[u8], inputs: &[BenchInput]) -> Result<(usize, usize)> {
    let engine = Engine::from_bytes(bytes, "the benchmarked module")?;
    let small: Vec<&BenchInput> = inputs
        .iter()
        .filter(|input| input.bytes.len() < 100_000)
        .collect();
    let mut after_1e3 = 0;
    for count in 1..=1_000_000usize {
        // Every 250th evaluation cycles through all inputs, the 1 MB one included, so each has
        // run before the first reading and memory growth has its chance afterwards.
        let input = if count % 250 == 0 {
            &inputs[count / 250 % inputs.len()]
        } else {
            small[count % small.len()]
        };
        engine.evaluate(&input.bytes)?;
        if count == 1_000 {
            after_1e3 = engine.pooled_memory_bytes();
        }
    }
    Ok((after_1e3, engine.pooled_memory_bytes()))
}

/// The npm SDK measured by `compat/node/bench.js` in the workspace (needs `npm ci` there).
fn node_sdk(inputs: &[BenchInput], module: &[u8], budget: Duration) -> Result<Vec<Measurement>> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = workspace.join("compat/node/bench.js");
    if !workspace
        .join("compat/node/node_modules/@open-policy-agent/opa-wasm")
        .is_dir()
    {
        return Err(anyhow!(
            "@open-policy-agent/opa-wasm is not installed: run `npm ci` in compat/node (just compat does)"
        ));
    }
    let directory = std::env::temp_dir().join(format!("meshlife-bench-{}", std::process::id()));
    std::fs::create_dir_all(&directory)?;
    let module_path = directory.join("meshlife.wasm");
    std::fs::write(&module_path, module)?;
    let mut command = std::process::Command::new("node");
    command
        .arg(&script)
        .arg(&module_path)
        .arg(budget.as_millis().to_string());
    for input in inputs {
        let path = directory.join(format!("{}.json", input.name));
        std::fs::write(&path, &input.bytes)?;
        command.arg(format!("{}={}", input.name, path.display()));
    }
    let output = command.output().context("starting node")?;
    let _ = std::fs::remove_dir_all(&directory);
    if !output.status.success() {
        return Err(anyhow!(
            "node bench.js failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    #[derive(serde::Deserialize)]
    struct NodeFigure {
        input: String,
        median_ns: u64,
        p99_ns: u64,
        samples: usize,
    }
    let figures: Vec<NodeFigure> =
        serde_json::from_slice(&output.stdout).context("node bench.js printed no figures")?;
    figures
        .into_iter()
        .map(|figure| {
            let input = inputs
                .iter()
                .find(|input| input.name == figure.input)
                .map(|input| input.name)
                .with_context(|| {
                    format!("node bench.js measured an unknown input {}", figure.input)
                })?;
            Ok(Measurement {
                input,
                engine: "node-sdk",
                median_ns: figure.median_ns,
                p99_ns: figure.p99_ns,
                samples: figure.samples,
            })
        })
        .collect()
}
