//! Builds of the sample dump (every gotcha), of the real RFB extract in `../shared` (when present)
//! and of synthetic months, checked through `show`, the build report and the dataset's own tables;
//! `run`, Postgres publication, and the serving files answering as SQL does.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::{Rfb, build, copy_dir, etl, pg_database, query, root, sample_dump, show};

/// rows read = loaded + duplicates + rejected, per file, and the totals add up (the rejects per
/// reason too).
fn assert_reconciles(report: &Value) {
    let files = report["files"].as_array().unwrap();
    assert!(!files.is_empty());
    for f in files {
        let n = |k: &str| f[k].as_u64().unwrap();
        assert_eq!(n("rows_read"), n("rows_loaded") + n("duplicates") + n("rows_rejected"), "{f}");
    }
    let total = |k: &str| files.iter().map(|f| f[k].as_u64().unwrap()).sum::<u64>();
    for k in ["rows_read", "rows_loaded", "rows_rejected", "duplicates"] {
        assert_eq!(report[k].as_u64().unwrap(), total(k), "{k}");
    }
    let by_reason = report["rejects_by_reason"].as_array().unwrap();
    assert_eq!(by_reason.iter().map(|r| r["count"].as_u64().unwrap()).sum::<u64>(), total("rows_rejected"));
}

fn file<'a>(report: &'a Value, member_suffix: &str) -> &'a Value {
    report["files"].as_array().unwrap().iter().find(|f| f["member"].as_str().unwrap().ends_with(member_suffix)).unwrap()
}

fn counts(f: &Value) -> [u64; 5] {
    ["rows_read", "rows_loaded", "rows_rejected", "duplicates", "duplicates_differing"].map(|k| f[k].as_u64().unwrap())
}

#[test]
fn sample_dump_reconciles_file_by_file() {
    let b = build(&sample_dump());
    assert_reconciles(&b.report);
    // read, loaded, rejected, duplicates, differing
    assert_eq!(counts(file(&b.report, "Y0.D60913.EMPRECSV")), [11, 9, 1, 1, 0]);
    assert_eq!(counts(file(&b.report, "Y1.D60913.EMPRECSV")), [3, 1, 1, 1, 1]);
    assert_eq!(counts(file(&b.report, "Y0.D60913.ESTABELE")), [10, 8, 2, 0, 0]);
    assert_eq!(counts(file(&b.report, "Y1.D60913.ESTABELE")), [5, 3, 0, 2, 1]);
    assert_eq!(counts(file(&b.report, "SOCIOCSV")), [8, 6, 1, 1, 0]);
    assert_eq!(counts(file(&b.report, "SIMPLES.CSV.D60913")), [4, 3, 0, 1, 1]);
    assert_eq!(counts(file(&b.report, "Lucro Presumido 2024.csv")), [2, 1, 1, 0, 0]);
    assert_eq!(counts(file(&b.report, "CNAECSV")), [1359, 1359, 0, 0, 0]);
    assert_eq!(b.report["source_month"], "2026-09");
    assert_eq!(b.report["estabelecimentos_sem_empresa"], 1);
    let unknown: Vec<(String, String, u64)> = b.report["unknown_codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["table"].as_str().unwrap().into(), u["code"].as_str().unwrap().into(), u["rows"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        unknown,
        vec![
            ("motivos".into(), "32".into(), 1),
            ("paises".into(), "150".into(), 1),
            ("qualificacoes".into(), "36".into(), 2)
        ]
    );
    // The dataset's own tables agree with the report.
    let stats = query(
        &b.db,
        "SELECT sum(rows_read)::VARCHAR, sum(rows_loaded)::VARCHAR, sum(duplicates)::VARCHAR, sum(rows_rejected)::VARCHAR FROM source_files",
    );
    assert_eq!(
        stats[0],
        [
            b.report["rows_read"].to_string(),
            b.report["rows_loaded"].to_string(),
            b.report["duplicates"].to_string(),
            b.report["rows_rejected"].to_string()
        ]
    );
    let meta = query(&b.db, "SELECT value FROM metadata WHERE key = 'source_month'");
    assert_eq!(meta, [["2026-09"]]);
}

#[test]
fn rejects_are_kept_verbatim_with_file_line_and_reason() {
    let b = build(&sample_dump());
    let rejects = query(
        &b.db,
        "SELECT f.zip, r.line::VARCHAR, r.reason, r.record FROM rejects r JOIN source_files f ON f.id = r.source_file ORDER BY f.id, r.line",
    );
    let expected: Vec<[&str; 4]> = vec![
        ["Empresas0.zip", "10", "expected 7 fields, found 3", r#""88999000";"SHORT ROW";"2062""#],
        [
            "Empresas1.zip",
            "4",
            "invalid cnpj_basico \"AB12CD3!\": 8 characters of [0-9A-Z] expected",
            r#""AB12CD3!";"BASE INVALIDA";"2062";"49";"1,00";"01";"""#,
        ],
        ["Estabelecimentos2.zip", "7", "invalid CNPJ \"11222333000300\": wrong check digits: expected 43", ""],
        [
            "Estabelecimentos2.zip",
            "10",
            "expected 30 fields, found 5",
            r#""66777888";"0001";"00";"1";"CAMPOS A MENOS""#,
        ],
        [
            "Lucro Presumido.zip",
            "3",
            "invalid CNPJ \"11.222.333/0001-99\": wrong check digits: expected 81",
            "2024,11.222.333/0001-99,0,LUCRO PRESUMIDO,1",
        ],
        ["Socios0.zip", "7", "expected 11 fields, found 5", r#""44555666";"2";"PREFEITO";"***333444**";"10""#],
    ];
    assert_eq!(rejects.len(), expected.len(), "{rejects:?}");
    // The report counts them per reason, the values masked.
    let by_reason: Vec<(&str, u64)> = b.report["rejects_by_reason"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        by_reason,
        [
            ("expected … fields, found …", 3),
            ("invalid CNPJ …: wrong check digits: expected …", 2),
            ("invalid cnpj_basico …: … characters of [0-9A-Z] expected", 1)
        ]
    );
    for (got, want) in rejects.iter().zip(&expected) {
        assert_eq!(got[..3], want[..3]);
        if !want[3].is_empty() && !want[3].contains(',') {
            assert_eq!(got[3], want[3]);
        }
    }
    // A tax-regime line is re-quoted field by field.
    assert_eq!(rejects[4][3], r#""2024";"11.222.333/0001-99";"0";"LUCRO PRESUMIDO";"1""#);
}

#[test]
fn sample_dump_detail_records() {
    let b = build(&sample_dump());
    for (name, locale, cnpj) in [
        ("matriz_with_partners_and_regime", "pt-br", "11.222.333/0001-81"),
        ("filial_accents_sentinels", "pt-br", "11222333000262"),
        ("foreign_first_read_wins", "pt-br", "44555666000181"),
        ("orphan_codes_bogus_date", "pt-br", "12345678000195"),
        ("alphanumeric_lower_case_in_dump", "pt-br", "ab.12c.d34/0001-84"),
        ("mei_cpf_masked_unpadded_codes", "en", "22333444"),
        ("company_missing_from_empresas", "es", "33444555000181"),
        ("no_head_office_lowest_ordem", "pt-br", "77888999"),
        ("head_office_by_basico", "es", "44555666"),
        ("capital_sentinel_nul_byte", "en", "55666777000181"),
    ] {
        insta::assert_snapshot!(name, show(&b.db, locale, cnpj));
    }
}

#[test]
fn quoted_newline_and_unpadded_base_are_one_clean_row_each() {
    let b = build(&sample_dump());
    let rows = query(
        &b.db,
        "SELECT cnpj_basico, razao_social, CAST(capital_social AS VARCHAR) FROM empresas WHERE cnpj_basico IN ('99000111', '01234567', '77888999') ORDER BY 1",
    );
    assert_eq!(
        rows,
        [
            ["01234567", "BASE SEM ZERO A ESQUERDA", "1.00"],
            ["77888999", "PIO XII COMÉRCIO IMPORTAÇÃO E EXPORTAÇÃO EIRELI", "50000.50"],
            ["99000111", "QUEBRA DE LINHA LTDA", "1.00"],
        ]
    );
}

#[test]
fn cnpj_parts_are_columns_computed_from_the_cnpj() {
    let b = build(&sample_dump());
    let rows = query(
        &b.db,
        "SELECT CAST(count(*) AS VARCHAR), CAST(count(*) FILTER (cnpj_basico || cnpj_ordem || cnpj_dv = cnpj \
         AND length(cnpj_ordem) = 4 AND length(cnpj_dv) = 2) AS VARCHAR) FROM estabelecimentos",
    );
    assert_ne!(rows[0][0], "0");
    assert_eq!(rows[0][0], rows[0][1], "every establishment's parts make its CNPJ");
    // Computed when read (VIRTUAL): DuckDB keeps them out of the stored columns.
    let stored = query(
        &b.db,
        "SELECT DISTINCT column_name FROM pragma_storage_info('estabelecimentos') WHERE column_name LIKE 'cnpj%' ORDER BY 1",
    );
    assert_eq!(stored, [["cnpj"], ["cnpj_basico"]]);
}

#[test]
fn show_exit_codes() {
    let b = build(&sample_dump());
    let db = b.db.to_str().unwrap();
    let missing = etl(&["show", "--db", db, "11444777000161"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no company with CNPJ 11444777000161"));
    assert!(missing.stdout.is_empty());
    let invalid = etl(&["show", "--db", db, "11222333000182"]);
    assert_eq!(invalid.status.code(), Some(2));
    let bad_locale = etl(&["show", "--db", db, "--locale", "fr", "11222333000181"]);
    assert_eq!(bad_locale.status.code(), Some(2));
}

/// Issue 19 item 17: `show … | true`: output into a closed pipe ends quietly, with success.
#[test]
fn show_into_a_closed_pipe_exits_quietly() {
    let b = build(&sample_dump());
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_cnpj-etl"))
        .args(["show", "--db", b.db.to_str().unwrap(), "11222333000181"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("cnpj-etl runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "{:?}: {stderr}", out.status);
}

/// Issue 29: the log is plain text when stderr is not a terminal (a file, a pipe, journald): no
/// ANSI colour codes.
#[test]
fn logs_without_colours_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    let out = etl(&["build", "-v", "--input", sample_dump().to_str().unwrap(), "--db", db.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.lines().any(|l| l.contains(" INFO ")), "{stderr}");
    assert!(!stderr.contains('\x1b'), "colour codes in the log: {stderr:?}");
}

fn failed_build(input: &Path, db: &Path) -> String {
    let out = etl(&["build", "--quiet", "--input", input.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "the build must fail");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn a_failed_build_names_the_file_and_leaves_the_dataset_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("2026-09");
    copy_dir(&sample_dump(), &input);
    let db = dir.path().join("registry.duckdb");
    let ok = etl(&["build", "--quiet", "--input", input.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert!(ok.status.success());
    let before = std::fs::read(&db).unwrap();

    // A damaged member: the deflate stream or the CRC no longer agree.
    let zip = input.join("Estabelecimentos2.zip");
    let mut bytes = std::fs::read(&zip).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x55;
    bytes[at + 1] ^= 0x55;
    std::fs::write(&zip, &bytes).unwrap();
    let err = failed_build(&input, &db);
    assert!(err.contains("Estabelecimentos2.zip"), "{err}");

    // A missing required table.
    std::fs::remove_file(&zip).unwrap();
    std::fs::remove_file(input.join("Estabelecimentos10.zip")).unwrap();
    let err = failed_build(&input, &db);
    assert!(err.contains("missing required tables: estabelecimentos"), "{err}");

    // Not a zip at all.
    std::fs::write(input.join("Estabelecimentos0.zip"), b"<html>503</html>").unwrap();
    let err = failed_build(&input, &db);
    assert!(err.contains("Estabelecimentos0.zip") && err.contains("not a readable zip"), "{err}");

    // An unreadable folder.
    let err = failed_build(&dir.path().join("no-such-month"), &db);
    assert!(err.contains("cannot read the input folder"), "{err}");

    assert_eq!(std::fs::read(&db).unwrap(), before, "the served dataset changed");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("building"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // The leftovers of a build that was killed (its process gone) are removed by the next build.
    let abandoned = dir.path().join(".registry.duckdb.building-4000000");
    std::fs::write(&abandoned, b"half a dataset").unwrap();
    std::fs::create_dir(dir.path().join(".registry.duckdb.building-4000000.tmp")).unwrap();
    let ok = etl(&["build", "--quiet", "--input", sample_dump().to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert!(ok.status.success());
    assert!(!abandoned.exists() && !dir.path().join(".registry.duckdb.building-4000000.tmp").exists());
}

#[test]
fn real_extract_2026_builds_and_reconciles() {
    let input = root().join("../shared/rfb/samples/real-extract-2026");
    if !input.is_dir() {
        eprintln!("skipping: {} is absent", input.display());
        return;
    }
    let b = build(&input);
    assert_reconciles(&b.report);
    assert_eq!(b.report["source_month"], "2026-03");
    assert_eq!(b.report["rows_rejected"], 0);
    for kind in ["EMPRECSV", "ESTABELE", "SOCIOCSV", "SIMPLES.CSV.D60314"] {
        assert_eq!(counts(file(&b.report, kind))[..3], [2000, 2000, 0], "{kind}");
    }
    for (name, cnpj) in [
        ("real_baixada_with_secondary_cnaes", "13810056000153"),
        ("real_mercearia", "20518630000160"),
        ("real_company_and_establishment", "57815224000179"),
    ] {
        let record = etl(&["show", "--db", b.db.to_str().unwrap(), cnpj]);
        let text = if record.status.success() { String::from_utf8(record.stdout).unwrap() } else { "not found".into() };
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn run_downloads_builds_swaps_and_resumes() {
    let rfb = Rfb::start();
    rfb.publish("2026-09", &sample_dump());
    let (base, gets) = (rfb.base.clone(), || rfb.gets());
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let db = dir.path().join("registry.duckdb");
    let run = || {
        etl(&[
            "run",
            "--quiet",
            "--legacy",
            "--base-url",
            &base,
            "--month",
            "latest",
            "--work",
            work.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--parallel",
            "2",
        ])
    };
    let out = run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fetched = gets();
    assert_eq!(fetched, 15);
    let month = work.join("2026-09");
    for kept in ["manifest.json", "build-report.json", "build-report.html"] {
        assert!(month.join(kept).is_file(), "{kept}");
    }
    assert!(show(&db, "pt-br", "11222333000181").contains("EMPRESA EXEMPLO LTDA"));

    // A crash mid-download, before any dataset: one zip lost, a partial file left behind. The
    // next run fetches only them.
    for ext in ["", ".lookup", ".search"] {
        std::fs::remove_file(format!("{}{ext}", db.display())).unwrap();
    }
    std::fs::remove_file(month.join("Socios0.zip")).unwrap();
    let cnaes = std::fs::read(month.join("Cnaes.zip")).unwrap();
    std::fs::remove_file(month.join("Cnaes.zip")).unwrap();
    std::fs::write(month.join("Cnaes.zip.part"), &cnaes[..cnaes.len() / 2]).unwrap();
    let out = run();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(gets(), fetched + 2);
    assert_eq!(std::fs::read(month.join("Cnaes.zip")).unwrap(), cnaes);
    assert!(!month.join("Cnaes.zip.part").exists());
    let report: Value = serde_json::from_slice(&std::fs::read(month.join("build-report.json")).unwrap()).unwrap();
    assert_reconciles(&report);
}

#[test]
fn a_synthetic_month_builds_with_exactly_the_planted_rejects_and_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    for (out, seed) in [(&a, "7"), (&b, "7"), (&c, "8")] {
        let run = etl(&["synth", "--quiet", "--scale", "0.0001", "--seed", seed, "--out", out.to_str().unwrap()]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    }
    let synth: Value = serde_json::from_slice(&std::fs::read(a.join("synth.json")).unwrap()).unwrap();
    let files = synth["files"].as_array().unwrap();
    assert_eq!(files.len(), 37, "37 zips, as RFB ships");
    for f in files {
        let zip = f["zip"].as_str().unwrap();
        let same = std::fs::read(a.join(zip)).unwrap() == std::fs::read(b.join(zip)).unwrap();
        assert!(same, "{zip} differs for the same seed");
    }
    assert_ne!(
        std::fs::read(a.join("Estabelecimentos0.zip")).unwrap(),
        std::fs::read(c.join("Estabelecimentos0.zip")).unwrap()
    );
    let part0 = files.iter().find(|f| f["zip"] == "Estabelecimentos0.zip").unwrap()["records"].as_u64().unwrap();
    let part1 = files.iter().find(|f| f["zip"] == "Estabelecimentos1.zip").unwrap()["records"].as_u64().unwrap();
    assert!(part0 >= 3 * part1, "part 0 is the big one: {part0} vs {part1}");

    let built = build(&a);
    assert_reconciles(&built.report);
    for f in files {
        let got = file(&built.report, f["member"].as_str().unwrap());
        assert_eq!(got["rows_read"], f["records"], "{f}");
        assert_eq!(got["rows_rejected"], f["planted_rejects"], "{f}");
        assert_eq!(got["duplicates"], f["planted_duplicates"], "{f}");
        assert_eq!(got["duplicates_differing"], 0, "{f}");
    }
    let tables: Vec<(String, u64)> = built.report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["table"].as_str().unwrap().to_owned(), t["rows"].as_u64().unwrap()))
        .collect();
    assert!(tables.contains(&("empresas".into(), 6900)), "{tables:?}");
    assert!(tables.contains(&("estabelecimentos".into(), 7200)), "{tables:?}");
    assert!(tables.contains(&("simples".into(), 4900)), "{tables:?}");
}

/// `build --postgres` publishes into a fresh schema and swaps it in; the replaced one is kept for
/// `rollback`; a publication that fails leaves the served schema alone and nothing half-built.
/// The partners' tables of the dataset `db` are published in the schema `cnpj` as built, and indexed
/// by partner and company.
fn check_published_partners(client: &mut postgres::Client, db: &Path) {
    for (table, columns) in [
        ("partner_links", "partner_id, cnpj_basico, qualificacao, CAST(data_entrada AS VARCHAR)"),
        (
            "partner_identities",
            "partner_id, tipo, nome, nome_busca, documento, pais, partner_basico, CAST(companies AS VARCHAR), \
             CAST(first_entry AS VARCHAR)",
        ),
    ] {
        let sql = format!("SELECT {columns} FROM {table} ORDER BY 1, 2, 3, 4");
        let published: Vec<Vec<String>> = client
            .query(&sql.replace(&format!("FROM {table}"), &format!("FROM cnpj.{table}")), &[])
            .unwrap()
            .iter()
            .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i).unwrap_or_default()).collect())
            .collect();
        let built = query(db, &sql);
        assert!(!built.is_empty(), "{table}");
        assert_eq!(published, built, "{table}");
    }
    let indexes: Vec<String> = client
        .query(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'cnpj' \
             AND (tablename LIKE 'partner%' OR tablename = 'socios') \
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    // A partner by id, the links both ways (`partner_links` is a view of socios), and the
    // partners' search (name, order, company).
    assert_eq!(indexes.len(), 6, "{indexes:?}");
    for column in ["partner_id", "cnpj_basico"] {
        assert!(indexes.iter().any(|i| i.contains(&format!("ON cnpj.socios USING btree ({column})"))), "{indexes:?}");
    }
    assert!(indexes.iter().any(|i| i.contains("UNIQUE") && i.contains("partner_identities")), "{indexes:?}");
    assert!(indexes.iter().any(|i| i.contains("gin (nome_busca gin_trgm_ops)")), "{indexes:?}");
}

#[test]
fn postgres_build_swap_rollback_and_failed_publication() {
    let url = pg_database("build");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let schemas = |c: &mut postgres::Client| -> Vec<String> {
        c.query("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'cnpj%' ORDER BY 1", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let served = |c: &mut postgres::Client| -> (String, i64) {
        let month: String =
            c.query_one("SELECT value FROM cnpj.metadata WHERE key = 'source_month'", &[]).unwrap().get(0);
        let n: i64 = c.query_one("SELECT count(*) FROM cnpj.estabelecimentos", &[]).unwrap().get(0);
        (month, n)
    };
    let input = sample_dump();
    let run = etl(&["build", "--quiet", "--input", input.to_str().unwrap(), "--postgres", &url]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(schemas(&mut client), ["cnpj"]);
    let first = served(&mut client);
    assert_eq!(first, ("2026-09".to_owned(), 11));

    let refused = etl(&["rollback", "--postgres", &url]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("nothing to roll back"));

    // A second month: synthetic, published from a kept DuckDB file.
    let dir = tempfile::tempdir().unwrap();
    let synth = dir.path().join("synth");
    let db = dir.path().join("second.duckdb");
    let made = etl(&["synth", "--quiet", "--scale", "0.00002", "--month", "2026-10", "--out", synth.to_str().unwrap()]);
    assert!(made.status.success());
    let run = etl(&[
        "build",
        "--quiet",
        "--input",
        synth.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--postgres",
        &url,
    ]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(schemas(&mut client), ["cnpj", "cnpj_previous"]);
    let second = served(&mut client);
    assert_eq!(second.0, "2026-10");
    check_published_partners(&mut client, &db);
    // The trigram index serves a folded-name filter (seq scans off: the table is tiny here).
    client.batch_execute("SET enable_seqscan = off").unwrap();
    let plans: Vec<String> = client
        .query("EXPLAIN SELECT cnpj FROM cnpj.estabelecimentos WHERE nome_fantasia_fold LIKE '%padaria%'", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(plans.iter().any(|l| l.contains("estabelecimentos_nome_fantasia_trgm")), "{plans:#?}");

    // A dataset that cannot be copied (a column missing): the publication fails, nothing changes.
    let broken = dir.path().join("broken.duckdb");
    std::fs::copy(&db, &broken).unwrap();
    duckdb::Connection::open(&broken).unwrap().execute_batch("ALTER TABLE socios DROP COLUMN pais").unwrap();
    let failed = etl(&["publish", "--quiet", "--db", broken.to_str().unwrap(), "--postgres", &url]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&failed.stderr).contains("socios"), "{}", String::from_utf8_lossy(&failed.stderr));
    assert_eq!(schemas(&mut client), ["cnpj", "cnpj_previous"], "no half-built schema is left");
    assert_eq!(served(&mut client), second);

    let back = etl(&["rollback", "--postgres", &url]);
    assert!(back.status.success(), "{}", String::from_utf8_lossy(&back.stderr));
    assert_eq!(schemas(&mut client), ["cnpj"]);
    assert_eq!(served(&mut client), first);
}

/// Every code of the month's lookup tables (the real extract's and the sample dump's) has a label
/// in every locale, and the en/es labels are translations: never empty, never the Portuguese text
/// itself, but for the proper nouns and acronyms listed here.
#[test]
fn every_lookup_code_is_labelled_in_every_locale() {
    // (locale, table, code) whose label is rightly the Portuguese one, with the reason.
    let listed = std::fs::read_to_string(root().join("data/labels/same-as-pt-br.tsv")).unwrap();
    let same_as_pt: Vec<(String, String, String)> = listed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("locale\t"))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert!(f.len() == 4 && !f[3].is_empty(), "same-as-pt-br.tsv: {l:?}");
            (f[0].to_owned(), f[1].to_owned(), f[2].to_owned())
        })
        .collect();
    let mut inputs = vec![sample_dump()];
    let real = root().join("../shared/rfb/samples/real-extract-2026");
    if real.is_dir() {
        inputs.push(real);
    }
    for input in inputs {
        let built = build(&input);
        assert_eq!(built.report["untranslated"], serde_json::json!([]), "{}", input.display());
        let rows = query(&built.db, "SELECT tabela, codigo, locale, descricao FROM labels ORDER BY ALL");
        let mut by_code: std::collections::BTreeMap<(String, String), Vec<(String, String)>> = Default::default();
        for row in rows {
            by_code.entry((row[0].clone(), row[1].clone())).or_default().push((row[2].clone(), row[3].clone()));
        }
        let mut problems = Vec::new();
        for ((table, code), labels) in &by_code {
            let locales: Vec<&str> = labels.iter().map(|(l, _)| l.as_str()).collect();
            if locales != ["en", "es", "pt-br"] {
                problems.push(format!("{table} {code}: locales {locales:?}"));
                continue;
            }
            let pt = &labels[2].1;
            for (locale, label) in &labels[..2] {
                let listed = same_as_pt.contains(&(locale.clone(), table.clone(), code.clone()));
                if label.is_empty() {
                    problems.push(format!("{table} {code} {locale}: empty"));
                } else if label == pt && !listed {
                    problems.push(format!("{table} {code} {locale}: same as pt-br {pt:?}"));
                } else if label != pt && listed {
                    problems.push(format!("{table} {code} {locale}: listed in same-as-pt-br.tsv but translated"));
                }
            }
        }
        assert!(problems.is_empty(), "{}:\n{}", input.display(), problems.join("\n"));
        let count = |table: &str| by_code.keys().filter(|(t, _)| t == table).count();
        assert_eq!(
            [count("cnaes"), count("naturezas"), count("qualificacoes"), count("motivos"), count("paises")],
            [1359, 91, 68, 63, 255],
            "{}",
            input.display()
        );
    }
}

/// Every detail and batch record (by CNPJ and by base) of a built dataset, as JSON, in order.
fn all_records(db: &Path, lookup_expected: bool) -> Vec<String> {
    use cnpj_model::{CnpjQuery, Locale};
    let store = cnpj_store::Store::open(&cnpj_store::Source::DuckDb(db.to_owned())).unwrap();
    assert_eq!(store.has_lookup_file(), lookup_expected);
    let keys = query(
        db,
        "SELECT cnpj FROM estabelecimentos UNION ALL
         SELECT DISTINCT cnpj_basico FROM (SELECT cnpj_basico FROM estabelecimentos UNION ALL
             SELECT cnpj_basico FROM empresas UNION ALL SELECT cnpj_basico FROM socios UNION ALL
             SELECT cnpj_basico FROM simples)
         ORDER BY 1",
    );
    let mut out = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let Ok(q) = CnpjQuery::parse(&key[0]) else { continue };
        let locale = Locale::ALL[i % Locale::ALL.len()];
        out.push(format!("{}: {}", key[0], serde_json::to_string(&store.detail(&q, locale).unwrap()).unwrap()));
        out.push(format!("{}: {}", key[0], serde_json::to_string(&store.batch(&q, locale).unwrap()).unwrap()));
    }
    out
}

#[test]
fn point_lookups_read_the_lookup_file_and_answer_as_sql_does() {
    let real = root().join("../shared/rfb/samples/real-extract-2026");
    let mut inputs = vec![sample_dump()];
    inputs.extend(real.is_dir().then_some(real));
    for input in inputs {
        let b = build(&input);
        let lookup = cnpj_store::lookup_path(&b.db);
        let with_file = all_records(&b.db, true);
        assert!(with_file.iter().filter(|r| !r.ends_with(": null")).count() > 20, "{}", input.display());
        // Without its lookup file, and with the lookup file of another build, the store runs SQL.
        let aside = lookup.with_extension("aside");
        std::fs::rename(&lookup, &aside).unwrap();
        assert_eq!(all_records(&b.db, false), with_file, "{}", input.display());
        let other = build(&input);
        std::fs::copy(cnpj_store::lookup_path(&other.db), &lookup).unwrap();
        let store = cnpj_store::Store::open(&cnpj_store::Source::DuckDb(b.db.clone())).unwrap();
        assert!(!store.has_lookup_file());
        std::fs::rename(&aside, &lookup).unwrap();
        assert!(cnpj_store::Store::open(&cnpj_store::Source::DuckDb(b.db.clone())).unwrap().has_lookup_file());
    }
}

/// Values to search a built dataset with: those it holds, and some it does not.
struct Pools {
    cnpjs: Vec<String>,
    basicos: Vec<String>,
    cnaes: Vec<String>,
    states: Vec<String>,
    city_ids: Vec<String>,
    cities: Vec<String>,
    portes: Vec<String>,
    natures: Vec<String>,
    situacoes: Vec<String>,
    dates: Vec<String>,
    zips: Vec<String>,
    names: Vec<String>,
    neighborhoods: Vec<String>,
    /// Secondary CNAEs (and a code no one has).
    secondaries: Vec<String>,
    /// Capitals held (in cents, and a cent either side) and round amounts.
    capitals: Vec<u64>,
    /// Partners (of one company and of several), and an id no one has.
    partners: Vec<String>,
}

/// Pieces of `texts`: whole values, words, and cuts that start and end mid-word or span words.
fn pieces(texts: Vec<Vec<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (i, row) in texts.into_iter().enumerate() {
        let text = &row[0];
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            continue;
        }
        out.push(text.clone());
        out.extend(text.split(' ').filter(|w| w.len() > 1).map(str::to_owned));
        // Cut at both ends: within a word, and across two to four words (phrases).
        for (start, len) in [((i * 7) % chars.len(), 1 + (i * 3) % 9), ((i * 5) % chars.len(), 6 + (i * 11) % 22)] {
            out.push(chars[start..(start + len).min(chars.len())].iter().collect());
        }
    }
    out.sort();
    out.dedup();
    out
}

fn pools(db: &Path) -> Pools {
    let column = |sql: &str, extra: &[&str]| {
        let mut values: Vec<String> = query(db, sql).into_iter().map(|r| r[0].clone()).collect();
        values.extend(extra.iter().map(|s| s.to_string()));
        values
    };
    let tricky = [
        "%",
        "_",
        "100%",
        "a_b",
        "São",
        "SAO",
        "ª",
        "1ª",
        "ltda me",
        "comercio de",
        "2020",
        "***.456",
        "-",
        " a",
        "a ",
        "a da s",
        " de ",
        "ia ribeir",
        "a silva silva",
    ];
    let mut names = pieces(query(
        db,
        "SELECT nome_fantasia FROM estabelecimentos UNION ALL SELECT razao_social FROM empresas LIMIT 400",
    ));
    names.extend(tricky.iter().map(|s| s.to_string()));
    let mut neighborhoods = pieces(query(db, "SELECT bairro FROM estabelecimentos LIMIT 200"));
    neighborhoods.extend(tricky.iter().map(|s| s.to_string()));
    Pools {
        cnpjs: column("SELECT cnpj FROM estabelecimentos USING SAMPLE 40 ROWS", &["00000000000191", "12ABC34501DE35"]),
        basicos: column("SELECT DISTINCT cnpj_basico FROM estabelecimentos USING SAMPLE 40 ROWS", &["00000000"]),
        cnaes: column("SELECT DISTINCT cnae_fiscal FROM estabelecimentos", &["9999999"]),
        states: column("SELECT DISTINCT uf FROM estabelecimentos", &["ZZ"]),
        city_ids: column("SELECT DISTINCT municipio FROM estabelecimentos", &["0000"]),
        cities: column(
            "SELECT DISTINCT m.name FROM municipios m JOIN estabelecimentos e ON e.municipio = m.code",
            &["Nowhere", "SAO PAULO", "são paulo"],
        ),
        portes: column("SELECT DISTINCT porte_empresa FROM empresas", &["99"]),
        natures: column("SELECT DISTINCT natureza_juridica FROM empresas", &["0000"]),
        situacoes: column("SELECT DISTINCT situacao_cadastral FROM estabelecimentos", &["99"]),
        dates: column(
            "SELECT DISTINCT CAST(data_inicio_atividade AS VARCHAR) FROM estabelecimentos WHERE data_inicio_atividade IS NOT NULL",
            &["1800-01-01", "1999-12-31", "2000-01-01", "2100-12-31"],
        ),
        zips: {
            let ceps = column("SELECT DISTINCT cep FROM estabelecimentos WHERE cep <> ''", &[]);
            let mut zips: Vec<String> = ceps.iter().enumerate().map(|(i, c)| c[..1 + i % c.len()].to_owned()).collect();
            zips.extend(["9", "0", "99999999"].map(String::from));
            zips
        },
        names,
        neighborhoods,
        secondaries: column(
            "SELECT DISTINCT unnest(cnaes_secundarios) FROM estabelecimentos USING SAMPLE 60 ROWS",
            &["9999999"],
        ),
        partners: column(
            "SELECT partner_id FROM (SELECT partner_id, count(*) AS n FROM partner_links GROUP BY 1) \
             ORDER BY n DESC, partner_id LIMIT 30",
            &["paaaaaaaaaaaaaaaa"],
        ),
        capitals: {
            let held = column(
                "SELECT DISTINCT CAST(capital_social AS VARCHAR) FROM empresas WHERE capital_social >= 0 \
                 USING SAMPLE 60 ROWS",
                &["0.00", "1000.00", "100000.00", "1000000.00", "9999999999999999.99"],
            );
            let cents = held.iter().map(|c| cnpj_model::filter::money(c).expect("an amount"));
            cents.flat_map(|c| [c.saturating_sub(1), c, c + 1]).collect()
        },
    }
}

/// The search index answers every search as SQL does: total, page and records, for several
/// hundred generated combinations of the search filters (a fixed seed), over the sample
/// dump, the real extract and a tiny synthetic month; and a stale index, or one of an earlier
/// format, is not used.
#[test]
fn the_search_index_answers_as_sql_does() {
    use cnpj_model::{CnpjQuery, Locale};
    use cnpj_store::SearchFilters;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let dir = tempfile::tempdir().unwrap();
    let synth = dir.path().join("synth");
    let made = etl(&["synth", "--quiet", "--scale", "0.00005", "--out", synth.to_str().unwrap()]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let real = root().join("../shared/rfb/samples/real-extract-2026");
    let mut inputs = vec![sample_dump(), synth];
    inputs.extend(real.is_dir().then_some(real));
    for input in &inputs {
        let b = build(input);
        let store = cnpj_store::Store::open(&cnpj_store::Source::DuckDb(b.db.clone())).unwrap();
        assert!(store.has_search_index(), "{}", input.display());
        let p = pools(&b.db);
        let pick = |values: &[String]| proptest::option::weighted(0.2, proptest::sample::select(values.to_vec()));
        // A code filter: none, or one to three codes (a list: any of them).
        let codes = |values: &[String]| {
            let list = proptest::collection::vec(proptest::sample::select(values.to_vec()), 1..4);
            proptest::option::weighted(0.2, list).prop_map(Option::unwrap_or_default)
        };
        let capital = || proptest::option::weighted(0.15, proptest::sample::select(p.capitals.clone()));
        let flag = || proptest::option::weighted(0.15, any::<bool>());
        let filters = (
            (pick(&p.cnpjs), pick(&p.basicos), codes(&p.cnaes), codes(&p.states), codes(&p.city_ids), pick(&p.cities)),
            (codes(&p.portes), codes(&p.natures), codes(&p.situacoes), pick(&p.dates), pick(&p.dates), pick(&p.zips)),
            (pick(&p.names), pick(&p.neighborhoods), 1u64..5, 1u64..51, any::<bool>()),
            (codes(&p.secondaries), capital(), capital(), (flag(), flag(), flag(), flag(), flag()), pick(&p.partners)),
        );
        let mut runner = TestRunner::new_with_rng(
            Config { cases: 300, failure_persistence: None, ..Config::default() },
            proptest::test_runner::TestRng::deterministic_rng(proptest::test_runner::RngAlgorithm::ChaCha),
        );
        let nonempty = std::cell::Cell::new(0);
        runner
            .run(
                &filters,
                |(
                    (cnpj, basico, cnae, state, city_id, city),
                    (porte, nature, situacao, from, to, zip),
                    (name, hood, page, per_page, far),
                    (
                        any_sector,
                        capital_from,
                        capital_to,
                        (has_email, has_phone, simples, mei, head_office),
                        partner_id,
                    ),
                )| {
                    let f = SearchFilters {
                        cnpj: cnpj.or(basico).map(|c| CnpjQuery::parse(&c).unwrap()),
                        business_sector: cnae,
                        city_id,
                        city,
                        state,
                        porte,
                        opening_from: from,
                        opening_to: to,
                        trading_name: name,
                        neighborhood: hood,
                        zip_prefix: zip,
                        nature_code: nature,
                        situacao,
                        any_sector,
                        capital_from,
                        capital_to,
                        has_email,
                        has_phone,
                        simples,
                        mei,
                        head_office,
                        partner_id,
                    };
                    let page = if far { page * 1000 } else { page };
                    let sql = store.search_by_sql(&f, page, per_page, Locale::En).unwrap();
                    // Only a term without a word character is beyond the index.
                    let Some(indexed) = store.search_by_index(&f, page, per_page, Locale::En).unwrap() else {
                        let wordless =
                            |t: &Option<String>| t.as_ref().is_some_and(|t| !t.chars().any(char::is_alphanumeric));
                        prop_assert!(wordless(&f.trading_name) || wordless(&f.neighborhood), "{:?}", f);
                        return Ok(());
                    };
                    nonempty.set(nonempty.get() + usize::from(indexed.0 > 0));
                    prop_assert_eq!(indexed.0, sql.0, "total of {:?}", f);
                    prop_assert_eq!(store.search_count(&f).unwrap(), sql.0, "count of {:?}", f);
                    prop_assert_eq!(
                        serde_json::to_string(&indexed.1).unwrap(),
                        serde_json::to_string(&sql.1).unwrap(),
                        "page {} of {:?}",
                        page,
                        f
                    );
                    Ok(())
                },
            )
            .unwrap();
        assert!(nonempty.get() > 20, "{}: only {} searches found anything", input.display(), nonempty.get());
        // No filter at all, and each pool's text alone, all pages of 50.
        let mut singles: Vec<SearchFilters> = vec![SearchFilters::default()];
        singles.extend(p.names.iter().map(|t| SearchFilters { trading_name: Some(t.clone()), ..Default::default() }));
        singles.extend(
            p.neighborhoods.iter().map(|t| SearchFilters { neighborhood: Some(t.clone()), ..Default::default() }),
        );
        // Each new filter alone: every flag both ways, each capital as either bound, and the
        // secondary activities one at a time.
        for value in [true, false] {
            singles.extend([
                SearchFilters { has_email: Some(value), ..Default::default() },
                SearchFilters { has_phone: Some(value), ..Default::default() },
                SearchFilters { simples: Some(value), ..Default::default() },
                SearchFilters { mei: Some(value), ..Default::default() },
                SearchFilters { head_office: Some(value), ..Default::default() },
            ]);
        }
        for &c in p.capitals.iter().step_by(7) {
            singles.push(SearchFilters { capital_from: Some(c), ..Default::default() });
            singles.push(SearchFilters { capital_to: Some(c), ..Default::default() });
            singles.push(SearchFilters { capital_from: Some(c), capital_to: Some(c * 3 + 1), ..Default::default() });
        }
        singles
            .extend(p.secondaries.iter().map(|c| SearchFilters { any_sector: vec![c.clone()], ..Default::default() }));
        for f in &singles {
            for page in [1, 2, 40] {
                let indexed = store.search(f, page, 50, Locale::PtBr).unwrap();
                let sql = store.search_by_sql(f, page, 50, Locale::PtBr).unwrap();
                let text = f.trading_name.iter().chain(&f.neighborhood).next();
                if text.is_none_or(|t| t.chars().any(char::is_alphanumeric)) {
                    assert!(store.search_by_index(f, page, 50, Locale::PtBr).unwrap().is_some(), "{f:?}");
                }
                assert_eq!(indexed.0, sql.0, "{f:?}");
                assert_eq!(indexed.1, sql.1, "{f:?} page {page}");
                assert_eq!(store.search_count(f).unwrap(), sql.0, "count of {f:?}");
            }
        }
    }
    // An index of another build is not used: searches run by SQL, with the same answers.
    let (a, other) = (build(&inputs[0]), build(&inputs[0]));
    std::fs::copy(cnpj_store::search_index_path(&other.db), cnpj_store::search_index_path(&a.db)).unwrap();
    let store = cnpj_store::Store::open(&cnpj_store::Source::DuckDb(a.db.clone())).unwrap();
    assert!(!store.has_search_index() && store.has_lookup_file());
    let f = SearchFilters { state: vec!["SP".into()], ..Default::default() };
    assert!(store.search(&f, 1, 20, Locale::PtBr).unwrap().0 > 0);
    // Nor is an index of the same build in an earlier format (its magic, at both ends).
    let open = || cnpj_store::Store::open(&cnpj_store::Source::DuckDb(other.db.clone())).unwrap();
    assert!(open().has_search_index());
    let path = cnpj_store::search_index_path(&other.db);
    let mut bytes = std::fs::read(&path).unwrap();
    let end = bytes.len() - 8;
    for at in [0, end] {
        bytes[at..at + 8].copy_from_slice(b"CNPJSRC5");
    }
    std::fs::write(&path, bytes).unwrap();
    let store = open();
    assert!(!store.has_search_index() && store.has_lookup_file());
    assert_eq!(store.search(&f, 1, 20, Locale::PtBr).unwrap(), store.search_by_sql(&f, 1, 20, Locale::PtBr).unwrap());
}
