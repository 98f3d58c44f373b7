//! The partners suite of the loopback benchmark (contract §14, issue 41 item 8): names cut
//! mid-word from the dataset's partners (1 to 4 words), alone, with `type` or with `state`, each
//! run alone with its total checked against an SQL count over `partner_links`; partners' pages;
//! networks of depth 2 with `max_nodes=200`. Medians and p99s over every request of each part.

use std::path::Path;
use std::time::Duration;

use super::{Picks, alone_all, cut, encode, percentile};

/// The dataset, read-only.
fn open(db: &Path) -> duckdb::Connection {
    let config = duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap();
    duckdb::Connection::open_with_flags(db, config).expect("the dataset opens")
}

fn texts(conn: &duckdb::Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn.prepare(sql).unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
}

/// The searches: (label, query string, the total SQL counts over `partner_links`).
fn searches(conn: &duckdb::Connection, terms: usize) -> Vec<(String, String, u64)> {
    let uf = texts(conn, "SELECT uf FROM estabelecimentos GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").remove(0);
    let names = texts(
        conn,
        &format!(
            "SELECT nome FROM (SELECT nome FROM partner_identities WHERE nome <> '') \
             USING SAMPLE reservoir({terms} ROWS) REPEATABLE (41) ORDER BY nome"
        ),
    );
    let mut picks = Picks(41);
    let mut out = Vec::new();
    for name in names {
        let Some(term) = cut(&name, &mut picks) else { continue };
        let (label, extra, condition) = match out.len() % 3 {
            0 => ("alone", String::new(), String::new()),
            1 => ("+type", "&type=2".to_owned(), "AND i.tipo = '2'".to_owned()),
            _ => (
                "+state",
                format!("&state={uf}"),
                format!("AND l.cnpj_basico IN (SELECT cnpj_basico FROM estabelecimentos WHERE uf = '{uf}')"),
            ),
        };
        let folded = cnpj_model::fold(&term).replace('\'', "''");
        let count: u64 = conn
            .query_row(
                &format!(
                    "SELECT count(DISTINCT l.partner_id) FROM partner_links l JOIN partner_identities i \
                     USING (partner_id) WHERE contains(i.nome_busca, '{folded}') {condition}"
                ),
                [],
                |r| r.get(0),
            )
            .unwrap();
        out.push((format!("{term:?} {label}"), format!("name={}{extra}", encode(&term)), count));
    }
    out
}

/// Every request's latency of one part, summed up in one line.
fn summary(part: &str, latencies: &mut [Duration]) {
    latencies.sort();
    println!(
        "partners suite, {part}: {} requests, median {:.2} ms, p99 {:.2} ms, slowest {:.2} ms",
        latencies.len(),
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        percentile(latencies, 1.0)
    );
}

/// Runs the suite against the server at `addr` (`get_at` makes a request of a path).
pub(super) fn run(db: &Path, addr: &str, get_at: &dyn Fn(&str, &str) -> Vec<u8>, seconds: f64) {
    let conn = open(db);
    let suite = searches(&conn, 210);
    println!("\npartners suite: {} name terms, each alone for {seconds} s (median and p99 in ms)", suite.len());
    println!("{:<48} {:>10} {:>10} {:>10}", "query", "total", "p50", "p99");
    let mut all = Vec::new();
    for (name, query, expected) in &suite {
        let path = format!("/api/v1/partners/search?{query}");
        let (p50, p99, total, mut latencies) = alone_all(addr, &get_at(addr, &path), seconds);
        assert_eq!(total, *expected, "{name}: the search and SQL over partner_links disagree");
        all.append(&mut latencies);
        let name: String = name.chars().take(48).collect();
        println!("{name:<48} {total:>10} {p50:>10.2} {p99:>10.2}");
    }
    summary("searches", &mut all);
    let ids = texts(&conn, "SELECT partner_id FROM partner_identities USING SAMPLE reservoir(50 ROWS) REPEATABLE (41)");
    let mut pages = Vec::new();
    for id in &ids {
        let (.., mut latencies) = alone_all(addr, &get_at(addr, &format!("/api/v1/partners/{id}")), seconds / 4.0);
        pages.append(&mut latencies);
    }
    summary("a partner's page", &mut pages);
    let companies = texts(&conn, "SELECT cnpj_basico FROM socios USING SAMPLE reservoir(50 ROWS) REPEATABLE (41)");
    let mut networks = Vec::new();
    for basico in &companies {
        let path = format!("/api/v1/companies/{basico}/network?depth=2&max_nodes=200");
        let (.., mut latencies) = alone_all(addr, &get_at(addr, &path), seconds / 4.0);
        networks.append(&mut latencies);
    }
    summary("networks of depth 2, max_nodes 200", &mut networks);
}
