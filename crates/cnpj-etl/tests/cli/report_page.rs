//! The build report's HTML page in a real browser: the sample dump built with `--report`, the page
//! opened in headless Chromium (Debian's `chromium`; `scripts/setup-test-deps` installs it), and
//! every chart measured as drawn by the page's own script; and a page that cannot be written fails
//! the build.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{build_in, etl, sample_dump, text};

/// The page as Chromium has it once loaded (`--dump-dom`), scripts run.
fn chromium_dom(page: &Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium runs (Debian: apt-get install chromium; scripts/setup-test-deps installs it)");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "chromium: {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What the page's script measured: one object per chart drawn.
fn measurements(dom: &str) -> Vec<Value> {
    let at = dom.find("id=\"chart-measurements\"").expect("the measurements' element");
    let start = at + dom[at..].find('>').unwrap() + 1;
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end].replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    assert!(!json.is_empty(), "the page's script did not run");
    serde_json::from_str::<Value>(&json).unwrap().as_array().unwrap().clone()
}

/// Values of a list of the report that are above zero.
fn above_zero(values: impl IntoIterator<Item = f64>) -> u64 {
    values.into_iter().filter(|v| *v > 0.0).count() as u64
}

#[test]
fn the_report_page_draws_every_chart_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let built = build_in(&sample_dump(), dir.path(), &[]);
    check_page(&built.report, &dir.path().join("report.html"));
}

#[test]
fn the_report_page_draws_the_month_over_month_charts() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    for args in [
        vec!["synth", "--quiet", "--scale", "0.0002", "--out", &path("m1")],
        vec!["synth", "--quiet", "--evolve-from", &path("m1"), "--out", &path("m2")],
        vec!["build", "--quiet", "--input", &path("m1"), "--db", &path("m1.duckdb")],
    ] {
        let out = super::etl(&args);
        assert!(out.status.success(), "{args:?}: {}", super::text(&out));
    }
    let built = build_in(&dir.path().join("m2"), dir.path(), &["--previous", &path("m1.duckdb")]);
    assert!(!built.report["month_over_month"].is_null());
    check_page(&built.report, &dir.path().join("report.html"));
}

/// Opens `page` in Chromium and checks every chart of `report` is drawn.
fn check_page(report: &Value, page: &Path) {
    let dom = chromium_dom(page);

    // Each chart drawn, its title, and the bars it must have: one per value above zero.
    let numbers = |list: &str, key: &str| -> Vec<f64> {
        report[list].as_array().unwrap().iter().map(|v| v[key].as_f64().unwrap()).collect()
    };
    let mut expected = vec![("chart-rows", "Rows per table", above_zero(numbers("tables", "rows")))];
    let mom = &report["month_over_month"];
    if mom.is_null() {
        for (id, title) in [("chart-events", "Changes by event"), ("chart-states", "Changes by state")] {
            let note = format!(" id=\"{id}\">\n<h2>{title}</h2>\n<p>No previous month to compare with");
            assert!(dom.contains(&note), "{id} says why it is not drawn:\n{dom}");
        }
    } else {
        let previous = mom["tables"].as_array().unwrap().iter().map(|t| t["previous"].as_f64().unwrap());
        expected[0].2 += above_zero(previous);
        for (id, title, list) in
            [("chart-events", "Changes by event", "events"), ("chart-states", "Changes by state", "states")]
        {
            let counts = mom[list].as_array().unwrap().iter().map(|c| c["count"].as_f64().unwrap());
            expected.push((id, title, above_zero(counts)));
        }
    }
    assert!(report["rows_rejected"].as_u64().unwrap() > 0, "the sample dump plants rejects");
    expected.push(("chart-rejects", "Rejects by reason", above_zero(numbers("rejects_by_reason", "count"))));
    let seconds = report["seconds"].as_object().unwrap().values().map(|s| s.as_f64().unwrap());
    expected.push(("chart-time", "Time per stage", above_zero(seconds)));

    let measured = measurements(&dom);
    let ids: Vec<&str> = measured.iter().map(|m| m["chart"].as_str().unwrap()).collect();
    assert_eq!(ids, expected.iter().map(|e| e.0).collect::<Vec<_>>(), "{measured:?}");
    for ((id, title, bars), m) in expected.iter().zip(&measured) {
        assert_eq!(m["heading"], *title, "{id}: its visible title");
        assert_eq!(m["title"], *title, "{id}: its SVG's <title>");
        assert!(*bars > 0, "{id}: nothing to draw in {report}");
        assert_eq!(m["bars"].as_u64().unwrap(), *bars, "{id}: {m}");
        // Drawn, not just written: the bars cover pixels, the chart has a size, every bar is
        // labelled with its value and every category named.
        assert!(m["bar_area"].as_u64().unwrap() > 0, "{id}: {m}");
        assert!(m["width"].as_u64().unwrap() > 300 && m["height"].as_u64().unwrap() > 50, "{id}: {m}");
        // (Last month's and this month's bars share their table's name.)
        let grouped = *id == "chart-rows" && !report["month_over_month"].is_null();
        let names = if grouped { report["tables"].as_array().unwrap().len() as u64 } else { *bars };
        assert!(m["texts"].as_u64().unwrap() >= *bars + names, "{id}: {m}");
    }
}

/// A page that cannot be written (its name is taken by a folder) fails the build before any work,
/// and leaves the target as it was.
#[test]
fn a_report_page_that_cannot_be_written_fails_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    std::fs::write(&db, b"the served dataset").unwrap();
    std::fs::create_dir(dir.path().join("r.html")).unwrap();
    let report = dir.path().join("r.json");
    let out = etl(&[
        "build",
        "--quiet",
        "--input",
        sample_dump().to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("r.html: is a folder, not a file"), "{}", text(&out));
    assert_eq!(std::fs::read(&db).unwrap(), b"the served dataset");
    assert!(!report.exists());
}
