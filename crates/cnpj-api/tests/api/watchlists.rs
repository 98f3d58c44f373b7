//! Watchlists: managed per user and free (every invalid CNPJ named, nothing stored; the cap;
//! another user's list not found; the webhook secret shown once), every answer conforming to the
//! OpenAPI document; a list's events are exactly the changes of its entries by the rule of the
//! `cnpj` filter of `/changes`, paged and priced like it, byte for byte alike from Postgres; and
//! over evolved synthetic months, exactly the planted events of the CNPJs on the list. Webhooks:
//! a month served is delivered to a receiver on loopback, signed, charged, retried.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value, json};
use sha2_0_11::Sha256;

use super::changes::{build_month, serve, three_months};
use super::{
    AccountsAt, Reply, Server, error_of, get, pg_database, pg_server, post, publish, request, root, validator,
};

fn document() -> Value {
    serde_json::from_str(include_str!("../../../../schemas/openapi.json")).unwrap()
}

/// A request whose answer is checked against the document (`template` names its operation).
fn call(s: &Server, doc: &Value, method: &str, template: &str, path: &str, token: &str, body: Option<Value>) -> Reply {
    let body = body.map(|b| b.to_string());
    let reply = request(&s.addr, method, path, Some(token), body.as_deref().map(str::as_bytes));
    let v = validator(doc, template, &method.to_ascii_lowercase(), reply.status);
    let errors: Vec<String> = v.iter_errors(&reply.body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{method} {path} {}: {errors:?}\n{}", reply.status, reply.body);
    reply
}

const LISTS: &str = "/api/v1/watchlists";
const LIST: &str = "/api/v1/watchlists/{id}";
const EVENTS: &str = "/api/v1/watchlists/{id}/events";

#[test]
fn watchlists_are_managed_per_user_and_free() {
    let s = Server::start(&["--rate-limit", "1000", "--max-watched", "5"]);
    let doc = document();
    let (ana, bia) = (s.user("ana", 3), s.user("bia", 3));
    let create = |token: &str, body: Value| call(&s, &doc, "POST", LISTS, LISTS, token, Some(body));
    let made =
        create(&ana, json!({"name": " suppliers ", "cnpjs": ["11.222.333/0001-81", "44555666", "11222333000181"]}));
    assert_eq!(made.status, 201, "{}", made.body);
    let list = &made.body["data"];
    assert_eq!((list["name"].as_str(), list["entries_count"].as_u64()), (Some("suppliers"), Some(2)));
    assert_eq!((list["events"].as_str(), list.get("webhook_secret")), (Some("all"), None));
    let id = list["id"].as_u64().unwrap();
    let path = format!("{LISTS}/{id}");

    refusals(&s, &doc, &ana);
    secret_shown_once(&s, &doc, &ana);

    // Entries paged; a change that adds, removes and renames, or names every invalid CNPJ.
    let patch = json!({"add": ["22.333.444/0001-81"], "remove": ["44555666"], "name": "main"});
    let changed = call(&s, &doc, "PATCH", LIST, &path, &ana, Some(patch));
    assert_eq!(
        (changed.body["data"]["name"].as_str(), changed.body["data"]["entries_count"].as_u64()),
        (Some("main"), Some(2))
    );
    let bad = json!({"add": ["1"], "remove": ["11222333000182"]});
    let r = call(&s, &doc, "PATCH", LIST, &path, &ana, Some(bad));
    assert!(r.body["errors"]["add"].is_array() && r.body["errors"]["remove"].is_array(), "{}", r.body);
    let page = call(&s, &doc, "GET", LIST, &format!("{path}?per_page=1&page=2"), &ana, None);
    assert_eq!(page.body["data"]["entries"], json!(["22333444000181"]));
    assert_eq!((page.body["total"].as_u64(), page.body["last_page"].as_u64()), (Some(2), Some(2)));

    // Another user's list, like a missing one, is not found.
    for (method, template, target) in [
        ("GET", LIST, path.clone()),
        ("PATCH", LIST, path.clone()),
        ("DELETE", LIST, path.clone()),
        ("GET", EVENTS, format!("{path}/events")),
        ("GET", LIST, format!("{LISTS}/999")),
        ("GET", LIST, format!("{LISTS}/x")),
    ] {
        let body = (method == "PATCH").then(|| json!({"name": "mine"}));
        let r = call(&s, &doc, method, template, &target, &bia, body);
        assert_eq!(error_of(&r), (404, "Watchlist not found."), "{method} {target}");
    }
    assert_eq!(call(&s, &doc, "GET", LISTS, LISTS, &bia, None).body["data"], json!([]));
    for (method, target, allow) in
        [("PUT", LISTS.to_owned(), "GET, POST"), ("HEAD", path.clone(), "GET, PATCH, DELETE")]
    {
        let r = request(&s.addr, method, &target, Some(&ana), None);
        assert_eq!((r.status, r.header("allow")), (405, Some(allow)), "{method} {target}");
    }
    let deleted = call(&s, &doc, "DELETE", LIST, &path, &ana, None);
    assert_eq!(deleted.body, json!({"success": true}));
    assert_eq!(error_of(&get(&s, &path, &ana)), (404, "Watchlist not found."));
    assert_eq!((s.credits("ana"), s.credits("bia")), ((3, 0), (3, 0)), "managing lists is free");
}

/// Any invalid CNPJ, or a list past the cap (5 CNPJs), is a 400 naming each; so is any other
/// invalid property; nothing is stored (ana has one list).
fn refusals(s: &Server, doc: &Value, ana: &str) {
    let create = |body: Value| call(s, doc, "POST", LISTS, LISTS, ana, Some(body));
    let refused = create(json!({"name": "x", "cnpjs": ["11222333000182", "44555666", "x"]}));
    assert_eq!(error_of(&refused), (400, "Invalid input parameters"));
    let named: Vec<&str> =
        refused.body["errors"]["cnpjs"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(named.len() == 2 && named[0].contains("11222333000182") && named[1].contains("\"x\""), "{named:?}");
    let over = create(json!({"name": "more", "cnpjs": ["10000001", "10000002", "10000003", "10000004"]}));
    assert!(over.body["errors"]["cnpjs"][0].as_str().unwrap().contains("At most 5"), "{}", over.body);
    for (body, param) in [
        (json!({"name": "x", "cnpjs": [], "webhook_url": "http://hooks.example.com/"}), "webhook_url"),
        (json!({"name": "x", "cnpjs": [], "webhook_url": "https://hooks.example.com:0/"}), "webhook_url"),
        (json!({"name": "x", "cnpjs": [], "webhook_url": "https://hooks.example.com:+443/"}), "webhook_url"),
        (json!({"name": "x", "cnpjs": [], "events": ["closed"]}), "events"),
        (json!({"name": "  ", "cnpjs": []}), "name"),
        (json!({"name": "x", "cnpjs": [], "colour": "red"}), "body"),
        (json!({"name": "x"}), "body"),
    ] {
        let r = create(body.clone());
        assert!(r.status == 400 && r.body["errors"][param].is_array(), "{body}: {}", r.body);
    }
    // Each IPv6 form that carries a loopback address, or could lead anywhere.
    for host in
        ["::127.0.0.1", "::ffff:0:127.0.0.1", "64:ff9b::127.0.0.1", "64:ff9b:1::808:808", "2002:7f00:1::1", "2001::1"]
    {
        let r = create(json!({"name": "x", "cnpjs": [], "webhook_url": format!("https://[{host}]/")}));
        let said = r.body["errors"]["webhook_url"][0].as_str().unwrap_or_default();
        assert!(said.contains("does not resolve to public addresses only"), "{host}: {}", r.body);
    }
    let lists = call(s, doc, "GET", LISTS, LISTS, ana, None);
    assert_eq!(lists.body["data"].as_array().unwrap().len(), 1, "nothing else was stored");
}

/// The cap is the user's plan's (`--max-watched` is only the built-in plan's, without `--plans`):
/// the entry past it is a 400 naming the cap, and nothing is stored.
#[test]
fn the_cap_is_the_users_plans() {
    let dir = tempfile::tempdir().unwrap();
    let plans = dir.path().join("plans.toml");
    std::fs::write(&plans, "default = \"free\"\n[plans.free]\nmax_watched = 2\n[plans.more]\nmax_watched = 3\n")
        .unwrap();
    let s = Server::start(&["--plans", plans.to_str().unwrap(), "--max-watched", "100"]);
    let doc = document();
    let (ana, bia) = (s.user("ana", 0), s.user("bia", 0));
    let AccountsAt::File(store) = &s.accounts else { unreachable!() };
    let conn = rusqlite::Connection::open(store).unwrap();
    conn.execute_batch("UPDATE users SET plan = 'more' WHERE name = 'bia'").unwrap();
    let three = json!({"name": "l", "cnpjs": ["10000001", "10000002", "10000003"]});
    let over = call(&s, &doc, "POST", LISTS, LISTS, &ana, Some(three.clone()));
    assert_eq!(error_of(&over), (400, "Invalid input parameters"));
    let message = "At most 2 CNPJs may be watched over all your lists; this would make 3.";
    assert_eq!(over.body["errors"]["cnpjs"], json!([message]));
    assert_eq!(call(&s, &doc, "GET", LISTS, LISTS, &ana, None).body["data"], json!([]), "nothing stored");
    let made = call(&s, &doc, "POST", LISTS, LISTS, &bia, Some(three));
    assert_eq!(made.status, 201, "{}", made.body);
    let path = format!("{LISTS}/{}", made.body["data"]["id"]);
    let past = call(&s, &doc, "PATCH", LIST, &path, &bia, Some(json!({"add": ["10000004"]})));
    let message = "At most 3 CNPJs may be watched over all your lists; this would make 4.";
    assert_eq!((past.status, &past.body["errors"]["add"]), (400, &json!([message])));
}

/// A webhook's secret is in the answer that made it (or rotated it), and never again.
fn secret_shown_once(s: &Server, doc: &Value, ana: &str) {
    let create = |body: Value| call(s, doc, "POST", LISTS, LISTS, ana, Some(body));
    let hooked = create(
        json!({"name": "hooked", "cnpjs": ["33683111"], "events": ["moved", "opened"], "webhook_url": "https://hooks.example.com/cnpj"}),
    );
    assert_eq!(hooked.status, 201, "{}", hooked.body);
    let secret = hooked.body["data"]["webhook_secret"].as_str().unwrap().to_owned();
    assert_eq!(hooked.body["data"]["events"], json!(["opened", "moved"]));
    let hooked_path = format!("{LISTS}/{}", hooked.body["data"]["id"]);
    let read = call(s, doc, "GET", LIST, &hooked_path, ana, None);
    assert!(read.body["data"].get("webhook_secret").is_none(), "{}", read.body);
    let rotated = call(s, doc, "PATCH", LIST, &hooked_path, ana, Some(json!({"rotate_secret": true})));
    assert!(rotated.body["data"]["webhook_secret"].as_str().is_some_and(|s| s != secret), "{}", rotated.body);
    let unhooked = call(s, doc, "PATCH", LIST, &hooked_path, ana, Some(json!({"webhook_url": null})));
    assert_eq!(unhooked.body["data"]["webhook_url"], Value::Null);
}

/// The key a change item is ordered by (the served order).
fn order(item: &Value) -> (String, bool, String, String, String, String, String, String) {
    let text = |k: &str| item[k].as_str().unwrap_or_default().to_owned();
    let json = |k: &str| item[k].to_string();
    (
        text("month"),
        item["cnpj"].is_null(),
        text("cnpj"),
        text("cnpj_basico"),
        text("event"),
        text("field"),
        json("old"),
        json("new"),
    )
}

/// What `/changes?cnpj=` answers for each entry, merged in the served order (the events a list
/// of these entries must answer).
fn merged(s: &Server, token: &str, entries: &[&str], query: &str) -> Vec<Value> {
    let mut items: Vec<Value> = Vec::new();
    for entry in entries {
        let r = get(s, &format!("/api/v1/changes?cnpj={entry}&per_page=50{query}"), token);
        assert!(r.body["total"].as_u64().unwrap() <= 50);
        items.extend(r.body["data"].as_array().unwrap().iter().cloned());
    }
    items.sort_by_key(order);
    items.dedup();
    items
}

/// A copy in `dir` of the dataset at `db` (its files beside it) whose history has no
/// `change_keys`, as a history written before them: its path.
fn unkeyed_copy(db: &Path, dir: &Path) -> PathBuf {
    let name = db.file_name().unwrap().to_str().unwrap();
    for entry in std::fs::read_dir(db.parent().unwrap()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_str().unwrap().starts_with(name) && path.is_file() {
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    let copy = dir.join(name);
    let history = duckdb::Connection::open(cnpj_index::history_path(&copy)).unwrap();
    history.execute_batch("DROP TABLE change_keys; CHECKPOINT").unwrap();
    copy
}

/// `server` with a user's list of `entries`, set by `patch`:
/// the server and the user's token.
fn served_list(server: Server, entries: &[&str], patch: &Value) -> (Server, String) {
    let token = server.user("lia", 100);
    let mut list = json!({"name": "suppliers", "cnpjs": entries});
    list.as_object_mut().unwrap().extend(patch.as_object().unwrap().clone());
    assert_eq!(post(&server, LISTS, &token, &list).status, 201);
    (server, token)
}

#[test]
fn a_watchlist_s_events_are_the_changes_of_its_entries() {
    let dir = tempfile::tempdir().unwrap();
    let [_, _, db] = three_months(dir.path());
    let url = pg_database();
    publish(&db, &url);
    let flags =
        ["--rate-limit", "1000", "--allow-private-webhooks", "--allow-http-webhooks", "--webhook-interval", "1"];
    let unkeyed_dir = tempfile::tempdir().unwrap();
    let unkeyed = unkeyed_copy(&db, unkeyed_dir.path());
    let duck = serve(dir, db, &flags);
    let pg = pg_server(&url, &flags);
    let doc = document();
    let entries = ["44555666000262", "22333444", "12345678000276", "66777888", "33683111"];
    let list = json!({"name": "suppliers", "cnpjs": entries});
    let (token, pg_token) = (duck.user("lia", 100), pg.user("lia", 100));
    for (s, token) in [(&duck, &token), (&pg, &pg_token)] {
        assert_eq!(post(s, LISTS, token, &list).status, 201);
    }
    let (want, want_october) = (merged(&duck, &token, &entries, ""), merged(&duck, &token, &entries, "&month=2026-10"));
    assert!(want.iter().all(|i| i["event"] != "status_changed"), "not the head office's own events");
    let before = duck.credits("lia").1;
    let pages_with_items = std::cell::Cell::new(0);
    let events = |query: &str| {
        let r = call(&duck, &doc, "GET", EVENTS, &format!("{LISTS}/1/events?{query}"), &token, None);
        pages_with_items
            .set(pages_with_items.get() + i64::from(r.body["data"].as_array().is_some_and(|d| !d.is_empty())));
        r
    };
    let all = events("per_page=50");
    assert_eq!(all.body["data"].as_array().unwrap(), &want);
    assert_eq!(all.body["total"].as_u64(), Some(2 * 11), "11 events in October, undone in November");
    let october = events("month=2026-10&per_page=50");
    assert_eq!(october.body["data"].as_array().unwrap(), &want_october);
    let paged: Vec<Value> = (1..=8)
        .flat_map(|page| events(&format!("per_page=3&page={page}")).body["data"].as_array().unwrap().clone())
        .collect();
    assert_eq!(paged, want, "every page of it the same rows");
    let empty = events("since=2026-12");
    assert_eq!((empty.body["total"].as_u64(), empty.body["data"].as_array().map(Vec::len)), (Some(0), Some(0)));
    // The list's events narrow it.
    let patch = json!({"events": ["moved", "opened"]});
    let r = request(&duck.addr, "PATCH", &format!("{LISTS}/1"), Some(&token), Some(patch.to_string().as_bytes()));
    assert_eq!(r.status, 200);
    let moved = events("per_page=50");
    let kept: Vec<&Value> = want.iter().filter(|i| i["event"] == "moved" || i["event"] == "opened").collect();
    assert_eq!(moved.body["data"].as_array().unwrap().iter().collect::<Vec<_>>(), kept);
    for (query, param) in
        [("month=2026-13", "month"), ("since=", "since"), ("per_page=51", "per_page"), ("locale=fr", "locale")]
    {
        assert!(events(query).body["errors"][param].is_array(), "{query}");
    }
    assert_eq!(duck.credits("lia").1 - before, pages_with_items.get(), "priced like /changes: 1 a page with items");

    // Postgres answers byte for byte alike, and so does a history written before `change_keys`.
    let (old, old_token) = served_list(serve(unkeyed_dir, unkeyed, &flags), &entries, &patch);
    let r = request(&pg.addr, "PATCH", &format!("{LISTS}/1"), Some(&pg_token), Some(patch.to_string().as_bytes()));
    assert_eq!(r.status, 200);
    for query in ["per_page=50", "month=2026-11", "since=2026-10&per_page=2&page=2", "locale=en", "month=2026-09"] {
        let target = format!("{LISTS}/1/events?{query}");
        let (a, b, c) = (get(&duck, &target, &token), get(&pg, &target, &pg_token), get(&old, &target, &old_token));
        assert!(a.status == 200 && a.raw == b.raw, "{query}:\nduckdb   {}\npostgres {}", a.body, b.body);
        assert!(a.raw == c.raw, "{query}:\nkeyed   {}\nunkeyed {}", a.body, c.body);
    }

    // The month's delivery (every list matched against the month in one pass) carries the
    // list's events of the month, as the events endpoint pages them, from either backend.
    let receiver = Receiver::start(204);
    for (s, token) in [(&duck, &token), (&pg, &pg_token)] {
        let hook = json!({"webhook_url": receiver.url}).to_string();
        let r = request(&s.addr, "PATCH", &format!("{LISTS}/1"), Some(token), Some(hook.as_bytes()));
        assert_eq!(r.status, 200, "{}", r.body);
        s.signal("-HUP");
        deliveries_until(s, token, 1, |d| d.first().is_some_and(|d| d["status"] == "delivered"));
        let body: Value = serde_json::from_slice(&receiver.got.lock().unwrap().pop().unwrap().body).unwrap();
        let events = get(s, &format!("{LISTS}/1/events?month=2026-11&per_page=50"), token).body["data"].clone();
        assert!(events.as_array().is_some_and(|e| !e.is_empty()));
        assert_eq!(body["events"], events, "the delivered page is the list's events of the month");
    }
}

/// The attacker's steps, on SQLite and on Postgres accounts: ana makes a list, reads its events
/// (the server keeps its entries) and deletes it; bia then makes a list. Bia's list never gets
/// ana's id, ana's id answers bia nothing (404), and bia's events are her list's (none), charged
/// nothing: never ana's companies.
#[test]
fn a_deleted_list_never_answers_for_another_user_s() {
    let dir = tempfile::tempdir().unwrap();
    let [_, _, db] = three_months(dir.path());
    let url = pg_database();
    publish(&db, &url);
    let flags = ["--rate-limit", "1000"];
    let (duck, pg) = (serve(dir, db, &flags), pg_server(&url, &flags));
    for s in [&duck, &pg] {
        let (ana, bia) = (s.user("ana", 100), s.user("bia", 100));
        let entries = ["44555666000262", "22333444", "12345678000276", "66777888", "33683111"];
        let made = post(s, LISTS, &ana, &json!({"name": "ana's", "cnpjs": entries}));
        let ana_id = made.body["data"]["id"].as_u64().unwrap();
        let read = get(s, &format!("{LISTS}/{ana_id}/events?per_page=50"), &ana);
        assert!(read.body["total"].as_u64().is_some_and(|t| t > 0), "{}", read.body);
        let deleted = request(&s.addr, "DELETE", &format!("{LISTS}/{ana_id}"), Some(&ana), None);
        assert_eq!(deleted.status, 200);

        let made = post(s, LISTS, &bia, &json!({"name": "bia's", "cnpjs": ["10000001"]}));
        let bia_id = made.body["data"]["id"].as_u64().unwrap();
        assert_ne!(bia_id, ana_id, "a deleted list's id handed out again");
        let before = s.credits("bia");
        let theirs = get(s, &format!("{LISTS}/{ana_id}/events?per_page=50"), &bia);
        assert_eq!(error_of(&theirs), (404, "Watchlist not found."));
        let hers = get(s, &format!("{LISTS}/{bia_id}/events?per_page=50"), &bia);
        assert_eq!((hers.status, hers.body["total"].as_u64()), (200, Some(0)), "{}", hers.body);
        assert_eq!(s.credits("bia"), before, "nothing charged");
    }
}

/// Synthetic months evolved with planted changes: a list of some of the planted CNPJs (their
/// establishments by CNPJ, their companies by base) and of CNPJs that did not change answers
/// exactly the planted events of those CNPJs, event by event, and nothing of any other.
#[test]
fn a_watchlist_over_evolved_months_answers_exactly_its_planted_events() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("m1"), dir.path().join("m2"));
    let synth =
        cnpj_synth::SynthOptions { month: "2026-11".into(), seed: 3, ..cnpj_synth::SynthOptions::new(0.0005, &first) };
    cnpj_synth::generate(&synth).unwrap();
    cnpj_synth::evolve(&cnpj_synth::EvolveOptions { from: first.clone(), out: second.clone(), seed: 4 }).unwrap();
    let (old, new) = (dir.path().join("2026-11.duckdb"), dir.path().join("2026-12.duckdb"));
    build_month(&first, &old, None);
    build_month(&second, &new, Some(&old));
    let manifest: Value = serde_json::from_slice(&std::fs::read(second.join("synth.json")).unwrap()).unwrap();
    let planted: Vec<Planted> = manifest["planted_changes"].as_array().unwrap().iter().map(Planted::of).collect();
    assert!(planted.len() > 50, "{} planted", planted.len());

    let flags =
        ["--rate-limit", "1000", "--max-watched", "100000", "--allow-private-webhooks", "--allow-http-webhooks"];
    let s = serve(dir, new, &[&flags[..], &["--webhook-interval", "1"]].concat());
    let token = s.user("rui", 1000);
    // Every third planted change's CNPJ (an establishment event) or base (a company event); the
    // head office (by its CNPJ, not its base) of some other companies with company events; and
    // two bases of companies without a change.
    let mut entries: BTreeSet<String> = planted.iter().step_by(3).map(|p| p.key()).collect();
    let others = planted.iter().filter(|p| p.cnpj.is_none() && !entries.contains(&p.basico));
    let head_offices = others.filter_map(|p| {
        get(&s, &format!("/api/v1/companies/{}", p.basico), &token).body["data"]["cnpj"].as_str().map(str::to_owned)
    });
    entries.extend(head_offices.take(5).collect::<Vec<_>>());
    let changed: BTreeSet<&str> = planted.iter().map(|p| p.basico.as_str()).collect();
    let quiet = (10_000_000..).map(|n| format!("{n:08}")).filter(|b| !changed.contains(b.as_str())).take(2);
    entries.extend(quiet);
    let bases: BTreeSet<&str> = entries.iter().filter(|e| e.len() == 14).map(|e| &e[..8]).collect();
    let expected: Vec<(String, String, String)> = {
        let mut e: Vec<_> = planted
            .iter()
            .filter(|p| {
                entries.contains(&p.key())
                    || entries.contains(&p.basico)
                    || (p.cnpj.is_none() && bases.contains(p.basico.as_str()))
            })
            .map(Planted::triple)
            .collect();
        e.sort();
        e
    };
    let by_head_office = planted.iter().filter(|p| p.cnpj.is_none() && bases.contains(p.basico.as_str()));
    let by_head_office = by_head_office.filter(|p| !entries.contains(&p.basico)).count();
    assert!(
        expected.len() > 30 && by_head_office >= 5,
        "{} expected, {by_head_office} by a watched head office",
        expected.len()
    );

    let cnpjs: Vec<&String> = entries.iter().collect();
    let made = post(&s, LISTS, &token, &json!({"name": "planted", "cnpjs": cnpjs[..cnpjs.len().min(1000)]}));
    assert_eq!(made.status, 201, "{}", made.body);
    for more in cnpjs[cnpjs.len().min(1000)..].chunks(1000) {
        let body = json!({"add": more}).to_string();
        let r = request(&s.addr, "PATCH", &format!("{LISTS}/1"), Some(&token), Some(body.as_bytes()));
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let answered = answered_and_delivered(&s, &token);
    let mut got: Vec<_> = answered
        .iter()
        .map(|i| {
            let p = Planted::served(i);
            assert!(entries.contains(&p.key()) || entries.contains(&p.basico) || bases.contains(p.basico.as_str()));
            p.triple()
        })
        .collect();
    got.sort();
    let missing: Vec<_> = expected.iter().filter(|e| !got.contains(e)).collect();
    let unplanted: Vec<_> = got.iter().filter(|e| !expected.contains(e)).collect();
    assert!(
        missing.is_empty() && unplanted.is_empty(),
        "planted, not answered: {missing:?}\nanswered, not planted: {unplanted:?}"
    );
    assert_eq!(got, expected, "the same events, as often");
}

/// List 1's events of 2026-12, every page of the events endpoint; checked to be what the month's
/// delivery carries, in the same order (a webhook set on the list, the month served again).
fn answered_and_delivered(s: &Server, token: &str) -> Vec<Value> {
    let mut answered = Vec::new();
    for page in 1.. {
        let r = get(s, &format!("{LISTS}/1/events?month=2026-12&per_page=50&page={page}"), token);
        let items = r.body["data"].as_array().unwrap();
        if items.is_empty() {
            break;
        }
        answered.extend(items.iter().cloned());
    }
    let receiver = Receiver::start(204);
    let hook = json!({"webhook_url": receiver.url}).to_string();
    let r = request(&s.addr, "PATCH", &format!("{LISTS}/1"), Some(token), Some(hook.as_bytes()));
    assert_eq!(r.status, 200, "{}", r.body);
    s.signal("-HUP");
    deliveries_until(s, token, 1, |d| !d.is_empty() && d.iter().all(|d| d["status"] == "delivered"));
    let mut pages: Vec<Value> =
        receiver.got.lock().unwrap().iter().map(|r| serde_json::from_slice(&r.body).unwrap()).collect();
    pages.sort_by_key(|p| p["page"].as_u64());
    let delivered: Vec<Value> = pages.iter().flat_map(|p| p["events"].as_array().unwrap().clone()).collect();
    assert_eq!(delivered, answered, "the delivered pages are the events the endpoint answers");
    answered
}

/// One event as planted (or served): establishment events by CNPJ, company events by base.
struct Planted {
    event: String,
    field: String,
    /// The establishment of an establishment event; none for a company event.
    cnpj: Option<String>,
    basico: String,
}

impl Planted {
    fn of(c: &Value) -> Planted {
        let text = |k: &str| c[k].as_str().map(str::to_owned);
        Planted {
            event: text("event").unwrap(),
            field: text("field").unwrap_or_default(),
            cnpj: text("cnpj"),
            basico: text("cnpj_basico").unwrap(),
        }
    }

    /// A served item: company events carry their head office, which the planted list does not.
    fn served(item: &Value) -> Planted {
        let mut p = Planted::of(item);
        let establishment = matches!(
            p.event.as_str(),
            "opened"
                | "disappeared"
                | "status_changed"
                | "moved"
                | "main_activity_changed"
                | "secondary_activities_changed"
        ) || p.field == "nome_fantasia";
        if !establishment {
            p.cnpj = None;
        }
        p
    }

    /// What the list holds to follow it: the CNPJ of an establishment event, else the base.
    fn key(&self) -> String {
        self.cnpj.clone().unwrap_or_else(|| self.basico.clone())
    }

    fn triple(&self) -> (String, String, String) {
        (self.event.clone(), self.field.clone(), self.key())
    }
}

/// What a receiver got: the request's headers (lower-case names) and body, and when.
pub(super) struct Received {
    pub(super) headers: std::collections::HashMap<String, String>,
    pub(super) body: Vec<u8>,
    pub(super) at: Instant,
}

impl Received {
    /// Whether `X-Registry-Signature` is the HMAC-SHA256 of the timestamp, a dot and the body,
    /// keyed by `secret`.
    pub(super) fn signed_by(&self, secret: &str) -> bool {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{}.", self.headers["x-registry-timestamp"]).as_bytes());
        mac.update(&self.body);
        self.headers["x-registry-signature"] == format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }
}

/// A webhook receiver on loopback: answers every POST with the status it is set to (each
/// connection on a thread of its own), and keeps what it got.
pub(super) struct Receiver {
    pub(super) url: String,
    status: Arc<AtomicU16>,
    pub(super) got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    fn start(status: u16) -> Receiver {
        Receiver::answering(status, Duration::ZERO, 0)
    }

    /// A receiver that answers after `delay`, and never answers the first `held` requests: it
    /// keeps their connections open until the sender closes them.
    pub(super) fn answering(status: u16, delay: Duration, held: usize) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let (status, got) = (Arc::new(AtomicU16::new(status)), Arc::new(Mutex::new(Vec::new())));
        let (answer, kept) = (Arc::clone(&status), Arc::clone(&got));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (answer, kept) = (Arc::clone(&answer), Arc::clone(&kept));
                std::thread::spawn(move || {
                    let Some(received) = Receiver::read(&stream) else { return };
                    let mut got = kept.lock().unwrap();
                    got.push(received);
                    if got.len() <= held {
                        drop(got);
                        let _ = std::io::copy(&mut stream, &mut std::io::sink());
                        return;
                    }
                    drop(got);
                    std::thread::sleep(delay);
                    let code = answer.load(Ordering::SeqCst);
                    let _ = stream.write_all(format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n").as_bytes());
                });
            }
        });
        Receiver { url, status, got }
    }

    /// One request, or none when the sender went away before it was whole.
    fn read(stream: &TcpStream) -> Option<Received> {
        let mut reader = BufReader::new(stream);
        let mut headers = std::collections::HashMap::new();
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        loop {
            line.clear();
            if reader.read_line(&mut line).ok()? == 0 || line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.trim_end().split_once(": ") {
                headers.insert(k.to_ascii_lowercase(), v.to_owned());
            }
        }
        let length = headers.get("content-length").map_or(0, |l| l.parse().unwrap());
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        Some(Received { headers, body, at: Instant::now() })
    }

    fn count(&self) -> usize {
        self.got.lock().unwrap().len()
    }
}

/// Polls the list's deliveries until `done` holds of them (20 s at most).
fn deliveries_until(s: &Server, token: &str, list: u64, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = get(s, &format!("{LISTS}/{list}/deliveries"), token);
        let items = r.body["data"].as_array().unwrap().clone();
        if done(&items) {
            return items;
        }
        assert!(Instant::now() < deadline, "deliveries of list {list}: {items:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Once a month is served (a SIGHUP swap here), each list with a webhook gets its events POSTed
/// to a receiver on loopback, signed, with a stable delivery id, charged 1 credit; a user without
/// credits waits for them; a refused delivery is tried again, and retried by its user. The
/// server's environment names a proxy that is not there: the sender connects to the receiver.
#[test]
fn webhooks_deliver_the_month_signed_once_it_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let (september, october) = (dir.path().join("2026-09.duckdb"), dir.path().join("2026-10.duckdb"));
    build_month(&root().join("data/sample-dump"), &september, None);
    build_month(&root().join("data/sample-dump-next"), &october, Some(&september));
    let flags =
        ["--allow-private-webhooks", "--allow-http-webhooks", "--webhook-interval", "1", "--rate-limit", "1000"];
    let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
    let dataset = vec!["--db".into(), october.clone().into()];
    let s = Server::launch(dir, october, dataset, accounts, &flags, |command| {
        for proxy in ["ALL_PROXY", "HTTPS_PROXY", "HTTP_PROXY", "http_proxy"] {
            command.env(proxy, "http://127.0.0.1:9");
        }
    });
    let doc = document();
    let (ana, bia) = (s.user("ana", 10), s.user("bia", 0));
    let (good, bad) = (Receiver::start(204), Receiver::start(500));
    let entries = json!(["44555666000262", "22333444", "12345678000276", "66777888"]);
    let mut secrets = Vec::new();
    for (token, url) in [(&ana, &good.url), (&bia, &good.url), (&ana, &bad.url)] {
        let made = post(&s, LISTS, token, &json!({"name": "hooked", "cnpjs": entries, "webhook_url": url}));
        secrets.push(made.body["data"]["webhook_secret"].as_str().unwrap().to_owned());
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(good.count() + bad.count(), 0, "nothing is sent before a month is served after the lists were made");
    s.signal("-HUP");

    let delivered = deliveries_until(&s, &ana, 1, |d| d.first().is_some_and(|d| d["status"] == "delivered"));
    assert_eq!(
        (delivered.len(), &delivered[0]["delivery_id"], &delivered[0]["attempts"]),
        (1, &json!("wl1-2026-10-1"), &json!(1))
    );
    let got = good.got.lock().unwrap().remove(0);
    let body: Value = serde_json::from_slice(&got.body).unwrap();
    let events = get(&s, &format!("{LISTS}/1/events?month=2026-10&per_page=50"), &ana).body["data"].clone();
    assert_eq!(body["events"], events, "the month's events of the list");
    assert_eq!(events.as_array().unwrap().len(), 11);
    let head = json!({"watchlist_id": 1, "month": "2026-10", "delivery_id": "wl1-2026-10-1", "page": 1, "pages": 1});
    assert_eq!(
        body.as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k != "events")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Map<_, _>>(),
        *head.as_object().unwrap()
    );
    assert_eq!(got.headers["x-registry-delivery"], "wl1-2026-10-1");
    assert!(got.signed_by(&secrets[0]) && !got.signed_by(&secrets[1]), "{:?}", got.headers);
    let listed =
        call(&s, &doc, "GET", "/api/v1/watchlists/{id}/deliveries", &format!("{LISTS}/1/deliveries"), &ana, None);
    assert_eq!(listed.body["total"], 1);

    // Without credits, bia's delivery waits; with them, it goes.
    let waiting = deliveries_until(&s, &bia, 2, |d| d.first().is_some_and(|d| d["status"] == "waiting_credits"));
    assert_eq!(waiting[0]["attempts"], 0);
    super::api(&s.accounts, &["accounts", "grant", "bia", "3"]);
    deliveries_until(&s, &bia, 2, |d| d.first().is_some_and(|d| d["status"] == "delivered"));
    assert_eq!(s.credits("bia"), (2, 1), "1 credit a delivery");

    // A 500: tried again after a minute; the user's retry makes it due now.
    let refused = deliveries_until(&s, &ana, 3, |d| d.first().is_some_and(|d| d["attempts"] == 1));
    assert_eq!((&refused[0]["status"], &refused[0]["last_error"]), (&json!("pending"), &json!("HTTP 500")));
    bad.status.store(200, Ordering::SeqCst);
    let retry = format!("{LISTS}/3/deliveries/wl3-2026-10-1/retry");
    let retried = call(&s, &doc, "POST", "/api/v1/watchlists/{id}/deliveries/{delivery_id}/retry", &retry, &ana, None);
    assert_eq!(retried.body["data"]["status"], "pending");
    deliveries_until(&s, &ana, 3, |d| d.first().is_some_and(|d| d["status"] == "delivered" && d["attempts"] == 2));
    let ids: Vec<String> = bad.got.lock().unwrap().iter().map(|r| r.headers["x-registry-delivery"].clone()).collect();
    assert_eq!(ids, ["wl3-2026-10-1", "wl3-2026-10-1"], "the same id at every attempt");
    let other = call(&s, &doc, "POST", "/api/v1/watchlists/{id}/deliveries/{delivery_id}/retry", &retry, &bia, None);
    assert_eq!(error_of(&other), (404, "Delivery not found."));
    assert_eq!(s.credits("ana"), (10 - 1 - 3, 4), "an events page, and three POSTs");
}

/// Without `--allow-private-webhooks`, a name (set freely: a name is checked as a delivery
/// connects) that resolves to loopback is refused when its delivery connects, and the delivery's
/// error says only that it is not public: neither the address nor its kind, which would make the
/// API a resolver of internal names at a credit a probe.
#[test]
fn a_refused_delivery_does_not_say_where_its_host_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let (september, october) = (dir.path().join("2026-09.duckdb"), dir.path().join("2026-10.duckdb"));
    build_month(&root().join("data/sample-dump"), &september, None);
    build_month(&root().join("data/sample-dump-next"), &october, Some(&september));
    let receiver = Receiver::start(204);
    let s = serve(dir, october, &["--webhook-interval", "1", "--rate-limit", "1000"]);
    let ana = s.user("ana", 10);
    let url = receiver.url.replace("http://127.0.0.1", "https://localhost");
    let made = post(&s, LISTS, &ana, &json!({"name": "hooked", "cnpjs": ["44555666000262"], "webhook_url": url}));
    assert_eq!(made.status, 201, "{}", made.body);
    s.signal("-HUP");
    let refused = deliveries_until(&s, &ana, 1, |d| d.first().is_some_and(|d| d["attempts"] == 1));
    assert_eq!(
        (&refused[0]["status"], &refused[0]["last_error"]),
        (&json!("pending"), &json!("refused: localhost does not resolve to public addresses only"))
    );
    assert_eq!(receiver.count(), 0, "nothing was sent");
}
