//! Criterion benchmarks of one evaluation, per input and engine, on the inputs of
//! `meshlife bench` (host-test/src/commands/bench/inputs.rs): `cargo bench -p meshlife`.
//! `meshlife bench` measures the same engines (plus the npm SDK) in one quick run and writes
//! BENCHMARKS.md; these give criterion's statistics and regression comparisons between runs.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use meshlife::commands::bench::{
    bench_inputs, regorus_engine, regorus_violations, three_rule_input,
};
use meshlife::module::engine::Engine;
use serde::de::IgnoredAny;

fn evaluation(criterion: &mut Criterion) {
    let engine = Engine::embedded().expect("the embedded module loads");
    let mut rego = regorus_engine().expect("the Rego rendition compiles");
    for input in bench_inputs() {
        let bytes = input.bytes.as_slice();
        let three = three_rule_input(bytes).expect("three-rule input");
        let mut group = criterion.benchmark_group(input.name);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        if bytes.len() > 100_000 {
            group.sample_size(20);
        }
        group.bench_function(BenchmarkId::new("wasm-warm", input.name), |b| {
            b.iter(|| engine.evaluate(bytes).expect("evaluates"))
        });
        group.bench_function(BenchmarkId::new("wasm-fresh", input.name), |b| {
            b.iter(|| engine.evaluate_in_fresh_instance(bytes).expect("evaluates"))
        });
        group.bench_function(BenchmarkId::new("native", input.name), |b| {
            b.iter(|| meshlife_policy::evaluate(bytes))
        });
        group.bench_function(BenchmarkId::new("parse-floor", input.name), |b| {
            b.iter(|| serde_json::from_slice::<IgnoredAny>(bytes).expect("valid JSON"))
        });
        group.bench_function(BenchmarkId::new("wasm-warm-3-rules", input.name), |b| {
            b.iter(|| engine.evaluate(&three).expect("evaluates"))
        });
        group.bench_function(BenchmarkId::new("regorus-3-rules", input.name), |b| {
            b.iter(|| regorus_violations(&mut rego, &three).expect("evaluates"))
        });
        group.finish();
    }
}

criterion_group!(benches, evaluation);
criterion_main!(benches);
