//! Watchlists at scale (not a test): every list with a webhook matched against the served month
//! when the API starts, and one big list's events.
//!
//! The harness generates `CNPJ_BENCH_LISTS` lists (default 10,000) of `CNPJ_BENCH_ENTRIES`
//! entries in all (default 1,000,000) in a SQLite accounts store, drawn at random from the
//! dataset's establishments (three in ten as their company's base; one list in five follows four
//! events only), each list a user's, with a webhook; and one more user with a list of
//! `CNPJ_BENCH_BIG` entries (default 100,000) and credits. Then, per server (this binary, and the
//! baseline binary `CNPJ_BENCH_BASELINE_API` when set, on a copy of the same store):
//! 1. `cnpj-api serve` on the dataset; the month's deliveries are made at the sender's first tick.
//!    Printed: seconds from the start until they are all made (this binary's own log line gives
//!    its matching time; the baseline's are counted in the store), the process' peak RSS, and the
//!    lists, deliveries and events made;
//! 2. the big list's events (`GET /api/v1/watchlists/{id}/events`) of the newest month, an older
//!    one and `since` a year back, page 1 and a deep page, each `CNPJ_BENCH_REPEAT` times (default
//!    20): median and p99 ms, and the total; then the first page of each month not asked for yet
//!    (each finds the list's rows of its month), and every page of one of them in turn.
//!
//! A history fabricated without `change_keys` (`month20.py`, `history24.py`) is given them first,
//! as a build gives them to a history it carries over (`cnpj_load::key_history`).
//!
//! The two stores' deliveries must be equal, id for id and body for body.
//!
//! Run: `CNPJ_BENCH_DB=<a dataset built with --previous> cargo bench -p cnpj-api --bench watching`
//! (without `CNPJ_BENCH_DB`: the sample dump's two months, built here).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cnpj_accounts::{Accounts, NewWatchlist, Plans, WatchlistChange};

mod common;

use common::{env_or, memory_mb};

/// The events a list in five follows (the others follow every event).
const SOME_EVENTS: [&str; 4] = ["status_changed", "moved", "partner_entered", "partner_left"];

/// `n` entries drawn at random from the dataset's establishments, three in ten as a base.
fn sample_entries(db: &Path, n: usize) -> Vec<String> {
    let config = duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap();
    let conn = duckdb::Connection::open_with_flags(db, config).expect("the dataset opens");
    let sql = format!("SELECT cnpj FROM estabelecimentos USING SAMPLE reservoir({n} ROWS) REPEATABLE (7)");
    let mut stmt = conn.prepare(&sql).unwrap();
    let cnpjs = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap);
    cnpjs.enumerate().map(|(i, c)| if i % 10 < 3 { c[..8].to_owned() } else { c }).collect()
}

/// The store: `lists` users with a list each of `entries` over all, with webhooks; one user
/// (`big`) with the list of `big` entries and a token (returned with the list's id).
fn generate(path: &Path, sample: &[String], lists: usize, big: usize) -> (String, i64) {
    // A plan that lets the big list be (a change adds 1,000 CNPJs at most).
    let accounts = Accounts::open(path).unwrap().with_plans(Plans::free(1_000_000, big as u32));
    let (small, large) = sample.split_at(sample.len() - big);
    let per_list = small.len().div_ceil(lists);
    let some: Vec<String> = SOME_EVENTS.iter().map(|e| e.to_string()).collect();
    for (i, cnpjs) in small.chunks(per_list).enumerate() {
        let user = accounts.create_user(&format!("user{i}"), 0).unwrap();
        let events = if i % 5 == 4 { &some[..] } else { &[] };
        let url = format!("https://hooks.example.com/{i}");
        let list = NewWatchlist { name: "suppliers", cnpjs, events, webhook_url: Some(&url) };
        accounts.create_watchlist(user.id, &list).unwrap();
    }
    let user = accounts.create_user("big", 1_000_000_000).unwrap();
    let (first, rest) = large.split_at(large.len().min(1000));
    let list = NewWatchlist { name: "big", cnpjs: first, events: &[], webhook_url: None };
    let id = accounts.create_watchlist(user.id, &list).unwrap().watchlist.id;
    for add in rest.chunks(1000) {
        accounts.update_watchlist(user.id, id, &WatchlistChange { add, ..Default::default() }).unwrap();
    }
    (accounts.issue_token("big", None).unwrap(), id)
}

/// A running `cnpj-api serve`, its address, and its log lines (stderr).
struct Server {
    child: Child,
    addr: String,
    log: mpsc::Receiver<String>,
}

impl Server {
    fn start(binary: &Path, accounts: &Path, db: &Path) -> Server {
        let mut child = Command::new(binary)
            .arg("--accounts")
            .arg(accounts)
            .args(["serve", "--listen", "127.0.0.1:0", "--rate-limit", "4000000000", "--webhook-interval", "3600"])
            .arg("--db")
            .arg(db)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (send, log) = mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || stderr.lines().map_while(Result::ok).try_for_each(|l| send.send(l)));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        Server { child, addr: line.trim().trim_start_matches("http://").to_owned(), log }
    }

    /// The status and body of a GET with the token.
    fn get(&self, path: &str, token: &str) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let status = std::str::from_utf8(&raw[9..12]).unwrap().parse().unwrap();
        let at = raw.windows(4).position(|w| w == b"\r\n\r\n").map_or(raw.len(), |p| p + 4);
        (status, raw[at..].to_vec())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Deliveries of a store: (lists, deliveries, events), and every (id, body).
fn deliveries(path: &Path) -> ((i64, i64, i64), BTreeMap<String, String>) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let counts = conn
        .query_row(
            "SELECT count(DISTINCT watchlist_id), count(*), coalesce(sum(json_array_length(body, '$.events')), 0) FROM deliveries",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap_or((0, 0, 0));
    let mut stmt = conn.prepare("SELECT id, body FROM deliveries").unwrap();
    let bodies = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
    (counts, bodies)
}

/// Deliveries not yet attempted.
fn pending(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT count(*) FROM deliveries WHERE status = 'pending'", [], |r| r.get(0)).unwrap_or(0)
}

/// Waits until the month's deliveries are made: this binary's log line (its `seconds`
/// returned), or, without one (`expected`: the deliveries to wait for), their count in the store.
fn made(server: &Server, accounts: &Path, expected: Option<i64>, limit: Duration) -> Option<f64> {
    let started = Instant::now();
    while started.elapsed() < limit {
        match expected {
            None => {
                if let Ok(line) = server.log.recv_timeout(Duration::from_millis(100))
                    && line.contains("watchlists matched against the month")
                {
                    let seconds = line.split("seconds=").nth(1)?.split_whitespace().next()?;
                    return seconds.parse().ok();
                }
            }
            Some(n) => {
                while server.log.try_recv().is_ok() {}
                if deliveries(accounts).0.1 >= n {
                    return Some(started.elapsed().as_secs_f64());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    None
}

/// The big list's events: each query `repeat` times (the first request apart: it finds the
/// list's rows, the others page them), then every page of the newest month in turn; median and
/// p99 ms, and the total.
fn events_suite(server: &Server, token: &str, id: i64, months: &[String], repeat: usize) {
    let [newest, older, year_back] =
        [1, months.len() / 2 + 1, 12].map(|back| &months[months.len().saturating_sub(back)]);
    let queries = [
        ("month", format!("month={newest}")),
        ("month, page 5", format!("month={newest}&page=5")),
        ("older month", format!("month={older}")),
        ("since a year back", format!("since={year_back}")),
        ("since, page 20", format!("since={year_back}&page=20")),
    ];
    let time = |path: &str| -> (f64, serde_json::Value) {
        let sent = Instant::now();
        let (status, body) = server.get(path, token);
        let ms = sent.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        (ms, serde_json::from_slice::<serde_json::Value>(&body).unwrap())
    };
    let summary = |mut times: Vec<f64>| -> String {
        times.sort_by(f64::total_cmp);
        let p99 = times[((times.len() as f64 * 0.99).ceil() as usize).clamp(1, times.len()) - 1];
        format!("median {:>7.2} ms  p99 {p99:>7.2} ms", times[times.len() / 2])
    };
    for (name, query) in queries {
        let path = format!("/api/v1/watchlists/{id}/events?{query}&per_page=50");
        let (first, body) = time(&path);
        let times: Vec<f64> = (1..repeat).map(|_| time(&path).0).collect();
        println!("  events {name:<18} total {:>6}  first {first:>8.2} ms, then {}", body["total"], summary(times));
    }
    // The first page of each month not asked for yet, newest first: each finds the list's rows.
    let asked = [newest, older, year_back];
    let unasked = &months[months.len().saturating_sub(3)];
    let fresh: Vec<f64> = months
        .iter()
        .rev()
        .filter(|m| !asked.contains(m) && *m != unasked)
        .map(|m| time(&format!("/api/v1/watchlists/{id}/events?month={m}&per_page=50")).0)
        .collect();
    if !fresh.is_empty() {
        println!("  events, the first page of {} months not asked for yet: {}", fresh.len(), summary(fresh.clone()));
    }
    // A month not asked for yet: its first page finds the list's rows, the others page them.
    let path = |page: u64| format!("/api/v1/watchlists/{id}/events?month={unasked}&per_page=50&page={page}");
    let (first, body) = time(&path(1));
    let last = body["last_page"].as_u64().unwrap_or(1);
    let times: Vec<f64> = std::iter::once(first).chain((2..=last).map(|p| time(&path(p)).0)).collect();
    println!("  events of {unasked}, its {last} pages in turn, the first {first:.2} ms: {}", summary(times));
}

/// The peak RSS (MB) of a server on the dataset with an empty accounts store, once it answers.
fn idle_peak(binary: &Path, db: &Path) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(binary, &dir.path().join("accounts.sqlite"), db);
    assert_eq!(server.get("/api/v1/status", "none").0, 200);
    std::thread::sleep(Duration::from_secs(2));
    memory_mb(server.child.id(), "VmHWM")
}

/// The months of the dataset's history, oldest first.
fn history_months(db: &Path) -> Vec<String> {
    let conn = duckdb::Connection::open_in_memory().unwrap();
    let history = cnpj_store::history_path(db);
    conn.execute_batch(&format!("ATTACH '{}' AS h (READ_ONLY)", history.display())).unwrap();
    let mut stmt = conn.prepare("SELECT month FROM h.change_companies ORDER BY month").unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
}

/// One server's run: the deliveries made (returned, as `deliveries` gives them) and the events.
fn run(
    name: &str,
    binary: &Path,
    accounts: &Path,
    db: &Path,
    expected: Option<i64>,
    big: (&str, i64),
) -> (i64, i64, i64) {
    let limit = Duration::from_secs(env_or("CNPJ_BENCH_WAIT", 1800));
    let started = Instant::now();
    let server = Server::start(binary, accounts, db);
    let seconds = made(&server, accounts, expected, limit);
    let waited = started.elapsed().as_secs_f64();
    let peak = memory_mb(server.child.id(), "VmHWM");
    let (counts, _) = deliveries(accounts);
    match seconds {
        Some(s) => println!(
            "{name}: deliveries made in {s:.1} s ({waited:.1} s from the start); peak RSS {peak:.0} MB ({:+.0} MB \
             over the same server without lists); {} lists, {} deliveries, {} events",
            peak - idle_peak(binary, db),
            counts.0,
            counts.1,
            counts.2
        ),
        None => println!("{name}: deliveries not all made within {:.0} s ({counts:?} so far)", limit.as_secs_f64()),
    }
    // The sender goes through the deliveries made (their users have no credits: each is set to
    // wait for them) before the events are timed, so that it does not run beside them.
    let sending = Instant::now();
    while pending(accounts) > 0 && sending.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(200));
    }
    println!("  the sender went through them in {:.1} s", sending.elapsed().as_secs_f64());
    events_suite(&server, big.0, big.1, &history_months(db), env_or("CNPJ_BENCH_REPEAT", 20));
    counts
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let db = match std::env::var("CNPJ_BENCH_DB") {
        Ok(path) => PathBuf::from(path),
        Err(_) => sample_months(dir.path()),
    };
    let keying = Instant::now();
    let keyed = cnpj_load::key_history(&cnpj_store::history_path(&db)).expect("keying the history");
    if !keyed.is_empty() {
        println!("the history's {} months keyed in {:.1} s", keyed.len(), keying.elapsed().as_secs_f64());
    }
    let (lists, entries, big): (usize, usize, usize) = (
        env_or("CNPJ_BENCH_LISTS", 10_000),
        env_or("CNPJ_BENCH_ENTRIES", 1_000_000),
        env_or("CNPJ_BENCH_BIG", 100_000),
    );
    let started = Instant::now();
    let sample = sample_entries(&db, entries + big);
    let ours = dir.path().join("accounts.sqlite");
    let (token, id) = generate(&ours, &sample, lists, big.min(sample.len() / 2));
    drop(sample);
    let base = dir.path().join("baseline.sqlite");
    std::fs::copy(&ours, &base).unwrap();
    println!(
        "{lists} lists of {entries} entries in all and a list of {big}, generated in {:.1} s; dataset {}",
        started.elapsed().as_secs_f64(),
        db.display()
    );
    let counts = run("this binary", Path::new(env!("CARGO_BIN_EXE_cnpj-api")), &ours, &db, None, (&token, id));
    if let Ok(api) = std::env::var("CNPJ_BENCH_BASELINE_API") {
        run("baseline", Path::new(&api), &base, &db, Some(counts.1), (&token, id));
        let (a, b) = (deliveries(&ours).1, deliveries(&base).1);
        assert_eq!(a.len(), b.len(), "deliveries made by this binary and by the baseline");
        // The same events in each; `in_order`: in the same order too.
        let events = |body: &str| -> Vec<String> {
            let body: serde_json::Value = serde_json::from_str(body).unwrap();
            let mut events: Vec<String> = body["events"].as_array().unwrap().iter().map(|e| e.to_string()).collect();
            events.sort();
            events
        };
        let mut in_order = 0;
        for (id, body) in &a {
            let other = b.get(id).unwrap_or_else(|| panic!("the baseline has no delivery {id}"));
            assert_eq!(events(body), events(other), "delivery {id}: this binary {body}\nbaseline {other}");
            in_order += usize::from(body == other);
        }
        println!(
            "the two stores' deliveries hold the same events; {in_order} of {} are equal byte for byte, the others \
             differ in the order of their events",
            a.len()
        );
    }
}

/// The sample dump's two months, the second built with the first as its previous month.
fn sample_months(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (first, second) = (dir.join("2026-09.duckdb"), dir.join("2026-10.duckdb"));
    for (input, db, previous) in [("data/sample-dump", &first, None), ("data/sample-dump-next", &second, Some(&first))]
    {
        let mut options = cnpj_build::BuildOptions::new(root.join(input), db);
        options.previous = previous.cloned();
        options.accept_anomalies = true;
        cnpj_build::build(&options, &cnpj_build::NoObserver).expect("the month builds");
    }
    second
}
