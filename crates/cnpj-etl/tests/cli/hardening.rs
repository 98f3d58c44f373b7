//! Hostile and incomplete input (issue 19): each case is a real month (the sample dump, altered in a
//! temporary folder with real zips) built by the real `cnpj-etl` into a real DuckDB file, and the
//! test says what must become of it.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::{build_in, etl, first_member, latin1, query, real_extract, sample_copy, sample_dump, text, write_zip};

/// A build that must fail (exit 1) and leave no dataset: its error text.
fn refused(input: &Path, dir: &Path, extra: &[&str]) -> String {
    let db = dir.join("refused.duckdb");
    let mut args = vec!["build", "--quiet", "--input", input.to_str().unwrap(), "--db", db.to_str().unwrap()];
    args.extend(extra);
    let out = etl(&args);
    assert_eq!(out.status.code(), Some(1), "the build must fail: {}", text(&out));
    assert!(!db.exists(), "a refused build wrote {}", db.display());
    text(&out)
}

/// `show` of a CNPJ: the record.
fn show(db: &Path, cnpj: &str) -> Value {
    serde_json::from_str(&crate::show(db, "pt-br", cnpj)).unwrap()
}

/// A valid CNPJ of a base and order (its two check digits computed).
fn cnpj(base_and_order: &str) -> String {
    let mut digits: Vec<u32> = base_and_order.bytes().map(|b| u32::from(b) - 48).collect();
    for weights in [&[5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2][..], &[6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]] {
        let sum: u32 = digits.iter().zip(weights).map(|(d, w)| d * w).sum();
        digits.push(if sum % 11 < 2 { 0 } else { 11 - sum % 11 });
    }
    digits.iter().map(|d| char::from_digit(*d, 10).unwrap()).collect()
}

/// An Estabelecimentos line (30 fields) of a head office.
fn establishment(cnpj: &str, nome_fantasia: &str) -> String {
    let mut fields = vec![String::new(); 30];
    fields[0] = cnpj[..8].into();
    fields[1] = cnpj[8..12].into();
    fields[2] = cnpj[12..].into();
    fields[3] = "1".into();
    fields[4] = nome_fantasia.into();
    fields[5] = "02".into();
    fields[11] = "6204000".into();
    fields[19] = "SP".into();
    fields[20] = "7107".into();
    fields.iter().map(|f| format!("\"{f}\"")).collect::<Vec<_>>().join(";") + "\n"
}

#[test]
fn huge_record_is_a_reject_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let zip = input.join("Empresas1.zip");
    let (member, mut bytes) = first_member(&zip);
    assert!(bytes.ends_with(b"\n"));
    let line = bytes.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    bytes.extend(b"\"12121212\";\"");
    bytes.extend(std::iter::repeat_n(b'X', 2 << 20));
    bytes.extend(b"\";\"2062\";\"49\";\"1,00\";\"01\";\"\"\n");
    write_zip(&zip, &member, &bytes);

    let b = build_in(&input, dir.path(), &[]);
    let rejects = query(
        &b.db,
        "SELECT r.line::VARCHAR, r.reason, length(r.record)::VARCHAR FROM rejects r \
         JOIN source_files f ON f.id = r.source_file WHERE f.zip = 'Empresas1.zip' AND r.reason LIKE '%cap%'",
    );
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    assert_eq!(rejects[0][0], line.to_string());
    assert_eq!(
        rejects[0][1],
        format!("record of {} bytes is over the 1048576-byte cap (kept: its beginning)", (2 << 20) + 8 + 4 + 2 + 4 + 2)
    );
    assert!(rejects[0][2].parse::<u64>().unwrap() <= 1025, "{rejects:?}");
    assert_eq!(query(&b.db, "SELECT count(*)::VARCHAR FROM empresas WHERE cnpj_basico = '12121212'"), [["0"]]);

    // With a cap above it, the record is an ordinary row.
    let wide = tempfile::tempdir().unwrap();
    let b = build_in(&input, wide.path(), &["--max-record-bytes", "4194304"]);
    assert_eq!(
        query(&b.db, "SELECT length(razao_social)::VARCHAR FROM empresas WHERE cnpj_basico = '12121212'"),
        [[(2 << 20).to_string()]]
    );
}

#[test]
fn member_of_only_newlines_is_refused_as_a_zip_bomb() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let zip = input.join("Estabelecimentos10.zip");
    let (member, _) = first_member(&zip);
    write_zip(&zip, &member, &vec![b'\n'; 24 << 20]);
    let err = refused(&input, dir.path(), &[]);
    assert!(err.contains("Estabelecimentos10.zip") && err.contains("refused as a zip bomb"), "{err}");
}

#[test]
fn incomplete_month_is_refused_naming_every_problem_of_its_folder_and_lookups() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    write_zip(&input.join("Municipios.zip"), "F.K03200$Z.D60913.MUNICCSV", b"");
    zip::ZipWriter::new(std::fs::File::create(input.join("Naturezas.zip")).unwrap()).finish().unwrap();
    std::fs::create_dir(input.join("Estabelecimentos5.zip")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere.zip"), input.join("Socios1.zip")).unwrap();
    let (_, socios) = first_member(&input.join("Socios0.zip"));
    write_zip(&input.join("Socios2.zip"), "K3241.K03200Y2.D60913.SOCIOCSV", &socios);

    let err = refused(&input, dir.path(), &[]);
    for problem in [
        "not one whole month of one delivery (7 problems)",
        "Estabelecimentos5.zip is a directory, not a zip file",
        "Naturezas.zip is a zip without any member",
        "Socios1.zip is a dangling symbolic link",
        "missing required tables: naturezas",
        "socios: part 1 missing (parts 0, 2 present)",
        "Municipios.zip (F.K03200$Z.D60913.MUNICCSV) has no rows",
        "the lookup table municipios is empty",
        "--accept-incomplete",
    ] {
        assert!(err.contains(problem), "{problem:?} not in {err}");
    }
}

#[test]
fn incomplete_month_is_refused_naming_every_problem_of_its_main_tables() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    // UTF-8 where Latin-1 is expected.
    let utf8 = "\"13131313\";\"JOSÉ DA CONCEIÇÃO ME\";\"2135\";\"50\";\"1000,00\";\"01\";\"\"\n\
                \"14141414\";\"PADARIA SÃO JOÃO\";\"2062\";\"49\";\"0,00\";\"01\";\"\"\n";
    write_zip(&input.join("Empresas1.zip"), "K3241.K03200Y1.D60913.EMPRECSV", utf8.as_bytes());
    // 12 rejects in 62 rows.
    let mut simples = String::new();
    for i in 0..50 {
        simples.push_str(&format!("\"{:08}\";\"S\";\"20200101\";\"\";\"N\";\"\";\"\"\n", 50_000_000 + i));
    }
    for i in 0..12 {
        simples.push_str(&format!("\"{:08}\";\"S\";\"20200101\"\n", 60_000_000 + i));
    }
    write_zip(&input.join("Simples.zip"), "F.K03200$W.SIMPLES.CSV.D60913", simples.as_bytes());
    // A member without rows.
    write_zip(&input.join("Estabelecimentos10.zip"), "K3241.K03200Y1.D60913.ESTABELE", b"\n\n");
    // A member in UTF-16: every row rejected.
    let (member, socios) = first_member(&input.join("Socios0.zip"));
    let utf16: Vec<u8> = socios.iter().flat_map(|&b| [b, 0]).collect();
    write_zip(&input.join("Socios0.zip"), &member, &utf16);

    let err = refused(&input, dir.path(), &[]);
    for problem in [
        "(4 problems)",
        "Socios0.zip (K3241.K03200Y0.D60913.SOCIOCSV) is 50 % NUL bytes (UTF-16, or not text at all)",
        "Empresas1.zip (K3241.K03200Y1.D60913.EMPRECSV) reads as UTF-8 (5 multi-byte sequences), not Latin-1",
        "Simples.zip (F.K03200$W.SIMPLES.CSV.D60913): 12 of 62 rows rejected (19.4 %, more than 1 %",
        "Estabelecimentos10.zip (K3241.K03200Y1.D60913.ESTABELE) has no rows",
    ] {
        assert!(err.contains(problem), "{problem:?} not in {err}");
    }
}

#[test]
fn incomplete_month_builds_with_accept_incomplete_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    write_zip(&input.join("Municipios.zip"), "F.K03200$Z.D60913.MUNICCSV", b"");
    let (_, socios) = first_member(&input.join("Socios0.zip"));
    write_zip(&input.join("Socios2.zip"), "K3241.K03200Y2.D60913.SOCIOCSV", &socios);
    let b = build_in(&input, dir.path(), &["--accept-incomplete"]);
    let warnings: Vec<&str> = b.report["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert_eq!(
        warnings,
        [
            "fewer parts than the 10 (0-9) the RFB ships of each numbered table: empresas 0–1, estabelecimentos \
             0–1, socios 0, 2 (a month cut short at its last part is told only by the downloader's manifest.json)",
            "socios: part 1 missing (parts 0, 2 present)",
            "Municipios.zip (F.K03200$Z.D60913.MUNICCSV) has no rows",
            "the lookup table municipios is empty"
        ]
    );
    // The municipalities the month lacks are served from the project's copy.
    assert_eq!(query(&b.db, "SELECT count(*)::VARCHAR FROM municipios"), [["5572"]]);
    assert_eq!(show(&b.db, "11222333000181")["endereco"]["municipio_nome"], "SAO PAULO");
}

#[test]
fn stale_member_of_another_delivery_is_refused_or_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    // A leftover of August: it sorts before Empresas0.zip, so its rows would win.
    let (_, empresas) = first_member(&input.join("Empresas0.zip"));
    let old = latin1(&empresas.iter().map(|&b| char::from(b)).collect::<String>().replace("EXEMPLO", "EXEMPLO ANTIGO"));
    write_zip(&input.join("Empresas0 (old).zip"), "K3241.K03200Y0.D60813.EMPRECSV", &old);

    let err = refused(&input, dir.path(), &[]);
    assert!(
        err.contains(
            "Empresas0 (old).zip (K3241.K03200Y0.D60813.EMPRECSV): date stamp D60813 differs from the other main \
             tables' D60913"
        ),
        "{err}"
    );
    assert!(err.contains("empresas part 0 is given twice: Empresas0 (old).zip"), "{err}");
    assert!(err.contains("--ignore-stale"), "{err}");

    let b = build_in(&input, dir.path(), &["--ignore-stale"]);
    let warnings = b.report["warnings"].to_string();
    assert!(warnings.contains("Empresas0 (old).zip (K3241.K03200Y0.D60813.EMPRECSV) left out"), "{warnings}");
    assert!(!b.report["files"].to_string().contains("(old)"));
    let record = show(&b.db, "11222333000181");
    assert!(!record["razao_social"].as_str().unwrap().contains("ANTIGO"), "{record}");
}

#[test]
fn outputs_are_checked_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    let input = sample_dump();
    let input = input.to_str().unwrap();
    let ok = etl(&["build", "--quiet", "--input", input, "--db", db.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", text(&ok));
    let before = std::fs::read(&db).unwrap();

    // A report in a folder that does not exist: refused before the build, the dataset untouched.
    let report = dir.path().join("no-such-folder/report.json");
    let out = etl(&[
        "build",
        "--quiet",
        "--input",
        input,
        "--db",
        db.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("--report") && text(&out).contains("does not exist"), "{}", text(&out));
    assert_eq!(std::fs::read(&db).unwrap(), before);
    // A report path that is a folder.
    let out = etl(&[
        "build",
        "--quiet",
        "--input",
        input,
        "--db",
        db.to_str().unwrap(),
        "--report",
        dir.path().to_str().unwrap(),
    ]);
    assert!(text(&out).contains("is a folder, not a file"), "{}", text(&out));
    // A dataset in a folder that does not exist.
    let out = etl(&["build", "--quiet", "--input", input, "--db", dir.path().join("nope/x.duckdb").to_str().unwrap()]);
    assert!(text(&out).contains("--db") && text(&out).contains("does not exist"), "{}", text(&out));
    // `run`: a work folder that cannot be made, before any download (the server does not exist).
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let work = file.join("work");
    let out = etl(&[
        "run",
        "--quiet",
        "--month",
        "2026-09",
        "--work",
        work.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--legacy",
        "--base-url",
        "http://127.0.0.1:9",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("--work") && text(&out).contains("cannot create it"), "{}", text(&out));
    let out = etl(&[
        "run",
        "--quiet",
        "--month",
        "2026-09",
        "--work",
        dir.path().join("work").to_str().unwrap(),
        "--db",
        dir.path().join("nope/x.duckdb").to_str().unwrap(),
        "--legacy",
        "--base-url",
        "http://127.0.0.1:9",
    ]);
    assert!(text(&out).contains("--db") && text(&out).contains("does not exist"), "{}", text(&out));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn abandoned_lookup_writing_file_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("registry.duckdb");
    let dead = dir.path().join("registry.duckdb.lookup.writing-4000000");
    let other_ext = dir.path().join("registry.duckdb.report.writing-4000001");
    let building = dir.path().join(".registry.duckdb.building-4000002.runs");
    // Process 1 is alive: its file is not touched.
    let alive = dir.path().join("registry.duckdb.lookup.writing-1");
    std::fs::write(&dead, b"half a lookup file").unwrap();
    std::fs::write(&other_ext, b"x").unwrap();
    std::fs::create_dir(&building).unwrap();
    std::fs::write(&alive, b"x").unwrap();
    let ok = etl(&["build", "--quiet", "--input", sample_dump().to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(!dead.exists() && !other_ext.exists() && !building.exists());
    assert!(alive.exists());
}

#[test]
fn cr_only_file_rejects_say_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let mut lines: Vec<String> = (1..=11)
        .map(|i| {
            format!(
                "\"11222333\";\"2\";\"SOCIO {i}\";\"***456789**\";\"49\";\"20200101\";\"\";\"***000000**\";\"\";\"00\";\"5\""
            )
        })
        .collect();
    lines[9] = "\"11222333\";\"2\";\"CURTO\";\"***456789**\";\"49\"".into();
    write_zip(&input.join("Socios0.zip"), "K3241.K03200Y0.D60913.SOCIOCSV", (lines.join("\r") + "\r").as_bytes());
    let b = build_in(&input, dir.path(), &[]);
    let rejects = query(
        &b.db,
        "SELECT r.line::VARCHAR, r.reason FROM rejects r JOIN source_files f ON f.id = r.source_file \
         WHERE f.zip = 'Socios0.zip'",
    );
    assert_eq!(rejects, [["10", "expected 11 fields, found 5"]]);
}

#[test]
fn damage_in_the_first_deflate_block_is_near_line_1_and_causes_print_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let zip = input.join("Estabelecimentos2.zip");
    let mut bytes = std::fs::read(&zip).unwrap();
    // The first byte of the deflate stream: after the local header and its name and extra field.
    let name = u16::from_le_bytes([bytes[26], bytes[27]]) as usize;
    let extra = u16::from_le_bytes([bytes[28], bytes[29]]) as usize;
    bytes[30 + name + extra] ^= 0xFF;
    bytes[31 + name + extra] ^= 0xFF;
    std::fs::write(&zip, &bytes).unwrap();
    let err = refused(&input, dir.path(), &[]);
    assert!(err.contains("Estabelecimentos2.zip") && err.contains("damaged near line 1"), "{err}");
    assert!(!err.contains("line 0"), "{err}");

    // Not a zip: the zip library's cause is printed once.
    std::fs::write(&zip, b"<html>503</html>").unwrap();
    let err = refused(&input, dir.path(), &[]);
    assert_eq!(err.matches("Could not find EOCD").count(), 1, "{err}");
}

#[test]
fn out_of_space_says_no_space_left_on_device() {
    // A 3 MB file system of its own; mounting needs privileges, which CI's container has.
    let dir = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=3m", "tmpfs", dir.path().to_str().unwrap()])
        .output()
        .is_ok_and(|o| o.status.success());
    if !mounted {
        eprintln!("skipping: cannot mount a small tmpfs here");
        return;
    }
    let db = dir.path().join("registry.duckdb");
    let out = etl(&["build", "--quiet", "--input", sample_dump().to_str().unwrap(), "--db", db.to_str().unwrap()]);
    let _ = Command::new("umount").arg(dir.path()).status();
    let err = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let expected = format!("no space left on device in {} (", dir.path().display());
    assert!(err.contains(&expected) && err.contains(" free)"), "{err}");
    assert!(!err.contains("Unknown error code"), "{err}");
}

#[test]
fn capital_over_16_digits_is_counted_and_thousands_separators_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let rows = "\"31313131\";\"CAPITAL COM MILHAR\";\"2062\";\"49\";\"1.000,00\";\"01\";\"\"\n\
                \"32323232\";\"CAPITAL GRANDE DEMAIS\";\"2062\";\"49\";\"12345678901234567,00\";\"01\";\"\"\n";
    write_zip(&input.join("Empresas2.zip"), "K3241.K03200Y2.D60913.EMPRECSV", rows.as_bytes());
    let b = build_in(&input, dir.path(), &[]);
    assert_eq!(
        query(
            &b.db,
            "SELECT cnpj_basico, coalesce(capital_social::VARCHAR, 'null') FROM empresas WHERE cnpj_basico IN ('31313131', '32323232') ORDER BY 1"
        ),
        [["31313131", "1000.00"], ["32323232", "null"]]
    );
    assert_eq!(
        b.report["capital_not_loaded"],
        serde_json::json!([{
            "zip": "Empresas2.zip",
            "member": "K3241.K03200Y2.D60913.EMPRECSV",
            "reason": "more than 16 digits before the comma",
            "rows": 1,
            "examples": [{"line": 2, "value": "12345678901234567,00"}]
        }])
    );
}

/// Every CPF shape (11 digits, or 3-3-3-2 with `.`, `-` or a space between groups) not inside a
/// longer run of digits: written independently of the normalizer's own matcher.
fn unmasked_cpfs(text: &str) -> Vec<String> {
    static CPF: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?:^|[^0-9])([0-9]{3}[.\- ]?[0-9]{3}[.\- ]?[0-9]{3}[.\- ]?[0-9]{2})(?:[^0-9]|$)").unwrap()
    });
    CPF.captures_iter(text).map(|c| c[1].to_owned()).collect()
}

/// Every served text of a dataset: each detail record (JSON) by CNPJ and by base, and every text
/// column of the served tables.
fn served_texts(db: &Path) -> Vec<String> {
    use cnpj_model::{CnpjQuery, Locale};
    let store = cnpj_store::Store::open(&cnpj_store::Source::DuckDb(db.to_owned())).unwrap();
    let keys = query(db, "SELECT cnpj FROM estabelecimentos UNION SELECT cnpj_basico FROM empresas ORDER BY 1");
    let mut out = Vec::new();
    for key in keys {
        let Ok(q) = CnpjQuery::parse(&key[0]) else { continue };
        if let Some(record) = store.detail(&q, Locale::PtBr).unwrap() {
            out.push(serde_json::to_string(&record).unwrap());
        }
    }
    let conn = duckdb::Connection::open(db).unwrap();
    let strings = |sql: &str| -> Vec<String> {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, Option<String>>(0)).unwrap();
        rows.map(|r| r.unwrap().unwrap_or_default()).collect()
    };
    for table in ["empresas", "estabelecimentos", "socios", "simples", "regimes_tributarios", "municipios", "labels"] {
        let columns = strings(&format!(
            "SELECT column_name FROM information_schema.columns WHERE table_name = '{table}' AND data_type = 'VARCHAR'"
        ));
        assert!(!columns.is_empty(), "{table}");
        for column in columns {
            out.extend(strings(&format!("SELECT \"{column}\" FROM {table}")));
        }
    }
    out
}

#[test]
fn cpf_in_names_and_punctuated_forms_are_masked_and_no_served_text_holds_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    write_zip(
        &input.join("Empresas2.zip"),
        "K3241.K03200Y2.D60913.EMPRECSV",
        b"\"41414141\";\"JOAO 123 456 789 09\";\"2135\";\"50\";\"1000,00\";\"01\";\"\"\n",
    );
    let head_office = cnpj("414141410001");
    write_zip(
        &input.join("Estabelecimentos11.zip"),
        "K3241.K03200Y2.D60913.ESTABELE",
        establishment(&head_office, "LOJA 111.222.333-44").as_bytes(),
    );
    let partners = "\"41414141\";\"2\";\"FULANO 11122233344\";\"***222333**\";\"49\";\"20200101\";\"\";\"***123456**\";\"BELTRANO 123.456.789-09\";\"05\";\"0\"\n\
                    \"41414141\";\"1\";\"HOLDING 987654321-00 LTDA\";\"44555666000181\";\"22\";\"20200101\";\"\";\"***000000**\";\"\";\"00\";\"0\"\n";
    write_zip(&input.join("Socios1.zip"), "K3241.K03200Y1.D60913.SOCIOCSV", partners.as_bytes());
    let b = build_in(&input, dir.path(), &[]);
    let record = show(&b.db, &head_office);
    assert_eq!(record["razao_social"], "JOAO ***.456.789-**");
    assert_eq!(record["nome_fantasia"], "LOJA ***.222.333-**");
    let names: Vec<&str> = record["socios"].as_array().unwrap().iter().map(|s| s["nome"].as_str().unwrap()).collect();
    assert_eq!(names, ["FULANO ***.222.333-**", "HOLDING ***.654.321-** LTDA"]);
    assert_eq!(
        query(&b.db, "SELECT nome_representante FROM socios WHERE cnpj_basico = '41414141' AND tipo = '2'"),
        [["BELTRANO ***.456.789-**"]]
    );

    // The scan finds a CPF where there is one…
    assert_eq!(
        unmasked_cpfs("A 123.456.789-09; B 12345678909, C 123 456 789 09"),
        ["123.456.789-09", "12345678909", "123 456 789 09"]
    );
    assert!(unmasked_cpfs("***.456.789-** 11222333000181 01310-100").is_empty());
    // …and none in what the test datasets serve.
    let mut datasets = vec![b.db.clone()];
    let plain = tempfile::tempdir().unwrap();
    datasets.push(build_in(&sample_dump(), plain.path(), &[]).db);
    let real = tempfile::tempdir().unwrap();
    datasets.extend(real_extract().map(|input| build_in(&input, real.path(), &[]).db));
    for db in datasets {
        let texts = served_texts(&db);
        assert!(texts.len() > 100, "{}: {} texts", db.display(), texts.len());
        let found: Vec<(String, String)> =
            texts.iter().flat_map(|t| unmasked_cpfs(t).into_iter().map(move |c| (c, t.clone()))).collect();
        assert!(found.is_empty(), "{}: {found:?}", db.display());
    }
}

/// Found by the mutation fuzzer (seed 19, case 20, a truncated member): a member that ends inside
/// a quoted field loaded its last record with that field cut (Cnaes: half a label, as if whole).
/// The record is a reject now, with its line.
#[test]
fn truncated_member_cut_inside_a_quoted_field_is_a_reject() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let zip = input.join("Cnaes.zip");
    let (member, bytes) = first_member(&zip);
    let head = b"\"4912402\";\"Transporte ferrovi";
    let cut = bytes.windows(head.len()).position(|w| w == head).unwrap() + head.len();
    write_zip(&zip, &member, &bytes[..cut]);
    let b = build_in(&input, dir.path(), &[]);
    assert_eq!(
        query(
            &b.db,
            "SELECT r.line::VARCHAR, r.reason, r.record FROM rejects r JOIN source_files f ON f.id = r.source_file \
             WHERE f.zip = 'Cnaes.zip'"
        ),
        [["900", "the member ends inside this record (cut short)", "\"4912402\";\"Transporte ferrovi\""]]
    );
    assert_eq!(query(&b.db, "SELECT count(*)::VARCHAR FROM labels WHERE descricao LIKE '%ferrovi'"), [["0"]]);
    let cnaes = b.report["files"].as_array().unwrap().iter().find(|f| f["zip"] == "Cnaes.zip").unwrap();
    assert_eq!(
        (&cnaes["rows_read"], &cnaes["rows_loaded"], &cnaes["rows_rejected"]),
        (&900.into(), &899.into(), &1.into())
    );
}

/// Found by the mutation fuzzer (seed 7, case 284, a truncated member): a member that ends right
/// after a delimiter loaded its last record with an empty last field (Naturezas: legal nature
/// 4090 without its label). The record is a reject now.
#[test]
fn truncated_member_cut_after_a_delimiter_is_a_reject() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let zip = input.join("Naturezas.zip");
    let (member, bytes) = first_member(&zip);
    let head = b"\"4090\";";
    let cut = bytes.windows(head.len()).position(|w| w == head).unwrap() + head.len();
    write_zip(&zip, &member, &bytes[..cut]);
    // Cut to 7 of its 91 codes, the table is cut short (issue 29): built anyway, with the project's
    // labels for the codes it lacks.
    let b = build_in(&input, dir.path(), &["--accept-incomplete"]);
    assert_eq!(
        query(
            &b.db,
            "SELECT r.line::VARCHAR, r.reason, r.record FROM rejects r JOIN source_files f ON f.id = r.source_file \
             WHERE f.zip = 'Naturezas.zip'"
        ),
        [["8", "the member ends inside this record (cut short)", "\"4090\";\"\""]]
    );
    assert_eq!(
        query(
            &b.db,
            "SELECT count(*)::VARCHAR FROM labels WHERE codigo = '4090' AND locale = 'pt-br' AND descricao = ''"
        ),
        [["0"]]
    );
}

/// A zip of one entry and a second entry of the same name holding `second`: written under a
/// placeholder name of the same length, then renamed (the zip library writes no two entries of
/// one name).
fn write_twins(path: &Path, member: &str, first: &[u8], second: &[u8]) {
    let placeholder = "~".repeat(member.len());
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in [(member, first), (placeholder.as_str(), second)] {
        w.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
        std::io::Write::write_all(&mut w, bytes).unwrap();
    }
    let mut raw = w.finish().unwrap().into_inner();
    while let Some(at) = raw.windows(member.len()).position(|w| w == placeholder.as_bytes()) {
        raw[at..at + member.len()].copy_from_slice(member.as_bytes());
    }
    std::fs::write(path, raw).unwrap();
}

/// Issue 29: a zip holding two members of one name (the whole member then half of it, or two
/// identical copies) is refused: only one of them would be read.
#[test]
fn two_members_under_one_name_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let zip = input.join("Estabelecimentos2.zip");
    let (member, bytes) = first_member(&zip);
    for second in [&bytes[..bytes.len() / 2], &bytes[..]] {
        write_twins(&zip, &member, &bytes, second);
        let err = refused(&input, dir.path(), &[]);
        assert!(err.contains(&format!("Estabelecimentos2.zip: two members are named {member}")), "{err}");
    }
}

/// The member of `zip` with only the records `keep` says to keep.
fn filter_records(zip: &Path, keep: impl Fn(usize, &[u8]) -> bool) {
    let (member, bytes) = first_member(zip);
    let kept: Vec<&[u8]> =
        bytes.split_inclusive(|&b| b == b'\n').enumerate().filter(|(i, line)| keep(*i, line)).map(|(_, l)| l).collect();
    write_zip(zip, &member, &kept.concat());
}

/// Issue 29: a lookup table that lacks most of the codes of the project's copy is cut short:
/// refused (Cnaes down to one row, Municipios cut mid-line), or built with `--accept-incomplete`;
/// the codes a table lacks are served with the project's labels, in every locale.
#[test]
fn a_lookup_table_cut_short_is_refused_and_the_codes_it_lacks_keep_their_labels() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let cnaes = input.join("Cnaes.zip");
    let whole = std::fs::read(&cnaes).unwrap();
    filter_records(&cnaes, |i, _| i == 0);
    let municipios = input.join("Municipios.zip");
    let (member, bytes) = first_member(&municipios);
    write_zip(&municipios, &member, &bytes[..bytes.len() * 35 / 100]);
    let err = refused(&input, dir.path(), &[]);
    for problem in [
        "the lookup table cnaes of Cnaes.zip (F.K03200$Z.D60913.CNAECSV) holds 1 of the 1359 codes the project \
         knows, 1358 of them missing: cut short?",
        "the lookup table municipios of Municipios.zip (F.K03200$Z.D60913.MUNICCSV) holds 19",
        "--accept-incomplete",
    ] {
        assert!(err.contains(problem), "{problem:?} not in {err}");
    }
    let b = build_in(&input, dir.path(), &["--accept-incomplete"]);
    assert!(b.report["warnings"].to_string().contains("holds 1 of the 1359 codes"), "{}", b.report["warnings"]);
    for (locale, label) in [
        ("pt-br", "Consultoria em tecnologia da informação"),
        ("en", "Information technology consultancy"),
        ("es", "Consultoría en tecnología de la información"),
    ] {
        let record: Value = serde_json::from_str(&crate::show(&b.db, locale, "11222333000181")).unwrap();
        assert_eq!(record["cnae_fiscal_descricao"], label, "{locale}");
        assert_eq!(record["endereco"]["municipio_nome"], "SAO PAULO", "{locale}");
    }
    assert_eq!(
        query(&b.db, "SELECT count(*)::VARCHAR FROM labels WHERE tabela = 'cnaes' AND locale = 'es'"),
        [["1359"]]
    );

    // A few codes missing: a warning, and their labels all the same.
    std::fs::write(&cnaes, whole).unwrap();
    std::fs::copy(sample_dump().join("Municipios.zip"), &municipios).unwrap();
    filter_records(&cnaes, |_, line| !line.starts_with(b"\"6204000\"") && !line.starts_with(b"\"0111301\""));
    let again = tempfile::tempdir().unwrap();
    let b = build_in(&input, again.path(), &[]);
    let warnings = b.report["warnings"].to_string();
    assert!(
        warnings.contains(
            "the lookup table cnaes of Cnaes.zip (F.K03200$Z.D60913.CNAECSV) lacks 2 of the 1359 codes the project \
             knows (0111301, 6204000): they are served from the project's copy of the table"
        ),
        "{warnings}"
    );
    let record = show(&b.db, "11222333000181");
    assert_eq!(record["cnae_fiscal_descricao"], "Consultoria em tecnologia da informação", "{record}");
    assert!(!b.report["unknown_codes"].to_string().contains("6204000"), "{}", b.report["unknown_codes"]);
}

/// Issue 29: a main-table member without a date stamp among stamped ones (last month's rows under
/// an unstamped name) is refused as stale, or left out with `--ignore-stale`.
#[test]
fn a_main_member_without_a_date_stamp_is_refused_as_stale() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let (_, empresas) = first_member(&input.join("Empresas1.zip"));
    write_zip(&input.join("Empresas1.zip"), "K3241.K03200Y1.EMPRECSV", &empresas);
    let err = refused(&input, dir.path(), &["--accept-incomplete"]);
    assert!(
        err.contains(
            "Empresas1.zip (K3241.K03200Y1.EMPRECSV): no date stamp, while the other main tables carry D60913 (a \
             file of another delivery? remove it, or --ignore-stale leaves it out)"
        ),
        "{err}"
    );
    let b = build_in(&input, dir.path(), &["--ignore-stale"]);
    let warnings = b.report["warnings"].to_string();
    assert!(warnings.contains("Empresas1.zip (K3241.K03200Y1.EMPRECSV) left out: it has no date stamp"), "{warnings}");
    assert!(!b.report["files"].to_string().contains("K3241.K03200Y1.EMPRECSV"));
}

/// Issue 29: a numbered series that does not start at part 0 is refused; with the downloader's
/// `manifest.json` beside them, zips missing or altered since they were downloaded are refused;
/// a series shorter than the RFB's ten parts is a warning.
#[test]
fn a_series_without_part_0_and_zips_unlike_their_manifest_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    std::fs::remove_file(input.join("Empresas0.zip")).unwrap();
    let err = refused(&input, dir.path(), &[]);
    assert!(err.contains("empresas: part 0 missing (parts 1 present)"), "{err}");

    // A month as the downloader leaves it: builds, with a warning for its short series.
    let rfb = crate::Rfb::start();
    rfb.publish("2026-09", &sample_dump());
    let month = dir.path().join("downloaded").join("2026-09");
    let month_arg = month.to_str().unwrap();
    let out =
        etl(&["download", "--quiet", "--legacy", "--base-url", &rfb.base, "--month", "2026-09", "--dest", month_arg]);
    assert!(out.status.success(), "{}", text(&out));
    let b = build_in(&month, dir.path(), &[]);
    assert_eq!(
        b.report["warnings"][0],
        "fewer parts than the 10 (0-9) the RFB ships of each numbered table: empresas 0–1, estabelecimentos 0–1, \
         socios 0 (a month cut short at its last part is told only by the downloader's manifest.json)"
    );
    // A zip gone, one altered (same size), one cut short.
    std::fs::remove_file(month.join("Estabelecimentos10.zip")).unwrap();
    let mut socios = std::fs::read(month.join("Socios0.zip")).unwrap();
    let at = socios.len() / 2;
    socios[at] ^= 1;
    std::fs::write(month.join("Socios0.zip"), socios).unwrap();
    let real = month.join("Lucro Real.zip");
    let size = std::fs::metadata(&real).unwrap().len();
    let (member, bytes) = first_member(&real);
    let last = bytes[..bytes.len() - 1].iter().rposition(|&b| b == b'\n').unwrap();
    write_zip(&real, &member, &bytes[..=last]);
    let zipped_again = std::fs::metadata(&real).unwrap().len();
    assert_ne!(zipped_again, size, "its last row gone, zipped again: another size");
    let err = refused(&month, dir.path(), &[]);
    for problem in [
        "Estabelecimentos10.zip is missing: manifest.json lists it as downloaded",
        "Socios0.zip does not have the SHA-256 manifest.json records (altered since downloaded)",
        &format!("Lucro Real.zip is {zipped_again} bytes, manifest.json says {size} (altered since downloaded)"),
    ] {
        assert!(err.contains(problem), "{problem:?} not in {err}");
    }
}

/// Issue 29: `Simples.zip` beside `Simples1.zip` (or any one-file table given twice) is refused,
/// `--accept-incomplete` or not.
#[test]
fn a_second_file_of_a_one_file_table_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    std::fs::copy(input.join("Simples.zip"), input.join("Simples1.zip")).unwrap();
    std::fs::copy(input.join("Motivos.zip"), input.join("Motivos1.zip")).unwrap();
    let err = refused(&input, dir.path(), &["--accept-incomplete"]);
    for problem in [
        "simples is given twice: Simples1.zip (F.K03200$W.SIMPLES.CSV.D60913) and Simples.zip \
         (F.K03200$W.SIMPLES.CSV.D60913)",
        "motivos is given twice: Motivos1.zip (F.K03200$Z.D60913.MOTICSV) and Motivos.zip",
    ] {
        assert!(err.contains(problem), "{problem:?} not in {err}");
    }
}

/// Issue 29: a zip whose directory declares more bytes than its member inflates to is corrupt.
#[test]
fn a_member_shorter_than_its_declared_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let zip = input.join("Socios0.zip");
    let mut bytes = std::fs::read(&zip).unwrap();
    for (signature, offset) in [(&b"PK\x03\x04"[..], 22), (b"PK\x01\x02", 24)] {
        let at = bytes.windows(4).position(|w| w == signature).unwrap() + offset;
        let size = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) + 10_000_000;
        bytes[at..at + 4].copy_from_slice(&size.to_le_bytes());
    }
    std::fs::write(&zip, bytes).unwrap();
    let err = refused(&input, dir.path(), &[]);
    assert!(err.contains("Socios0.zip (K3241.K03200Y0.D60913.SOCIOCSV) is damaged near line"), "{err}");
    assert!(err.contains("10000000 bytes fewer than its declared size: the zip is corrupt"), "{err}");
}

/// Issue 29: a municipality code that is not 1 to 4 digits (`ZZ`) is a reject, with its reason.
#[test]
fn a_municipality_code_that_is_not_one_is_a_reject() {
    let dir = tempfile::tempdir().unwrap();
    let input = sample_copy(dir.path());
    let (good, bad) = (cnpj("515151510001"), cnpj("525252520001"));
    let mut rows = establishment(&good, "MUNICIPIO BOM");
    rows.push_str(&establishment(&bad, "MUNICIPIO ZZ").replace("\"7107\"", "\"ZZ\""));
    write_zip(&input.join("Estabelecimentos11.zip"), "K3241.K03200Y2.D60913.ESTABELE", rows.as_bytes());
    let b = build_in(&input, dir.path(), &[]);
    assert_eq!(
        query(
            &b.db,
            "SELECT r.line::VARCHAR, r.reason FROM rejects r JOIN source_files f ON f.id = r.source_file \
             WHERE f.zip = 'Estabelecimentos11.zip'"
        ),
        [["2", "invalid municipio \"ZZ\": a code of 1 to 4 digits expected"]]
    );
    let loaded = query(&b.db, &format!("SELECT cnpj FROM estabelecimentos WHERE cnpj IN ('{good}', '{bad}')"));
    assert_eq!(loaded, [[good]]);
}
