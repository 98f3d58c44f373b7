//! The analysts' suite of the loopback benchmark (contract §15, issue 42 items 1 and 2): the
//! filters analysts ask for (lists in the code filters, `any_sector`, capital ranges, `has_email`,
//! `has_phone`, `simples`, `mei`, `head_office`, `partner_id`), each alone, with a state, with a
//! status, and a few of them together, values picked from the dataset. Each query runs alone on
//! `/companies/search` and on `/companies/count` (medians and p99s over every request of each),
//! and its total must equal the SQL count that a server searching by SQL answers.

use std::path::Path;
use std::time::Duration;

use super::{alone_all, percentile};

fn texts(conn: &duckdb::Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn.prepare(sql).unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
}

/// The `n` most (`DESC`) or least (`ASC`) common values of a column, comma-separated.
fn values(conn: &duckdb::Connection, table: &str, column: &str, order: &str, n: usize) -> String {
    texts(
        conn,
        &format!(
            "SELECT CAST({column} AS VARCHAR) FROM {table} WHERE {column} IS NOT NULL AND CAST({column} AS VARCHAR) <> '' \
             GROUP BY 1 ORDER BY count(*) {order}, 1 LIMIT {n}"
        ),
    )
    .join(",")
}

/// The suite's filters alone (label, query string), values from the dataset.
fn filters(conn: &duckdb::Connection) -> Vec<(String, String)> {
    let top = |table: &str, column: &str, n: usize| values(conn, table, column, "DESC", n);
    let rare = |table: &str, column: &str, n: usize| values(conn, table, column, "ASC", n);
    let e = "estabelecimentos";
    let big_partner =
        texts(conn, "SELECT partner_id FROM partner_identities ORDER BY companies DESC, partner_id LIMIT 1");
    let small_partner = texts(
        conn,
        "SELECT partner_id FROM partner_identities WHERE companies = 1 ORDER BY partner_id LIMIT 1 OFFSET 1000",
    );
    let q = |label: &str, query: String| (label.to_owned(), query);
    let mut out = vec![
        q("state, 2", format!("state={}", top(e, "uf", 2))),
        q("state, 5", format!("state={}", top(e, "uf", 5))),
        q("city_id, 3 common", format!("city_id={}", top(e, "municipio", 3))),
        q("city_id, 10 rare", format!("city_id={}", rare(e, "municipio", 10))),
        q("city_id, 50", format!("city_id={}", top(e, "municipio", 50))),
        q("sector, 2 common", format!("business_sector={}", top(e, "cnae_fiscal", 2))),
        q("sector, 10 rare", format!("business_sector={}", rare(e, "cnae_fiscal", 10))),
        q("sector, 50", format!("business_sector={}", top(e, "cnae_fiscal", 50))),
        q("nature, 3", format!("nature_code={}", top("empresas", "natureza_juridica", 3))),
        q("status, 2", format!("situacao_cadastral={}", top(e, "situacao_cadastral", 2))),
        q("size, 2", format!("porte_empresa_code={}", top("empresas", "porte_empresa", 2))),
        q("any_sector common", format!("any_sector={}", top(e, "cnae_fiscal", 1))),
        q("any_sector rare", format!("any_sector={}", rare(e, "cnae_fiscal", 1))),
        q("any_sector, 3", format!("any_sector={}", top(e, "cnae_fiscal", 3))),
        q("capital 100k-1M", "capital_from=100000&capital_to=1000000".into()),
        q("capital from 1M", "capital_from=1000000".into()),
        q("capital to 1000", "capital_to=1000".into()),
        q("capital 0", "capital_from=0&capital_to=0".into()),
        q("has_email", "has_email=true".into()),
        q("no email", "has_email=false".into()),
        q("has_phone", "has_phone=true".into()),
        q("no phone", "has_phone=false".into()),
        q("simples", "simples=true".into()),
        q("not simples", "simples=false".into()),
        q("mei", "mei=true".into()),
        q("not mei", "mei=false".into()),
        q("head offices", "head_office=true".into()),
        q("branches", "head_office=false".into()),
    ];
    for (label, ids) in [("partner, most companies", big_partner), ("partner, one company", small_partner)] {
        if let Some(id) = ids.first() {
            out.push(q(label, format!("partner_id={id}")));
        }
    }
    out
}

/// The whole suite: every filter alone, with the commonest state, with the commonest status, and
/// a few analysts' questions of several filters.
fn suite(conn: &duckdb::Connection) -> Vec<(String, String)> {
    let alone = filters(conn);
    let uf = values(conn, "estabelecimentos", "uf", "DESC", 1);
    let status = values(conn, "estabelecimentos", "situacao_cadastral", "DESC", 1);
    let sector = values(conn, "estabelecimentos", "cnae_fiscal", "DESC", 1);
    let ufs = values(conn, "estabelecimentos", "uf", "DESC", 2);
    let mut out = alone.clone();
    for (label, query) in &alone {
        out.push((format!("{label} + state"), format!("{query}&state={uf}")));
        out.push((format!("{label} + status"), format!("{query}&situacao_cadastral={status}")));
    }
    let q = |label: &str, query: String| (label.to_owned(), query);
    out.extend([
        q("sector in 2 states, email", format!("business_sector={sector}&state={ufs}&has_email=true")),
        q("any_sector, capital 100k-1M", format!("any_sector={sector}&capital_from=100000&capital_to=1000000")),
        q("mei, phone, state", format!("mei=true&has_phone=true&state={uf}")),
        q("simples, head offices, since 2010", "simples=true&head_office=true&opening_date_from=2010-01-01".into()),
        q(
            "active, email, phone, capital ≥ 1M",
            format!("situacao_cadastral={status}&has_email=true&has_phone=true&capital_from=1000000"),
        ),
        q("branches in 2 states, not simples", format!("head_office=false&state={ufs}&simples=false")),
        q("any_sector + name", format!("any_sector={sector}&trading_name=comercio")),
        q("capital to 1000, mei, 2 states", format!("capital_to=1000&mei=true&state={ufs}")),
        q("2 states, 2 statuses, head offices", format!("state={ufs}&situacao_cadastral=02,08&head_office=true")),
        q(
            "any_sector, email, phone, since 2015",
            format!("any_sector={sector}&has_email=true&has_phone=true&opening_date_from=2015-01-01"),
        ),
        q("simples, capital 10k-100k, state", format!("simples=true&capital_from=10000&capital_to=100000&state={uf}")),
        q("not mei, branches, capital ≥ 1M", "mei=false&head_office=false&capital_from=1000000".into()),
    ]);
    out
}

/// Every request's latency of one part, summed up in one line.
fn summary(part: &str, latencies: &mut [Duration]) {
    latencies.sort();
    println!(
        "analysts' suite, {part}: {} requests, median {:.2} ms, p99 {:.2} ms, slowest {:.2} ms",
        latencies.len(),
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        percentile(latencies, 1.0)
    );
}

/// Runs the suite against the server at `addr`, each total checked against the server searching
/// by SQL at `sql_addr` (`get_at` makes a request of a path).
pub(super) fn run(db: &Path, addr: &str, sql_addr: &str, get_at: &dyn Fn(&str, &str) -> Vec<u8>, seconds: f64) {
    let config = duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap();
    let conn = duckdb::Connection::open_with_flags(db, config).expect("the dataset opens");
    let suite = suite(&conn);
    drop(conn);
    println!("\nanalysts' suite: {} queries, each alone for {seconds} s on search and on count (ms)", suite.len());
    println!(
        "{:<40} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "query", "total", "search p50", "search p99", "count p50", "count p99"
    );
    let (mut searches, mut counts) = (Vec::new(), Vec::new());
    for (label, query) in &suite {
        let search = format!("/api/v1/companies/search?{query}");
        let (p50, p99, total, mut latencies) = alone_all(addr, &get_at(addr, &search), seconds);
        searches.append(&mut latencies);
        let count = format!("/api/v1/companies/count?{query}");
        let (c50, c99, counted, mut latencies) = alone_all(addr, &get_at(addr, &count), seconds);
        counts.append(&mut latencies);
        let (.., sql_total, _) = alone_all(sql_addr, &get_at(sql_addr, &search), 0.0);
        assert_eq!(total, sql_total, "{label}: the index and SQL disagree on the total");
        assert_eq!(counted, sql_total, "{label}: the count and SQL disagree");
        let label: String = label.chars().take(40).collect();
        println!("{label:<40} {total:>10} {p50:>10.2} {p99:>10.2} {c50:>10.2} {c99:>10.2}");
    }
    summary("searches", &mut searches);
    summary("counts", &mut counts);
}
