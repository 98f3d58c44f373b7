//! End-to-end tests of `cnpj-etl`, one binary: real builds of the project's sample dump (every
//! gotcha), of the real RFB extract in `../shared` (when present) and of altered or mutated months,
//! into real DuckDB files, checked through `show`, the build report and the dataset's own tables.
//!
//! - `analysts`: the views of `sql/duckdb/views.sql`, and README.md's example queries run on them.
//! - `export`: `cnpj-etl export` read back by pyarrow and Python's csv module (`CNPJ_TEST_PYTHON`),
//!   against the tables and `show`; hostile outputs and datasets.
//! - `builds`: the sample dump, the real extract and synthetic months, `show`, `run`, Postgres,
//!   the lookup file and the search index against SQL.
//! - `changes`: month over month: evolved synthetic months built with `--previous` against their
//!   planted changes, the history, the guard, previous datasets that cannot be compared with.
//! - `hardening`: hostile and incomplete input (issue 19), one test per case.
//! - `fuzz`: the mutation fuzzer over the sample dump (`CNPJ_FUZZ_CASES`, `CNPJ_FUZZ_SEED`;
//!   `scripts/fuzz-build` runs it at a large count).
//! - `evolve`: `synth --evolve-from` months, their planted changes against the two datasets.
//! - `changes`: evolved months built with `--previous`: the `changes` table against the planted
//!   changes, the history, the guard, previous datasets that cannot be compared with.
//! - `report_page`: the build report's HTML page, its charts measured in headless Chromium.

mod analysts;
mod builds;
mod changes;
mod evolve;
mod export;
mod fuzz;
mod hardening;
mod report_page;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sample_dump() -> PathBuf {
    root().join("data/sample-dump")
}

/// The real RFB extract beside the project, when it is there.
fn real_extract() -> Option<PathBuf> {
    Some(root().join("../shared/rfb/samples/real-extract-2026")).filter(|p| p.is_dir())
}

fn etl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cnpj-etl")).args(args).output().expect("cnpj-etl runs")
}

/// What a command said on stderr.
fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A built dataset and its report; `_dir` holds it when the build made its own folder.
struct Built {
    _dir: Option<tempfile::TempDir>,
    db: PathBuf,
    report: Value,
}

/// Builds `input` into a folder of its own; the build must succeed.
fn build(input: &Path) -> Built {
    let dir = tempfile::tempdir().unwrap();
    let built = build_in(input, dir.path(), &[]);
    Built { _dir: Some(dir), ..built }
}

/// Builds `input` into `dir/registry.duckdb` with `extra` arguments; the build must succeed.
fn build_in(input: &Path, dir: &Path, extra: &[&str]) -> Built {
    let db = dir.join("registry.duckdb");
    let report = dir.join("report.json");
    let mut args = vec!["build", "--quiet", "--input", input.to_str().unwrap(), "--db", db.to_str().unwrap()];
    args.extend(["--report", report.to_str().unwrap()]);
    args.extend(extra);
    let out = etl(&args);
    assert!(out.status.success(), "build failed: {}", text(&out));
    let report = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    Built { _dir: None, db, report }
}

/// `show` of a CNPJ in a locale: the record as JSON text.
fn show(db: &Path, locale: &str, cnpj: &str) -> String {
    let out = etl(&["show", "--db", db.to_str().unwrap(), "--locale", locale, cnpj]);
    assert!(out.status.success(), "show {cnpj}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Every row of a query, each value as text (`NULL` as empty).
fn query(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let conn = duckdb::Connection::open(db).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    let rows = stmt
        .query_map([], |r| {
            let count = r.as_ref().column_count();
            (0..count).map(|i| r.get::<_, Option<String>>(i).map(Option::unwrap_or_default)).collect()
        })
        .unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// Copies the files of a folder (not its subfolders) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A copy of the sample dump in `dir/2026-09`, to alter.
fn sample_copy(dir: &Path) -> PathBuf {
    let input = dir.join("2026-09");
    copy_dir(&sample_dump(), &input);
    input
}

/// Writes a zip holding one deflated member.
fn write_zip(path: &Path, member: &str, bytes: &[u8]) {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default().compression_level(Some(9));
    w.start_file(member, options).unwrap();
    w.write_all(bytes).unwrap();
    w.finish().unwrap();
}

/// The name and bytes of a zip's first member.
fn first_member(path: &Path) -> (String, Vec<u8>) {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut file = archive.by_index(0).unwrap();
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).unwrap();
    (file.name().unwrap().into_owned(), bytes)
}

/// Latin-1 bytes of a text (every char below U+0100).
fn latin1(text: &str) -> Vec<u8> {
    text.chars().map(|c| u8::try_from(u32::from(c)).expect("a Latin-1 char")).collect()
}
