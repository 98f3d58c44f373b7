//! Partners as identities (contract §14): `partner_links` and `partner_identities` built from
//! `socios`, on the sample dump and on a synthetic month built twice: a link per partner row, the
//! identities' counts, the same ids in every build, legal-entity partners linked to their company,
//! and no column that holds a document (§4).

use std::path::Path;

use super::{build, build_in, etl, query, sample_dump, text};

fn number(db: &Path, sql: &str) -> i64 {
    query(db, &format!("SELECT CAST(({sql}) AS VARCHAR)"))[0][0].parse().unwrap()
}

/// The invariants of the partner tables of one dataset.
fn check_partner_tables(db: &Path) {
    // Every socios row has exactly one link, with its values: the two multisets are equal.
    let socios = number(db, "SELECT count(*) FROM socios");
    assert!(socios > 0);
    assert_eq!(number(db, "SELECT count(*) FROM partner_links"), socios);
    let links = "SELECT partner_id, cnpj_basico, qualificacao, data_entrada FROM";
    for (a, b) in [("socios", "partner_links"), ("partner_links", "socios")] {
        assert_eq!(number(db, &format!("SELECT count(*) FROM ({links} {a} EXCEPT ALL {links} {b})")), 0, "{a} − {b}");
    }
    // One identity per partner_id of the links, and its counts are the links'.
    assert_eq!(
        number(db, "SELECT count(*) FROM partner_identities"),
        number(db, "SELECT count(DISTINCT partner_id) FROM partner_links")
    );
    let mismatched = "SELECT count(*) FROM partner_identities i FULL JOIN (SELECT partner_id, \
                      count(DISTINCT cnpj_basico) AS n, min(data_entrada) AS first FROM partner_links GROUP BY ALL) l \
                      USING (partner_id) WHERE i.companies IS DISTINCT FROM l.n OR i.first_entry IS DISTINCT FROM l.first";
    assert_eq!(number(db, mismatched), 0);
    // An id is `p` and 16 base32 characters; a legal entity's company is its document's base.
    assert_eq!(
        number(db, "SELECT count(*) FROM partner_identities WHERE NOT regexp_full_match(partner_id, 'p[a-z2-7]{16}')"),
        0
    );
    let wrong_base = "SELECT count(*) FROM socios WHERE partner_basico <> '' AND (tipo <> '1' \
                      OR substr(documento, 4, 3) || substr(documento, 8, 3) <> substr(partner_basico, 3, 6))";
    assert_eq!(number(db, wrong_base), 0);
    // Privacy (§4): no column of either table holds an 11-digit run (a CPF, or a whole CNPJ).
    for (table, columns) in [
        (
            "partner_identities",
            "partner_id, tipo, nome, nome_busca, documento, pais, partner_basico, CAST(companies AS VARCHAR)",
        ),
        ("partner_links", "partner_id, cnpj_basico, qualificacao"),
    ] {
        let sql =
            format!("SELECT count(*) FROM {table} WHERE regexp_matches(concat_ws('|', {columns}), '[0-9]{{11}}')");
        assert_eq!(number(db, &sql), 0, "{table}");
    }
}

#[test]
fn sample_dump_partners_are_identities_linked_to_their_companies() {
    let built = build(&sample_dump());
    let db = &built.db;
    check_partner_tables(db);
    let tables = built.report["tables"].as_array().unwrap();
    let rows = |name: &str| tables.iter().find(|t| t["table"] == name).map(|t| t["rows"].as_u64().unwrap());
    assert_eq!(rows("partner_links"), rows("socios"), "the report counts the links");
    assert!(rows("partner_identities").is_some());

    // The holding (tipo 1, a whole CNPJ in the dump) is company 44555666, which the month has;
    // its id is fixed by its identity alone (`1|44555666`), for every build and release.
    let holding = query(
        db,
        "SELECT i.partner_id, i.partner_basico, i.documento, e.razao_social FROM partner_identities i \
         JOIN empresas e ON e.cnpj_basico = i.partner_basico WHERE i.nome = 'HOLDING EXEMPLO SA'",
    );
    assert_eq!(holding, [["pjnrquzm2ntgqdkaa", "44555666", "**.555.666/0001-**", "MUNICIPIO DE EXEMPLO"]]);
    // A person: one identity for the same folded name and digits, in two companies.
    let person = query(
        db,
        "SELECT nome, nome_busca, documento, CAST(companies AS VARCHAR), CAST(first_entry AS VARCHAR) \
         FROM partner_identities WHERE nome_busca = 'fulano de tal'",
    );
    assert_eq!(person, [["FULANO DE TAL", "fulano de tal", "***.456.789-**", "2", "2020-01-01"]]);
    // The foreign partner is its name and country.
    let foreign = query(db, "SELECT tipo, pais, documento FROM partner_identities WHERE nome = 'FOREIGN PARTNER LLC'");
    assert_eq!(foreign, [["3", "493", ""]]);
}

#[test]
fn a_month_built_twice_has_the_same_partner_ids() {
    let dir = tempfile::tempdir().unwrap();
    let synth = dir.path().join("synth");
    let made = etl(&["synth", "--quiet", "--scale", "0.0001", "--out", synth.to_str().unwrap()]);
    assert!(made.status.success(), "{}", text(&made));
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let first = build_in(&synth, &a, &[]);
    let second = build_in(&synth, &b, &["--memory-limit", "1GB"]);
    check_partner_tables(&first.db);
    let identities = "SELECT partner_id, tipo, nome, nome_busca, documento, pais, partner_basico, \
                      CAST(companies AS VARCHAR), CAST(first_entry AS VARCHAR) FROM partner_identities";
    let (x, y) = (query(&first.db, identities), query(&second.db, identities));
    assert!(x.len() > 10, "{x:?}");
    assert_eq!(x, y, "the same rows in the same order");
    let links = "SELECT partner_id, cnpj_basico, qualificacao, CAST(data_entrada AS VARCHAR) FROM partner_links";
    assert_eq!(query(&first.db, links), query(&second.db, links));
    // The synthetic month's company partners are companies of the month: each links to its own.
    let unlinked = "SELECT count(*) FROM partner_identities i WHERE tipo = '1' \
                    AND NOT EXISTS (SELECT 1 FROM empresas e WHERE e.cnpj_basico = i.partner_basico)";
    assert!(number(&first.db, "SELECT count(*) FROM partner_identities WHERE tipo = '1'") > 0);
    assert_eq!(number(&first.db, unlinked), 0);
}
