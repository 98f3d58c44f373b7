//! Downloads one month of RFB dumps, reliably: finds today's share (its token read from the
//! landing page's redirect when none is given; the month folders under a path prefix inside it,
//! or found by a bounded walk of the share when the prefix holds none) or the legacy Apache
//! listing, lists the months and files, finds the tax-regime zips wherever the listing shows them,
//! fetches 2-4 files at a time (fewer once the server stalls parallel streams) into `.part` files
//! with HTTP Range resume, retries with exponential backoff and jitter, detects stalls, checks the
//! size against the listing, verifies every zip (central directory and every member's CRC) before
//! it takes its final name, and records size, modification time, SHA-256 and verification time in
//! `manifest.json`. The only crate of the workspace that touches the network.

mod listing;
mod locate;
mod manifest;
mod throttle;
mod transfer;

pub use listing::{ListingError, RemoteFile, Source};
pub use manifest::{Manifest, ManifestEntry};
pub use throttle::{Parallelism, ParallelismDrop};
pub use transfer::{
    DownloadError, DownloadOptions, DownloadSummary, NoObserver, Observer, TaxRegime, download, resolve_month,
    unrecorded,
};
