//! `cnpj-etl export`: the sample dump's dataset written as Parquet (whole and partitioned by
//! state) and CSV, filtered or not, read back by an independent reader (pyarrow for Parquet,
//! Python's `csv` module for CSV, in the interpreter `CNPJ_TEST_PYTHON` names: `scripts/test`
//! sets it to the virtualenv `scripts/setup-test-deps` fills) and compared with the DuckDB tables
//! (counts), the documented types (DATE, DECIMAL, LIST) and `cnpj-etl show` (every
//! establishment's record). Hostile cases: an --out that is not empty or cannot be made, an
//! unknown locale, a missing dataset, one without the views; none leaves anything behind.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::{Built, build, build_in, etl, query, root, sample_dump, show, text};

/// Reads an export back: per table (folder) its row count and column types, and every row of
/// `establishments` by CNPJ and of `companies` by base (values as JSON: dates as ISO text,
/// decimals as text).
const READER: &str = r#"
import csv, datetime, decimal, io, json, os, sys
root, fmt = sys.argv[1], sys.argv[2]
out = {"tables": {}, "establishments": {}, "companies": {}}
def plain(v):
    if isinstance(v, (datetime.date, decimal.Decimal)):
        return str(v)
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v
for table in sorted(os.listdir(root)):
    path = os.path.join(root, table)
    if not os.path.isdir(path):
        continue
    if fmt == "parquet":
        import pyarrow.dataset as ds
        data = ds.dataset(path, format="parquet", partitioning="hive").to_table()
        schema = {f.name: str(f.type) for f in data.schema}
        rows = data.to_pylist()
    else:
        rows, schema = [], {}
        for folder, _, files in sorted(os.walk(path)):
            part = {}
            for piece in os.path.relpath(folder, path).split(os.sep):
                if "=" in piece:
                    k, v = piece.split("=", 1)
                    part[k] = v
            for name in sorted(files):
                with open(os.path.join(folder, name), newline="", encoding="utf-8") as f:
                    lines = f.read()
                    assert lines.endswith("\r\n") and "\n" not in lines.replace("\r\n", ""), "CRLF line ends"
                    reader = csv.reader(io.StringIO(lines, newline=""), strict=True)
                    header = next(reader)
                    schema = {h: "text" for h in header + list(part)}
                    for record in reader:
                        assert len(record) == len(header), record
                        row = dict(zip(header, record))
                        row.update(part)
                        for k in ("cnaes_secundarios", "cnaes_secundarios_descricao"):
                            if row.get(k):
                                row[k] = json.loads(row[k])
                        rows.append(row)
    out["tables"][table] = {"rows": len(rows), "schema": schema}
    if table in ("establishments", "companies"):
        key = "cnpj" if table == "establishments" else "cnpj_basico"
        out[table] = {r[key]: {k: plain(v) for k, v in r.items()} for r in rows}
print(json.dumps(out))
"#;

/// The Python that reads exports back (`CNPJ_TEST_PYTHON`), checked once: it runs and imports
/// pyarrow, or the test fails saying which is missing and how to install it.
fn python() -> &'static str {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        const INSTALL: &str = "scripts/test installs one (scripts/setup-test-deps: a virtualenv in \
                               $HOME/.cache/cnpj-registry/venv); or point CNPJ_TEST_PYTHON at a Python with pyarrow";
        let python = std::env::var("CNPJ_TEST_PYTHON").unwrap_or_else(|_| {
            panic!("CNPJ_TEST_PYTHON is not set: the export tests need a Python with pyarrow. {INSTALL}")
        });
        let check = Command::new(&python).args(["-c", "import pyarrow"]).output();
        let check = check.unwrap_or_else(|e| panic!("CNPJ_TEST_PYTHON={python} cannot be run ({e}). {INSTALL}"));
        assert!(
            check.status.success(),
            "CNPJ_TEST_PYTHON={python} has no pyarrow ({}): `{python} -m pip install pyarrow`, or: {INSTALL}",
            String::from_utf8_lossy(&check.stderr).trim().lines().last().unwrap_or_default()
        );
        python
    })
}

/// The export at `dir` as the independent reader sees it.
fn read_back(dir: &Path, format: &str) -> Value {
    let out = Command::new(python()).args(["-c", READER, dir.to_str().unwrap(), format]).output().unwrap();
    assert!(out.status.success(), "the reader failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs `cnpj-etl export`; returns the manifest it printed, which must be `_manifest.json`.
fn export(db: &Path, out: &Path, args: &[&str]) -> Value {
    let mut all = vec!["export", "--quiet", "--db", db.to_str().unwrap(), "--out", out.to_str().unwrap()];
    all.extend(args);
    let run = etl(&all);
    assert!(run.status.success(), "export failed: {}", text(&run));
    let printed: Value = serde_json::from_slice(&run.stdout).unwrap();
    let written: Value = serde_json::from_slice(&std::fs::read(out.join("_manifest.json")).unwrap()).unwrap();
    assert_eq!(printed, written);
    printed
}

fn count(db: &Path, sql: &str) -> u64 {
    query(db, &format!("SELECT CAST(count(*) AS VARCHAR) FROM ({sql})"))[0][0].parse().unwrap()
}

fn table<'a>(manifest: &'a Value, name: &str) -> &'a Value {
    manifest["tables"].as_array().unwrap().iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name}"))
}

/// The manifest agrees with the dataset and with the files on disk, and the reader counts what
/// it says.
fn check_manifest(db: &Path, out: &Path, manifest: &Value, read: &Value) {
    let meta = |key: &str| query(db, &format!("SELECT value FROM metadata WHERE key = '{key}'"))[0][0].clone();
    assert_eq!(manifest["build_id"], meta("build_id"));
    assert_eq!(manifest["month"], meta("source_month"));
    assert!(manifest["producer"].as_str().unwrap().starts_with("cnpj-etl "));
    let tables = manifest["tables"].as_array().unwrap();
    assert_eq!(read["tables"].as_object().unwrap().len(), tables.len());
    for t in tables {
        let name = t["name"].as_str().unwrap();
        assert_eq!(read["tables"][name]["rows"], t["rows"], "{name}");
        let files = t["files"].as_array().unwrap();
        assert!(!files.is_empty(), "{name}");
        for f in files {
            let path = out.join(f["path"].as_str().unwrap());
            assert_eq!(std::fs::metadata(&path).unwrap().len(), f["bytes"].as_u64().unwrap(), "{}", path.display());
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temporary folders left: {leftovers:?}");
}

/// Every exported establishment, with its exported company, against its `show` record in `locale`.
fn check_records(db: &Path, read: &Value, locale: &str) {
    let establishments = read["establishments"].as_object().unwrap();
    assert!(!establishments.is_empty());
    let no_company = Value::Object(serde_json::Map::new());
    let s = |v: &Value| match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    for (cnpj, row) in establishments {
        let record: Value = serde_json::from_str(&show(db, locale, cnpj)).unwrap();
        let company = read["companies"].get(s(&row["cnpj_basico"])).unwrap_or(&no_company);
        for (column, expected) in [
            ("razao_social", &record["razao_social"]),
            ("natureza_juridica", &record["natureza_juridica_code"]),
            ("natureza_juridica_descricao", &record["natureza_juridica"]),
            ("porte_empresa_descricao", &record["porte_empresa"]),
            ("capital_social", &record["capital_social"]),
            ("ente_federativo_responsavel", &record["ente_federativo_responsavel"]),
        ] {
            assert_eq!(s(&company[column]), s(expected), "{cnpj} company {column}");
        }
        let pairs = [
            ("nome_fantasia", &record["nome_fantasia"]),
            ("situacao_cadastral", &record["situacao_cadastral_code"]),
            ("situacao_cadastral_descricao", &record["situacao_cadastral"]),
            ("cnae_fiscal", &record["cnae_fiscal"]),
            ("cnae_fiscal_descricao", &record["cnae_fiscal_descricao"]),
            ("matriz_filial_descricao", &record["matriz_filial"]),
            ("motivo_situacao_cadastral_descricao", &record["motivo_situacao_cadastral"]),
            ("data_inicio_atividade", &record["data_inicio_atividades"]),
            ("data_situacao_cadastral", &record["data_situacao_cadastral"]),
            ("logradouro", &record["endereco"]["logradouro"]),
            ("numero", &record["endereco"]["numero"]),
            ("bairro", &record["endereco"]["bairro"]),
            ("cep", &record["endereco"]["cep"]),
            ("uf", &record["endereco"]["uf"]),
            ("municipio", &record["endereco"]["municipio"]),
            ("municipio_nome", &record["endereco"]["municipio_nome"]),
            ("municipio_ibge", &record["endereco"]["municipio_ibge"]),
            ("pais_descricao", &record["endereco"]["pais"]),
            ("ddd_1", &record["contato"]["ddd"]),
            ("telefone_1", &record["contato"]["telefone"]),
            ("email", &record["contato"]["email"]),
        ];
        for (column, expected) in pairs {
            assert_eq!(s(&row[column]), s(expected), "{cnpj} {column}");
        }
        let codes: Vec<String> =
            record["cnaes_secundarios"].as_array().unwrap().iter().map(|c| s(&c["codigo"])).collect();
        let labels: Vec<String> =
            record["cnaes_secundarios"].as_array().unwrap().iter().map(|c| s(&c["descricao"])).collect();
        let list = |v: &Value| v.as_array().map(|a| a.iter().map(s).collect::<Vec<_>>()).unwrap_or_default();
        assert_eq!(list(&row["cnaes_secundarios"]), codes, "{cnpj}");
        assert_eq!(list(&row["cnaes_secundarios_descricao"]), labels, "{cnpj}");
    }
}

/// The row counts of the whole dataset, table by table.
fn check_counts(db: &Path, read: &Value) {
    for (folder, sql) in [
        ("companies", "SELECT * FROM empresas"),
        ("establishments", "SELECT * FROM estabelecimentos"),
        ("partners", "SELECT * FROM socios"),
        ("partner_identities", "SELECT * FROM partner_identities"),
        ("partner_links", "SELECT * FROM socios"),
        ("simples", "SELECT * FROM simples"),
        ("tax_regimes", "SELECT * FROM regimes_tributarios"),
    ] {
        assert_eq!(read["tables"][folder]["rows"].as_u64(), Some(count(db, sql)), "{folder}");
    }
}

#[test]
fn parquet_reads_back_with_its_types_counts_and_records() {
    let built: Built = build(&sample_dump());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("export");
    let manifest = export(&built.db, &out, &["--format", "parquet", "--locale", "en"]);
    assert_eq!((manifest["format"].as_str(), manifest["locale"].as_str()), (Some("parquet"), Some("en")));
    let read = read_back(&out, "parquet");
    check_manifest(&built.db, &out, &manifest, &read);
    check_counts(&built.db, &read);
    assert!(read["tables"].get("changes").is_none(), "a first month has no changes folder");
    check_records(&built.db, &read, "en");
    let types = &read["tables"]["establishments"]["schema"];
    assert_eq!(types["data_inicio_atividade"], "date32[day]");
    assert_eq!(read["tables"]["companies"]["schema"]["capital_social"], "decimal128(18, 2)");
    assert_eq!(types["cnaes_secundarios"], "list<element: string>");
    assert_eq!(types["cnaes_secundarios_descricao"], "list<element: string>");
    assert_eq!(read["tables"]["partners"]["schema"]["data_entrada"], "date32[day]");
    assert_eq!(read["tables"]["partner_links"]["schema"]["data_entrada"], "date32[day]");
    assert_eq!(read["tables"]["partner_identities"]["schema"]["companies"], "int64");
    assert_eq!(read["tables"]["simples"]["schema"]["data_opcao_simples"], "date32[day]");
    assert_eq!(read["tables"]["tax_regimes"]["schema"]["ano"], "int32");
    let files = table(&manifest, "establishments")["files"].as_array().unwrap();
    let first = files[0]["path"].as_str().unwrap();
    let compression = Command::new(python())
        .args(["-c", "import pyarrow.parquet as pq, sys; print(pq.ParquetFile(sys.argv[1]).metadata.row_group(0).column(0).compression)"])
        .arg(out.join(first))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&compression.stdout).trim(), "ZSTD");
}

#[test]
fn csv_reads_back_as_rfc_4180_with_the_same_records() {
    let built = build(&sample_dump());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("csv");
    let manifest = export(&built.db, &out, &["--format", "csv", "--locale", "es"]);
    let read = read_back(&out, "csv");
    check_manifest(&built.db, &out, &manifest, &read);
    check_counts(&built.db, &read);
    check_records(&built.db, &read, "es");
    // A label with a comma and lists as JSON survived the quoting.
    let establishments = read["establishments"].as_object().unwrap();
    assert!(establishments.values().any(|r| r["cnaes_secundarios"].as_array().is_some_and(|l| l.len() > 1)));
}

#[test]
fn filters_and_partitions_select_establishments_and_their_companies() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("m1")).unwrap();
    std::fs::create_dir_all(dir.path().join("m2")).unwrap();
    let first = build_in(&sample_dump(), &dir.path().join("m1"), &[]);
    let next = root().join("data/sample-dump-next");
    let db =
        build_in(&next, &dir.path().join("m2"), &["--previous", first.db.to_str().unwrap(), "--accept-anomalies"]).db;
    let changes = count(&db, "SELECT * FROM history.changes");
    assert!(changes > 0);

    // Everything, partitioned by state: establishments and changes in uf=XX folders.
    let out = dir.path().join("by-state");
    let manifest = export(&db, &out, &["--format", "parquet", "--partition-by", "uf"]);
    let read = read_back(&out, "parquet");
    check_manifest(&db, &out, &manifest, &read);
    check_counts(&db, &read);
    assert_eq!(read["tables"]["changes"]["rows"].as_u64(), Some(changes));
    check_records(&db, &read, "pt-br");
    let states = query(&db, "SELECT DISTINCT uf FROM estabelecimentos");
    let files = table(&manifest, "establishments")["files"].as_array().unwrap();
    assert_eq!(files.len(), states.len());
    for state in &states {
        assert!(out.join(format!("establishments/uf={}", state[0])).is_dir(), "{state:?}");
    }
    assert_eq!(table(&manifest, "companies")["partitioned"], false);

    // Filtered: the establishments of SP, their companies, partners, Simples, regimes, changes.
    let out = dir.path().join("sp");
    let manifest =
        export(&db, &out, &["--format", "csv", "--state", "sp", "--situacao-cadastral", "2", "--locale", "en"]);
    assert_eq!(manifest["filters"], serde_json::json!({"state": "SP", "situacao_cadastral": "02"}));
    let read = read_back(&out, "csv");
    check_manifest(&db, &out, &manifest, &read);
    check_records(&db, &read, "en");
    let selected = "SELECT cnpj_basico FROM estabelecimentos WHERE uf = 'SP' AND situacao_cadastral = '02'";
    let expected = [
        ("establishments", "SELECT * FROM estabelecimentos WHERE uf = 'SP' AND situacao_cadastral = '02'".to_owned()),
        ("companies", format!("SELECT * FROM empresas WHERE cnpj_basico IN ({selected})")),
        ("partners", format!("SELECT * FROM socios WHERE cnpj_basico IN ({selected})")),
        ("partner_links", format!("SELECT * FROM socios WHERE cnpj_basico IN ({selected})")),
        ("partner_identities", format!("SELECT DISTINCT partner_id FROM socios WHERE cnpj_basico IN ({selected})")),
        ("simples", format!("SELECT * FROM simples WHERE cnpj_basico IN ({selected})")),
        ("tax_regimes", format!("SELECT * FROM regimes_tributarios WHERE cnpj_basico IN ({selected})")),
        ("changes", format!("SELECT * FROM history.changes WHERE cnpj_basico IN ({selected})")),
    ];
    for (folder, sql) in expected {
        let n = count(&db, &sql);
        assert_eq!(read["tables"][folder]["rows"].as_u64(), Some(n), "{folder}");
        assert!(folder == "tax_regimes" || folder == "simples" || n > 0, "{folder}: the filter keeps some rows");
    }
    assert!(count(&db, "SELECT * FROM estabelecimentos") > read["tables"]["establishments"]["rows"].as_u64().unwrap());

    // Issue 42's filters, by the API's rules: a list of states, head offices, a capital.
    let out = dir.path().join("lists");
    let args = ["--format", "csv", "--state", "df,SP", "--head-office", "true", "--capital-from", "1000.5"];
    let manifest = export(&db, &out, &args);
    let filters = serde_json::json!({"state": "DF,SP", "head_office": "true", "capital_from": "1000.50"});
    assert_eq!(manifest["filters"], filters);
    let read = read_back(&out, "csv");
    let sql = "SELECT * FROM estabelecimentos WHERE uf IN ('SP', 'DF') AND matriz_filial = '1' AND cnpj_basico IN \
               (SELECT cnpj_basico FROM empresas WHERE capital_social >= 1000.50)";
    let n = count(&db, sql);
    assert!(n > 0, "the filters keep some rows");
    assert_eq!(read["tables"]["establishments"]["rows"].as_u64(), Some(n));
}

#[test]
fn hostile_exports_fail_cleanly_and_leave_nothing() {
    let built = build(&sample_dump());
    let dir = tempfile::tempdir().unwrap();
    let db = built.db.to_str().unwrap();
    let run = |args: &[&str]| etl(&[&["export", "--quiet", "--format", "parquet"], args].concat());
    let listing = |p: &Path| {
        let mut names: Vec<String> =
            std::fs::read_dir(p).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };

    // --out not empty: refused, its content untouched.
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep.txt"), "mine").unwrap();
    let out = run(&["--db", db, "--out", full.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not an empty folder"), "{}", text(&out));
    assert_eq!(listing(&full), ["keep.txt"]);

    // An empty --out is filled.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = run(&["--db", db, "--out", empty.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(empty.join("_manifest.json").is_file());

    // --out that cannot be made: its parent is a file, or missing.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    for bad in [file.join("out"), dir.path().join("missing/out")] {
        let out = run(&["--db", db, "--out", bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("cannot create a folder"), "{}", text(&out));
    }

    // An unknown locale is an invalid argument.
    let out = run(&["--db", db, "--out", dir.path().join("x").to_str().unwrap(), "--locale", "fr"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = run(&["--db", db, "--out", dir.path().join("x").to_str().unwrap(), "--state", "S1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // A missing dataset, and one without the views (built by an older version): nothing written.
    let missing = dir.path().join("missing.duckdb");
    let out = run(&["--db", missing.to_str().unwrap(), "--out", dir.path().join("x").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("does not exist"), "{}", text(&out));
    let old = dir.path().join("old.duckdb");
    std::fs::copy(&built.db, &old).unwrap();
    {
        let conn = duckdb::Connection::open(&old).unwrap();
        conn.execute_batch("DROP MACRO TABLE establishment_labels_in").unwrap();
    }
    let out = run(&["--db", old.to_str().unwrap(), "--out", dir.path().join("x").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no analysts' views"), "{}", text(&out));
    assert_eq!(listing(dir.path()), ["a-file", "empty", "full", "old.duckdb"]);
}
