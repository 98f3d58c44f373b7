//! `cnpj-api`: serves a registry dataset read-only over HTTP (search, detail, batch, changes,
//! reference data, cities; and the same as MCP tools for agents, `/mcp`), and the operator's
//! account commands. Exit codes: 0 success; 1 failure; 2 invalid arguments.

mod docs;
mod error;
mod limits;
mod mcp;
mod params;
mod serve;
mod server;

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use cnpj_accounts::Accounts;
use cnpj_store::{Limits, SearchIndexFile, Source, Store};

#[derive(Debug, Parser)]
#[command(name = "cnpj-api", version, about = "The read-only CNPJ registry API")]
struct Cli {
    /// The accounts store (SQLite file; created when missing).
    #[arg(long, global = true, env = "CNPJ_API_ACCOUNTS", default_value = "accounts.sqlite")]
    accounts: PathBuf,
    /// Keep accounts, credits and rate-limit counters in Postgres instead (schema cnpj_accounts),
    /// shared by every replica that names the same server.
    #[arg(long, global = true, env = "CNPJ_API_ACCOUNTS_POSTGRES", conflicts_with = "accounts")]
    accounts_postgres: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a dataset. SIGHUP re-opens it (swap without restart); a Postgres dataset is also
    /// reloaded when a new publication is swapped in; SIGTERM shuts down gracefully.
    Serve {
        /// A DuckDB dataset file.
        #[arg(long, required_unless_present = "postgres", conflicts_with = "postgres")]
        db: Option<PathBuf>,
        /// Serve from Postgres instead (connection URL).
        #[arg(long, env = "CNPJ_API_POSTGRES")]
        postgres: Option<String>,
        /// The Postgres schema of the dataset.
        #[arg(long, default_value = "cnpj")]
        schema: String,
        /// The search index to search with: by default a DuckDB dataset's own (`<db>.search`);
        /// with --postgres, the index file of the build that was published (its build id is
        /// checked against the publication's). Without one, searches run by SQL.
        #[arg(long, conflicts_with = "no_search_index")]
        search_index: Option<PathBuf>,
        /// Search by SQL only, ignoring any search index (to compare, or to troubleshoot).
        #[arg(long)]
        no_search_index: bool,
        /// Seconds of work a search by SQL may take (a term without a letter or digit, which the
        /// search index cannot answer, or any search without an index); past it the search is
        /// stopped and answered 400, naming the terms to narrow.
        #[arg(long, default_value_t = 2.0, value_parser = budget)]
        search_budget: f64,
        /// The memory the dataset may use: DuckDB (three quarters) and the search index's cache of
        /// big bitmaps (a quarter), e.g. 1GB, 512MiB.
        #[arg(long, default_value = "1GB", value_parser = cnpj_model::parse_size)]
        memory_limit: u64,
        /// Seconds between checks for a new Postgres publication.
        #[arg(long, default_value_t = 5)]
        reload_check: u64,
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Requests per rolling minute per user.
        #[arg(long, default_value_t = 100)]
        rate_limit: u32,
        /// The rate limit's rolling window, in seconds.
        #[arg(long, default_value_t = 60)]
        rate_window: u64,
        /// Credits per detail record found, and per company history answered.
        #[arg(long, default_value_t = 1)]
        price_detail: i64,
        /// Credits per search, and per page of changes, that returns at least one item.
        #[arg(long, default_value_t = 1)]
        price_search: i64,
        /// Credits per CNPJ found in a batch.
        #[arg(long, default_value_t = 1)]
        price_batch: i64,
        /// Seconds a client has to send a request head (from the connection's opening for the
        /// first, from its first byte for the next ones); the connection is closed after it.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
        header_timeout: u64,
        /// Seconds a client has to send a request body once its head arrived (408, then closed).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
        body_timeout: u64,
        /// Seconds a keep-alive connection may wait for its next request before it is closed.
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
        idle_timeout: u64,
        /// Connections open at once; beyond it, new ones wait in the listen backlog.
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
        max_connections: u32,
    },
    /// Manage users, tokens and credits.
    Accounts {
        #[command(subcommand)]
        command: AccountsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum AccountsCommand {
    CreateUser {
        name: String,
        #[arg(long, default_value_t = 0)]
        credits: i64,
    },
    /// Prints a new token once; only its hash is kept.
    IssueToken {
        user: String,
        /// Days until the token expires (never by default).
        #[arg(long)]
        expires: Option<u32>,
    },
    RevokeToken {
        prefix: String,
    },
    /// Adds credits (negative to take away; never below zero).
    Grant {
        user: String,
        #[arg(allow_negative_numbers = true)]
        credits: i64,
    },
    Show {
        user: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    // Colours only on a terminal: a log file or a pipe gets plain text.
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away (`accounts show ana | head -1`): it had what it wanted.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
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

/// A search budget: seconds, more than 0 and at most an hour.
fn budget(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 3600.0 => Ok(seconds),
        _ => Err(format!("{text:?} is not a number of seconds from 0 to 3600")),
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let accounts = match &cli.accounts_postgres {
        Some(url) => Accounts::open_postgres(url).context("opening the accounts store in Postgres")?,
        None => Accounts::open(&cli.accounts)
            .with_context(|| format!("opening the accounts store {}", cli.accounts.display()))?,
    };
    match cli.command {
        Command::Serve {
            db,
            postgres,
            schema,
            search_index,
            no_search_index,
            search_budget,
            memory_limit,
            reload_check,
            listen,
            rate_limit,
            rate_window,
            price_detail,
            price_search,
            price_batch,
            header_timeout,
            body_timeout,
            idle_timeout,
            max_connections,
        } => {
            let source = match (db, postgres) {
                (Some(path), _) => Source::DuckDb(path),
                (None, Some(url)) => Source::Postgres { url, schema },
                (None, None) => anyhow::bail!("--db or --postgres is required"),
            };
            let index = match (search_index, no_search_index) {
                (_, true) => SearchIndexFile::None,
                (Some(path), false) => SearchIndexFile::At(path),
                (None, false) => SearchIndexFile::Beside,
            };
            let limits = Limits { memory: memory_limit, search_budget: Duration::from_secs_f64(search_budget) };
            let store = Store::open_with(&source, &index, limits)?;
            if !store.has_search_index() {
                tracing::info!("no search index in use: searches run by SQL");
            }
            let watch = matches!(source, Source::Postgres { .. });
            let prices = server::Prices { detail: price_detail, batch_item: price_batch, search: price_search };
            let limiter = limits::RateLimiter::new(rate_limit, std::time::Duration::from_secs(rate_window));
            let state = Arc::new(server::AppState::new(store, accounts, limiter, prices));
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::bind(listen).await.with_context(|| format!("listening on {listen}"))?;
                let addr = listener.local_addr()?;
                print(&format!("http://{addr}"))?;
                tracing::info!(%addr, "serving");
                server::reload_on_sighup(Arc::clone(&state))?;
                if watch {
                    server::watch_publications(Arc::clone(&state), std::time::Duration::from_secs(reload_check.max(1)));
                }
                let limits = serve::Limits {
                    header_timeout: Duration::from_secs(header_timeout),
                    idle_timeout: Duration::from_secs(idle_timeout),
                    max_connections: max_connections as usize,
                };
                let tools = mcp::service(Arc::clone(&state));
                let router = server::router(state, Duration::from_secs(body_timeout), tools);
                serve::serve(listener, router, limits, server::shutdown_signal()).await?;
                anyhow::Ok(())
            })
        }
        Command::Accounts { command } => manage(&accounts, command),
    }
}

/// An `accounts` command, its outcome printed.
fn manage(accounts: &Accounts, command: AccountsCommand) -> anyhow::Result<()> {
    match command {
        AccountsCommand::CreateUser { name, credits } => {
            let user = accounts.create_user(&name, credits)?;
            print(&format!("created user {} with {} credits", user.name, user.credits))?;
        }
        AccountsCommand::IssueToken { user, expires } => print(&accounts.issue_token(&user, expires)?)?,
        AccountsCommand::RevokeToken { prefix } => {
            accounts.revoke_token(&prefix)?;
            print(&format!("revoked {prefix}"))?;
        }
        AccountsCommand::Grant { user, credits } => {
            let user = accounts.grant(&user, credits)?;
            print(&format!("{} has {} credits", user.name, user.credits))?;
        }
        AccountsCommand::Show { user } => {
            let (user, tokens, used) = accounts.show(&user)?;
            print(&format!("user {}: {} credits, {} used", user.name, user.credits, used))?;
            for t in tokens {
                let state = match (t.revoked_at, t.expires_at) {
                    (Some(_), _) => "revoked".to_owned(),
                    (None, Some(at)) => format!("expires at {at}"),
                    (None, None) => "active".to_owned(),
                };
                print(&format!("  {}…  {state}", t.prefix))?;
            }
        }
    }
    Ok(())
}
