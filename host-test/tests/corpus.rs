//! The real-world corpus as a regression test: every folder of `../shared/corpus` (Istio and
//! Linkerd's own manifests, see its PROVENANCE.md) is checked by the real `meshlife` binary under
//! the folder's constraint (`tests/corpus/constraints/<folder>.yaml`), and the findings, the input
//! errors and the skipped inputs (files or documents that are not Kubernetes objects, said as
//! `meshlife: note: skipped ...`) are compared with the hand-reviewed
//! `tests/corpus/expectations.yaml`.
//!
//! Beyond the comparison, for every folder: the run ends with exit code 0, 1 or 2 (2 exactly when
//! input errors are expected; skipped inputs are not errors) and without a panic, stdout is a
//! JSON array, and ML000 appears only on objects the review found not to be valid Kubernetes
//! objects (`validObject: false`).
//! Differences on entries marked `knownDisagreement: true` (tool bugs written up in
//! `tests/corpus/DISAGREEMENTS.md`) are printed but do not fail the test. The objects and files
//! checked are held to the counts docs/testing.md quotes.
//!
//! Built only with the `corpus` feature (`just corpus`, which CI runs): a clone has no corpus,
//! and `cargo test --workspace` must pass on any clone. With the feature and no corpus, the test
//! fails saying where it looked; it is never skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use regex::Regex;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expectations {
    folders: Vec<Folder>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Folder {
    /// The folder under the corpus root, e.g. `istio/inject-testdata@1.26.0`.
    folder: String,
    /// The constraint file, relative to `tests/corpus`.
    constraint: String,
    input_errors: Vec<ExpectedError>,
    /// Inputs meshlife skips and says on stderr (`meshlife: note: skipped FILE: ...`): JSON
    /// patches, fragments without `apiVersion` and `kind`, empty files.
    skipped: Vec<ExpectedSkip>,
    objects: Vec<ExpectedObject>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedError {
    file: String,
    document: u64,
    /// A piece of the message the error must contain.
    error: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedSkip {
    file: String,
    /// The document skipped; absent when the whole file is (no document in it).
    document: Option<u64>,
    /// A piece of the reason the note gives.
    reason: String,
}

impl ExpectedSkip {
    fn show(&self) -> String {
        match self.document {
            Some(document) => format!("{} document {document}", self.file),
            None => self.file.clone(),
        }
    }

    /// Whether `line` is the `meshlife: note: skipped` line for this input.
    fn matches(&self, line: &str) -> bool {
        // `skipped FILE: document N (line L): ...` for a document, `skipped FILE: ...` or
        // `skipped FILE (line L): ...` for the whole file.
        let Some(rest) = line
            .strip_prefix("meshlife: note: skipped ")
            .and_then(|rest| rest.strip_prefix(self.file.as_str()))
            .filter(|rest| rest.starts_with(": ") || rest.starts_with(" ("))
        else {
            return false;
        };
        let place_matches = match self.document {
            // Notes count documents from 1; expectations.yaml from 0.
            Some(document) => rest
                .strip_prefix(&format!(": document {}", document + 1))
                .is_some_and(|after| after.starts_with([' ', ',', ':'])),
            None => !rest.starts_with(": document "),
        };
        place_matches && rest.contains(&self.reason)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpectedObject {
    file: String,
    document: u64,
    item: Option<u64>,
    /// `Kind name` or `Kind namespace/name`, as a check that the document numbers still point at
    /// the object that was reviewed.
    object: String,
    rules: Vec<String>,
    #[serde(default)]
    known_disagreement: bool,
    #[serde(default = "valid_by_default")]
    valid_object: bool,
}

fn valid_by_default() -> bool {
    true
}

/// Where an object is: file, document, List item, 0-based as in expectations.yaml.
type Location = (String, u64, Option<u64>);

fn show(location: &Location) -> String {
    let (file, document, item) = location;
    match item {
        Some(item) => format!("{file} document {document} item {item}"),
        None => format!("{file} document {document}"),
    }
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where the corpus is: `MESHLIFE_CORPUS` when set (another checkout of the corpus), otherwise
/// `../shared/corpus` beside the workspace. Nothing else: a path of one machine would make the
/// test pass there and fail everywhere else for a reason nobody can see.
fn corpus_location(configured: Option<std::ffi::OsString>) -> PathBuf {
    match configured {
        Some(root) => PathBuf::from(root),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus"),
    }
}

fn corpus_root() -> PathBuf {
    let location = corpus_location(std::env::var_os("MESHLIFE_CORPUS"));
    if !location.is_dir() {
        panic!(
            "the real-world corpus is missing: looked in {} (see its PROVENANCE.md; set \
             MESHLIFE_CORPUS to another copy). This test is not skipped without it: provide the \
             corpus.",
            location.display()
        )
    }
    location
}

#[test]
fn the_corpus_is_looked_for_beside_the_workspace_or_where_meshlife_corpus_says_only() {
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus");
    assert_eq!(corpus_location(None), beside);
    assert_eq!(
        corpus_location(Some("/elsewhere/corpus".into())),
        PathBuf::from("/elsewhere/corpus")
    );
}

/// Every file under `folder`, relative to it with `/` separators, sorted.
fn files_under(folder: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let entries = std::fs::read_dir(dir)
            .unwrap_or_else(|error| panic!("cannot read {}: {error}", dir.display()));
        for entry in entries {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).expect("under the root");
                let parts: Vec<_> = relative
                    .components()
                    .map(|part| part.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push(parts.join("/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(folder, folder, &mut out);
    out.sort();
    out
}

/// The corpus folders, as `mesh/folder` (the corpus has two levels: the mesh, then the source).
fn corpus_folders(root: &Path) -> BTreeSet<String> {
    let mut folders = BTreeSet::new();
    for mesh in std::fs::read_dir(root).expect("the corpus root is readable") {
        let mesh = mesh.expect("a folder entry").path();
        if !mesh.is_dir() {
            continue;
        }
        for folder in std::fs::read_dir(&mesh).expect("a mesh folder is readable") {
            let folder = folder.expect("a folder entry").path();
            if folder.is_dir() {
                folders.insert(format!(
                    "{}/{}",
                    mesh.file_name().unwrap().to_string_lossy(),
                    folder.file_name().unwrap().to_string_lossy()
                ));
            }
        }
    }
    folders
}

/// The outcome of one folder: problems fail the test, notes are only printed.
#[derive(Default)]
struct Report {
    problems: Vec<String>,
    notes: Vec<String>,
    rule_counts: BTreeMap<String, usize>,
    /// Objects and files checked, from `--stats`.
    objects: usize,
    files: usize,
}

fn check_folder(root: &Path, folder: &Folder) -> Report {
    let mut report = Report::default();
    let folder_path = root.join(&folder.folder);
    assert!(
        folder_path.is_dir(),
        "corpus folder {} is missing: expectations.yaml lists it, the corpus does not have it",
        folder_path.display()
    );
    let constraint = workspace().join("tests/corpus").join(&folder.constraint);
    assert!(
        constraint.is_file(),
        "constraint {} for {} is missing",
        constraint.display(),
        folder.folder
    );

    // Every file by name: the folder walk reads only .yaml/.yml/.json and would skip *.injected.
    let files = files_under(&folder_path);
    let output = Command::new(env!("CARGO_BIN_EXE_meshlife"))
        .arg("check")
        .args(&files)
        .arg("--constraint")
        .arg(&constraint)
        .args(["-o", "json", "--stats"])
        .current_dir(&folder_path)
        .env("NO_COLOR", "1")
        .output()
        .expect("the meshlife binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);

    // No crash: a known exit code, no panic message, JSON on stdout.
    let code = output.status.code();
    if !matches!(code, Some(0..=2)) {
        report.problems.push(format!(
            "exit status {:?} (expected 0, 1 or 2: a crash or a signal)\nstderr:\n{stderr}",
            output.status
        ));
        return report;
    }
    if stderr.contains("panicked") || stderr.contains("RUST_BACKTRACE") {
        report
            .problems
            .push(format!("meshlife panicked:\n{stderr}"));
    }
    // `-o json` is an envelope; its findings are the list compared here.
    let findings: Vec<serde_json::Value> = match serde_json::from_str::<serde_json::Value>(&stdout)
        .map(|envelope| envelope["findings"].clone())
        .and_then(serde_json::from_value)
    {
        Ok(findings) => findings,
        Err(error) => {
            report.problems.push(format!(
                "stdout is not a JSON envelope of findings ({error}):\n{stdout}\nstderr:\n{stderr}"
            ));
            return report;
        }
    };
    let code = code.unwrap_or_default();
    if folder.input_errors.is_empty() && code == 2 {
        report.problems.push(format!(
            "exit code 2 although no input error is expected (skipped inputs are notes, not \
             errors)\nstderr:\n{stderr}"
        ));
    }
    if !folder.input_errors.is_empty() && code != 2 {
        report.problems.push(format!(
            "exit code {code}, expected 2 (input errors are expected)"
        ));
    }

    // The expected objects, by location.
    let mut expected_objects: BTreeMap<Location, &ExpectedObject> = BTreeMap::new();
    for object in &folder.objects {
        let location = (object.file.clone(), object.document, object.item);
        if !files.contains(&object.file) {
            report.problems.push(format!(
                "expectations.yaml lists {} but the folder has no such file",
                show(&location)
            ));
        }
        if expected_objects.insert(location.clone(), object).is_some() {
            report
                .problems
                .push(format!("expectations.yaml lists {} twice", show(&location)));
        }
    }

    // The findings, by location and rule, with the message of each (for the diff).
    let mut found: BTreeMap<(Location, String), String> = BTreeMap::new();
    for finding in &findings {
        let text = |key: &str| finding[key].as_str().unwrap_or_default().to_string();
        // expectations.yaml numbers documents and items from 0, as it always has; the JSON
        // output counts them from 1, as the text does.
        let location = (
            text("file"),
            finding["document"]
                .as_u64()
                .and_then(|document| document.checked_sub(1))
                .unwrap_or(u64::MAX),
            finding["item"]
                .as_u64()
                .map(|item| item.checked_sub(1).unwrap_or(u64::MAX)),
        );
        let rule = text("rule");
        *report.rule_counts.entry(rule.clone()).or_default() += 1;
        // The document numbers must still point at the object the review looked at.
        let namespace = text("namespace");
        let name = text("name");
        let label = format!(
            "{} {}{}",
            text("kind"),
            if namespace.is_empty() {
                String::new()
            } else {
                format!("{namespace}/")
            },
            if name.is_empty() {
                "(no name)".to_string()
            } else {
                name
            }
        );
        match expected_objects.get(&location) {
            Some(object) if object.object != label => report.problems.push(format!(
                "{}: meshlife reports on {label}, expectations.yaml says {} is there",
                show(&location),
                object.object
            )),
            _ => {}
        }
        if rule == "ML000"
            && expected_objects
                .get(&location)
                .is_none_or(|o| o.valid_object)
        {
            report.problems.push(format!(
                "{} ({label}): ML000 on an object the review found to be a valid Kubernetes \
                 object: {}",
                show(&location),
                text("msg")
            ));
        }
        found.entry((location, rule)).or_insert_with(|| text("msg"));
    }

    let mut expected: BTreeSet<(Location, String)> = BTreeSet::new();
    for (location, object) in &expected_objects {
        for rule in &object.rules {
            expected.insert((location.clone(), rule.clone()));
        }
    }
    let found_keys: BTreeSet<(Location, String)> = found.keys().cloned().collect();
    let mut disagreeing: BTreeSet<Location> = BTreeSet::new();
    for (location, rule) in expected.difference(&found_keys) {
        let object = expected_objects[location];
        let line = format!(
            "missing   {} ({}): {rule} expected by the review, not reported",
            show(location),
            object.object
        );
        if object.known_disagreement {
            disagreeing.insert(location.clone());
            report.notes.push(format!("known disagreement: {line}"));
        } else {
            report.problems.push(line);
        }
    }
    for (location, rule) in found_keys.difference(&expected) {
        let message = &found[&(location.clone(), rule.clone())];
        match expected_objects.get(location) {
            Some(object) if object.known_disagreement => {
                disagreeing.insert(location.clone());
                report.notes.push(format!(
                    "known disagreement: unexpected {} ({}): {message}",
                    show(location),
                    object.object
                ));
            }
            Some(object) => report.problems.push(format!(
                "unexpected {} ({}): {message}",
                show(location),
                object.object
            )),
            None => report.problems.push(format!(
                "unexpected {} (an object expectations.yaml does not list): {message}",
                show(location)
            )),
        }
    }
    for (location, object) in &expected_objects {
        if object.known_disagreement && !disagreeing.contains(location) {
            report.notes.push(format!(
                "{} ({}) is marked knownDisagreement but meshlife now agrees with the review: \
                 remove the mark and its entry in DISAGREEMENTS.md",
                show(location),
                object.object
            ));
        }
    }

    // Input errors: every `meshlife: error:` line must be expected, every expected one present.
    let error_lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("meshlife: error:"))
        .collect();
    let matches = |expected: &ExpectedError, line: &str| {
        // Messages count documents from 1; expectations.yaml from 0.
        let prefix = format!(
            "meshlife: error: {}: document {}",
            expected.file,
            expected.document + 1
        );
        line.starts_with(&prefix)
            && line[prefix.len()..].starts_with([' ', ',', ':'])
            && line.contains(&expected.error)
    };
    for line in &error_lines {
        if !folder
            .input_errors
            .iter()
            .any(|expected| matches(expected, line))
        {
            report
                .problems
                .push(format!("unexpected input error: {line}"));
        }
    }
    for expected in &folder.input_errors {
        if !error_lines.iter().any(|line| matches(expected, line)) {
            report.problems.push(format!(
                "missing input error: {} document {} containing {:?}",
                expected.file, expected.document, expected.error
            ));
        }
    }
    // Skipped inputs: every `meshlife: note: skipped` line must be expected, every expected one
    // present, as for input errors.
    let skip_lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("meshlife: note: skipped "))
        .collect();
    for line in &skip_lines {
        if !folder.skipped.iter().any(|expected| expected.matches(line)) {
            report
                .problems
                .push(format!("unexpected skipped input: {line}"));
        }
    }
    for expected in &folder.skipped {
        if !files.contains(&expected.file) {
            report.problems.push(format!(
                "expectations.yaml lists {} as skipped but the folder has no such file",
                expected.show()
            ));
        }
        if !skip_lines.iter().any(|line| expected.matches(line)) {
            report.problems.push(format!(
                "missing skipped input: {} skipped for a reason containing {:?}",
                expected.show(),
                expected.reason
            ));
        }
    }
    let stats = Regex::new(r"^meshlife: (\d+) objects, (\d+) files, ").unwrap();
    for line in stderr.lines() {
        if let Some(captures) = stats.captures(line) {
            report.objects = captures[1].parse().unwrap_or_default();
            report.files = captures[2].parse().unwrap_or_default();
        } else if !line.starts_with("meshlife: error:")
            && !line.starts_with("meshlife: note: skipped ")
            && !line.trim().is_empty()
        {
            report.notes.push(format!("stderr: {line}"));
        }
    }
    report
}

#[test]
fn the_corpus_gives_the_reviewed_findings() {
    let root = corpus_root();
    let path = workspace().join("tests/corpus/expectations.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    let expectations: Expectations = serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|error| panic!("{} is not valid: {error}", path.display()));

    let mut failures = Vec::new();
    let listed: BTreeSet<String> = expectations
        .folders
        .iter()
        .map(|folder| folder.folder.clone())
        .collect();
    for folder in corpus_folders(&root) {
        if !listed.contains(&folder) {
            failures.push(format!(
                "corpus folder {folder} has no entry in expectations.yaml (review it and add one)"
            ));
        }
    }

    let mut table = Vec::new();
    let (mut objects, mut files) = (0, 0);
    for folder in &expectations.folders {
        let report = check_folder(&root, folder);
        objects += report.objects;
        files += report.files;
        let counts: Vec<String> = report
            .rule_counts
            .iter()
            .map(|(rule, count)| format!("{rule} {count}"))
            .collect();
        table.push(format!("{:40} {}", folder.folder, counts.join(", ")));
        for note in &report.notes {
            println!("{}: {note}", folder.folder);
        }
        if !report.problems.is_empty() {
            failures.push(format!(
                "{} ({} problems):\n  {}",
                folder.folder,
                report.problems.len(),
                report.problems.join("\n  ")
            ));
        }
    }
    println!("findings by folder and rule:\n{}", table.join("\n"));
    // The counts docs/testing.md quotes, so that they cannot go stale.
    let readme_path = workspace().join("docs/testing.md");
    let readme = std::fs::read_to_string(&readme_path).expect("docs/testing.md");
    let quoted = Regex::new(r"`\.\./shared/corpus`, (\d[\d,]*) objects in (\d[\d,]*) files")
        .unwrap()
        .captures(&readme)
        .map(|captures| {
            let number = |index: usize| captures[index].replace(',', "").parse::<usize>().unwrap();
            (number(1), number(2))
        });
    if quoted != Some((objects, files)) {
        failures.push(format!(
            "docs/testing.md quotes the corpus as {quoted:?} (objects, files); it is {objects} objects \
             in {files} files: write \"`../shared/corpus`, {objects} objects in {files} files\""
        ));
    }
    assert!(
        failures.is_empty(),
        "the corpus does not give the reviewed findings (tests/corpus/expectations.yaml):\n\n{}",
        failures.join("\n\n")
    );
}
