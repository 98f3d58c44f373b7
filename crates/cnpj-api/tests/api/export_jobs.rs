//! Export jobs (contract §15) over the sample dump: a job accepted holds a credit a row (402 and
//! nothing held when the balance is short, a bad filter a 400 naming it as search does), is
//! answered to its owner only (another user's id a 404 like an unknown one), and its file is the
//! search's rows: the CSV byte for byte what the people's export writes of the same items, the
//! JSONL the API's items, the Parquet typed and read back by pyarrow, pandas and DuckDB (in
//! `CNPJ_TEST_PYTHON`); rows written equal to the count for several filter sets. A job that cannot
//! write fails and refunds once. A server killed (SIGKILL) mid-job (its file a FIFO no one reads,
//! so that the write waits; its thread niced to yield to requests) leaves the job to the next
//! process once the lease ran out: done, charged once. Two replicas on one Postgres accounts store
//! run each job once. A Postgres dataset's files are the DuckDB dataset's, byte for byte. The
//! pages: the search page's offer, the cost confirmed with its CSRF token, the job's page
//! refreshing itself while it waits, then the file; another person's job not found.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::company_pages::{by_id, csrf, person};
use super::{AccountsAt, Server, build_dataset, error_of, get, pg_database, pg_server, post, publish, root};

/// Runner settings for tests: short leases and looks.
const FAST: [&str; 4] = ["--export-lease", "3", "--export-interval", "1"];

fn start(dir: &Path, accounts: &AccountsAt, db: &Path, extra: &[&str]) -> Server {
    let exports = dir.join("exports");
    let mut args = vec!["--export-dir", exports.to_str().unwrap()];
    args.extend(FAST);
    args.extend(extra);
    let dataset = vec!["--db".into(), db.into()];
    Server::spawn(tempfile::tempdir().unwrap(), db.to_owned(), dataset, accounts.clone(), &args)
}

/// A job's status once it ended (done, failed), within `within`.
fn ended(s: &Server, token: &str, id: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let r = get(s, &format!("/api/v1/exports/{id}"), token);
        assert_eq!(r.status, 200, "{}", r.body);
        if ["done", "failed"].contains(&r.body["data"]["status"].as_str().unwrap()) {
            return r.body["data"].clone();
        }
        assert!(Instant::now() < deadline, "the job did not end: {}", r.body);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A job of `filters` in `format`, done: its status and file.
fn exported(s: &Server, token: &str, filters: Value, format: &str) -> (Value, Vec<u8>) {
    let r = post(s, "/api/v1/exports", token, &json!({"filters": filters, "format": format, "locale": "en"}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["data"]["id"].as_str().unwrap().to_owned();
    let job = ended(s, token, &id, Duration::from_secs(60));
    assert_eq!(job["status"], "done", "{job}");
    let file = get(s, &format!("/api/v1/exports/{id}/file"), token);
    assert_eq!(file.status, 200);
    (job, file.raw)
}

/// Every item of a search (`query`, its locale among its parameters), all its pages.
pub(super) fn items(s: &Server, token: &str, query: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for page in 1.. {
        let r = get(s, &format!("/api/v1/companies/search?{query}&per_page=50&page={page}"), token);
        let data = r.body["data"].as_array().unwrap().clone();
        out.extend(data.iter().cloned());
        if data.len() < 50 {
            return out;
        }
    }
    unreachable!()
}

/// The Python that reads the Parquet back (`CNPJ_TEST_PYTHON`).
fn python() -> String {
    std::env::var("CNPJ_TEST_PYTHON").expect(
        "CNPJ_TEST_PYTHON is not set: the export jobs' test needs a Python with pyarrow, pandas and duckdb \
         (scripts/setup-test-deps)",
    )
}

const READER: &str = r#"
import json, sys
import duckdb, pandas, pyarrow.parquet as pq
path = sys.argv[1]
table = pq.read_table(path)
frame = pandas.read_parquet(path)
con = duckdb.connect()
described = {r[0]: r[1] for r in con.execute(f"DESCRIBE SELECT * FROM '{path}'").fetchall()}
cnpjs = [r[0] for r in con.execute(f"SELECT cnpj FROM '{path}'").fetchall()]
print(json.dumps({
    "arrow": {f.name: str(f.type) for f in table.schema},
    "pandas_rows": len(frame),
    "pandas_cnpj": list(frame["cnpj"]),
    "duckdb": described,
    "duckdb_cnpj": cnpjs,
    "capital_sum": str(con.execute(f"SELECT sum(capital_social) FROM '{path}'").fetchone()[0]),
}))
"#;

#[test]
fn jobs_hold_credits_answer_their_owner_and_write_the_search() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let s = start(dir.path(), &AccountsAt::File(dir.path().join("accounts.sqlite")), &db, &[]);
    let ana = s.user("ana", 100);
    let bia = s.user("bia", 5);
    // A bad filter: the same 400 as search's; an unknown one named; nothing held.
    let bad = post(&s, "/api/v1/exports", &ana, &json!({"filters": {"state": "SPO"}, "format": "csv"}));
    assert_eq!(error_of(&bad), (400, "Invalid input parameters"));
    assert!(bad.body["errors"]["state"].is_array(), "{}", bad.body);
    let unknown = post(&s, "/api/v1/exports", &ana, &json!({"filters": {"sate": "SP"}}));
    assert!(unknown.body["errors"]["sate"].is_array(), "{}", unknown.body);
    let format = post(&s, "/api/v1/exports", &ana, &json!({"format": "xlsx"}));
    assert!(format.body["errors"]["format"].is_array(), "{}", format.body);
    // Short: 402, nothing held, no job.
    let short = post(&s, "/api/v1/exports", &bia, &json!({"filters": {}, "format": "csv"}));
    assert_eq!(error_of(&short), (402, "Insufficient credits."));
    assert_eq!(s.credits("bia"), (5, 0));
    assert_eq!(get(&s, "/api/v1/exports", &bia).body["data"], json!([]));

    let accepted = post(&s, "/api/v1/exports", &ana, &json!({"filters": {}, "format": "csv", "locale": "en"}));
    assert_eq!(accepted.status, 202, "{}", accepted.body);
    let job = &accepted.body["data"];
    assert_eq!((job["rows"].as_u64(), job["credits"].as_u64()), (Some(11), Some(11)));
    assert_eq!(accepted.body["credits_remaining"], 89);
    let id = job["id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    assert_eq!(s.credits("ana"), (89, 11), "held with the job");
    let done = ended(&s, &ana, &id, Duration::from_secs(60));
    assert_eq!((done["status"].as_str(), done["rows_written"].as_u64()), (Some("done"), Some(11)), "{done}");
    assert!(done["expires_at"].is_string() && done["finished_at"].is_string());
    // Its owner only: another user's id is as unknown.
    for path in [format!("/api/v1/exports/{id}"), format!("/api/v1/exports/{id}/file")] {
        assert_eq!(error_of(&get(&s, &path, &bia)), (404, "Export not found."), "{path}");
    }
    assert_eq!(error_of(&get(&s, &format!("/api/v1/exports/{}", "0".repeat(32)), &ana)).0, 404);
    assert_eq!(get(&s, "/api/v1/exports", &ana).body["data"][0]["id"], id.as_str());
    let file = get(&s, &format!("/api/v1/exports/{id}/file"), &ana);
    assert_eq!(file.header("content-type"), Some("text/csv; charset=utf-8"));
    assert_eq!(s.credits("ana"), (89, 11), "charged once, reading is free");
    // The people's export's CSV of the same items, byte for byte.
    let all = items(&s, &ana, "locale=en");
    let columns = cnpj_pages::csv_columns(&all[0]);
    let expected: String = cnpj_pages::csv_header(&columns) + &all.iter().map(cnpj_pages::csv_line).collect::<String>();
    assert_eq!(String::from_utf8(file.raw).unwrap(), expected);
}

#[test]
fn jsonl_and_parquet_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
    let s = start(dir.path(), &accounts, &db, &[]);
    let token = s.user("ana", 1000);
    let (job, jsonl) = exported(&s, &token, json!({"state": "SP"}), "jsonl");
    let lines: Vec<Value> =
        String::from_utf8(jsonl).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines, items(&s, &token, "state=SP&locale=en"), "the API's items");
    assert_eq!(job["rows"].as_u64(), Some(lines.len() as u64));

    let (job, parquet) = exported(&s, &token, json!({}), "parquet");
    let path = dir.path().join("read.parquet");
    std::fs::write(&path, parquet).unwrap();
    let out = Command::new(python()).args(["-c", READER, path.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "the reader failed: {}", String::from_utf8_lossy(&out.stderr));
    let read: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cnpjs: Vec<Value> = items(&s, &token, "locale=en").iter().map(|i| i["cnpj"].clone()).collect();
    assert_eq!(job["rows"].as_u64(), Some(cnpjs.len() as u64));
    assert_eq!((&read["pandas_cnpj"], &read["duckdb_cnpj"]), (&json!(cnpjs), &json!(cnpjs)));
    assert_eq!(read["arrow"]["data_inicio_atividades"], "date32[day]");
    assert_eq!(read["arrow"]["capital_social"], "decimal128(18, 2)");
    assert!(read["arrow"]["cnaes_secundarios"].as_str().unwrap().starts_with("list<element: struct<codigo: string"));
    assert!(read["arrow"]["socios"].as_str().unwrap().contains("data_entrada: date32[day]"), "{read}");
    assert_eq!(read["duckdb"]["data_situacao_cadastral"], "DATE");
    assert_eq!(read["duckdb"]["capital_social"], "DECIMAL(18,2)");
    assert_eq!(read["duckdb"]["endereco.uf"], "VARCHAR");
    assert!(read["capital_sum"].as_str().unwrap().contains('.'), "{read}");
}

#[test]
fn rows_written_are_the_count_for_filter_sets() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
    let s = start(dir.path(), &accounts, &db, &[]);
    let token = s.user("ana", 1000);
    for (filters, query) in [
        (json!({"state": ["SP", "RJ"]}), "state=SP,RJ"),
        (json!({"has_email": true}), "has_email=true"),
        (json!({"capital_from": 1000, "head_office": "true"}), "capital_from=1000&head_office=true"),
        (json!({"trading_name": "pio xii comercio"}), "trading_name=pio%20xii%20comercio"),
        (json!({"situacao_cadastral": "02", "zip_code": "01310"}), "situacao_cadastral=02&zip_code=01310"),
        (json!({"state": "AC"}), "state=AC"),
    ] {
        let count = get(&s, &format!("/api/v1/companies/count?{query}"), &token).body["total"].as_u64().unwrap();
        let (job, csv) = exported(&s, &token, filters.clone(), "csv");
        assert_eq!((job["rows"].as_u64(), job["rows_written"].as_u64()), (Some(count), Some(count)), "{filters}");
        let lines = String::from_utf8(csv).unwrap().matches("\r\n").count() as u64;
        assert_eq!(lines, count + 1, "{filters}: a header and a line a row");
    }
}

#[test]
fn a_job_that_cannot_write_fails_and_refunds_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
    // The export folder is a file: no job can write there.
    let blocked = dir.path().join("not-a-folder");
    std::fs::write(&blocked, b"x").unwrap();
    let dataset = vec!["--db".into(), db.clone().into()];
    let mut args = vec!["--export-dir", blocked.to_str().unwrap()];
    args.extend(FAST);
    let s = Server::spawn(tempfile::tempdir().unwrap(), db.clone(), dataset, accounts.clone(), &args);
    let token = s.user("ana", 20);
    let r = post(&s, "/api/v1/exports", &token, &json!({"filters": {}, "format": "parquet"}));
    assert_eq!((r.status, r.body["credits_remaining"].as_i64()), (202, Some(9)), "{}", r.body);
    let id = r.body["data"]["id"].as_str().unwrap().to_owned();
    let failed = ended(&s, &token, &id, Duration::from_secs(30));
    assert_eq!(failed["status"], "failed");
    assert!(failed["error"].as_str().unwrap().contains("refunded"), "{failed}");
    assert_eq!(error_of(&get(&s, &format!("/api/v1/exports/{id}/file"), &token)), (409, "Export not ready."));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(s.credits("ana"), (20, 0), "refunded, once");
    let ledger = rusqlite::Connection::open(dir.path().join("accounts.sqlite")).unwrap();
    let entries: Vec<(i64, String)> = ledger
        .prepare("SELECT amount, what FROM debits ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(entries, [], "the hold left the ledger");
}

/// The attempts the store counted for a job (SQLite accounts).
fn attempts(accounts: &Path, id: &str) -> i64 {
    let conn = rusqlite::Connection::open(accounts).unwrap();
    conn.query_row("SELECT attempts FROM exports WHERE id = ?1", [id], |r| r.get(0)).unwrap()
}

/// The niceness of the thread named `export` of the process `pid` (Linux), if it has one.
fn job_niceness(pid: u32) -> Option<i64> {
    std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten().find_map(|task| {
        let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
        if comm.trim() != "export" {
            return None;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
        // After the name in parentheses: state is field 3, nice field 19.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        fields.get(16)?.parse().ok()
    })
}

/// Exports of a Postgres dataset (its search by SQL, in pages cut after the last CNPJ read) are
/// those of the DuckDB dataset it was published from (the search index's matches, the lookup
/// file read in key order), byte for byte, in each format, over a synthetic month of a few
/// thousand establishments (several chunks of a thousand).
#[test]
fn a_postgres_dataset_exports_the_same_bytes_as_duckdb() {
    let dir = tempfile::tempdir().unwrap();
    let synth = cnpj_synth::SynthOptions::new(0.00005, dir.path().join("synth"));
    cnpj_synth::generate(&synth).unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&synth.out, &db);
    let url = pg_database();
    publish(&db, &url);
    let duck = start(dir.path(), &AccountsAt::File(dir.path().join("accounts.sqlite")), &db, &[]);
    let exports = dir.path().join("pg-exports");
    let mut args = vec!["--export-dir", exports.to_str().unwrap()];
    args.extend(FAST);
    let pg = pg_server(&url, &args);
    let (duck_token, pg_token) = (duck.user("ana", 1_000_000), pg.user("ana", 1_000_000));
    for filters in [json!({}), json!({"state": "SP,RJ"}), json!({"situacao_cadastral": "02", "head_office": true})] {
        for format in ["csv", "jsonl", "parquet"] {
            let (job, from_duckdb) = exported(&duck, &duck_token, filters.clone(), format);
            let (_, from_postgres) = exported(&pg, &pg_token, filters.clone(), format);
            assert!(from_duckdb == from_postgres, "{filters} as {format}: the files differ");
            if filters == json!({}) {
                assert!(job["rows"].as_u64().unwrap() > 2_000, "several chunks: {job}");
            }
        }
    }
}

#[test]
fn a_server_killed_mid_job_leaves_it_to_the_next_charged_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let file = dir.path().join("accounts.sqlite");
    let accounts = AccountsAt::File(file.clone());
    // This one accepts jobs and runs none.
    let front = start(dir.path(), &accounts, &db, &["--export-jobs", "0"]);
    let token = front.user("ana", 50);
    let r = post(&front, "/api/v1/exports", &token, &json!({"filters": {}, "format": "csv"}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["data"]["id"].as_str().unwrap().to_owned();
    // The file the job writes is a FIFO no one reads: the write waits, the job stays running.
    let exports = dir.path().join("exports");
    std::fs::create_dir_all(&exports).unwrap();
    let part = exports.join(format!(".{id}.csv.part"));
    assert!(Command::new("mkfifo").arg(&part).status().unwrap().success());
    let mut runner = start(dir.path(), &accounts, &db, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(&front, &format!("/api/v1/exports/{id}"), &token).body["data"]["status"] != "running" {
        assert!(Instant::now() < deadline, "the job was not claimed");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(job_niceness(runner.child.id()), Some(19), "the job's thread yields to requests");
    runner.child.kill().unwrap();
    runner.child.wait().unwrap();
    std::fs::remove_file(&part).unwrap();
    assert_eq!(get(&front, &format!("/api/v1/exports/{id}"), &token).body["data"]["status"], "running");
    let _next = start(dir.path(), &accounts, &db, &[]);
    let done = ended(&front, &token, &id, Duration::from_secs(60));
    assert_eq!((done["status"].as_str(), done["rows_written"].as_u64()), (Some("done"), Some(11)), "{done}");
    assert_eq!(attempts(&file, &id), 2, "run again once");
    assert_eq!(front.credits("ana"), (39, 11), "charged once");
    let csv = get(&front, &format!("/api/v1/exports/{id}/file"), &token);
    assert_eq!(String::from_utf8(csv.raw).unwrap().matches("\r\n").count(), 12);
}

#[test]
fn two_replicas_on_one_postgres_store_run_each_job_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let url = pg_database();
    let accounts = AccountsAt::Postgres(url.clone());
    let (a, b) = (start(dir.path(), &accounts, &db, &[]), start(dir.path(), &accounts, &db, &[]));
    let users: Vec<String> = ["ana", "bia", "cid", "dan"].iter().map(|n| a.user(n, 1000)).collect();
    let mut jobs = Vec::new();
    for (n, token) in users.iter().enumerate() {
        for format in ["csv", "jsonl", "parquet"] {
            let s = if n % 2 == 0 { &a } else { &b };
            let r = post(s, "/api/v1/exports", token, &json!({"filters": {"state": "SP"}, "format": format}));
            assert_eq!(r.status, 202, "{}", r.body);
            jobs.push((token.clone(), r.body["data"]["id"].as_str().unwrap().to_owned()));
        }
    }
    for (token, id) in &jobs {
        let done = ended(&b, token, id, Duration::from_secs(120));
        assert_eq!(done["status"], "done", "{done}");
    }
    let mut pg = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows = pg.query("SELECT attempts, status FROM cnpj_accounts.exports", &[]).unwrap();
    assert_eq!(rows.len(), jobs.len());
    for row in rows {
        assert_eq!((row.get::<_, i64>(0), row.get::<_, String>(1)), (1, "done".to_owned()), "each job ran once");
    }
    for name in ["ana", "bia", "cid", "dan"] {
        let (credits, used) = a.credits(name);
        assert_eq!(credits + used, 1000);
        let debits: i64 = pg
            .query_one(
                "SELECT count(*) FROM cnpj_accounts.debits d JOIN cnpj_accounts.users u ON u.id = d.user_id \
                 WHERE u.name = $1",
                &[&name],
            )
            .unwrap()
            .get(0);
        assert_eq!(debits, 3, "one hold a job");
    }
}

/// The pages: the search page offers the whole result; its cost is shown, free; the form needs
/// its CSRF token; the job's page refreshes itself while the job waits or runs, then links to the
/// file; another person's job is not found.
#[test]
fn the_pages_confirm_follow_and_download_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    // This one runs no job: the job's page is seen waiting, until a runner starts.
    let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
    let s = start(dir.path(), &accounts, &db, &["--insecure-cookies", "--export-jobs", "0"]);
    let (_, mut ana) = person(&s, "ana", 50);
    let (_, search) = ana.get("/search?zip_code=01310&locale=en");
    assert_eq!(by_id(&search, "export-all"), "Export all 6 rows (6 credits)", "{search}");
    assert!(search.contains("href=\"/search/exports?zip_code=01310\""), "{search}");
    let (r, page) = ana.get("/search/exports?zip_code=01310");
    assert_eq!(r.status, 200, "{page}");
    assert_eq!((by_id(&page, "export-job-rows"), by_id(&page, "export-job-credits")), ("6", "6"));
    let (credits, _) = s.credits("ana");
    assert_eq!(credits, 49, "asking is free (the search page cost 1)");
    let (r, _) = ana.post("/search/exports", &[("zip_code", "01310"), ("format", "csv")]);
    assert_eq!(r.status, 403, "without the CSRF token nothing runs");
    let token = csrf(&page);
    let (r, _) = ana.post("/search/exports", &[("csrf_token", &token), ("zip_code", "01310"), ("format", "csv")]);
    assert_eq!(r.status, 303);
    let job = r.header("location").unwrap().to_owned();
    assert!(job.starts_with("/search/exports/"), "{job}");
    assert_eq!(s.credits("ana").0, 43, "held");
    let (r, page) = ana.get(&job);
    assert_eq!((r.status, r.header("refresh")), (200, Some("3")), "a waiting job's page refreshes itself");
    assert!(page.contains("data-status=\"queued\"") && page.contains("<progress"), "{page}");
    let _runner = start(dir.path(), &accounts, &db, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        let (r, page) = ana.get(&job);
        assert_eq!(r.status, 200, "{page}");
        if page.contains("data-status=\"done\"") {
            assert_eq!(r.header("refresh"), None, "a done job's page stays");
            break page;
        }
        assert_eq!(r.header("refresh"), Some("3"), "{page}");
        assert!(Instant::now() < deadline, "the job did not end: {page}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(by_id(&page, "job-written"), "6");
    let (r, csv) = ana.get(&format!("{job}/file"));
    assert_eq!((r.status, r.header("content-type")), (200, Some("text/csv; charset=utf-8")));
    assert_eq!(csv.matches("\r\n").count(), 7);
    let (_, mut bia) = person(&s, "bia", 5);
    assert_eq!(bia.get(&job).0.status, 404, "another person's job");
    assert_eq!(bia.get(&format!("{job}/file")).0.status, 404);
}
