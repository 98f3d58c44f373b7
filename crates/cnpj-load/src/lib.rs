//! Writes a registry dataset into DuckDB: the main tables' rows are sorted into runs on disk and
//! merged (one winner per key, first in reading order) straight into the served tables; small
//! inputs (labels, municipalities, rejects) go through staging tables and
//! `sql/duckdb/transform.sql`, and the analysts' views are created (`sql/duckdb/views.sql`); the
//! finished file is renamed over the target only when every count reconciles. Nothing else in the
//! workspace writes a database.

mod batches;
mod changes;
mod loader;
pub mod postgres;
mod runs;
mod space;

pub use batches::{Batch, LabelBatch, MunicipioBatch, Provenance, RejectBatch};
pub use changes::{ChangeSummary, PreviousDataset, PreviousHistory};
pub use loader::{FileCounts, LoadError, LoadSummary, Loader, Session, SourceFile, Stored, UnknownCode};
pub use runs::{Keyed, RunWriter, Runs, Served, Spill};
