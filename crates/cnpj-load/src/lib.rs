//! Writes a registry dataset into DuckDB: normalized rows are appended as Arrow record batches
//! into staging tables, `sql/duckdb/transform.sql` builds the served tables (one winner per key,
//! first in reading order) and their indexes, and the finished file is renamed over the target
//! only when every count reconciles. Nothing else in the workspace writes a database.

mod batches;
mod loader;
pub mod postgres;

pub use batches::{
    Batch, EmpresaBatch, EstabelecimentoBatch, LabelBatch, MunicipioBatch, Provenance, RegimeBatch, RejectBatch,
    SimplesBatch, SocioBatch,
};
pub use loader::{FileCounts, LoadError, LoadSummary, Loader, SourceFile, UnknownCode};
