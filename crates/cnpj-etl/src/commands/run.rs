//! `cnpj-etl run`, the monthly refresh: download the month (resuming), build it over the served
//! dataset as its previous month, guard, swap, then publish and export; nothing when the source
//! has nothing new.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use cnpj_build::{BuildOptions, BuildReport};

use super::build::build_month;
use super::download::fetch;
use super::export::{export_dataset, producer};
use super::publish::publish_dataset;
use super::writable;
use crate::cli::{PostgresArgs, RunArgs, RunExportArgs};

pub fn run(args: RunArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    check_outputs(&args)?;
    // Resolve `latest` first, so that a resumed run finds the month's folder again.
    let month = cnpj_download::resolve_month(&args.source.options(&args.month, args.work.clone()))?;
    let month_dir = args.work.join(&month);
    let download = args.source.options(&month, month_dir.clone());
    if !args.force
        && let Some(code) = nothing_new(&args.db, &month, &download, &args.pg, args.pg_streams, quiet)?
    {
        // The month's export, when asked for and not written yet.
        let pending = args.export.as_ref().map(|dir| dir.join(&month));
        return match pending.filter(|out| !out.join(cnpj_store::MANIFEST_FILE).is_file()) {
            Some(out) => {
                export_dataset(&month_export(&args.db, &out, &args.export_as), quiet)?;
                Ok(ExitCode::SUCCESS)
            }
            None => Ok(code),
        };
    }
    fetch(&download, quiet)?;
    if let Err(code) = build_over_db(&args, &month, &month_dir, quiet)? {
        return Ok(code);
    }
    if args.pg.postgres.is_some() {
        publish_dataset(&args.db, &args.pg, args.pg_streams, quiet)?;
    }
    if let Some(dir) = &args.export {
        let out = dir.join(&month);
        // A month built again replaces its export (that of the dataset it replaced).
        if out.exists() {
            std::fs::remove_dir_all(&out).with_context(|| format!("replacing {}", out.display()))?;
        }
        export_dataset(&month_export(&args.db, &out, &args.export_as), quiet)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Every output is checked before anything is downloaded.
fn check_outputs(args: &RunArgs) -> anyhow::Result<()> {
    let work = &args.work;
    std::fs::create_dir_all(work).with_context(|| format!("--work {}: cannot create it", work.display()))?;
    writable(&work.join("build-report.json"), "--work")?;
    writable(&args.db, "--db")?;
    if let Some(dir) = &args.export {
        std::fs::create_dir_all(dir).with_context(|| format!("--export {}: cannot create it", dir.display()))?;
    }
    Ok(())
}

/// Builds the month in `month_dir` over `--db`, the dataset it replaces being its previous month,
/// and keeps the month's report (see [`MonthReports`]); `Err` is the exit code of a month the
/// guard refused.
fn build_over_db(
    args: &RunArgs,
    month: &str,
    month_dir: &Path,
    quiet: bool,
) -> anyhow::Result<Result<BuildReport, ExitCode>> {
    let reports = MonthReports::of(month_dir);
    let opts = BuildOptions {
        month: Some(month.to_owned()),
        memory_limit: args.memory_limit,
        report: Some(reports.attempt.clone()),
        ..BuildOptions::new(month_dir, &args.db)
    };
    // The dataset about to be replaced is the previous month.
    let previous = args.db.is_file().then(|| args.db.clone());
    let built = build_month(&args.guard.apply(previous, args.checks.apply(opts)), quiet, Some(&reports.built));
    reports.settle(&built)?;
    built
}

/// The export of `run --export`: the whole dataset `db` into `out`.
fn month_export(db: &Path, out: &Path, how: &RunExportArgs) -> cnpj_store::ExportOptions {
    cnpj_store::ExportOptions {
        db: db.to_owned(),
        out: out.to_owned(),
        format: how.export_format.into(),
        locale: how.export_locale,
        partition_by_uf: how.export_partition_by.is_some(),
        filters: Default::default(),
        memory_limit: 1 << 30,
        producer: producer(),
    }
}

/// `run`'s check before any download: when `db` was built from `month` and the source lists no
/// file that the month folder's manifest does not record as downloaded, the exit code of nothing
/// new, after publishing `db` into Postgres when the schema serves another build (a run whose
/// publication failed, or that was rolled back); `None` when there is something to build.
fn nothing_new(
    db: &Path,
    month: &str,
    download: &cnpj_download::DownloadOptions,
    pg: &PostgresArgs,
    streams: u8,
    quiet: bool,
) -> anyhow::Result<Option<ExitCode>> {
    if !db.is_file() {
        return Ok(None);
    }
    let current = cnpj_load::PreviousDataset::read(db).with_context(|| format!("--db {}", db.display()))?;
    if current.month.as_deref() != Some(month) {
        return Ok(None);
    }
    let (_, unrecorded) = cnpj_download::unrecorded(download)
        .with_context(|| format!("listing {month} against {}", download.dest.display()))?;
    if !unrecorded.is_empty() {
        tracing::info!(month, files = ?unrecorded, "published since the month was downloaded: building it again");
        return Ok(None);
    }
    if let Some(url) = &pg.postgres {
        let published = cnpj_load::postgres::published_build(url, &pg.schema)
            .with_context(|| format!("reading the build Postgres schema {} serves", pg.schema))?;
        if published.as_deref() != Some(current.build_id.as_str()) {
            if !quiet {
                eprintln!("{} holds {month} but Postgres schema {} does not: publishing it", db.display(), pg.schema);
            }
            publish_dataset(db, pg, streams, quiet)?;
            return Ok(Some(ExitCode::SUCCESS));
        }
    }
    if !quiet {
        eprintln!(
            "nothing new: {} already holds {month}, and nothing was published since {} was downloaded",
            db.display(),
            download.dest.display()
        );
    }
    Ok(Some(ExitCode::from(crate::EXIT_NOTHING_NEW)))
}

/// The reports a `run` keeps in a month's folder: the build writes `attempt`, which becomes
/// `built` when the build succeeded or `refused` when the guard refused it, so that the report of
/// the month's dataset is only ever replaced by that of a newer dataset of the same month.
struct MonthReports {
    attempt: PathBuf,
    built: PathBuf,
    refused: PathBuf,
}

impl MonthReports {
    fn of(month_dir: &Path) -> MonthReports {
        MonthReports {
            attempt: month_dir.join("build-report.attempt.json"),
            built: month_dir.join("build-report.json"),
            refused: month_dir.join("build-report.refused.json"),
        }
    }

    /// Moves the attempt's report (and its page) where its outcome says; a build that failed
    /// otherwise leaves none.
    fn settle(&self, built: &anyhow::Result<Result<BuildReport, ExitCode>>) -> anyhow::Result<()> {
        let with_page = |report: &Path| [report.to_owned(), cnpj_build::page_path(report)];
        let to = match built {
            Ok(Ok(_)) => &self.built,
            Ok(Err(_)) => &self.refused,
            Err(_) => {
                with_page(&self.attempt).iter().for_each(|file| drop(std::fs::remove_file(file)));
                return Ok(());
            }
        };
        for (from, to) in with_page(&self.attempt).into_iter().zip(with_page(to)) {
            std::fs::rename(&from, &to).with_context(|| format!("renaming {} to {}", from.display(), to.display()))?;
        }
        Ok(())
    }
}
