//! End-to-end tests of `cnpj-etl`, one binary: real builds of the project's sample dump (every
//! gotcha), of the real RFB extract in `../shared` (when present) and of altered or mutated months,
//! into real DuckDB files, checked through `show`, the build report and the dataset's own tables.
//!
//! - `analysts`: the views of `sql/duckdb/views.sql`, and docs/sql.md's example queries run on them.
//! - `export`: `cnpj-etl export` read back by pyarrow and Python's csv module (`CNPJ_TEST_PYTHON`),
//!   against the tables and `show`; hostile outputs and datasets.
//! - `builds`: the sample dump, the real extract and synthetic months, `show`, `run`, Postgres,
//!   the lookup file and the search index against SQL.
//! - `changes`: month over month: evolved synthetic months built with `--previous` against their
//!   planted changes, the history, the guard, previous datasets that cannot be compared with.
//! - `partners`: the partner identities and links (contract §14) of the sample dump and of a
//!   synthetic month built twice.
//! - `hardening`: hostile and incomplete input (issue 19), one test per case.
//! - `fuzz`: the mutation fuzzer over the sample dump (`CNPJ_FUZZ_CASES`, `CNPJ_FUZZ_SEED`;
//!   `scripts/fuzz-build` runs it at a large count).
//! - `evolve`: `synth --evolve-from` months, their planted changes against the two datasets.
//! - `changes`: evolved months built with `--previous`: the `changes` table against the planted
//!   changes, the history, the guard, previous datasets that cannot be compared with.
//! - `report_page`: the build report's HTML page, its charts measured in headless Chromium.
//! - `runs`: `run` month after month against a loopback RFB server: publication into Postgres,
//!   nothing new, the month's reports, failed and refused months.
//! - `run_metrics`: `run --metrics-file` after each outcome of a run, linted by promtool.
//! - `deploy`: the systemd units of `deploy/`, checked by `systemd-analyze`; the Prometheus rules
//!   and dashboard of `deploy/prometheus/`, checked and tested by `promtool`.
//! - `tidy`: the house rules over every source file of `crates/` (a `//!` line first, no circle
//!   between the files of a crate, long functions only as listed in `long-functions.txt`).
//! - `package`: the binaries outside the checkout: the release tarball of `scripts/package`
//!   unpacked and moved, and the binary copied out as `cargo install` does, run without
//!   LD_LIBRARY_PATH.

mod analysts;
mod builds;
mod changes;
mod deploy;
mod evolve;
mod export;
mod fuzz;
mod hardening;
mod package;
mod partners;
mod report_page;
mod run_metrics;
mod runs;
mod tidy;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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

/// A new, empty database on the test cluster that `scripts/test` starts, named for the test
/// (`tag`) and the process; its URL.
fn pg_database(tag: &str) -> String {
    let base = std::env::var("CNPJ_TEST_POSTGRES")
        .expect("CNPJ_TEST_POSTGRES is not set: run the suite with scripts/test, which starts a throwaway Postgres");
    let name = format!("cli_{tag}_{}", std::process::id());
    let mut admin = postgres::Client::connect(&format!("{base}/postgres"), postgres::NoTls).unwrap();
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    format!("{base}/{name}")
}

/// `show` of a CNPJ in a locale: the record as JSON text.
fn show(db: &Path, locale: &str, cnpj: &str) -> String {
    let out = etl(&["show", "--db", db.to_str().unwrap(), "--locale", locale, cnpj]);
    assert!(out.status.success(), "show {cnpj}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Every row of a query on a dataset (its history attached as `history` when it has one), each
/// value as text (`NULL` as empty).
fn query(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let conn = duckdb::Connection::open(db).unwrap();
    let history = cnpj_index::history_path(db);
    if history.exists() {
        conn.execute_batch(&format!("ATTACH '{}' AS history (READ_ONLY)", history.display())).unwrap();
    }
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

/// A legacy Apache-style RFB file server on loopback: directory listings of the months it
/// publishes (each a folder of zips; more may be published while it runs), HEAD, GET with Range.
/// Counts the file GETs.
struct Rfb {
    base: String,
    months: Arc<Mutex<Vec<(String, PathBuf)>>>,
    gets: Arc<AtomicUsize>,
}

impl Rfb {
    fn start() -> Rfb {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let rfb = Rfb { base, months: Arc::default(), gets: Arc::default() };
        let (months, counter) = (Arc::clone(&rfb.months), Arc::clone(&rfb.gets));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let mut range = None;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("range: bytes=") {
                        range = v.trim().trim_end_matches('-').parse::<usize>().ok();
                    }
                }
                let mut parts = line.split_whitespace();
                let (method, path) = (parts.next().unwrap().to_owned(), parts.next().unwrap().to_owned());
                let months = months.lock().unwrap().clone();
                let root = "/dados/cnpj/dados_abertos_cnpj/";
                let month_dir = |month: &str| months.iter().find(|(m, _)| m == month).map(|(_, dir)| dir.clone());
                let (status, extra, body): (&str, String, Vec<u8>) = if path == root {
                    let links: String = months.iter().map(|(m, _)| format!("<a href=\"{m}/\">{m}/</a>\n")).collect();
                    ("200 OK", String::new(), format!("<a href=\"../\">up</a>{links}").into_bytes())
                } else if let Some((month, name)) = path.strip_prefix(root).and_then(|p| p.split_once('/'))
                    && let Some(dir) = month_dir(month)
                {
                    if name.is_empty() {
                        let links: String = std::fs::read_dir(&dir)
                            .unwrap()
                            .map(|e| e.unwrap().file_name().to_string_lossy().replace(' ', "%20"))
                            .filter(|n| n.ends_with(".zip"))
                            .map(|n| format!("<a href=\"{n}\">{n}</a>\n"))
                            .collect();
                        ("200 OK", String::new(), links.into_bytes())
                    } else {
                        let bytes = std::fs::read(dir.join(name.replace("%20", " "))).unwrap_or_default();
                        if method == "GET" {
                            counter.fetch_add(1, Ordering::SeqCst);
                        }
                        match range {
                            Some(start) if start < bytes.len() => (
                                "206 Partial Content",
                                format!("Content-Range: bytes {start}-{}/{}\r\n", bytes.len() - 1, bytes.len()),
                                bytes[start..].to_vec(),
                            ),
                            _ => ("200 OK", "Last-Modified: Sun, 13 Sep 2026 10:00:00 GMT\r\n".into(), bytes),
                        }
                    }
                } else {
                    ("404 Not Found", String::new(), Vec::new())
                };
                let head =
                    format!("HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n{extra}\r\n", body.len());
                let _ = stream.write_all(head.as_bytes());
                if method != "HEAD" {
                    let _ = stream.write_all(&body);
                }
            }
        });
        rfb
    }

    /// Publishes the zips of `dir` as `month`.
    fn publish(&self, month: &str, dir: &Path) {
        self.months.lock().unwrap().push((month.to_owned(), dir.to_owned()));
    }

    /// The file GETs answered so far.
    fn gets(&self) -> usize {
        self.gets.load(Ordering::SeqCst)
    }
}
