//! The analysts' views (`sql/duckdb/views.sql`): the eight example queries of `docs/sql.md` ("SQL for
//! analysts"), read from that page itself (so that the two cannot drift), run on the sample dump's
//! dataset, each answer checked against the same question asked of the tables.

use std::collections::BTreeSet;
use std::path::Path;

use duckdb::types::Value;

use super::{build, etl, query, root, sample_dump, text};

/// The ```sql blocks of `docs/sql.md`'s "SQL for analysts" section, in order.
fn sql_page_queries() -> Vec<String> {
    let page = std::fs::read_to_string(root().join("docs/sql.md")).unwrap();
    let start = page.find("# SQL for analysts").expect("docs/sql.md has a \"SQL for analysts\" section");
    let section = &page[start..];
    // Up to the next heading of this level (the page's title level).
    let end = section[2..].find("\n# ").map_or(section.len(), |i| i + 2);
    section[..end].split("```sql\n").skip(1).map(|block| block.split("```").next().unwrap().to_owned()).collect()
}

/// A value as text: numbers and text as DuckDB prints them, NULL as empty, others debugged.
fn cell(value: Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Text(s) => s,
        Value::Int(n) => n.to_string(),
        Value::BigInt(n) => n.to_string(),
        Value::HugeInt(n) => n.to_string(),
        Value::UBigInt(n) => n.to_string(),
        Value::Decimal(d) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// Every row of a docs/sql.md query, read-only, each value as text.
fn run(db: &Path, sql: &str) -> Vec<Vec<String>> {
    let config = duckdb::Config::default().access_mode(duckdb::AccessMode::ReadOnly).unwrap();
    let conn = duckdb::Connection::open_with_flags(db, config).unwrap();
    let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("docs/sql.md query fails to prepare: {e}\n{sql}"));
    let mut rows = stmt.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let n = row.as_ref().column_count();
        out.push((0..n).map(|i| cell(row.get::<_, Value>(i).unwrap())).collect());
    }
    out
}

fn set(rows: &[Vec<String>], columns: usize) -> BTreeSet<Vec<String>> {
    rows.iter().map(|r| r[..columns].to_vec()).collect()
}

/// A decimal with two places (`"1000.50"`) in cents, exactly.
fn cents(text: &str) -> i128 {
    let (units, fraction) = text.split_once('.').unwrap_or((text, "00"));
    units.parse::<i128>().unwrap() * 100 + fraction.parse::<i128>().unwrap()
}

fn number(rows: &[Vec<String>]) -> i64 {
    rows[0][0].parse().unwrap()
}

#[test]
fn sql_page_queries_answer_as_the_tables_do() {
    let built = build(&sample_dump());
    let db = &built.db;
    let queries = sql_page_queries();
    assert_eq!(queries.len(), 8, "docs/sql.md's SQL for analysts section has eight example queries");
    let answers: Vec<Vec<Vec<String>>> = queries.iter().map(|q| run(db, q)).collect();
    for (q, rows) in queries.iter().zip(&answers).take(6) {
        assert!(rows.len() >= 2, "a docs/sql.md query answers too little to show anything: {rows:?}\n{q}");
    }

    // 1. Establishments and active ones per state: every establishment counted once.
    let per_state = query(
        db,
        "SELECT uf, CAST(count(*) AS VARCHAR), CAST(count(*) FILTER (WHERE situacao_cadastral = '02') AS VARCHAR) \
         FROM estabelecimentos GROUP BY uf",
    );
    assert_eq!(set(&answers[0], 3), set(&per_state, 3));
    let total: i64 = answers[0].iter().map(|r| r[1].parse::<i64>().unwrap()).sum();
    assert_eq!(total, number(&query(db, "SELECT CAST(count(*) AS VARCHAR) FROM estabelecimentos")));

    // 2. Main activities of active establishments with their Spanish labels.
    let activities = query(
        db,
        "SELECT e.cnae_fiscal, l.descricao, CAST(count(*) AS VARCHAR) FROM estabelecimentos e \
         LEFT JOIN labels l ON l.tabela = 'cnaes' AND l.locale = 'es' AND l.codigo = e.cnae_fiscal \
         WHERE e.situacao_cadastral = '02' GROUP BY ALL",
    );
    assert_eq!(set(&answers[1], 3), set(&activities, 3));
    assert!(answers[1].iter().all(|r| !r[1].is_empty()), "every main activity has its label: {:?}", answers[1]);

    // 3. Secondary activities: as many rows, summed, as codes in the lists, each with its label.
    let secondary = query(
        db,
        "SELECT c, l.descricao, CAST(count(*) AS VARCHAR) \
         FROM (SELECT unnest(cnaes_secundarios) AS c FROM estabelecimentos) \
         LEFT JOIN labels l ON l.tabela = 'cnaes' AND l.locale = 'en' AND l.codigo = c GROUP BY ALL",
    );
    assert_eq!(set(&answers[2], 3), set(&secondary, 3));
    let codes: i64 = answers[2].iter().map(|r| r[2].parse::<i64>().unwrap()).sum();
    let listed = query(db, "SELECT CAST(sum(len(cnaes_secundarios)) AS VARCHAR) FROM estabelecimentos");
    assert_eq!(codes, number(&listed));

    // 4. Partners of micro-enterprises: every partner of every such company, with its company.
    let partners = query(
        db,
        "SELECT c.razao_social, s.nome FROM socios s JOIN empresas c USING (cnpj_basico) WHERE c.porte_empresa = '01'",
    );
    assert_eq!(answers[3].len(), partners.len());
    assert_eq!(set(&answers[3], 2), set(&partners, 2));
    assert!(answers[3].iter().any(|r| r[3] == "Sócio-Administrador"), "labels in pt-br: {:?}", answers[3]);

    // 5. Companies opened since 2000 per head office's city: the companies and capital reconcile.
    let companies = query(
        db,
        "SELECT CAST(count(DISTINCT e.cnpj_basico) AS VARCHAR), CAST(sum(c.capital_social) AS VARCHAR) \
         FROM estabelecimentos e LEFT JOIN empresas c USING (cnpj_basico) \
         WHERE e.matriz_filial = '1' AND year(e.data_inicio_atividade) >= 2000",
    );
    let counted: i64 = answers[4].iter().map(|r| r[2].parse::<i64>().unwrap()).sum();
    assert_eq!(counted, number(&companies));
    let capital: i128 = answers[4].iter().filter(|r| !r[3].is_empty()).map(|r| cents(&r[3])).sum();
    assert_eq!(capital, cents(&companies[0][1]));
    let cities = query(db, "SELECT name FROM municipios");
    assert!(answers[4].iter().all(|r| cities.iter().any(|c| c[0] == r[0])), "city names: {:?}", answers[4]);

    check_partner_queries(db, &queries, &answers);
}

/// The partners' queries of docs/sql.md (6 to 8), against the same questions asked of `socios`.
fn check_partner_queries(db: &Path, queries: &[String], answers: &[Vec<Vec<String>>]) {
    // 6. A person's companies: every company where a partner of that name and those digits is.
    let companies = query(
        db,
        "SELECT DISTINCT cnpj_basico FROM socios WHERE nome = 'FULANO DE TAL' AND documento = '***.456.789-**'",
    );
    assert_eq!(set(&answers[5], 1), set(&companies, 1));
    assert_eq!(answers[5].len(), companies.len(), "one link per company here: {:?}", answers[5]);
    // 7. Two partners' shared companies.
    let shared = query(
        db,
        "SELECT cnpj_basico FROM socios WHERE nome = 'FULANO DE TAL' AND documento = '***.456.789-**' \
         INTERSECT SELECT cnpj_basico FROM socios WHERE nome = 'HOLDING EXEMPLO SA'",
    );
    assert!(!shared.is_empty());
    assert_eq!(set(&answers[6], 1), set(&shared, 1));
    // 8. The partners of the company's partner companies, on the sample dump (where the holding's
    // company has none) and on a synthetic month, whose company partners are companies of the month.
    // The same question of `socios`: each partner row of each company a partner row names.
    let chain = |db: &Path, basico: &str| {
        let rows = query(
            db,
            &format!(
                "SELECT s1.partner_basico, i.nome FROM socios s1 \
                 JOIN socios s2 ON s2.cnpj_basico = s1.partner_basico \
                 JOIN partner_identities i ON i.partner_id = s2.partner_id \
                 WHERE s1.cnpj_basico = '{basico}' AND s1.tipo = '1' AND s1.partner_basico <> ''"
            ),
        );
        rows.into_iter().map(|r| (r[0].clone(), r[1].clone())).collect::<Vec<_>>()
    };
    let pairs = |rows: &[Vec<String>]| rows.iter().map(|r| (r[0].clone(), r[2].clone())).collect::<Vec<_>>();
    assert_eq!(pairs(&answers[7]), chain(db, "11222333"));
    let dir = tempfile::tempdir().unwrap();
    let synth = dir.path().join("synth");
    let made = etl(&["synth", "--quiet", "--scale", "0.0001", "--out", synth.to_str().unwrap()]);
    assert!(made.status.success(), "{}", text(&made));
    let month = build(&synth);
    let found = query(
        &month.db,
        "SELECT s1.cnpj_basico FROM socios s1 JOIN socios s2 ON s2.cnpj_basico = s1.partner_basico \
         WHERE s1.tipo = '1' GROUP BY ALL ORDER BY count(*) DESC, 1 LIMIT 1",
    );
    let company = &found[0][0];
    let rows = run(&month.db, &queries[7].replace("'11222333'", &format!("'{company}'")));
    let (mut got, mut want) = (pairs(&rows), chain(&month.db, company));
    got.sort();
    want.sort();
    assert!(!want.is_empty(), "{company}");
    assert_eq!(got, want, "{company}");
}

#[test]
fn every_view_keeps_every_row_in_every_locale() {
    let built = build(&sample_dump());
    let db = &built.db;
    let count = |sql: &str| number(&query(db, &format!("SELECT CAST(count(*) AS VARCHAR) FROM {sql}")));
    for locale in ["pt_br", "en", "es"] {
        assert_eq!(count(&format!("establishments_{locale}")), count("estabelecimentos"), "{locale}");
        assert_eq!(count(&format!("partners_{locale}")), count("socios"), "{locale}");
        assert_eq!(count(&format!("partner_links_{locale}")), count("socios"), "{locale}");
        assert_eq!(count(&format!("partner_identities_{locale}")), count("partner_identities"), "{locale}");
    }
    // Each view labels in its locale: the labels table's text, different in every locale.
    let sql = |view: &str, locale: &str| {
        format!(
            "SELECT v.situacao_cadastral_descricao, l.descricao FROM {view} v JOIN labels l \
             ON l.tabela = 'situacao_cadastral' AND l.codigo = v.situacao_cadastral AND l.locale = '{locale}'"
        )
    };
    let mut seen = BTreeSet::new();
    for (view, locale) in [("establishments_pt_br", "pt-br"), ("establishments_en", "en"), ("establishments_es", "es")]
    {
        let rows = query(db, &sql(view, locale));
        assert_eq!(rows.len() as i64, count("estabelecimentos"), "{view}");
        assert!(rows.iter().all(|r| r[0] == r[1]), "{view}: {rows:?}");
        seen.insert(rows[0][0].clone());
    }
    assert_eq!(seen.len(), 3, "three locales, three labels: {seen:?}");
}
