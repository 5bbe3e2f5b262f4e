//! `meshlife explain`: the timeline drawing and its JSON, from the CLI as users run it.

use serde_json::Value;

use crate::cli_support;

/// `meshlife ARGS` from the repository's root, as (exit code, stdout, stderr).
fn meshlife(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let outcome = cli_support::run_in(root, args, stdin);
    (outcome.code, outcome.stdout, outcome.stderr)
}

#[test]
fn the_drawing_fits_100_columns_in_plain_ascii_when_not_a_terminal() {
    let (code, stdout, stderr) = meshlife(&["explain", "examples/"], None);
    assert_eq!(code, 0, "{stderr}");
    for line in stdout.lines() {
        assert!(
            line.chars().count() <= 100,
            "wider than 100 columns: {line}"
        );
        assert!(line.is_ascii(), "not plain ASCII: {line}");
    }
    assert!(!stdout.contains('\x1b'));
    // Every pod spec of the examples is drawn, each with both phases.
    let (_, json, _) = meshlife(&["explain", "examples/", "-o", "json"], None);
    let explained: Vec<Value> = serde_json::from_str(&json).unwrap();
    assert!(explained.len() > 40, "{}", explained.len());
    assert_eq!(stdout.matches("\nStartup\n").count(), explained.len());
    assert_eq!(stdout.matches("SIGKILL at ").count(), explained.len());
}

#[test]
fn a_classic_istio_pod_without_hold_shows_the_startup_race_and_the_drain() {
    let (code, stdout, stderr) =
        meshlife(&["explain", "examples/istio/deployment-no-hold.yaml"], None);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("istio, classic sidecar (predicted: the injector adds the proxy)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("-> the app's outbound calls at startup: refused 1s-3s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("istio-proxy drains inbound for terminationDrainDuration 5s"),
        "{stdout}"
    );
    assert!(stdout.contains("^ SIGKILL at 30s") || stdout.contains("SIGKILL at 30s ^"));
    // The assumption flags move the figures they name.
    let (_, slower, _) = meshlife(
        &[
            "explain",
            "examples/istio/deployment-no-hold.yaml",
            "--proxy-ready",
            "5s",
        ],
        None,
    );
    assert!(slower.contains("refused 1s-6s"), "{slower}");
}

#[test]
fn json_gives_every_event_its_source_and_every_request_its_fate() {
    let (code, json, stderr) = meshlife(&["explain", "examples/", "-o", "json"], None);
    assert_eq!(code, 0, "{stderr}");
    let explained: Vec<Value> = serde_json::from_str(&json).unwrap();
    for one in &explained {
        let timeline = &one["timeline"];
        for event in timeline["events"].as_array().unwrap() {
            assert!(event["source"]["kind"].is_string(), "{event}");
            // Runs of spaces inside a sentence: a broken line continuation in the source.
            assert!(!event["what"].as_str().unwrap().contains("  "), "{event}");
        }
        for fate in timeline["fates"].as_array().unwrap() {
            assert!(!fate["why"].as_str().unwrap().contains("  "), "{fate}");
        }
        if let Some(why) = timeline["completion"]["why"].as_str() {
            assert!(!why.contains("  "), "{why}");
        }
        let fates: Vec<&str> = timeline["fates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|fate| fate["request"].as_str().unwrap())
            .collect();
        // A Job that serves nothing (no port a Service selects) gets no requests from outside:
        // no endpoint removal, no new requests, no streams.
        let batch = !timeline["completion"].is_null();
        if timeline["mesh"].is_string() && batch {
            assert_eq!(
                fates,
                ["startup-outbound", "in-flight-at-sigterm"],
                "{}",
                one["object"]
            );
            assert!(
                !timeline["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|event| event["kind"] == "endpoint-removed"),
                "{}",
                one["object"]
            );
        } else if timeline["mesh"].is_string() {
            assert_eq!(
                fates,
                [
                    "startup-outbound",
                    "in-flight-at-sigterm",
                    "new-during-drain",
                    "long-lived-stream"
                ],
                "{}",
                one["object"]
            );
        }
        assert!(one["file"].as_str().unwrap().starts_with("examples/"));
    }
}

#[test]
fn an_unreadable_input_is_an_error_naming_it_and_the_rest_is_still_drawn() {
    let (code, stdout, stderr) = meshlife(
        &["explain", "-", "examples/istio/deployment-no-hold.yaml"],
        Some("kind: [unclosed\n"),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("<stdin>"), "{stderr}");
    assert!(stdout.contains("Deployment shop/checkout"), "{stdout}");
    let (code, _, stderr) = meshlife(&["explain", "/nonexistent.yaml"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("/nonexistent.yaml"), "{stderr}");
    let (code, _, stderr) = meshlife(
        &[
            "explain",
            "examples/istio/deployment-no-hold.yaml",
            "--proxy-ready",
            "soon",
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("--proxy-ready"), "{stderr}");
}

/// The picture as pixels: resvg renders the SVG (text aside: no fonts are loaded).
fn render(svg: &str) -> resvg::tiny_skia::Pixmap {
    let tree = resvg::usvg::Tree::from_str(svg, &resvg::usvg::Options::default())
        .unwrap_or_else(|error| panic!("the SVG does not parse: {error}\n{svg}"));
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
}

/// How many pixels have exactly this colour (`0xRRGGBB`), in columns `x_range`.
fn pixels_of(pixmap: &resvg::tiny_skia::Pixmap, rgb: u32, x_range: std::ops::Range<u32>) -> usize {
    let [_, r, g, b] = rgb.to_be_bytes();
    let width = pixmap.width();
    pixmap
        .pixels()
        .iter()
        .enumerate()
        .filter(|(index, pixel)| {
            let x = *index as u32 % width;
            x_range.contains(&x) && (pixel.red(), pixel.green(), pixel.blue()) == (r, g, b)
        })
        .count()
}

const RUNNING: u32 = 0x2e86de;
const PRESTOP: u32 = 0xf6b93b;
const STARTING: u32 = 0xc8d6e5;
const SIGKILL: u32 = 0xb33939;

#[test]
fn the_svg_parses_and_renders_the_bars_it_describes() {
    let svg_of = |file: &str| {
        let (code, svg, stderr) = meshlife(&["explain", file, "-o", "svg"], None);
        assert_eq!(code, 0, "{file}: {stderr}");
        svg
    };
    let no_hold = render(&svg_of("examples/istio/deployment-no-hold.yaml"));
    assert_eq!(no_hold.width(), 960);
    // Bars: the proxy and the app start (not ready yet) and run; no preStop anywhere.
    assert!(pixels_of(&no_hold, RUNNING, 240..940) > 1_000);
    assert!(pixels_of(&no_hold, STARTING, 240..940) > 500);
    assert_eq!(pixels_of(&no_hold, PRESTOP, 240..940), 0);
    // The SIGKILL line at the grace period, the right end of the shutdown axis (30 s).
    assert!(pixels_of(&no_hold, SIGKILL, 935..945) > 20);
    let outlasts = render(&svg_of(
        "examples/istio/deployment-prestop-sleep-outlasts-drain.yaml",
    ));
    // nginx's 10 s preStop, a third of the 30 s axis: about 233 pixels wide, 14 high.
    let prestop = pixels_of(&outlasts, PRESTOP, 240..940);
    assert!((200 * 14..260 * 14).contains(&prestop), "{prestop}");

    // Every example's pictures parse and render.
    let out_dir = tempfile::tempdir().unwrap();
    let (code, listed, stderr) = meshlife(
        &[
            "explain",
            "examples/",
            "-o",
            "svg",
            "--out-dir",
            out_dir.path().to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    let files: Vec<&str> = listed.lines().collect();
    assert!(files.len() > 40, "{listed}");
    for file in files {
        let pixmap = render(&std::fs::read_to_string(file).unwrap());
        assert!(
            pixels_of(&pixmap, RUNNING, 240..940) > 0,
            "{file}: no running bar"
        );
    }
    // Several pod specs and no folder: an error that says what to pass.
    let (code, _, stderr) = meshlife(&["explain", "examples/", "-o", "svg"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("--out-dir"), "{stderr}");
}

/// `meshlife explain FILE`, which must succeed.
fn drawing_of(file: &str) -> String {
    let (code, stdout, stderr) = meshlife(&["explain", file], None);
    assert_eq!(code, 0, "{stderr}");
    stdout
}

#[test]
fn each_finding_is_marked_where_it_happens_and_listed_with_its_place() {
    let stdout = drawing_of("examples/istio/deployment-drain-exceeds-grace.yaml");
    // The mark ends the event's last line (its source wraps onto a second one).
    let lines: Vec<&str> = stdout.lines().collect();
    let marked: Vec<usize> = (0..lines.len())
        .filter(|&index| lines[index].contains("<- ML"))
        .collect();
    assert_eq!(marked.len(), 1, "{stdout}");
    assert!(lines[marked[0]].ends_with("<- ML401"), "{stdout}");
    assert!(
        lines[marked[0] - 1].contains("30s  istio-proxy killed at the grace period"),
        "{stdout}"
    );
    assert!(
        stdout.contains("on the timeline: shutdown 30s: istio-proxy killed at the grace period"),
        "{stdout}"
    );
    // The JSON gives each finding its anchor: an index into the events.
    let (_, json, _) = meshlife(
        &[
            "explain",
            "examples/istio/deployment-drain-exceeds-grace.yaml",
            "-o",
            "json",
        ],
        None,
    );
    let explained: Vec<Value> = serde_json::from_str(&json).unwrap();
    let finding = &explained[0]["findings"][0];
    assert_eq!(finding["rule"], "ML401");
    assert_eq!(finding["anchor"]["at"], "event", "{finding}");
    let index = finding["anchor"]["index"].as_u64().unwrap() as usize;
    assert_eq!(
        explained[0]["timeline"]["events"][index]["kind"],
        "drain-end"
    );
}

#[test]
fn check_explain_adds_the_timeline_of_each_object_with_findings() {
    let (code, stdout, stderr) = meshlife(&["check", "--explain", "examples/istio/"], None);
    assert_eq!(code, 1, "{stderr}");
    let (report, timelines) = stdout
        .split_once("\nTimelines of the objects with findings")
        .unwrap_or_else(|| panic!("no timelines: {stdout}"));
    assert!(report.contains("ML401 drain-exceeds-grace"), "{report}");
    let (_, json, _) = meshlife(&["explain", "-o", "json", "examples/istio/"], None);
    let explained: Vec<Value> = serde_json::from_str(&json).unwrap();
    let with_findings: Vec<&Value> = explained
        .iter()
        .filter(|one| !one["findings"].as_array().unwrap().is_empty())
        .collect();
    assert!(with_findings.len() > 10, "{}", with_findings.len());
    assert_eq!(
        timelines.matches("\nStartup\n").count(),
        with_findings.len()
    );
    // Every finding of the report is placed on a timeline, by rule id.
    let placed = timelines.matches("\n  - ML").count();
    let reported = with_findings
        .iter()
        .map(|one| one["findings"].as_array().unwrap().len())
        .sum::<usize>();
    assert_eq!(placed, reported, "{timelines}");
    // And each finding of the report says where it is drawn.
    assert_eq!(
        report.matches("\n      timeline: ").count(),
        reported,
        "{report}"
    );
    assert!(
        report.contains(
            "timeline: shutdown 30s: istio-proxy killed at the grace period before its drain \
             ends (drawn below)"
        ),
        "{report}"
    );
    for line in timelines.lines() {
        assert!(
            line.chars().count() <= 100,
            "wider than 100 columns: {line}"
        );
    }
    // Other formats have their own explain output; --explain says so.
    let (code, _, stderr) = meshlife(&["check", "--explain", "-o", "json", "examples/"], None);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("meshlife explain -o json|svg|html"),
        "{stderr}"
    );
}

#[test]
fn the_html_page_holds_every_workload_beside_its_findings_and_loads_nothing() {
    let (code, page, stderr) = meshlife(&["explain", "-o", "html", "examples/"], None);
    assert_eq!(code, 0, "{stderr}");
    let (_, json, _) = meshlife(&["explain", "-o", "json", "examples/"], None);
    let explained: Vec<Value> = serde_json::from_str(&json).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("Content-Security-Policy\" content=\"default-src 'none'"));
    for forbidden in ["<script", " src=", "href=\"http", "url(", "@import"] {
        assert!(!page.contains(forbidden), "the page holds {forbidden}");
    }
    let sections: Vec<&str> = page.split("<section class=\"workload\"").skip(1).collect();
    assert_eq!(sections.len(), explained.len());
    for (section, one) in sections.iter().zip(&explained) {
        let object = one["object"].as_str().unwrap();
        assert!(section.contains(&format!("<h2>{object}</h2>")), "{object}");
        let findings = one["findings"].as_array().unwrap();
        assert_eq!(
            section.matches("<li class=").count(),
            findings.len(),
            "{object}"
        );
        for finding in findings {
            let rule = finding["rule"].as_str().unwrap();
            assert!(
                section.contains(&format!("<span class=\"rule\">{rule} ")),
                "{object}"
            );
        }
        assert_eq!(
            section.matches("On the timeline: ").count(),
            findings.len(),
            "{object}"
        );
        // The timeline beside them is a whole SVG that renders.
        let svg_start = section.find("<svg").unwrap();
        let svg_end = section.find("</svg>").unwrap() + "</svg>".len();
        let pixmap = render(&section[svg_start..svg_end]);
        assert!(pixmap.width() >= 900, "{object}");
    }
}

#[test]
fn a_pod_stuck_at_its_proxy_init_container_never_starts_its_apps() {
    // ML104's case: the proxy is a regular init container, which never exits.
    let file = "examples/istio/pod-native-proxy-restartpolicy-dropped.yaml";
    let (code, json, stderr) = meshlife(&["explain", "-o", "json", file], None);
    assert_eq!(code, 0, "{stderr}");
    let explained: Vec<Value> = serde_json::from_str(&json).unwrap();
    let timeline = &explained[0]["timeline"];
    let roles: Vec<&str> = timeline["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lane| lane["role"].as_str().unwrap())
        .collect();
    assert!(!roles.contains(&"app"), "{roles:?}");
    assert!(roles.contains(&"proxy"), "{roles:?}");
    for fate in timeline["fates"].as_array().unwrap() {
        assert_eq!(fate["outcome"], "refused", "{fate}");
    }
    assert!(
        timeline["fates"][0]["why"]
            .as_str()
            .unwrap()
            .contains("the apps never start"),
        "{timeline}"
    );
    assert_eq!(explained[0]["findings"][0]["rule"], "ML104");
}

#[test]
fn the_gantt_marks_every_listed_event_with_its_key_in_time_order() {
    let stdout = drawing_of("examples/istio/deployment-drain-exceeds-grace.yaml");
    let lines: Vec<&str> = stdout.lines().collect();
    let rows: Vec<usize> = (0..lines.len())
        .filter(|&index| lines[index].starts_with("  events "))
        .collect();
    assert_eq!(
        rows.len(),
        2,
        "a row for startup and one for shutdown: {stdout}"
    );
    for row in rows {
        let marked: String = lines[row]["  events ".len()..]
            .chars()
            .filter(|character| !character.is_whitespace())
            .collect();
        // The list under the row: one line per event, starting with its key.
        let listed: String = lines[row + 1..]
            .iter()
            .take_while(|line| !line.starts_with("  -> "))
            .filter_map(|line| {
                let mut characters = line.chars().skip(2);
                let key = characters.next()?;
                (key.is_ascii_alphabetic() && characters.next() == Some(' ')).then_some(key)
            })
            .collect();
        assert!(marked.len() >= 5, "{marked}");
        assert_eq!(marked, listed, "{stdout}");
    }
}

#[test]
fn check_explain_draws_each_finding_under_the_constraint_that_gave_it() {
    // Under native sidecars the Job completes (no finding); under the defaults it never does.
    // The example's own classic opt-out is taken off, so that the constraints decide.
    let job = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/istio/job-classic-no-exit.yaml"
    ))
    .unwrap();
    let (code, stdout, stderr) = meshlife(
        &[
            "check",
            "--explain",
            "--constraint",
            "examples/suites/constraints/istio-native-sidecars.yaml",
            "--constraint",
            "examples/suites/constraints/default.yaml",
            "-",
        ],
        Some(&cli_support::without_classic_opt_out(&job)),
    );
    assert_eq!(code, 1, "{stderr}");
    let (_, timelines) = stdout
        .split_once("\nTimelines of the objects with findings")
        .unwrap();
    assert_eq!(timelines.matches("\nStartup\n").count(), 1, "{timelines}");
    // The header wraps where the object's name ends; its words are what counts.
    let words = timelines.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("under constraint mesh-lifecycle"),
        "{timelines}"
    );
    assert!(
        timelines.contains("- ML301 job-sidecar-never-exits (error), on the timeline: when the work is done: never completes"),
        "{timelines}"
    );
}

#[test]
fn a_grace_period_near_the_largest_integer_is_drawn_in_every_format() {
    let pod = "apiVersion: v1
kind: Pod
metadata:
  name: forever
  labels: {sidecar.istio.io/inject: \"true\"}
spec:
  terminationGracePeriodSeconds: 20000000000000000
  containers:
  - name: app
    image: app
";
    for format in ["text", "svg", "html", "json"] {
        let (code, stdout, stderr) = meshlife(&["explain", "-", "-o", format], Some(pod));
        assert_eq!(code, 0, "-o {format}: {stderr}");
        assert!(!stdout.is_empty(), "-o {format}");
    }
}
