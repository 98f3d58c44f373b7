//! The subcommands, a module each (`cnpj-etl <command>`: the function of the command's name that
//! `main` dispatches to), and what several of them share.

pub mod build;
pub mod download;
pub mod export;
pub mod publish;
pub mod rollback;
pub mod run;
pub mod show;
pub mod synth;

use std::io::Write;
use std::path::Path;

/// Writes `text` and a newline to stdout; a closed pipe is an error (`main` ends quietly on it).
pub fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// Checks, before any work, that `path` can be written (its folder exists and takes files).
pub fn writable(path: &Path, what: &str) -> anyhow::Result<()> {
    cnpj_build::writable_file(path).map_err(|reason| anyhow::anyhow!("{what} {}: {reason}", path.display()))
}
