//! Reading time against input size (issue 13: "Any YAML input must cost time linear in its
//! size"): `cargo bench -p meshlife --bench reading`.
//!
//! Four shapes, each at doubling sizes, read the way `meshlife check FILE` reads them
//! (`manifests::load` on a file): YAML flow nesting (`[[[...]]]`, refused past the depth
//! limit, so this is the time to the refusal), documents each nested 200 levels deep (read in
//! full), a stream of many small documents, and one large
//! object; the large object also as a Gatekeeper input through the module's reader
//! (`meshlife_policy::evaluate`). Criterion's throughput line is the growth figure: MiB/s that
//! stays flat across sizes is linear time, MiB/s that halves as the size doubles is quadratic.
//! Sizes are capped so that a quadratic reader still finishes in a couple of minutes.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use meshlife::inputs::manifests::load;

/// Levels of `[`: 100,000 took 28 s before the reader was made linear, so 8,000 stays under a
/// quarter of a second even then.
const NESTING_LEVELS: [usize; 4] = [1_000, 2_000, 4_000, 8_000];
const DOCUMENTS: [usize; 4] = [1_000, 2_000, 4_000, 8_000];
/// Documents nested this deep in flow collections: below the reader's 256-level refusal, so
/// each is read in full, the case whose cost per byte grows with the depth.
const NESTED_DEPTH: usize = 200;
const NESTED_DOCUMENTS: [usize; 4] = [50, 100, 200, 400];
/// `data` entries of one ConfigMap (about 40 bytes each).
const ENTRIES: [usize; 4] = [2_000, 4_000, 8_000, 16_000];

fn nesting(levels: usize) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\ndata: {}{}\n",
        "[".repeat(levels),
        "]".repeat(levels)
    )
}

fn nested_documents(count: usize) -> String {
    (0..count)
        .map(|index| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: n{index}}}\nbinaryData: {}{}\n",
                "[".repeat(NESTED_DEPTH),
                "]".repeat(NESTED_DEPTH)
            )
        })
        .collect()
}

fn many_documents(count: usize) -> String {
    (0..count)
        .map(|index| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{index}, namespace: shop}}\ndata: {{a: b}}\n"
            )
        })
        .collect()
}

fn large_object(entries: usize) -> String {
    let mut text =
        String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: large\ndata:\n");
    for index in 0..entries {
        text.push_str(&format!("  key-{index:06}: \"value number {index}\"\n"));
    }
    text
}

/// The large object as the module's input: a Deployment whose pod template carries the
/// entries as annotations (the module reads annotations, so none of it is skipped unread).
fn large_review(entries: usize) -> Vec<u8> {
    let annotations: serde_json::Map<String, serde_json::Value> = (0..entries)
        .map(|index| {
            (
                format!("key-{index:06}"),
                format!("value number {index}").into(),
            )
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "review": {"operation": "CREATE", "object": {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "large", "namespace": "shop"},
            "spec": {"template": {
                "metadata": {"annotations": annotations},
                "spec": {"containers": [{"name": "web", "image": "web:1"}]}}}}},
        "parameters": {}
    }))
    .expect("serialisable")
}

fn read_file_series(criterion: &mut Criterion, name: &str, texts: Vec<(usize, String)>) {
    let folder = tempfile::tempdir().expect("a temp folder");
    let mut group = criterion.benchmark_group(name);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (size, text) in texts {
        let path = folder.path().join(format!("{name}-{size}.yaml"));
        std::fs::write(&path, &text).expect("writable");
        let paths = [path.display().to_string()];
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &paths, |b, paths| {
            b.iter(|| load(paths))
        });
    }
    group.finish();
}

fn reading(criterion: &mut Criterion) {
    read_file_series(
        criterion,
        "yaml-flow-nesting-levels",
        NESTING_LEVELS.map(|n| (n, nesting(n))).into(),
    );
    read_file_series(
        criterion,
        "yaml-documents-nested-200-deep",
        NESTED_DOCUMENTS.map(|n| (n, nested_documents(n))).into(),
    );
    read_file_series(
        criterion,
        "yaml-small-documents",
        DOCUMENTS.map(|n| (n, many_documents(n))).into(),
    );
    read_file_series(
        criterion,
        "yaml-one-object-entries",
        ENTRIES.map(|n| (n, large_object(n))).into(),
    );

    let mut group = criterion.benchmark_group("module-one-object-annotations");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for entries in ENTRIES {
        let input = large_review(entries);
        group.throughput(Throughput::Bytes(input.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(entries), &input, |b, input| {
            b.iter(|| meshlife_policy::evaluate(input))
        });
    }
    group.finish();
}

criterion_group!(benches, reading);
criterion_main!(benches);
