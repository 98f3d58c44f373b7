//! Webhook deliveries by replicas on one Postgres store: two API processes deliver every page of
//! a newly published month exactly once between them (both sending), each page signed and
//! charged once; a sender killed mid-delivery (SIGKILL, the receiver holding its POST) loses
//! nothing: the process started after it sends the other pages at once, and that page again, the
//! same id and body, once its lease ran out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::changes::build_month;
use super::operating::{scrape, value};
use super::watchlists::{Received, Receiver};
use super::{Server, build_dataset, get, pg_database, pg_server, post, publish, request, root};

/// Loopback webhooks, looked for every second; a new publication looked for every second.
const FLAGS: [&str; 8] = [
    "--allow-private-webhooks",
    "--allow-http-webhooks",
    "--webhook-interval",
    "1",
    "--reload-check",
    "1",
    "--rate-limit",
    "100000",
];

/// A Postgres database serving the sample dump (2026-09), and a month to publish over it: an
/// evolved synthetic month (2026-12, built over the one it evolved from) with thousands of
/// events, and the bases of the companies that changed in it.
struct Months {
    url: String,
    december: PathBuf,
    changed: Vec<String>,
}

fn months(dir: &Path) -> Months {
    let url = pg_database();
    let september = dir.join("2026-09.duckdb");
    build_dataset(&root().join("data/sample-dump"), &september);
    publish(&september, &url);
    let (first, second) = (dir.join("m1"), dir.join("m2"));
    let synth =
        cnpj_synth::SynthOptions { month: "2026-11".into(), seed: 3, ..cnpj_synth::SynthOptions::new(0.002, &first) };
    cnpj_synth::generate(&synth).unwrap();
    cnpj_synth::evolve(&cnpj_synth::EvolveOptions { from: first.clone(), out: second.clone(), seed: 4 }).unwrap();
    let (november, december) = (dir.join("2026-11.duckdb"), dir.join("2026-12.duckdb"));
    build_month(&first, &november, None);
    build_month(&second, &december, Some(&november));
    let manifest: Value = serde_json::from_slice(&std::fs::read(second.join("synth.json")).unwrap()).unwrap();
    let planted = manifest["planted_changes"].as_array().unwrap();
    let changed: BTreeSet<String> = planted.iter().map(|c| c["cnpj_basico"].as_str().unwrap().to_owned()).collect();
    Months { url, december, changed: changed.into_iter().collect() }
}

/// A list of `entries` (1,000 a request) with a webhook to `url`: its id and secret.
fn hooked(s: &Server, token: &str, entries: &[String], url: &str) -> (u64, String) {
    let (first, rest) = entries.split_at(entries.len().min(1000));
    let made = post(s, "/api/v1/watchlists", token, &json!({"name": "suppliers", "cnpjs": first, "webhook_url": url}));
    assert_eq!(made.status, 201, "{}", made.body);
    let id = made.body["data"]["id"].as_u64().unwrap();
    for more in rest.chunks(1000) {
        let body = json!({"add": more}).to_string();
        let r = request(&s.addr, "PATCH", &format!("/api/v1/watchlists/{id}"), Some(token), Some(body.as_bytes()));
        assert_eq!(r.status, 200, "{}", r.body);
    }
    (id, made.body["data"]["webhook_secret"].as_str().unwrap().to_owned())
}

/// A list's deliveries (at most 50), once `done` holds of them (90 s at most).
fn deliveries_once(s: &Server, token: &str, list: u64, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let items = get(s, &format!("/api/v1/watchlists/{list}/deliveries?per_page=50"), token).body["data"].clone();
        let items = items.as_array().unwrap();
        if done(items) {
            return items.clone();
        }
        assert!(Instant::now() < deadline, "deliveries of list {list}: {items:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn all_delivered(items: &[Value]) -> bool {
    !items.is_empty() && items.iter().all(|d| d["status"] == "delivered")
}

/// The webhook debits in a user's ledger: how many, and how many credits in all.
fn webhook_debits(url: &str, user: &str) -> (i64, i64) {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let row = client
        .query_one(
            "SELECT count(*), coalesce(sum(d.amount), 0)::bigint FROM cnpj_accounts.debits d \
             JOIN cnpj_accounts.users u ON u.id = d.user_id WHERE u.name = $1 AND d.what = 'webhook'",
            &[&user],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// A received delivery's body.
fn body(r: &Received) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

/// Two replicas, four lists of three users (every changed company, half of them, a third), a
/// receiver answering each POST after 250 ms (seconds of sending, which both replicas join):
/// once the month is published, both replicas take it up and deliver, and every page reaches the
/// receiver exactly once, signed by its list's secret, charged once.
#[test]
fn two_replicas_deliver_each_page_of_a_new_publication_once() {
    let dir = tempfile::tempdir().unwrap();
    let m = months(dir.path());
    let flags: Vec<&str> = FLAGS.iter().copied().chain(["--metrics-listen", "127.0.0.1:0"]).collect();
    let replicas = [pg_server(&m.url, &flags), pg_server(&m.url, &flags)];
    let receiver = Receiver::answering(204, Duration::from_millis(250), 0);
    let (all, half, third): (Vec<String>, Vec<String>, Vec<String>) = (
        m.changed.clone(),
        m.changed.iter().step_by(2).cloned().collect(),
        m.changed.iter().step_by(3).cloned().collect(),
    );
    let users = [("ana", vec![&all, &half]), ("bia", vec![&all]), ("caio", vec![&third])];
    let mut lists = Vec::new();
    for (n, (user, entries)) in users.iter().enumerate() {
        let token = replicas[n % 2].user(user, 100);
        for entries in entries {
            let (id, secret) = hooked(&replicas[n % 2], &token, entries, &receiver.url);
            lists.push((*user, token.clone(), id, secret, entries.len() == all.len()));
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(receiver.got.lock().unwrap().len(), 0, "nothing is sent before a month is published");
    publish(&m.december, &m.url);

    let mut listed = BTreeSet::new();
    for (_, token, id, _, _) in &lists {
        let done = deliveries_once(&replicas[0], token, *id, all_delivered);
        assert!(done.iter().all(|d| d["attempts"] == 1), "{done:?}");
        listed.extend(done.iter().map(|d| d["delivery_id"].as_str().unwrap().to_owned()));
    }
    std::thread::sleep(Duration::from_secs(2));
    let got = receiver.got.lock().unwrap();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for r in got.iter() {
        *seen.entry(r.headers["x-registry-delivery"].clone()).or_default() += 1;
    }
    assert!(seen.values().all(|&n| n == 1), "a page sent twice: {seen:?}");
    assert_eq!(seen.keys().cloned().collect::<BTreeSet<_>>(), listed, "every page the lists list, no other");
    let total = get(&replicas[1], "/api/v1/changes?month=2026-12&per_page=1", &lists[0].1).body["total"].as_u64();
    for (user, _, id, secret, whole) in &lists {
        let pages: Vec<&Received> = got.iter().filter(|r| body(r)["watchlist_id"] == *id).collect();
        assert!(pages.iter().all(|r| r.signed_by(secret)), "list {id}: signed by its secret");
        let mut numbers: Vec<u64> = pages.iter().map(|r| body(r)["page"].as_u64().unwrap()).collect();
        numbers.sort();
        assert_eq!(numbers, (1..=pages.len() as u64).collect::<Vec<_>>(), "list {id}");
        let events: usize = pages.iter().map(|r| body(r)["events"].as_array().unwrap().len()).sum();
        if *whole {
            assert_eq!(Some(events as u64), total, "list {id} of {user}: every event of the month");
        }
    }
    assert!(got.len() >= 12, "{} pages", got.len());
    for user in ["ana", "bia", "caio"] {
        let pages = got.iter().filter(|r| lists.iter().any(|l| l.0 == user && body(r)["watchlist_id"] == l.2)).count();
        assert_eq!(webhook_debits(&m.url, user), (pages as i64, pages as i64), "{user}: 1 credit a page, once");
    }
    let delivered = |s: &Server| value(&scrape(s), "cnpj_webhook_deliveries_total", &[("outcome", "delivered")]);
    let by_replica = replicas.each_ref().map(|s| delivered(s).unwrap_or(0.0) as usize);
    assert!(by_replica.iter().all(|&n| n > 0), "both replicas sent: {by_replica:?}");
    assert_eq!(by_replica.iter().sum::<usize>(), got.len(), "{by_replica:?}");
}

/// A process killed (SIGKILL) while the receiver holds its POST of page 1: a process started on
/// the same store sends pages 2 and up at once, and page 1 again once the lease (15 s) of the
/// dead one ran out, the same id and body; every page is delivered. Every POST is charged as it
/// starts: the cut one was, and so is the one that resumed it.
#[test]
fn a_sender_killed_mid_delivery_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = months(dir.path());
    let flags: Vec<&str> = FLAGS.iter().copied().chain(["--webhook-lease", "15"]).collect();
    let mut first = pg_server(&m.url, &flags);
    let receiver = Receiver::answering(204, Duration::ZERO, 1);
    let token = first.user("dan", 100);
    let (id, secret) = hooked(&first, &token, &m.changed, &receiver.url);
    publish(&m.december, &m.url);
    let deadline = Instant::now() + Duration::from_secs(60);
    while receiver.got.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no delivery was sent");
        std::thread::sleep(Duration::from_millis(50));
    }
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let second = pg_server(&m.url, &flags);

    let done = deliveries_once(&second, &token, id, all_delivered);
    let got = receiver.got.lock().unwrap();
    let ids: Vec<&str> = got.iter().map(|r| r.headers["x-registry-delivery"].as_str()).collect();
    let pages = done.len();
    assert!(pages >= 4, "{pages} pages");
    let mut expected: Vec<String> = (1..=pages).map(|p| format!("wl{id}-2026-12-{p}")).collect();
    expected.insert(0, expected[0].clone());
    let mut sorted = ids.clone();
    sorted.sort_by_key(|i| (i.len(), *i));
    assert_eq!(sorted, expected, "page 1 twice (cut, then resumed), every other once: {ids:?}");
    assert_eq!(ids[0], ids[ids.len() - 1], "page 1 resumed last, after the others");
    let (cut, resumed) = (&got[0], &got[got.len() - 1]);
    assert_eq!(cut.body, resumed.body, "the same body");
    assert!(got.iter().all(|r| r.signed_by(&secret)));
    let waited = resumed.at - cut.at;
    assert!(waited >= Duration::from_secs(13), "resumed once the lease ran out, not before: {waited:?}");
    assert_eq!(webhook_debits(&m.url, "dan"), (pages as i64 + 1, pages as i64 + 1), "the cut POST was charged too");
}
