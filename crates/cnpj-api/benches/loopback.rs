//! Loopback load benchmark of `cnpj-api` (not a test): starts the real server over a dataset
//! (the sample dump, or `CNPJ_BENCH_DB`), then drives keep-alive connections for a fixed time per
//! scenario and prints requests/s and p50/p99 latency for detail, search and batch-of-100.
//!
//! Run: `cargo bench -p cnpj-api` (options by env: `CNPJ_BENCH_SECONDS` (default 10),
//! `CNPJ_BENCH_CONNECTIONS` (default 8), `CNPJ_BENCH_DB` (a built dataset), `CNPJ_BENCH_CNPJS`
//! (a file of CNPJs to look up, one per line), `CNPJ_BENCH_POSTGRES` (a database URL: the dataset
//! is published there, schema `bench_api`, and served from Postgres)).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One keep-alive connection: sends a request, reads one response (Content-Length framed).
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn open(addr: &str) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).unwrap();
        Conn { writer: stream.try_clone().unwrap(), reader: BufReader::new(stream) }
    }

    fn call(&mut self, request: &[u8]) -> u16 {
        self.writer.write_all(request).expect("send");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        let status = line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let mut length = 0usize;
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("header");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("body");
        status
    }
}

struct Outcome {
    requests: usize,
    errors: usize,
    seconds: f64,
    latencies: Vec<Duration>,
}

fn drive(addr: &str, connections: usize, seconds: f64, requests: &[Vec<u8>]) -> Outcome {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let per_thread: Vec<(usize, Vec<Duration>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..connections)
            .map(|t| {
                scope.spawn(move || {
                    let mut conn = Conn::open(addr);
                    let (mut errors, mut latencies) = (0, Vec::new());
                    let mut i = t;
                    while Instant::now() < deadline {
                        let sent = Instant::now();
                        let status = conn.call(&requests[i % requests.len()]);
                        latencies.push(sent.elapsed());
                        errors += usize::from(status != 200);
                        i += connections;
                    }
                    (errors, latencies)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut latencies: Vec<Duration> = per_thread.iter().flat_map(|(_, l)| l.iter().copied()).collect();
    latencies.sort();
    Outcome { requests: latencies.len(), errors: per_thread.iter().map(|(e, _)| e).sum(), seconds, latencies }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let seconds: f64 = env_or("CNPJ_BENCH_SECONDS", 10.0);
    let connections: usize = env_or("CNPJ_BENCH_CONNECTIONS", 8);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let db: PathBuf = match std::env::var("CNPJ_BENCH_DB") {
        Ok(path) => PathBuf::from(path),
        Err(_) => {
            let db = dir.path().join("registry.duckdb");
            let opts = cnpj_build::BuildOptions::new(root.join("data/sample-dump"), &db);
            cnpj_build::build(&opts, &cnpj_build::NoObserver).expect("the sample dataset builds");
            db
        }
    };
    let accounts = dir.path().join("accounts.sqlite");
    let api = |args: &[&str]| {
        let out =
            Command::new(env!("CARGO_BIN_EXE_cnpj-api")).arg("--accounts").arg(&accounts).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    api(&["accounts", "create-user", "bench", "--credits", "1000000000000"]);
    let token = api(&["accounts", "issue-token", "bench"]);
    let dataset: Vec<std::ffi::OsString> = match std::env::var("CNPJ_BENCH_POSTGRES") {
        Ok(url) => {
            cnpj_load::postgres::publish(&db, &url, "bench_api", 2, &|_| {}).expect("the dataset is published");
            vec!["--postgres".into(), url.into(), "--schema".into(), "bench_api".into()]
        }
        Err(_) => vec!["--db".into(), db.clone().into()],
    };
    let mut server = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
        .arg("--accounts")
        .arg(&accounts)
        .args(["serve", "--listen", "127.0.0.1:0", "--rate-limit", "4000000000"])
        .args(dataset)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().trim_start_matches("http://").to_owned();

    let cnpjs: Vec<String> = match std::env::var("CNPJ_BENCH_CNPJS") {
        Ok(file) => {
            std::fs::read_to_string(file).unwrap().lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
        }
        Err(_) => {
            ["11222333000181", "11222333000262", "44555666000181", "12345678000195", "22333444000181", "77888999000262"]
                .map(String::from)
                .to_vec()
        }
    };
    let get = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n").into_bytes()
    };
    let detail: Vec<Vec<u8>> = cnpjs.iter().map(|c| get(&format!("/api/v1/companies/{c}"))).collect();
    let search: Vec<Vec<u8>> =
        ["state=SP", "zip_code=01310", "trading_name=exemplo", "situacao_cadastral=02&per_page=50"]
            .iter()
            .map(|q| get(&format!("/api/v1/companies/search?{q}")))
            .collect();
    // 100 distinct entries: the known CNPJs, then valid CNPJs that are not in the dataset.
    let mut entries = cnpjs.clone();
    let mut base = 90_000_000u64;
    while entries.len() < 100 {
        let stem = format!("{base:08}0001");
        let dv = cnpj_model::check_digits(stem.as_bytes().try_into().unwrap()).unwrap();
        entries.push(format!("{stem}{}", std::str::from_utf8(&dv).unwrap()));
        base += 1;
    }
    entries.truncate(100);
    let batch_body = serde_json::json!({ "cnpjs": entries }).to_string();
    let batch = vec![
        format!(
            "POST /api/v1/companies/batch HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{batch_body}",
            batch_body.len()
        )
        .into_bytes(),
    ];

    println!(
        "cnpj-api loopback benchmark: {connections} connections, {seconds} s per scenario, dataset {}",
        db.display()
    );
    println!(
        "{:<12} {:>10} {:>12} {:>10} {:>10} {:>8}",
        "scenario", "requests", "requests/s", "p50 ms", "p99 ms", "errors"
    );
    for (name, requests) in [("detail", &detail), ("search", &search), ("batch-100", &batch)] {
        let o = drive(&addr, connections, seconds, requests);
        println!(
            "{name:<12} {:>10} {:>12.0} {:>10.2} {:>10.2} {:>8}",
            o.requests,
            o.requests as f64 / o.seconds,
            percentile(&o.latencies, 0.50),
            percentile(&o.latencies, 0.99),
            o.errors
        );
    }
    let _ = server.kill();
    let _ = server.wait();
}
