//! Operating the service: the probes (`/healthz`, `/readyz`, also over Postgres accounts that stop
//! answering), `/api/v1/status` and the `X-Dataset-Month` header; the metrics listener (series
//! that do not grow with the CNPJs asked for, `promtool check metrics`, a real Prometheus scraping
//! it); request ids and the JSON log; SIGTERM letting 50 slow searches finish; a reader that closes
//! the server's stdout after its first URL.

use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::{
    AccountsAt, Reply, Server, build_dataset, error_of, exchange, exited, get, pg_database, post, request, root,
};

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// The metrics listener's exposition.
pub(super) fn scrape(s: &Server) -> String {
    let r = request(s.metrics.as_deref().expect("a metrics listener"), "GET", "/metrics", None, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    String::from_utf8(r.raw).unwrap()
}

/// The series of an exposition: each one's name and labels, without the value.
fn series(text: &str) -> std::collections::BTreeSet<&str> {
    text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).map(|l| l.rsplit_once(' ').unwrap().0).collect()
}

/// Label names and values.
type Labels<'a> = &'a [(&'a str, &'a str)];

/// The sum of the samples of `name` whose labels include `labels` (`None`: no such sample).
pub(super) fn value(text: &str, name: &str, labels: Labels) -> Option<f64> {
    let mut sum = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((id, number)) = line.rsplit_once(' ') else { continue };
        let (metric, set) = id.split_once('{').unwrap_or((id, ""));
        if metric == name && labels.iter().all(|(k, v)| set.contains(&format!("{k}=\"{v}\""))) {
            *sum.get_or_insert(0.0) += number.parse::<f64>().unwrap();
        }
    }
    sum
}

/// A 14-character CNPJ with valid check digits and base `9` + `n` (none such in the sample dump).
fn cnpj(n: u32) -> String {
    let base = format!("9{n:07}0001");
    let dv = cnpj_model::check_digits(base.as_bytes().try_into().unwrap()).unwrap();
    format!("{base}{}", std::str::from_utf8(&dv).unwrap())
}

#[test]
fn probes_status_and_the_dataset_month_header() {
    let started = now_secs();
    let s = Server::start(&[]);
    let token = s.user("olga", 10);
    let health = request(&s.addr, "GET", "/healthz", None, None);
    assert_eq!((health.status, &health.body), (200, &json!({"status": "ok"})));
    let ready = request(&s.addr, "GET", "/readyz", None, None);
    assert_eq!((ready.status, &ready.body), (200, &json!({"status": "ready"})));

    // Public and free: no token, no rate-limit headers.
    let status = request(&s.addr, "GET", "/api/v1/status", None, None);
    assert_eq!(status.status, 200, "{}", status.body);
    assert!(status.header("x-ratelimit-remaining").is_none());
    let store = cnpj_store::Store::open(&cnpj_store::Source::DuckDb(s.db.clone())).unwrap();
    let data = &status.body["data"];
    assert_eq!(data["dataset_month"], "2026-09");
    assert!(!store.build_id().is_empty());
    assert_eq!(
        (data["build_id"].as_str(), data["built_at"].as_str()),
        (Some(store.build_id()), Some(store.built_at()))
    );
    let since = cnpj_model::utc_seconds(data["served_since"].as_str().unwrap()).unwrap();
    assert!((started..=now_secs()).contains(&since), "{since}");

    // Every response of a route that reads the dataset names its month; the others do not.
    let month = |r: &Reply| r.header("x-dataset-month").map(str::to_owned);
    for path in [
        "/api/v1/companies/11222333000181",
        "/api/v1/companies/11444777000161",
        "/api/v1/companies/11222333/history",
        "/api/v1/companies/search?state=SP",
        "/api/v1/changes",
        "/api/v1/reference-data",
        "/api/v1/cities",
    ] {
        let r = get(&s, path, &token);
        assert_eq!(month(&r).as_deref(), Some("2026-09"), "{path}: {} {}", r.status, r.body);
    }
    let batch = post(&s, "/api/v1/companies/batch", &token, &json!({"cnpjs": ["11222333"]}));
    assert_eq!((batch.status, month(&batch).as_deref()), (200, Some("2026-09")));
    assert_eq!(month(&status).as_deref(), Some("2026-09"));
    for path in ["/healthz", "/readyz", "/api/v1/openapi.json", "/nowhere"] {
        assert_eq!(month(&request(&s.addr, "GET", path, None, None)), None, "{path}");
    }

    // A swap (SIGHUP) resets `served_since`.
    std::thread::sleep(Duration::from_millis(1100));
    s.signal("-HUP");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let data = request(&s.addr, "GET", "/api/v1/status", None, None).body["data"].clone();
        if cnpj_model::utc_seconds(data["served_since"].as_str().unwrap()).unwrap() > since {
            assert_eq!(data["build_id"].as_str(), Some(store.build_id()), "the same file, reopened");
            break;
        }
        assert!(Instant::now() < deadline, "served_since was not reset by the swap");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The OpenAPI document has the probes and status (no token) and the month header on every
/// response that reads the dataset (their bodies are validated in
/// `responses_conform_to_the_openapi_document`).
#[test]
fn the_document_names_the_probes_and_the_month_header() {
    let doc: Value = serde_json::from_str(include_str!("../../../../schemas/openapi.json")).unwrap();
    for path in ["/healthz", "/readyz", "/api/v1/status"] {
        assert_eq!(doc["paths"][path]["get"]["security"], json!([]), "{path} needs no token");
    }
    for (path, method) in [
        ("/api/v1/companies/search", "get"),
        ("/api/v1/companies/{cnpj}", "get"),
        ("/api/v1/companies/{cnpj}/history", "get"),
        ("/api/v1/companies/batch", "post"),
        ("/api/v1/changes", "get"),
        ("/api/v1/watchlists/{id}/events", "get"),
        ("/api/v1/reference-data", "get"),
        ("/api/v1/cities", "get"),
        ("/api/v1/status", "get"),
    ] {
        let header = &doc["paths"][path][method]["responses"]["200"]["headers"]["X-Dataset-Month"];
        assert_eq!(header["$ref"], "#/components/headers/DatasetMonth", "{method} {path}");
    }
}

/// Accounts in Postgres that stop answering (connections refused): `/readyz` is a 503 naming the
/// accounts store, `/healthz` still a 200; ready again once Postgres takes connections.
#[test]
fn readyz_is_a_503_while_the_accounts_store_does_not_answer() {
    let url = pg_database();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let dataset = vec!["--db".into(), db.clone().into()];
    let s = Server::spawn(dir, db, dataset, AccountsAt::Postgres(url.clone()), &[]);
    assert_eq!(request(&s.addr, "GET", "/readyz", None, None).status, 200);
    let (base, name) = url.rsplit_once('/').unwrap();
    let mut admin = postgres::Client::connect(&format!("{base}/postgres"), postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false;
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        ))
        .unwrap();
    for _ in 0..2 {
        let r = request(&s.addr, "GET", "/readyz", None, None);
        assert_eq!(error_of(&r), (503, "Not ready: the accounts store does not answer."));
    }
    assert_eq!(request(&s.addr, "GET", "/healthz", None, None).status, 200);
    admin.batch_execute(&format!("ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")).unwrap();
    let r = request(&s.addr, "GET", "/readyz", None, None);
    assert_eq!((r.status, r.body), (200, json!({"status": "ready"})));
}

/// 10,000 different CNPJs asked for (and 1,000 paths no route matches): the metrics have the same
/// series after 100 as after 10,000 (the route template is a label, never the path).
#[test]
fn metrics_series_do_not_grow_with_the_cnpjs_asked_for() {
    let s = Server::start(&["--metrics-listen", "127.0.0.1:0", "--rate-limit", "1000000"]);
    let token = s.user("lia", 0);
    let ask = |numbers: std::ops::Range<u32>| {
        std::thread::scope(|scope| {
            for thread in 0..4 {
                let (s, token, numbers) = (&s, &token, numbers.clone());
                scope.spawn(move || {
                    for n in numbers.filter(|n| n % 4 == thread) {
                        let r = get(s, &format!("/api/v1/companies/{}", cnpj(n)), token);
                        assert_eq!(r.status, 404, "{}", r.body);
                        if n % 10 == 0 {
                            assert_eq!(request(&s.addr, "GET", &format!("/nowhere/{n}"), None, None).status, 404);
                        }
                    }
                });
            }
        });
    };
    ask(0..100);
    let first = scrape(&s);
    ask(100..10_000);
    let text = scrape(&s);
    assert_eq!(series(&first), series(&text), "the series after 100 CNPJs and after 10,000");
    let detail = [("route", "/api/v1/companies/{cnpj}"), ("method", "GET"), ("status", "404")];
    assert_eq!(value(&text, "cnpj_http_requests_total", &detail), Some(10_000.0));
    assert_eq!(value(&text, "cnpj_http_requests_total", &[("route", "unmatched")]), Some(1_000.0));
    assert!(!text.contains(&cnpj(5_000)) && !text.contains("/nowhere/"), "no path in a label");
}

#[test]
fn a_reader_of_the_first_url_only_does_not_stop_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let mut child = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
        .args(AccountsAt::File(dir.path().join("accounts.sqlite")).args())
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    // The first line only, and the pipe closed (as `| head -1` does).
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let mut child = Killed(child);
    let addr = line.trim().trim_start_matches("http://").to_owned();
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.0.try_wait().unwrap().is_none(), "the server is still running");
    assert_eq!(request(&addr, "GET", "/healthz", None, None).status, 200);
}

/// Kills a process it holds when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port free on the loopback interface (for a program that takes no port 0).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Requests that each series counts; their values; `promtool check metrics` on the exposition;
/// then a real Prometheus (Debian's `prometheus`) scraping the listener every second until its
/// query API returns the samples.
#[test]
fn a_real_prometheus_scrapes_the_metrics() {
    let s = Server::start(&["--metrics-listen", "127.0.0.1:0", "--rate-limit", "6"]);
    let (poor, rich) = (s.user("pia", 1), s.user("rico", 100));
    assert_eq!(get(&s, "/api/v1/companies/11222333000181", &poor).status, 200);
    assert_eq!(get(&s, "/api/v1/companies/11222333000181", &poor).status, 402);
    assert_eq!(request(&s.addr, "GET", "/api/v1/cities", None, None).status, 401);
    let index = get(&s, "/api/v1/companies/search?trading_name=pio%20xii", &rich);
    assert_eq!((index.status, index.body["total"].as_u64()), (200, Some(2)));
    // A term without a letter or digit: the index cannot answer it, SQL does.
    assert_eq!(get(&s, "/api/v1/companies/search?trading_name=%25", &rich).status, 200);
    for _ in 0..2 {
        assert_eq!(post(&s, "/api/v1/companies/batch", &rich, &json!({"cnpjs": ["11222333"]})).status, 200);
    }
    let statuses: Vec<u16> = (0..3).map(|_| get(&s, "/api/v1/cities", &rich).status).collect();
    assert_eq!(statuses, [200, 200, 429]);

    let text = scrape(&s);
    let build_id = request(&s.addr, "GET", "/api/v1/status", None, None).body["data"]["build_id"].clone();
    let expected: [(&str, Labels, f64); 13] = [
        ("cnpj_http_requests_total", &[("route", "/api/v1/companies/search"), ("status", "200")], 2.0),
        ("cnpj_http_requests_total", &[("route", "/api/v1/cities"), ("method", "GET"), ("status", "429")], 1.0),
        ("cnpj_http_refusals_total", &[("reason", "unauthenticated")], 1.0),
        ("cnpj_http_refusals_total", &[("reason", "insufficient_credits")], 1.0),
        ("cnpj_http_refusals_total", &[("reason", "rate_limited")], 1.0),
        ("cnpj_credits_charged_total", &[("endpoint", "detail")], 1.0),
        ("cnpj_credits_charged_total", &[("endpoint", "batch")], 2.0),
        ("cnpj_searches_total", &[("answered_by", "index")], 1.0),
        ("cnpj_searches_total", &[("answered_by", "sql")], 1.0),
        ("cnpj_batch_cache_lookups_total", &[("result", "miss")], 1.0),
        ("cnpj_batch_cache_lookups_total", &[("result", "hit")], 1.0),
        ("cnpj_http_request_duration_seconds_count", &[("route", "/api/v1/companies/batch")], 2.0),
        ("cnpj_dataset_info", &[("month", "2026-09"), ("build_id", build_id.as_str().unwrap())], 1.0),
    ];
    for (name, labels, expected) in expected {
        assert_eq!(value(&text, name, labels), Some(expected), "{name} {labels:?}\n{text}");
    }
    assert_eq!(value(&text, "cnpj_http_requests_in_flight", &[]), Some(0.0));
    let charges = value(&text, "cnpj_accounts_duration_seconds_count", &[("operation", "charge")]);
    assert!(charges.is_some_and(|n| n >= 4.0), "{charges:?}");
    let age = value(&text, "cnpj_dataset_age_seconds", &[]).unwrap();
    assert!((0.0..3600.0).contains(&age), "{age}");

    promtool_check_metrics(&text);
    let query = "cnpj_http_requests_total%7Bstatus%3D%22429%22%7D";
    let result = scraped_by_prometheus(s.metrics.as_deref().unwrap(), query);
    assert_eq!(result["metric"]["route"], "/api/v1/cities", "{result}");
    assert_eq!(result["metric"]["job"], "cnpj-api", "{result}");
    assert_eq!(result["value"][1], "1", "{result}");
}

/// `promtool check metrics` on an exposition: it must find no problem.
fn promtool_check_metrics(text: &str) {
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (scripts/setup-test-deps installs it)");
    promtool.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let checked = promtool.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&checked.stdout), String::from_utf8_lossy(&checked.stderr));
    assert!(checked.status.success(), "promtool check metrics: {said}\n{text}");
}

/// Starts Prometheus on loopback, scraping `target` every second, until its query API answers
/// `query` (URL-encoded) with a sample (within 90 s): the first one.
fn scraped_by_prometheus(target: &str, query: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: cnpj-api\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let prometheus_addr = format!("127.0.0.1:{}", free_port());
    let log = dir.path().join("prometheus.log");
    let _prometheus = Killed(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={prometheus_addr}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("prometheus runs (scripts/setup-test-deps installs it)"),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if TcpStream::connect(&prometheus_addr).is_ok() {
            let r = request(&prometheus_addr, "GET", &format!("/api/v1/query?query={query}"), None, None);
            if r.status == 200 && r.body["data"]["result"].as_array().is_some_and(|a| !a.is_empty()) {
                return r.body["data"]["result"][0].clone();
            }
        }
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(Instant::now() < deadline, "Prometheus returned no samples within 90 s; its log:\n{said}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A request with `X-Request-Id: id` (and the token, when given).
fn with_request_id(addr: &str, path: &str, token: Option<&str>, id: &str) -> Reply {
    let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nX-Request-Id: {id}\r\n{auth}\r\n");
    exchange(addr, head.as_bytes())
}

/// A sane request id is sent back, any other replaced by a new one; with `--log-format json` each
/// request is one JSON line naming its id, route, status, latency, user and credits, and never
/// the token; an MCP call too, and nothing more of it.
#[test]
fn request_ids_are_kept_or_replaced_and_logged_in_json() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&root().join("data/sample-dump"), &db);
    let log = dir.path().join("stderr.log");
    let stderr = std::fs::File::create(&log).unwrap();
    let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
    let dataset = vec!["--db".into(), db.clone().into()];
    let mut s = Server::launch(dir, db, dataset, accounts, &["--log-format", "json"], |command| {
        command.env("RUST_LOG", "info").stderr(stderr);
    });
    let token = s.user("ivo", 5);

    let kept = with_request_id(&s.addr, "/api/v1/companies/11222333000181", Some(&token), "trace-1.A_b");
    assert_eq!((kept.status, kept.header("x-request-id")), (200, Some("trace-1.A_b")));
    let new_id = |r: &Reply| {
        let id = r.header("x-request-id").unwrap().to_owned();
        assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        id
    };
    let long = "a".repeat(65);
    let mut ids = Vec::new();
    for insane in ["bad/id", "two words", long.as_str()] {
        let r = with_request_id(&s.addr, "/api/v1/cities", Some(&token), insane);
        assert_eq!(r.status, 200);
        ids.push(new_id(&r));
    }
    let call = super::mcp::mcp_post(&s, &token, &super::mcp::initialize("log-probe-client"));
    assert_eq!(call.status, 200, "{}", call.body);
    let fake = "cnpj_0123456789abcdef0123456789abcdef";
    let refused = request(&s.addr, "GET", "/api/v1/cities", Some(fake), None);
    assert_eq!(refused.status, 401);
    ids.push(new_id(&refused));
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "each new id is new");

    s.signal("-TERM");
    assert!(exited(&mut s), "exit 0");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("every log line is JSON")).collect();
    let line = |id: &str| {
        let found = lines.iter().find(|l| l["request_id"] == id && l["message"] == "request");
        found.unwrap_or_else(|| panic!("no log line for {id}:\n{text}")).clone()
    };
    let detail = line("trace-1.A_b");
    assert_eq!(
        (&detail["method"], &detail["route"], &detail["status"], &detail["credits"]),
        (&json!("GET"), &json!("/api/v1/companies/{cnpj}"), &json!(200), &json!(1)),
        "{detail}"
    );
    assert!(detail["latency_ms"].is_f64() && detail["user_id"].is_i64(), "{detail}");
    assert!(detail["timestamp"].as_str().is_some_and(|t| t.starts_with("20")), "{detail}");
    let unknown = line(refused.header("x-request-id").unwrap());
    assert_eq!((&unknown["status"], unknown.get("user_id")), (&json!(401), None), "{unknown}");
    assert!(!text.contains(&token) && !text.contains(fake), "a token in the log:\n{text}");
    // An MCP call is one line, as a REST request is: none of rmcp's, which name the client.
    let mcp = line(call.header("x-request-id").unwrap());
    assert_eq!((&mcp["route"], &mcp["status"]), (&json!("/mcp"), &json!(200)), "{mcp}");
    let about: Vec<&Value> = lines
        .iter()
        .filter(|l| l["route"] == "/mcp" || l["target"].as_str().is_some_and(|t| t.starts_with("rmcp")))
        .collect();
    assert_eq!(about.len(), 1, "{about:#?}");
    assert!(!text.contains("log-probe-client"), "the client's info in the log:\n{text}");
}

/// 50 searches by SQL (no search index; a big enough synthetic month, the budget lifted) in flight
/// at SIGTERM: no new connection is accepted, all 50 are answered 200, the debits are in the
/// accounts file (its log emptied) and the process exits 0.
#[test]
fn sigterm_lets_the_requests_in_flight_finish() {
    let dir = tempfile::tempdir().unwrap();
    let synth = cnpj_synth::SynthOptions::new(0.003, dir.path().join("synth"));
    cnpj_synth::generate(&synth).unwrap();
    let db = dir.path().join("registry.duckdb");
    build_dataset(&synth.out, &db);
    let wal = dir.path().join("accounts.sqlite-wal");
    let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
    let dataset = vec!["--db".into(), db.clone().into()];
    let extra =
        ["--no-search-index", "--search-budget", "600", "--rate-limit", "1000", "--metrics-listen", "127.0.0.1:0"];
    let mut s = Server::spawn(dir, db, dataset, accounts, &extra);
    let token = s.user("tess", 1000);
    // Most names hold an `a`: every match counted, then sorted for a page deep in them.
    let search = "/api/v1/companies/search?trading_name=a&per_page=50&page=1000";
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let answers: Vec<_> = (0..50).map(|_| scope.spawn(|| get(&s, search, &token).status)).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        let in_flight = loop {
            let text = scrape(&s);
            let running = value(&text, "cnpj_http_requests_in_flight", &[]).unwrap_or(0.0);
            let answered = value(&text, "cnpj_http_requests_total", &[("route", "/api/v1/companies/search")]);
            if running + answered.unwrap_or(0.0) >= 50.0 {
                break running;
            }
            assert!(Instant::now() < deadline, "the 50 searches did not all arrive");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(in_flight >= 40.0, "only {in_flight} of 50 searches still running at SIGTERM: not slow enough");
        s.signal("-TERM");
        let refused_by = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(&s.addr).is_ok() {
            assert!(Instant::now() < refused_by, "new connections still accepted 5 s after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        answers.into_iter().map(|a| a.join().unwrap()).collect()
    });
    assert_eq!(statuses, [200; 50]);
    assert!(exited(&mut s), "exit 0");
    assert_eq!(std::fs::metadata(&wal).map_or(0, |m| m.len()), 0, "the accounts' log was written into the file");
    assert_eq!(s.credits("tess"), (950, 50));
}
