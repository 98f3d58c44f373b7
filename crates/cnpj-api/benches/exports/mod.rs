//! The export jobs' suite of the loopback benchmark (contract §15, issue 42 item 4): a search of
//! about a million rows exported as CSV, Parquet and JSON Lines by a server of its own, each job
//! timed from its request to `done` (rows a second), the server's resident memory sampled while
//! it runs (its rise over the figure before, resident and anonymous: the file pages the job
//! maps are the kernel's to drop), alone and under a paced load of detail lookups
//! (their p50 and p99 measured from the moment each was due, beside the same load without a
//! job); and, as the baseline in the same run, the same jobs on `CNPJ_BENCH_BASELINE_API` when
//! given (e.g. main built apart).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Conn, Server, common, percentile};

/// The search exported: the active branches (1,354,618 rows at 1.0).
const FILTERS: &str = r#"{"head_office": "false", "situacao_cadastral": "02"}"#;

/// Detail lookups a second while a job runs, over two connections.
const PACE: f64 = 1_000.0;

/// What the suite needs of the benchmark: the dataset's arguments, detail requests (built for any
/// address and token by `detail_at`), and a folder of its own.
pub struct Setup<'a> {
    pub dataset: &'a [std::ffi::OsString],
    pub detail_at: &'a dyn Fn(&str, &str) -> Vec<Vec<u8>>,
    pub dir: &'a Path,
}

/// A server of `binary` for the suite, with accounts of its own (a server sharing them would
/// claim its jobs: every replica runs jobs) and its own export folder; the server and a token.
fn server(binary: &Path, setup: &Setup<'_>, name: &str) -> (Server, String) {
    let accounts = setup.dir.join(format!("{name}-accounts.sqlite"));
    let api = |args: &[&str]| {
        let out = std::process::Command::new(binary).arg("--accounts").arg(&accounts).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    api(&["accounts", "create-user", "exports", "--credits", "1000000000000"]);
    let token = api(&["accounts", "issue-token", "exports"]);
    let exports = setup.dir.join(format!("{name}-exports"));
    let args = ["--export-dir", exports.to_str().unwrap(), "--export-interval", "1"];
    (Server::spawn_binary(binary, &accounts, setup.dataset, &args), token)
}

pub fn run(setup: &Setup<'_>) {
    let (ours, token) = server(Path::new(env!("CARGO_BIN_EXE_cnpj-api")), setup, "ours");
    let baseline = std::env::var("CNPJ_BENCH_BASELINE_API")
        .ok()
        .map(|api| (api.clone(), server(Path::new(&api), setup, "baseline")));
    println!();
    println!("export jobs: {FILTERS}; detail lookups paced at {PACE:.0}/s on two connections while a job runs");
    println!(
        "{:<34} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10}",
        "server, format, load",
        "rows",
        "seconds",
        "rows/s",
        "RSS+ MB",
        "anon+ MB",
        "peak MB",
        "detail p50",
        "detail p99"
    );
    let detail = (setup.detail_at)(&ours.addr, &token);
    // Once to bring the lookups' blocks into the page cache, then measured.
    paced_alone(&ours.addr, &detail, 5.0);
    let (idle50, idle99) = paced_alone(&ours.addr, &detail, 10.0);
    let blank = "";
    println!(
        "{:<34} {blank:>8} {blank:>8} {blank:>8} {blank:>8} {blank:>8} {blank:>8} {idle50:>10.2} {idle99:>10.2}",
        "ours, no job"
    );
    for (format, loaded) in [("csv", false), ("parquet", false), ("jsonl", false), ("csv", true), ("parquet", true)] {
        job(&ours, &token, format, loaded.then_some(&detail[..]), "ours");
    }
    if let Some((api, (server, token))) = &baseline {
        println!("baseline: {api}");
        for format in ["csv", "parquet"] {
            job(server, token, format, None, "baseline");
        }
    }
}

/// Runs one job on `server` (with the paced detail load when given) and prints its line.
fn job(server: &Server, token: &str, format: &str, load: Option<&[Vec<u8>]>, name: &str) {
    let filters: Value = serde_json::from_str(FILTERS).unwrap();
    let body = json!({"filters": filters, "format": format}).to_string();
    let mut conn = Conn::open(&server.addr);
    let memory = |field: &str| common::memory_mb(server.child.id(), field);
    let (before, anon_before) = (memory("VmRSS"), memory("RssAnon"));
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let (done, seconds, (peak, anon), latencies) = std::thread::scope(|scope| {
        let paced = load.map(|detail| scope.spawn(|| paced(&server.addr, detail, &stop)));
        let (status, accepted) = conn.call_body(&post(&server.addr, token, "/api/v1/exports", &body));
        assert_eq!(status, 202, "{}", String::from_utf8_lossy(&accepted));
        let id = serde_json::from_slice::<Value>(&accepted).unwrap()["data"]["id"].as_str().unwrap().to_owned();
        let (mut peak, mut anon) = (before, anon_before);
        let done = loop {
            (peak, anon) = (peak.max(memory("VmRSS")), anon.max(memory("RssAnon")));
            let (_, body) = conn.call_body(&get(&server.addr, token, &format!("/api/v1/exports/{id}")));
            let job: Value = serde_json::from_slice(&body).unwrap();
            match job["data"]["status"].as_str() {
                Some("done") => break job["data"].clone(),
                Some("queued" | "running") => std::thread::sleep(Duration::from_millis(100)),
                other => panic!("the job ended {other:?}: {job}"),
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        stop.store(true, Ordering::SeqCst);
        let latencies = paced.map(|p| p.join().unwrap()).unwrap_or_default();
        (done, seconds, (peak, anon), latencies)
    });
    let rows = done["rows_written"].as_u64().unwrap();
    let (p50, p99) = match latencies.is_empty() {
        true => ("-".to_owned(), "-".to_owned()),
        false => (format!("{:.2}", percentile(&latencies, 0.5)), format!("{:.2}", percentile(&latencies, 0.99))),
    };
    let label = format!("{name}, {format}, {}", if load.is_some() { "under load" } else { "alone" });
    println!(
        "{label:<34} {rows:>8} {seconds:>8.1} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {p50:>10} {p99:>10}",
        rows as f64 / seconds,
        peak - before,
        anon - anon_before,
        memory("VmHWM"),
    );
}

/// The paced detail load alone for `seconds`: its p50 and p99.
fn paced_alone(addr: &str, detail: &[Vec<u8>], seconds: f64) -> (f64, f64) {
    let stop = AtomicBool::new(false);
    let latencies = std::thread::scope(|scope| {
        let load = scope.spawn(|| paced(addr, detail, &stop));
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::SeqCst);
        load.join().unwrap()
    });
    (percentile(&latencies, 0.5), percentile(&latencies, 0.99))
}

/// Detail lookups at [`PACE`] a second over two connections until `stop`, each latency taken
/// from the moment the request was due (a late start counts), sorted.
fn paced(addr: &str, detail: &[Vec<u8>], stop: &AtomicBool) -> Vec<Duration> {
    let interval = Duration::from_secs_f64(2.0 / PACE);
    let mut latencies: Vec<Duration> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..2)
            .map(|t| {
                scope.spawn(move || {
                    let mut conn = Conn::open(addr);
                    let start = Instant::now() + interval.mul_f64(t as f64 / 2.0);
                    let mut out = Vec::new();
                    for k in 0u32.. {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let due = start + interval * k;
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                        let status = conn.call(&detail[(k as usize * 2 + t) % detail.len()]);
                        assert_eq!(status, 200, "a detail lookup failed");
                        out.push(due.elapsed());
                    }
                    out
                })
            })
            .collect();
        threads.into_iter().flat_map(|t| t.join().unwrap()).collect()
    });
    latencies.sort();
    latencies
}

fn get(addr: &str, token: &str, path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n").into_bytes()
}

fn post(addr: &str, token: &str, path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
