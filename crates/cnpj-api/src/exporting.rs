//! The export jobs' settings (`serve --export-*`) and formats, which the routes (`crate::jobs`),
//! the runner (`crate::runner`) and the state (`crate::server`) share.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The formats of an export, by name, with their file's extension and media type.
pub const FORMATS: [(&str, &str, &str); 3] = [
    ("csv", "csv", "text/csv; charset=utf-8"),
    ("parquet", "parquet", "application/vnd.apache.parquet"),
    ("jsonl", "jsonl", "application/x-ndjson"),
];

/// What mails a job's owner its link once it is done.
pub type ExportMail = Box<dyn Fn(&cnpj_accounts::ExportJob, &cnpj_accounts::Person) + Send + Sync>;

/// The runner's settings (`serve --export-*`).
#[derive(Debug)]
pub struct Exports {
    /// Where the files are written (shared by replicas).
    pub dir: PathBuf,
    /// How long a file is kept once written.
    pub ttl: Duration,
    /// How long a claim holds a job without renewal.
    pub lease: Duration,
    /// Between two looks for jobs.
    pub interval: Duration,
    /// Jobs run at once by this process (0: it runs none, its replicas do).
    pub workers: usize,
    /// Woken when a job is accepted here.
    pub wake: tokio::sync::Notify,
    /// This process's name in leases.
    pub(crate) owner: String,
    /// The users whose job runs here.
    running: Mutex<Vec<i64>>,
}

impl Exports {
    pub fn new(dir: PathBuf, ttl: Duration, lease: Duration, interval: Duration, workers: usize) -> Exports {
        let mut bytes = [0u8; 8];
        let _ = getrandom::fill(&mut bytes);
        let owner = format!("{}-{}", std::process::id(), bytes.iter().map(|b| format!("{b:02x}")).collect::<String>());
        Exports {
            dir,
            ttl,
            lease,
            interval,
            workers,
            wake: tokio::sync::Notify::new(),
            owner,
            running: Mutex::default(),
        }
    }

    pub(crate) fn running(&self) -> std::sync::MutexGuard<'_, Vec<i64>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for Exports {
    fn default() -> Exports {
        let dir = std::env::temp_dir().join("cnpj-exports");
        Exports::new(dir, Duration::from_secs(7 * 86_400), Duration::from_secs(60), Duration::from_secs(2), 2)
    }
}
