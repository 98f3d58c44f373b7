//! The month-over-month history: the previous dataset's metadata for the build's
//! comparison and guard, then the history file of this build (`cnpj_index::history_path`): the
//! previous one copied whole, the months that drop out deleted, and this month's events appended
//! from the comparison's files (`cnpj_index::ChangeFile`), company events given their head office,
//! in the order the API serves (month, cnpj, cnpj_basico, event, field, old, new: the base orders
//! the company events of companies without an establishment, whose CNPJ is NULL), which is total
//! but for identical rows, so that a page read in stored order is the page Postgres sorts, and
//! which DuckDB's zone maps serve by month and CNPJ. Beside the rows, `change_companies` holds
//! each month's companies with changes (`cnpj_index::Companies`), so that a company's history
//! reads only its months, and `change_keys` each row's keys (`change_keys.rs`), so that a
//! watchlist's rows are found by integers; a history carried over without them gets them for
//! every month.

use std::path::{Path, PathBuf};

use duckdb::{AccessMode, Config, Connection};
use serde::Serialize;

use crate::batches::{ChangeBatch, ddl};
use crate::loader::Loader;
use crate::{LoadError, attach, db};

const COLUMNS: &str = "month, cnpj, cnpj_basico, event, field, old, new, uf, municipio, cnae";

/// Where a build finds the history it carries over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreviousHistory {
    /// The previous dataset's history file, of its build.
    File(PathBuf),
    /// The previous dataset's own `changes` table (a dataset built before the history had a file
    /// of its own): carried over once through SQL.
    Table,
    None,
}

/// What a build needs of the previous month's dataset.
#[derive(Clone, Debug)]
pub struct PreviousDataset {
    pub path: PathBuf,
    /// `YYYY-MM`, from its metadata.
    pub month: Option<String>,
    pub build_id: String,
    /// Its build report (JSON), from its metadata.
    pub report: Option<String>,
    pub history: PreviousHistory,
}

impl PreviousDataset {
    /// Reads the metadata of the dataset at `path` (opened read-only: it may be being served).
    pub fn read(path: &Path) -> Result<PreviousDataset, LoadError> {
        let context = format!("reading the previous dataset {}", path.display());
        if !path.is_file() {
            return Err(LoadError::Io {
                path: path.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "the previous dataset does not exist"),
            });
        }
        let config = Config::default().access_mode(AccessMode::ReadOnly).map_err(db(&context))?;
        let conn = Connection::open_with_flags(path, config).map_err(db(&context))?;
        let value = |key: &str| -> Result<Option<String>, LoadError> {
            let mut stmt = conn.prepare("SELECT value FROM metadata WHERE key = ?").map_err(db(&context))?;
            let mut rows = stmt.query([key]).map_err(db(&context))?;
            rows.next().map_err(db(&context))?.map(|r| r.get::<_, String>(0)).transpose().map_err(db(&context))
        };
        let build_id = value("build_id")?.unwrap_or_default();
        let history = match history_build(path).map_err(db(&context))? {
            Some(id) if id == build_id => PreviousHistory::File(cnpj_index::history_path(path)),
            found => {
                if found.is_some() {
                    tracing::warn!(
                        history = %cnpj_index::history_path(path).display(),
                        "the previous dataset's history file is of another build: it is not carried over"
                    );
                }
                let tables: i64 = conn
                    .query_row("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'changes'", [], |r| r.get(0))
                    .map_err(db(&context))?;
                if tables > 0 { PreviousHistory::Table } else { PreviousHistory::None }
            }
        };
        Ok(PreviousDataset {
            path: path.to_owned(),
            month: value("source_month")?.filter(|m| !m.is_empty()),
            build_id,
            report: value("report")?,
            history,
        })
    }
}

/// The `build_id` of the history file beside `dataset`, when there is one.
fn history_build(dataset: &Path) -> duckdb::Result<Option<String>> {
    let path = cnpj_index::history_path(dataset);
    if !path.is_file() {
        return Ok(None);
    }
    let conn = Connection::open_with_flags(&path, Config::default().access_mode(AccessMode::ReadOnly)?)?;
    let id = conn.query_row("SELECT max(value) FROM metadata WHERE key = 'build_id'", [], |r| r.get(0))?;
    Ok(id)
}

/// This month's changes, for the build report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChangeSummary {
    /// Per event name, most first.
    pub events: Vec<(String, u64)>,
    /// Per state of the establishment, most first (`""` for a company event without an
    /// establishment).
    pub states: Vec<(String, u64)>,
    /// Rows carried over from the previous dataset's history.
    pub history_rows: u64,
}

impl ChangeSummary {
    pub fn count(&self, event: &str) -> u64 {
        self.events.iter().find(|(e, _)| e == event).map_or(0, |(_, n)| *n)
    }
}

/// The first month kept when `month` is the newest and `keep` months are kept (`2026-03`, 24 →
/// `2024-04`).
fn first_kept(month: &str, keep: u32) -> Option<String> {
    let (year, m) = month.split_once('-')?;
    let index = year.parse::<i64>().ok()? * 12 + m.parse::<i64>().ok()? - 1 - i64::from(keep.max(1)) + 1;
    Some(format!("{:04}-{:02}", index.div_euclid(12), index.rem_euclid(12) + 1))
}

impl Loader {
    /// Writes this build's history file (see the module docs): the history of `previous` from
    /// the last `keep_months` months (this one included: a previous dataset of this very month,
    /// built again, hands its changes over as they are), then this month's events from `files`.
    /// Without a previous dataset there is no history file.
    pub fn record_changes(
        &mut self,
        month: &str,
        files: &[cnpj_index::ChangeFile],
        previous: Option<&PreviousDataset>,
        keep_months: u32,
    ) -> Result<ChangeSummary, LoadError> {
        let Some(previous) = previous else { return Ok(ChangeSummary::default()) };
        // Each step's time, in the debug log (`-vv`).
        let mut clock = std::time::Instant::now();
        let mut lap = |step: &str| {
            tracing::debug!(step, seconds = clock.elapsed().as_secs_f64(), "recording the changes");
            clock = std::time::Instant::now();
        };
        let first = first_kept(month, keep_months).unwrap_or_else(|| month.to_owned());
        let path = self.history_file();
        create_history(&path, &previous.history)?;
        self.history = true;
        let conn = self.conn();
        attach(conn, &path, "history", false)?;
        crate::change_keys::create(conn)?;
        // The months whose companies are (re)computed: this one, or all of a history carried
        // over from a table.
        let mut months = carry_over(conn, previous, &first, month)?;
        months.push(month.to_owned());
        let history_rows = conn
            .query_row("SELECT count(*) FROM history.changes", [], |r| r.get::<_, i64>(0))
            .map_err(db("counting the history"))? as u64;
        lap("history carried over");
        stage_events(conn, files)?;
        lap("events staged");
        place_company_events(conn)?;
        lap("head offices found");
        append_events(conn, month)?;
        lap("events appended");
        for month in &months {
            store_companies(conn, month)?;
        }
        lap("companies stored");
        crate::change_keys::key_months(conn)?;
        lap("keys stored");
        let counts = |sql: &str| -> Result<Vec<(String, u64)>, LoadError> {
            let mut stmt = conn.prepare(sql).map_err(db("counting the changes"))?;
            let rows = stmt
                .query_map([month], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))
                .map_err(db("counting the changes"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(db("counting the changes"))
        };
        Ok(ChangeSummary {
            events: counts(
                "SELECT event, count(*) FROM history.changes WHERE month = ? GROUP BY event ORDER BY 2 DESC, 1",
            )?,
            states: counts(
                "SELECT coalesce(uf, '') AS uf, count(*) FROM history.changes WHERE month = ? GROUP BY 1 \
                 ORDER BY 2 DESC, 1",
            )?,
            history_rows,
        })
    }
}

/// The history file at `path`: the previous one copied whole, or a new one with empty tables.
fn create_history(path: &Path, previous: &PreviousHistory) -> Result<(), LoadError> {
    if let PreviousHistory::File(from) = previous {
        std::fs::copy(from, path).map_err(|source| LoadError::Io { path: path.to_owned(), source })?;
    } else {
        let conn = Connection::open(path).map_err(db(format!("creating {}", path.display())))?;
        conn.execute_batch(cnpj_index::HISTORY_DDL).map_err(db("creating the history's tables"))?;
    }
    Ok(())
}

/// Keeps the previous history's months from `first` to `month` in the attached `history`: a
/// copied file loses the months that drop out (and its companies of `month`, computed again); a
/// previous `changes` table is copied over. Returns the months carried over from a table, whose
/// companies are to be computed.
fn carry_over(
    conn: &Connection,
    previous: &PreviousDataset,
    first: &str,
    month: &str,
) -> Result<Vec<String>, LoadError> {
    match &previous.history {
        PreviousHistory::File(_) => {
            conn.execute("DELETE FROM history.changes WHERE month < ? OR month > ?", [first, month])
                .map_err(db("deleting the months that drop out of the history"))?;
            for table in ["change_companies", "change_keys"] {
                conn.execute(&format!("DELETE FROM history.{table} WHERE month < ? OR month >= ?"), [first, month])
                    .map_err(db("deleting the months that drop out of the history"))?;
            }
            Ok(Vec::new())
        }
        PreviousHistory::Table => {
            attach(conn, &previous.path, "previous", true)?;
            conn.execute(
                &format!(
                    "INSERT INTO history.changes SELECT {COLUMNS} FROM previous.changes WHERE month >= ? AND month <= ?"
                ),
                [first, month],
            )
            .map_err(db("carrying the history over"))?;
            conn.execute_batch("DETACH previous").map_err(db("detaching the previous dataset"))?;
            let mut stmt = conn
                .prepare("SELECT DISTINCT month FROM history.changes WHERE month < ? ORDER BY month")
                .map_err(db("reading the history's months"))?;
            let carried = stmt.query_map([month], |r| r.get(0)).map_err(db("reading the history's months"))?;
            carried.collect::<Result<Vec<String>, _>>().map_err(db("reading the history"))
        }
        PreviousHistory::None => Ok(Vec::new()),
    }
}

/// Stages this month's events from the comparison's files in a temporary table, `stg_changes`
/// (memory, spilled to DuckDB's temp folder).
fn stage_events(conn: &Connection, files: &[cnpj_index::ChangeFile]) -> Result<(), LoadError> {
    let staging = ddl(ChangeBatch::TABLE, &ChangeBatch::schema()).replacen("CREATE TABLE", "CREATE TEMP TABLE", 1);
    conn.execute_batch(&staging).map_err(db("creating stg_changes"))?;
    let mut appender =
        conn.appender_to_catalog_and_db(ChangeBatch::TABLE, "temp", "main").map_err(db("appending to stg_changes"))?;
    let mut batch = ChangeBatch::default();
    for file in files {
        let mut failed = None;
        file.read(|row| {
            batch.push(&row);
            if batch.len() >= 32_768 && failed.is_none() {
                failed = appender.append_record_batch(batch.take().data).err();
            }
        })?;
        if let Some(e) = failed {
            return Err(db("appending to stg_changes")(e));
        }
    }
    appender.append_record_batch(batch.take().data).map_err(db("appending to stg_changes"))?;
    appender.flush().map_err(db("appending to stg_changes"))
}

/// Keeps the company events of companies of both months only (dropping the markers), and gives
/// each its head office's CNPJ, state, city and activity.
fn place_company_events(conn: &Connection) -> Result<(), LoadError> {
    let markers = format!("('{}', '{}')", cnpj_index::MARKER_COMPANY_NEW, cnpj_index::MARKER_COMPANY_GONE);
    conn.execute_batch(&format!(
        // Company events only for a company of both months.
        "DELETE FROM stg_changes WHERE cnpj IS NULL AND cnpj_basico IN \
             (SELECT cnpj_basico FROM stg_changes WHERE event IN {markers});
         DELETE FROM stg_changes WHERE event IN {markers};
         -- The head office now: the matriz, else the lowest cnpj_ordem.
         CREATE TEMP TABLE heads AS
         SELECT cnpj_basico, arg_min(cnpj, k) AS cnpj, arg_min(uf, k) AS uf,
                arg_min(municipio, k) AS municipio, arg_min(cnae_fiscal, k) AS cnae
         FROM (SELECT cnpj_basico, cnpj, uf, municipio, cnae_fiscal,
                      CASE WHEN matriz_filial = '1' THEN '0' ELSE '1' END || cnpj AS k
               FROM estabelecimentos
               WHERE cnpj_basico IN (SELECT cnpj_basico FROM stg_changes WHERE cnpj IS NULL))
         GROUP BY cnpj_basico;
         UPDATE stg_changes c SET cnpj = h.cnpj, uf = h.uf, municipio = h.municipio, cnae = h.cnae
         FROM heads h WHERE c.cnpj IS NULL AND c.cnpj_basico = h.cnpj_basico;
         DROP TABLE heads;"
    ))
    .map_err(db("finding the head offices of company events"))
}

/// Appends the staged events to the history as `month`'s, in the served order.
fn append_events(conn: &Connection, month: &str) -> Result<(), LoadError> {
    conn.execute(
        "INSERT INTO history.changes SELECT ? AS month, cnpj, cnpj_basico, event, field, old, new, uf, municipio, cnae \
         FROM stg_changes ORDER BY cnpj, cnpj_basico, event, field, old, new",
        [month],
    )
    .map_err(db("recording the changes"))?;
    conn.execute_batch("DROP TABLE stg_changes").map_err(db("dropping stg_changes"))
}

/// Stores the companies with changes in `month` as one row of `change_companies`.
fn store_companies(conn: &Connection, month: &str) -> Result<(), LoadError> {
    let mut companies = cnpj_index::Companies::default();
    let mut stmt = conn
        .prepare("SELECT DISTINCT cnpj_basico FROM history.changes WHERE month = ?")
        .map_err(db("listing a month's companies"))?;
    let mut rows = stmt.query([month]).map_err(db("listing a month's companies"))?;
    while let Some(row) = rows.next().map_err(db("listing a month's companies"))? {
        let basico: String = row.get(0).map_err(db("listing a month's companies"))?;
        if !companies.insert(&basico) {
            return Err(LoadError::CompanyBase { month: month.to_owned(), basico });
        }
    }
    conn.execute("INSERT INTO history.change_companies VALUES (?, ?)", duckdb::params![month, companies.to_bytes()])
        .map_err(db("storing a month's companies"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(month: &str, keep: u32, expected: Option<&str>) {
        assert_eq!(first_kept(month, keep).as_deref(), expected, "{month} {keep}");
    }

    #[test]
    fn the_history_keeps_whole_months() {
        check("2026-03", 24, Some("2024-04"));
        check("2026-03", 1, Some("2026-03"));
        check("2026-12", 12, Some("2026-01"));
        check("2026-01", 2, Some("2025-12"));
        check("2026-01", 0, Some("2026-01"));
        check("march", 24, None);
    }

    /// A dataset file with `build_id` = `id` (and a `changes` table when `table`), and beside it
    /// a history of build `history` when given.
    fn dataset(dir: &Path, id: &str, table: bool, history: Option<&str>) -> PathBuf {
        let path = dir.join(format!("{id}-{table}-{history:?}.duckdb"));
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE metadata (key VARCHAR PRIMARY KEY, value VARCHAR)").unwrap();
        conn.execute("INSERT INTO metadata VALUES ('build_id', ?)", [id]).unwrap();
        if table {
            conn.execute_batch("CREATE TABLE changes (month VARCHAR)").unwrap();
        }
        if let Some(history) = history {
            let conn = Connection::open(cnpj_index::history_path(&path)).unwrap();
            conn.execute_batch(cnpj_index::HISTORY_DDL).unwrap();
            conn.execute("INSERT INTO metadata VALUES ('build_id', ?)", [history]).unwrap();
        }
        path
    }

    #[test]
    fn the_history_carried_over_is_the_previous_dataset_s_own() {
        let dir = tempfile::tempdir().unwrap();
        let history = |id: &str, table: bool, of: Option<&str>| {
            let path = dataset(dir.path(), id, table, of);
            (PreviousDataset::read(&path).unwrap().history, cnpj_index::history_path(&path))
        };
        let (found, path) = history("a", false, Some("a"));
        assert_eq!(found, PreviousHistory::File(path));
        // Another build's history (a build killed between its renames) is not carried over.
        assert_eq!(history("b", false, Some("a")).0, PreviousHistory::None);
        assert_eq!(history("c", true, Some("a")).0, PreviousHistory::Table);
        // A dataset of the earlier layout hands over its own table.
        assert_eq!(history("d", true, None).0, PreviousHistory::Table);
        assert_eq!(history("e", false, None).0, PreviousHistory::None);
    }
}
