//! The MCP endpoint (`/mcp`) driven by the official Python SDK: `mcp_client.py`, run by the
//! Python that `CNPJ_TEST_PYTHON` names (the virtualenv `scripts/setup-test-deps` fills), lists the
//! tools and checks their schemas, calls each tool over the protocol's newest version and one over
//! the older initialize handshake, and tries a missing and a revoked token. Here each result is
//! compared with the REST API's answer to the same request, made by another user: the structured
//! content is the REST `data` (a refusal: the REST error envelope, and its message the text), both
//! users' ledgers hold the same debits, and the refused requests are the REST API's 401 (another
//! method than POST: its 405). A body that is not a JSON-RPC message is JSON-RPC's error, in a 400.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::changes::{build_month, serve};
use super::{Reply, Server, api, get, post, root};

/// A tool call and the same request to the REST API: its path, and the body of a POST.
struct Case {
    tool: &'static str,
    arguments: Value,
    path: &'static str,
    body: Option<Value>,
}

fn case(tool: &'static str, arguments: Value, path: &'static str) -> Case {
    Case { tool, arguments, path, body: None }
}

/// Every tool with a few arguments each (answered, empty, refused), and a batch.
fn cases() -> Vec<Case> {
    let batch = json!(["11.222.333/0001-81", "bad", "11222333", "11444777000161", "11222333000181"]);
    vec![
        case(
            "get_company",
            json!({"cnpj": "11.222.333/0001-81", "locale": "en"}),
            "/api/v1/companies/11.222.333%2F0001-81?locale=en",
        ),
        case("get_company", json!({"cnpj": "44555666"}), "/api/v1/companies/44555666"),
        case(
            "search_companies",
            json!({"state": "SP", "per_page": 2, "page": 2, "locale": "es"}),
            "/api/v1/companies/search?state=SP&per_page=2&page=2&locale=es",
        ),
        case(
            "search_companies",
            json!({"trading_name": "pio xii comercio", "zip_code": "01310", "situacao_cadastral": 2}),
            "/api/v1/companies/search?trading_name=pio%20xii%20comercio&zip_code=01310&situacao_cadastral=2",
        ),
        case("search_companies", json!({"state": "AC"}), "/api/v1/companies/search?state=AC"),
        case(
            "count_companies",
            json!({"state": "SP,DF", "has_email": true}),
            "/api/v1/companies/count?state=SP,DF&has_email=true",
        ),
        case(
            "search_companies",
            json!({"any_sector": "6201-5/01", "head_office": true, "capital_from": 1000}),
            "/api/v1/companies/search?any_sector=6201-5/01&head_office=true&capital_from=1000",
        ),
        Case {
            tool: "get_companies",
            arguments: json!({"cnpjs": batch, "locale": "en"}),
            path: "/api/v1/companies/batch?locale=en",
            body: Some(json!({"cnpjs": batch})),
        },
        case("company_history", json!({"cnpj": "11222333"}), "/api/v1/companies/11222333/history"),
        case(
            "list_changes",
            json!({"month": "2026-10", "event": "moved,renamed", "per_page": 3, "locale": "en"}),
            "/api/v1/changes?month=2026-10&event=moved,renamed&per_page=3&locale=en",
        ),
        // The agent's list is the first made, the person's the second (the same entries).
        case(
            "watchlist_events",
            json!({"watchlist_id": 1, "month": "2026-10", "per_page": 5}),
            "/api/v1/watchlists/2/events?month=2026-10&per_page=5",
        ),
        case("reference_data", json!({"locale": "es"}), "/api/v1/reference-data?locale=es"),
        case("list_cities", json!({"state": "SP", "per_page": 1}), "/api/v1/cities?state=SP&per_page=1"),
        case(
            "search_partners",
            json!({"name": "tal", "type": "2", "locale": "en"}),
            "/api/v1/partners/search?name=tal&type=2&locale=en",
        ),
        case("get_partner", json!({"partner_id": "pjnrquzm2ntgqdkaa"}), "/api/v1/partners/pjnrquzm2ntgqdkaa"),
        case(
            "company_network",
            json!({"cnpj": "11.222.333/0001-81", "depth": 3, "locale": "es"}),
            "/api/v1/companies/11.222.333%2F0001-81/network?depth=3&locale=es",
        ),
    ]
    .into_iter()
    .chain(refused_cases())
    .collect()
}

/// Cases refused: the REST errors.
fn refused_cases() -> Vec<Case> {
    vec![
        case("search_companies", json!({"per_page": 51}), "/api/v1/companies/search?per_page=51"),
        case("count_companies", json!({"state": "SP,,RJ"}), "/api/v1/companies/count?state=SP,,RJ"),
        case("get_company", json!({"cnpj": "11222333000182"}), "/api/v1/companies/11222333000182"),
        case("get_company", json!({"cnpj": "11444777000161"}), "/api/v1/companies/11444777000161"),
        case(
            "company_history",
            json!({"cnpj": "11222333", "locale": "fr"}),
            "/api/v1/companies/11222333/history?locale=fr",
        ),
        case("list_changes", json!({"event": "closed"}), "/api/v1/changes?event=closed"),
        case("watchlist_events", json!({"watchlist_id": 2}), "/api/v1/watchlists/1/events"),
        case("get_partner", json!({"partner_id": "paaaaaaaaaaaaaaaa"}), "/api/v1/partners/paaaaaaaaaaaaaaaa"),
        case(
            "company_network",
            json!({"cnpj": "11222333", "max_nodes": 501}),
            "/api/v1/companies/11222333/network?max_nodes=501",
        ),
        Case {
            tool: "get_companies",
            arguments: json!({"cnpjs": []}),
            path: "/api/v1/companies/batch",
            body: Some(json!({"cnpjs": []})),
        },
    ]
}

fn rest(s: &Server, token: &str, case: &Case) -> Reply {
    match &case.body {
        Some(body) => post(s, case.path, token, body),
        None => get(s, case.path, token),
    }
}

/// Runs `mcp_client.py` with `plan` on stdin: what it printed.
fn run_client(plan: &Value) -> Value {
    let python = std::env::var("CNPJ_TEST_PYTHON").unwrap_or_else(|_| {
        panic!(
            "CNPJ_TEST_PYTHON is not set: the MCP test needs a Python with the `mcp` package (scripts/setup-test-deps)"
        )
    });
    let script = root().join("crates/cnpj-api/tests/api/mcp_client.py");
    let mut child = Command::new(&python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("CNPJ_TEST_PYTHON={python} cannot be run: {e}"));
    child.stdin.take().unwrap().write_all(plan.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "mcp_client.py: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("mcp_client.py prints JSON")
}

/// A user's debits, in order: (amount, what).
fn ledger(s: &Server, name: &str) -> Vec<(i64, String)> {
    let super::AccountsAt::File(path) = &s.accounts else { panic!("SQLite accounts") };
    let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let sql = "SELECT amount, what FROM debits WHERE user_id = (SELECT id FROM users WHERE name = ?1) ORDER BY id";
    let mut stmt = conn.prepare(sql).unwrap();
    let rows = stmt.query_map([name], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

/// A tool result (`mcp_client.py`'s `seen`) against the REST reply to the same request.
fn compare(case: &Case, seen: &Value, reply: &Reply) {
    let what = format!("{} {}", case.tool, case.arguments);
    let text = seen["texts"].as_array().filter(|t| t.len() == 1).and_then(|t| t[0].as_str());
    let text = text.unwrap_or_else(|| panic!("{what}: one text, got {seen}"));
    if reply.status == 200 {
        assert_eq!(seen["is_error"], false, "{what}: {seen}");
        // A count has no `data`: its total is the structured content.
        let data = match case.tool {
            "count_companies" => json!({"total": reply.body["total"]}),
            _ => reply.body["data"].clone(),
        };
        assert!(seen["structured"] == data, "{what}: {}\nREST: {}", seen["structured"], data);
    } else {
        assert_eq!(seen["is_error"], true, "{what}: {seen}");
        assert_eq!(seen["structured"], reply.body, "{what}: the REST error envelope");
        let message = reply.body["message"].as_str().unwrap();
        assert!(text.starts_with(message), "{what}: {text:?} is not the REST message {message:?}");
        for (param, messages) in reply.body["errors"].as_object().into_iter().flatten() {
            assert!(text.contains(&format!("{param}: {}", messages[0].as_str().unwrap())), "{what}: {text:?}");
        }
    }
}

#[test]
fn tools_answer_as_the_rest_api_does() {
    let dir = tempfile::tempdir().unwrap();
    let (september, october) = (dir.path().join("2026-09.duckdb"), dir.path().join("2026-10.duckdb"));
    build_month(&root().join("data/sample-dump"), &september, None);
    build_month(&root().join("data/sample-dump-next"), &october, Some(&september));
    let s = serve(dir, october, &[]);
    let agent = s.user("agent", 1000);
    let person = s.user("person", 1000);
    let revoked = api(&s.accounts, &["accounts", "issue-token", "agent"]);
    api(&s.accounts, &["accounts", "revoke-token", &revoked[..12]]);
    for token in [&agent, &person] {
        let list = json!({"name": "suppliers", "cnpjs": ["11222333", "22.333.444/0001-81"]});
        assert_eq!(post(&s, "/api/v1/watchlists", token, &list).status, 201);
    }
    let cases = cases();
    let calls: Vec<Value> = cases.iter().map(|c| json!({"tool": c.tool, "arguments": c.arguments})).collect();
    let url = format!("http://{}/mcp", s.addr);
    let seen = run_client(&json!({"url": url, "token": agent, "revoked": revoked, "calls": calls}));

    assert_eq!(seen["protocol"], "2026-07-28", "the newest version: any JSON value as structured content");
    assert!(seen["legacy_protocol"].as_str() < seen["protocol"].as_str(), "{}", seen["legacy_protocol"]);
    let replies: Vec<Reply> = cases.iter().map(|c| rest(&s, &person, c)).collect();
    assert_eq!(replies.iter().filter(|r| r.status == 200).count(), 16, "the cases answered");
    for ((case, seen), reply) in cases.iter().zip(seen["calls"].as_array().unwrap()).zip(&replies) {
        compare(case, seen, reply);
    }
    // The handshake-era client gets the same (an object: kept as structured content there too).
    compare(&cases[0], &seen["legacy_call"], &rest(&s, &person, &cases[0]));

    // Both users paid the same, request by request.
    let debits = ledger(&s, "agent");
    assert_eq!(debits, ledger(&s, "person"));
    let whats: Vec<&str> = debits.iter().map(|(_, what)| what.as_str()).collect();
    let expected = [
        "detail",
        "detail",
        "search",
        "search",
        "search",
        "batch",
        "history",
        "changes",
        "watchlist_events",
        "partner_search",
        "partner",
        "network",
        "detail",
    ];
    assert_eq!(whats, expected, "a count is free");
    assert_eq!(s.credits("agent"), (986, 14));
    assert_eq!(s.credits("person"), (986, 14));

    for refused in ["missing", "revoked"] {
        let r = &seen["refused"][refused];
        assert!(r["sdk_error"].is_string(), "{refused}: the SDK does not connect: {r}");
        assert_eq!((r["status"].as_u64(), r["www_authenticate"].as_str()), (Some(401), Some("Bearer")), "{refused}");
        assert_eq!(r["body"], json!({"success": false, "message": "Unauthenticated."}), "{refused}");
    }
    // POST only (no session, no event stream): another method is the REST API's 405, before
    // authentication.
    for method in ["GET", "DELETE", "HEAD"] {
        let r = super::request(&s.addr, method, "/mcp", None, None);
        assert_eq!((r.status, r.header("allow")), (405, Some("POST")), "{method}");
    }
}

/// A POST of `body` to `/mcp` as an MCP client sends one (JSON; JSON and event streams accepted).
fn mcp_request(s: &Server, token: &str, body: &[u8]) -> Vec<u8> {
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        s.addr,
        body.len()
    );
    [head.as_bytes(), body].concat()
}

/// That POST's reply.
pub(crate) fn mcp_post(s: &Server, token: &str, body: &[u8]) -> Reply {
    super::exchange(&s.addr, &mcp_request(s, token, body))
}

/// An `initialize` request from a client named `client`.
pub(crate) fn initialize(client: &str) -> Vec<u8> {
    let params =
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}});
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).to_string().into_bytes()
}

/// A body that is not JSON is JSON-RPC's parse error, one that is JSON but not a JSON-RPC message
/// its invalid request: each in a 400 with a null id (not rmcp's 415 with serde's message), and
/// nothing reaches the tools.
#[test]
fn a_body_that_is_not_a_json_rpc_message_is_a_json_rpc_error() {
    let s = Server::start(&[]);
    let token = s.user("eve", 10);
    let parse = (-32700, "Parse error");
    let invalid = (-32600, "Invalid Request");
    for (body, (code, message)) in [
        (&br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list""#[..], parse),
        (b"not json", parse),
        (b"", parse),
        (br#"{"id": 1}"#, invalid),
        (br#"[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]"#, invalid),
        (b"42", invalid),
    ] {
        // Read as it comes (rmcp's 415 was text without a type).
        let mut stream = TcpStream::connect(&s.addr).unwrap();
        stream.write_all(&mcp_request(&s, &token, body)).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, json) = answer.split_once("\r\n\r\n").unwrap();
        let shown = String::from_utf8_lossy(body);
        let typed = head.to_ascii_lowercase().contains("\r\ncontent-type: application/json\r\n");
        assert!(head.starts_with("HTTP/1.1 400 ") && typed, "{shown}: {answer}");
        let expected = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
        assert_eq!(serde_json::from_str::<Value>(json).unwrap(), expected, "{shown}");
    }
    let r = mcp_post(&s, &token, &initialize("probe"));
    assert_eq!((r.status, &r.body["result"]["serverInfo"]["name"]), (200, &json!("cnpj-registry")), "{}", r.body);
    assert_eq!(s.credits("eve"), (10, 0));
}
