//! docs/rules.md shows, in each rule's entry, the timeline of its first example that fires:
//! `docs/timelines/<id>-<name>.svg`, drawn by `meshlife explain -o svg` from that example's
//! manifest, Namespace and constraint parameters as the entry gives them. This test draws them
//! again and fails when a picture (or the entry's link to it) is not what the example gives;
//! `MESHLIFE_UPDATE_DOCS=1` (`just docs-timelines`) writes them instead.

use std::path::{Path, PathBuf};

use crate::cli_support;

const RULES_MD: &str = "docs/rules.md";
const PICTURES: &str = "docs/timelines";
/// What ML000's entry says instead of a picture: its example is an input that cannot be read.
const NO_TIMELINE: &str =
    "No timeline: an input the policy cannot read has none (`meshlife explain` names the field).";
const NO_POD: &str =
    "No timeline: a NetworkPolicy runs no pod of its own (`meshlife check` judges it).";

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).to_path_buf()
}

/// One rule's first example that fires: its YAML blocks, as the entry gives them.
struct Example {
    rule: String,
    file_stem: String,
    parameters: Option<String>,
    namespace: Option<String>,
    manifest: String,
    /// The line (of rules.md) after which the picture goes: the end of the example's output.
    end_line: usize,
}

/// The fenced YAML block that follows line `from` (its text, and the line of its closing fence).
fn yaml_block_after(lines: &[&str], from: usize) -> (String, usize) {
    let open = (from..lines.len())
        .find(|&index| lines[index].trim_start() == "```yaml")
        .unwrap_or_else(|| panic!("no ```yaml block after line {}", from + 1));
    let close = (open + 1..lines.len())
        .find(|&index| lines[index].trim_start() == "```")
        .unwrap_or_else(|| panic!("unclosed block at line {}", open + 1));
    (lines[open + 1..close].join("\n") + "\n", close)
}

fn examples(rules_md: &str) -> Vec<Example> {
    let lines: Vec<&str> = rules_md.lines().collect();
    let headings: Vec<usize> = (0..lines.len())
        .filter(|&index| {
            lines[index].starts_with("### ML") && lines[index].as_bytes().get(6).is_some()
        })
        .collect();
    let mut examples = Vec::new();
    for (position, &heading) in headings.iter().enumerate() {
        let end = headings.get(position + 1).copied().unwrap_or(lines.len());
        let mut words = lines[heading].trim_start_matches("### ").split(' ');
        let rule = words.next().unwrap().to_string();
        let name = words.next().unwrap_or_default().to_string();
        let Some(start) = (heading..end).find(|&index| {
            lines[index].starts_with("**Example that fires")
                || lines[index].starts_with("**Example at info")
        }) else {
            panic!("{rule}: no example that fires in {RULES_MD}");
        };
        let example_end = (start + 1..end)
            .find(|&index| lines[index].starts_with("**Example"))
            .unwrap_or(end);
        let labelled = |label: &str| {
            (start..example_end)
                .find(|&index| lines[index].starts_with(label))
                .map(|index| yaml_block_after(&lines, index))
        };
        let parameters = labelled("Constraint parameters (").map(|(text, _)| text);
        let namespace = labelled("Namespace (").map(|(text, _)| text);
        let (manifest, _) =
            labelled("Manifest").unwrap_or_else(|| panic!("{rule}: its example has no manifest"));
        let output = (start..example_end)
            .find(|&index| lines[index].starts_with("Output of"))
            .unwrap_or_else(|| panic!("{rule}: its example has no output"));
        let close = (output + 2..example_end)
            .find(|&index| lines[index].trim_start() == "```")
            .unwrap_or_else(|| panic!("{rule}: unclosed output block"));
        examples.push(Example {
            file_stem: format!("{}-{name}", rule.to_lowercase()),
            rule,
            parameters,
            namespace,
            manifest,
            end_line: close,
        });
    }
    examples
}

/// The example's timeline as `meshlife explain -o FORMAT` gives it, or its error.
fn draw(example: &Example, scratch: &Path, format: &str) -> Result<String, String> {
    let manifest = scratch.join(format!("{}.yaml", example.file_stem));
    let text = match &example.namespace {
        Some(namespace) => format!("{namespace}---\n{}", example.manifest),
        None => example.manifest.clone(),
    };
    std::fs::write(&manifest, text).unwrap();
    let mut args = vec!["explain".to_string(), "-o".into(), format.into()];
    // An entry without parameters is drawn under the parameters' defaults, which docs/rules.md
    // describes, not under the releases `explain` assumes when given no constraint at all.
    {
        let parameters = example.parameters.as_deref().unwrap_or("{}");
        let indented: String = parameters
            .lines()
            .map(|line| format!("    {line}\n"))
            .collect();
        let constraint = scratch.join(format!("{}-constraint.yaml", example.file_stem));
        std::fs::write(
            &constraint,
            format!(
                "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\n\
                 metadata:\n  name: example\nspec:\n  parameters:\n{indented}"
            ),
        )
        .unwrap();
        args.extend(["--constraint".into(), constraint.display().to_string()]);
    }
    args.push(manifest.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let outcome = cli_support::run_in(&root(), &args, None);
    if outcome.code == 0 {
        Ok(outcome.stdout)
    } else {
        Err(outcome.stderr)
    }
}

fn picture_line(example: &Example) -> String {
    format!(
        "![The timeline of the example above: `meshlife explain -o svg`](timelines/{}.svg)",
        example.file_stem
    )
}

#[test]
fn each_rule_entry_shows_the_timeline_of_its_example() {
    let root = root();
    let rules_md = std::fs::read_to_string(root.join(RULES_MD)).unwrap();
    let examples = examples(&rules_md);
    assert_eq!(
        examples.len(),
        meshlife_policy::catalogue::RULES.len(),
        "one example per rule"
    );
    let update = std::env::var_os("MESHLIFE_UPDATE_DOCS").is_some();
    let scratch = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    let mut lines: Vec<String> = rules_md.lines().map(str::to_string).collect();
    // From the end, so that inserting a line keeps the earlier line numbers.
    for example in examples.iter().rev() {
        let (wanted_line, drawn) = match draw(example, scratch.path(), "svg") {
            Ok(svg) => (picture_line(example), Some(svg)),
            Err(error) if example.rule == "ML000" => {
                assert!(error.contains("invalid-input"), "{error}");
                (NO_TIMELINE.to_string(), None)
            }
            Err(error) if example.rule == "ML604" => {
                assert!(error.contains("no pod spec to draw"), "{error}");
                (NO_POD.to_string(), None)
            }
            Err(error) => panic!("{}: explain failed on its example: {error}", example.rule),
        };
        // The picture's paragraph follows the output block, after a blank line.
        let at = example.end_line + 2;
        let present = lines.get(at).is_some_and(|line| *line == wanted_line);
        let stale = lines.get(at).is_some_and(|line| {
            line.starts_with("![The timeline of") || line == NO_TIMELINE || line == NO_POD
        });
        if !present {
            if update && stale {
                lines[at] = wanted_line.clone();
            } else if update {
                lines.insert(example.end_line + 1, String::new());
                lines.insert(example.end_line + 2, wanted_line.clone());
            } else {
                problems.push(format!(
                    "{}: line {} of {RULES_MD} is not `{wanted_line}`",
                    example.rule,
                    at + 1
                ));
            }
        }
        if let Some(svg) = drawn {
            let path = root
                .join(PICTURES)
                .join(format!("{}.svg", example.file_stem));
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            if committed != svg {
                if update {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, &svg).unwrap();
                } else {
                    problems.push(format!(
                        "{}: {} is not what its example draws",
                        example.rule,
                        path.display()
                    ));
                }
            }
            // Each picture renders, and names its rule's finding on it.
            let tree = resvg::usvg::Tree::from_str(&svg, &resvg::usvg::Options::default())
                .unwrap_or_else(|error| panic!("{}: {error}", example.rule));
            assert!(tree.size().width() > 900.0);
            assert!(
                svg.contains(&example.rule),
                "{}: the picture does not mark its finding",
                example.rule
            );
            // Marked at its rule's moment: only the rules about the mode sit on the mode line.
            let json = draw(example, scratch.path(), "json").unwrap();
            let explained: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
            let anchors: Vec<&str> = explained
                .iter()
                .flat_map(|one| one["findings"].as_array().unwrap())
                .filter(|finding| finding["rule"] == example.rule.as_str())
                .map(|finding| finding["anchor"]["at"].as_str().unwrap())
                .collect();
            let about_the_mode = ["ML104", "ML601", "ML602"].contains(&example.rule.as_str());
            assert!(!anchors.is_empty(), "{}: no finding", example.rule);
            for anchor in anchors {
                assert_eq!(
                    anchor == "mode",
                    about_the_mode,
                    "{}: at {anchor}",
                    example.rule
                );
            }
        }
    }
    // No picture is left of a rule or example that is gone.
    let expected: Vec<String> = examples
        .iter()
        .filter(|example| example.rule != "ML000")
        .map(|example| format!("{}.svg", example.file_stem))
        .collect();
    for entry in std::fs::read_dir(root.join(PICTURES)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !expected.contains(&name) {
            if update {
                std::fs::remove_file(entry.path()).unwrap();
            } else {
                problems.push(format!("{PICTURES}/{name} belongs to no rule's example"));
            }
        }
    }
    if update {
        std::fs::write(root.join(RULES_MD), lines.join("\n") + "\n").unwrap();
    }
    assert!(
        problems.is_empty(),
        "{}\nRun `just docs-timelines` (MESHLIFE_UPDATE_DOCS=1 cargo test -p meshlife --test \
         docs_timelines) to draw them again.",
        problems.join("\n")
    );
}
