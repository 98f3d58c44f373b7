//! `cnpj-etl`: builds a registry dataset from a month of RFB zips, shows its records and exports it.
//!
//! Exit codes (`EXIT_CODES`, also in `--help`): 0 success; 1 the work failed (build error, CNPJ
//! not found); 2 invalid arguments; 3 the guard refused the month (`build`, `run`); 4 nothing new
//! (`run`: the dataset already holds the newest month and nothing was published since).

mod cli;
mod commands;
mod metrics_file;
mod progress;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

/// The exit code of a month the guard refused (`--accept-anomalies` builds it).
pub const EXIT_ANOMALIES: u8 = 3;
/// The exit code of a `run` that found nothing new to build (`--force` builds it again).
pub const EXIT_NOTHING_NEW: u8 = 4;

/// The exit codes, for `--help`.
pub const EXIT_CODES: &str = "Exit codes: 0 success; 1 failure; 2 invalid arguments; 3 the guard refused the month \
     (build, run; see the report); 4 nothing new (run: --db already holds the newest month and nothing was \
     published since).";

fn main() -> ExitCode {
    let cli = Cli::parse();
    install_logger(cli.verbose, cli.quiet);
    match metrics_file::recorded(cli, dispatch) {
        Ok(code) => code,
        // The reader of stdout went away (`| head -1`): it had what it wanted.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr at the level `-v` asks for (`RUST_LOG` overrides).
fn install_logger(verbose: u8, quiet: bool) {
    let default = match verbose {
        // Off a terminal there are no bars: the progress is logged instead, a line per file.
        0 if !quiet && !progress::drawn(false) => "warn,cnpj_etl::progress=info",
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into());
    // Colours only on a terminal: a log file or a pipe gets plain text.
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}

/// Runs the subcommand; its exit code, or the error that `main` prints.
fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let quiet = cli.quiet;
    match cli.command {
        Command::Build(args) => commands::build::build(args, quiet),
        Command::Download(args) => commands::download::download(args, quiet),
        Command::Run(args) => commands::run::run(args, quiet),
        Command::Synth(args) => commands::synth::synth(args, quiet),
        Command::Publish(args) => commands::publish::publish(args, quiet),
        Command::Rollback(args) => commands::rollback::rollback(args),
        Command::Export(args) => commands::export::export(args, quiet),
        Command::Show(args) => commands::show::show(args),
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

/// An error and its causes, `: `-separated (anyhow's `{:#}`), less any cause whose text the
/// message already holds (a library that prints its cause in its own message as well).
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.is_empty() {
            text = part;
        } else if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
    }
    text
}
