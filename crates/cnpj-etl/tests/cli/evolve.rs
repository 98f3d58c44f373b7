//! `synth --evolve-from`: the months after a synthetic month build, carry the next month's date
//! stamp, and the changes they plant are exactly the differences of the served values between
//! the two datasets, by the event rules of the history, event by event. A month's description is
//! its `synth.json` alone: nothing on stdout, one line on stderr (none with `--quiet`).

use std::path::Path;

use serde_json::Value;

use crate::{Built, build, etl, text};

/// Runs `synth` with `args` (and `--quiet`, so it says nothing at all): its folder's `synth.json`.
fn synth(args: &[&str], out: &Path) -> Value {
    let mut all = vec!["synth", "--quiet", "--out", out.to_str().unwrap()];
    all.extend(args);
    let run = etl(&all);
    assert!(run.status.success(), "synth {args:?}: {}", text(&run));
    assert!(run.stdout.is_empty() && run.stderr.is_empty(), "synth --quiet {args:?} printed: {}", text(&run));
    serde_json::from_slice(&std::fs::read(out.join("synth.json")).unwrap()).unwrap()
}

/// Without `--quiet`, one line on stderr names the description it wrote; stdout stays empty.
#[test]
fn synth_describes_a_month_in_synth_json_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let run = etl(&["synth", "--scale", "0.00002", "--out", out.to_str().unwrap()]);
    assert!(run.status.success(), "{}", text(&run));
    assert!(run.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&run.stdout));
    let said = String::from_utf8_lossy(&run.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.starts_with("wrote 37 files") && said.contains(&out.join("synth.json").display().to_string()));
    let manifest: Value = serde_json::from_slice(&std::fs::read(out.join("synth.json")).unwrap()).unwrap();
    assert_eq!(manifest["files"].as_array().map(Vec::len), Some(37));
}

/// One event as (event, field, cnpj, cnpj_basico), absent values empty.
type Event = [String; 4];

fn planted(manifest: &Value) -> Vec<Event> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut events: Vec<Event> = manifest["planted_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| [text(&c["event"]), text(&c["field"]), text(&c["cnpj"]), text(&c["cnpj_basico"])])
        .collect();
    events.sort();
    events
}

/// Every event between two datasets by the event rules, computed in SQL on both files:
/// establishments by CNPJ, companies (in Empresas in both months) by `cnpj_basico`, secondary
/// CNAEs as sets, partners as multisets of (nome, documento, qualificacao), a company without a
/// Simples row as not opted.
fn differences(old: &Path, new: &Path) -> Vec<Event> {
    let mut sql = vec![
        "SELECT 'opened', NULL, cnpj, cnpj_basico, 1 FROM estabelecimentos
         WHERE cnpj NOT IN (SELECT cnpj FROM old.estabelecimentos)"
            .to_owned(),
        "SELECT 'disappeared', NULL, cnpj, cnpj_basico, 1 FROM old.estabelecimentos
         WHERE cnpj NOT IN (SELECT cnpj FROM estabelecimentos)"
            .to_owned(),
    ];
    let establishment = [
        ("status_changed", "situacao_cadastral"),
        ("moved", "municipio"),
        ("moved", "cep"),
        ("moved", "logradouro"),
        ("renamed", "nome_fantasia"),
        ("main_activity_changed", "cnae_fiscal"),
    ];
    for (event, field) in establishment {
        sql.push(format!(
            "SELECT '{event}', '{field}', n.cnpj, n.cnpj_basico, 1 FROM estabelecimentos n
             JOIN old.estabelecimentos o ON n.cnpj = o.cnpj WHERE n.{field} IS DISTINCT FROM o.{field}"
        ));
    }
    sql.push(
        "SELECT 'secondary_activities_changed', 'cnaes_secundarios', n.cnpj, n.cnpj_basico, 1
         FROM estabelecimentos n JOIN old.estabelecimentos o ON n.cnpj = o.cnpj
         WHERE list_sort(list_distinct(n.cnaes_secundarios)) IS DISTINCT FROM list_sort(list_distinct(o.cnaes_secundarios))"
            .to_owned(),
    );
    let company = [
        ("renamed", "razao_social"),
        ("legal_nature_changed", "natureza_juridica"),
        ("capital_changed", "capital_social"),
        ("size_changed", "porte_empresa"),
    ];
    for (event, field) in company {
        sql.push(format!(
            "SELECT '{event}', '{field}', NULL, n.cnpj_basico, 1 FROM empresas n
             JOIN old.empresas o ON n.cnpj_basico = o.cnpj_basico WHERE n.{field} IS DISTINCT FROM o.{field}"
        ));
    }
    sql.push(
        "SELECT CASE WHEN d > 0 THEN 'partner_entered' ELSE 'partner_left' END, 'socios', NULL, b, abs(d) FROM (
           SELECT coalesce(n.cnpj_basico, o.cnpj_basico) AS b, coalesce(n.c, 0) - coalesce(o.c, 0) AS d
           FROM (SELECT cnpj_basico, nome, documento, qualificacao, count(*) AS c FROM socios GROUP BY ALL) n
           FULL JOIN (SELECT cnpj_basico, nome, documento, qualificacao, count(*) AS c FROM old.socios GROUP BY ALL) o
             ON n.cnpj_basico = o.cnpj_basico AND n.nome IS NOT DISTINCT FROM o.nome
            AND n.documento IS NOT DISTINCT FROM o.documento AND n.qualificacao IS NOT DISTINCT FROM o.qualificacao)
         WHERE d <> 0 AND b IN (SELECT cnpj_basico FROM empresas) AND b IN (SELECT cnpj_basico FROM old.empresas)"
            .to_owned(),
    );
    for (option, events) in [("opcao_simples", "simples"), ("opcao_mei", "mei")] {
        sql.push(format!(
            "SELECT CASE WHEN now = 'S' THEN '{events}_opted_in' ELSE '{events}_opted_out' END, '{option}', NULL, b, 1
             FROM (SELECT e.cnpj_basico AS b, coalesce(n.{option}, '') AS now, coalesce(o.{option}, '') AS before
                   FROM empresas e JOIN old.empresas eo ON e.cnpj_basico = eo.cnpj_basico
                   LEFT JOIN simples n ON n.cnpj_basico = e.cnpj_basico
                   LEFT JOIN old.simples o ON o.cnpj_basico = e.cnpj_basico)
             WHERE (now = 'S') <> (before = 'S')"
        ));
    }
    let conn = duckdb::Connection::open(new).unwrap();
    conn.execute_batch(&format!("ATTACH '{}' AS old (READ_ONLY)", old.display())).unwrap();
    let mut stmt = conn.prepare(&sql.join("\nUNION ALL\n")).unwrap();
    let rows = stmt
        .query_map([], |r| {
            let text = |i| r.get::<_, Option<String>>(i).map(Option::unwrap_or_default);
            Ok(([text(0)?, text(1)?, text(2)?, text(3)?], r.get::<_, i64>(4)?))
        })
        .unwrap();
    let mut events = Vec::new();
    for row in rows {
        let (event, times) = row.unwrap();
        events.extend(std::iter::repeat_n(event, usize::try_from(times).unwrap()));
    }
    events.sort();
    events
}

/// Rows a build serves from the files of a table, by `synth.json`.
fn served(manifest: &Value, zip_prefix: &str) -> u64 {
    let files = manifest["files"].as_array().unwrap();
    let n = |f: &Value, k: &str| f[k].as_u64().unwrap();
    files
        .iter()
        .filter(|f| {
            f["zip"].as_str().unwrap().trim_end_matches(".zip").trim_end_matches(char::is_numeric) == zip_prefix
        })
        .map(|f| n(f, "records") - n(f, "planted_rejects") - n(f, "planted_duplicates"))
        .sum()
}

fn table_rows(built: &Built, table: &str) -> u64 {
    let tables = built.report["tables"].as_array().unwrap();
    tables.iter().find(|t| t["table"] == table).unwrap()["rows"].as_u64().unwrap()
}

/// The build of a synthetic month reads, rejects and deduplicates what its `synth.json` says, and
/// serves the rows it says.
fn check_build(built: &Built, manifest: &Value) {
    assert_eq!(built.report["source_month"], manifest["month"]);
    for f in manifest["files"].as_array().unwrap() {
        let member = f["member"].as_str().unwrap();
        let got = built.report["files"].as_array().unwrap().iter().find(|g| g["member"] == member).unwrap();
        assert_eq!(got["rows_read"], f["records"], "{f}");
        assert_eq!(got["rows_rejected"], f["planted_rejects"], "{f}");
        assert_eq!(got["duplicates"], f["planted_duplicates"], "{f}");
        assert_eq!(got["duplicates_differing"], 0, "{f}");
    }
    for (table, prefix) in [
        ("empresas", "Empresas"),
        ("estabelecimentos", "Estabelecimentos"),
        ("socios", "Socios"),
        ("simples", "Simples"),
    ] {
        assert_eq!(table_rows(built, table), served(manifest, prefix), "{table}");
    }
}

#[test]
fn evolved_months_build_and_plant_exactly_the_changes_they_list() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    let first = synth(&["--scale", "0.0005", "--month", "2026-12", "--seed", "5"], &a);
    let second = synth(&["--evolve-from", a.to_str().unwrap(), "--seed", "9"], &b);
    let third = synth(&["--evolve-from", b.to_str().unwrap(), "--seed", "9"], &c);
    assert_eq!((second["month"].as_str(), third["month"].as_str()), (Some("2027-01"), Some("2027-02")));

    let built: Vec<Built> = [&a, &b, &c].into_iter().map(|month| build(month)).collect();
    for (month, manifest) in built.iter().zip([&first, &second, &third]) {
        check_build(month, manifest);
    }
    for (pair, manifest) in built.windows(2).zip([&second, &third]) {
        let planted = planted(manifest);
        let count = |event: &str| planted.iter().filter(|e| e[0] == event).count() as u64;
        // Every event but the tax regime's (a synthetic month has no regime files).
        for kind in cnpj_store::EVENTS.into_iter().filter(|&e| e != "tax_regime_changed") {
            assert!(count(kind) > 0, "no {kind} planted");
            assert_eq!(manifest["churn"][kind].as_u64(), Some(count(kind)), "{kind}");
        }
        let estabs = |b: &Built| table_rows(b, "estabelecimentos");
        assert_eq!(estabs(&pair[1]), estabs(&pair[0]) + count("opened") - count("disappeared"));
        // Every planted change, and no other, is a difference of served values.
        let found = differences(&pair[0].db, &pair[1].db);
        let missing: Vec<&Event> = planted.iter().filter(|e| !found.contains(e)).collect();
        let unplanted: Vec<&Event> = found.iter().filter(|e| !planted.contains(e)).collect();
        assert!(
            missing.is_empty() && unplanted.is_empty(),
            "planted, not found: {missing:?}\nfound, not planted: {unplanted:?}"
        );
        assert_eq!(found, planted, "{}: the same events, as often", manifest["month"]);
    }

    let both = etl(&["synth", "--scale", "0.001", "--evolve-from", a.to_str().unwrap(), "--out", "x"]);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both));
    let same = etl(&["synth", "--quiet", "--evolve-from", a.to_str().unwrap(), "--out", a.to_str().unwrap()]);
    assert_eq!(same.status.code(), Some(1));
    assert!(text(&same).contains("another folder"), "{}", text(&same));
}
