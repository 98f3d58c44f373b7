//! The search index beside a DuckDB dataset (`<dataset>.search`): every search filter as
//! compressed bitmaps (`roaring`) of establishment ordinals, so that a search is a few bitmap
//! operations instead of a scan. A total is the cardinality of an intersection, a page a select
//! by rank; the page's CNPJs come from a column of the file. The file is memory-mapped: the
//! server holds the directory, and the pages it touches are the kernel's to keep or drop.
//!
//! Its parts, the format's writer and reader side by side: `format` (the file byte by byte: the
//! ordinals, the columns, the posting tables and their keys, the two encodings of a bitmap, the
//! directory, the version), `write` (the postings gathered while the build runs, spilled, and
//! merged into the file), `read` (the file mapped, its directory parsed, its bitmaps read, checked
//! and the big ones kept), `terms` (a folded text term found in the words and phrase keys),
//! `plan` (a search's conditions resolved and intersected, a date range read as whole decades and
//! its cheapest edges, a page found by rank) and `partners` (a partners' search, over partner
//! ordinals).

mod format;
mod partners;
mod plan;
mod read;
mod terms;
mod write;

use std::path::{Path, PathBuf};

pub use format::Flag;
pub use format::UPPER;
pub(crate) use format::{CAPITAL_LIMIT, Field, HEAD_OFFICE, PARTNER_ID_BYTES, Table, capital_key, capital_range, pack};
pub use partners::PartnerConditions;
pub use plan::{Condition, Matches};
pub use read::SearchIndex;
pub(crate) use write::{HalfColumns, PartnerColumn, Postings, write_index};

/// The search index of the dataset at `dataset`.
pub fn search_index_path(dataset: &Path) -> PathBuf {
    let mut name = dataset.as_os_str().to_owned();
    name.push(".search");
    PathBuf::from(name)
}

#[derive(Debug, thiserror::Error)]
pub enum SearchIndexError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}
