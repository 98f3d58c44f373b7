//! `cnpj-etl export`: writes a built DuckDB dataset out for other engines, as Parquet or CSV, one
//! folder per table, with a `_manifest.json`. DuckDB's own writers do the work (`COPY (SELECT …)
//! TO 'folder'`), streaming under a memory limit and spilling to a temporary folder; the
//! companies, establishments, partners and partner identities and links come from the table
//! macros of the analysts' views
//! (`sql/duckdb/views.sql`) that label one table each in the chosen locale (no join with the
//! companies: each folder is one table, joined by `cnpj_basico`), the other tables as stored.
//! Rows are written in no particular order (`preserve_insertion_order` off: DuckDB need not hold
//! rows back to keep it). The search filters ([`SearchFilters`], the same SQL as a search) select
//! the establishments; the other tables keep the rows of the selected establishments' companies.
//! Everything is written into a temporary folder beside `--out`, renamed into place once
//! complete: a failed export leaves nothing.

use std::path::{Path, PathBuf};

use cnpj_model::{Locale, fold};
use serde::Serialize;

use crate::SearchFilters;
use crate::backend::{Dialect, attach_history};

/// The file format of an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// Parquet, zstd-compressed, typed (DATE, DECIMAL(18,2), LIST).
    Parquet,
    /// CSV: UTF-8, a header, RFC 4180 quoting, CRLF line ends; lists as JSON arrays.
    Csv,
}

/// What to export, where, and how.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// The DuckDB dataset (built by `cnpj-etl build`), only read.
    pub db: PathBuf,
    /// The folder to create; an existing one must be empty.
    pub out: PathBuf,
    pub format: ExportFormat,
    /// The locale of the labels.
    pub locale: Locale,
    /// Hive-style partitions by state (`uf=SP/`) of the tables that have one.
    pub partition_by_uf: bool,
    pub filters: SearchFilters,
    /// The memory the export may use, in bytes: DuckDB's limit is 80 % of it (it spills past
    /// that), the rest is for what its writers hold outside its buffer manager (a Parquet writer
    /// per open partition file: 25 % over DuckDB's limit at scale 0.1 by state).
    pub memory_limit: u64,
    /// Who wrote the export (`cnpj-etl 0.1.0`), for the manifest.
    pub producer: String,
}

/// `_manifest.json`.
#[derive(Clone, Debug, Serialize)]
pub struct Manifest {
    pub producer: String,
    pub build_id: String,
    pub month: String,
    pub format: ExportFormat,
    pub locale: String,
    /// The search filters that selected the establishments (by the API's names), `{}` for all.
    pub filters: serde_json::Map<String, serde_json::Value>,
    /// `["uf"]` when partitioned, else empty.
    pub partition_by: Vec<String>,
    pub tables: Vec<ExportedTable>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ExportedTable {
    /// The folder's name.
    pub name: String,
    pub rows: u64,
    /// Whether this table is partitioned by `uf`.
    pub partitioned: bool,
    /// Column names and DuckDB types (the partition column too).
    pub columns: Vec<Column>,
    /// The files, relative to the export folder, in name order.
    pub files: Vec<ExportedFile>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ExportedFile {
    pub path: String,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("the dataset {0} does not exist")]
    NoDataset(PathBuf),
    #[error("--out {0} exists and is not an empty folder: choose a new one")]
    OutNotEmpty(PathBuf),
    #[error("--out {path}: {reason}")]
    Out { path: PathBuf, reason: String },
    #[error("{0} has no analysts' views (built by an older cnpj-etl, or not a registry dataset): build it again")]
    NoViews(PathBuf),
    #[error("exporting {context}")]
    Db {
        context: String,
        #[source]
        source: duckdb::Error,
    },
    #[error("writing {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A table of an export.
struct Table {
    /// The folder's name.
    name: &'static str,
    select: String,
    /// The key that filters select by: `cnpj` for establishments, `partner_id` for the partners
    /// (those linked to a selected company), `cnpj_basico` for the rest.
    key: &'static str,
    /// Whether it has a `uf` to partition by.
    has_uf: bool,
}

/// The tables of an export, in the manifest's order.
fn tables(locale: Locale) -> Vec<Table> {
    let lang = literal(locale.code());
    let table = |name, select: String, key, has_uf| Table { name, select, key, has_uf };
    vec![
        table("companies", format!("SELECT * FROM companies_in({lang})"), "cnpj_basico", false),
        table("establishments", format!("SELECT * FROM establishment_labels_in({lang})"), "cnpj", true),
        table("partners", format!("SELECT * FROM partner_labels_in({lang})"), "cnpj_basico", false),
        table("partner_identities", format!("SELECT * FROM partner_identities_in({lang})"), "partner_id", false),
        table("partner_links", format!("SELECT * FROM partner_links_in({lang})"), "cnpj_basico", false),
        table(
            "simples",
            "SELECT cnpj_basico, opcao_simples, data_opcao_simples, data_exclusao_simples, opcao_mei, \
             data_opcao_mei, data_exclusao_mei FROM simples"
                .into(),
            "cnpj_basico",
            false,
        ),
        table(
            "tax_regimes",
            "SELECT cnpj_basico, cnpj, ano, regime FROM regimes_tributarios".into(),
            "cnpj_basico",
            false,
        ),
        table(
            "changes",
            "SELECT month, cnpj, cnpj_basico, event, field, old, new, uf, municipio, cnae FROM history.changes".into(),
            "cnpj_basico",
            true,
        ),
    ]
}

/// Parquet files hold row groups of this many rows (DuckDB's default): 20-40 MB of establishments
/// before compression, enough for scans to skip by statistics; twice as many took the writer's
/// buffers past a 1 GB limit at scale 0.1.
const ROW_GROUP_ROWS: u64 = 122_880;
/// A table's unpartitioned output is cut into files of about this size.
const FILE_BYTES: &str = "1GB";

/// `text` as a SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The name of the manifest in an export's folder, written last: a folder with it is complete.
pub const MANIFEST_FILE: &str = "_manifest.json";

/// Writes the export described by `opts`; returns its manifest (also written as `_manifest.json`).
pub fn export(opts: &ExportOptions) -> Result<Manifest, ExportError> {
    check_paths(opts)?;
    let (building, spill) = (scratch(&opts.out, "exporting")?, scratch(&opts.out, "spill")?);
    let conn = open(opts, spill.path())?;
    let (build_id, month) = (metadata(&conn, "build_id")?, metadata(&conn, "source_month")?);
    // The changes are in the history file beside the dataset, when there is one of its build.
    let history = attach_history(&conn, &opts.db).map_err(db("attaching the history"))?;
    let filtered = opts.filters != SearchFilters::default();
    if filtered {
        select(&conn, &opts.filters)?;
    }
    let mut manifest = Manifest {
        producer: opts.producer.clone(),
        build_id,
        month,
        format: opts.format,
        locale: opts.locale.code().to_owned(),
        filters: filters_json(&opts.filters),
        partition_by: if opts.partition_by_uf { vec!["uf".to_owned()] } else { Vec::new() },
        tables: Vec::new(),
    };
    for table in tables(opts.locale) {
        if table.name == "changes" && !(history && has_changes(&conn)?) {
            continue;
        }
        manifest.tables.push(write_table(&conn, opts, table, filtered, building.path())?);
    }
    drop(conn);
    publish(building, &manifest, &opts.out)?;
    Ok(manifest)
}

/// A failed DuckDB call, named by what it was doing.
fn db(context: impl Into<String>) -> impl FnOnce(duckdb::Error) -> ExportError {
    let context = context.into();
    move |source| ExportError::Db { context, source }
}

/// The dataset exists and `--out` is new or an empty folder.
fn check_paths(opts: &ExportOptions) -> Result<(), ExportError> {
    if !opts.db.is_file() {
        return Err(ExportError::NoDataset(opts.db.clone()));
    }
    if opts.out.exists() {
        let empty = std::fs::read_dir(&opts.out).map(|mut d| d.next().is_none()).unwrap_or(false);
        if !opts.out.is_dir() || !empty {
            return Err(ExportError::OutNotEmpty(opts.out.clone()));
        }
    }
    Ok(())
}

/// A temporary folder beside `out` (`.<name>.<kind>-…`), deleted when dropped.
fn scratch(out: &Path, kind: &str) -> Result<tempfile::TempDir, ExportError> {
    let out_err = |reason: String| ExportError::Out { path: out.to_owned(), reason };
    let name = out.file_name().ok_or_else(|| out_err("not a folder name".into()))?.to_string_lossy();
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    tempfile::Builder::new()
        .prefix(&format!(".{name}.{kind}-"))
        .tempdir_in(parent)
        .map_err(|e| out_err(format!("cannot create a folder in {}: {e}", parent.display())))
}

/// An in-memory DuckDB under the export's memory limit, spilling to `spill`, with the dataset
/// attached read-only as its default database; refused when the dataset has no analysts' views.
fn open(opts: &ExportOptions, spill: &Path) -> Result<duckdb::Connection, ExportError> {
    let conn = duckdb::Connection::open_in_memory().map_err(db("opening DuckDB"))?;
    conn.execute_batch(&format!(
        "SET memory_limit = '{}B'; SET temp_directory = {}; SET preserve_insertion_order = false; \
         ATTACH {} AS dataset (READ_ONLY); USE dataset;",
        opts.memory_limit / 5 * 4,
        literal(&spill.to_string_lossy()),
        literal(&opts.db.to_string_lossy()),
    ))
    .map_err(db(format!("opening {}", opts.db.display())))?;
    let views: i64 = conn
        .query_row(
            "SELECT count(DISTINCT function_name) FROM duckdb_functions() WHERE database_name = 'dataset' \
             AND function_name IN ('companies_in', 'establishment_labels_in', 'partner_labels_in', \
             'partner_identities_in', 'partner_links_in')",
            [],
            |r| r.get(0),
        )
        .map_err(db("reading the catalog"))?;
    if views != 5 {
        return Err(ExportError::NoViews(opts.db.clone()));
    }
    Ok(conn)
}

/// A value of the dataset's metadata, `""` when it has none.
fn metadata(conn: &duckdb::Connection, key: &str) -> Result<String, ExportError> {
    conn.query_row("SELECT coalesce(max(value), '') FROM metadata WHERE key = ?", [key], |r| r.get(0))
        .map_err(db("reading the metadata"))
}

/// Selects the establishments of the filters into `temp.selected`, by the search's own SQL, and
/// their companies into `temp.selected_companies`.
fn select(conn: &duckdb::Connection, filters: &SearchFilters) -> Result<(), ExportError> {
    let cities: Vec<(String, String)> = {
        let mut stmt = conn.prepare("SELECT code, name FROM municipios").map_err(db("reading cities"))?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(db("reading cities"))?;
        rows.collect::<Result<_, _>>().map_err(db("reading cities"))?
    };
    let city_codes = |name: &str| {
        let folded = fold(name);
        cities.iter().filter(|(_, n)| fold(n) == folded).map(|(c, _)| c.clone()).collect()
    };
    let (from, params) = filters.sql(Dialect::DuckDb, city_codes);
    conn.execute(
        &format!("CREATE TEMP TABLE selected AS SELECT e.cnpj, e.cnpj_basico {from}"),
        duckdb::params_from_iter(&params),
    )
    .map_err(db("selecting the establishments of the filters"))?;
    conn.execute_batch("CREATE TEMP TABLE selected_companies AS SELECT DISTINCT cnpj_basico FROM temp.selected")
        .map_err(db("selecting the companies of the filters"))
}

/// Whether the attached history holds any change.
fn has_changes(conn: &duckdb::Connection) -> Result<bool, ExportError> {
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM (SELECT 1 FROM history.changes LIMIT 1)", [], |r| r.get(0))
        .map_err(db("reading changes"))?;
    Ok(rows > 0)
}

/// Writes one table into its folder under `building` with DuckDB's `COPY … TO`: only the rows of
/// the selection when `filtered`, lists as JSON in CSV, by state or cut into files of
/// [`FILE_BYTES`].
fn write_table(
    conn: &duckdb::Connection,
    opts: &ExportOptions,
    table: Table,
    filtered: bool,
    building: &Path,
) -> Result<ExportedTable, ExportError> {
    let Table { name, mut select, key, has_uf } = table;
    if filtered {
        let set = match key {
            "cnpj" => "temp.selected",
            "partner_id" => {
                "(SELECT partner_id FROM partner_links WHERE cnpj_basico IN (SELECT cnpj_basico FROM temp.selected_companies))"
            }
            _ => "temp.selected_companies",
        };
        select = format!("SELECT * FROM ({select}) WHERE {key} IN (SELECT {key} FROM {set})");
    }
    let columns = describe(conn, &select)?;
    if opts.format == ExportFormat::Csv {
        // Lists as JSON arrays: unambiguous in a cell (labels hold commas).
        let lists: Vec<String> =
            columns.iter().filter(|c| c.kind.ends_with("[]")).map(|c| format!("to_json({0}) AS {0}", c.name)).collect();
        if !lists.is_empty() {
            select = format!("SELECT * REPLACE ({}) FROM ({select})", lists.join(", "));
        }
    }
    let partitioned = opts.partition_by_uf && has_uf;
    let format = match opts.format {
        ExportFormat::Parquet => format!("FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP_ROWS}"),
        ExportFormat::Csv => "FORMAT csv, HEADER true, DELIMITER ',', QUOTE '\"', ESCAPE '\"', NEW_LINE '\r\n'".into(),
    };
    let layout = if partitioned { "PARTITION_BY (uf)".to_owned() } else { format!("FILE_SIZE_BYTES '{FILE_BYTES}'") };
    let dir = building.join(name);
    let copy = format!(
        "COPY ({select}) TO {} ({format}, {layout}, FILENAME_PATTERN 'part-{{i}}')",
        literal(&dir.to_string_lossy())
    );
    let started = std::time::Instant::now();
    let rows = conn.execute(&copy, []).map_err(db(format!("the table {name}")))?;
    tracing::info!(table = name, rows, seconds = started.elapsed().as_secs_f64(), "exported");
    Ok(ExportedTable { name: name.to_owned(), rows: rows as u64, partitioned, columns, files: files(building, &dir)? })
}

/// Writes the manifest last into the finished folder, and renames the folder to `out`.
fn publish(building: tempfile::TempDir, manifest: &Manifest, out: &Path) -> Result<(), ExportError> {
    let manifest_path = building.path().join(MANIFEST_FILE);
    let json = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
    std::fs::write(&manifest_path, json).map_err(|source| ExportError::Io { path: manifest_path, source })?;
    let done = building.keep();
    // An empty `--out` is replaced by the rename (rename(2) takes an empty folder's place).
    std::fs::rename(&done, out).map_err(|e| {
        let _ = std::fs::remove_dir_all(&done);
        ExportError::Out { path: out.to_owned(), reason: format!("cannot rename the finished export into place: {e}") }
    })
}

/// The columns of a SELECT and their DuckDB types.
fn describe(conn: &duckdb::Connection, select: &str) -> Result<Vec<Column>, ExportError> {
    let err = |source| ExportError::Db { context: "describing a table".into(), source };
    let mut stmt = conn.prepare(&format!("DESCRIBE {select}")).map_err(err)?;
    let rows = stmt.query_map([], |r| Ok(Column { name: r.get(0)?, kind: r.get(1)? })).map_err(err)?;
    rows.collect::<Result<_, _>>().map_err(err)
}

/// The files under `dir`, paths relative to `root`, in name order.
fn files(root: &Path, dir: &Path) -> Result<Vec<ExportedFile>, ExportError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ExportError::Io { path, source }
    };
    let mut out = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).map_err(io(&folder))? {
            let entry = entry.map_err(io(&folder))?;
            let path = entry.path();
            let meta = entry.metadata().map_err(io(&path))?;
            if meta.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
                out.push(ExportedFile { path: relative, bytes: meta.len() });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The filters given, by the API's names, each value as its query string writes it (a list
/// comma-separated, an amount in reais, `true` or `false`).
fn filters_json(f: &SearchFilters) -> serde_json::Map<String, serde_json::Value> {
    let cnpj = f.cnpj.as_ref().map(|q| match q {
        cnpj_model::CnpjQuery::Full(c) => c.as_str().to_owned(),
        q @ cnpj_model::CnpjQuery::Basico(_) => q.basico().to_owned(),
    });
    let list = |values: &[String]| (!values.is_empty()).then(|| values.join(","));
    let money = |cents: Option<u64>| cents.map(cnpj_model::filter::money_text);
    let flag = |value: Option<bool>| value.map(|v| v.to_string());
    [
        ("cnpj", cnpj),
        ("business_sector", list(&f.business_sector)),
        ("any_sector", list(&f.any_sector)),
        ("city_id", list(&f.city_id)),
        ("city", f.city.clone()),
        ("state", list(&f.state)),
        ("company_size", list(&f.porte)),
        ("opening_date_from", f.opening_from.clone()),
        ("opening_date_to", f.opening_to.clone()),
        ("trading_name", f.trading_name.clone()),
        ("neighborhood", f.neighborhood.clone()),
        ("zip_code", f.zip_prefix.clone()),
        ("nature_code", list(&f.nature_code)),
        ("situacao_cadastral", list(&f.situacao)),
        ("capital_from", money(f.capital_from)),
        ("capital_to", money(f.capital_to)),
        ("has_email", flag(f.has_email)),
        ("has_phone", flag(f.has_phone)),
        ("simples", flag(f.simples)),
        ("mei", flag(f.mei)),
        ("head_office", flag(f.head_office)),
        ("partner_id", f.partner_id.clone()),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.map(|v| (name.to_owned(), serde_json::Value::String(v))))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(filters: SearchFilters, expected: serde_json::Value) {
        assert_eq!(serde_json::Value::Object(filters_json(&filters)), expected);
    }

    #[test]
    fn the_manifest_names_filters_as_the_search_does() {
        check(SearchFilters::default(), serde_json::json!({}));
        check(
            SearchFilters {
                state: vec!["RJ".into(), "SP".into()],
                porte: vec!["01".into()],
                zip_prefix: Some("0131".into()),
                cnpj: Some(cnpj_model::CnpjQuery::parse("11.222.333").unwrap()),
                capital_to: Some(100_050),
                simples: Some(false),
                ..Default::default()
            },
            serde_json::json!({"cnpj": "11222333", "state": "RJ,SP", "company_size": "01", "zip_code": "0131",
                "capital_to": "1000.50", "simples": "false"}),
        );
    }

    #[test]
    fn literals_double_their_quotes() {
        assert_eq!(literal("/tmp/o'brien/x"), "'/tmp/o''brien/x'");
    }
}
