//! `cnpj-etl synth`: a synthetic month of RFB zips at a scale, or the month after one
//! (`--evolve-from`); its description is the folder's `synth.json` (stdout stays empty: a line on
//! stderr says what was written, unless `--quiet`).

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::SynthArgs;

pub fn synth(args: SynthArgs, quiet: bool) -> anyhow::Result<ExitCode> {
    let SynthArgs { scale, evolve_from, out, seed, month } = args;
    let started = std::time::Instant::now();
    let report = match (evolve_from, scale) {
        (Some(from), _) => {
            let opts = cnpj_synth::EvolveOptions { from: from.clone(), out: out.clone(), seed };
            cnpj_synth::evolve(&opts).with_context(|| format!("writing {} from {}", out.display(), from.display()))?
        }
        (None, Some(scale)) => {
            let opts = cnpj_synth::SynthOptions { seed, month, ..cnpj_synth::SynthOptions::new(scale, &out) };
            cnpj_synth::generate(&opts).with_context(|| format!("writing {}", out.display()))?
        }
        (None, None) => anyhow::bail!("--scale or --evolve-from is required"),
    };
    if !quiet {
        let records: u64 = report.files.iter().map(|f| f.records).sum();
        let bytes: u64 = report.files.iter().map(|f| f.csv_bytes).sum();
        let changes: u64 = report.churn.values().sum();
        eprintln!(
            "wrote {} files of {}, {records} records, {bytes} bytes of CSV, {changes} planted changes in {:.1} s; \
             described in {}",
            report.files.len(),
            report.month,
            started.elapsed().as_secs_f64(),
            out.join("synth.json").display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
