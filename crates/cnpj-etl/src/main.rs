//! `cnpj-etl`: builds a registry dataset from a month of RFB zips, shows its records and exports it.
//!
//! Exit codes (`EXIT_CODES`, also in `--help`): 0 success; 1 the work failed (build error, CNPJ
//! not found); 2 invalid arguments; 3 the guard refused the month (`build`, `run`); 4 nothing new
//! (`run`: the dataset already holds the newest month and nothing was published since).

mod metrics_file;
mod progress;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use cnpj_build::{BuildOptions, BuildReport};
use cnpj_model::{CnpjQuery, Locale};
use cnpj_store::{Source, Store};

#[derive(Debug, Parser)]
#[command(name = "cnpj-etl", version, about = "Build and inspect the CNPJ registry dataset", after_help = EXIT_CODES)]
struct Cli {
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// No progress bars and no summary.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a dataset from a folder of one month's RFB zips: a DuckDB file (--db), replaced only on
    /// success, and/or a Postgres schema (--postgres), swapped in only on success.
    Build {
        /// Folder with the month's zips (Empresas*, Estabelecimentos*, Socios*, Simples, lookups; tax-regime zips optional).
        #[arg(long)]
        input: PathBuf,
        /// The month of the dump (YYYY-MM); default: the folder's name when it is one, else the
        /// date stamp of the main tables' members (D61012 → 2026-10).
        #[arg(long, value_parser = cnpj_build::month_arg)]
        month: Option<String>,
        /// The dataset file to create or replace (with --postgres: kept too; else a temporary file is used).
        #[arg(long, required_unless_present = "postgres")]
        db: Option<PathBuf>,
        #[command(flatten)]
        pg: PostgresArgs,
        /// COPY streams (connections) into Postgres at once.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
        pg_streams: u8,
        /// Also write the build report (JSON) here, and its page (HTML) beside it: the same name
        /// with .html for its extension.
        #[arg(long)]
        report: Option<PathBuf>,
        /// The memory the build may use (DuckDB, sort buffers, search index), e.g. 500MB, 2GB.
        #[arg(long, default_value = "2GB", value_parser = cnpj_model::parse_size)]
        memory_limit: u64,
        #[command(flatten)]
        checks: CheckArgs,
        /// The previous month's dataset (a DuckDB file built by cnpj-etl, with its lookup file):
        /// record what changed since in the history file beside --db (<db>.history, its
        /// `changes` table), carry the previous history over, and refuse a month that looks
        /// broken next to it. A dataset of this same month is not compared with (a warning), and
        /// one of this month but of another delivery refuses the build.
        #[arg(long)]
        previous: Option<PathBuf>,
        #[command(flatten)]
        guard: GuardArgs,
    },
    /// Download a month of RFB zips (and optionally the tax-regime zips) into --dest: parallel,
    /// resumable, every zip verified; a manifest.json records what is complete.
    Download {
        /// `YYYY-MM`, or `latest` for the newest complete month.
        #[arg(long, default_value = "latest")]
        month: String,
        #[arg(long)]
        dest: PathBuf,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Download (resuming), build, guard and swap in one go, then publish into Postgres with
    /// --postgres. WORK/<month>/ holds the zips and the month's report (build-report.json and
    /// .html, of the build that succeeded; build-report.refused.json and .html when the guard
    /// refused it); --db is replaced only by a build that succeeded. The dataset it replaces is the
    /// previous month of the build (changes, history, guard). When --db already holds the month
    /// and the source published nothing since WORK/<month>/ was downloaded, nothing is built: exit
    /// code 4 (after publishing --db when the Postgres schema serves another build).
    #[command(after_help = EXIT_CODES)]
    Run {
        /// `YYYY-MM`, or `latest` for the newest complete month.
        #[arg(long, default_value = "latest")]
        month: String,
        #[arg(long)]
        work: PathBuf,
        /// The dataset file to create or replace; with --postgres too: it is the previous month of
        /// the next build, and tells which month is served.
        #[arg(long)]
        db: PathBuf,
        #[command(flatten)]
        pg: PostgresArgs,
        /// COPY streams (connections) into Postgres at once.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
        pg_streams: u8,
        /// Build the month even when --db already holds it and nothing new was published.
        #[arg(long)]
        force: bool,
        /// Also export the month's dataset into DIR/<month>/ (as `export` does, every table),
        /// once: a month whose export is missing is exported by the next run even when nothing
        /// new was published.
        #[arg(long, value_name = "DIR")]
        export: Option<PathBuf>,
        #[command(flatten)]
        export_as: RunExportArgs,
        /// The memory the build may use (DuckDB, sort buffers, search index), e.g. 500MB, 2GB.
        #[arg(long, default_value = "2GB", value_parser = cnpj_model::parse_size)]
        memory_limit: u64,
        #[command(flatten)]
        checks: CheckArgs,
        #[command(flatten)]
        guard: GuardArgs,
        #[command(flatten)]
        source: SourceArgs,
        /// When the run ends, whatever its outcome, write its metrics here (replaced atomically)
        /// in the Prometheus text format of node_exporter's textfile collector: end time, last
        /// success time (kept from the file this replaces when the run did not exit 0), duration,
        /// exit code, guard refusal, and the month, build id, rows loaded and rejected of the
        /// dataset --db holds.
        #[arg(long, value_name = "PATH", value_parser = metrics_file::path_arg)]
        metrics_file: Option<PathBuf>,
    },
    /// Write a synthetic month of RFB zips (format-faithful, deterministic for a seed) at a scale
    /// (1.0 ≈ a full 2026 month: 69 M companies, 72 M establishments), or with --evolve-from the
    /// month after a synthetic month, its changes listed in synth.json (`planted_changes`).
    Synth {
        #[arg(long, required_unless_present = "evolve_from", conflicts_with = "evolve_from")]
        scale: Option<f64>,
        /// A synthetic month (written by `synth`, evolved or not): write the next month from it.
        #[arg(long, value_name = "DIR")]
        evolve_from: Option<PathBuf>,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The month the member names carry (with --evolve-from: the month after the input's).
        #[arg(long, default_value = "2026-11", conflicts_with = "evolve_from")]
        month: String,
    },
    /// Publish an already built DuckDB dataset into Postgres (what `build --postgres` does after the build).
    Publish {
        #[arg(long)]
        db: PathBuf,
        #[command(flatten)]
        pg: PostgresArgs,
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
        pg_streams: u8,
    },
    /// Serve the Postgres schema kept by the last build again (`<schema>_previous`), dropping the current one.
    Rollback {
        #[command(flatten)]
        pg: PostgresArgs,
    },
    /// Export a built dataset for other engines: Parquet or CSV, one folder per table (companies,
    /// establishments and partners with labels in --locale, simples, tax_regimes, changes when
    /// present), a _manifest.json; the search filters select establishments and their companies.
    Export {
        #[arg(long)]
        db: PathBuf,
        /// The folder to write (created; an existing one must be empty).
        #[arg(long)]
        out: PathBuf,
        #[arg(long, value_enum)]
        format: ExportFormatArg,
        #[arg(long, default_value = "pt-br")]
        locale: Locale,
        /// Hive-style partitions by state (uf=SP/) of the tables that have one.
        #[arg(long, value_parser = ["uf"])]
        partition_by: Option<String>,
        /// The memory the export may use (DuckDB gets 80 % of it and spills to a folder beside
        /// --out past that), e.g. 500MB, 2GB.
        #[arg(long, default_value = "1GB", value_parser = cnpj_model::parse_size)]
        memory_limit: u64,
        #[command(flatten)]
        filters: FilterArgs,
    },
    /// Print the detail record of a CNPJ (14 characters, or 8 for the head office) as JSON.
    Show {
        #[arg(long, required_unless_present = "postgres")]
        db: Option<PathBuf>,
        #[command(flatten)]
        pg: PostgresArgs,
        #[arg(long, default_value = "pt-br")]
        locale: Locale,
        /// The CNPJ, masked or not.
        cnpj: String,
    },
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ExportFormatArg {
    Parquet,
    Csv,
}

impl From<ExportFormatArg> for cnpj_store::ExportFormat {
    fn from(format: ExportFormatArg) -> Self {
        match format {
            ExportFormatArg::Parquet => cnpj_store::ExportFormat::Parquet,
            ExportFormatArg::Csv => cnpj_store::ExportFormat::Csv,
        }
    }
}

/// How `run --export` writes the month (the options of `export`, prefixed).
#[derive(Debug, clap::Args)]
struct RunExportArgs {
    #[arg(long, value_enum, default_value = "parquet", requires = "export")]
    export_format: ExportFormatArg,
    #[arg(long, default_value = "pt-br", requires = "export")]
    export_locale: Locale,
    /// Hive-style partitions by state (uf=SP/) of the tables that have one.
    #[arg(long, value_parser = ["uf"], requires = "export")]
    export_partition_by: Option<String>,
}

/// The search filters of `GET /api/v1/companies/search`, with the API's names and validation.
#[derive(Debug, clap::Args)]
struct FilterArgs {
    /// 14 characters: that establishment; 8: every establishment of the company.
    #[arg(long, value_parser = CnpjQuery::parse)]
    cnpj: Option<CnpjQuery>,
    /// Main CNAE (7 digits, masks allowed: 4751-2/01).
    #[arg(long, value_parser = |t: &str| code(t, 6, 7))]
    business_sector: Option<String>,
    /// RFB municipality code (4 digits).
    #[arg(long, value_parser = |t: &str| code(t, 1, 4))]
    city_id: Option<String>,
    /// City name (case- and accent-insensitive equality); --city-id wins.
    #[arg(long, value_parser = non_blank)]
    city: Option<String>,
    /// Two-letter state (UF).
    #[arg(long, value_parser = state)]
    state: Option<String>,
    /// Company size code (00, 01, 03, 05).
    #[arg(long, value_parser = |t: &str| code(t, 1, 2))]
    company_size: Option<String>,
    /// Opening date from (YYYY-MM-DD, inclusive).
    #[arg(long, value_parser = date)]
    opening_date_from: Option<String>,
    /// Opening date to (YYYY-MM-DD, inclusive).
    #[arg(long, value_parser = date)]
    opening_date_to: Option<String>,
    /// Substring of nome fantasia or razão social (case- and accent-insensitive).
    #[arg(long, value_parser = non_blank)]
    trading_name: Option<String>,
    /// Substring of the neighbourhood (case- and accent-insensitive).
    #[arg(long, value_parser = non_blank)]
    neighborhood: Option<String>,
    /// CEP prefix (1 to 8 digits).
    #[arg(long, value_parser = zip_code)]
    zip_code: Option<String>,
    /// Legal nature code (4 digits).
    #[arg(long, value_parser = |t: &str| code(t, 3, 4))]
    nature_code: Option<String>,
    /// Registration status code (2 digits).
    #[arg(long, value_parser = |t: &str| code(t, 1, 2))]
    situacao_cadastral: Option<String>,
}

impl FilterArgs {
    fn filters(self) -> cnpj_store::SearchFilters {
        cnpj_store::SearchFilters {
            cnpj: self.cnpj,
            business_sector: self.business_sector,
            city_id: self.city_id,
            city: self.city,
            state: self.state,
            porte: self.company_size,
            opening_from: self.opening_date_from,
            opening_to: self.opening_date_to,
            trading_name: self.trading_name,
            neighborhood: self.neighborhood,
            zip_prefix: self.zip_code,
            nature_code: self.nature_code,
            situacao: self.situacao_cadastral,
        }
    }
}

/// A numeric code of `min..=width` digits, mask characters `.`, `-`, `/` allowed, left-padded to
/// `width` (as the API takes it).
fn code(text: &str, min: usize, width: usize) -> Result<String, String> {
    let digits: String = text.chars().filter(|c| !matches!(c, '.' | '-' | '/')).collect();
    if !(min..=width).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("a code of {min} to {width} digits expected"));
    }
    Ok(format!("{digits:0>width$}"))
}

fn date(text: &str) -> Result<String, String> {
    let b = text.as_bytes();
    let valid = b.len() == 10 && b[4] == b'-' && b[7] == b'-' && cnpj_normalize::date(&text.replace('-', "")).is_some();
    valid.then(|| text.to_owned()).ok_or_else(|| "a date YYYY-MM-DD from 1800 to 2100 expected".to_owned())
}

fn state(text: &str) -> Result<String, String> {
    let valid = text.len() == 2 && text.bytes().all(|b| b.is_ascii_alphabetic());
    valid.then(|| text.to_ascii_uppercase()).ok_or_else(|| "a two-letter state expected".to_owned())
}

fn zip_code(text: &str) -> Result<String, String> {
    let digits: String = text.chars().filter(|c| !matches!(c, '.' | '-' | ' ')).collect();
    let valid = !digits.is_empty() && digits.len() <= 8 && digits.bytes().all(|b| b.is_ascii_digit());
    valid.then_some(digits).ok_or_else(|| "1 to 8 digits expected".to_owned())
}

fn non_blank(text: &str) -> Result<String, String> {
    (!text.trim().is_empty()).then(|| text.to_owned()).ok_or_else(|| "an empty filter".to_owned())
}

/// How strictly the build takes its input (see `cnpj_build::checks`).
#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// Build a month that fails the completeness checks (an empty or missing part, a series not
    /// from part 0, a zip missing or altered since manifest.json recorded it, a lookup table empty
    /// or lacking most of the codes the project knows, more than 1 % rejects, UTF-8 text, a zip
    /// that is not a readable file), with warnings in the log and the report.
    #[arg(long)]
    accept_incomplete: bool,
    /// Leave out the main-table members whose date stamp (D60913) is not the delivery's, or that
    /// have none, with a warning, instead of refusing the month.
    #[arg(long)]
    ignore_stale: bool,
    /// Bytes kept of one CSV record; a longer record is a reject (file, line, reason).
    #[arg(long, default_value_t = cnpj_build::DEFAULT_MAX_RECORD_BYTES as u64, value_parser = clap::value_parser!(u64).range(1024..=(1 << 30)))]
    max_record_bytes: u64,
}

impl CheckArgs {
    fn apply(&self, opts: BuildOptions) -> BuildOptions {
        BuildOptions {
            accept_incomplete: self.accept_incomplete,
            ignore_stale: self.ignore_stale,
            max_record_bytes: usize::try_from(self.max_record_bytes).unwrap_or(usize::MAX),
            ..opts
        }
    }
}

/// How the build compares with the previous month (see `cnpj_build::guard`).
#[derive(Debug, clap::Args)]
struct GuardArgs {
    /// Months of change history kept (this one included).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=1200))]
    keep_months: u32,
    /// Build a month the guard finds anomalies in (after looking at them): they are listed in
    /// the report.
    #[arg(long)]
    accept_anomalies: bool,
    /// Refuse a main table that shrank by more than this percentage since last month.
    #[arg(long, default_value_t = 2.0)]
    max_shrink_percent: f64,
    /// Refuse a main table that grew by more than this percentage.
    #[arg(long, default_value_t = 10.0)]
    max_growth_percent: f64,
    /// Refuse a month where more than this percentage of last month's CNPJs disappeared.
    #[arg(long, default_value_t = 1.0)]
    max_disappeared_percent: f64,
    /// Refuse a reject rate more than this many times last month's.
    #[arg(long, default_value_t = 10.0)]
    max_reject_ratio: f64,
}

impl GuardArgs {
    fn apply(&self, previous: Option<PathBuf>, opts: BuildOptions) -> BuildOptions {
        BuildOptions {
            previous,
            keep_months: self.keep_months,
            accept_anomalies: self.accept_anomalies,
            thresholds: cnpj_build::Thresholds {
                max_shrink: self.max_shrink_percent / 100.0,
                max_growth: self.max_growth_percent / 100.0,
                max_disappeared: self.max_disappeared_percent / 100.0,
                max_reject_ratio: self.max_reject_ratio,
            },
            ..opts
        }
    }
}

/// The exit code of a month the guard refused (`--accept-anomalies` builds it).
const EXIT_ANOMALIES: u8 = 3;
/// The exit code of a `run` that found nothing new to build (`--force` builds it again).
const EXIT_NOTHING_NEW: u8 = 4;

const EXIT_CODES: &str = "Exit codes: 0 success; 1 failure; 2 invalid arguments; 3 the guard refused the month \
     (build, run; see the report); 4 nothing new (run: --db already holds the newest month and nothing was \
     published since).";

/// Runs a build with progress bars; a month refused by the guard is reported with its own exit
/// code (the error is printed here), any other failure is an error. The summary names the report
/// `shown` (where it ends up).
fn build(opts: &BuildOptions, quiet: bool, shown: Option<&Path>) -> anyhow::Result<Result<BuildReport, ExitCode>> {
    let observer = progress::Bars::new(quiet);
    let result = cnpj_build::build(opts, &observer);
    observer.clear();
    match result {
        Err(e @ cnpj_build::BuildError::Anomalies { .. }) => {
            eprintln!("error: {e}");
            Ok(Err(ExitCode::from(EXIT_ANOMALIES)))
        }
        result => {
            let built =
                result.with_context(|| format!("building {} from {}", opts.db.display(), opts.input.display()))?;
            if !quiet {
                eprint!("{}", summary_text(&built, shown));
            }
            Ok(Ok(built))
        }
    }
}

/// A size such as `500MB`, `2GB`, `1.5GiB` or a number of bytes (decimal units: KB, MB, GB, TB;
/// binary: KiB, MiB, GiB, TiB).
/// Checks, before any work, that `path` can be written (its folder exists and takes files).
fn writable(path: &Path, what: &str) -> anyhow::Result<()> {
    cnpj_build::writable_file(path).map_err(|reason| anyhow::anyhow!("{what} {}: {reason}", path.display()))
}

/// A Postgres dataset: connection URL and schema.
#[derive(Debug, clap::Args)]
struct PostgresArgs {
    /// Postgres connection URL (postgresql://user@host:port/db or "host=… user=…").
    #[arg(long, env = "CNPJ_POSTGRES_URL")]
    postgres: Option<String>,
    /// The schema that serves the dataset (the build also uses <schema>_building and <schema>_previous).
    #[arg(long, default_value = "cnpj")]
    schema: String,
}

impl PostgresArgs {
    fn source(&self) -> Option<Source> {
        self.postgres.as_ref().map(|url| Source::Postgres { url: url.clone(), schema: self.schema.clone() })
    }
}

/// Where and how to download (configuration, since the RFB moves its files).
#[derive(Debug, clap::Args)]
struct SourceArgs {
    /// The RFB file server.
    #[arg(long, env = "CNPJ_RFB_BASE_URL", default_value = "https://arquivos.receitafederal.gov.br")]
    base_url: String,
    /// The Nextcloud public share of the monthly dumps; without it, today's is read from --landing.
    #[arg(long, env = "CNPJ_RFB_SHARE_TOKEN")]
    share_token: Option<String>,
    /// The page that redirects to today's share (…/index.php/s/TOKEN); default: --base-url.
    #[arg(long, env = "CNPJ_RFB_LANDING")]
    landing: Option<String>,
    /// The folder inside the share that holds the YYYY-MM/ folders; default: /Dados/Cadastros/CNPJ
    /// for a share found from --landing (today's layout), the share's root for a --share-token.
    /// When it is missing or holds none, the share is searched for them from its root (4 levels
    /// down, 64 folders at most) and the folder found is used (the summary names it).
    #[arg(long, env = "CNPJ_RFB_PREFIX")]
    prefix: Option<String>,
    /// Use the legacy Apache listing ({base}/dados/cnpj/dados_abertos_cnpj/YYYY-MM/) instead of the share.
    #[arg(long)]
    legacy: bool,
    /// Also download the tax-regime zips, found by name wherever the share's listing shows them
    /// (with --legacy: in {base}/dados/cnpj/regime_tributario/).
    #[arg(long)]
    with_tax_regime: bool,
    /// Look for the tax-regime zips in this share instead.
    #[arg(long, env = "CNPJ_RFB_TAX_SHARE_TOKEN")]
    tax_share_token: Option<String>,
    /// Files transferred at once, at most: halved after repeated stalls.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=8))]
    parallel: u8,
    /// Failed attempts tolerated per file.
    #[arg(long, default_value_t = 10)]
    retries: u32,
    /// Seconds without a byte before a transfer is dropped and resumed (a stall).
    #[arg(long, default_value_t = 60)]
    stall_seconds: u64,
}

/// Where today's share (found from the landing page) keeps the month folders.
const TODAYS_PREFIX: &str = "/Dados/Cadastros/CNPJ";

impl SourceArgs {
    fn options(&self, month: &str, dest: PathBuf) -> cnpj_download::DownloadOptions {
        use cnpj_download::{Source, TaxRegime};
        let base = self.base_url.trim_end_matches('/').to_owned();
        let source = if self.legacy {
            Source::Legacy { base: format!("{base}/dados/cnpj/dados_abertos_cnpj") }
        } else {
            let default_prefix = if self.share_token.is_some() { "" } else { TODAYS_PREFIX };
            Source::Nextcloud {
                base: base.clone(),
                token: self.share_token.clone(),
                landing: self.landing.clone(),
                prefix: self.prefix.clone().unwrap_or_else(|| default_prefix.to_owned()),
            }
        };
        let mut opts = cnpj_download::DownloadOptions::new(source, month, dest);
        opts.tax_regime = match (&self.tax_share_token, self.with_tax_regime, self.legacy) {
            (_, false, _) => TaxRegime::Skip,
            (Some(token), true, _) => TaxRegime::Other(Source::share(base.clone(), token.clone())),
            (None, true, false) => TaxRegime::SameSource,
            (None, true, true) => {
                TaxRegime::Other(Source::Legacy { base: format!("{base}/dados/cnpj/regime_tributario") })
            }
        };
        opts.parallel = usize::from(self.parallel);
        opts.retries = self.retries;
        opts.stall = std::time::Duration::from_secs(self.stall_seconds.max(1));
        opts
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default = match cli.verbose {
        // Off a terminal there are no bars: the progress is logged instead, a line per file.
        0 if !cli.quiet && !progress::drawn(false) => "warn,cnpj_etl::progress=info",
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default.into());
    // Colours only on a terminal: a log file or a pipe gets plain text.
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    match metrics_file::recorded(cli, run) {
        Ok(code) => code,
        // The reader of stdout went away (`| head -1`): it had what it wanted.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// Writes `text` and a newline to stdout; a closed pipe is an error (`main` ends quietly on it).
fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
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

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Build { input, month, db, pg, pg_streams, report, memory_limit, checks, previous, guard } => {
            if let Some(db) = &db {
                writable(db, "--db")?;
            }
            if let Some(report) = &report {
                writable(report, "--report")?;
            }
            // With --postgres only, the DuckDB build goes to a temporary file, deleted afterwards.
            let scratch = match &db {
                Some(_) => None,
                None => Some(
                    tempfile::Builder::new().prefix("cnpj-build-").tempdir().context("creating a temporary folder")?,
                ),
            };
            let db = db.unwrap_or_else(|| scratch.as_ref().expect("a scratch folder").path().join("dataset.duckdb"));
            // The build writes the report before it renames the dataset into place.
            let opts = checks.apply(BuildOptions {
                month,
                memory_limit,
                report: report.clone(),
                ..BuildOptions::new(&input, &db)
            });
            if let Err(code) = build(&guard.apply(previous, opts), cli.quiet, report.as_deref())? {
                return Ok(code);
            }
            if pg.postgres.is_some() {
                publish(&db, &pg, pg_streams, cli.quiet)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Publish { db, pg, pg_streams } => {
            publish(&db, &pg, pg_streams, cli.quiet)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Rollback { pg } => {
            let url = pg.postgres.as_deref().context("--postgres URL is required")?;
            cnpj_load::postgres::rollback(url, &pg.schema)?;
            eprintln!("schema {} serves the previous dataset again", pg.schema);
            Ok(ExitCode::SUCCESS)
        }
        Command::Download { month, dest, source } => {
            let summary = fetch(&source.options(&month, dest), cli.quiet)?;
            print(&serde_json::to_string_pretty(&summary)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            month,
            work,
            db,
            pg,
            pg_streams,
            force,
            export: export_dir,
            export_as,
            memory_limit,
            checks,
            guard,
            source,
            metrics_file: _,
        } => {
            // Every output is checked before anything is downloaded.
            std::fs::create_dir_all(&work).with_context(|| format!("--work {}: cannot create it", work.display()))?;
            writable(&work.join("build-report.json"), "--work")?;
            writable(&db, "--db")?;
            if let Some(dir) = &export_dir {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("--export {}: cannot create it", dir.display()))?;
            }
            // Resolve `latest` first, so that a resumed run finds the month's folder again.
            let month = cnpj_download::resolve_month(&source.options(&month, work.clone()))?;
            let month_dir = work.join(&month);
            // The month's export, when asked for and not written yet.
            let pending_export = export_dir
                .as_ref()
                .map(|dir| dir.join(&month))
                .filter(|out| !out.join(cnpj_store::MANIFEST_FILE).is_file());
            let exported = |quiet: bool| -> anyhow::Result<()> {
                match &pending_export {
                    Some(out) => export(&run_export(&db, out, &export_as), quiet).map(drop),
                    None => Ok(()),
                }
            };
            if !force
                && let Some(code) =
                    nothing_new(&db, &month, &source.options(&month, month_dir.clone()), &pg, pg_streams, cli.quiet)?
            {
                if pending_export.is_some() {
                    exported(cli.quiet)?;
                    return Ok(ExitCode::SUCCESS);
                }
                return Ok(code);
            }
            fetch(&source.options(&month, month_dir.clone()), cli.quiet)?;
            let reports = MonthReports::of(&month_dir);
            let opts = BuildOptions {
                month: Some(month.clone()),
                memory_limit,
                report: Some(reports.attempt.clone()),
                ..BuildOptions::new(&month_dir, &db)
            };
            // The dataset about to be replaced is the previous month.
            let previous = db.is_file().then(|| db.clone());
            let built = build(&guard.apply(previous, checks.apply(opts)), cli.quiet, Some(&reports.built));
            reports.settle(&built)?;
            if let Err(code) = built? {
                return Ok(code);
            }
            if pg.postgres.is_some() {
                publish(&db, &pg, pg_streams, cli.quiet)?;
            }
            if let Some(dir) = &export_dir {
                let out = dir.join(&month);
                // A month built again replaces its export (that of the dataset it replaced).
                if out.exists() {
                    std::fs::remove_dir_all(&out).with_context(|| format!("replacing {}", out.display()))?;
                }
                export(&run_export(&db, &out, &export_as), cli.quiet)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Synth { scale, evolve_from, out, seed, month } => {
            let started = std::time::Instant::now();
            let report = match (evolve_from, scale) {
                (Some(from), _) => {
                    let opts = cnpj_synth::EvolveOptions { from: from.clone(), out: out.clone(), seed };
                    cnpj_synth::evolve(&opts)
                        .with_context(|| format!("writing {} from {}", out.display(), from.display()))?
                }
                (None, Some(scale)) => {
                    let opts = cnpj_synth::SynthOptions { seed, month, ..cnpj_synth::SynthOptions::new(scale, &out) };
                    cnpj_synth::generate(&opts).with_context(|| format!("writing {}", out.display()))?
                }
                (None, None) => anyhow::bail!("--scale or --evolve-from is required"),
            };
            if !cli.quiet {
                let records: u64 = report.files.iter().map(|f| f.records).sum();
                let bytes: u64 = report.files.iter().map(|f| f.csv_bytes).sum();
                let changes: u64 = report.churn.values().sum();
                eprintln!(
                    "wrote {} files of {}, {records} records, {bytes} bytes of CSV, {changes} planted changes in {:.1} s",
                    report.files.len(),
                    report.month,
                    started.elapsed().as_secs_f64()
                );
            }
            print(&serde_json::to_string_pretty(&report)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Export { db, out, format, locale, partition_by, memory_limit, filters } => {
            let opts = cnpj_store::ExportOptions {
                db,
                out,
                format: format.into(),
                locale,
                partition_by_uf: partition_by.is_some(),
                filters: filters.filters(),
                memory_limit,
                producer: producer(),
            };
            let manifest = export(&opts, cli.quiet)?;
            print(&serde_json::to_string_pretty(&manifest)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Show { db, pg, locale, cnpj } => {
            let query = match CnpjQuery::parse(&cnpj) {
                Ok(q) => q,
                Err(e) => {
                    eprintln!("error: {cnpj:?} is not a CNPJ: {e}");
                    return Ok(ExitCode::from(2));
                }
            };
            let source = pg.source().or(db.map(Source::DuckDb)).context("--db or --postgres is required")?;
            let store = Store::open(&source)?;
            match store.detail(&query, locale)? {
                Some(record) => {
                    print(&serde_json::to_string_pretty(&record)?)?;
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    eprintln!("error: no company with CNPJ {cnpj} in {source}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}

/// `run`'s check before any download: when `db` was built from `month` and the source lists no
/// file that the month folder's manifest does not record as downloaded, the exit code of nothing
/// new, after publishing `db` into Postgres when the schema serves another build (a run whose
/// publication failed, or that was rolled back); `None` when there is something to build.
fn producer() -> String {
    format!("cnpj-etl {}", env!("CARGO_PKG_VERSION"))
}

/// The export of `run --export`: the whole dataset `db` into `out`.
fn run_export(db: &Path, out: &Path, how: &RunExportArgs) -> cnpj_store::ExportOptions {
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

/// Exports a dataset (see `cnpj_store::export`), with a line per table on stderr.
fn export(opts: &cnpj_store::ExportOptions, quiet: bool) -> anyhow::Result<cnpj_store::Manifest> {
    let started = std::time::Instant::now();
    let manifest = cnpj_store::export(opts)
        .with_context(|| format!("exporting {} into {}", opts.db.display(), opts.out.display()))?;
    if !quiet {
        for t in &manifest.tables {
            let bytes: u64 = t.files.iter().map(|f| f.bytes).sum();
            eprintln!("  {:<16}{:>14} rows {:>6} files {:>14} bytes", t.name, t.rows, t.files.len(), bytes);
        }
        eprintln!("exported {} in {:.1} s", opts.out.display(), started.elapsed().as_secs_f64());
    }
    Ok(manifest)
}

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
            publish(db, pg, streams, quiet)?;
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
    Ok(Some(ExitCode::from(EXIT_NOTHING_NEW)))
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

/// Copies the dataset at `db` into Postgres and swaps it in (see `cnpj_load::postgres`).
fn publish(db: &std::path::Path, pg: &PostgresArgs, streams: u8, quiet: bool) -> anyhow::Result<()> {
    let url = pg.postgres.as_deref().context("--postgres URL is required")?;
    let started = std::time::Instant::now();
    let bar = progress::rows_bar(quiet, "copying into Postgres");
    let published = cnpj_load::postgres::publish(db, url, &pg.schema, usize::from(streams), &|n| bar.inc(n));
    bar.finish_and_clear();
    let published =
        published.with_context(|| format!("publishing {} into Postgres schema {}", db.display(), pg.schema))?;
    if !quiet {
        let rows: u64 = published.tables.iter().map(|(_, n)| n).sum();
        eprintln!(
            "published {rows} rows into Postgres schema {} in {:.1} s (previous kept as {}_previous)",
            published.schema,
            started.elapsed().as_secs_f64(),
            published.schema
        );
    }
    Ok(())
}

fn summary_text(r: &BuildReport, report: Option<&std::path::Path>) -> String {
    let mut out = format!(
        "built {} (source month {}) in {:.1} s\n",
        r.dataset,
        r.source_month.as_deref().unwrap_or("unknown"),
        r.seconds.total
    );
    for t in &r.tables {
        out.push_str(&format!("  {:<22}{:>14}\n", t.table, t.rows));
    }
    out.push_str(&format!(
        "  rows read {}, loaded {}, duplicates {} ({} differing), rejected {}\n",
        r.rows_read, r.rows_loaded, r.duplicates, r.duplicates_differing, r.rows_rejected
    ));
    if !r.unknown_codes.is_empty() {
        out.push_str(&format!("  unknown codes: {} (see the report)\n", r.unknown_codes.len()));
    }
    if let Some(report) = report {
        let page = cnpj_build::page_path(report);
        out.push_str(&format!("  report {}, its page {}\n", report.display(), page.display()));
    }
    out
}

/// Downloads with progress bars; the error names every file that failed.
fn fetch(opts: &cnpj_download::DownloadOptions, quiet: bool) -> anyhow::Result<cnpj_download::DownloadSummary> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check_source(args: &[&str], source: cnpj_download::Source, tax: cnpj_download::TaxRegime) {
        let argv = ["cnpj-etl", "download", "--dest", "d", "--base-url", "http://rfb/"].iter().chain(args);
        let Command::Download { source: given, .. } = Cli::try_parse_from(argv).unwrap().command else {
            panic!("a download")
        };
        let opts = given.options("latest", "d".into());
        assert_eq!((opts.source, opts.tax_regime), (source, tax), "{args:?}");
    }

    #[test]
    fn sources() {
        use cnpj_download::{Source, TaxRegime};
        let todays = |prefix: &str, landing: Option<&str>| Source::Nextcloud {
            base: "http://rfb".into(),
            token: None,
            landing: landing.map(str::to_owned),
            prefix: prefix.into(),
        };
        check_source(&[], todays("/Dados/Cadastros/CNPJ", None), TaxRegime::Skip);
        check_source(&["--prefix", "/"], todays("/", None), TaxRegime::Skip);
        check_source(&["--landing", "http://x/"], todays("/Dados/Cadastros/CNPJ", Some("http://x/")), TaxRegime::Skip);
        check_source(&["--with-tax-regime"], todays("/Dados/Cadastros/CNPJ", None), TaxRegime::SameSource);
        check_source(&["--share-token", "T"], Source::share("http://rfb", "T"), TaxRegime::Skip);
        check_source(
            &["--share-token", "T", "--with-tax-regime", "--tax-share-token", "X"],
            Source::share("http://rfb", "T"),
            TaxRegime::Other(Source::share("http://rfb", "X")),
        );
        check_source(
            &["--legacy", "--with-tax-regime"],
            Source::Legacy { base: "http://rfb/dados/cnpj/dados_abertos_cnpj".into() },
            TaxRegime::Other(Source::Legacy { base: "http://rfb/dados/cnpj/regime_tributario".into() }),
        );
    }

    fn check_filter(parsed: Result<String, String>, expected: Option<&str>) {
        assert_eq!(parsed.ok().as_deref(), expected);
    }

    #[test]
    fn filters_are_validated_as_the_api_validates_them() {
        check_filter(code("4751-2/01", 6, 7), Some("4751201"));
        check_filter(code("2", 1, 2), Some("02"));
        check_filter(code("12345678", 6, 7), None);
        check_filter(code("ab", 1, 2), None);
        check_filter(date("2020-02-29"), Some("2020-02-29"));
        check_filter(date("2021-02-29"), None);
        check_filter(date("20200101"), None);
        check_filter(date("1700-01-01"), None);
        check_filter(state("sp"), Some("SP"));
        check_filter(state("S1"), None);
        check_filter(zip_code("01310-100"), Some("01310100"));
        check_filter(zip_code("013101001"), None);
        check_filter(non_blank("  "), None);
    }
}
