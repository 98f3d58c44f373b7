//! What a build is asked to do ([`BuildOptions`]), and how its one memory limit is shared out
//! ([`Budget`]).

use std::path::PathBuf;

use crate::guard::Thresholds;

#[derive(Clone, Debug)]
pub struct BuildOptions {
    pub input: PathBuf,
    pub db: PathBuf,
    /// The month of the build (`YYYY-MM`), over the input folder's name and the main tables' date
    /// stamp (see [`crate::report::source_month`]).
    pub month: Option<String>,
    /// The memory the build may use, in bytes: DuckDB's limit, the sort buffers and the search
    /// index's postings are all derived from it (see [`Budget`]).
    pub memory_limit: u64,
    /// Rows per Arrow batch handed to DuckDB.
    pub batch_rows: usize,
    /// Bytes kept of one record; a longer record is a reject (see `cnpj_parse::Records`).
    pub max_record_bytes: usize,
    /// Build a month that fails the completeness checks (`checks`), with warnings.
    pub accept_incomplete: bool,
    /// Leave out main-table members whose date stamp is not the delivery's, with a warning.
    pub ignore_stale: bool,
    /// Where to write the build report (JSON; its HTML page beside it, see `page_path`), before the
    /// dataset is renamed into place.
    pub report: Option<PathBuf>,
    /// The previous month's dataset: the build records what changed since (its `changes`) and
    /// refuses a month that looks broken next to it (`guard`).
    pub previous: Option<PathBuf>,
    /// Months of change history kept, this one included.
    pub keep_months: u32,
    /// Build a month the guard finds anomalies in, listing them in the report.
    pub accept_anomalies: bool,
    pub thresholds: Thresholds,
}

impl BuildOptions {
    pub fn new(input: impl Into<PathBuf>, db: impl Into<PathBuf>) -> BuildOptions {
        BuildOptions {
            input: input.into(),
            db: db.into(),
            month: None,
            memory_limit: 2_000_000_000,
            batch_rows: 32_768,
            max_record_bytes: cnpj_parse::DEFAULT_MAX_RECORD_BYTES,
            accept_incomplete: false,
            ignore_stale: false,
            report: None,
            previous: None,
            keep_months: 24,
            accept_anomalies: false,
            thresholds: Thresholds::default(),
        }
    }
}

/// How the one memory limit is shared: what is left after a fixed allowance for the process
/// itself (code, threads, zip buffers) goes 45 % to DuckDB, 30 % to the two members' sort
/// buffers (rows and their index), 15 % to the search index's postings of the four feeds that can
/// run at once, and 10 % to the Arrow batches in flight between the merges and DuckDB's
/// appenders (which sets their size). Measured in the build benchmark (peak RSS against the
/// limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// DuckDB's `memory_limit`, in bytes.
    pub duckdb: u64,
    /// One member's sort buffer (two members are read at once).
    pub sort_buffer: usize,
    /// One feed's postings before they are spilled.
    pub postings: usize,
    /// Rows per Arrow batch.
    pub batch_rows: usize,
}

/// What the process needs besides the shared buffers.
const PROCESS_BYTES: u64 = 120_000_000;
/// Batches in flight at most: four table halves stored at once (the establishments' two, and
/// another table's two while they finish), each with two queued, one being appended and one
/// being filled.
const BATCHES_IN_FLIGHT: u64 = 16;
/// An establishment's row in an Arrow batch (the widest table), with its offsets.
const BATCH_ROW_BYTES: u64 = 400;

impl Budget {
    pub fn of(limit: u64) -> Budget {
        let shared = limit.saturating_sub(PROCESS_BYTES).max(64 << 20);
        Budget {
            duckdb: shared * 45 / 100,
            sort_buffer: (shared * 3 / 20) as usize,
            // The postings' own estimate runs about half of what they take.
            postings: (shared * 15 / 100 / 8) as usize,
            batch_rows: (shared / 10 / (BATCHES_IN_FLIGHT * BATCH_ROW_BYTES)).clamp(1024, 32_768) as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_shares_the_limit() {
        let b = Budget::of(2_000_000_000);
        assert_eq!(b.duckdb, 846_000_000);
        let batches = BATCHES_IN_FLIGHT * BATCH_ROW_BYTES * b.batch_rows as u64;
        let shared = b.duckdb + 2 * b.sort_buffer as u64 + 4 * (2 * b.postings as u64) + batches;
        assert!((1_870_000_000..=1_880_000_000).contains(&shared), "{shared}");
        assert_eq!(Budget::of(500_000_000).batch_rows, 5_937, "smaller batches under a small limit");
        assert_eq!(Budget::of(100_000_000_000).batch_rows, 32_768, "and no bigger than they pay off");
        assert!(Budget::of(0).sort_buffer > 0, "a floor for absurd limits");
    }
}
