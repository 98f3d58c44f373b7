//! The build pipeline: a folder of one month's RFB zips in, a registry dataset and its report out.
//!
//! Lookups are read first (they label everything else); then every main member streams through
//! parse → normalize → Arrow batches on a rayon pool, into one writer thread that appends them to
//! the loader. Memory is bounded by the batch size and the channel depth, never by the input.

mod checks;
mod error;
mod guard;
mod options;
mod page;
mod pipeline;
mod report;

pub use checks::{MAX_REJECT_PERCENT, MIN_REJECTS, writable_file};
pub use cnpj_parse::DEFAULT_MAX_RECORD_BYTES;
pub use error::{BuildError, CheckError};
pub use guard::Thresholds;
pub use options::BuildOptions;
pub use page::page_path;
pub use pipeline::{NoObserver, Observer, build};
pub use report::{Anomaly, BuildReport, CapitalNotLoaded, Count, FileReport, MonthOverMonth, TableThenNow, month_arg};
