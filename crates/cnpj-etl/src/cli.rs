//! The command line: `cnpj-etl`'s subcommands and their options (clap), and how options become
//! the libraries' options.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use cnpj_build::BuildOptions;
use cnpj_model::filter::{self, Code, FilterError};
use cnpj_model::{CnpjQuery, Locale};
use cnpj_store::Source;

use crate::EXIT_CODES;

#[derive(Debug, Parser)]
#[command(name = "cnpj-etl", version, about = "Build and inspect the CNPJ registry dataset", after_help = EXIT_CODES)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// No progress bars and no summary.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build a dataset from a folder of one month's RFB zips: a DuckDB file (--db), replaced only on
    /// success, and/or a Postgres schema (--postgres), swapped in only on success.
    Build(BuildArgs),
    /// Download a month of RFB zips (and optionally the tax-regime zips) into --dest: parallel,
    /// resumable, every zip verified; a manifest.json records what is complete.
    Download(DownloadArgs),
    /// Download (resuming), build, guard and swap in one go, then publish into Postgres with
    /// --postgres. WORK/<month>/ holds the zips and the month's report (build-report.json and
    /// .html, of the build that succeeded; build-report.refused.json and .html when the guard
    /// refused it); --db is replaced only by a build that succeeded. The dataset it replaces is the
    /// previous month of the build (changes, history, guard). When --db already holds the month
    /// and the source published nothing since WORK/<month>/ was downloaded, nothing is built: exit
    /// code 4 (after publishing --db when the Postgres schema serves another build).
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// Write a synthetic month of RFB zips (format-faithful, deterministic for a seed) at a scale
    /// (1.0 ≈ a full 2026 month: 69 M companies, 72 M establishments), or with --evolve-from the
    /// month after a synthetic month, its changes listed in synth.json (`planted_changes`). The
    /// folder's synth.json describes the month; nothing is printed on stdout.
    Synth(SynthArgs),
    /// Publish an already built DuckDB dataset into Postgres (what `build --postgres` does after the build).
    Publish(PublishArgs),
    /// Serve the Postgres schema kept by the last build again (`<schema>_previous`), dropping the current one.
    Rollback(RollbackArgs),
    /// Export a built dataset for other engines: Parquet or CSV, one folder per table (companies,
    /// establishments and partners with labels in --locale, simples, tax_regimes, changes when
    /// present), a _manifest.json; the search filters select establishments and their companies.
    Export(ExportArgs),
    /// Print the detail record of a CNPJ (14 characters, or 8 for the head office) as JSON.
    Show(ShowArgs),
}

/// The options of `build` (its help: [`Command::Build`]).
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// Folder with the month's zips (Empresas*, Estabelecimentos*, Socios*, Simples, lookups; tax-regime zips optional).
    #[arg(long)]
    pub input: PathBuf,
    /// The month of the dump (YYYY-MM); default: the folder's name when it is one, else the
    /// date stamp of the main tables' members (D61012 → 2026-10).
    #[arg(long, value_parser = cnpj_build::month_arg)]
    pub month: Option<String>,
    /// The dataset file to create or replace (with --postgres: kept too; else a temporary file is used).
    #[arg(long, required_unless_present = "postgres")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub pg: PostgresArgs,
    /// COPY streams (connections) into Postgres at once.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
    pub pg_streams: u8,
    /// Also write the build report (JSON) here, and its page (HTML) beside it: the same name
    /// with .html for its extension.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The memory the build may use (DuckDB, sort buffers, search index), e.g. 500MB, 2GB.
    #[arg(long, default_value = "2GB", value_parser = cnpj_model::parse_size)]
    pub memory_limit: u64,
    #[command(flatten)]
    pub checks: CheckArgs,
    /// The previous month's dataset (a DuckDB file built by cnpj-etl, with its lookup file):
    /// record what changed since in the history file beside --db (<db>.history, its
    /// `changes` table), carry the previous history over, and refuse a month that looks
    /// broken next to it. A dataset of this same month is not compared with (a warning), and
    /// one of this month but of another delivery refuses the build.
    #[arg(long)]
    pub previous: Option<PathBuf>,
    #[command(flatten)]
    pub guard: GuardArgs,
}

/// The options of `download` (its help: [`Command::Download`]).
#[derive(Debug, clap::Args)]
pub struct DownloadArgs {
    /// `YYYY-MM`, or `latest` for the newest complete month.
    #[arg(long, default_value = "latest")]
    pub month: String,
    #[arg(long)]
    pub dest: PathBuf,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// The options of `run` (its help: [`Command::Run`]).
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// `YYYY-MM`, or `latest` for the newest complete month.
    #[arg(long, default_value = "latest")]
    pub month: String,
    #[arg(long)]
    pub work: PathBuf,
    /// The dataset file to create or replace; with --postgres too: it is the previous month of
    /// the next build, and tells which month is served.
    #[arg(long)]
    pub db: PathBuf,
    #[command(flatten)]
    pub pg: PostgresArgs,
    /// COPY streams (connections) into Postgres at once.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
    pub pg_streams: u8,
    /// Build the month even when --db already holds it and nothing new was published.
    #[arg(long)]
    pub force: bool,
    /// Also export the month's dataset into DIR/<month>/ (as `export` does, every table),
    /// once: a month whose export is missing is exported by the next run even when nothing
    /// new was published.
    #[arg(long, value_name = "DIR")]
    pub export: Option<PathBuf>,
    #[command(flatten)]
    pub export_as: RunExportArgs,
    /// The memory the build may use (DuckDB, sort buffers, search index), e.g. 500MB, 2GB.
    #[arg(long, default_value = "2GB", value_parser = cnpj_model::parse_size)]
    pub memory_limit: u64,
    #[command(flatten)]
    pub checks: CheckArgs,
    #[command(flatten)]
    pub guard: GuardArgs,
    #[command(flatten)]
    pub source: SourceArgs,
    /// When the run ends, whatever its outcome, write its metrics here (replaced atomically)
    /// in the Prometheus text format of node_exporter's textfile collector: end time, last
    /// success time (kept from the file this replaces when the run did not exit 0), duration,
    /// exit code, guard refusal, and the month, build id, rows loaded and rejected of the
    /// dataset --db holds.
    #[arg(long, value_name = "PATH", value_parser = writable_path)]
    pub metrics_file: Option<PathBuf>,
}

/// The options of `synth` (its help: [`Command::Synth`]).
#[derive(Debug, clap::Args)]
pub struct SynthArgs {
    #[arg(long, required_unless_present = "evolve_from", conflicts_with = "evolve_from")]
    pub scale: Option<f64>,
    /// A synthetic month (written by `synth`, evolved or not): write the next month from it.
    #[arg(long, value_name = "DIR")]
    pub evolve_from: Option<PathBuf>,
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The month the member names carry (with --evolve-from: the month after the input's).
    #[arg(long, default_value = "2026-11", conflicts_with = "evolve_from")]
    pub month: String,
}

/// The options of `publish` (its help: [`Command::Publish`]).
#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    #[arg(long)]
    pub db: PathBuf,
    #[command(flatten)]
    pub pg: PostgresArgs,
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
    pub pg_streams: u8,
}

/// The options of `rollback` (its help: [`Command::Rollback`]).
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    pub pg: PostgresArgs,
}

/// The options of `export` (its help: [`Command::Export`]).
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[arg(long)]
    pub db: PathBuf,
    /// The folder to write (created; an existing one must be empty).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, value_enum)]
    pub format: ExportFormatArg,
    #[arg(long, default_value = "pt-br")]
    pub locale: Locale,
    /// Hive-style partitions by state (uf=SP/) of the tables that have one.
    #[arg(long, value_parser = ["uf"])]
    pub partition_by: Option<String>,
    /// The memory the export may use (DuckDB gets 80 % of it and spills to a folder beside
    /// --out past that), e.g. 500MB, 2GB.
    #[arg(long, default_value = "1GB", value_parser = cnpj_model::parse_size)]
    pub memory_limit: u64,
    #[command(flatten)]
    pub filters: FilterArgs,
}

/// The options of `show` (its help: [`Command::Show`]).
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    #[arg(long, required_unless_present = "postgres")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub pg: PostgresArgs,
    #[arg(long, default_value = "pt-br")]
    pub locale: Locale,
    /// The CNPJ, masked or not.
    pub cnpj: String,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ExportFormatArg {
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
pub struct RunExportArgs {
    #[arg(long, value_enum, default_value = "parquet", requires = "export")]
    pub export_format: ExportFormatArg,
    #[arg(long, default_value = "pt-br", requires = "export")]
    pub export_locale: Locale,
    /// Hive-style partitions by state (uf=SP/) of the tables that have one.
    #[arg(long, value_parser = ["uf"], requires = "export")]
    pub export_partition_by: Option<String>,
}

/// The search filters of `GET /api/v1/companies/search`, with the API's names and validation: a
/// code filter takes one code or up to 50, comma-separated (any of them).
#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    /// 14 characters: that establishment; 8: every establishment of the company.
    #[arg(long, value_parser = CnpjQuery::parse)]
    pub cnpj: Option<CnpjQuery>,
    /// Main CNAEs (7 digits, masks allowed: 4751-2/01).
    #[arg(long, value_parser = |t: &str| codes(t, Code::BUSINESS_SECTOR))]
    pub business_sector: Option<Codes>,
    /// Main or any secondary CNAEs.
    #[arg(long, value_parser = |t: &str| codes(t, Code::BUSINESS_SECTOR))]
    pub any_sector: Option<Codes>,
    /// RFB municipality codes (4 digits).
    #[arg(long, value_parser = |t: &str| codes(t, Code::CITY_ID))]
    pub city_id: Option<Codes>,
    /// City name (case- and accent-insensitive equality); --city-id wins.
    #[arg(long, value_parser = text)]
    pub city: Option<String>,
    /// Two-letter states (UF).
    #[arg(long, value_parser = |t: &str| filter::list(t, filter::state).map(Codes))]
    pub state: Option<Codes>,
    /// Company size codes (00, 01, 03, 05).
    #[arg(long, value_parser = |t: &str| codes(t, Code::COMPANY_SIZE))]
    pub company_size: Option<Codes>,
    /// Opening date from (YYYY-MM-DD, inclusive).
    #[arg(long, value_parser = filter::date)]
    pub opening_date_from: Option<String>,
    /// Opening date to (YYYY-MM-DD, inclusive).
    #[arg(long, value_parser = filter::date)]
    pub opening_date_to: Option<String>,
    /// Substring of nome fantasia or razão social (case- and accent-insensitive).
    #[arg(long, value_parser = text)]
    pub trading_name: Option<String>,
    /// Substring of the neighbourhood (case- and accent-insensitive).
    #[arg(long, value_parser = text)]
    pub neighborhood: Option<String>,
    /// CEP prefix (1 to 8 digits).
    #[arg(long, value_parser = filter::zip_prefix)]
    pub zip_code: Option<String>,
    /// Legal nature codes (4 digits).
    #[arg(long, value_parser = |t: &str| codes(t, Code::NATURE_CODE))]
    pub nature_code: Option<Codes>,
    /// Registration status codes (2 digits).
    #[arg(long, value_parser = |t: &str| codes(t, Code::SITUACAO_CADASTRAL))]
    pub situacao_cadastral: Option<Codes>,
    /// The company's capital from, in reais, inclusive (1000.50: a point, no thousands separators).
    #[arg(long, value_parser = filter::money)]
    pub capital_from: Option<u64>,
    /// The company's capital to, in reais, inclusive.
    #[arg(long, value_parser = filter::money)]
    pub capital_to: Option<u64>,
    /// true: with an email; false: without.
    #[arg(long, value_parser = filter::boolean)]
    pub has_email: Option<bool>,
    /// true: with a first or second phone number; false: with neither.
    #[arg(long, value_parser = filter::boolean)]
    pub has_phone: Option<bool>,
    /// true: the company opted for the Simples Nacional; false: it did not.
    #[arg(long, value_parser = filter::boolean)]
    pub simples: Option<bool>,
    /// true: the company opted for the MEI; false: it did not.
    #[arg(long, value_parser = filter::boolean)]
    pub mei: Option<bool>,
    /// true: head offices only; false: branches only.
    #[arg(long, value_parser = filter::boolean)]
    pub head_office: Option<bool>,
    /// The establishments of the companies of this partner (its `partner_id`).
    #[arg(long, value_parser = filter::partner_id)]
    pub partner_id: Option<String>,
}

/// A code filter's values ([`filter::list`]).
#[derive(Clone, Debug)]
pub struct Codes(Vec<String>);

fn codes(text: &str, code: Code) -> Result<Codes, FilterError> {
    filter::list(text, |item| code.parse(item)).map(Codes)
}

impl FilterArgs {
    pub fn filters(self) -> cnpj_store::SearchFilters {
        let values = |codes: Option<Codes>| codes.map(|c| c.0).unwrap_or_default();
        cnpj_store::SearchFilters {
            cnpj: self.cnpj,
            business_sector: values(self.business_sector),
            city_id: values(self.city_id),
            city: self.city,
            state: values(self.state),
            porte: values(self.company_size),
            opening_from: self.opening_date_from,
            opening_to: self.opening_date_to,
            trading_name: self.trading_name,
            neighborhood: self.neighborhood,
            zip_prefix: self.zip_code,
            nature_code: values(self.nature_code),
            situacao: values(self.situacao_cadastral),
            any_sector: values(self.any_sector),
            capital_from: self.capital_from,
            capital_to: self.capital_to,
            has_email: self.has_email,
            has_phone: self.has_phone,
            simples: self.simples,
            mei: self.mei,
            head_office: self.head_office,
            partner_id: self.partner_id,
        }
    }
}

/// A text filter, trimmed as the API trims it ([`filter::text`]).
fn text(text: &str) -> Result<String, FilterError> {
    filter::text(text).map(str::to_owned)
}

/// How strictly the build takes its input (see `cnpj_build::checks`).
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
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
    pub fn apply(&self, opts: BuildOptions) -> BuildOptions {
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
pub struct GuardArgs {
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
    pub fn apply(&self, previous: Option<PathBuf>, opts: BuildOptions) -> BuildOptions {
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

/// A Postgres dataset: connection URL and schema.
#[derive(Debug, clap::Args)]
pub struct PostgresArgs {
    /// Postgres connection URL (postgresql://user@host:port/db or "host=… user=…").
    #[arg(long, env = "CNPJ_POSTGRES_URL")]
    pub postgres: Option<String>,
    /// The schema that serves the dataset (the build also uses <schema>_building and <schema>_previous).
    #[arg(long, default_value = "cnpj")]
    pub schema: String,
}

impl PostgresArgs {
    pub fn source(&self) -> Option<Source> {
        self.postgres.as_ref().map(|url| Source::Postgres { url: url.clone(), schema: self.schema.clone() })
    }
}

/// Where and how to download (configuration, since the RFB moves its files).
#[derive(Debug, clap::Args)]
pub struct SourceArgs {
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
    pub fn options(&self, month: &str, dest: PathBuf) -> cnpj_download::DownloadOptions {
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

/// A file that can be written (`--metrics-file`: checked before the run starts).
fn writable_path(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    cnpj_build::writable_file(&path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_source(args: &[&str], source: cnpj_download::Source, tax: cnpj_download::TaxRegime) {
        let argv = ["cnpj-etl", "download", "--dest", "d", "--base-url", "http://rfb/"].iter().chain(args);
        let Command::Download(DownloadArgs { source: given, .. }) = Cli::try_parse_from(argv).unwrap().command else {
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

    fn check_filters(args: &[&str], expected: Result<cnpj_store::SearchFilters, &str>) {
        let argv = ["cnpj-etl", "export", "--db", "d", "--out", "o", "--format", "csv"].iter().chain(args);
        let got = Cli::try_parse_from(argv).map_err(|e| e.to_string()).map(|cli| match cli.command {
            Command::Export(export) => export.filters.filters(),
            _ => panic!("an export"),
        });
        match expected {
            Ok(filters) => assert_eq!(got, Ok(filters), "{args:?}"),
            Err(message) => assert!(got.as_ref().is_err_and(|e| e.contains(message)), "{args:?}: {got:?}"),
        }
    }

    #[test]
    fn filters_are_validated_by_the_api_rules() {
        check_filters(
            &[
                "--state",
                "sp",
                "--business-sector",
                "4751-2/01",
                "--city-id",
                "107",
                "--zip-code",
                "01310-100",
                "--trading-name",
                " pio xii ",
                "--opening-date-from",
                "2020-02-29",
            ],
            Ok(cnpj_store::SearchFilters {
                state: vec!["SP".into()],
                business_sector: vec!["4751201".into()],
                city_id: vec!["0107".into()],
                zip_prefix: Some("01310100".into()),
                trading_name: Some("pio xii".into()),
                opening_from: Some("2020-02-29".into()),
                ..Default::default()
            }),
        );
        check_filters(&["--state", "S1"], Err("invalid value 'S1' for '--state <STATE>': must be a two-letter code"));
        check_filters(&["--neighborhood", " "], Err("must not be blank"));
        check_filters(&["--opening-date-to", "2021-02-29"], Err("must be a date YYYY-MM-DD from 1800 to 2100"));
        check_filters(&["--company-size", "123"], Err("must be a code of 1 to 2 digits"));
        check_filters(
            &["--state", "rj,SP", "--any-sector", "6201-5/01,4751201", "--capital-from", "1000.5", "--mei", "false"],
            Ok(cnpj_store::SearchFilters {
                state: vec!["RJ".into(), "SP".into()],
                any_sector: vec!["4751201".into(), "6201501".into()],
                capital_from: Some(100_050),
                mei: Some(false),
                ..Default::default()
            }),
        );
        check_filters(&["--state", "SP,,RJ"], Err("must hold no empty value"));
        check_filters(&["--capital-to", "1.000,00"], Err("must be reais"));
        check_filters(&["--head-office", "yes"], Err("must be true or false"));
    }
}
