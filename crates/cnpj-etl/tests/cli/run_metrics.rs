//! `run --metrics-file` month after month against the loopback RFB server: the file after a
//! success, nothing new, a month the guard refuses and a month that fails (the last success time
//! carried over), read back here and, when `promtool` is installed, linted by
//! `promtool check metrics`; a file that cannot be written refuses the run before it starts.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::runs::{EXIT_NOTHING_NEW, EXIT_REFUSED, Runner, assert_code, broken_next_month, json};
use crate::{Rfb, etl, root, sample_dump, text};

/// The samples of a metrics file, by series (`name{labels}`), each of a gauge declared with its
/// HELP and TYPE lines.
fn samples(path: &Path) -> BTreeMap<String, f64> {
    let file = std::fs::read_to_string(path).unwrap();
    let mut found = BTreeMap::new();
    for line in file.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("a sample: {line:?}\n{file}"));
        let name = series.split('{').next().unwrap();
        assert!(name.starts_with("cnpj_etl_"), "{line}");
        for declared in [format!("# HELP {name} "), format!("# TYPE {name} gauge\n")] {
            assert!(file.contains(&declared), "{declared:?} missing:\n{file}");
        }
        found.insert(series.to_owned(), value.parse().unwrap_or_else(|e| panic!("{line}: {e}")));
    }
    promtool_lint(path, &file);
    found
}

/// `promtool check metrics` on the file, when promtool is installed (the `deploy` tests require it).
fn promtool_lint(path: &Path, file: &str) {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(path).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output();
    if let Ok(out) = child {
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), text(&out));
        assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics: {said}\n{file}");
    }
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// One run with `--metrics-file`: its exit code checked, and the file's samples, whose run time
/// must be the run's.
fn run(runner: &Runner, metrics: &Path, code: i32) -> BTreeMap<String, f64> {
    let started = now();
    let out = runner.run(&["--metrics-file", metrics.to_str().unwrap()]);
    assert_code(&out, code);
    let found = samples(metrics);
    let ended = found["cnpj_etl_last_run_timestamp_seconds"];
    assert!((started..=now()).contains(&ended), "{found:?}");
    let took = found["cnpj_etl_last_run_duration_seconds"];
    assert!(took > 0.0 && took <= ended - started, "{found:?}");
    assert_eq!(found["cnpj_etl_last_run_exit_code"], f64::from(code), "{found:?}");
    assert_eq!(found["cnpj_etl_last_run_guard_refused"], f64::from(u8::from(code == EXIT_REFUSED)), "{found:?}");
    found
}

#[test]
fn run_writes_its_metrics_file_whatever_its_outcome() {
    let rfb = Rfb::start();
    rfb.publish("2026-09", &sample_dump());
    let runner = Runner::new(&rfb);
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("cnpj_etl.prom");

    let built = run(&runner, &metrics, 0);
    let success = built["cnpj_etl_last_success_timestamp_seconds"];
    assert_eq!(success, built["cnpj_etl_last_run_timestamp_seconds"]);
    let report = json(&runner.month("2026-09").join("build-report.json"));
    let info = format!("cnpj_etl_dataset_info{{month=\"2026-09\",build_id=\"{}\"}}", runner.build_id());
    let dataset = [
        (info.as_str(), 1.0),
        ("cnpj_etl_dataset_month", 202609.0),
        ("cnpj_etl_dataset_rows_loaded", report["rows_loaded"].as_f64().unwrap()),
        ("cnpj_etl_dataset_rows_rejected", report["rows_rejected"].as_f64().unwrap()),
    ];
    for (series, value) in dataset {
        assert_eq!(built.get(series), Some(&value), "{series}: {built:?}");
    }
    assert!(dataset[3].1 > 0.0, "the sample dump has rejects");
    names_used_in_deploy_are_written(&built);
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files, ["cnpj_etl.prom"], "no temporary file left");

    // Nothing new, a month the guard refuses, a month that fails: the last success stays, and so
    // does the dataset served.
    let unchanged = |found: &BTreeMap<String, f64>| {
        assert_eq!(found["cnpj_etl_last_success_timestamp_seconds"], success, "{found:?}");
        assert!(found["cnpj_etl_last_run_timestamp_seconds"] > success, "{found:?}");
        for (series, value) in dataset {
            assert_eq!(found.get(series), Some(&value), "{series}: {found:?}");
        }
    };
    unchanged(&run(&runner, &metrics, EXIT_NOTHING_NEW));
    rfb.publish("2026-10", &root().join("data/sample-dump-next"));
    unchanged(&run(&runner, &metrics, EXIT_REFUSED));
    let broken = tempfile::tempdir().unwrap();
    rfb.publish("2026-11", &broken_next_month(broken.path()));
    unchanged(&run(&runner, &metrics, 1));
}

/// The `cnpj_etl_*` names of the alert rules, their tests and the dashboard are names the file
/// holds (after a success, every one).
fn names_used_in_deploy_are_written(written: &BTreeMap<String, f64>) {
    let name = regex::Regex::new(r"cnpj_etl_[a-z_]+").unwrap();
    for file in ["rules.yml", "rules_test.yml", "dashboard.json"] {
        let text = std::fs::read_to_string(root().join("deploy/prometheus").join(file)).unwrap();
        for used in name.find_iter(&text).map(|m| m.as_str()) {
            let known = written.keys().any(|series| series.split('{').next() == Some(used));
            assert!(known, "deploy/prometheus/{file} uses {used}, which the metrics file does not hold");
        }
    }
}

#[test]
fn run_refuses_a_metrics_file_it_cannot_write_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (work, db) = (dir.path().join("work"), dir.path().join("registry.duckdb"));
    let metrics = dir.path().join("missing/cnpj_etl.prom");
    let args = ["run", "--work", work.to_str().unwrap(), "--db", db.to_str().unwrap()];
    let out =
        etl(&[&args[..], &["--base-url", "http://127.0.0.1:9", "--metrics-file", metrics.to_str().unwrap()]].concat());
    assert_code(&out, 2);
    assert!(text(&out).contains("--metrics-file") && text(&out).contains("does not exist"), "{}", text(&out));
    assert!(!work.exists(), "nothing done");
}
