//! Month over month: the build of `data/sample-dump-next` over `data/sample-dump`
//! records exactly the events its QUIRKS.md lists; `GET /api/v1/changes` and
//! `GET /api/v1/companies/{cnpj}/history` over three months (2026-09, then -10, then -11 with the
//! first month's rows again, which undoes every change) answer as the snapshots say, conform to
//! the OpenAPI document, charge as search and detail do, and answer byte for byte alike from
//! Postgres.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{AccountsAt, Reply, Server, error_of, get, pg_database, pg_server, publish, request, root, validator};

/// Builds `input` into `db`, comparing it with `previous` (a small month trips the guard's
/// thresholds: one establishment of a dozen is far more than 1 %).
pub(super) fn build_month(input: &Path, db: &Path, previous: Option<&Path>) {
    let mut options = cnpj_build::BuildOptions::new(input, db);
    options.previous = previous.map(Path::to_owned);
    options.accept_anomalies = true;
    cnpj_build::build(&options, &cnpj_build::NoObserver).expect("the month builds");
}

/// The three months in `dir`: `2026-09.duckdb`, `2026-10.duckdb` and `2026-11.duckdb` (the
/// sample dump's zips in a folder named `2026-11`), each built over the one before.
pub(super) fn three_months(dir: &Path) -> [PathBuf; 3] {
    let months = ["2026-09", "2026-10", "2026-11"].map(|m| dir.join(format!("{m}.duckdb")));
    let again = dir.join("2026-11");
    std::fs::create_dir(&again).unwrap();
    for entry in std::fs::read_dir(root().join("data/sample-dump")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "zip") {
            std::fs::copy(&path, again.join(path.file_name().unwrap())).unwrap();
        }
    }
    build_month(&root().join("data/sample-dump"), &months[0], None);
    build_month(&root().join("data/sample-dump-next"), &months[1], Some(&months[0]));
    build_month(&again, &months[2], Some(&months[1]));
    months
}

/// A server over `db`, with SQLite accounts in `dir`.
pub(super) fn serve(dir: tempfile::TempDir, db: PathBuf, extra: &[&str]) -> Server {
    let accounts = AccountsAt::File(dir.path().join("accounts.sqlite"));
    let dataset = vec!["--db".into(), db.clone().into()];
    Server::spawn(dir, db, dataset, accounts, extra)
}

type Row = Vec<Option<String>>;

/// The rows of the `changes` table of `db`'s history file in their stored order, or in `order`.
fn stored(db: &Path, order: &str) -> Vec<Row> {
    let config = duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap();
    let conn = duckdb::Connection::open_with_flags(cnpj_index::history_path(db), config).unwrap();
    let sql =
        format!("SELECT month, cnpj, cnpj_basico, event, field, old, new, uf, municipio, cnae FROM changes {order}");
    let mut stmt = conn.prepare(&sql).unwrap();
    let rows = stmt.query_map([], |r| (0..10).map(|i| r.get::<_, Option<String>>(i)).collect::<Result<Row, _>>());
    rows.unwrap().map(Result::unwrap).collect()
}

/// The events table of `data/sample-dump-next/QUIRKS.md`, as rows of the `changes` table.
fn listed_events() -> Vec<Row> {
    let quirks = std::fs::read_to_string(root().join("data/sample-dump-next/QUIRKS.md")).unwrap();
    let table = quirks.split("## Events").nth(1).expect("QUIRKS.md has an Events section");
    table
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| cnpj "))
        .map(|line| {
            let cells = line.trim().trim_start_matches('|').trim_end_matches('|').split(" | ");
            let cells = cells.map(|c| match c.trim() {
                "NULL" => None,
                c => Some(c.trim_start_matches('`').trim_end_matches('`').to_owned()),
            });
            std::iter::once(Some("2026-10".to_owned())).chain(cells).collect()
        })
        .collect()
}

const SERVED_ORDER: &str =
    "ORDER BY month, cnpj NULLS LAST, cnpj_basico, event, field NULLS LAST, old NULLS LAST, new NULLS LAST";

#[test]
fn the_next_month_records_exactly_the_planted_events() {
    let dir = tempfile::tempdir().unwrap();
    let months = three_months(dir.path());
    let listed = listed_events();
    assert_eq!(listed.len(), 21, "QUIRKS.md lists one row per event");
    assert!(!cnpj_index::history_path(&months[0]).exists(), "a first month records no change");
    let october = stored(&months[1], "");
    assert!(october == listed, "recorded:\n{october:#?}\nlisted:\n{listed:#?}");
    // Every event name is planted.
    let mut names: Vec<&str> = listed.iter().map(|r| r[3].as_deref().unwrap()).collect();
    names.sort_unstable();
    names.dedup();
    let mut all = cnpj_store::EVENTS.to_vec();
    all.sort_unstable();
    assert_eq!(names, all);
    // The next month carries October over as it was, and undoes each of its changes; the table
    // is stored in the served order (DuckDB pages rely on it).
    let november = stored(&months[2], "");
    assert_eq!(november[..october.len()], october[..]);
    assert_eq!(november, stored(&months[2], SERVED_ORDER));
    let undone: Vec<&Row> = november[october.len()..].iter().collect();
    assert!(undone.iter().all(|r| r[0].as_deref() == Some("2026-11")));
    for (event, reverse) in
        [("opened", "disappeared"), ("partner_entered", "partner_left"), ("mei_opted_out", "mei_opted_in")]
    {
        let count = |rows: &[&Row], name: &str| rows.iter().filter(|r| r[3].as_deref() == Some(name)).count();
        let oct: Vec<&Row> = october.iter().collect();
        assert_eq!(count(&oct, event), count(&undone, reverse), "{event} undone by {reverse}");
    }
    let moved_back = undone.iter().find(|r| r[4].as_deref() == Some("municipio")).unwrap();
    assert_eq!((moved_back[5].as_deref(), moved_back[6].as_deref()), (Some("\"6291\""), Some("\"7107\"")));
}

/// A GET whose answer is checked against the OpenAPI document (`template` names its operation).
fn checked(s: &Server, doc: &Value, template: &str, path: &str, token: &str) -> Reply {
    let reply = get(s, path, token);
    let v = validator(doc, template, "get", reply.status);
    let errors: Vec<String> = v.iter_errors(&reply.body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{path} {}: {errors:?}\n{}", reply.status, reply.body);
    reply
}

fn document() -> Value {
    serde_json::from_str(include_str!("../../../../schemas/openapi.json")).unwrap()
}

/// The snapshot name of a request path.
fn snapshot_name(path: &str) -> String {
    path.trim_start_matches("/api/v1/")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .collect()
}

#[test]
fn changes_filters_pages_and_locales() {
    let dir = tempfile::tempdir().unwrap();
    let [_, _, db] = three_months(dir.path());
    let s = serve(dir, db, &["--rate-limit", "1000"]);
    let token = s.user("cora", 100);
    let doc = document();
    let mut charged = 0;
    for path in [
        "/api/v1/changes",
        "/api/v1/changes?month=2026-10&per_page=5&page=2",
        "/api/v1/changes?since=2026-11&locale=en",
        "/api/v1/changes?event=moved,renamed&locale=es",
        "/api/v1/changes?event=status_changed,main_activity_changed,secondary_activities_changed&locale=en",
        "/api/v1/changes?event=partner_entered,partner_left,tax_regime_changed,legal_nature_changed,size_changed&locale=en",
        "/api/v1/changes?state=ex",
        "/api/v1/changes?city_id=6291&month=2026-10",
        "/api/v1/changes?business_sector=8888-8/88&since=2026-10",
        "/api/v1/changes?cnpj=11.222.333/0002-62",
        "/api/v1/changes?cnpj=11222333&event=partner_entered",
        "/api/v1/changes?cnpj=ab12cd34000184",
        "/api/v1/changes?month=2026-12",
        "/api/v1/changes?per_page=3&page=99",
    ] {
        let r = checked(&s, &doc, "/api/v1/changes", path, &token);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let items = r.body["data"].as_array().unwrap();
        charged += i64::from(!items.is_empty());
        insta::assert_json_snapshot!(snapshot_name(path), r.body);
    }
    // month and since combine with AND, as every filter does.
    let total = |query: &str| get(&s, &format!("/api/v1/changes?{query}"), &token).body["total"].as_u64();
    assert_eq!((total("month=2026-11&since=2026-10"), total("month=2026-10&since=2026-11")), (Some(21), Some(0)));
    charged += 1;
    // The whole list: in the served order, every page of it the same rows.
    let all = get(&s, "/api/v1/changes?per_page=50", &token).body;
    let total = all["total"].as_u64().unwrap();
    assert_eq!(total, 42, "21 events in October, undone in November");
    let key = |i: &Value| {
        let text = |k: &str| i[k].as_str().map(str::to_owned);
        let json = |k: &str| (!i[k].is_null()).then(|| i[k].to_string());
        let basico = text("cnpj_basico");
        (
            text("month"),
            text("cnpj").is_none(),
            text("cnpj"),
            basico,
            text("event"),
            text("field"),
            json("old"),
            json("new"),
        )
    };
    let items = all["data"].as_array().unwrap();
    assert!(items.windows(2).all(|w| key(&w[0]) <= key(&w[1])), "ordered by month, cnpj, basico, event, field");
    let paged: Vec<Value> = (1..=5)
        .flat_map(|page| {
            let r = get(&s, &format!("/api/v1/changes?per_page=9&page={page}"), &token);
            r.body["data"].as_array().unwrap().clone()
        })
        .collect();
    assert_eq!(&paged, items);
    charged += 1 + 5;
    assert_eq!(s.credits("cora"), (100 - charged, charged), "a page with items costs 1, an empty one nothing");
}

#[test]
fn history_of_establishments_and_companies() {
    let dir = tempfile::tempdir().unwrap();
    let [_, october, november] = three_months(dir.path());
    let doc = document();
    let template = "/api/v1/companies/{cnpj}/history";
    // October: 55666777 is gone (its only establishment disappeared) and still answers.
    let s = serve(tempfile::tempdir().unwrap(), october, &[]);
    let token = s.user("otto", 10);
    let gone = checked(&s, &doc, template, "/api/v1/companies/55666777/history", &token);
    insta::assert_json_snapshot!("history_october_55666777", gone.body);
    assert_eq!(error_of(&get(&s, "/api/v1/companies/55666777", &token)), (404, "Company not found."));
    assert_eq!(s.credits("otto"), (9, 1));

    let s = serve(dir, november, &["--rate-limit", "1000"]);
    let token = s.user("hana", 100);
    let mut answered = 0;
    for path in [
        "/api/v1/companies/11222333000262/history",
        "/api/v1/companies/11.222.333/0001-81/history?locale=en",
        "/api/v1/companies/11222333/history?locale=es",
        "/api/v1/companies/99887766000105/history",
        "/api/v1/companies/66777888/history",
        "/api/v1/companies/22333444000181/history?locale=en",
        "/api/v1/companies/77888999000343/history",
    ] {
        let r = checked(&s, &doc, template, path, &token);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        answered += 1;
        insta::assert_json_snapshot!(snapshot_name(path), r.body);
    }
    assert_eq!(error_of(&get(&s, "/api/v1/companies/99887766000105", &token)), (404, "Company not found."));
    for path in ["/api/v1/companies/11444777000161/history", "/api/v1/companies/99000111/history"] {
        let r = checked(&s, &doc, template, path, &token);
        assert_eq!(error_of(&r), (404, "Company not found."), "{path}: no record now and no event");
    }
    for path in [
        "/api/v1/companies/123/history",
        "/api/v1/companies/11222333000182/history",
        "/api/v1/companies/11222333/history?locale=fr",
        "/api/v1/companies/11222333/history?locale=",
    ] {
        let r = checked(&s, &doc, template, path, &token);
        assert_eq!(error_of(&r), (400, "Invalid input parameters"), "{path}");
        let param = if path.contains("locale") { "locale" } else { "cnpj" };
        assert!(r.body["errors"][param].is_array(), "{path}: {}", r.body);
    }
    assert_eq!(s.credits("hana"), (100 - answered, answered), "1 per history answered, as detail");
}

#[test]
fn changes_errors_name_their_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let [_, _, db] = three_months(dir.path());
    let s = serve(dir, db, &["--rate-limit", "1000"]);
    let token = s.user("ines", 5);
    let doc = document();
    for (query, param) in [
        ("month=2026-13", "month"),
        ("month=26-10", "month"),
        ("month=", "month"),
        ("since=2026-1", "since"),
        ("event=closed", "event"),
        ("event=opened,,moved", "event"),
        ("event=OPENED", "event"),
        ("event=", "event"),
        ("state=SPO", "state"),
        ("city_id=12345", "city_id"),
        ("business_sector=12", "business_sector"),
        ("cnpj=11222333000182", "cnpj"),
        ("cnpj=123", "cnpj"),
        ("per_page=51", "per_page"),
        ("page=0", "page"),
        ("locale=fr", "locale"),
    ] {
        let r = checked(&s, &doc, "/api/v1/changes", &format!("/api/v1/changes?{query}"), &token);
        assert_eq!(error_of(&r), (400, "Invalid input parameters"), "{query}");
        assert!(r.body["errors"][param].is_array(), "{query}: {}", r.body);
    }
    let r = get(&s, "/api/v1/changes?event=closed", &token);
    let message = r.body["errors"]["event"][0].as_str().unwrap();
    assert!(message.contains("\"closed\"") && message.contains("tax_regime_changed"), "{message}");
    let r = get(&s, "/api/v1/changes?month=2026-13", &token);
    assert!(r.body["errors"]["month"][0].as_str().unwrap().contains("2026-13"), "{}", r.body);
    let r = request(&s.addr, "POST", "/api/v1/changes", Some(&token), Some(b"{}"));
    assert_eq!((error_of(&r), r.header("allow")), ((405, "Method not allowed."), Some("GET")));
    let r = request(&s.addr, "GET", "/api/v1/changes", None, None);
    assert_eq!(error_of(&r), (401, "Unauthenticated."));
    assert_eq!(s.credits("ines"), (5, 0), "nothing charged");
    // Without credits: 402, as search.
    let broke = s.user("zero", 0);
    assert_eq!(error_of(&get(&s, "/api/v1/changes", &broke)), (402, "Insufficient credits."));
    assert_eq!(error_of(&get(&s, "/api/v1/companies/11222333/history", &broke)), (402, "Insufficient credits."));
    assert_eq!(get(&s, "/api/v1/changes?month=2026-12", &broke).status, 200, "an empty page is free");
}

/// The same requests, in the three locales: Postgres answers with the same status and bytes as
/// DuckDB, and charges the same credits.
#[test]
fn postgres_changes_answer_byte_for_byte_like_duckdb() {
    let dir = tempfile::tempdir().unwrap();
    let [_, _, db] = three_months(dir.path());
    let url = pg_database();
    publish(&db, &url);
    let duck = serve(dir, db, &["--rate-limit", "1000000"]);
    let pg = pg_server(&url, &["--rate-limit", "1000000"]);
    let (duck_token, pg_token) = (duck.user("pat", 1_000_000), pg.user("pat", 1_000_000));
    let mut paths: Vec<String> = [
        "changes?per_page=50",
        "changes?per_page=7&page=3",
        "changes?per_page=7&page=99",
        "changes?month=2026-10",
        "changes?since=2026-11&per_page=50",
        "changes?since=2026-10&event=opened,disappeared",
        "changes?event=moved",
        "changes?event=renamed,size_changed",
        "changes?state=SP&per_page=50",
        "changes?state=EX",
        "changes?city_id=7107&per_page=50",
        "changes?business_sector=6201501",
        "changes?cnpj=11222333000262",
        "changes?cnpj=11222333000181&month=2026-11",
        "changes?cnpj=66777888",
        "changes?cnpj=AB12CD34",
        "changes?month=2026-12",
        "changes?event=size_changed&state=SP",
    ]
    .map(|p| format!("/api/v1/{p}"))
    .to_vec();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut keys: Vec<String> = client
        .query("SELECT cnpj FROM cnpj.changes WHERE cnpj IS NOT NULL UNION SELECT cnpj_basico FROM cnpj.changes", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    keys.sort();
    keys.extend(["11444777000161", "99000111", "11222333000262"].map(String::from));
    paths.extend(keys.iter().map(|k| format!("/api/v1/companies/{k}/history")));
    let mut compared = 0;
    for locale in ["pt-br", "en", "es"] {
        for path in &paths {
            let sep = if path.contains('?') { '&' } else { '?' };
            let path = format!("{path}{sep}locale={locale}");
            let (a, b) = (get(&duck, &path, &duck_token), get(&pg, &path, &pg_token));
            assert_eq!(a.status, b.status, "{path}");
            assert!(a.raw == b.raw, "{path}:\nduckdb   {}\npostgres {}", a.body, b.body);
            compared += 1;
        }
    }
    assert!(compared > 3 * 40, "{compared} responses compared");
    assert_eq!(duck.credits("pat"), pg.credits("pat"), "the same credits were charged");
}

/// Gives the dataset `db` a history file of 4,500 synthetic changes over three months, stored in
/// the served order as a build stores them, with each month's companies (a page beyond the first
/// 1,000 matches, totals counted rather than tallied, NULL CNPJs and places).
fn synthetic_changes(db: &Path) {
    let conn = duckdb::Connection::open(cnpj_index::history_path(db)).unwrap();
    conn.execute_batch(cnpj_index::HISTORY_DDL).unwrap();
    conn.execute_batch(&format!(
        "ATTACH '{}' AS dataset (READ_ONLY);
         INSERT INTO metadata SELECT key, value FROM dataset.metadata WHERE key = 'build_id';
         DETACH dataset;
         INSERT INTO changes
         SELECT printf('2026-%02d', 1 + i % 3) AS month,
                CASE WHEN i % 97 = 0 THEN NULL ELSE printf('%08d0001%02d', i % 400, i % 89) END AS cnpj,
                printf('%08d', i % 400) AS cnpj_basico,
                ['opened', 'moved', 'status_changed', 'renamed'][1 + i % 4] AS event,
                [NULL, 'cep', 'situacao_cadastral', 'razao_social'][1 + i % 4] AS field,
                CASE WHEN i % 4 = 0 THEN NULL ELSE printf('\"%02d\"', i % 7) END AS old,
                CASE WHEN i % 4 = 0 OR i % 11 = 0 THEN NULL ELSE printf('\"%02d\"', i % 5) END AS new,
                CASE WHEN i % 97 = 0 THEN NULL ELSE ['SP', 'RJ', 'AC'][1 + (i // 3) % 3] END AS uf,
                CASE WHEN i % 97 = 0 THEN NULL ELSE ['7107', '6001'][1 + (i // 5) % 2] END AS municipio,
                CASE WHEN i % 97 = 0 THEN NULL ELSE ['6201501', '4751201'][1 + (i // 7) % 2] END AS cnae
         FROM range(4500) t(i)
         ORDER BY month, cnpj NULLS LAST, cnpj_basico, event, field NULLS LAST, old NULLS LAST, new NULLS LAST",
        db.display()
    ))
    .unwrap();
    let mut months = std::collections::BTreeMap::<String, cnpj_index::Companies>::new();
    let mut stmt = conn.prepare("SELECT DISTINCT month, cnpj_basico FROM changes").unwrap();
    for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).unwrap() {
        let (month, basico) = row.unwrap();
        assert!(months.entry(month).or_default().insert(&basico));
    }
    for (month, companies) in months {
        conn.execute("INSERT INTO change_companies VALUES (?, ?)", duckdb::params![month, companies.to_bytes()])
            .unwrap();
    }
}

/// What a change item is compared on: month, cnpj, basico, event, field, old and new (JSON).
fn item_key(c: &cnpj_store::Change) -> Row {
    let json = |v: &Value| (!v.is_null()).then(|| v.to_string());
    vec![
        Some(c.month.clone()),
        c.cnpj.clone(),
        Some(c.cnpj_basico.clone()),
        Some(c.event.clone()),
        c.field.clone(),
        json(&c.old),
        json(&c.new),
    ]
}

/// The fields of company events (a 14-character CNPJ takes these from its company), written here
/// apart from the store's list, as the oracle's own.
const COMPANY_FIELDS: [&str; 8] = [
    "razao_social",
    "natureza_juridica",
    "capital_social",
    "porte_empresa",
    "socios",
    "opcao_simples",
    "opcao_mei",
    "regime_tributario",
];

/// The rows `filters` must match, in the served order, from every row of the table (sorted by
/// SQL, filtered here).
fn oracle(all: &[Row], filters: &cnpj_store::ChangeFilters) -> Vec<Row> {
    let text = |r: &Row, i: usize| r[i].clone();
    all.iter()
        .filter(|r| {
            let month = text(r, 0).unwrap();
            let eq = |i: usize, v: &Option<String>| v.is_none() || text(r, i) == *v;
            filters.month.as_ref().is_none_or(|m| month == *m)
                && filters.since.as_ref().is_none_or(|m| month >= *m)
                && (filters.events.is_empty() || filters.events.contains(&text(r, 3).unwrap()))
                && eq(7, &filters.state)
                && eq(8, &filters.city_id)
                && eq(9, &filters.business_sector)
                && match &filters.cnpj {
                    None => true,
                    Some(q @ cnpj_model::CnpjQuery::Basico(_)) => text(r, 2).as_deref() == Some(q.basico()),
                    Some(cnpj_model::CnpjQuery::Full(c)) => {
                        text(r, 2).as_deref() == Some(c.basico())
                            && (text(r, 1).as_deref() == Some(c.as_str())
                                || text(r, 4).is_some_and(|f| COMPANY_FIELDS.contains(&f.as_str())))
                    }
                }
        })
        .map(|r| {
            // Stored JSON text as the API re-serialises it.
            let json = |i: usize| text(r, i).map(|t| serde_json::from_str::<Value>(&t).unwrap().to_string());
            vec![text(r, 0), text(r, 1), text(r, 2), text(r, 3), text(r, 4), json(5), json(6)]
        })
        .collect()
}

/// Watchlists' filters and the rows they must match: companies whole, establishments with their
/// company's events, narrowed to the companies that changed in the months scanned (some of the
/// list changed in none).
fn watchlist_cases(all: &[Row]) -> Vec<(cnpj_store::ChangeFilters, Vec<Row>)> {
    use cnpj_store::ChangeFilters;
    let month = |m: &str| Some(m.to_owned());
    let mut cases = Vec::new();
    let cnpjs: Vec<&str> = all.iter().filter_map(|r| r[1].as_deref()).step_by(7).collect();
    let keys: Vec<String> = cnpjs
        .iter()
        .take(60)
        .map(|c| c.to_string())
        .chain(cnpjs.iter().skip(60).map(|c| c[..8].to_owned()))
        .chain(["99999999".to_owned()])
        .collect();
    for (month, since) in [(None, None), (month("2026-03"), None), (None, month("2026-03"))] {
        let watched = std::sync::Arc::new(cnpj_store::Watched::new(keys.iter().map(String::as_str)));
        let filters = ChangeFilters { month, since, watched: Some(watched), ..Default::default() };
        let plain = ChangeFilters { watched: None, ..filters.clone() };
        let want: Vec<Row> = oracle(all, &plain).into_iter().filter(|r| watches(&keys, r)).collect();
        cases.push((filters, want));
    }
    cases
}

/// Whether a watchlist of `keys` follows a row (month, cnpj, basico, event, field, …): a
/// company's every event, an establishment's and its company's.
fn watches(keys: &[String], row: &Row) -> bool {
    let basico = row[2].clone().unwrap();
    keys.iter().any(|k| {
        *k == basico
            || row[1].as_ref() == Some(k)
            || (k.len() == 14 && k[..8] == basico && row[4].as_deref().is_some_and(|f| COMPANY_FIELDS.contains(&f)))
    })
}

/// The store, over DuckDB and over Postgres: every page (walked to the end, 7 and 50 a page) and
/// the total of each filter are the rows the filter matches, in the served order, past the first
/// 1,000 matches too, whether the total is tallied or counted.
#[test]
fn store_pages_and_totals_are_the_filtered_served_order() {
    use cnpj_store::ChangeFilters;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_month(&root().join("data/sample-dump"), &db, None);
    synthetic_changes(&db);
    // The oldest month dropped out as a build drops it: the rows left keep their row ids (the
    // first is 1,500), which pages and the publication's copy ranges must follow.
    let conn = duckdb::Connection::open(cnpj_index::history_path(&db)).unwrap();
    conn.execute_batch(
        "DELETE FROM changes WHERE month = '2026-01'; DELETE FROM change_companies WHERE month = '2026-01'; CHECKPOINT",
    )
    .unwrap();
    let first: i64 = conn.query_row("SELECT min(rowid) FROM changes", [], |r| r.get(0)).unwrap();
    assert!(first > 0, "row ids start past the deleted month's");
    drop(conn);
    let all = stored(&db, SERVED_ORDER);
    let url = pg_database();
    publish(&db, &url);
    let stores = [
        cnpj_store::Store::open(&cnpj_store::Source::DuckDb(db.clone())).unwrap(),
        cnpj_store::Store::open(&cnpj_store::Source::Postgres { url, schema: "cnpj".into() }).unwrap(),
    ];
    let q = |s: &str| Some(cnpj_model::CnpjQuery::parse(s).unwrap());
    // A synthetic CNPJ whose check digits happen to be right, and its company.
    let valid = all.iter().filter_map(|r| r[1].clone()).find(|c| cnpj_model::CnpjQuery::parse(c).is_ok()).unwrap();
    let month = |m: &str| Some(m.to_owned());
    let events = |e: &[&str]| e.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>();
    let cases = [
        ChangeFilters::default(),
        ChangeFilters { month: month("2026-02"), ..Default::default() },
        ChangeFilters { since: month("2026-02"), events: events(&["moved", "renamed"]), ..Default::default() },
        ChangeFilters { state: Some("AC".into()), ..Default::default() },
        ChangeFilters { city_id: Some("7107".into()), ..Default::default() },
        ChangeFilters { business_sector: Some("4751201".into()), since: month("2026-03"), ..Default::default() },
        ChangeFilters {
            city_id: Some("6001".into()),
            state: Some("SP".into()),
            events: events(&["opened", "renamed"]),
            ..Default::default()
        },
        ChangeFilters { cnpj: q(&valid[..8]), ..Default::default() },
        ChangeFilters { cnpj: q(&valid), ..Default::default() },
        ChangeFilters { cnpj: q(&valid[..8]), since: month("2026-02"), ..Default::default() },
        ChangeFilters { cnpj: q(&valid), month: month("2026-03"), events: events(&["moved"]), ..Default::default() },
        ChangeFilters { cnpj: q("00000399"), ..Default::default() },
        ChangeFilters { cnpj: q("00000401"), ..Default::default() },
        ChangeFilters { month: month("2026-04"), ..Default::default() },
    ];
    assert!(oracle(&all, &cases[4]).len() > 1001, "a filter that is counted has more than 1,000 matches");
    let mut cases: Vec<(ChangeFilters, Vec<Row>)> =
        cases.into_iter().map(|f| (oracle(&all, &f), f)).map(|(w, f)| (f, w)).collect();
    cases.extend(watchlist_cases(&all));
    assert!(cases.last().unwrap().1.len() > 100, "a watchlist with many changes");
    for (filters, want) in &cases {
        for store in &stores {
            for per_page in [7, 50] {
                let mut got = Vec::new();
                for page in 1.. {
                    let (total, items) = store.changes(filters, page, per_page, cnpj_model::Locale::En).unwrap();
                    assert_eq!(total, want.len() as u64, "{filters:?}");
                    if items.is_empty() {
                        break;
                    }
                    assert!(items.len() as u64 <= per_page);
                    got.extend(items.iter().map(item_key));
                }
                let first = got.iter().zip(want).position(|(a, b)| a != b);
                assert!(
                    got == *want,
                    "{filters:?}, {per_page} a page: {} rows, {} expected, first difference at {first:?}: {:?} {:?}",
                    got.len(),
                    want.len(),
                    first.map(|i| &got[i]),
                    first.map(|i| &want[i]),
                );
            }
        }
    }
}

/// A dataset without a history file of its build (built without a previous month, or beside
/// another build's history) serves no changes rather than failing or serving another month's,
/// and a company's history is then empty (or not found, by the 404 rule).
#[test]
fn a_dataset_without_changes_serves_none() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_month(&root().join("data/sample-dump"), &db, None);
    assert!(!cnpj_index::history_path(&db).exists(), "a build without a previous month has no history");
    synthetic_changes(&db);
    let conn = duckdb::Connection::open(cnpj_index::history_path(&db)).unwrap();
    conn.execute_batch("UPDATE metadata SET value = 'another build' WHERE key = 'build_id'").unwrap();
    drop(conn);
    let store = cnpj_store::Store::open(&cnpj_store::Source::DuckDb(db.clone())).unwrap();
    let filters = cnpj_store::ChangeFilters { month: Some("2026-11".into()), ..Default::default() };
    assert_eq!(store.changes(&filters, 1, 10, cnpj_model::Locale::PtBr).unwrap(), (0, Vec::new()));
    let q = |s: &str| cnpj_model::CnpjQuery::parse(s).unwrap();
    assert_eq!(store.history(&q("11222333"), cnpj_model::Locale::PtBr).unwrap(), Some(Vec::new()));
    assert_eq!(store.history(&q("99000111"), cnpj_model::Locale::PtBr).unwrap(), None);
    let s = serve(dir, db, &[]);
    let token = s.user("nina", 5);
    let r = get(&s, "/api/v1/changes?month=2026-11", &token);
    assert_eq!((r.status, &r.body["data"]), (200, &serde_json::json!([])), "{}", r.body);
}

/// A history whose companies of a month cannot be read (a damaged blob) still serves every
/// change of a company, found in every month, with a warning.
#[test]
fn a_damaged_month_of_companies_still_serves_a_company_s_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    build_month(&root().join("data/sample-dump"), &db, None);
    synthetic_changes(&db);
    let all = stored(&db, SERVED_ORDER);
    let conn = duckdb::Connection::open(cnpj_index::history_path(&db)).unwrap();
    conn.execute_batch("UPDATE change_companies SET companies = '\\x01\\x02'::BLOB WHERE month = '2026-02'").unwrap();
    drop(conn);
    let store = cnpj_store::Store::open(&cnpj_store::Source::DuckDb(db.clone())).unwrap();
    let basico = all.iter().find(|r| r[0].as_deref() == Some("2026-02")).unwrap()[2].clone().unwrap();
    let filters =
        cnpj_store::ChangeFilters { cnpj: Some(cnpj_model::CnpjQuery::parse(&basico).unwrap()), ..Default::default() };
    let want = oracle(&all, &filters);
    assert!(want.iter().any(|r| r[0].as_deref() == Some("2026-02")), "the company changed in the damaged month");
    let (total, items) = store.changes(&filters, 1, 100, cnpj_model::Locale::En).unwrap();
    assert_eq!((total, items.iter().map(item_key).collect::<Vec<_>>()), (want.len() as u64, want));
}
