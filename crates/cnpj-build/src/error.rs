//! The build's errors: [`BuildError`], and [`CheckError`], an input that is not one whole month.

use std::path::PathBuf;

use cnpj_load::LoadError;
use cnpj_parse::ParseError;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot read the input folder {path}: {source}")]
    Input { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("{zip} ({member}) is damaged near line {line}")]
    Damaged { zip: String, member: String, line: u64, source: std::io::Error },
    #[error("{zip} ({member}): {reason}")]
    Header { zip: String, member: String, reason: String },
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Index(#[from] cnpj_index::IndexError),
    #[error("the loader stopped before the end of the input")]
    LoaderGone,
    #[error(transparent)]
    Check(#[from] CheckError),
    #[error("{path}: {reason}")]
    Output { path: PathBuf, reason: String },
    #[error("writing the build report {path}")]
    Report { path: PathBuf, source: std::io::Error },
    #[error("cannot compare with the previous dataset {path}: {reason}")]
    Previous { path: PathBuf, reason: String },
    #[error(
        "this month ({month}) looks broken next to the previous one ({previous_month}), so the served dataset is left in place ({} anomal{}):\n  - {}\nLook at the build report; `--accept-anomalies` builds it anyway.",
        anomalies.len(),
        if anomalies.len() == 1 { "y" } else { "ies" },
        anomalies.join("\n  - ")
    )]
    Anomalies { month: String, previous_month: String, anomalies: Vec<String> },
}

/// The problems that make the input folder not one whole month of one delivery (see `checks`).
#[derive(Debug, thiserror::Error)]
#[error(
    "the input folder {path} is not one whole month of one delivery ({} problem{}):\n  - {}{}",
    problems.len(),
    if problems.len() == 1 { "" } else { "s" },
    problems.join("\n  - "),
    hint
)]
pub struct CheckError {
    pub path: PathBuf,
    pub problems: Vec<String>,
    /// The options that would build the month anyway, a line each.
    pub(crate) hint: String,
}
