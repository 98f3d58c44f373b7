//! `run` month after month against a loopback RFB server (`Rfb`): the build swapped in and
//! published into Postgres, exit code 4 when nothing new was published, each month's report kept,
//! and months that fail or that the guard refuses leaving the served dataset and its report alone.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::{Rfb, copy_dir, etl, first_member, pg_database, query, root, sample_dump, text, write_zip};

/// The exit codes of `cnpj-etl` a scheduler acts on (`deploy/cnpj-etl-run.service` too).
pub(crate) const EXIT_REFUSED: i32 = 3;
pub(crate) const EXIT_NOTHING_NEW: i32 = 4;

/// A work folder and a dataset, run against one RFB server.
pub(crate) struct Runner {
    _dir: tempfile::TempDir,
    base: String,
    pub(crate) work: PathBuf,
    pub(crate) db: PathBuf,
}

impl Runner {
    pub(crate) fn new(rfb: &Rfb) -> Runner {
        let dir = tempfile::tempdir().unwrap();
        let (work, db) = (dir.path().join("work"), dir.path().join("registry.duckdb"));
        Runner { _dir: dir, base: rfb.base.clone(), work, db }
    }

    /// `run --quiet` of the latest month with `extra` arguments.
    pub(crate) fn run(&self, extra: &[&str]) -> Output {
        let mut args = vec!["run", "--quiet", "--legacy", "--base-url", &self.base, "--parallel", "2"];
        args.extend(["--work", self.work.to_str().unwrap(), "--db", self.db.to_str().unwrap()]);
        args.extend(extra);
        etl(&args)
    }

    /// A month's folder in the work folder.
    pub(crate) fn month(&self, month: &str) -> PathBuf {
        self.work.join(month)
    }

    /// The bytes of the served dataset (the DuckDB file and its serving files).
    fn dataset(&self) -> Vec<Vec<u8>> {
        ["", ".lookup", ".search"]
            .iter()
            .map(|ext| std::fs::read(format!("{}{ext}", self.db.display())).unwrap())
            .collect()
    }

    pub(crate) fn build_id(&self) -> String {
        query(&self.db, "SELECT value FROM metadata WHERE key = 'build_id'").remove(0).remove(0)
    }
}

/// The report files of a month's folder (`build-report*`), by name, with their bytes.
fn reports(month_dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut found: Vec<(String, Vec<u8>)> = std::fs::read_dir(month_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("build-report"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    found.sort();
    found
}

fn names(reports: &[(String, Vec<u8>)]) -> Vec<&str> {
    reports.iter().map(|(name, _)| name.as_str()).collect()
}

pub(crate) fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub(crate) fn assert_code(out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{}", text(out));
}

/// The sample dump's next month with one lookup table emptied: a month the checks refuse.
pub(crate) fn broken_next_month(dir: &Path) -> PathBuf {
    let month = dir.join("broken-2026-10");
    copy_dir(&root().join("data/sample-dump-next"), &month);
    let (member, _) = first_member(&month.join("Cnaes.zip"));
    write_zip(&month.join("Cnaes.zip"), &member, b"");
    month
}

/// Without Postgres: a second run of the month exits 4 and touches nothing (even once its zips
/// are deleted), `--force` builds it again, and a month that fails leaves the served dataset and
/// its report as they were, and no report of its own.
#[test]
fn run_says_nothing_new_builds_again_when_forced_and_a_failed_month_changes_nothing() {
    let rfb = Rfb::start();
    rfb.publish("2026-09", &sample_dump());
    let runner = Runner::new(&rfb);
    assert_code(&runner.run(&[]), 0);
    let september = runner.month("2026-09");
    let served = (runner.dataset(), reports(&september));
    assert_eq!(names(&served.1), ["build-report.html", "build-report.json"]);
    let gets = rfb.gets();

    let again = etl(&[
        "run",
        "--legacy",
        "--base-url",
        &rfb.base,
        "--work",
        runner.work.to_str().unwrap(),
        "--db",
        runner.db.to_str().unwrap(),
    ]);
    assert_code(&again, EXIT_NOTHING_NEW);
    assert!(text(&again).contains("nothing new"), "{}", text(&again));
    assert_eq!((runner.dataset(), reports(&september)), served);
    assert_eq!(rfb.gets(), gets, "nothing downloaded");
    // Zips deleted after their build are not news.
    for entry in std::fs::read_dir(&september).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "zip") {
            std::fs::remove_file(path).unwrap();
        }
    }
    assert_code(&runner.run(&[]), EXIT_NOTHING_NEW);
    assert_eq!((runner.dataset(), reports(&september)), served);

    let before = runner.build_id();
    assert_code(&runner.run(&["--force"]), 0);
    assert_ne!(runner.build_id(), before, "built again");
    let rebuilt = reports(&september);
    assert_eq!(names(&rebuilt), ["build-report.html", "build-report.json"]);
    assert_ne!(rebuilt, served.1, "the new build's report");
    let served = (runner.dataset(), rebuilt);

    let dir = tempfile::tempdir().unwrap();
    rfb.publish("2026-10", &broken_next_month(dir.path()));
    let failed = runner.run(&[]);
    assert_code(&failed, 1);
    assert!(text(&failed).contains("Cnaes"), "{}", text(&failed));
    assert_eq!((runner.dataset(), reports(&september)), served, "the served month and its report stay");
    assert_eq!(reports(&runner.month("2026-10")), [], "a failed build leaves no report");
}

/// With Postgres: a run publishes what `--db` holds when the schema serves another build (a run
/// whose publication did not happen), then says nothing new; the next month, refused by the
/// guard, leaves the dataset, the schema and the served report alone and keeps its refused
/// report; accepted, it is built and published, and both months' reports are kept.
#[test]
fn run_postgres_publishes_and_keeps_every_months_report() {
    let url = pg_database("run");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut published = |key: &str| -> String {
        let sql = format!("SELECT value FROM cnpj.metadata WHERE key = '{key}'");
        client.query_one(&sql, &[]).unwrap().get(0)
    };
    let rfb = Rfb::start();
    rfb.publish("2026-09", &sample_dump());
    let runner = Runner::new(&rfb);
    let pg = ["--postgres", url.as_str()];

    // The DuckDB file first, as if the publication had failed: the next run publishes it as is.
    assert_code(&runner.run(&[]), 0);
    let september = runner.month("2026-09");
    let served = (runner.dataset(), reports(&september));
    let gets = rfb.gets();
    assert_code(&runner.run(&pg), 0);
    assert_eq!((runner.dataset(), reports(&september)), served, "published, not built again");
    assert_eq!(published("build_id"), runner.build_id());
    assert_eq!(published("source_month"), "2026-09");
    // What the API reads: the record through the store, from the schema.
    let record = etl(&["show", "--postgres", &url, "11222333000181"]);
    assert!(String::from_utf8_lossy(&record.stdout).contains("EMPRESA EXEMPLO LTDA"), "{}", text(&record));

    let publication = published("published_at");
    assert_code(&runner.run(&pg), EXIT_NOTHING_NEW);
    assert_eq!(published("published_at"), publication, "not published again");
    assert_eq!((runner.dataset(), reports(&september)), served);
    assert_eq!(rfb.gets(), gets);

    // The next month loses one establishment of a dozen: the guard refuses it.
    rfb.publish("2026-10", &root().join("data/sample-dump-next"));
    let october = runner.month("2026-10");
    let refused = runner.run(&pg);
    assert_code(&refused, EXIT_REFUSED);
    assert!(text(&refused).contains("looks broken"), "{}", text(&refused));
    assert_eq!((runner.dataset(), reports(&september)), served);
    assert_eq!(published("published_at"), publication);
    assert_eq!(names(&reports(&october)), ["build-report.refused.html", "build-report.refused.json"]);
    let verdict = json(&october.join("build-report.refused.json"));
    assert_eq!(verdict["source_month"], "2026-10");
    assert!(!verdict["month_over_month"]["anomalies"].as_array().unwrap().is_empty(), "{verdict}");

    assert_code(&runner.run(&["--postgres", &url, "--accept-anomalies"]), 0);
    assert_eq!(published("source_month"), "2026-10");
    assert_eq!(published("build_id"), runner.build_id());
    assert_eq!(reports(&september), served.1, "September's report is kept");
    let kept = reports(&october);
    assert_eq!(
        names(&kept),
        ["build-report.html", "build-report.json", "build-report.refused.html", "build-report.refused.json"]
    );
    let report = json(&october.join("build-report.json"));
    assert_eq!(report["source_month"], "2026-10");
    assert_eq!(report["month_over_month"]["previous_month"], "2026-09");
    assert_eq!(report["month_over_month"]["anomalies_accepted"], true);
    assert_code(&runner.run(&pg), EXIT_NOTHING_NEW);
    assert_eq!(reports(&october), kept);
}

/// The rows of each table of an export, from its `_manifest.json`.
fn exported_rows(out: &Path) -> Vec<(String, u64)> {
    let manifest = json(&out.join("_manifest.json"));
    let tables = manifest["tables"].as_array().expect("the manifest lists its tables");
    tables.iter().map(|t| (t["name"].as_str().unwrap().to_owned(), t["rows"].as_u64().unwrap())).collect()
}

/// `run --export DIR` writes the month's dataset into DIR/<month>/ after the swap; a month whose
/// export is missing is exported by the next run without a rebuild (exit 0, not 4), a month
/// exported already is nothing new, and a month built again replaces its export.
#[test]
fn run_exports_each_month_once_and_again_when_rebuilt() {
    let rfb = Rfb::start();
    rfb.publish("2026-09", &sample_dump());
    let runner = Runner::new(&rfb);
    let exports = runner.work.parent().unwrap().join("exports");
    let export = ["--export", exports.to_str().unwrap(), "--export-format", "csv"];
    assert_code(&runner.run(&export), 0);
    let out = exports.join("2026-09");
    let rows = exported_rows(&out);
    let count = |table: &str| query(&runner.db, &format!("SELECT count(*)::VARCHAR FROM {table}")).remove(0).remove(0);
    let table = |name: &str| rows.iter().find(|(n, _)| n == name).map(|(_, r)| r.to_string());
    assert_eq!(table("establishments"), Some(count("estabelecimentos")), "{rows:?}");
    assert_eq!(table("companies"), Some(count("empresas")), "{rows:?}");
    let header = std::fs::read_dir(out.join("establishments")).unwrap().next().unwrap().unwrap().path();
    assert!(std::fs::read_to_string(header).unwrap().starts_with("cnpj"), "CSV with a header");

    assert_code(&runner.run(&export), EXIT_NOTHING_NEW);
    std::fs::remove_dir_all(&out).unwrap();
    let served = runner.dataset();
    assert_code(&runner.run(&export), 0);
    assert_eq!(runner.dataset(), served, "exported without building again");
    assert_eq!(exported_rows(&out), rows);

    let first = json(&out.join("_manifest.json"))["build_id"].clone();
    assert_code(&runner.run(&[&export[..], &["--force"]].concat()), 0);
    let again = json(&out.join("_manifest.json"));
    assert_ne!(again["build_id"], first, "the rebuilt month's export replaced the old one");
    assert_eq!(again["build_id"].as_str(), Some(runner.build_id().as_str()));
}
