//! Writes a registry dataset into DuckDB: the main tables' rows are sorted into runs on disk and
//! merged (one winner per key, first in reading order) straight into the served tables; small
//! inputs (labels, municipalities, rejects) go through staging tables and
//! `sql/duckdb/transform.sql`, and the analysts' views are created (`sql/duckdb/views.sql`); the
//! finished file is renamed over the target only when every count reconciles. Nothing else in the
//! workspace writes a database.

mod batches;
mod change_keys;
mod changes;
mod loader;
mod partners;
pub mod postgres;
mod runs;
mod sorter;
mod space;

use std::path::{Path, PathBuf};

use duckdb::Connection;

pub use batches::{Batch, LabelBatch, MunicipioBatch, Provenance, RejectBatch, Served};
pub use change_keys::key_history;
pub use changes::{ChangeSummary, PreviousDataset, PreviousHistory};
pub use loader::{FileCounts, LoadSummary, Loader, Session, SourceFile, Stored, UnknownCode};
pub use runs::{Keyed, RunWriter, Runs, Spill};

// Causes are not repeated in the messages: they are the `source`, printed after the message by
// the binaries (anyhow's `{:#}`). A full disk adds "no space left on device", the folder and its
// free space (`space`).
/// What can go wrong writing a dataset, in any of its steps.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{context}{no_space}")]
    Db {
        context: String,
        /// What a full disk adds to the context (the free space when it failed), else `""`.
        no_space: String,
        source: crate::space::DuckDbError,
    },
    #[error("{}{}", path.display(), crate::space::io_note(path, source))]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "counts do not reconcile for {file}: {read} rows read, but {loaded} loaded + {duplicates} duplicates + {rejected} rejected"
    )]
    Reconcile { file: String, read: u64, loaded: u64, duplicates: u64, rejected: u64 },
    #[error("a merge stopped because its table's appender failed")]
    Stopped,
    /// The merge stores `socios` in company order; the partners' states are read in it.
    #[error("socios is not stored in company order: {basico} after {previous}")]
    SociosOrder { basico: String, previous: String },
    /// The normalizer lets no such base through; the history's company sets cannot hold it.
    #[error("the history's {month} has a company base {basico:?} that is not 8 characters of [0-9A-Z]")]
    CompanyBase { month: String, basico: String },
    /// The normalizer lets no such CNPJ through: 14 characters of `[0-9A-Z]`, its base first.
    #[error("the history's {month} has a change of {cnpj:?} in company {basico:?} that cannot be keyed")]
    ChangeKey { month: String, basico: String, cnpj: Option<String> },
    #[error(transparent)]
    Index(#[from] cnpj_index::IndexError),
}

/// Names a failed DuckDB call by what it was doing (and what a full disk adds).
pub(crate) fn db(context: impl Into<String>) -> impl FnOnce(duckdb::Error) -> LoadError {
    let context = context.into();
    move |source| {
        let source = crate::space::DuckDbError(source);
        LoadError::Db { context, no_space: crate::space::db_note(&source), source }
    }
}

/// `ATTACH`es the DuckDB file at `path` as `alias`.
pub(crate) fn attach(conn: &Connection, path: &Path, alias: &str, read_only: bool) -> Result<(), LoadError> {
    let mode = if read_only { " (READ_ONLY)" } else { "" };
    let sql = format!("ATTACH '{}' AS {alias}{mode}", path.display().to_string().replace('\'', "''"));
    conn.execute_batch(&sql).map_err(db(format!("attaching {}", path.display())))
}
