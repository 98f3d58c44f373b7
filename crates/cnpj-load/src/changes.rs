//! The `changes` table (contract §9): the previous dataset's metadata for the build's comparison
//! and guard, then this month's events from the comparison's files (`cnpj_index::ChangeFile`),
//! company events given their head office, and the history carried over from the previous
//! dataset, ordered by month then CNPJ so that DuckDB's zone maps serve both filters. The order is
//! the one the API serves (month, cnpj, cnpj_basico, event, field, old, new: the base orders the
//! company events of companies without an establishment, whose CNPJ is NULL), and it is total but
//! for identical rows, so that a page read in stored order is the page Postgres sorts. Beside
//! it, `change_months` lists the months of each company's changes (DuckDB only: Postgres has an
//! index on `cnpj_basico`).

use std::path::{Path, PathBuf};

use duckdb::{AccessMode, Config, Connection};
use serde::Serialize;

use crate::batches::{ChangeBatch, ddl};
use crate::loader::{LoadError, Loader, db};

/// The served table, also created (empty) by a build without a previous month.
pub(crate) const CHANGES_DDL: &str = "CREATE TABLE changes (month VARCHAR, cnpj VARCHAR, cnpj_basico VARCHAR, \
     event VARCHAR, field VARCHAR, old VARCHAR, new VARCHAR, uf VARCHAR, municipio VARCHAR, cnae VARCHAR)";

const COLUMNS: &str = "month, cnpj, cnpj_basico, event, field, old, new, uf, municipio, cnae";

/// The months in which each company has changes, in company order: a company's history or
/// `/changes?cnpj=` reads these months of `changes` alone. `changes` is stored in month order, so
/// a company's rows lie in one row group per month, and finding them in all 24 months means
/// decompressing 24 row groups of `cnpj_basico` (≈ 36 ms over a full history; with the months,
/// ≈ 7 ms: BENCHMARKS.md, "A company's history"). ≈ 5 bytes a row, a fifth of `changes`.
pub const CHANGE_MONTHS: &str =
    "CREATE TABLE change_months AS SELECT DISTINCT cnpj_basico, month FROM changes ORDER BY cnpj_basico, month";

/// What a build needs of the previous month's dataset.
#[derive(Clone, Debug)]
pub struct PreviousDataset {
    pub path: PathBuf,
    /// `YYYY-MM`, from its metadata.
    pub month: Option<String>,
    pub build_id: String,
    /// Its build report (JSON), from its metadata.
    pub report: Option<String>,
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
        Ok(PreviousDataset {
            path: path.to_owned(),
            month: value("source_month")?.filter(|m| !m.is_empty()),
            build_id: value("build_id")?.unwrap_or_default(),
            report: value("report")?,
        })
    }
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
    /// Creates the `changes` table: the history of `previous` from the last `keep_months`
    /// months (this one included: a previous dataset of this very month, built again, hands its
    /// changes over as they are), then this month's events from `files` (see the module docs).
    /// Without a previous dataset the table stays empty.
    pub fn record_changes(
        &self,
        month: &str,
        files: &[cnpj_index::ChangeFile],
        previous: Option<&PreviousDataset>,
        keep_months: u32,
    ) -> Result<ChangeSummary, LoadError> {
        let conn = self.conn();
        conn.execute_batch(CHANGES_DDL).map_err(db("creating changes"))?;
        let mut summary = ChangeSummary::default();
        let Some(previous) = previous else {
            conn.execute_batch(CHANGE_MONTHS).map_err(db("creating change_months"))?;
            return Ok(summary);
        };
        let first = first_kept(month, keep_months).unwrap_or_else(|| month.to_owned());
        let attach =
            format!("ATTACH '{}' AS previous (READ_ONLY)", previous.path.display().to_string().replace('\'', "''"));
        conn.execute_batch(&attach).map_err(db(format!("attaching {}", previous.path.display())))?;
        let has_history: i64 = conn
            .query_row(
                "SELECT count(*) FROM duckdb_tables() WHERE database_name = 'previous' AND table_name = 'changes'",
                [],
                |r| r.get(0),
            )
            .map_err(db("reading the previous history"))?;
        if has_history > 0 {
            summary.history_rows = conn
                .execute(
                    &format!(
                        "INSERT INTO changes SELECT {COLUMNS} FROM previous.changes WHERE month >= ? AND month <= ?"
                    ),
                    [&first, month],
                )
                .map_err(db("carrying the history over"))? as u64;
        }
        conn.execute_batch("DETACH previous").map_err(db("detaching the previous dataset"))?;

        // This month's events are staged in a temporary table (memory, spilled to DuckDB's temp
        // folder): staged in the file, they would leave its blocks free but allocated there.
        let staging = ddl(ChangeBatch::TABLE, &ChangeBatch::schema()).replacen("CREATE TABLE", "CREATE TEMP TABLE", 1);
        conn.execute_batch(&staging).map_err(db("creating stg_changes"))?;
        let mut appender = conn
            .appender_to_catalog_and_db(ChangeBatch::TABLE, "temp", "main")
            .map_err(db("appending to stg_changes"))?;
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
        appender.flush().map_err(db("appending to stg_changes"))?;
        drop(appender);

        let markers = format!("('{}', '{}')", cnpj_index::MARKER_COMPANY_NEW, cnpj_index::MARKER_COMPANY_GONE);
        conn.execute_batch(&format!(
            // Company events only for a company of both months.
            "DELETE FROM stg_changes WHERE cnpj IS NULL AND cnpj_basico IN \
                 (SELECT cnpj_basico FROM stg_changes WHERE event IN {markers});
             DELETE FROM stg_changes WHERE event IN {markers};
             -- The head office now (contract §1): the matriz, else the lowest cnpj_ordem.
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
        .map_err(db("finding the head offices of company events"))?;
        conn.execute(
            "INSERT INTO changes SELECT ? AS month, cnpj, cnpj_basico, event, field, old, new, uf, municipio, cnae \
             FROM stg_changes ORDER BY cnpj, cnpj_basico, event, field, old, new",
            [month],
        )
        .map_err(db("recording the changes"))?;
        conn.execute_batch("DROP TABLE stg_changes").map_err(db("dropping stg_changes"))?;
        conn.execute_batch(CHANGE_MONTHS).map_err(db("creating change_months"))?;
        let counts = |sql: &str| -> Result<Vec<(String, u64)>, LoadError> {
            let mut stmt = conn.prepare(sql).map_err(db("counting the changes"))?;
            let rows = stmt
                .query_map([month], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))
                .map_err(db("counting the changes"))?;
            rows.collect::<Result<Vec<_>, _>>().map_err(db("counting the changes"))
        };
        summary.events =
            counts("SELECT event, count(*) FROM changes WHERE month = ? GROUP BY event ORDER BY 2 DESC, 1")?;
        summary.states = counts(
            "SELECT coalesce(uf, '') AS uf, count(*) FROM changes WHERE month = ? GROUP BY 1 ORDER BY 2 DESC, 1",
        )?;
        Ok(summary)
    }
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
}
