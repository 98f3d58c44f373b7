//! Partners (contract §14) over HTTP, on an evolved synthetic month (homonyms, accents, holdings
//! that are companies of the month, chains, partners entering and leaving): the search's totals
//! and order against the partners read straight from the DuckDB file and folded in Rust, a
//! partner's companies and events against the tables, the network's walk against its rules,
//! what `--partners off` removes, and what no answer or log line may hold.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use cnpj_model::fold;
use serde_json::{Value, json};

use super::changes::{build_month, serve};
use super::{Server, error_of, get};

/// An identity as the DuckDB file has it: (partner_id, nome, tipo, documento, pais, partner_basico).
type Identity = (String, String, String, String, String, String);

/// The rows of `sql` on `db` (read-only), each column as text (`""` for NULL).
fn query(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let config = duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap();
    let conn = duckdb::Connection::open_with_flags(db, config).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    let rows = stmt.query_map([], |r| {
        let n = r.as_ref().column_count();
        (0..n).map(|i| r.get::<_, Option<String>>(i).map(Option::unwrap_or_default)).collect()
    });
    rows.unwrap().map(Result::unwrap).collect()
}

fn identities(db: &Path) -> Vec<Identity> {
    query(db, "SELECT partner_id, nome, tipo, documento, pais, partner_basico FROM partner_identities")
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone(), r[2].clone(), r[3].clone(), r[4].clone(), r[5].clone()))
        .collect()
}

/// Two evolved synthetic months, the second built over the first, served.
fn evolved(extra: &[&str]) -> Server {
    let (dir, db) = evolved_month();
    serve(dir, db, &[&["--rate-limit", "100000"], extra].concat())
}

/// Two evolved synthetic months, the second built over the first: its dataset.
fn evolved_month() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("m1"), dir.path().join("m2"));
    let synth =
        cnpj_synth::SynthOptions { month: "2026-11".into(), seed: 5, ..cnpj_synth::SynthOptions::new(0.0005, &first) };
    cnpj_synth::generate(&synth).unwrap();
    cnpj_synth::evolve(&cnpj_synth::EvolveOptions { from: first.clone(), out: second.clone(), seed: 6 }).unwrap();
    let (old, new) = (dir.path().join("2026-11.duckdb"), dir.path().join("2026-12.duckdb"));
    build_month(&first, &old, None);
    build_month(&second, &new, Some(&old));
    (dir, new)
}

/// Every page of a partners' search, its items in order, after checking each page's totals.
fn all_pages(s: &Server, token: &str, filters: &str) -> (u64, Vec<Value>) {
    let mut items = Vec::new();
    let first = get(s, &format!("/api/v1/partners/search?{filters}&per_page=50"), token);
    assert_eq!(first.status, 200, "{filters}: {}", first.body);
    let (total, last) = (first.body["total"].as_u64().unwrap(), first.body["last_page"].as_u64().unwrap());
    items.extend(first.body["data"].as_array().unwrap().clone());
    for page in 2..=last.min(8) {
        let r = get(s, &format!("/api/v1/partners/search?{filters}&per_page=50&page={page}"), token);
        assert_eq!(r.body["total"].as_u64(), Some(total), "{filters}");
        items.extend(r.body["data"].as_array().unwrap().clone());
    }
    (total, items)
}

/// The search's totals and order are those of the identities folded in Rust (names cut
/// mid-word, several words, with type, state and document), each item as the table has it.
#[test]
fn the_partners_search_is_exact_and_ordered_by_folded_name() {
    let s = evolved(&[]);
    let token = s.user("jo", 100_000);
    let all = identities(&s.db);
    assert!(all.len() > 1000, "{} identities", all.len());
    let in_state: BTreeSet<String> = query(
        &s.db,
        "SELECT DISTINCT l.partner_id FROM partner_links l JOIN estabelecimentos e USING (cnpj_basico) WHERE e.uf = 'SP'",
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    // Terms cut from real names, mid-word, one to three words.
    let mut terms: Vec<String> = Vec::new();
    for (_, nome, ..) in all.iter().step_by(all.len() / 12) {
        let words: Vec<&str> = nome.split(' ').collect();
        let cut = |w: &str| w.chars().skip(1).take(4).collect::<String>();
        terms.push(cut(words[0]));
        if words.len() > 1 {
            terms.push(format!("{} {}", &words[0][words[0].len().saturating_sub(3)..], cut(words[1])));
        }
        if words.len() > 2 {
            terms.push(format!("{} {} {}", &words[0][1..], words[1], cut(words[2])));
        }
    }
    terms.push("João".into());
    the_index_answers_as_sql_does(&s.db, &terms);
    let mut searched = 0;
    for term in &terms {
        for (extra, keep) in [
            ("", &(|_: &Identity| true) as &dyn Fn(&Identity) -> bool),
            ("&type=2", &|i: &Identity| i.2 == "2"),
            ("&state=SP", &|i: &Identity| in_state.contains(&i.0)),
        ] {
            let folded = fold(term);
            let mut expected: Vec<&Identity> = all.iter().filter(|i| fold(&i.1).contains(&folded) && keep(i)).collect();
            expected.sort_by(|a, b| (fold(&a.1), &a.0).cmp(&(fold(&b.1), &b.0)));
            let encoded: String = form_urlencoded(term);
            let (total, items) = all_pages(&s, &token, &format!("name={encoded}{extra}"));
            assert_eq!(total, expected.len() as u64, "{term:?}{extra}");
            let ids: Vec<&str> = items.iter().map(|i| i["partner_id"].as_str().unwrap()).collect();
            let expected_ids: Vec<&str> = expected.iter().take(ids.len()).map(|i| i.0.as_str()).collect();
            assert_eq!(ids, expected_ids, "{term:?}{extra}: the order");
            searched += usize::from(total > 0);
        }
    }
    assert!(searched > 20, "{searched} searches found partners");
    // An item is its identity; the document filter finds a person by the six digits shown, in
    // any served form, and a legal entity by its company.
    let person = all.iter().find(|i| i.2 == "2" && !i.3.is_empty()).unwrap();
    let digits: String = person.3.chars().filter(char::is_ascii_digit).collect();
    let alike = all.iter().filter(|i| i.2 == "2" && i.3 == person.3).count() as u64;
    for form in [person.3.clone(), format!("***{digits}**"), digits.clone()] {
        let (total, items) = all_pages(&s, &token, &format!("document={}", form_urlencoded(&form)));
        assert_eq!(total, alike, "{form}");
        assert!(items.iter().any(|i| i["partner_id"] == person.0.as_str()), "{form}");
        assert!(items.iter().all(|i| i["documento"] == person.3.as_str()), "{form}");
    }
    let (total, _) = all_pages(&s, &token, &format!("document={digits}&type=1"));
    assert_eq!(total, 0, "only a person shows six digits");
    let company = all.iter().find(|i| i.2 == "1" && !i.5.is_empty()).unwrap();
    let (_, items) = all_pages(&s, &token, &format!("document={}", company.5));
    let item = items.iter().find(|i| i["partner_id"] == company.0.as_str()).expect("the legal entity");
    assert_eq!((item["nome"].as_str(), item["tipo"].as_str()), (Some(company.1.as_str()), Some("1")));
    assert_eq!(item["identity"], "company");
    // Refused: each names its parameter.
    for (bad, param) in
        [("type=4", "type"), ("document=12", "document"), ("state=S", "state"), ("per_page=51", "per_page")]
    {
        let r = get(&s, &format!("/api/v1/partners/search?{bad}"), &token);
        assert_eq!(error_of(&r), (400, "Invalid input parameters"), "{bad}");
        assert!(r.body["errors"].get(param).is_some(), "{bad}: {}", r.body);
    }
}

/// The server answers from the search index: it answers every term on its own, as SQL does.
fn the_index_answers_as_sql_does(db: &Path, terms: &[String]) {
    let store = cnpj_store::Store::open(&cnpj_store::Source::DuckDb(db.to_owned())).unwrap();
    for term in terms {
        let filters = cnpj_store::PartnerFilters { name: Some(term.clone()), ..Default::default() };
        let by_index = store.search_partners_by_index(&filters, 1, 50, cnpj_model::Locale::PtBr).unwrap();
        let by_sql = store.search_partners_by_sql(&filters, 1, 50, cnpj_model::Locale::PtBr).unwrap();
        assert_eq!(by_index, Some(by_sql), "{term:?}: the index answers as SQL does");
    }
}

fn form_urlencoded(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// A partner's page: its links as `partner_links` has them, its own company, its events from the
/// history (each of the identity), the identity rule in words; priced like detail.
#[test]
fn a_partner_s_page_is_its_links_company_and_events() {
    let s = evolved(&[]);
    let token = s.user("lu", 100_000);
    let links: Vec<Vec<String>> = query(
        &s.db,
        "SELECT partner_id, cnpj_basico, qualificacao, CAST(data_entrada AS VARCHAR) FROM partner_links \
         ORDER BY partner_id, cnpj_basico, qualificacao, data_entrada NULLS LAST",
    );
    let mut by_partner: BTreeMap<&str, Vec<&Vec<String>>> = BTreeMap::new();
    for l in &links {
        by_partner.entry(&l[0]).or_default().push(l);
    }
    let busiest = by_partner.iter().max_by_key(|(_, l)| l.len()).map(|(p, _)| *p).unwrap();
    assert!(by_partner[busiest].len() > 3, "a partner of several companies");
    let holding = identities(&s.db).into_iter().find(|i| i.2 == "1" && !i.5.is_empty()).unwrap();
    for id in [busiest, holding.0.as_str()] {
        let expected = &by_partner[id];
        let mut seen = Vec::new();
        for page in 1..=expected.len().div_ceil(3) {
            let r = get(&s, &format!("/api/v1/partners/{id}?per_page=3&page={page}&locale=en"), &token);
            assert_eq!(r.status, 200, "{id}: {}", r.body);
            assert_eq!(r.body["total"].as_u64(), Some(expected.len() as u64));
            for c in r.body["data"]["companies"].as_array().unwrap() {
                seen.push(vec![
                    id.to_owned(),
                    c["cnpj_basico"].as_str().unwrap().to_owned(),
                    c["qualificacao"].as_str().unwrap().to_owned(),
                    c["data_entrada"].as_str().unwrap_or_default().to_owned(),
                ]);
                if let Some(cnpj) = c["cnpj"].as_str() {
                    assert!(cnpj.starts_with(c["cnpj_basico"].as_str().unwrap()), "{c}");
                }
            }
        }
        let expected: Vec<Vec<String>> = expected.iter().map(|l| (*l).clone()).collect();
        assert_eq!(seen, expected, "{id}");
    }
    search_by_partner(&s, &token, &[busiest, holding.0.as_str()], &by_partner);
    let r = get(&s, &format!("/api/v1/partners/{}?locale=en", holding.0), &token);
    let own = &r.body["data"]["company"];
    assert_eq!(own["cnpj"].as_str().map(|c| &c[..8]), Some(holding.5.as_str()), "{}", r.body);
    // A person's page says how homonyms are counted.
    let r = get(&s, &format!("/api/v1/partners/{busiest}?locale=en"), &token);
    if r.body["data"]["tipo"] == "2" {
        assert!(r.body["data"]["identity_note"].as_str().unwrap().contains("six digits"), "{}", r.body);
    }
    // Events: a partner who entered this month has it on its page, and every event listed is
    // of the identity (its folded name and document).
    let entered = query(
        &s.db,
        "SELECT i.partner_id FROM partner_identities i WHERE i.tipo = '2' AND i.documento <> '' AND EXISTS \
         (SELECT 1 FROM socios s WHERE s.partner_id = i.partner_id) ORDER BY i.partner_id",
    );
    let mut with_events = 0;
    for row in entered.iter().take(400) {
        let r = get(&s, &format!("/api/v1/partners/{}", row[0]), &token);
        let data = &r.body["data"];
        for event in data["events"].as_array().unwrap() {
            let who = if event["old"].is_null() { &event["new"] } else { &event["old"] };
            assert_eq!(fold(who["nome"].as_str().unwrap()), fold(data["nome"].as_str().unwrap()), "{event}");
            assert_eq!(who["documento"], data["documento"], "{event}");
            assert!(["partner_entered", "partner_left"].contains(&event["event"].as_str().unwrap()));
            with_events += 1;
        }
    }
    assert!(with_events > 0, "some partner's entry or exit is on its page");
    // Unknown or malformed ids are a 404, never charged.
    let before = s.credits("lu");
    for id in ["paaaaaaaaaaaaaaaa", "p123", "x", "PAAAAAAAAAAAAAAAA"] {
        let r = get(&s, &format!("/api/v1/partners/{id}"), &token);
        assert_eq!(error_of(&r), (404, "Partner not found."), "{id}");
    }
    assert_eq!(s.credits("lu"), before);
}

/// The search filter `partner_id`: the establishments of the partner's companies, on the index
/// and counted alike; an id no partner has matches nothing; a malformed one is a 400.
fn search_by_partner(s: &Server, token: &str, ids: &[&str], by_partner: &BTreeMap<&str, Vec<&Vec<String>>>) {
    for &id in ids {
        let sql = format!(
            "SELECT count(*)::VARCHAR FROM estabelecimentos WHERE cnpj_basico IN \
             (SELECT cnpj_basico FROM partner_links WHERE partner_id = '{id}')"
        );
        let expected: u64 = query(&s.db, &sql)[0][0].parse().unwrap();
        let r = get(s, &format!("/api/v1/companies/search?partner_id={id}&per_page=50"), token);
        assert_eq!(r.body["total"].as_u64(), Some(expected), "{id}: {}", r.body);
        let bases: BTreeSet<&str> = by_partner[id].iter().map(|l| l[1].as_str()).collect();
        assert!(r.body["data"].as_array().unwrap().iter().all(|e| bases.contains(&e["cnpj"].as_str().unwrap()[..8])));
        let count = get(s, &format!("/api/v1/companies/count?partner_id={id}"), token);
        assert_eq!(count.body["total"].as_u64(), Some(expected), "{id}");
    }
    let r = get(s, "/api/v1/companies/search?partner_id=paaaaaaaaaaaaaaaa", token);
    assert_eq!(r.body["total"], 0);
    let r = get(s, "/api/v1/companies/search?partner_id=x", token);
    assert!(r.body["errors"].get("partner_id").is_some(), "{}", r.body);
}

/// The network walked by its rules: every edge between two of its nodes, the levels one step
/// apart along `partner_of` and equal along `is_company`, nothing past `depth`, `max_nodes` and
/// `truncated`, `active_only`; and a chain of holdings walked through.
#[test]
fn a_company_s_network_is_walked_breadth_first() {
    let s = evolved(&[]);
    let token = s.user("ze", 100_000);
    // Companies whose partners are holdings of the month (chains), and some others.
    let roots: Vec<String> = query(
        &s.db,
        "SELECT DISTINCT s.cnpj_basico FROM socios s JOIN estabelecimentos e ON e.cnpj_basico = s.partner_basico \
         ORDER BY 1 LIMIT 15",
    )
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    assert!(roots.len() >= 5, "companies with holdings as partners: {roots:?}");
    let mut deeper = 0;
    for root in &roots {
        let mut sizes = Vec::new();
        for depth in 1..=3 {
            let r = get(&s, &format!("/api/v1/companies/{root}/network?depth={depth}&max_nodes=500"), &token);
            assert_eq!(r.status, 200, "{root}: {}", r.body);
            let data = &r.body["data"];
            check_walk(data, depth);
            sizes.push(data["nodes"].as_array().unwrap().len());
        }
        assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{root}: {sizes:?}");
        deeper += usize::from(sizes[2] > sizes[1]);
        // Depth 1 is the company, its partners, and what they join.
        let partners: BTreeSet<String> =
            query(&s.db, &format!("SELECT partner_id FROM socios WHERE cnpj_basico = '{root}'"))
                .into_iter()
                .map(|r| r[0].clone())
                .collect();
        let r = get(&s, &format!("/api/v1/companies/{root}/network?depth=1"), &token);
        let nodes = r.body["data"]["nodes"].as_array().unwrap();
        let at = |level: u64| -> BTreeSet<String> {
            let partners = nodes.iter().filter(|n| n["kind"] == "partner" && n["level"].as_u64().unwrap() <= level);
            partners.map(|n| n["id"].as_str().unwrap().to_owned()).collect()
        };
        // Its partners are at level 1 (or 0: the company itself as a partner, joined to it); the
        // other partners of level 1 are companies of level 1, joined to them.
        assert!(partners.is_subset(&at(1)), "{root}");
        let joined: BTreeSet<String> = r.body["data"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "is_company")
            .map(|e| e["from"].as_str().unwrap().to_owned())
            .collect();
        assert!(at(1).difference(&at(0)).all(|p| partners.contains(p) || joined.contains(p)), "{root}");
        // max_nodes cuts the walk and says so.
        let r = get(&s, &format!("/api/v1/companies/{root}/network?depth=3&max_nodes=2"), &token);
        assert_eq!(r.body["data"]["nodes"].as_array().unwrap().len(), 2);
        assert_eq!(r.body["data"]["truncated"], true);
        // active_only: every company but the root is active.
        let r = get(&s, &format!("/api/v1/companies/{root}/network?depth=3&active_only=true"), &token);
        for n in r.body["data"]["nodes"].as_array().unwrap() {
            if n["kind"] == "company" && n["level"] != 0 {
                assert_eq!(n["situacao_cadastral"], "02", "{n}");
            }
        }
    }
    assert!(deeper > 0, "a walk went on through holdings past depth 2");
    for (path, expected) in [
        ("/api/v1/companies/99999999/network", (404, "Company not found.")),
        ("/api/v1/companies/123/network", (400, "Invalid input parameters")),
        (&format!("/api/v1/companies/{}/network?depth=4", roots[0]) as &str, (400, "Invalid input parameters")),
        (&format!("/api/v1/companies/{}/network?max_nodes=0", roots[0]), (400, "Invalid input parameters")),
        (&format!("/api/v1/companies/{}/network?active_only=yes", roots[0]), (400, "Invalid input parameters")),
    ] {
        assert_eq!(error_of(&get(&s, path, &token)), expected, "{path}");
    }
}

/// The rules every network answer keeps.
fn check_walk(data: &Value, depth: u64) {
    let nodes = data["nodes"].as_array().unwrap();
    let level: HashMap<&str, u64> =
        nodes.iter().map(|n| (n["id"].as_str().unwrap(), n["level"].as_u64().unwrap())).collect();
    assert_eq!(level.len(), nodes.len(), "no node twice");
    assert_eq!(nodes[0]["level"], 0);
    assert!(nodes.windows(2).all(|w| w[0]["level"].as_u64() <= w[1]["level"].as_u64()), "breadth-first");
    assert!(level.values().all(|l| *l <= depth));
    for e in data["edges"].as_array().unwrap() {
        let (from, to) = (e["from"].as_str().unwrap(), e["to"].as_str().unwrap());
        let (a, b) = (level[from], level[to]);
        match e["kind"].as_str().unwrap() {
            "partner_of" => assert!(a.abs_diff(b) <= 1, "{e}"),
            "is_company" => assert_eq!(a, b, "{e}"),
            other => panic!("{other}"),
        }
        assert!(from.starts_with('p') && !to.starts_with('p'), "{e}");
    }
    // Every node but the root is reached by an edge.
    let touched: BTreeSet<&str> = data["edges"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| [e["from"].as_str().unwrap(), e["to"].as_str().unwrap()])
        .collect();
    assert!(nodes.iter().skip(1).all(|n| touched.contains(n["id"].as_str().unwrap())), "{data}");
}

/// `serve --partners off`: the partners' search, pages and networks are gone (404, as any unknown
/// path), and so are the MCP tools; a company's record keeps its partners.
#[test]
fn partners_off_removes_the_partners_but_not_the_records_partners() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    super::build_dataset(&super::root().join("data/sample-dump"), &db);
    let s = serve(dir, db, &["--partners", "off"]);
    let token = s.user("ana", 100);
    for path in [
        "/api/v1/partners/search?name=fulano",
        "/api/v1/partners/pjnrquzm2ntgqdkaa",
        "/api/v1/companies/11222333/network",
        "/api/v1/companies/11222333000181/network",
        "/api/v1/companies/search?partner_id=pjnrquzm2ntgqdkaa",
        "/api/v1/companies/count?partner_id=pjnrquzm2ntgqdkaa",
    ] {
        assert_eq!(error_of(&get(&s, path, &token)), (404, "Not found."), "{path}");
    }
    let r = get(&s, "/api/v1/companies/11222333", &token);
    assert!(!r.body["data"]["socios"].as_array().unwrap().is_empty(), "{}", r.body);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let listed = String::from_utf8(super::mcp::mcp_post(&s, &token, list.as_bytes()).raw).unwrap();
    for tool in ["search_partners", "get_partner", "company_network"] {
        assert!(!listed.contains(&format!("\"name\":\"{tool}\"")), "{tool}: {listed}");
    }
    assert!(listed.contains("search_companies"), "{listed}");
    assert_eq!(s.credits("ana"), (99, 1), "only the record was charged");
}

/// No answer of the partners nor the server's log holds a CPF's digits past the six §4 shows; a
/// person's `partner_id` is a function of what the answer shows (its name, its six digits, its
/// country), nothing else.
#[test]
fn partner_answers_and_logs_hold_no_more_of_a_cpf_than_its_six_digits() {
    let (dir, db) = evolved_month();
    let log = dir.path().join("server.log");
    let accounts = super::AccountsAt::File(dir.path().join("accounts.sqlite"));
    let dataset = vec!["--db".into(), db.clone().into()];
    let stderr = std::fs::File::create(&log).unwrap();
    let flags = ["--rate-limit", "100000", "--metrics-listen", "127.0.0.1:0", "--log-format", "json"];
    let s = Server::launch(dir, db, dataset, accounts, &flags, |c| {
        c.env("RUST_LOG", "debug").stderr(stderr);
    });
    let token = s.user("pri", 100_000);
    let mut answers = Vec::new();
    let (_, items) = all_pages(&s, &token, "name=a");
    for item in items.iter().step_by(7).take(60) {
        let id = item["partner_id"].as_str().unwrap();
        answers.push(String::from_utf8(get(&s, &format!("/api/v1/partners/{id}"), &token).raw).unwrap());
        let tipo = item["tipo"].as_str().unwrap();
        let name = fold(item["nome"].as_str().unwrap());
        let documento = item["documento"].as_str().unwrap();
        let key = match tipo {
            "2" => format!("***{}**", documento.chars().filter(char::is_ascii_digit).collect::<String>()),
            "3" => item["pais_code"].as_str().unwrap().to_owned(),
            _ => continue,
        };
        assert_eq!(cnpj_model::partner::partner_id(tipo, &name, &key), id, "{item}");
    }
    for item in items.iter().take(20) {
        let id = item["partner_id"].as_str().unwrap();
        let companies = get(&s, &format!("/api/v1/partners/{id}"), &token).body["data"]["companies"].clone();
        if let Some(basico) = companies[0]["cnpj_basico"].as_str() {
            let network = get(&s, &format!("/api/v1/companies/{basico}/network?depth=3&max_nodes=500"), &token);
            answers.push(String::from_utf8(network.raw).unwrap());
        }
    }
    answers.push(serde_json::to_string(&items).unwrap());
    answers.push(
        String::from_utf8(super::request(s.metrics.as_ref().unwrap(), "GET", "/metrics", None, None).raw).unwrap(),
    );
    // The log's lines without their request ids (random hex).
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        let mut line: Value = serde_json::from_str(line).unwrap();
        line.as_object_mut().unwrap().remove("request_id");
        answers.push(line.to_string());
    }
    for answer in &answers {
        for run in digit_runs(answer) {
            assert!(
                run.len() < 11 || (run.len() == 14 && cnpj_model::Cnpj::from_bytes(run.as_bytes()).is_ok()),
                "{run} in {answer}"
            );
        }
    }
}

/// The runs of ASCII digits in `text` that are not part of a decimal number (`0.123…`).
fn digit_runs(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if start == 0 || b[start - 1] != b'.' {
                runs.push(&text[start..i]);
            }
        } else {
            i += 1;
        }
    }
    runs
}
