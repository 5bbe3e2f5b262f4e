//! The figures the docs quote stay true: the module size docs/architecture.md quotes is held to
//! the built module, and the README quotes no timing (they live in BENCHMARKS.md, which `just
//! bench` writes from what it measured). The corpus counts of docs/testing.md are checked by
//! the corpus test (`just corpus`).

use regex::Regex;

fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("cannot read {path}: {error}"))
}

fn architecture() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/architecture.md");
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("cannot read {path}: {error}"))
}

/// How far the quoted size may be from the module: the docs round it ("about 425 KB") so
/// that small policy changes do not make it wrong; a change of more than this is worth saying.
const SIZE_TOLERANCE: f64 = 0.05;

#[test]
fn the_quoted_module_size_is_the_built_modules_within_5_percent() {
    let architecture = architecture();
    let pattern = Regex::new(r"\| Module size \| about ([\d,]+) KB").unwrap();
    let quoted = pattern
        .captures(&architecture)
        .unwrap_or_else(|| panic!("docs/architecture.md has no `| Module size | about N KB` row"))
        [1]
    .replace(',', "")
    .parse::<f64>()
    .unwrap()
        * 1000.0;
    let module = std::fs::read(concat!(env!("OUT_DIR"), "/meshlife.wasm")).expect("the module");
    let actual = module.len() as f64;
    assert!(
        (actual - quoted).abs() <= quoted * SIZE_TOLERANCE,
        "docs/architecture.md says the module is about {:.0} KB; it is {} bytes ({:.0} KB): \
         update the row",
        quoted / 1000.0,
        module.len(),
        actual / 1000.0
    );
}

#[test]
fn timings_are_not_quoted_in_the_readme_but_in_benchmarks_md() {
    let readme = readme();
    let timing = Regex::new(
        r"\d[\d,.]*\s?(µs|us\b|ms\b|objects/s|evaluations/s|reviews per second|per second|req/s)",
    )
    .unwrap();
    let quoted: Vec<&str> = timing
        .find_iter(&readme)
        .map(|found| found.as_str())
        .collect();
    assert!(
        quoted.is_empty(),
        "README.md quotes timings, which go stale: {quoted:?}; they belong in BENCHMARKS.md \
         (written by `just bench`)"
    );
    assert!(
        readme.contains("](BENCHMARKS.md)"),
        "README.md links BENCHMARKS.md"
    );
}
