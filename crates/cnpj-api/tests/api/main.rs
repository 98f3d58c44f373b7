//! End-to-end tests of `cnpj-api`: the real binary on a loopback port, over a real DuckDB dataset
//! built from the project's sample dump, with a real SQLite accounts store, called over HTTP; and
//! the same over Postgres (the throwaway cluster that `scripts/test` starts): byte-for-byte parity
//! with DuckDB, replicas sharing credits and the rate limit, publication swaps. Module `changes`:
//! month over month, over the sample dump and its next month. Module `docs`: the API reference
//! page in headless Chromium. Module `mcp`: the MCP endpoint driven by the official Python SDK.
//! Module `operating`: probes and status, metrics (scraped by a real Prometheus), request ids and
//! the JSON log, shutdown. Module `people`: the account as JSON, plans, usage counting, the
//! operator's commands for people and the pages beside the API. Module `walk`: the pages for
//! people walked through in headless Chromium, axe-core run in every page, screenshots. Module
//! `watchlists`: lists per user, their events (over evolved synthetic months too), webhooks. Module
//! `webhooks`: deliveries by two replicas on one Postgres store (each page once), and after a
//! sender killed mid-delivery. Module `company_pages`: the company search, a company's page and the
//! export for people, charged as the API charges; module `partner_pages`: a partner's page and a
//! company's network for people, and the network's files; module `pages_walk`: the same walked in
//! headless Chromium over an evolved synthetic month. Module `partners`: the partners' search,
//! pages and networks (contract §14) over an evolved synthetic month, `--partners off`, privacy.
//! Module `browser`: chromedriver and Chromium for
//! `docs`, `walk` and `pages_walk`.

mod browser;
mod changes;
mod company_pages;
mod docs;
mod export_jobs;
mod filters;
mod mcp;
mod operating;
mod pages_walk;
mod partner_pages;
mod partners;
mod people;
mod walk;
mod watchlists;
mod webhooks;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn build_dataset(input: &Path, db: &Path) {
    cnpj_build::build(&cnpj_build::BuildOptions::new(input, db), &cnpj_build::NoObserver).expect("the dataset builds");
}

/// Where a server keeps its accounts.
#[derive(Clone, Debug)]
enum AccountsAt {
    File(PathBuf),
    Postgres(String),
}

impl AccountsAt {
    fn args(&self) -> Vec<std::ffi::OsString> {
        match self {
            AccountsAt::File(path) => vec!["--accounts".into(), path.into()],
            AccountsAt::Postgres(url) => vec!["--accounts-postgres".into(), url.into()],
        }
    }
}

fn api(accounts: &AccountsAt, args: &[&str]) -> String {
    let out =
        Command::new(env!("CARGO_BIN_EXE_cnpj-api")).args(accounts.args()).args(args).output().expect("cnpj-api runs");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

struct Server {
    dir: tempfile::TempDir,
    child: Child,
    addr: String,
    /// The metrics listener's address (`--metrics-listen`).
    metrics: Option<String>,
    db: PathBuf,
    accounts: AccountsAt,
}

impl Server {
    /// A server over a DuckDB dataset built from the sample dump, with SQLite accounts.
    fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("registry.duckdb");
        build_dataset(&root().join("data/sample-dump"), &db);
        let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
        let dataset = vec!["--db".into(), db.clone().into()];
        Server::spawn(dir, db, dataset, accounts, extra)
    }

    fn spawn(
        dir: tempfile::TempDir,
        db: PathBuf,
        dataset: Vec<std::ffi::OsString>,
        accounts: AccountsAt,
        extra: &[&str],
    ) -> Server {
        Server::launch(dir, db, dataset, accounts, extra, |_| {})
    }

    /// `spawn`, with the command set further by `configure` (its log, its stderr).
    fn launch(
        dir: tempfile::TempDir,
        db: PathBuf,
        dataset: Vec<std::ffi::OsString>,
        accounts: AccountsAt,
        extra: &[&str],
        configure: impl FnOnce(&mut Command),
    ) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cnpj-api"));
        command.args(accounts.args()).arg("serve");
        // A free port unless `extra` names the address.
        if !extra.contains(&"--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        command.args(dataset).args(extra).env("RUST_LOG", "warn").stdout(Stdio::piped());
        configure(&mut command);
        let mut child = command.spawn().expect("the server starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut url = || {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            line.trim().strip_prefix("http://").expect("the server prints its URLs").to_owned()
        };
        let addr = url();
        let metrics = extra.contains(&"--metrics-listen").then(|| url().trim_end_matches("/metrics").to_owned());
        Server { dir, child, addr, metrics, db, accounts }
    }

    /// A user with `credits` and a fresh token.
    fn user(&self, name: &str, credits: i64) -> String {
        api(&self.accounts, &["accounts", "create-user", name, "--credits", &credits.to_string()]);
        api(&self.accounts, &["accounts", "issue-token", name])
    }

    fn credits(&self, name: &str) -> (i64, i64) {
        let shown = api(&self.accounts, &["accounts", "show", name]);
        let first = shown.lines().next().unwrap();
        let nums: Vec<i64> = first.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse().ok()).collect();
        (nums[0], nums[1])
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap().success();
        assert!(ok);
    }
}

/// Waits (at most 40 s: the drain's 30 and some) for a server sent SIGTERM to exit; whether it
/// exited 0.
fn exited(s: &mut Server) -> bool {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            return status.success();
        }
        assert!(Instant::now() < deadline, "the server did not exit within 40 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
    /// The body as sent (de-chunked).
    raw: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A minimal HTTP/1.1 client: one request per connection.
fn request(addr: &str, method: &str, path: &str, token: Option<&str>, body: Option<&[u8]>) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    request_with(addr, method, path, auth.as_deref(), body)
}

/// `request` with the `Authorization` header's value as given.
fn request_with(addr: &str, method: &str, path: &str, authorization: Option<&str>, body: Option<&[u8]>) -> Reply {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(a) = authorization {
        head.push_str(&format!("Authorization: {a}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    let mut raw = head.into_bytes();
    raw.extend_from_slice(body.unwrap_or_default());
    exchange(addr, &raw)
}

/// Sends `raw` on a new connection and reads the response until the server closes it.
fn exchange(addr: &str, raw: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = stream.write_all(raw);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse_reply(&raw)
}

fn parse_reply(raw: &[u8]) -> Reply {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a full response");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())).collect();
    let mut body = raw[split + 4..].to_vec();
    if headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v == "chunked") {
        body = dechunk(&body);
    }
    let raw = body;
    // Every answer is JSON but the pages' (HTML, CSS, CSV) and a network's GraphML file.
    let content_type = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.as_str());
    let not_json = content_type.is_some_and(|t| {
        ["text/", "application/graphml+xml", "application/vnd.apache.parquet", "application/x-ndjson"]
            .iter()
            .any(|kind| t.starts_with(kind))
    });
    let body =
        if raw.is_empty() || not_json { Value::Null } else { serde_json::from_slice(&raw).expect("a JSON body") };
    Reply { status, headers, body, raw }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&data[..line_end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[line_end + 2..line_end + 2 + size]);
        data = &data[line_end + 2 + size + 2..];
    }
}

fn get(s: &Server, path: &str, token: &str) -> Reply {
    request(&s.addr, "GET", path, Some(token), None)
}

fn post(s: &Server, path: &str, token: &str, body: &Value) -> Reply {
    request(&s.addr, "POST", path, Some(token), Some(body.to_string().as_bytes()))
}

fn error_of(r: &Reply) -> (u16, &str) {
    assert_eq!(r.body["success"], false, "{}", r.body);
    (r.status, r.body["message"].as_str().unwrap())
}

#[test]
fn detail_records_locales_and_credits() {
    let s = Server::start(&[]);
    let token = s.user("ana", 10);
    let r = get(&s, "/api/v1/companies/11.222.333%2F0001-81?locale=en", &token);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["success"], true);
    let d = &r.body["data"];
    assert_eq!((d["id"].as_str(), d["situacao_cadastral"].as_str()), (Some("11222333000181"), Some("Active")));
    assert_eq!(d["porte_empresa"], "Micro-enterprise (ME)");
    assert_eq!(r.header("x-ratelimit-limit"), Some("100"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("99"));
    let es = get(&s, "/api/v1/companies/11222333000181?locale=es", &token);
    assert_eq!(es.body["data"]["situacao_cadastral"], "Activa");
    let raw_slash = get(&s, "/api/v1/companies/11.222.333/0002-62", &token);
    assert_eq!(raw_slash.body["data"]["cnpj"], "11222333000262", "a raw slash of the mask is accepted");
    let head = get(&s, "/api/v1/companies/44555666", &token);
    assert_eq!(head.body["data"]["cnpj"], "44555666000181");
    assert_eq!(s.credits("ana"), (6, 4));

    assert_eq!(error_of(&get(&s, "/api/v1/companies/11444777000161", &token)), (404, "Company not found."));
    let bad = get(&s, "/api/v1/companies/11222333000182", &token);
    assert_eq!(error_of(&bad), (400, "Invalid input parameters"));
    assert!(bad.body["errors"]["cnpj"].is_array());
    let locale = get(&s, "/api/v1/companies/11222333000181?locale=fr", &token);
    assert_eq!(error_of(&locale), (400, "Invalid input parameters"));
    assert!(locale.body["errors"]["locale"].is_array());
    assert_eq!(s.credits("ana"), (6, 4), "failed requests cost nothing");
}

#[test]
fn authentication_errors() {
    let s = Server::start(&[]);
    let token = s.user("bia", 5);
    for t in [None, Some("nonsense"), Some("cnpj_0000000000000000000000000000")] {
        let r = request(&s.addr, "GET", "/api/v1/reference-data", t, None);
        assert_eq!(error_of(&r), (401, "Unauthenticated."));
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    }
    assert_eq!(get(&s, "/api/v1/reference-data", &token).status, 200);
    api(&s.accounts, &["accounts", "revoke-token", &token[..12]]);
    assert_eq!(get(&s, "/api/v1/reference-data", &token).status, 401);
    let expiring = api(&s.accounts, &["accounts", "issue-token", "bia", "--expires", "0"]);
    assert_eq!(get(&s, "/api/v1/reference-data", &expiring).status, 401, "a token expiring today at once is expired");
    assert_eq!(error_of(&request(&s.addr, "GET", "/nope", None, None)), (404, "Not found."));
    let fresh = api(&s.accounts, &["accounts", "issue-token", "bia"]);
    assert_eq!(
        error_of(&request(&s.addr, "DELETE", "/api/v1/cities", Some(&fresh), None)),
        (405, "Method not allowed.")
    );
    let health = request(&s.addr, "GET", "/healthz", None, None);
    assert_eq!((health.status, health.body), (200, json!({"status": "ok"})));
}

#[test]
fn search_filters_and_pagination() {
    let s = Server::start(&[]);
    let token = s.user("caio", 100);
    let cnpjs = |path: &str| -> (u16, Value, Vec<String>) {
        let r = get(&s, path, &token);
        let list = r.body["data"]
            .as_array()
            .map_or(Vec::new(), |d| d.iter().map(|i| i["cnpj"].as_str().unwrap().to_owned()).collect());
        (r.status, r.body, list)
    };
    let (status, body, all) = cnpjs("/api/v1/companies/search?per_page=50");
    assert_eq!(status, 200);
    assert_eq!(body["total"], 11);
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "ordered by cnpj");
    let item = &body["data"][0];
    assert!(item.get("natureza_juridica").is_none() && item.get("capital_social").is_none());
    assert!(item["endereco"].get("endereco_completo").is_none() && item["contato"].get("telefone_formatado").is_none());
    assert!(item["socios"].is_array());

    assert_eq!(cnpjs("/api/v1/companies/search?state=ex").2, vec!["44555666000181"]);
    assert_eq!(cnpjs("/api/v1/companies/search?cnpj=11222333").2, vec!["11222333000181", "11222333000262"]);
    assert_eq!(cnpjs("/api/v1/companies/search?cnpj=11.222.333/0002-62").2, vec!["11222333000262"]);
    assert_eq!(
        cnpjs("/api/v1/companies/search?trading_name=pio%20xii%20comercio").2,
        vec!["77888999000262", "77888999000343"]
    );
    assert_eq!(cnpjs("/api/v1/companies/search?neighborhood=jardim%20america").2, vec!["22333444000181"]);
    assert_eq!(cnpjs("/api/v1/companies/search?city=boa%20esperan%C3%A7a%20do%20norte").2, vec!["12345678000195"]);
    assert_eq!(cnpjs("/api/v1/companies/search?city=nowhere&city_id=1182").2, vec!["12345678000195"], "city_id wins");
    assert_eq!(cnpjs("/api/v1/companies/search?zip_code=01310").2.len(), 6);
    assert_eq!(cnpjs("/api/v1/companies/search?business_sector=0111-3/01").2, vec!["22333444000181"]);
    assert_eq!(cnpjs("/api/v1/companies/search?nature_code=1244&situacao_cadastral=2").2.len(), 2);
    assert_eq!(
        cnpjs("/api/v1/companies/search?company_size=05&porte_empresa_code=5").2,
        vec!["44555666000181", "44555666000262", "55666777000181"]
    );
    assert_eq!(
        cnpjs("/api/v1/companies/search?opening_date_from=2026-01-01&opening_date_to=2026-12-31").2,
        vec!["AB12CD34000184"]
    );
    assert_eq!(cnpjs("/api/v1/companies/search?situacao_cadastral=08&unknown=1").2, vec!["11222333000262"]);

    let (_, page, items) = cnpjs("/api/v1/companies/search?per_page=4&page=3");
    assert_eq!(
        (page["from"].as_u64(), page["to"].as_u64(), page["last_page"].as_u64(), items.len()),
        (Some(9), Some(11), Some(3), 3)
    );
    let (_, past, items) = cnpjs("/api/v1/companies/search?per_page=4&page=9");
    assert_eq!(
        (past["total"].as_u64(), past["from"].as_u64(), past["to"].as_u64(), past["last_page"].as_u64(), items.len()),
        (Some(11), Some(0), Some(0), Some(3), 0)
    );
    let (_, none, _) = cnpjs("/api/v1/companies/search?state=AC");
    assert_eq!(
        (none["total"].as_u64(), none["last_page"].as_u64(), none["data"].as_array().map(Vec::len)),
        (Some(0), Some(1), Some(0))
    );

    for bad in [
        "per_page=51",
        "page=0",
        "per_page=x",
        "business_sector=12",
        "opening_date_from=2020-13-01",
        "state=SPO",
        "company_size=01&porte_empresa_code=03",
        "cnpj=123",
    ] {
        let r = get(&s, &format!("/api/v1/companies/search?{bad}"), &token);
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        let param = bad.split('=').next().unwrap();
        let named = r.body["errors"].as_object().unwrap();
        assert!(named.contains_key(param) || bad.starts_with("company_size"), "{bad}: {named:?}");
    }
    // Pages with items cost 1; empty ones nothing.
    let (credits, used) = s.credits("caio");
    assert_eq!(credits + used, 100);
    assert_eq!(used, 15);
}

/// A search the index cannot answer runs by SQL within `--search-budget`: past it, a 400 names
/// the text terms (or every filter, without one), nothing is charged, and the server goes on. The
/// budget here is a microsecond, so that every search by SQL runs past it.
#[test]
fn a_search_past_its_budget_is_a_400_naming_what_to_narrow() {
    let budget = ["--search-budget", "0.000001"];
    let s = Server::start(&budget);
    let token = s.user("bia", 100);
    // The worst terms: no letter or digit (LIKE's own characters, separators, a long run).
    let long = "%25".repeat(2000);
    for term in ["%25", "_", "-", "%20-%20", "***", "%2F%2F", "%C2%A7", long.as_str()] {
        for param in ["trading_name", "neighborhood"] {
            let r = get(&s, &format!("/api/v1/companies/search?{param}={term}&state=SP"), &token);
            assert_eq!(error_of(&r), (400, "Invalid input parameters"), "{param}={term}");
            assert!(r.body["errors"][param][0].as_str().unwrap().contains("Too broad"), "{}", r.body);
            assert!(r.body["errors"].get("state").is_none(), "{}", r.body);
        }
    }
    // A term with a word character is the index's: answered whatever the budget.
    let r = get(&s, "/api/v1/companies/search?trading_name=io%20xii%20com", &token);
    assert_eq!((r.status, r.body["total"].as_u64()), (200, Some(2)), "{}", r.body);
    assert_eq!(s.credits("bia"), (99, 1), "only the answered search is charged");
    // Without an index every search is SQL's: one without a term names its filters.
    let sql = Server::start(&[&budget[..], &["--no-search-index"]].concat());
    let token = sql.user("bia", 100);
    let r = get(&sql, "/api/v1/companies/search?state=SP&situacao_cadastral=2", &token);
    assert_eq!(error_of(&r), (400, "Invalid input parameters"));
    let named: Vec<&String> = r.body["errors"].as_object().unwrap().keys().collect();
    assert_eq!(named, ["state", "situacao_cadastral"]);
    assert_eq!(sql.credits("bia"), (100, 0));
    // A budget that is not a positive number of seconds is refused at start.
    for bad in ["0", "-1", "soon"] {
        let out = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
            .args(["serve", "--db", "x.duckdb", "--search-budget", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn batch_dedupes_orders_and_charges() {
    let s = Server::start(&[]);
    let token = s.user("davi", 3);
    let body = json!({"cnpjs": ["11.222.333/0001-81", "bad", "11222333000181", "11222333", "11444777000161", "bad", " 11222333 "]});
    let r = post(&s, "/api/v1/companies/batch", &token, &body);
    assert_eq!(r.status, 200, "{}", r.body);
    let items: Vec<(&str, bool)> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["cnpj"].as_str().unwrap(), i["success"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        items,
        vec![("11.222.333/0001-81", true), ("bad", false), ("11222333", true), ("11444777000161", false)]
    );
    assert_eq!(
        r.body["data"][1]["error"],
        "Invalid CNPJ format. Provide 8 digits (cnpj_basico) or 14 digits (full CNPJ)."
    );
    assert_eq!(r.body["data"][3]["error"], "Company not found.");
    assert_eq!((r.body["total_requested"].as_u64(), r.body["total_found"].as_u64()), (Some(7), Some(2)));
    assert_eq!((r.body["credits_used"].as_u64(), r.body["credits_remaining"].as_u64()), (Some(2), Some(1)));
    let record = &r.body["data"][0]["data"];
    assert_eq!(
        (record["regime_tributario"].as_str(), record["simples_nacional"].as_u64()),
        (Some("Lucro Real"), Some(1))
    );
    assert!(record["employees_count"].is_null() && record["faturamento_estimado"].is_null());

    // Two found with one credit left: 402, nothing charged.
    let r = post(&s, "/api/v1/companies/batch", &token, &json!({"cnpjs": ["44555666", "22333444"]}));
    assert_eq!(error_of(&r), (402, "Insufficient credits."));
    assert_eq!(s.credits("davi"), (1, 2));
    let r = post(&s, "/api/v1/companies/batch?locale=en", &token, &json!({"cnpjs": ["12345678"]}));
    assert_eq!(r.body["data"][0]["data"]["regime_tributario"], "Individual microentrepreneur (MEI)");

    for bad in
        [json!({"cnpjs": []}), json!({"cnpjs": "11222333"}), json!({"other": 1}), json!([1]), json!({"cnpjs": [1]})]
    {
        assert_eq!(post(&s, "/api/v1/companies/batch", &token, &bad).status, 400, "{bad}");
    }
    let many: Vec<String> = (0..101).map(|i| format!("{i:08}")).collect();
    assert_eq!(post(&s, "/api/v1/companies/batch", &token, &json!({"cnpjs": many})).status, 400);
    let r = request(&s.addr, "POST", "/api/v1/companies/batch", Some(&token), Some(b"{not json"));
    assert_eq!(error_of(&r), (400, "Invalid input parameters"));
    let huge = format!("{{\"cnpjs\": [\"{}\"]}}", "1".repeat(70 * 1024));
    let r = request(&s.addr, "POST", "/api/v1/companies/batch", Some(&token), Some(huge.as_bytes()));
    assert_eq!(error_of(&r), (413, "Payload too large."));
}

#[test]
fn concurrent_batches_never_overspend() {
    let s = Server::start(&["--rate-limit", "1000"]);
    let token = s.user("eva", 30);
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..50)
            .map(|_| {
                scope.spawn(|| {
                    post(
                        &s,
                        "/api/v1/companies/batch",
                        &token,
                        &json!({"cnpjs": ["11222333000181", "44555666", "nope"]}),
                    )
                    .status
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = statuses.iter().filter(|&&c| c == 200).count();
    let refused = statuses.iter().filter(|&&c| c == 402).count();
    assert_eq!((ok, refused), (15, 35), "{statuses:?}");
    assert_eq!(s.credits("eva"), (0, 30), "balance and the debit ledger agree");
}

#[test]
fn rate_limit_and_its_reset() {
    let s = Server::start(&["--rate-limit", "3", "--rate-window", "2"]);
    let token = s.user("fabi", 0);
    let remaining: Vec<Option<String>> =
        (0..3).map(|_| get(&s, "/api/v1/cities", &token).header("x-ratelimit-remaining").map(str::to_owned)).collect();
    assert_eq!(remaining, vec![Some("2".into()), Some("1".into()), Some("0".into())]);
    let r = get(&s, "/api/v1/cities", &token);
    assert_eq!(error_of(&r), (429, "Too many requests."));
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(get(&s, "/api/v1/cities", &token).status, 200);
}

#[test]
fn reference_data_and_cities_are_free() {
    let s = Server::start(&[]);
    let token = s.user("gil", 0);
    let r = get(&s, "/api/v1/reference-data?locale=es", &token);
    assert_eq!(r.status, 200);
    let d = &r.body["data"];
    assert_eq!(d["locale"], "es");
    assert_eq!(d["registration_statuses"]["08"], "Dada de baja");
    assert_eq!(d["company_sizes"], json!(["01", "03", "05"]));
    assert_eq!(d["available_locales"]["pt-br"], "Português (Brasil)");
    assert_eq!(d["states"].as_array().unwrap().len(), 27);
    assert_eq!(d["business_sectors"].as_array().unwrap().len(), 1359);
    assert_eq!(d["legal_natures"].as_array().unwrap().len(), 91);

    let r = get(&s, "/api/v1/cities?state=sp&term=sao%20jose&per_page=2&page=2", &token);
    assert_eq!(r.status, 200, "{}", r.body);
    let names: Vec<&str> = r.body["data"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2);
    assert!(names.iter().all(|n| n.starts_with("SAO JOSE")), "{names:?}");
    assert_eq!(r.body["pagination"]["from"], 3);
    let ex = get(&s, "/api/v1/cities?term=exterior", &token);
    assert_eq!(ex.body["data"][0], json!({"id": "9707", "name": "EXTERIOR", "state": "EX", "ibge_code": null}));
    assert_eq!(get(&s, "/api/v1/cities?per_page=51", &token).status, 400);
    assert_eq!(s.credits("gil"), (0, 0));
}

/// The month of the dataset `s` serves, as `/api/v1/status` tells it.
fn served_month(s: &Server) -> Value {
    request(&s.addr, "GET", "/api/v1/status", None, None).body["data"]["dataset_month"].clone()
}

/// Detail requests, one after another, while `swap` runs and until `/api/v1/status` reports
/// `month` (within 20 s); their statuses.
fn under_load(s: &Server, token: &str, swap: impl FnOnce(), month: &str) -> Vec<u16> {
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let load = scope.spawn(|| {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                seen.push(get(s, "/api/v1/companies/11222333000181", token).status);
            }
            seen
        });
        std::thread::sleep(Duration::from_millis(300));
        swap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while served_month(s) != month {
            assert!(Instant::now() < deadline, "the new dataset was not served");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        load.join().unwrap()
    })
}

#[test]
fn dataset_swap_under_load_and_graceful_shutdown() {
    let mut s = Server::start(&["--rate-limit", "100000"]);
    let token = s.user("hugo", 1_000_000);
    let next = s.dir.path().join("next.duckdb");
    let real = root().join("../shared/rfb/samples/real-extract-2026");
    let input = if real.is_dir() { real } else { root().join("data/sample-dump") };
    build_dataset(&input, &next);
    let expected_month = if input.ends_with("real-extract-2026") { "2026-03" } else { "2026-09" };
    let statuses = under_load(
        &s,
        &token,
        || {
            // As the README says: the lookup file and the search index, then the DuckDB file, then SIGHUP.
            std::fs::rename(cnpj_store::lookup_path(&next), cnpj_store::lookup_path(&s.db)).unwrap();
            std::fs::rename(cnpj_store::search_index_path(&next), cnpj_store::search_index_path(&s.db)).unwrap();
            std::fs::rename(&next, &s.db).unwrap();
            s.signal("-HUP");
        },
        expected_month,
    );
    assert!(!statuses.is_empty());
    assert!(statuses.iter().all(|&c| c == 200 || c == 404), "{statuses:?}");
    s.signal("-TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(Instant::now() < deadline, "no graceful shutdown");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The schema of one response of the OpenAPI document, as a validator rooted in the document.
fn validator(doc: &Value, template: &str, method: &str, status: u16) -> jsonschema::Validator {
    let escape = |s: &str| s.replace('~', "~0").replace('/', "~1");
    let mut response = format!("#/paths/{}/{method}/responses/{status}", escape(template));
    // A response shared under components is a `$ref` to it.
    if let Some(shared) = doc.pointer(&response[1..]).and_then(|r| r["$ref"].as_str()) {
        response = shared.to_owned();
    }
    let pointer = format!("{response}/content/{}/schema", escape("application/json"));
    let mut root = doc.clone();
    let target = root.pointer(&pointer[1..]).cloned();
    assert!(target.is_some(), "the document has no schema for {method} {template} {status}");
    root["$ref"] = json!(pointer.replace('{', "%7B").replace('}', "%7D"));
    root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    jsonschema::draft202012::new(&root).expect("the document's schemas compile")
}

#[test]
fn responses_conform_to_the_openapi_document() {
    let s = Server::start(&["--rate-limit", "1000"]);
    let token = s.user("iris", 1000);
    let served = request(&s.addr, "GET", "/api/v1/openapi.json", None, None);
    let doc: Value = serde_json::from_str(include_str!("../../../../schemas/openapi.json")).unwrap();
    assert_eq!(served.body, doc, "the served document is the file");
    let cases: Vec<(&str, &str, Reply)> = vec![
        ("/api/v1/companies/{cnpj}", "get", get(&s, "/api/v1/companies/11222333000181", &token)),
        ("/api/v1/companies/{cnpj}", "get", get(&s, "/api/v1/companies/33444555000181?locale=en", &token)),
        ("/api/v1/companies/{cnpj}", "get", get(&s, "/api/v1/companies/44555666000181?locale=es", &token)),
        ("/api/v1/companies/{cnpj}", "get", get(&s, "/api/v1/companies/11444777000161", &token)),
        ("/api/v1/companies/{cnpj}", "get", get(&s, "/api/v1/companies/123", &token)),
        ("/api/v1/companies/{cnpj}", "get", request(&s.addr, "GET", "/api/v1/companies/11222333000181", None, None)),
        ("/api/v1/companies/search", "get", get(&s, "/api/v1/companies/search?per_page=50", &token)),
        ("/api/v1/companies/search", "get", get(&s, "/api/v1/companies/search?state=AC", &token)),
        ("/api/v1/companies/search", "get", get(&s, "/api/v1/companies/search?per_page=99", &token)),
        ("/api/v1/companies/search", "get", get(&s, "/api/v1/companies/search?state=", &token)),
        ("/api/v1/companies/search", "get", get(&s, "/api/v1/companies/search?state=SP,DF&mei=false", &token)),
        ("/api/v1/companies/count", "get", get(&s, "/api/v1/companies/count?state=SP,DF&has_phone=true", &token)),
        ("/api/v1/companies/count", "get", get(&s, "/api/v1/companies/count?capital_from=1.000,00", &token)),
        ("/api/v1/companies/count", "get", request(&s.addr, "GET", "/api/v1/companies/count", None, None)),
        (
            "/api/v1/companies/search",
            "get",
            get(&s, &format!("/api/v1/companies/search?trading_name={}", "a".repeat(9000)), &token),
        ),
        (
            "/api/v1/companies/batch",
            "post",
            post(
                &s,
                "/api/v1/companies/batch",
                &token,
                &json!({"cnpjs": ["11222333", "x", "11444777000161", "12345678000195", "AB12CD34000184"]}),
            ),
        ),
        ("/api/v1/companies/batch", "post", post(&s, "/api/v1/companies/batch", &token, &json!({"cnpjs": []}))),
        ("/api/v1/reference-data", "get", get(&s, "/api/v1/reference-data?locale=en", &token)),
        ("/api/v1/reference-data", "get", get(&s, "/api/v1/reference-data?locale=xx", &token)),
        ("/api/v1/cities", "get", get(&s, "/api/v1/cities?state=SP&term=campinas", &token)),
        ("/api/v1/cities", "get", get(&s, "/api/v1/cities?page=0", &token)),
        // A first month: no changes (pages of them in module `changes`).
        ("/api/v1/changes", "get", get(&s, "/api/v1/changes?since=2026-01&event=opened,moved", &token)),
        ("/api/v1/changes", "get", get(&s, "/api/v1/changes?event=nope", &token)),
        ("/api/v1/companies/{cnpj}/history", "get", get(&s, "/api/v1/companies/11222333/history", &token)),
        ("/api/v1/companies/{cnpj}/history", "get", get(&s, "/api/v1/companies/11444777000161/history", &token)),
        ("/api/v1/companies/{cnpj}/history", "get", get(&s, "/api/v1/companies/1/history", &token)),
        ("/healthz", "get", request(&s.addr, "GET", "/healthz", None, None)),
        ("/readyz", "get", request(&s.addr, "GET", "/readyz", None, None)),
        ("/api/v1/status", "get", request(&s.addr, "GET", "/api/v1/status", None, None)),
    ];
    // The check can fail: a detail record missing its fields, or with one undocumented, does not conform.
    let detail = validator(&doc, "/api/v1/companies/{cnpj}", "get", 200);
    assert!(!detail.is_valid(&json!({"success": true, "data": {"id": "11222333000181"}})));
    let mut extra = cases_first_detail(&s, &token);
    extra["data"]["surprise"] = json!(1);
    assert!(!detail.is_valid(&extra));
    for (template, method, reply) in cases {
        let v = validator(&doc, template, method, reply.status);
        let errors: Vec<String> =
            v.iter_errors(&reply.body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{method} {template} {}: {errors:?}\n{}", reply.status, reply.body);
    }
}

fn cases_first_detail(s: &Server, token: &str) -> Value {
    let reply = get(s, "/api/v1/companies/11222333000181", token);
    assert_eq!(reply.status, 200);
    reply.body
}

/// Reads `stream` until the server closes it (or `limit` passes): what was read, and when it closed
/// counted from `since` (`None`: still open at `limit`).
fn until_closed(stream: &mut TcpStream, since: Instant, limit: Duration) -> (Vec<u8>, Option<Duration>) {
    stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while since.elapsed() < limit {
        match stream.read(&mut buf) {
            Ok(0) => return (got, Some(since.elapsed())),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return (got, Some(since.elapsed())),
        }
    }
    (got, None)
}

/// Issue 19 item 11: slow clients (nothing sent, partial headers, headers trickled, a short body,
/// an idle keep-alive connection) are closed within their timeout, and meanwhile a normal request
/// is served at once.
#[test]
fn slow_clients_are_cut_off_while_others_are_served() {
    let s = Server::start(&["--header-timeout", "2", "--body-timeout", "2", "--idle-timeout", "3"]);
    let token = s.user("sol", 10);
    let started = Instant::now();
    let connect = || TcpStream::connect(&s.addr).unwrap();
    let mut silent = connect();
    let mut partial = connect();
    partial.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
    let mut short_body = connect();
    let head = format!(
        "POST /api/v1/companies/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: 100\r\n\r\n"
    );
    short_body.write_all(head.as_bytes()).unwrap();
    short_body.write_all(br#"{"cnpjs": ["#).unwrap();
    let mut idle = connect();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    // Headers trickled a byte every 200 ms: activity does not extend the header deadline.
    let trickled = std::thread::spawn({
        let addr = s.addr.clone();
        move || {
            let mut stream = TcpStream::connect(&addr).unwrap();
            let since = Instant::now();
            for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 0123456789abcdef\r\n" {
                if stream.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            until_closed(&mut stream, since, Duration::from_secs(8)).1
        }
    });

    let served = Instant::now();
    let r = get(&s, "/api/v1/companies/11222333000181", &token);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(served.elapsed() < Duration::from_millis(1500), "served in {:?}", served.elapsed());

    // Held until their timeout (2 s), not closed at once, and not much longer.
    let limit = Duration::from_secs(8);
    let in_time = |closed: Option<Duration>| {
        closed.is_some_and(|t| t > Duration::from_millis(1800) && t < Duration::from_millis(3500))
    };
    let (got, closed) = until_closed(&mut silent, started, limit);
    assert!(got.is_empty() && in_time(closed), "silent: {closed:?}");
    let (_, closed) = until_closed(&mut partial, started, limit);
    assert!(in_time(closed), "partial headers: {closed:?}");
    let (got, closed) = until_closed(&mut short_body, started, limit);
    assert!(in_time(closed), "short body: {closed:?}");
    let reply = parse_reply(&got);
    assert_eq!(error_of(&reply), (408, "Request timeout."));
    let (got, closed) = until_closed(&mut idle, started, limit);
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"), "the idle connection was answered first");
    assert!(
        closed.is_some_and(|t| t > Duration::from_millis(2800) && t < Duration::from_millis(4500)),
        "idle: {closed:?}"
    );
    let closed = trickled.join().unwrap();
    assert!(closed.is_some_and(|t| t < Duration::from_millis(3500)), "trickled headers: {closed:?}");
    assert_eq!(s.credits("sol"), (9, 1), "only the normal request was charged");
}

/// Issue 19 item 11: at `--max-connections`, a new connection waits until one closes (here:
/// silent ones, closed by the header timeout), then is served.
#[test]
fn connection_cap_holds_new_connections_until_one_closes() {
    let s = Server::start(&["--max-connections", "2", "--header-timeout", "2"]);
    let silent: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&s.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let r = request(&s.addr, "GET", "/healthz", None, None);
    let waited = started.elapsed();
    assert_eq!(r.status, 200);
    assert!(waited > Duration::from_millis(1500) && waited < Duration::from_secs(5), "waited {waited:?}");
    drop(silent);
    let started = Instant::now();
    assert_eq!(request(&s.addr, "GET", "/healthz", None, None).status, 200);
    assert!(started.elapsed() < Duration::from_secs(1), "served at once when under the cap");
}

/// Issue 19 item 12: HEAD is not a method of the API: 405 with `Allow`, before authentication,
/// never charged (nor counted by the rate limit); every other wrong method alike.
#[test]
fn head_is_method_not_allowed_and_never_charged() {
    let s = Server::start(&[]);
    let token = s.user("heli", 5);
    for path in ["/api/v1/companies/11222333000181", "/api/v1/companies/search?state=SP", "/healthz", "/api/v1/cities"]
    {
        let r = request(&s.addr, "HEAD", path, Some(&token), None);
        assert_eq!((r.status, r.header("allow")), (405, Some("GET")), "HEAD {path}");
        assert!(r.raw.is_empty() && r.header("x-ratelimit-remaining").is_none(), "HEAD {path}");
    }
    for (method, path, allow) in [
        ("DELETE", "/api/v1/cities", "GET"),
        ("POST", "/api/v1/companies/11222333000181", "GET"),
        ("GET", "/api/v1/companies/batch", "POST"),
        ("HEAD", "/api/v1/companies/batch", "POST"),
        ("PUT", "/healthz", "GET"),
    ] {
        let r = request(&s.addr, method, path, Some(&token), None);
        assert_eq!((r.status, r.header("allow")), (405, Some(allow)), "{method} {path}");
        if method != "HEAD" {
            assert_eq!(error_of(&r), (405, "Method not allowed."));
        }
    }
    assert_eq!(request(&s.addr, "HEAD", "/nowhere", None, None).status, 404);
    assert_eq!(s.credits("heli"), (5, 0), "nothing was charged");
    let r = get(&s, "/api/v1/companies/11222333000181", &token);
    assert_eq!(r.header("x-ratelimit-remaining"), Some("99"), "nothing was counted");
}

/// Issue 19 item 13: invalid UTF-8 in the detail path or in a query value is a JSON 400 naming
/// the parameter; an over-long request target is a JSON 414.
#[test]
fn invalid_utf8_in_path_or_query_is_a_400_naming_it() {
    let s = Server::start(&[]);
    let token = s.user("ugo", 5);
    for (path, param) in [
        ("/api/v1/companies/%FF", "cnpj"),
        ("/api/v1/companies/11222333%C3", "cnpj"),
        ("/api/v1/companies/search?trading_name=%FF", "trading_name"),
        ("/api/v1/companies/search?neighborhood=caf%E9", "neighborhood"),
        ("/api/v1/companies/11222333000181?locale=%FFen", "locale"),
        ("/api/v1/cities?term=s%C3o", "term"),
    ] {
        let r = get(&s, path, &token);
        assert_eq!(error_of(&r), (400, "Invalid input parameters"), "{path}");
        assert!(r.body["errors"][param].is_array(), "{path}: {}", r.body);
        assert_eq!(r.header("content-type"), Some("application/json"), "{path}");
    }
    let r = get(&s, "/api/v1/companies/search?state=SP&ignored=%FF", &token);
    assert_eq!(r.status, 200, "an unknown parameter is ignored, decodable or not: {}", r.body);
    let long = format!("/api/v1/companies/search?trading_name={}", "a".repeat(9000));
    let r = get(&s, &long, &token);
    assert_eq!(error_of(&r), (414, "URI too long."));
    assert_eq!(s.credits("ugo"), (4, 1));

    // Below the router: what hyper refuses itself is answered in the envelope too.
    let malformed = exchange(&s.addr, b"GARBAGE\r\n\r\n");
    assert_eq!(error_of(&malformed), (400, "Invalid input parameters"));
    assert!(malformed.body["errors"]["request"].is_array(), "{}", malformed.body);
    let huge = format!("GET /healthz?{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70 * 1024));
    assert_eq!(error_of(&exchange(&s.addr, huge.as_bytes())), (414, "URI too long."));
    let headers: String = (0..200).map(|i| format!("X-{i}: 1\r\n")).collect();
    let many = format!("GET /healthz HTTP/1.1\r\nHost: x\r\n{headers}\r\n");
    assert_eq!(error_of(&exchange(&s.addr, many.as_bytes())), (431, "Request header fields too large."));
    // An HTTP/2 connection preface (prior knowledge): this port speaks HTTP/1.1.
    let h2 = exchange(&s.addr, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00");
    assert_eq!(error_of(&h2), (505, "HTTP version not supported."));
    assert_eq!(h2.header("content-type"), Some("application/json"));
    // A normal keep-alive exchange is untouched: two pipelined requests, then a malformed third.
    let pipelined =
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\nNOPE\r\n\r\n";
    let mut stream = TcpStream::connect(&s.addr).unwrap();
    stream.write_all(pipelined).unwrap();
    let (got, closed) = until_closed(&mut stream, Instant::now(), Duration::from_secs(10));
    let text = String::from_utf8_lossy(&got);
    assert!(closed.is_some(), "closed after the malformed request");
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert!(text.contains("\"openapi\"") && text.contains(r#"{"status":"ok"}"#), "{text}");
}

/// Issue 19 item 14: one rule for every parameter: an empty value (or a blank text filter) is a
/// 400 naming it, never a filter silently dropped.
#[test]
fn empty_values_are_a_400_for_every_parameter() {
    let s = Server::start(&["--rate-limit", "1000"]);
    let token = s.user("vera", 100);
    let search = [
        "business_sector",
        "city_id",
        "city",
        "state",
        "porte_empresa_code",
        "company_size",
        "opening_date_from",
        "opening_date_to",
        "trading_name",
        "neighborhood",
        "zip_code",
        "nature_code",
        "cnpj",
        "situacao_cadastral",
        "any_sector",
        "capital_from",
        "capital_to",
        "has_email",
        "has_phone",
        "simples",
        "mei",
        "head_office",
        "per_page",
        "page",
        "locale",
    ];
    let mut cases: Vec<(String, &str)> =
        search.iter().map(|p| (format!("/api/v1/companies/search?{p}="), *p)).collect();
    cases.extend(search[..22].iter().map(|p| (format!("/api/v1/companies/count?{p}="), *p)));
    cases.extend(["trading_name", "neighborhood", "city"].map(|p| (format!("/api/v1/companies/search?{p}=%20%09"), p)));
    cases.extend(["state", "term", "page", "per_page", "locale"].map(|p| (format!("/api/v1/cities?{p}="), p)));
    cases.push(("/api/v1/companies/11222333000181?locale=".into(), "locale"));
    cases.push(("/api/v1/reference-data?locale".into(), "locale"));
    for (path, param) in &cases {
        let r = get(&s, path, &token);
        assert_eq!(error_of(&r), (400, "Invalid input parameters"), "{path}");
        assert!(r.body["errors"][param].is_array(), "{path}: {}", r.body);
    }
    let r = post(&s, "/api/v1/companies/batch?locale=", &token, &json!({"cnpjs": ["11222333"]}));
    assert!(r.body["errors"]["locale"].is_array(), "{}", r.body);
    assert_eq!(s.credits("vera"), (100, 0));
}

/// Issue 19 item 15: the `Authorization` scheme is case-insensitive (RFC 9110 §11.1).
#[test]
fn bearer_scheme_is_case_insensitive() {
    let s = Server::start(&[]);
    let token = s.user("beto", 0);
    for auth in [format!("bearer {token}"), format!("BEARER {token}"), format!("BeArEr   {token}")] {
        let r = request_with(&s.addr, "GET", "/api/v1/cities", Some(&auth), None);
        assert_eq!(r.status, 200, "{auth}");
    }
    for auth in [format!("Bearer{token}"), format!("Basic {token}"), "bearer ".to_owned(), token.clone()] {
        let r = request_with(&s.addr, "GET", "/api/v1/cities", Some(&auth), None);
        assert_eq!(error_of(&r), (401, "Unauthenticated."), "{auth}");
    }
}

/// Issue 19 item 16: the batch body takes no property but `cnpjs`, as the document's
/// `additionalProperties: false` says.
#[test]
fn batch_body_refuses_unknown_properties() {
    let s = Server::start(&[]);
    let token = s.user("bela", 5);
    let r = post(&s, "/api/v1/companies/batch", &token, &json!({"cnpjs": ["11222333"], "locale": "en"}));
    assert_eq!(error_of(&r), (400, "Invalid input parameters"));
    assert!(r.body["errors"]["locale"].is_array(), "{}", r.body);
    assert_eq!(post(&s, "/api/v1/companies/batch", &token, &json!({"cnpjs": ["11222333"]})).status, 200);
    assert_eq!(s.credits("bela"), (4, 1));
}

/// Issue 19 item 17: output into a closed pipe (`| head -1`) ends quietly, with success.
#[test]
fn closed_pipe_on_stdout_exits_quietly() {
    let s = Server::start(&[]);
    s.user("pipa", 3);
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
        .args(s.accounts.args())
        .args(["accounts", "show", "pipa"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "{:?}: {stderr}", out.status);
}

/// Issue 29: the log is plain text when stderr is not a terminal (a file, a pipe, journald): no
/// ANSI colour codes.
#[test]
fn logs_without_colours_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
        .args(AccountsAt::File(dir.path().join("accounts.sqlite")).args())
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("serving") {
        line.clear();
        assert_ne!(stderr.read_line(&mut line).unwrap(), 0, "the server ended before it logged `serving`");
        assert!(!line.contains('\x1b'), "colour codes in the log: {line:?}");
    }
    assert!(line.contains(" INFO "), "{line:?}");
    let _ = child.kill();
    let _ = child.wait();
}

// ---------------------------------------------------------------------------------------------
// Postgres

/// A new, empty database on the test cluster that `scripts/test` starts; its URL.
fn pg_database() -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = std::env::var("CNPJ_TEST_POSTGRES")
        .expect("CNPJ_TEST_POSTGRES is not set: run the suite with scripts/test, which starts a throwaway Postgres");
    let name = format!("api_{}_{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let mut admin = postgres::Client::connect(&format!("{base}/postgres"), postgres::NoTls).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    format!("{base}/{name}")
}

fn publish(db: &Path, url: &str) {
    cnpj_load::postgres::publish(db, url, "cnpj", 2, &|_| {}).expect("the dataset is published into Postgres");
}

/// A server over the Postgres schema `cnpj` at `url`, with its accounts there too.
fn pg_server(url: &str, extra: &[&str]) -> Server {
    let dataset = vec!["--postgres".into(), url.into(), "--schema".into(), "cnpj".into()];
    Server::spawn(tempfile::tempdir().unwrap(), PathBuf::new(), dataset, AccountsAt::Postgres(url.to_owned()), extra)
}

/// Every detail record, a fixed search suite and batches, in the three locales: the Postgres
/// backend answers with the same status and the same bytes as DuckDB, and so does it with the
/// build's search index (`--search-index`).
#[test]
fn postgres_answers_byte_for_byte_like_duckdb() {
    let mut inputs = vec![root().join("data/sample-dump")];
    let real = root().join("../shared/rfb/samples/real-extract-2026");
    if real.is_dir() {
        inputs.push(real);
    }
    for (n, input) in inputs.into_iter().enumerate() {
        let url = pg_database();
        let duck = {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("registry.duckdb");
            build_dataset(&input, &db);
            let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
            let dataset = vec!["--db".into(), db.clone().into()];
            Server::spawn(dir, db, dataset, accounts, &["--rate-limit", "1000000"])
        };
        publish(&duck.db, &url);
        let pg = pg_server(&url, &["--rate-limit", "1000000"]);
        let (duck_token, pg_token) = (duck.user("pat", 1_000_000), pg.user("pat", 1_000_000));
        // Postgres searching with the build's search index (pages fetched by key).
        let index = cnpj_store::search_index_path(&duck.db);
        let pg_indexed = pg_server(&url, &["--rate-limit", "1000000", "--search-index", index.to_str().unwrap()]);
        let indexed_token = pg_indexed.user("ida", 1_000_000);

        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let mut ids: Vec<String> = client
            .query("SELECT cnpj FROM cnpj.estabelecimentos UNION SELECT cnpj_basico FROM cnpj.empresas", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        ids.sort();
        let some: Vec<&str> = ids.iter().step_by(7).map(String::as_str).take(100).collect();
        // Every record of the fixture dump; every 10th of the real extract's thousands.
        let stride = if n == 0 { 1 } else { 10 };
        let mut gets: Vec<String> = ids.iter().step_by(stride).map(|c| format!("/api/v1/companies/{c}")).collect();
        gets.extend(["00000000000191", "99999999", "123"].map(|c| format!("/api/v1/companies/{c}")));
        for query in [
            "per_page=50",
            "per_page=7&page=2",
            "per_page=3&page=999",
            "state=SP&per_page=20",
            "state=ex",
            "cnpj=11222333",
            "trading_name=comercio",
            "trading_name=pio%20xii",
            "trading_name=100%25",
            "neighborhood=centro",
            "neighborhood=jardim%20america",
            "city=sao%20paulo",
            "city=boa%20esperan%C3%A7a%20do%20norte",
            "city_id=7107",
            "zip_code=01",
            "zip_code=01310",
            "business_sector=4781400",
            "nature_code=2062&situacao_cadastral=2",
            "company_size=05",
            "company_size=01&state=SP",
            "opening_date_from=2010-01-01&opening_date_to=2020-12-31&per_page=25&page=2",
            "situacao_cadastral=08",
            "state=AC",
            "state=SP,EX,AC&situacao_cadastral=2,8",
            "company_size=1,5&city_id=7107,1182",
            "business_sector=4781400,6204000&nature_code=2062,1244",
            "any_sector=6201-5/01,0111301",
            "capital_from=1000&capital_to=50000.50",
            "capital_from=50000.51",
            "capital_to=0",
            "has_email=true&has_phone=false",
            "has_email=false&has_phone=true&per_page=3&page=2",
            "simples=true&mei=false",
            "simples=false&mei=true",
            "head_office=false&state=SP",
            "head_office=true&capital_from=0.01",
        ] {
            gets.push(format!("/api/v1/companies/search?{query}"));
            gets.push(format!("/api/v1/companies/count?{query}"));
        }
        // Partners (contract §14): pages, searches and networks.
        let partners: Vec<String> = client
            .query("SELECT partner_id FROM cnpj.partner_identities ORDER BY partner_id", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        gets.extend(partners.iter().step_by(stride).map(|p| format!("/api/v1/partners/{p}?per_page=2")));
        gets.push(format!("/api/v1/partners/{}?per_page=1&page=2", partners[0]));
        gets.extend(
            partners.iter().step_by(9 * stride).take(12).map(|p| format!("/api/v1/companies/search?partner_id={p}")),
        );
        for query in [
            "per_page=50",
            "name=silva",
            "name=de%20tal",
            "name=a&per_page=5&page=3",
            "type=1",
            "type=2&state=SP",
            "document=***.456.789-**",
            "document=44555666",
        ] {
            gets.push(format!("/api/v1/partners/search?{query}"));
        }
        let companies = ids.iter().filter(|c| c.len() == 8).step_by(5 * stride).take(40);
        gets.extend(companies.map(|c| format!("/api/v1/companies/{c}/network?depth=3")));
        gets.push(format!("/api/v1/companies/{}/network?max_nodes=3&active_only=true", ids[0]));
        gets.push("/api/v1/reference-data".into());
        gets.push("/api/v1/cities?state=SP&per_page=100&page=2".into());
        gets.push("/api/v1/cities?term=sao".into());
        let batches =
            [json!({"cnpjs": some}), json!({"cnpjs": ["00000000000191", ids[0], ids[0], "bad", ids[ids.len() - 1]]})];
        let mut compared = 0;
        for locale in ["pt-br", "en", "es"] {
            for path in &gets {
                let sep = if path.contains('?') { '&' } else { '?' };
                let path = format!("{path}{sep}locale={locale}");
                let (a, b) = (get(&duck, &path, &duck_token), get(&pg, &path, &pg_token));
                assert_eq!(a.status, b.status, "{path}");
                assert!(a.raw == b.raw, "{path}:\nduckdb   {}\npostgres {}", a.body, b.body);
                if path.contains("/search?") || path.contains("/count?") {
                    let c = get(&pg_indexed, &path, &indexed_token);
                    assert!(a.raw == c.raw, "{path}:\nduckdb   {}\npostgres with the index {}", a.body, c.body);
                }
                compared += 1;
            }
            for batch in &batches {
                let path = format!("/api/v1/companies/batch?locale={locale}");
                let (a, b) = (post(&duck, &path, &duck_token, batch), post(&pg, &path, &pg_token, batch));
                assert_eq!((a.status, &a.raw), (b.status, &b.raw), "{path} {batch}");
                compared += 1;
            }
        }
        assert!(compared > 3 * 40, "{compared} responses compared");
        assert_eq!(duck.credits("pat"), pg.credits("pat"), "the same credits were charged");
    }
}

/// Two replicas over one Postgres: concurrent batches never overspend, and the rate limit is one.
#[test]
fn postgres_replicas_share_credits_and_the_rate_limit() {
    let url = pg_database();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    publish(&db, &url);
    let replicas = [pg_server(&url, &["--rate-limit", "1000"]), pg_server(&url, &["--rate-limit", "1000"])];
    let token = replicas[0].user("eva", 30);
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..40)
            .map(|i| {
                let (replica, token) = (&replicas[i % 2], &token);
                scope.spawn(move || {
                    let body = json!({"cnpjs": ["11222333000181", "44555666", "nope"]});
                    post(replica, "/api/v1/companies/batch", token, &body).status
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = statuses.iter().filter(|&&c| c == 200).count();
    let refused = statuses.iter().filter(|&&c| c == 402).count();
    assert_eq!((ok, refused), (15, 25), "{statuses:?}");
    assert_eq!(replicas[1].credits("eva"), (0, 30), "balance and the debit ledger agree");

    let limited = [pg_server(&url, &["--rate-limit", "4"]), pg_server(&url, &["--rate-limit", "4"])];
    let token = limited[0].user("rui", 100);
    let seen: Vec<(u16, Option<String>)> = (0..6)
        .map(|i| {
            let r = get(&limited[i % 2], "/api/v1/cities?per_page=1", &token);
            (r.status, r.header("x-ratelimit-remaining").map(str::to_owned))
        })
        .collect();
    let statuses: Vec<u16> = seen.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429], "{seen:?}");
    assert_eq!(seen[3].1.as_deref(), Some("0"));
}

/// A new publication is served without a restart; rollback brings the previous one back.
#[test]
fn postgres_publication_swap_and_rollback() {
    let url = pg_database();
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first.duckdb"), dir.path().join("second.duckdb"));
    build_dataset(&root().join("data/sample-dump"), &first);
    publish(&first, &url);
    let s = pg_server(&url, &["--rate-limit", "100000", "--reload-check", "1"]);
    let token = s.user("ivo", 1_000_000);
    let ready = request(&s.addr, "GET", "/readyz", None, None);
    assert_eq!((ready.status, ready.body), (200, json!({"status": "ready"})), "a Postgres dataset answers");
    let month = || served_month(&s);
    assert_eq!(month(), "2026-09");
    // The second dataset: a small synthetic month.
    let synth = cnpj_synth::SynthOptions {
        month: "2026-10".into(),
        ..cnpj_synth::SynthOptions::new(0.00002, dir.path().join("synth"))
    };
    cnpj_synth::generate(&synth).unwrap();
    build_dataset(&synth.out, &second);
    let statuses = under_load(&s, &token, || publish(&second, &url), "2026-10");
    assert!(!statuses.is_empty() && statuses.iter().all(|&c| c == 200 || c == 404), "{statuses:?}");
    cnpj_load::postgres::rollback(&url, "cnpj").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while month() != "2026-09" {
        assert!(Instant::now() < deadline, "the rollback was not served");
        std::thread::sleep(Duration::from_millis(50));
    }
    let err = cnpj_load::postgres::rollback(&url, "cnpj").unwrap_err();
    assert!(matches!(err, cnpj_load::postgres::PublishError::NoPrevious(_)), "{err}");
}

/// Reference data in the three locales, as served (insta snapshots, reviewed by hand).
#[test]
fn reference_data_in_three_locales() {
    let s = Server::start(&[]);
    let token = s.user("rita", 0);
    for locale in ["pt-br", "en", "es"] {
        let r = get(&s, &format!("/api/v1/reference-data?locale={locale}"), &token);
        assert_eq!(r.status, 200);
        insta::assert_json_snapshot!(format!("reference_data_{locale}"), r.body);
    }
}
