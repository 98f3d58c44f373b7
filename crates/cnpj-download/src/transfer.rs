//! Transfers: a pool of 2-4 workers under a limit that drops when the server stalls parallel
//! streams, each file resumed with HTTP Range into `name.part`, retried with exponential backoff
//! and jitter, checked against the listing's size, verified as a zip, and only then renamed to its
//! final name and recorded in the manifest.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::listing::{ListingError, RemoteFile, Source, agent};
use crate::manifest::{Manifest, ManifestEntry};
use crate::throttle::{Parallelism, Throttle};

/// Where the tax-regime zips are looked for (by name, wherever the listing shows them: see
/// `Site::tax_regime_files`). Those in the month's own folder are fetched in any case, as every
/// zip of it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TaxRegime {
    #[default]
    Skip,
    /// In the month's own source, below the folder of its month folders.
    SameSource,
    /// In another source.
    Other(Source),
}

#[derive(Clone, Debug)]
pub struct DownloadOptions {
    pub source: Source,
    /// `YYYY-MM` or `latest` (the newest complete month).
    pub month: String,
    /// The month's folder: the zips, `.part` files and `manifest.json` go here.
    pub dest: PathBuf,
    /// Also fetch the tax-regime zips, found there.
    pub tax_regime: TaxRegime,
    /// Files transferred at once, at most (halved after repeated stalls).
    pub parallel: usize,
    /// Failed attempts tolerated per file before it is reported.
    pub retries: u32,
    /// A read that waits longer than this is a stall: the connection is dropped and resumed.
    pub stall: Duration,
    /// First backoff delay; doubled after each failure (with jitter), at most 30 s.
    pub backoff: Duration,
}

impl DownloadOptions {
    pub fn new(source: Source, month: impl Into<String>, dest: impl Into<PathBuf>) -> DownloadOptions {
        DownloadOptions {
            source,
            month: month.into(),
            dest: dest.into(),
            tax_regime: TaxRegime::Skip,
            parallel: 3,
            retries: 10,
            stall: Duration::from_secs(60),
            backoff: Duration::from_secs(1),
        }
    }
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DownloadSummary {
    pub month: String,
    /// Where the month came from (the share's token, its folder).
    pub source: String,
    pub downloaded: Vec<String>,
    /// Files already complete and verified by an earlier run.
    pub skipped: Vec<String>,
    pub bytes: u64,
    pub seconds: f64,
    /// The folders the tax-regime zips were found in (relative to the folder of the month folders).
    pub tax_regime_folders: Vec<String>,
    pub parallelism: Parallelism,
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error(transparent)]
    Listing(#[from] ListingError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} file(s) failed: {}", .0.len(), .0.iter().map(|(n, r)| format!("{n}: {r}")).collect::<Vec<_>>().join("; "))]
    Failed(Vec<(String, String)>),
}

/// Hooks for progress display; every method has a no-op default.
pub trait Observer: Sync {
    fn listed(&self, _month: &str, _files: usize, _bytes: u64) {}
    fn file_started(&self, _name: &str, _size: u64, _have: u64) {}
    fn file_progress(&self, _name: &str, _bytes: u64) {}
    fn file_finished(&self, _name: &str) {}
}

#[derive(Debug)]
pub struct NoObserver;
impl Observer for NoObserver {}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The month `opts.month` names: itself when it is one the source offers, or the newest complete one
/// for `latest`.
pub fn resolve_month(opts: &DownloadOptions) -> Result<String, DownloadError> {
    let agent = agent(opts.stall);
    Ok(opts.source.open(&agent)?.offer(&agent)?.month_files(&agent, &opts.month)?.0)
}

/// A listed file and the authorization to fetch it.
type Listed = (RemoteFile, Option<String>);

/// What the source lists for a month: its files and the tax-regime files, found where the
/// listing shows them.
struct Listing {
    month: String,
    /// The share the month came from (recorded in the manifest and the summary).
    source: String,
    files: Vec<Listed>,
    tax_regime_folders: Vec<String>,
}

/// Lists the month and its files (and the tax-regime files).
fn listed(agent: &ureq::Agent, opts: &DownloadOptions) -> Result<Listing, DownloadError> {
    let offer = opts.source.open(agent)?.offer(agent)?;
    let (month, files) = offer.month_files(agent, &opts.month)?;
    let site = offer.site;
    let mut files: Vec<Listed> = files.into_iter().map(|f| (f, site.authorization())).collect();
    let tax_site = match &opts.tax_regime {
        TaxRegime::Skip => None,
        TaxRegime::SameSource => Some(site.clone()),
        TaxRegime::Other(source) => Some(source.open(agent)?),
    };
    let mut tax_regime_folders = Vec::new();
    if let Some(tax_site) = tax_site {
        let extra: Vec<RemoteFile> = tax_site
            .tax_regime_files(agent, &month)?
            .into_iter()
            .filter(|t| !files.iter().any(|(f, _)| f.name == t.name))
            .collect();
        if extra.is_empty() && !files.iter().any(|(f, _)| is_tax_regime(f)) {
            tracing::warn!(source = %tax_site.describe(), "no tax-regime zip found");
        }
        tax_regime_folders =
            files.iter().map(|(f, _)| f).chain(&extra).filter(|f| is_tax_regime(f)).map(|f| f.folder.clone()).collect();
        tax_regime_folders.sort();
        tax_regime_folders.dedup();
        files.extend(extra.into_iter().map(|f| (f, tax_site.authorization())));
    }
    Ok(Listing { month, source: site.describe(), files, tax_regime_folders })
}

/// Whether `manifest` records `file` as downloaded: the size and modification time it was listed with.
fn recorded(manifest: &Manifest, file: &RemoteFile) -> bool {
    manifest.files.get(&file.name).is_some_and(|e| e.size == file.size && e.modified == file.modified)
}

/// The month and the names of its listed files (tax-regime files included) that the manifest in
/// `opts.dest` does not record with their listed size and modification time: what the source
/// published since that folder was downloaded. Nothing is fetched, and the local copies are not
/// looked at (zips deleted after their build are not news).
pub fn unrecorded(opts: &DownloadOptions) -> Result<(String, Vec<String>), DownloadError> {
    let Listing { month, files, .. } = listed(&agent(opts.stall), opts)?;
    let manifest = Manifest::load(&opts.dest);
    let fresh = files
        .into_iter()
        .filter(|(f, _)| manifest.month != month || !recorded(&manifest, f))
        .map(|(f, _)| f.name)
        .collect();
    Ok((month, fresh))
}

/// Downloads the month (and the tax-regime files) into `opts.dest`.
pub fn download(opts: &DownloadOptions, observer: &dyn Observer) -> Result<DownloadSummary, DownloadError> {
    let started = Instant::now();
    let agent = agent(opts.stall);
    let Listing { month, source, files, tax_regime_folders } = listed(&agent, opts)?;
    std::fs::create_dir_all(&opts.dest).map_err(|source| DownloadError::Io { path: opts.dest.clone(), source })?;
    observer.listed(&month, files.len(), files.iter().map(|(f, _)| f.size).sum());

    let mut manifest = Manifest::load(&opts.dest);
    if manifest.month != month {
        manifest = Manifest { source: source.clone(), month: month.clone(), files: Default::default() };
    } else if manifest.source != source {
        // A share's token rotates: files complete under the old one are kept by size and date.
        tracing::info!(before = %manifest.source, now = %source, "the source changed since the last run");
        manifest.source = source.clone();
    }
    let mut summary = DownloadSummary { month: month.clone(), source, tax_regime_folders, ..Default::default() };
    let mut queue = VecDeque::new();
    for (file, auth) in files {
        let done = recorded(&manifest, &file)
            && std::fs::metadata(opts.dest.join(&file.name)).is_ok_and(|m| m.len() == file.size);
        if done {
            summary.skipped.push(file.name);
        } else {
            queue.push_back((file, auth));
        }
    }
    let parallel = opts.parallel.clamp(1, 8);
    let throttle = Throttle::new(parallel, opts.stall);
    let queue = Mutex::new(queue);
    let manifest = Mutex::new(manifest);
    let results = Mutex::new(Vec::new());
    // The workers log to the caller's subscriber.
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| {
                let _log = tracing::dispatcher::set_default(&dispatch);
                loop {
                    let next = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
                    let Some((file, auth)) = next else { break };
                    let result = fetch_verified(&agent, &throttle, auth.as_deref(), &file, opts, observer);
                    if let Ok(entry) = &result {
                        let mut m = manifest.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        m.files.insert(file.name.clone(), entry.clone());
                        if let Err(e) = m.save(&opts.dest) {
                            tracing::error!(error = %e, "cannot write manifest.json");
                        }
                    }
                    results.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((file, result));
                }
            });
        }
    });
    let mut failures = Vec::new();
    for (file, result) in results.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        match result {
            Ok(_) => {
                summary.bytes += file.size;
                summary.downloaded.push(file.name);
            }
            Err(reason) => failures.push((file.name, reason)),
        }
    }
    summary.downloaded.sort();
    summary.skipped.sort();
    summary.seconds = started.elapsed().as_secs_f64();
    summary.parallelism = throttle.report();
    if failures.is_empty() {
        Ok(summary)
    } else {
        failures.sort();
        Err(DownloadError::Failed(failures))
    }
}

/// Fetches a file completely, verifies it, renames it into place. A file that fails verification
/// is downloaded once more from scratch before it is reported.
fn fetch_verified(
    agent: &ureq::Agent,
    throttle: &Throttle,
    auth: Option<&str>,
    file: &RemoteFile,
    opts: &DownloadOptions,
    observer: &dyn Observer,
) -> Result<ManifestEntry, String> {
    let part = opts.dest.join(format!("{}.part", file.name));
    let target = opts.dest.join(&file.name);
    let _ = std::fs::remove_file(&target);
    for round in 0..2 {
        fetch(agent, throttle, auth, file, &part, opts, observer)?;
        match verify(&part) {
            Ok(sha256) => {
                std::fs::rename(&part, &target).map_err(|e| format!("cannot rename {}: {e}", part.display()))?;
                observer.file_finished(&file.name);
                return Ok(ManifestEntry {
                    size: file.size,
                    modified: file.modified.clone(),
                    sha256,
                    verified_at: now(),
                });
            }
            Err(reason) => {
                let _ = std::fs::remove_file(&part);
                tracing::warn!(file = %file.name, %reason, round, "verification failed");
                if round == 1 {
                    observer.file_finished(&file.name);
                    return Err(format!("corrupt after a second download: {reason}"));
                }
            }
        }
    }
    unreachable!("two rounds return")
}

enum Attempt {
    Retry(String),
    /// No byte (or no connection) within the stall timeout: a retry, and a sign of a server
    /// overwhelmed by parallel streams.
    Stall(String),
    Fatal(String),
}

fn is_tax_regime(file: &RemoteFile) -> bool {
    cnpj_model::FileKind::recognise(&file.name, None) == Some(cnpj_model::FileKind::TaxRegime)
}

/// An I/O time-out somewhere in the error's chain.
fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(io.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock)
        {
            return true;
        }
        next = e.source();
    }
    false
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Brings `part` to the listing's size, resuming and retrying.
fn fetch(
    agent: &ureq::Agent,
    throttle: &Throttle,
    auth: Option<&str>,
    file: &RemoteFile,
    part: &Path,
    opts: &DownloadOptions,
    observer: &dyn Observer,
) -> Result<(), String> {
    let mut failures = 0;
    let mut last = String::new();
    observer.file_started(&file.name, file.size, len(part));
    loop {
        let have = len(part);
        if have == file.size {
            return Ok(());
        }
        if have > file.size {
            truncate(part)?;
            continue;
        }
        if failures > opts.retries {
            return Err(format!("gave up after {failures} failed attempts; last: {last}"));
        }
        let slot = throttle.acquire();
        let result = attempt(agent, auth, file, part, have, observer);
        if let Err(Attempt::Stall(_)) = &result {
            throttle.stalled(&slot);
        }
        drop(slot);
        match result {
            Ok(()) => {}
            Err(Attempt::Fatal(reason)) => return Err(reason),
            Err(Attempt::Retry(reason) | Attempt::Stall(reason)) => {
                failures += 1;
                tracing::info!(file = %file.name, %reason, failures, "retrying");
                last = reason;
                std::thread::sleep(backoff(opts.backoff, failures));
            }
        }
    }
}

fn truncate(part: &Path) -> Result<(), String> {
    File::create(part).map(drop).map_err(|e| format!("cannot write {}: {e}", part.display()))
}

/// `base · 2^(n−1)`, at most 30 s, times a jitter factor in [0.5, 1.5).
fn backoff(base: Duration, failures: u32) -> Duration {
    let exp = base.saturating_mul(1 << failures.saturating_sub(1).min(16)).min(Duration::from_secs(30));
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let mut x = u64::from(nanos) ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    exp.mul_f64(0.5 + (x % 1000) as f64 / 1000.0)
}

/// One try at the file from byte `have` on: the request, the partial file, the body.
fn attempt(
    agent: &ureq::Agent,
    auth: Option<&str>,
    file: &RemoteFile,
    part: &Path,
    have: u64,
    observer: &dyn Observer,
) -> Result<(), Attempt> {
    let response = call(agent, auth, file, part, have)?;
    let (out, written) = open_part(&response, file, part, have)?;
    copy_body(response, out, written, file, part, observer)
}

/// Asks for the file from byte `have` on; a refusal is a retry, a stall or fatal.
fn call(
    agent: &ureq::Agent,
    auth: Option<&str>,
    file: &RemoteFile,
    part: &Path,
    have: u64,
) -> Result<ureq::Response, Attempt> {
    let mut request = agent.get(&file.url);
    if let Some(auth) = auth {
        request = request.set("Authorization", auth);
    }
    if have > 0 {
        request = request.set("Range", &format!("bytes={have}-"));
    }
    match request.call() {
        Ok(r) => Ok(r),
        Err(ureq::Error::Status(416, _)) => {
            truncate(part).map_err(Attempt::Fatal)?;
            Err(Attempt::Retry(format!(
                "range {have}- not satisfiable: the server's file is smaller than the listing's {} bytes",
                file.size
            )))
        }
        Err(ureq::Error::Status(code, _)) if code >= 500 || code == 429 || code == 408 => {
            Err(Attempt::Retry(format!("HTTP {code}")))
        }
        Err(ureq::Error::Status(code, _)) => Err(Attempt::Fatal(format!("HTTP {code} for {}", file.url))),
        Err(ureq::Error::Transport(e)) if timed_out(&e) => Err(Attempt::Stall(e.to_string())),
        Err(e) => Err(Attempt::Retry(e.to_string())),
    }
}

/// The partial file to write the response into, and the bytes it already holds: appended to
/// for a range from `have`, started over when the server ignores the range.
fn open_part(response: &ureq::Response, file: &RemoteFile, part: &Path, have: u64) -> Result<(File, u64), Attempt> {
    match response.status() {
        206 => {
            let start = response
                .header("content-range")
                .and_then(|v| v.strip_prefix("bytes "))
                .and_then(|v| v.split('-').next())
                .and_then(|v| v.parse::<u64>().ok());
            if start != Some(have) {
                truncate(part).map_err(Attempt::Fatal)?;
                return Err(Attempt::Retry(format!("the server answered range {start:?} to a request from {have}")));
            }
            let f = OpenOptions::new().append(true).open(part).map_err(|e| Attempt::Fatal(e.to_string()))?;
            Ok((f, have))
        }
        200 => {
            // The server ignores Range: start over.
            let f = File::create(part).map_err(|e| Attempt::Fatal(e.to_string()))?;
            let full = response.header("content-length").and_then(|v| v.parse::<u64>().ok());
            if full.is_some_and(|n| n != file.size) {
                return Err(Attempt::Retry(format!(
                    "the server has {} bytes, the listing says {}",
                    full.unwrap_or_default(),
                    file.size
                )));
            }
            Ok((f, 0))
        }
        other => Err(Attempt::Retry(format!("unexpected HTTP {other}"))),
    }
}

/// Copies the response's body into `out` (holding `written` bytes), never past the listing's size.
fn copy_body(
    response: ureq::Response,
    mut out: File,
    mut written: u64,
    file: &RemoteFile,
    part: &Path,
    observer: &dyn Observer,
) -> Result<(), Attempt> {
    let mut body = response.into_reader();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if timed_out(&e) => return Err(Attempt::Stall(format!("stalled at byte {written}: {e}"))),
            Err(e) => return Err(Attempt::Retry(format!("transfer broke at byte {written}: {e}"))),
        };
        out.write_all(&buf[..n]).map_err(|e| Attempt::Fatal(format!("cannot write {}: {e}", part.display())))?;
        written += n as u64;
        observer.file_progress(&file.name, written);
        if written > file.size {
            truncate(part).map_err(Attempt::Fatal)?;
            return Err(Attempt::Retry(format!("the server sent more than the listing's {} bytes", file.size)));
        }
    }
    out.flush().map_err(|e| Attempt::Fatal(e.to_string()))?;
    if written < file.size {
        return Err(Attempt::Retry(format!("the transfer ended at byte {written} of {}", file.size)));
    }
    Ok(())
}

/// Reads the zip's central directory and every member to its end (the zip crate checks each CRC),
/// then hashes the file. Returns the SHA-256 in hex.
fn verify(path: &Path) -> Result<String, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| format!("not a readable zip: {e}"))?;
    for i in 0..archive.len() {
        let mut member = archive.by_index(i).map_err(|e| format!("member {i}: {e}"))?;
        let name = member.name().map(|n| n.to_string()).unwrap_or_default();
        std::io::copy(&mut member, &mut std::io::sink()).map_err(|e| format!("member {name}: {e}"))?;
    }
    let mut hasher = Sha256::new();
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).map_err(|e| e.to_string())?);
    std::io::copy(&mut reader, &mut hasher).map_err(|e| e.to_string())?;
    Ok(hex::encode(hasher.finalize()))
}
