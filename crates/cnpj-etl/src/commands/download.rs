//! `cnpj-etl download`: a month of RFB zips into a folder; and the download with progress bars
//! that `run` uses too.

use std::process::ExitCode;

use anyhow::Context;

use super::print;
use crate::cli::DownloadArgs;
use crate::progress;

pub fn download(args: DownloadArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let summary = fetch(&args.source.options(&args.month, args.dest), quiet)?;
    print(&serde_json::to_string_pretty(&summary)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Downloads with progress bars; the error names every file that failed.
pub fn fetch(opts: &cnpj_download::DownloadOptions, quiet: bool) -> anyhow::Result<cnpj_download::DownloadSummary> {
    let bars = progress::DownloadBars::new(quiet);
    let result = cnpj_download::download(opts, &bars);
    bars.clear();
    let summary = result.with_context(|| format!("downloading into {}", opts.dest.display()))?;
    if !quiet {
        eprintln!(
            "month {} from {}: {} downloaded ({} bytes), {} already complete, {:.1} s",
            summary.month,
            summary.source,
            summary.downloaded.len(),
            summary.bytes,
            summary.skipped.len(),
            summary.seconds
        );
        let p = &summary.parallelism;
        if p.ended < p.started {
            eprintln!("  the server stalled parallel streams: {} transfers at once, then {}", p.started, p.ended);
        }
    }
    Ok(summary)
}
