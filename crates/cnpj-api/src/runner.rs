//! The export jobs' runner, a task of the API process (every replica runs one): each tick (every
//! `interval`, or at once when a job was accepted here) expired files are deleted (their jobs
//! marked `expired`), then, while fewer than `workers` jobs run here, the next job is claimed
//! under a lease (`cnpj_accounts`: one user's jobs one at a time, over all replicas) and run on
//! threads of its own, niced so that an export never takes the API's cores from its requests: two
//! read the search's records in CNPJ order and render them (`Store::each_match`: CSV and JSON
//! Lines text, or Parquet batches by `cnpj_store::ParquetColumns`), bounded queues between them
//! and the job's thread, which writes; another renews the lease (with the rows written) until the
//! job ends. A job writes `.<id>.<ext>.part` in the export folder (shared by replicas), renamed to
//! `<id>.<ext>` once whole. Its rows are checked against those counted when it was accepted; any
//! failure fails the job and gives its credits back (once). A process that dies leaves its job to
//! the next claim once the lease ran out: the job runs again, charged once.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use cnpj_accounts::ExportJob;
use cnpj_model::{DetailRecord, Locale};
use cnpj_store::Store;
use serde_json::Value;

use crate::exporting::{ExportMail, FORMATS};
use crate::params::{self, Params};
use crate::server::{AppState, Shared};

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The CSV's columns: the people's export's (`cnpj_pages::csv_columns`), of a search item.
pub fn csv_columns() -> Vec<String> {
    cnpj_pages::csv_columns(&DetailRecord::default().search_item())
}

/// Starts the runner.
pub fn spawn(state: Shared) {
    tokio::spawn(async move {
        loop {
            let s = Arc::clone(&state);
            if let Err(e) = tokio::task::spawn_blocking(move || tick(&s)).await {
                tracing::error!(error = %e, "export jobs: the runner panicked");
            }
            let wake = state.exports.wake.notified();
            let _ = tokio::time::timeout(state.exports.interval, wake).await;
        }
    });
}

/// Expires old files, then claims and starts jobs while there is room (blocking).
fn tick(state: &Shared) {
    let exports = &state.exports;
    match state.accounts().expire_exports(now()) {
        Ok(files) => {
            for file in files {
                match std::fs::remove_file(exports.dir.join(&file)) {
                    Ok(()) => tracing::info!(file, "export expired: file deleted"),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => tracing::warn!(file, error = %e, "an expired export's file could not be deleted"),
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "export jobs: the accounts store failed"),
    }
    loop {
        let busy = exports.running().clone();
        if busy.len() >= exports.workers {
            return;
        }
        let lease = exports.lease.as_secs() as i64;
        let job = match state.accounts().claim_export(&exports.owner, lease, &busy) {
            Ok(Some(job)) => job,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "export jobs: claiming failed");
                return;
            }
        };
        exports.running().push(job.user_id);
        let s = Arc::clone(state);
        let started = std::thread::Builder::new().name("export".into()).spawn(move || {
            yield_to_requests();
            run(&s, &job);
            let mut running = s.exports.running();
            if let Some(i) = running.iter().position(|u| *u == job.user_id) {
                running.swap_remove(i);
            }
            s.exports.wake.notify_one();
        });
        if let Err(e) = started {
            tracing::error!(error = %e, "export jobs: no thread for a job");
            exports.running().pop();
            return;
        }
    }
}

/// The niceness of a job's threads (the job's own, which writes, and its readers, which inherit
/// it), the lowest priority there is: on cores the API's requests want, the scheduler gives a job
/// what they leave, so that an export never starves them (issue 42: detail lookups p99 ≤ 10 ms
/// while a job runs). At 10, with the rows rendered on two threads, a job took enough of the
/// cores for detail lookups' p99 to reach 14–16 ms at 1.0 (BENCHMARKS.md, "Export jobs at 1.0,
/// third pass").
const JOB_NICE: i32 = 19;

/// Lowers the calling thread's priority to [`JOB_NICE`] (Linux: a thread's own niceness).
fn yield_to_requests() {
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), JOB_NICE) {
        tracing::warn!(error = %e, "export job: its thread's priority could not be lowered");
    }
}

/// Runs a claimed job to its end (done, or failed and refunded), its lease renewed meanwhile.
fn run(state: &AppState, job: &ExportJob) {
    let exports = &state.exports;
    let written = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let renewal = {
        let (accounts, id, owner) = (Arc::clone(state.accounts()), job.id.clone(), exports.owner.clone());
        let (lease, written) = (exports.lease, Arc::clone(&written));
        std::thread::spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(lease / 3) {
                let rows = written.load(std::sync::atomic::Ordering::SeqCst);
                match accounts.renew_export(&id, &owner, lease.as_secs() as i64, rows) {
                    Ok(true) => {}
                    Ok(false) => return tracing::warn!(id, "export job: its lease was lost"),
                    Err(e) => tracing::warn!(id, error = %e, "export job: renewing its lease failed"),
                }
            }
        })
    };
    let started = std::time::Instant::now();
    let outcome = write(state, job, &written);
    drop(stop);
    let _ = renewal.join();
    let accounts = state.accounts();
    let recorded = match outcome {
        Ok((file, bytes, rows)) => {
            let ttl = exports.ttl.as_secs() as i64;
            let seconds = started.elapsed().as_secs_f64();
            tracing::info!(
                id = job.id,
                rows,
                bytes,
                seconds,
                rows_per_second = rows as f64 / seconds.max(1e-6),
                "export job done"
            );
            metrics::counter!("cnpj_export_jobs_total", "outcome" => "done").increment(1);
            accounts.finish_export(&job.id, &exports.owner, &file, bytes as i64, rows as i64, ttl)
        }
        Err(error) => {
            tracing::warn!(id = job.id, error, "export job failed: its credits are refunded");
            metrics::counter!("cnpj_export_jobs_total", "outcome" => "failed").increment(1);
            let message = "The export failed; its credits were refunded.";
            accounts.fail_export(&job.id, Some(&exports.owner), message).map(|_| false)
        }
    };
    match recorded {
        Err(e) => tracing::error!(id = job.id, error = %e, "export job: recording its end failed (it runs again)"),
        Ok(true) => {
            if let (Some(mail), Ok(Some(person))) = (&state.exports_mail, accounts.person(job.user_id)) {
                mail(job, &person);
            }
        }
        Ok(false) => {}
    }
}

/// Mails a job's owner, when they have an email, the link to its page.
pub fn mail(mailer: cnpj_pages::Mailer) -> ExportMail {
    Box::new(move |job, person| {
        let Some(email) = &person.email else { return };
        if let Err(error) = mailer.send_export(person.locale.as_deref(), email, &job.id) {
            tracing::warn!(id = job.id, error, "export job: its mail could not be sent");
        }
    })
}

/// Writes the job's file: `(its name, bytes, rows)`, or why not (the part file removed).
fn write(
    state: &AppState,
    job: &ExportJob,
    written: &std::sync::atomic::AtomicI64,
) -> Result<(String, u64, u64), String> {
    let exports = &state.exports;
    let store = state.served().store;
    if store.build_id() != job.build_id {
        return Err("another dataset is served since the job was accepted".into());
    }
    let pairs: Vec<(String, String)> = match serde_json::from_str::<Value>(&job.filters) {
        Ok(Value::Object(map)) => {
            map.into_iter().map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned())).collect()
        }
        _ => return Err("the job's filters are not an object".into()),
    };
    let filters = params::search_filters(&Params::from_pairs(pairs), state.partners).map_err(|e| format!("{e:?}"))?;
    let locale: Locale = job.locale.parse().map_err(|_| "the job's locale".to_owned())?;
    let (_, extension, _) = FORMATS.iter().find(|(name, ..)| *name == job.format).ok_or("the job's format")?;
    std::fs::create_dir_all(&exports.dir).map_err(|e| format!("{}: {e}", exports.dir.display()))?;
    let name = format!("{}.{extension}", job.id);
    let part = exports.dir.join(format!(".{name}.part"));
    let rows = match job.format.as_str() {
        "parquet" => parquet(&store, &filters, locale, &part, written),
        format => lines(&store, &filters, locale, format == "csv", &part, written),
    };
    let checked = rows.and_then(|rows| {
        if rows as i64 == job.rows {
            Ok(rows)
        } else {
            Err(format!("{rows} rows written where {} were counted", job.rows))
        }
    });
    let rows = match checked {
        Ok(rows) => rows,
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            return Err(e);
        }
    };
    written.store(rows as i64, std::sync::atomic::Ordering::SeqCst);
    let bytes = std::fs::metadata(&part).map(|m| m.len()).map_err(|e| e.to_string())?;
    std::fs::rename(&part, exports.dir.join(&name)).map_err(|e| format!("renaming the file: {e}"))?;
    Ok((name, bytes, rows))
}

/// A job's file, written to disk as it goes: every [`PACED_BYTES`] the kernel is told that the
/// pages written are not needed (`POSIX_FADV_DONTNEED`: their writeback starts at once, without
/// waiting for it, and those of the window before, written back by then, leave the page cache).
/// Left to the kernel, a job's gigabyte of dirty pages was written back in bursts, behind which
/// the accounts store's checkpoints (and with them the requests that charge credits) waited, and
/// it crowded the dataset's pages out of the cache.
struct Paced {
    file: std::fs::File,
    written: u64,
    /// Where the window before the last one started.
    dropped: u64,
}

/// Bytes of a job's file between two advices: the writeback each starts is what a request's
/// own write to the disk (the accounts store's checkpoint) may wait behind. At 8 MB, detail
/// lookups' p99 under a CSV job reached 16 ms at 1.0.
const PACED_BYTES: u64 = 1 << 20;

impl Paced {
    fn create(path: &Path) -> Result<std::io::BufWriter<Paced>, String> {
        let file = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(std::io::BufWriter::with_capacity(1 << 20, Paced { file, written: 0, dropped: 0 }))
    }

    /// Advises that the bytes from `self.dropped` on are not needed.
    fn advise(&self) -> std::io::Result<()> {
        let len = std::num::NonZeroU64::new(self.written - self.dropped);
        Ok(rustix::fs::fadvise(&self.file, self.dropped, len, rustix::fs::Advice::DontNeed)?)
    }
}

impl Write for Paced {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(bytes)?;
        self.written += n as u64;
        if self.written - self.dropped >= 2 * PACED_BYTES {
            self.advise()?;
            self.dropped = self.written - PACED_BYTES;
        }
        Ok(n)
    }

    /// Syncs the file, and drops its pages.
    fn flush(&mut self) -> std::io::Result<()> {
        rustix::fs::fdatasync(&self.file)?;
        self.dropped = 0;
        self.advise()
    }
}

/// Hands the search's chunks, rendered by `render` on the threads that read them, to `write` on
/// this thread (the job's), the rows counted in `written` as they go. Reading and rendering a row
/// take several times what writing it does: this thread is left only the writing.
fn each_rendered<T: Send>(
    store: &Store,
    filters: &cnpj_store::SearchFilters,
    locale: Locale,
    written: &std::sync::atomic::AtomicI64,
    render: &(dyn Fn(&[DetailRecord]) -> Result<T, cnpj_store::StoreError> + Sync),
    mut write: impl FnMut(T) -> Result<(), String>,
) -> Result<u64, String> {
    let mut failed = None;
    let mut rows = 0u64;
    let read = store.each_match(filters, locale, render, &mut |n, rendered| {
        write(rendered).map_err(|e| {
            failed = Some(e);
            cnpj_store::StoreError::Query { context: "export", error: "the file could not be written".into() }
        })?;
        rows += n as u64;
        written.store(rows as i64, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    });
    match (read, failed) {
        (_, Some(e)) => Err(e),
        (Err(e), None) => Err(e.to_string()),
        (Ok(read), None) => Ok(read),
    }
}

/// Writes the search's records to `part` as CSV (`csv`: what the people's export writes of the
/// same items) or as JSON Lines (one search item a line, as the API serves it).
fn lines(
    store: &Store,
    filters: &cnpj_store::SearchFilters,
    locale: Locale,
    csv: bool,
    part: &Path,
    written: &std::sync::atomic::AtomicI64,
) -> Result<u64, String> {
    let mut out = Paced::create(part)?;
    let io = |e: std::io::Error| e.to_string();
    if csv {
        out.write_all(cnpj_pages::csv_header(&csv_columns()).as_bytes()).map_err(io)?;
    }
    let render = |records: &[DetailRecord]| {
        let mut text = String::with_capacity(records.len() * 512);
        for record in records {
            if csv {
                cnpj_pages::write_csv_line(&record.search_item(), &mut text);
            } else {
                text.push_str(&record.search_item().to_string());
                text.push('\n');
            }
        }
        Ok(text)
    };
    let rows =
        each_rendered(store, filters, locale, written, &render, |text| out.write_all(text.as_bytes()).map_err(io))?;
    out.flush().map_err(io)?;
    Ok(rows)
}

/// Writes the search's records to `part` as Parquet (`cnpj_store::ParquetWriter`), the batches
/// made on the threads that read the records.
fn parquet(
    store: &Store,
    filters: &cnpj_store::SearchFilters,
    locale: Locale,
    part: &Path,
    written: &std::sync::atomic::AtomicI64,
) -> Result<u64, String> {
    let columns = cnpj_store::ParquetColumns::new(&csv_columns());
    let mut writer = cnpj_store::ParquetWriter::create(Paced::create(part)?, &columns).map_err(|e| e.to_string())?;
    let render = |records: &[DetailRecord]| columns.batch(records);
    let rows = each_rendered(store, filters, locale, written, &render, |batch| {
        writer.write(&batch).map_err(|e| e.to_string())
    })?;
    match writer.finish().map_err(|e| e.to_string())? {
        n if n == rows => Ok(rows),
        n => Err(format!("{n} rows in the Parquet file where {rows} were read")),
    }
}
