//! Downloads one month of RFB dumps, reliably: lists the months and files of the Nextcloud WebDAV
//! share (or of the legacy Apache listing), fetches 2-4 files at a time into `.part` files with
//! HTTP Range resume, retries with exponential backoff and jitter, detects stalls, checks the size
//! against the listing, verifies every zip (central directory and every member's CRC) before it
//! takes its final name, and records size, modification time, SHA-256 and verification time in
//! `manifest.json`. The only crate of the workspace that touches the network.

mod listing;
mod manifest;
mod transfer;

pub use listing::{ListingError, RemoteFile, Source};
pub use manifest::{Manifest, ManifestEntry};
pub use transfer::{
    DownloadError, DownloadOptions, DownloadSummary, NoObserver, Observer, download, resolve_month, unrecorded,
};
