//! Reading Kubernetes manifests: files, folders, stdin; multi-document YAML, JSON, Lists and
//! AdmissionReviews, into objects that each know where they came from.
//!
//! Nothing is lost: a document that cannot be read becomes an [`InputError`] naming the file,
//! the document and (where the parser knows it) the line or field, and every other document and
//! file is still read.

use std::path::PathBuf;

use rayon::prelude::*;
use serde_json::Value;

mod body;
mod nesting;
pub mod render;
mod values;

mod admission;
mod documents;
mod errors;
mod file;
mod loaded;
mod object;
mod objects;
mod templates;
mod walk;

pub use admission::object_of_admission_review;
pub use body::ObjectBody;
pub use errors::{EMPTY_STDIN, InputError, Skipped, item_text};
pub use loaded::{IGNORE_FILE, LoadOptions, LoadedInputs, STDIN_NAME};
pub use object::{
    MadeReview, ManifestObject, ObjectIdentity, Review, json_type_name, split_api_version,
    string_map,
};

use crate::inputs::files::{self};
use crate::inputs::manifests::documents::{
    document_error, parse_yaml_document, split_yaml_documents,
};
use crate::inputs::manifests::file::{parse_text, read_file};
use crate::inputs::manifests::loaded::{FileContents, InputFile};
use crate::inputs::manifests::walk::{render_folder, walk_folder};

/// Reads every path: `-` is stdin, folders are walked recursively for `.yaml`, `.yml` and
/// `.json` files (hidden folders such as `.git` and `.github` are skipped), files named
/// explicitly are read whatever their extension. Files are parsed in parallel.
pub fn load(paths: &[String]) -> LoadedInputs {
    load_with_progress(paths, &LoadOptions::default(), &|_| {}, &|| {})
}

/// [`load`] with options and progress hooks: `on_files` gets the number of files once they
/// are known, `on_file_done` runs after each file is parsed.
pub fn load_with_progress(
    paths: &[String],
    options: &LoadOptions,
    on_files: &dyn Fn(usize),
    on_file_done: &(dyn Fn() + Sync),
) -> LoadedInputs {
    let mut loaded = LoadedInputs::default();
    let mut files = Vec::new();
    let mut stdin_seen = false;
    for path in paths {
        if path == "-" {
            if !stdin_seen {
                files.push(InputFile::Stdin);
                stdin_seen = true;
            }
            continue;
        }
        let path_buf = PathBuf::from(path);
        match std::fs::metadata(&path_buf) {
            Ok(metadata) if metadata.is_dir() && render::Source::of(&path_buf).is_some() => {
                let source = render::Source::of(&path_buf).expect("asked just above");
                files.push(InputFile::Render(path_buf, source));
            }
            Ok(metadata) if metadata.is_dir() => {
                let before = (files.len(), loaded.errors.len(), loaded.skipped.len());
                walk_folder(&path_buf, &options.exclude, &mut files, &mut loaded);
                // Only a folder where nothing was found at all: an unreadable or skipped entry
                // has been said already, and "no files found" would contradict it.
                if (files.len(), loaded.errors.len(), loaded.skipped.len()) == before {
                    loaded.empty_folders.push(path.clone());
                }
            }
            Ok(_) => files.push(InputFile::Path(path_buf)),
            Err(error) => loaded
                .errors
                .push(InputError::file(path, format!("cannot read: {error}"))),
        }
    }
    on_files(files.len());

    let contents: Vec<(String, FileContents)> = files
        .par_iter()
        .map(|file| {
            let parsed = match file {
                InputFile::Stdin => {
                    let text = files::read_stdin(options.limit).and_then(|bytes| {
                        String::from_utf8(bytes).map_err(files::ReadError::NotUtf8)
                    });
                    let contents = match text {
                        Ok(text) => parse_text(STDIN_NAME, &text, false),
                        Err(error) => FileContents {
                            errors: vec![InputError::file(STDIN_NAME, error.to_string())],
                            ..FileContents::default()
                        },
                    };
                    (STDIN_NAME.to_string(), contents)
                }
                InputFile::Path(path) => {
                    let name = path.display().to_string();
                    let contents = read_file(path, &name, options.limit);
                    (name, contents)
                }
                InputFile::Render(folder, source) => render_folder(folder, *source, options.limit),
            };
            on_file_done();
            parsed
        })
        .collect();
    for (name, mut contents) in contents {
        if contents.objects.is_empty() && contents.errors.is_empty() && contents.skipped.is_empty()
        {
            contents.skipped.push(Skipped {
                reason: if name == STDIN_NAME {
                    EMPTY_STDIN.into()
                } else {
                    "no document in the file (empty, or only comments and `---`)".into()
                },
                file: name.clone(),
                document: None,
                line: None,
            });
        }
        loaded.files.push(name);
        // One long stream is the case that counts: its objects are taken, not copied.
        if loaded.objects.is_empty() {
            loaded.objects = contents.objects;
        } else {
            loaded.objects.extend(contents.objects);
        }
        loaded.errors.extend(contents.errors);
        loaded.skipped.extend(contents.skipped);
        loaded.notes.extend(contents.notes);
    }
    loaded
}

/// Parses a YAML/JSON text into documents for callers other than `load` (the constraint
/// reader): each document's index and value, or the error naming file and document.
pub fn parse_documents(file: &str, text: &str) -> Vec<Result<(usize, usize, Value), InputError>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    split_yaml_documents(text)
        .into_iter()
        .filter_map(|document| match parse_yaml_document(&document) {
            Ok(Some(value)) => Some(Ok((document.index, document.first_line, value))),
            Ok(None) => None,
            Err(error) => Some(Err(document_error(file, &document, &error))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::objects::MAX_LIST_NESTING;
    use super::*;

    fn documents(text: &str) -> Vec<(usize, usize, String)> {
        split_yaml_documents(text)
            .into_iter()
            .map(|document| {
                (
                    document.index,
                    document.first_line,
                    document.text.trim().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn splitting_numbers_documents_like_a_yaml_parser() {
        assert_eq!(
            documents("a: 1\n---\nb: 2\n"),
            vec![(0, 1, "a: 1".into()), (1, 3, "b: 2".into())]
        );
        // A leading marker does not create an empty first document; an empty explicit one counts.
        // The line is the first key's, past comments and blanks; an empty document's is its `---`.
        assert_eq!(
            documents("# header\n---\na: 1\n---\n---\n# b\n\nb: 2"),
            vec![
                (0, 3, "a: 1".into()),
                (1, 4, "".into()),
                (2, 8, "# b\n\nb: 2".into())
            ]
        );
        assert_eq!(
            documents("%YAML 1.2\n---\na: 1\n...\n"),
            vec![(0, 3, "a: 1".into())]
        );
        assert_eq!(
            documents("# c\n\na: 1\n"),
            vec![(0, 3, "# c\n\na: 1".into())]
        );
        assert_eq!(documents("--- {a: 1}\n"), vec![(0, 1, "{a: 1}".into())]);
        assert!(documents("").is_empty());
    }

    #[test]
    fn a_broken_document_does_not_hide_the_next_one() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nkind: [unclosed\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n";
        let contents = parse_text("f.yaml", text, false);
        assert_eq!(contents.objects.len(), 2);
        assert_eq!(contents.objects[1].identity.document, 2);
        assert_eq!(contents.errors.len(), 1);
        let error = &contents.errors[0];
        assert_eq!(error.document, Some(1));
        assert_eq!(error.line, Some(6), "{error}");
        // Every position in the message is a file line, including the parser's context.
        let positions: Vec<usize> = error
            .message
            .split(" at line ")
            .skip(1)
            .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(
            positions.len() >= 2 && positions.iter().all(|&line| line >= 5),
            "{error}"
        );
    }

    #[test]
    fn lists_and_admission_reviews_become_objects() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"n"}},null,{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"b"}}]}
{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","kind":{"group":"batch","version":"v1","kind":"Job"},"name":"j","namespace":"x","operation":"CREATE","object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"}}}}"#;
        let contents = parse_text("f.json", text, true);
        assert!(contents.errors.is_empty(), "{:?}", contents.errors);
        let names: Vec<_> = contents
            .objects
            .iter()
            .map(|o| (o.identity.document, o.identity.item, o.display_name()))
            .collect();
        assert_eq!(
            names,
            vec![
                (0, Some(0), "Pod n/a".to_string()),
                (0, Some(2), "Deployment b".to_string()),
                (1, None, "Job x/j".to_string())
            ]
        );
        assert_eq!(contents.objects[1].group(), "apps");
        assert!(contents.objects[2].admission_request.is_some());
    }

    #[test]
    fn documents_that_are_not_objects_name_the_field() {
        let contents = parse_text(
            "f.yaml",
            "- a\n---\nkind: Pod\n---\napiVersion: v1\nkind: 3\n",
            false,
        );
        let fields: Vec<_> = contents
            .errors
            .iter()
            .map(|e| e.field.clone().unwrap_or_default())
            .collect();
        assert_eq!(fields, vec!["apiVersion", "kind"]);
        // A list is not meant as a Kubernetes object: skipped (and said), not an error.
        assert_eq!(contents.skipped.len(), 1);
        assert_eq!(contents.skipped[0].document, Some(0));
    }

    /// A Job whose `status` nests `depth` levels, as block YAML.
    fn job_with_deep_status(depth: usize) -> String {
        let mut text = String::from(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: deep, namespace: jobs}\nspec:\n  template:\n    metadata:\n      annotations: {sidecar.istio.io/inject: \"true\"}\n      labels: {sidecar.istio.io/inject: \"true\"}\n    spec:\n      restartPolicy: Never\n      containers: [{name: main, image: busybox}]\nstatus:\n",
        );
        for level in 1..depth {
            text.push_str(&" ".repeat(level * 2));
            text.push_str("a:\n");
        }
        text.push_str(&" ".repeat(depth * 2));
        text.push_str("a: 1\n");
        text
    }

    fn only_error(contents: &FileContents) -> &InputError {
        assert!(contents.objects.is_empty(), "{:?}", contents.objects);
        assert_eq!(contents.errors.len(), 1, "{:?}", contents.errors);
        &contents.errors[0]
    }

    #[test]
    fn deep_flow_nesting_is_refused_before_the_parser_with_its_line() {
        for opening in ["[", "{a: "] {
            let text = format!(
                "apiVersion: v1\nkind: ConfigMap\ndata: {}\n",
                opening.repeat(5_000)
            );
            let contents = parse_text("deep.yaml", &text, false);
            let error = only_error(&contents);
            assert_eq!((error.document, error.line), (Some(0), Some(3)), "{error}");
            assert!(error.message.contains("refused before parsing"), "{error}");
            assert!(
                error
                    .to_string()
                    .starts_with("deep.yaml: document 1 (line 3)"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_deep_field_the_module_never_reads_is_read() {
        for depth in [200, 1_000] {
            let contents = parse_text("job.yaml", &job_with_deep_status(depth), false);
            assert!(contents.errors.is_empty(), "{depth}: {:?}", contents.errors);
            assert_eq!(contents.objects.len(), 1);
        }
        let json = serde_json::to_string(
            &serde_yaml_ng::from_str::<Value>(&job_with_deep_status(100)).unwrap(),
        )
        .unwrap();
        let deep_json = json.replace(
            "\"a\":1",
            &format!("\"a\":{}1{}", "{\"a\":".repeat(150), "}".repeat(150)),
        );
        let contents = parse_text("job.json", &deep_json, true);
        assert!(contents.errors.is_empty(), "{:?}", contents.errors);
        assert_eq!(contents.objects.len(), 1);
    }

    #[test]
    fn the_cli_and_the_module_agree_on_deep_fields() {
        let engine = crate::module::engine::Engine::embedded().unwrap();
        let rules = |input: &Value| -> Vec<String> {
            let mut rules: Vec<String> = engine
                .evaluate(input.to_string().as_bytes())
                .unwrap()
                .into_iter()
                .map(|violation| violation.details.rule)
                .collect();
            rules.sort();
            rules
        };
        // A field the module never reads (`status`), and one it reads (an init container's
        // `env`, under the pod spec), each 200 levels deep.
        let deep = |depth: usize| {
            let mut value = serde_json::json!(1);
            for _ in 0..depth {
                value = serde_json::json!({ "a": value });
            }
            value
        };
        let job = |status: Value, env: Value| {
            serde_json::json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "deep", "namespace": "jobs"},
                "spec": {"template": {
                    "metadata": {"labels": {"sidecar.istio.io/inject": "true"}},
                    "spec": {"restartPolicy": "Never", "containers": [
                        {"name": "main", "image": "busybox", "env": env}
                    ]}
                }},
                "status": status,
            })
        };
        for object in [
            job(deep(200), serde_json::json!([])),
            job(serde_json::json!({}), deep(200)),
        ] {
            // The cluster's module gets the object as the API server decoded it: all of it.
            let cluster = rules(&serde_json::json!({
                "review": {"kind": {"group": "batch", "version": "v1", "kind": "Job"},
                           "operation": "CREATE", "name": "deep", "namespace": "jobs",
                           "object": object},
                "parameters": {}
            }));
            assert!(!cluster.is_empty());
            let text = disable_recursion_limit_to_string(&object);
            let contents = parse_text("job.json", &text, true);
            assert!(contents.errors.is_empty(), "{:?}", contents.errors);
            let review = contents.objects[0].review(None);
            let laptop = rules(&serde_json::json!({"review": review, "parameters": {}}));
            assert_eq!(laptop, cluster);
        }
    }

    /// serde_json writes values of any depth (only its reader has a limit).
    fn disable_recursion_limit_to_string(value: &Value) -> String {
        serde_json::to_string(value).unwrap()
    }

    #[test]
    fn infinities_and_nan_are_refused_naming_the_field() {
        for (literal, shown) in [
            (".inf", ".inf"),
            ("-.inf", "-.inf"),
            (".nan", ".nan"),
            (".NaN", ".nan"),
        ] {
            let text = format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  replicas: {literal}\n"
            );
            let contents = parse_text("web.yaml", &text, false);
            let error = only_error(&contents);
            assert_eq!(error.field.as_deref(), Some("spec.replicas"), "{error}");
            assert_eq!(error.line, Some(5), "{error}");
            assert!(error.message.contains(shown), "{error}");
        }
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    ports: [{containerPort: .inf}]\n";
        let error = only_error(&parse_text("p.yaml", text, false)).clone();
        assert_eq!(
            error.field.as_deref(),
            Some("spec.containers[0].ports[0].containerPort"),
            "{error}"
        );
    }

    #[test]
    fn integers_beyond_64_bits_are_refused_not_rounded() {
        for literal in [
            "99999999999999999999",
            "-99999999999999999999",
            "999999999999999999999999999999999999999999",
        ] {
            let yaml = format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec: {{replicas: {literal}}}\n"
            );
            let json = format!(
                "{{\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"spec\": {{\"replicas\": {literal}}}}}"
            );
            for contents in [
                parse_text("w.yaml", &yaml, false),
                parse_text("w.json", &json, true),
            ] {
                let error = only_error(&contents);
                assert_eq!(error.field.as_deref(), Some("spec.replicas"), "{error}");
                assert!(error.message.contains("64-bit"), "{error}");
            }
        }
        // In range, both signs, unchanged.
        let contents = parse_text(
            "w.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\nx: 18446744073709551615\ny: -9223372036854775808\n",
            false,
        );
        assert_eq!(
            contents.objects[0].object.value()["x"],
            serde_json::json!(u64::MAX)
        );
        assert_eq!(
            contents.objects[0].object.value()["y"],
            serde_json::json!(i64::MIN)
        );
    }

    #[test]
    fn duplicate_keys_are_refused_whatever_else_the_document_holds() {
        let plain = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n";
        let with_comment = format!("{plain}# <<: not a merge key\n");
        let with_merge = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: {labels: {x: y}}\n  name: a\n  name: b\n";
        for (text, line) in [(plain, 5), (with_comment.as_str(), 5), (with_merge, 6)] {
            let contents = parse_text("cm.yaml", text, false);
            let error = only_error(&contents);
            assert_eq!(error.line, Some(line), "{text}: {error}");
            assert!(error.to_string().contains("cm.yaml: document 1"), "{error}");
            assert!(error.to_string().contains("duplicate"), "{error}");
            assert!(error.to_string().contains("name"), "{error}");
        }
        let json = "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n \"kind\": \"Secret\"}";
        let error = only_error(&parse_text("cm.json", json, true)).clone();
        assert_eq!(error.field.as_deref(), Some("kind"), "{error}");
        assert_eq!(error.line, Some(2), "{error}");
        assert!(error.message.contains("duplicate key `kind`"), "{error}");
    }

    #[test]
    fn lists_inside_lists_are_expanded_and_bounded() {
        let job =
            serde_json::json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}});
        let wrap = |kind: &str, items: Vec<Value>| serde_json::json!({"apiVersion": "v1", "kind": kind, "items": items});
        let config_map =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let nested = wrap("List", vec![config_map, wrap("JobList", vec![job.clone()])]);
        let contents = parse_text("l.json", &nested.to_string(), true);
        assert!(contents.errors.is_empty(), "{:?}", contents.errors);
        let job_object = &contents.objects[1];
        assert_eq!(
            (
                job_object.identity.item,
                job_object.identity.inner_items.clone()
            ),
            (Some(1), vec![0])
        );
        assert_eq!(job_object.location(), "document 1, item 2, item 1");

        let mut deep = job;
        for _ in 0..=MAX_LIST_NESTING {
            deep = wrap("List", vec![deep]);
        }
        let contents = parse_text("l.json", &deep.to_string(), true);
        let error = only_error(&contents);
        assert_eq!(error.item, Some(0));
        assert_eq!(error.inner_items.len(), MAX_LIST_NESTING - 1);
        assert!(
            error
                .to_string()
                .starts_with("l.json: document 1, item 1, item 1, item 1 (line 1): field `items`"),
            "{error}"
        );
    }

    #[test]
    fn merge_keys_are_resolved() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: {name: merged}\n";
        let contents = parse_text("f.yaml", text, false);
        assert_eq!(contents.objects[0].identity.name, "merged");
    }
}
