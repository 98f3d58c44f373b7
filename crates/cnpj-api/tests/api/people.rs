//! Accounts for people through the binary: the account as JSON (`/api/v1/account`, `/usage`)
//! against the OpenAPI document, the allowance spent before the credits, per-plan rate limits,
//! usage counted exactly under concurrency and written at SIGTERM, the operator's commands
//! (invite, set-login, role, reset-link) and the pages served on the same listener.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{AccountsAt, Reply, Server, api, error_of, get, post, request, validator};

const PLANS: &str = "default = \"free\"\n\n[plans.free]\nmonthly_allowance = 5\nrequests_per_minute = 1000\n\n\
                     [plans.tiny]\nrequests_per_minute = 2\n";

/// A server with the plans above (the file in `dir`).
fn with_plans(dir: &tempfile::TempDir) -> Server {
    let plans = dir.path().join("plans.toml");
    std::fs::write(&plans, PLANS).unwrap();
    Server::start(&["--plans", plans.to_str().unwrap()])
}

fn sql(s: &Server, statement: &str) {
    let AccountsAt::File(path) = &s.accounts else { panic!("a SQLite store") };
    rusqlite::Connection::open(path).unwrap().execute_batch(statement).unwrap();
}

/// Requests counted in the store's usage, by endpoint.
fn stored_usage(s: &Server) -> std::collections::BTreeMap<String, (i64, i64)> {
    let AccountsAt::File(path) = &s.accounts else { panic!("a SQLite store") };
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn.prepare("SELECT endpoint, sum(requests), sum(credits) FROM usage GROUP BY endpoint").unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?)))).unwrap().map(Result::unwrap).collect()
}

#[test]
fn the_account_as_json_the_allowance_first_and_usage_counted_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let s = with_plans(&dir);
    let token = s.user("ana", 3);
    let r = get(&s, "/api/v1/account", &token);
    assert_eq!((r.status, &r.body["success"]), (200, &json!(true)), "the envelope of every answer: {}", r.body);
    let account = &r.body["data"];
    assert_eq!(account["user"], json!({"name": "ana", "email": null, "plan": "free"}));
    assert_eq!(
        (account["allowance"]["monthly"].as_i64(), account["allowance"]["remaining"].as_i64()),
        (Some(5), Some(5))
    );
    assert!(account["allowance"]["resets_at"].as_str().unwrap().ends_with("-01T00:00:00Z"));
    assert_eq!((account["credits"].as_i64(), account["credits_remaining"].as_i64()), (Some(3), Some(8)));
    assert_eq!(account["rate_limit"]["per_minute"], 1000);
    assert_eq!(account["tokens"][0]["prefix"], token[..12]);
    assert_eq!(r.header("x-ratelimit-limit"), Some("1000"));

    assert_eq!(get(&s, "/api/v1/companies/11222333000181", &token).status, 200);
    assert_eq!(get(&s, "/api/v1/companies/11222333000262", &token).status, 200);
    let batch = post(&s, "/api/v1/companies/batch", &token, &json!({"cnpjs": ["11222333000181", "44555666000181"]}));
    assert_eq!(batch.body["credits_remaining"], 4, "allowance left and credits");
    let r = get(&s, "/api/v1/account", &token);
    assert_eq!(
        (r.body["data"]["allowance"]["remaining"].as_i64(), r.body["data"]["credits"].as_i64()),
        (Some(1), Some(3))
    );
    let over = post(
        &s,
        "/api/v1/companies/batch",
        &token,
        &json!({"cnpjs": ["11222333", "44555666", "55666777", "12345678", "AB12CD34"]}),
    );
    assert_eq!(error_of(&over), (402, "Insufficient credits."), "5 found, 4 left: nothing charged");
    assert_eq!(s.credits("ana"), (3, 4), "the allowance went first");

    let usage = usage_counted_exactly(&s, &token);
    replies_match_the_document(&s, &token, &usage);
    a_plan_has_its_own_rate_limit(&s);
}

/// 200 requests on 8 threads, then the usage as JSON once written: every request counted.
fn usage_counted_exactly(s: &Server, token: &str) -> Reply {
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                for _ in 0..25 {
                    assert_eq!(get(s, "/api/v1/reference-data", token).status, 200);
                }
            });
        }
    });
    let deadline = Instant::now() + Duration::from_secs(15);
    let usage = loop {
        let r = get(s, "/api/v1/account/usage?days=1", token);
        assert_eq!(r.status, 200, "{}", r.body);
        let rows = r.body["data"].as_array().unwrap().clone();
        if rows.iter().any(|u| u["endpoint"] == "reference-data") {
            break r;
        }
        assert!(Instant::now() < deadline, "usage not written within 15 s");
        std::thread::sleep(Duration::from_millis(500));
    };
    let of = |endpoint: &str| {
        let rows = usage.body["data"].as_array().unwrap();
        let row =
            rows.iter().find(|u| u["endpoint"] == endpoint).unwrap_or_else(|| panic!("{endpoint}: {}", usage.body));
        (row["requests"].as_i64().unwrap(), row["credits"].as_i64().unwrap())
    };
    assert_eq!(of("reference-data"), (200, 0), "exact under concurrency");
    assert_eq!((of("detail"), of("batch")), ((2, 2), (2, 2)), "a 402 is counted, not charged");
    assert_eq!((&usage.body["success"], &usage.body["days"]), (&json!(true), &json!(1)));
    usage
}

/// The account's replies (200s, 401, 400s) against the OpenAPI document.
fn replies_match_the_document(s: &Server, token: &str, usage: &Reply) {
    let doc: serde_json::Value = serde_json::from_str(include_str!("../../../../schemas/openapi.json")).unwrap();
    let bad_days = [get(s, "/api/v1/account/usage?days=0", token), get(s, "/api/v1/account/usage?days=91", token)];
    for bad in &bad_days {
        assert_eq!(error_of(bad), (400, "Invalid input parameters"));
        assert!(bad.body["errors"]["days"].is_array());
    }
    let (account, anonymous) =
        (get(s, "/api/v1/account", token), request(&s.addr, "GET", "/api/v1/account", None, None));
    let month = get(s, "/api/v1/account/usage", token);
    let cases = [
        ("/api/v1/account", &account),
        ("/api/v1/account", &anonymous),
        ("/api/v1/account/usage", usage),
        ("/api/v1/account/usage", &month),
        ("/api/v1/account/usage", &bad_days[0]),
        ("/api/v1/account/usage", &bad_days[1]),
    ];
    for (template, reply) in cases {
        let v = validator(&doc, template, "get", reply.status);
        let errors: Vec<String> = v.iter_errors(&reply.body).map(|e| format!("{e} at {}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{template} {}: {errors:?}\n{}", reply.status, reply.body);
    }
}

fn a_plan_has_its_own_rate_limit(s: &Server) {
    let tiny = s.user("tim", 0);
    sql(s, "UPDATE users SET plan = 'tiny' WHERE name = 'tim'");
    let first = get(s, "/api/v1/reference-data", &tiny);
    assert_eq!((first.status, first.header("x-ratelimit-limit")), (200, Some("2")));
    assert_eq!(get(s, "/api/v1/reference-data", &tiny).status, 200);
    assert_eq!(error_of(&get(s, "/api/v1/reference-data", &tiny)), (429, "Too many requests."));
}

#[test]
fn usage_counts_are_written_at_sigterm() {
    let mut s = Server::start(&[]);
    let token = s.user("ugo", 0);
    let mut sent = 0;
    // Counts still in memory at SIGTERM (a periodic write may have taken earlier ones).
    for _ in 0..5 {
        for _ in 0..7 {
            assert_eq!(get(&s, "/api/v1/cities", &token).status, 200);
            sent += 1;
        }
        if stored_usage(&s).get("cities").map_or(0, |c| c.0) < sent {
            break;
        }
    }
    s.signal("-TERM");
    let deadline = Instant::now() + Duration::from_secs(40);
    while s.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(stored_usage(&s).get("cities"), Some(&(sent, 0)), "every request counted at shutdown");
    let AccountsAt::File(path) = &s.accounts else { unreachable!() };
    let used: Option<i64> = rusqlite::Connection::open(path)
        .unwrap()
        .query_row("SELECT last_used_at FROM tokens", [], |r| r.get(0))
        .unwrap();
    assert!(used.is_some(), "the token's last use is noted");
}

#[test]
fn operator_commands_for_people_and_the_pages_beside_the_api() {
    let s = Server::start(&["--insecure-cookies"]);
    s.user("vera", 0);
    let link = api(&s.accounts, &["accounts", "invite", "Wil@Example.com", "--credits", "7"]);
    assert!(link.starts_with("http://127.0.0.1:8080/signup?invite="), "{link}");
    let path = link.trim_start_matches("http://127.0.0.1:8080");
    let page = request(&s.addr, "GET", path, None, None);
    assert_eq!(page.status, 200);
    assert!(String::from_utf8_lossy(&page.raw).contains("wil@example.com"));
    assert!(page.header("content-security-policy").unwrap().contains("frame-ancestors 'none'"));
    let unknown_plan = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
        .args(s.accounts.args())
        .args(["accounts", "invite", "x@y.org", "--plan", "gold"])
        .output()
        .unwrap();
    assert!(!unknown_plan.status.success() && String::from_utf8_lossy(&unknown_plan.stderr).contains("gold"));
    let not_an_address = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
        .args(s.accounts.args())
        .args(["accounts", "invite", "x<svg/onload=alert(1)>@evil.example"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&not_an_address.stderr);
    assert!(!not_an_address.status.success() && said.contains("not an email address"), "{said}");

    let set_login = |password: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
            .args(s.accounts.args())
            .args(["accounts", "set-login", "vera", "--email", "Vera@Example.com"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(format!("{password}\n").as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let weak = set_login("password1");
    assert!(!weak.status.success() && String::from_utf8_lossy(&weak.stderr).contains("at least 10"), "{weak:?}");
    let set = set_login("vera's long secret");
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    assert_eq!(api(&s.accounts, &["accounts", "role", "vera", "admin"]), "vera is now admin");
    let reset = api(&s.accounts, &["accounts", "reset-link", "VERA@example.com"]);
    assert!(reset.contains("/password/reset?token="), "{reset}");
    let reset_page = request(&s.addr, "GET", reset.trim_start_matches("http://127.0.0.1:8080"), None, None);
    assert_eq!(reset_page.status, 200);
    let login = request(&s.addr, "GET", "/login", None, None);
    assert_eq!(login.status, 200);
    assert!(!login.headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("set-cookie") && v.contains("Secure")));

    let serve = |extra: &[&str]| {
        let db = s.db.to_str().unwrap().to_owned();
        let command = Command::new(env!("CARGO_BIN_EXE_cnpj-api"))
            .args(s.accounts.args())
            .args(["serve", "--db", &db])
            .args(extra)
            .output();
        command.unwrap()
    };
    assert_eq!(serve(&["--smtp-url", "smtp://127.0.0.1:25"]).status.code(), Some(2), "--mail-from too");
    let bad_from =
        serve(&["--smtp-url", "smtp://127.0.0.1:25", "--mail-from", "not an address", "--listen", "127.0.0.1:0"]);
    assert!(String::from_utf8_lossy(&bad_from.stderr).contains("--mail-from"), "{bad_from:?}");
    let help = Command::new(env!("CARGO_BIN_EXE_cnpj-api")).args(["accounts", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for command in ["invite", "set-login", "role", "reset-link"] {
        assert!(help.contains(command), "{help}");
    }
}
