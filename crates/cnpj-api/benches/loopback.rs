//! Loopback load benchmark of `cnpj-api` (not a test): starts the real server over a dataset
//! (the sample dump, or `CNPJ_BENCH_DB`), then drives keep-alive connections for a fixed time per
//! scenario and prints requests/s and p50/p99 latency for detail, search and batch-of-100; then the
//! search suite: every search filter alone with a broad and a narrow value (picked from the
//! dataset), text terms that are common, rare, mid-word and absent, combinations of 2 to 6
//! filters and deep pages, each query run alone (median, p99 and its total) on the search index
//! and, as the baseline in the same run, on a second server that searches by SQL
//! (`--no-search-index`); then the whole suite mixed on every connection (searches/s), and the
//! servers' peak RSS. Then the text suite: 210 `trading_name` and `neighborhood` terms drawn
//! from the dataset's names (1 to 4 words cut at random points at both ends, from rows and from
//! distinct values, so common and rare), alone and with one or two other filters, each run alone
//! on the index and on the baseline, whose totals must agree; the suite's median and p99 over
//! every request, and the index server's anonymous memory (RssAnon) after it. Last, the changes suite, when the dataset recorded changes
//! (a build with `--previous`): `GET /api/v1/changes` with each filter alone and combined (values
//! picked from the dataset's history), deep pages, and a company's history by 14 and 8
//! characters, each query alone. This server runs with its metrics listener on; with a baseline
//! binary, detail lookups run in turns on this server, on this binary without the metrics and on
//! the baseline, before the suites. The pages suite: the search suite's queries as `/search`
//! pages for a person logged in (the session cookie of a real login), each alone, the page's
//! median beside the API's, and the median over the suite (`CNPJ_BENCH_PAGES=0` skips it). The
//! partners suite (`partners`; `CNPJ_BENCH_PARTNERS=0` skips it): 210 names cut mid-word, alone
//! and with a type or a state, totals checked against SQL; partners' pages; networks. The analysts'
//! suite (`analysts`; with the SQL baseline): §15's filters alone and combined, on search and
//! on count, totals checked against the server searching by SQL. The export jobs' suite
//! (`exports`, `benches/exports`): a search of about a million rows as CSV, Parquet and JSON
//! Lines, rows a second and memory, alone and beside paced detail lookups (their p99).
//!
//! Run: `cargo bench -p cnpj-api` (options by env: `CNPJ_BENCH_SECONDS` (default 10),
//! `CNPJ_BENCH_CONNECTIONS` (default 8), `CNPJ_BENCH_DB` (a built dataset), `CNPJ_BENCH_CNPJS`
//! (a file of CNPJs to look up, one per line), `CNPJ_BENCH_POSTGRES` (a database URL: the dataset
//! is published there, schema `bench_api`, and served from Postgres, with and without the
//! dataset's search index), `CNPJ_BENCH_QUERY_SECONDS` (time per suite query and server,
//! default 2), `CNPJ_BENCH_BASELINE` (`0`: no baseline), `CNPJ_BENCH_BASELINE_API` and
//! `CNPJ_BENCH_BASELINE_DB` (the baseline is then another `cnpj-api` binary, e.g. today's main
//! built apart, serving its own build of the same month, instead of this server searching by SQL
//! with an unbounded `--search-budget`), `CNPJ_BENCH_SUITES` (`0`: the scenarios only; `partners`, `analysts`, `exports`, comma-separated:
//! the scenarios and those suites alone)).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod analysts;
mod common;
mod exports;
mod partners;

use common::env_or;

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
        self.call_body(request).0
    }

    /// The status and the body.
    fn call_body(&mut self, request: &[u8]) -> (u16, Vec<u8>) {
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
        (status, body)
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

/// A running server and its address.
struct Server {
    child: std::process::Child,
    addr: String,
}

impl Server {
    fn spawn(accounts: &Path, dataset: &[std::ffi::OsString], extra: &[&str]) -> Server {
        Server::spawn_binary(Path::new(env!("CARGO_BIN_EXE_cnpj-api")), accounts, dataset, extra)
    }

    fn spawn_binary(binary: &Path, accounts: &Path, dataset: &[std::ffi::OsString], extra: &[&str]) -> Server {
        let mut child = Command::new(binary)
            .arg("--accounts")
            .arg(accounts)
            .args(["serve", "--listen", "127.0.0.1:0", "--rate-limit", "4000000000"])
            .args(dataset)
            .args(extra)
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        Server { child, addr: line.trim().trim_start_matches("http://").to_owned() }
    }

    fn memory_mb(&self, field: &str) -> f64 {
        common::memory_mb(self.child.id(), field)
    }

    fn peak_rss_mb(&self) -> f64 {
        self.memory_mb("VmHWM")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// 1,000 CNPJs of the dataset, spread over it.
fn sample_cnpjs(db: &Path) -> Vec<String> {
    let config = duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap();
    let conn = duckdb::Connection::open_with_flags(db, config).expect("the dataset opens");
    let mut stmt = conn.prepare("SELECT cnpj FROM estabelecimentos USING SAMPLE 1000 ROWS").unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
}

/// The search suite's queries (name, query string), with values picked from the dataset.
fn search_suite(db: &Path) -> Vec<(String, String)> {
    let conn = duckdb::Connection::open_with_flags(
        db,
        duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap(),
    )
    .expect("the dataset opens");
    let one = |sql: &str| -> String { conn.query_row(sql, [], |r| r.get::<_, String>(0)).unwrap_or_default() };
    // The most and the least common value of a column.
    let extremes = |table: &str, column: &str| -> (String, String) {
        let sql = |order: &str| {
            format!("SELECT {column} FROM {table} WHERE {column} <> '' GROUP BY 1 ORDER BY count(*) {order}, 1 LIMIT 1")
        };
        (one(&sql("DESC")), one(&sql("ASC")))
    };
    let (uf, uf_rare) = extremes("estabelecimentos", "uf");
    let (city, city_rare) = extremes("estabelecimentos", "municipio");
    let (cnae, cnae_rare) = extremes("estabelecimentos", "cnae_fiscal");
    let (situacao, situacao_rare) = extremes("estabelecimentos", "situacao_cadastral");
    let (porte, porte_rare) = extremes("empresas", "porte_empresa");
    let (nature, nature_rare) = extremes("empresas", "natureza_juridica");
    let (cep, _) = extremes("estabelecimentos", "cep");
    let day = one(
        "SELECT CAST(data_inicio_atividade AS VARCHAR) FROM estabelecimentos WHERE data_inicio_atividade IS NOT NULL \
         GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1",
    );
    let cnpj = one(
        "SELECT cnpj FROM estabelecimentos ORDER BY cnpj LIMIT 1 OFFSET (SELECT count(*) // 2 FROM estabelecimentos)",
    );
    let rare_word =
        one("SELECT nome_fantasia_fold FROM estabelecimentos WHERE length(nome_fantasia_fold) > 12 LIMIT 1 OFFSET 777");
    // The longest word, as letters and digits (it goes into a query string as is).
    let rare_word: String = rare_word
        .split(' ')
        .max_by_key(|w| w.len())
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let rare_word = if rare_word.is_empty() { "x".to_owned() } else { rare_word };
    let q = |name: &str, query: String| (name.to_owned(), query);
    vec![
        q("state broad", format!("state={uf}")),
        q("state narrow", format!("state={uf_rare}")),
        q("city_id broad", format!("city_id={city}")),
        q("city_id narrow", format!("city_id={city_rare}")),
        q("city name", "city=sao%20paulo".into()),
        q("cnae broad", format!("business_sector={cnae}")),
        q("cnae narrow", format!("business_sector={cnae_rare}")),
        q("situacao broad", format!("situacao_cadastral={situacao}")),
        q("situacao narrow", format!("situacao_cadastral={situacao_rare}")),
        q("porte broad", format!("porte_empresa_code={porte}")),
        q("porte narrow", format!("porte_empresa_code={porte_rare}")),
        q("nature broad", format!("nature_code={nature}")),
        q("nature narrow", format!("nature_code={nature_rare}")),
        q("opening broad", "opening_date_from=2000-01-01&opening_date_to=2024-12-31".into()),
        q("opening one day", format!("opening_date_from={day}&opening_date_to={day}")),
        q("zip broad", format!("zip_code={}", &cep[..2.min(cep.len())])),
        q("zip full", format!("zip_code={cep}")),
        q("cnpj base", format!("cnpj={}", &cnpj[..8.min(cnpj.len())])),
        q("cnpj full", format!("cnpj={cnpj}")),
        q("name common", "trading_name=comercio".into()),
        q("name rare", format!("trading_name={rare_word}")),
        q("name mid-word", "trading_name=merci".into()),
        q("name absent", "trading_name=zzqxjw".into()),
        q("neighborhood", "neighborhood=centro".into()),
        q("2: state+situacao", format!("state={uf}&situacao_cadastral={situacao}")),
        q("2: city+cnae", format!("city_id={city}&business_sector={cnae}")),
        q("3: state+porte+nature", format!("state={uf}&porte_empresa_code={porte}&nature_code={nature}")),
        q("3: state+situacao+porte", format!("state={uf}&situacao_cadastral={situacao}&porte_empresa_code={porte}")),
        q("2: nature+opening from", format!("nature_code={nature}&opening_date_from=2010-01-01")),
        q("2: opening from+situacao", format!("opening_date_from=2010-01-01&situacao_cadastral={situacao}")),
        q(
            "4: +opening",
            format!("state={uf}&situacao_cadastral={situacao}&porte_empresa_code={porte}&opening_date_from=2010-01-01"),
        ),
        q(
            "5: +name",
            format!("state={uf}&situacao_cadastral={situacao}&city_id={city}&zip_code=0&trading_name=comercio"),
        ),
        q(
            "6 filters",
            format!(
                "state={uf}&city_id={city}&situacao_cadastral={situacao}&porte_empresa_code={porte}\
                 &opening_date_from=2000-01-01&opening_date_to=2025-12-31&nature_code={nature}"
            ),
        ),
        q("deep page", format!("state={uf}&per_page=50&page=2000")),
        q("deep page 2", format!("situacao_cadastral={situacao}&per_page=50&page=20000")),
    ]
}

/// SplitMix64: the text suite's picks, the same on every run.
struct Picks(u64);

impl Picks {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n.max(1) as u64) as usize
    }
}

/// `text` percent-encoded for a query string (letters and digits as they are).
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { char::from(b).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// A piece of `text` as people type it: 1 to 4 of its words, the first cut at a random point of
/// its start and the last at a random point of its end (`None` for a text without words).
fn cut(text: &str, picks: &mut Picks) -> Option<String> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                words.push(s..i);
                start = None;
            }
            _ => {}
        }
    }
    if words.is_empty() {
        return None;
    }
    let first = picks.below(words.len());
    let last = (first + picks.below(4)).min(words.len() - 1);
    let starts: Vec<usize> = text[words[first].clone()].char_indices().map(|(i, _)| words[first].start + i).collect();
    let from = starts[picks.below(starts.len())];
    let ends: Vec<usize> = text[words[last].clone()]
        .char_indices()
        .skip(1)
        .map(|(i, _)| words[last].start + i)
        .chain([words[last].end])
        .filter(|&end| end > from)
        .collect();
    Some(text[from..ends[picks.below(ends.len())]].to_owned())
}

/// The text suite's queries (name, query string): terms cut from the names and neighbourhoods of
/// sampled rows and distinct values, each alone, with a state, or with a state and a status.
fn text_suite(db: &Path) -> Vec<(String, String)> {
    let conn = duckdb::Connection::open_with_flags(
        db,
        duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap(),
    )
    .expect("the dataset opens");
    let texts = |sql: &str| -> Vec<String> {
        let mut stmt = conn.prepare(sql).unwrap();
        stmt.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
    };
    let sample = |column: &str, table: &str, n: usize, distinct: &str| {
        texts(&format!(
            "SELECT v FROM (SELECT {distinct} {column} AS v FROM {table} WHERE {column} <> '') \
             USING SAMPLE reservoir({n} ROWS) REPEATABLE (7) ORDER BY v"
        ))
    };
    let one = |sql: &str| -> String { conn.query_row(sql, [], |r| r.get::<_, String>(0)).unwrap_or_default() };
    let uf = one("SELECT uf FROM estabelecimentos GROUP BY 1 ORDER BY count(*) DESC LIMIT 1");
    let situacao = one("SELECT situacao_cadastral FROM estabelecimentos GROUP BY 1 ORDER BY count(*) DESC LIMIT 1");
    let sources = [
        ("trading_name", "fantasia", sample("nome_fantasia", "estabelecimentos", 70, "")),
        ("trading_name", "razao", sample("razao_social", "empresas", 70, "")),
        ("trading_name", "razao distinct", sample("razao_social", "empresas", 30, "DISTINCT")),
        ("neighborhood", "bairro", sample("bairro", "estabelecimentos", 40, "")),
    ];
    let mut picks = Picks(2026);
    let mut out = Vec::new();
    for (param, source, values) in sources {
        for text in values {
            let Some(term) = cut(&text, &mut picks) else { continue };
            let (label, extra) = match out.len() % 3 {
                0 => ("alone", String::new()),
                1 => ("+state", format!("&state={uf}")),
                _ => ("+state+status", format!("&state={uf}&situacao_cadastral={situacao}")),
            };
            out.push((format!("{source} {term:?} {label}"), format!("{param}={}{extra}", encode(&term))));
        }
    }
    out
}

/// The changes suite's requests (name, path), with values picked from the dataset's history;
/// none when it has no rows (a dataset built without `--previous`).
fn changes_suite(db: &Path) -> Vec<(String, String)> {
    let history = cnpj_index::history_path(db);
    if !history.exists() {
        return Vec::new();
    }
    let conn = duckdb::Connection::open_with_flags(
        history,
        duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap(),
    )
    .expect("the history opens");
    let one = |sql: &str| -> String { conn.query_row(sql, [], |r| r.get::<_, String>(0)).unwrap_or_default() };
    let rows: i64 = conn.query_row("SELECT count(*) FROM changes", [], |r| r.get(0)).unwrap_or(0);
    if rows == 0 {
        return Vec::new();
    }
    let (newest, oldest) = (one("SELECT max(month) FROM changes"), one("SELECT min(month) FROM changes"));
    // The most and the least common value of a column in the newest month.
    let extremes = |column: &str| -> (String, String) {
        let sql = |order: &str| {
            format!(
                "SELECT {column} FROM changes WHERE month = '{newest}' AND {column} IS NOT NULL \
                 GROUP BY 1 ORDER BY count(*) {order}, 1 LIMIT 1"
            )
        };
        (one(&sql("DESC")), one(&sql("ASC")))
    };
    let (event, event_rare) = extremes("event");
    let (uf, uf_rare) = extremes("uf");
    let (city, city_rare) = extremes("municipio");
    let (cnae, _) = extremes("cnae");
    let cnpj = one(&format!(
        "SELECT cnpj FROM changes WHERE month = '{newest}' AND cnpj IS NOT NULL LIMIT 1 \
         OFFSET (SELECT count(*) // 2 FROM changes WHERE month = '{newest}')"
    ));
    let basico = cnpj.get(..8).unwrap_or_default().to_owned();
    let q = |name: &str, query: String| (name.to_owned(), format!("/api/v1/changes?{query}"));
    vec![
        q("all", String::new()),
        q("month", format!("month={newest}")),
        q("since (all months)", format!("since={oldest}")),
        q("month+event", format!("month={newest}&event={event}")),
        q("month+rare event", format!("month={newest}&event={event_rare}")),
        q("month+2 events", format!("month={newest}&event={event},{event_rare}")),
        q("month+state", format!("month={newest}&state={uf}")),
        q("month+rare state", format!("month={newest}&state={uf_rare}")),
        q("month+city", format!("month={newest}&city_id={city}")),
        q("month+rare city", format!("month={newest}&city_id={city_rare}")),
        q("month+cnae", format!("month={newest}&business_sector={cnae}")),
        q("month+state+event", format!("month={newest}&state={uf}&event={event}")),
        q("event (all months)", format!("event={event_rare}")),
        q("state (all months)", format!("state={uf_rare}")),
        q("cnpj 14", format!("cnpj={cnpj}")),
        q("cnpj 8", format!("cnpj={basico}")),
        q("deep page", format!("month={newest}&per_page=50&page=2000")),
        ("history 14".to_owned(), format!("/api/v1/companies/{cnpj}/history")),
        ("history 8".to_owned(), format!("/api/v1/companies/{basico}/history")),
    ]
}

/// Runs `request` alone, again and again for `seconds` (at least 3 times unless one run takes
/// longer, at most 200): the median and p99 in ms, and the response's `total`.
fn alone(addr: &str, request: &[u8], seconds: f64) -> (f64, f64, u64) {
    let (p50, p99, total, _) = alone_all(addr, request, seconds);
    (p50, p99, total)
}

/// [`alone`], with every latency, the first one first.
fn alone_all(addr: &str, request: &[u8], seconds: f64) -> (f64, f64, u64, Vec<Duration>) {
    let mut conn = Conn::open(addr);
    let started = Instant::now();
    let (mut latencies, mut total) = (Vec::new(), 0);
    while latencies.is_empty()
        || (latencies.len() < 3 && started.elapsed().as_secs_f64() < seconds)
        || (started.elapsed().as_secs_f64() < seconds && latencies.len() < 200)
    {
        let sent = Instant::now();
        let (status, body) = conn.call_body(request);
        latencies.push(sent.elapsed());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        total = body["total"].as_u64().unwrap_or(0);
    }
    let mut sorted = latencies.clone();
    sorted.sort();
    (percentile(&sorted, 0.5), percentile(&sorted, 0.99), total, latencies)
}

/// Runs the text suite: each query alone on the index server and on the baseline (whose total must
/// be the same); the suite's median and p99 over every request of each server, and over the first
/// request of each term (before anything of it is cached).
fn text_suite_run(
    suite: &[(String, String)],
    addr: &str,
    baseline: Option<&Server>,
    get_at: &dyn Fn(&str, &str) -> Vec<u8>,
    seconds: f64,
) {
    println!("\ntext suite: {} terms, each alone for {seconds} s (median and p99 in ms)", suite.len());
    println!(
        "{:<48} {:>10} {:>10} {:>10} {:>11} {:>11}",
        "query", "total", "index p50", "index p99", "base p50", "base p99"
    );
    let (mut ours, mut theirs, mut ours_first, mut theirs_first) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (name, query) in suite {
        let path = format!("/api/v1/companies/search?{query}");
        let (p50, p99, total, mut latencies) = alone_all(addr, &get_at(addr, &path), seconds);
        ours_first.push(latencies[0]);
        ours.append(&mut latencies);
        let (b50, b99) = match baseline {
            Some(s) => {
                let (p50, p99, base_total, mut latencies) = alone_all(&s.addr, &get_at(&s.addr, &path), seconds);
                theirs_first.push(latencies[0]);
                theirs.append(&mut latencies);
                assert_eq!(base_total, total, "{name}: the index and the baseline disagree on the total");
                (format!("{p50:.2}"), format!("{p99:.2}"))
            }
            None => ("-".into(), "-".into()),
        };
        let name: String = name.chars().take(48).collect();
        println!("{name:<48} {total:>10} {p50:>10.2} {p99:>10.2} {b50:>11} {b99:>11}");
    }
    for (who, latencies) in [
        ("index", &mut ours),
        ("baseline", &mut theirs),
        ("index, first request of each term", &mut ours_first),
        ("baseline, first request of each term", &mut theirs_first),
    ] {
        if latencies.is_empty() {
            continue;
        }
        latencies.sort();
        println!(
            "text suite on the {who}: {} requests, median {:.2} ms, p99 {:.2} ms, slowest {:.2} ms",
            latencies.len(),
            percentile(latencies, 0.5),
            percentile(latencies, 0.99),
            percentile(latencies, 1.0)
        );
    }
}

/// One request on a new connection: the response's head and body, as text.
fn once(addr: &str, request: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("a response");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    (head.to_owned(), body.to_owned())
}

/// The `name=value` of the cookie `name` a response head sets.
fn set_cookie(head: &str, name: &str) -> String {
    let line =
        head.lines().find(|l| l.to_ascii_lowercase().starts_with("set-cookie:") && l.contains(&format!("{name}=")));
    line.and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().split(';').next().unwrap().to_owned())
        .unwrap_or_default()
}

/// The bench user logged in to the pages (a login given by `accounts set-login`, then the login
/// form): the `Cookie` header's value of their session.
fn logged_in(addr: &str, accounts: &Path) -> String {
    let password = "bench pages password";
    let mut child = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
        .arg("--accounts")
        .arg(accounts)
        .args(["accounts", "set-login", "bench", "--email", "bench@example.com"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{password}\n").as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "set-login");
    let (head, body) = once(addr, &format!("GET /login HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"));
    let form_cookie = set_cookie(&head, "cnpj_form");
    let at = body.find("name=\"csrf_token\" value=\"").expect("the login form") + 25;
    let csrf = body[at..].split('"').next().unwrap();
    let form = format!("csrf_token={csrf}&email=bench%40example.com&password={}", encode(password));
    let (head, _) = once(
        addr,
        &format!(
            "POST /login HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nCookie: {form_cookie}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            form.len()
        ),
    );
    let session = set_cookie(&head, "cnpj_session");
    assert!(!session.is_empty(), "logged in: {head}");
    session
}

/// Runs `request` alone, again and again for `seconds` (as [`alone`]), answered 200: its median.
fn alone_page(addr: &str, request: &[u8], seconds: f64) -> f64 {
    let mut conn = Conn::open(addr);
    let started = Instant::now();
    let mut latencies = Vec::new();
    while latencies.len() < 3 || (started.elapsed().as_secs_f64() < seconds && latencies.len() < 200) {
        let sent = Instant::now();
        let (status, body) = conn.call_body(request);
        latencies.push(sent.elapsed());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }
    latencies.sort();
    percentile(&latencies, 0.5)
}

/// The pages suite: each search of the suite as the `/search` page of a person logged in
/// (`cookie`), alone; its median beside the API's, and the median of the pages' medians.
fn pages_suite_run(
    suite: &[(String, String)],
    addr: &str,
    cookie: &str,
    get_at: &dyn Fn(&str, &str) -> Vec<u8>,
    seconds: f64,
) {
    println!("\npages suite: each search alone for {seconds} s as /search, logged in (median in ms)");
    println!("{:<24} {:>10} {:>10}", "query", "page p50", "API p50");
    let mut medians = Vec::new();
    for (name, query) in suite {
        let page = format!("GET /search?{query} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\n\r\n");
        let p50 = alone_page(addr, page.as_bytes(), seconds);
        let (api50, _, _) = alone(addr, &get_at(addr, &format!("/api/v1/companies/search?{query}")), seconds);
        medians.push(p50);
        println!("{name:<24} {p50:>10.2} {api50:>10.2}");
    }
    medians.sort_by(f64::total_cmp);
    println!(
        "pages suite: median of the medians {:.2} ms, slowest median {:.2} ms",
        medians[medians.len() / 2],
        medians[medians.len() - 1]
    );
}

/// Detail lookups in turns, three rounds each after one round to warm up (a round's figures move
/// by a few percent on a shared machine): on this server (metrics on), on this binary without the
/// metrics listener (its own server over the same dataset), and on the baseline binary serving its
/// own build of the month; then each one's rate over its rounds, and the change from the baseline.
fn detail_in_turns(
    ours: &str,
    detail: &[Vec<u8>],
    (accounts, dataset): (&Path, &[std::ffi::OsString]),
    (api, base_db): (&Path, &str),
    (connections, seconds): (usize, f64),
    row: &dyn Fn(&str, &Outcome),
) {
    let plain = Server::spawn(accounts, dataset, &[]);
    let base = Server::spawn_binary(api, accounts, &["--db".into(), base_db.into()], &[]);
    let servers = [("detail", ours), ("detail plain", &plain.addr), ("detail base", &base.addr)];
    // The same CNPJs, addressed to each listener.
    let to = |addr: &str| -> Vec<Vec<u8>> {
        let host = |a: &str| format!("Host: {a}\r\n");
        detail.iter().map(|r| String::from_utf8_lossy(r).replace(&host(ours), &host(addr)).into_bytes()).collect()
    };
    let requests: Vec<Vec<Vec<u8>>> = servers.iter().map(|(_, addr)| to(addr)).collect();
    let mut sums = [(0, 0.0); 3];
    for round in 0..4 {
        for (i, (name, addr)) in servers.iter().enumerate() {
            let o = drive(addr, connections, seconds, &requests[i]);
            if round > 0 {
                row(name, &o);
                sums[i] = (sums[i].0 + o.requests, sums[i].1 + o.seconds);
            }
        }
    }
    let rate = |i: usize| sums[i].0 as f64 / sums[i].1;
    println!(
        "detail over 3 rounds: {:.0}/s with metrics ({:+.1} %), {:.0}/s without ({:+.1} %), baseline ({}) {:.0}/s",
        rate(0),
        (rate(0) / rate(2) - 1.0) * 100.0,
        rate(1),
        (rate(1) / rate(2) - 1.0) * 100.0,
        api.display(),
        rate(2)
    );
}

fn main() {
    let seconds: f64 = env_or("CNPJ_BENCH_SECONDS", 10.0);
    let connections: usize = env_or("CNPJ_BENCH_CONNECTIONS", 8);
    let query_seconds: f64 = env_or("CNPJ_BENCH_QUERY_SECONDS", 2.0);
    let baseline = std::env::var("CNPJ_BENCH_BASELINE").map_or(true, |v| v != "0");
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
    let index = cnpj_store::search_index_path(&db);
    let (dataset, indexed): (Vec<std::ffi::OsString>, Vec<&str>) = match std::env::var("CNPJ_BENCH_POSTGRES") {
        Ok(url) => {
            cnpj_load::postgres::publish(&db, &url, "bench_api", 2, &|_| {}).expect("the dataset is published");
            (
                vec!["--postgres".into(), url.into(), "--schema".into(), "bench_api".into()],
                vec!["--search-index", index.to_str().unwrap()],
            )
        }
        Err(_) => (vec!["--db".into(), db.clone().into()], Vec::new()),
    };
    // Served as in production: with the metrics listener on (every request recorded).
    let server = Server::spawn(&accounts, &dataset, &[&indexed[..], &["--metrics-listen", "127.0.0.1:0"]].concat());
    let addr = server.addr.clone();

    let cnpjs: Vec<String> = match std::env::var("CNPJ_BENCH_CNPJS") {
        Ok(file) => {
            std::fs::read_to_string(file).unwrap().lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()
        }
        Err(_) if std::env::var("CNPJ_BENCH_DB").is_ok() => sample_cnpjs(&db),
        Err(_) => {
            ["11222333000181", "11222333000262", "44555666000181", "12345678000195", "22333444000181", "77888999000262"]
                .map(String::from)
                .to_vec()
        }
    };
    let get_at = |addr: &str, path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n").into_bytes()
    };
    let get = |path: &str| get_at(&addr, path);
    let detail_at = |a: &str, token: &str| -> Vec<Vec<u8>> {
        let at = |path: &str| {
            format!("GET {path} HTTP/1.1\r\nHost: {a}\r\nAuthorization: Bearer {token}\r\n\r\n").into_bytes()
        };
        cnpjs.iter().map(|c| at(&format!("/api/v1/companies/{c}"))).collect()
    };
    let detail = detail_at(&addr, &token);
    let export_suite = || {
        let setup = exports::Setup { dataset: &dataset, detail_at: &detail_at, dir: dir.path() };
        exports::run(&setup);
    };
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
    let row = |name: &str, o: &Outcome| {
        println!(
            "{name:<12} {:>10} {:>12.0} {:>10.2} {:>10.2} {:>8}",
            o.requests,
            o.requests as f64 / o.seconds,
            percentile(&o.latencies, 0.50),
            percentile(&o.latencies, 0.99),
            o.errors
        );
    };
    for (name, requests) in [("detail", &detail), ("search", &search), ("batch-100", &batch)] {
        row(name, &drive(&addr, connections, seconds, requests));
    }
    let other = std::env::var("CNPJ_BENCH_BASELINE_API").ok().zip(std::env::var("CNPJ_BENCH_BASELINE_DB").ok());
    if let Some((api, base_db)) = &other {
        let baseline = (Path::new(api), base_db.as_str());
        detail_in_turns(&addr, &detail, (&accounts, &dataset), baseline, (connections, seconds), &row);
    }
    match std::env::var("CNPJ_BENCH_SUITES").as_deref() {
        Ok("0") => return,
        Ok(only) if only.split(',').all(|s| ["partners", "analysts", "exports"].contains(&s)) => {
            if only.split(',').any(|s| s == "analysts") {
                // Memory enough for SQL's semi-joins over the whole month (`simples`, at 1.0).
                let sql = Server::spawn(
                    &accounts,
                    &dataset,
                    &["--no-search-index", "--search-budget", "3600", "--memory-limit", "8GB"],
                );
                analysts::run(&db, &addr, &sql.addr, &get_at, query_seconds);
            }
            if only.split(',').any(|s| s == "partners") {
                partners::run(&db, &addr, &get_at, query_seconds);
            }
            if only.split(',').any(|s| s == "exports") {
                export_suite();
            }
            println!(
                "server memory after the suites: peak RSS {:.0} MB, anonymous {:.0} MB",
                server.peak_rss_mb(),
                server.memory_mb("RssAnon")
            );
            return;
        }
        _ => {}
    }

    // The search suite: each query alone on the index, then on SQL (the baseline).
    let suite = search_suite(&db);
    let baseline_name = match &other {
        Some((api, base_db)) => format!("{api} serving {base_db}"),
        None => "the same server searching by SQL".to_owned(),
    };
    let sql_server = baseline.then(|| match &other {
        Some((api, base_db)) => Server::spawn_binary(Path::new(api), &accounts, &["--db".into(), base_db.into()], &[]),
        None => Server::spawn(&accounts, &dataset, &["--no-search-index", "--search-budget", "3600"]),
    });
    println!();
    println!("search suite: each query alone for {query_seconds} s (median and p99 in ms; baseline: {baseline_name})");
    println!(
        "{:<24} {:>10} {:>10} {:>10} {:>11} {:>11}",
        "query", "total", "index p50", "index p99", "SQL p50", "SQL p99"
    );
    let (mut worst_p50, mut worst_p99) = (0f64, 0f64);
    for (name, query) in &suite {
        let path = format!("/api/v1/companies/search?{query}");
        let (p50, p99, total) = alone(&addr, &get_at(&addr, &path), query_seconds);
        (worst_p50, worst_p99) = (worst_p50.max(p50), worst_p99.max(p99));
        let (sql50, sql99) = match &sql_server {
            Some(s) => {
                let (p50, p99, sql_total) = alone(&s.addr, &get_at(&s.addr, &path), query_seconds);
                assert_eq!(sql_total, total, "{name}: the index and SQL disagree on the total");
                (format!("{p50:.2}"), format!("{p99:.2}"))
            }
            None => ("-".into(), "-".into()),
        };
        println!("{name:<24} {total:>10} {p50:>10.2} {p99:>10.2} {sql50:>11} {sql99:>11}");
    }
    println!("slowest query on the index: median {worst_p50:.2} ms, p99 {worst_p99:.2} ms");
    let mixed: Vec<Vec<u8>> = suite.iter().map(|(_, q)| get(&format!("/api/v1/companies/search?{q}"))).collect();
    let o = drive(&addr, connections, seconds, &mixed);
    println!(
        "mixed suite on the index, {connections} connections: {:.0} searches/s, p50 {:.2} ms, p99 {:.2} ms, {} errors",
        o.requests as f64 / o.seconds,
        percentile(&o.latencies, 0.50),
        percentile(&o.latencies, 0.99),
        o.errors
    );
    if std::env::var("CNPJ_BENCH_PAGES").map_or(true, |v| v != "0") {
        let cookie = logged_in(&addr, &accounts);
        pages_suite_run(&suite, &addr, &cookie, &get_at, query_seconds);
    }
    text_suite_run(&text_suite(&db), &addr, sql_server.as_ref(), &get_at, query_seconds);
    if std::env::var("CNPJ_BENCH_PARTNERS").map_or(true, |v| v != "0") {
        partners::run(&db, &addr, &get_at, query_seconds);
    }
    if let (Some(s), None) = (&sql_server, &other) {
        analysts::run(&db, &addr, &s.addr, &get_at, query_seconds);
    }
    export_suite();
    println!(
        "server memory after the suites: peak RSS {:.0} MB, anonymous {:.0} MB (with the index)",
        server.peak_rss_mb(),
        server.memory_mb("RssAnon")
    );
    if let Some(s) = &sql_server {
        println!("baseline server: peak RSS {:.0} MB, anonymous {:.0} MB", s.peak_rss_mb(), s.memory_mb("RssAnon"));
    }

    println!();
    let changes = changes_suite(&db);
    if changes.is_empty() {
        println!("changes suite: skipped (the dataset recorded no changes: build it with --previous)");
        return;
    }
    // The baseline: the same dataset (linked) with a copy of its history without
    // `change_companies`, where a company's changes are found by scanning every month (the
    // server is the same binary).
    let scan_server = baseline.then(|| {
        let copy = dir.path().join("without-change-companies.duckdb");
        std::os::unix::fs::symlink(&db, &copy).expect("linking the dataset for the baseline");
        let _ = std::os::unix::fs::symlink(cnpj_index::lookup_path(&db), cnpj_index::lookup_path(&copy));
        let history = cnpj_index::history_path(&copy);
        std::fs::copy(cnpj_index::history_path(&db), &history).expect("copying the history for the baseline");
        let conn = duckdb::Connection::open(&history).expect("the copy opens");
        conn.execute_batch("DROP TABLE change_companies; CHECKPOINT").expect("dropping change_companies");
        drop(conn);
        Server::spawn(&accounts, &["--db".into(), copy.into()], &[])
    });
    println!(
        "changes suite: each query alone for {query_seconds} s (median and p99 in ms; total of the filter; \
         baseline for a company's changes: the same dataset without change_companies)"
    );
    println!("{:<24} {:>10} {:>10} {:>10} {:>11} {:>11}", "query", "total", "p50", "p99", "scan p50", "scan p99");
    let mut medians = Vec::new();
    for (name, path) in &changes {
        let (p50, p99, total) = alone(&addr, &get(path), query_seconds);
        medians.push(p50);
        let company = path.contains("cnpj=") || path.ends_with("/history");
        let (scan50, scan99) = match scan_server.as_ref().filter(|_| company) {
            Some(s) => {
                let (p50, p99, scan_total) = alone(&s.addr, &get_at(&s.addr, path), query_seconds);
                assert_eq!(scan_total, total, "{name}: with and without change_companies disagree");
                (format!("{p50:.2}"), format!("{p99:.2}"))
            }
            None => ("-".into(), "-".into()),
        };
        println!("{name:<24} {total:>10} {p50:>10.2} {p99:>10.2} {scan50:>11} {scan99:>11}");
    }
    medians.sort_by(f64::total_cmp);
    println!(
        "changes suite: median of the medians {:.2} ms, slowest median {:.2} ms",
        medians[medians.len() / 2],
        medians[medians.len() - 1]
    );
}
