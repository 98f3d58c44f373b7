//! `cnpj-api`: serves a registry dataset read-only over HTTP (search, detail, batch, changes,
//! reference data, cities; users' watchlists and their events; and the same as MCP tools for
//! agents, `/mcp`; the account as JSON; the pages for people, `cnpj-pages`), and the operator's
//! account commands. Exit codes: 0 success; 1 failure; 2 invalid arguments.

mod account;
mod changes;
mod companies;
mod deliveries;
mod docs;
mod error;
mod exporting;
mod exports;
mod exposition;
mod jobs;
mod limits;
mod mcp;
mod observe;
mod params;
mod partners;
mod runner;
mod serve;
mod server;
mod site;
mod usage;
mod watching;
mod watchlists;

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use cnpj_accounts::{Accounts, LinkKind, Plans, Role};
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
    /// The log on stderr: text, or one JSON object a line (then each request's line holds its
    /// time, request id, method, route, status, latency_ms, user_id and credits). RUST_LOG sets
    /// the level (info by default: a line per request).
    #[arg(long, global = true, env = "CNPJ_API_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// The plans (TOML: `default = "NAME"` and a `[plans.NAME]` table per plan with
    /// `monthly_allowance`, `requests_per_minute`, `max_tokens`, `max_watched`). Without it, one
    /// plan `free`: no allowance, --rate-limit requests per minute, --max-watched CNPJs watched.
    #[arg(long, global = true, env = "CNPJ_API_PLANS")]
    plans: Option<PathBuf>,
    /// The service's address as people reach it, for the links the accounts commands print and
    /// the pages mail.
    #[arg(long, global = true, env = "CNPJ_API_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
    public_url: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a dataset. SIGHUP re-opens it (swap without restart); a Postgres dataset is also
    /// reloaded when a new publication is swapped in; SIGTERM (or Ctrl-C) stops accepting, lets the
    /// requests in flight finish (30 s at most), flushes the accounts store and exits 0. Once a
    /// dataset is served, sends each watchlist's webhook its month. Prints the URL it serves on,
    /// then the metrics URL (with --metrics-listen).
    Serve(Box<ServeArgs>),
    /// Manage users, tokens and credits.
    Accounts {
        #[command(subcommand)]
        command: AccountsCommand,
    },
}

#[derive(Debug, Args)]
struct ServeArgs {
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
    /// Serve /metrics (Prometheus text format) on this address too; off by default.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Requests per rolling minute per user, without --plans (with it, each plan says).
    #[arg(long, default_value_t = 100)]
    rate_limit: u32,
    /// Who may sign up at /signup: anyone (open, on the default plan), only with an operator's
    /// invitation link (invite), or nobody (closed: no sign-up page).
    #[arg(long, value_enum, default_value_t = SignupArg::Invite)]
    signup: SignupArg,
    /// Session cookies without `Secure`, for plain HTTP on a laptop (never behind TLS).
    #[arg(long)]
    insecure_cookies: bool,
    /// Send mail through this SMTP server: verification links at sign-up (an account is usable
    /// once verified) and reset links from /password/forgot (their links start with
    /// --public-url). smtp://host:port (plain; ?tls=required for STARTTLS) or smtps://host, with
    /// user:password@ when the server wants them.
    #[arg(long, env = "CNPJ_API_SMTP_URL", requires = "mail_from")]
    smtp_url: Option<String>,
    /// The sender of that mail, e.g. "CNPJ Registry <no-reply@example.com>".
    #[arg(long, env = "CNPJ_API_MAIL_FROM", requires = "smtp_url")]
    mail_from: Option<String>,
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
    /// The most CNPJs a user may watch, over all their watchlists, without --plans (with it, each
    /// plan says).
    #[arg(long, default_value_t = 10_000)]
    max_watched: u32,
    /// Accept `http` webhook URLs (by default `https` only).
    #[arg(long)]
    allow_http_webhooks: bool,
    /// Deliver webhooks to private, loopback and other non-public addresses too (by default
    /// refused, as are names that resolve to them).
    #[arg(long)]
    allow_private_webhooks: bool,
    /// Seconds between two looks for webhook deliveries to make (a new dataset served) and to
    /// send (due ones).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    webhook_interval: u64,
    /// Seconds a replica holds the delivery it is sending: if it dies, another replica (or it,
    /// restarted) sends it again once this ran out. At least 15, longer than an attempt (the
    /// POST's 10 s, and resolving the webhook's host, which that limit does not cover).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(15..))]
    webhook_lease: u64,
    /// Partners first-class: their search, their pages and the companies' networks (contract
    /// §14). `off` removes them (404) for an operator whose policy forbids profiling people by
    /// their shares; the partners inside a company's record stay, as the spec has them.
    #[arg(long, value_enum, default_value_t = Switch::On)]
    partners: Switch,
    /// The folder of the export jobs' files (created when missing); replicas share one.
    #[arg(long, env = "CNPJ_API_EXPORT_DIR", default_value = "exports")]
    export_dir: PathBuf,
    /// How long an export's file is kept once written: seconds, or a number with s, m, h or d.
    #[arg(long, default_value = "7d", value_parser = duration)]
    export_ttl: Duration,
    /// Export jobs this process runs at once (0: none here, its replicas run them); a user's jobs
    /// run one at a time over all replicas, the others wait, queued.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=16))]
    export_jobs: u32,
    /// Seconds a replica holds the job it runs without renewing it (renewed every third of it): a
    /// job whose process died runs again, elsewhere or after a restart, once this ran out.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(3..))]
    export_lease: u64,
    /// Seconds between two looks for export jobs to run (a job accepted here starts at once).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    export_interval: u64,
}

/// A feature on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
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
    /// Invite someone to sign up: prints a one-time link (valid 7 days).
    Invite {
        email: String,
        /// Their plan (the default plan otherwise).
        #[arg(long)]
        plan: Option<String>,
        /// Credits they start with.
        #[arg(long, default_value_t = 0)]
        credits: i64,
    },
    /// Give a user an email and a password to log in to the pages; the password is read from
    /// standard input (one line), never from the arguments.
    SetLogin {
        user: String,
        #[arg(long)]
        email: String,
    },
    /// Make a user an admin (the admin pages), or a plain user again.
    Role {
        user: String,
        #[arg(value_enum)]
        role: RoleArg,
    },
    /// Print a one-time password reset link (valid 1 hour), for when no mail is sent.
    ResetLink {
        email: String,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SignupArg {
    Open,
    Invite,
    Closed,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum RoleArg {
    User,
    Admin,
}

/// The log's filter: RUST_LOG, else `info`; rmcp at `warn` unless RUST_LOG names it, since it
/// logs each MCP call's client at `info`, three lines of it, where the request has its own line.
fn log_filter() -> tracing_subscriber::EnvFilter {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    match std::env::var("RUST_LOG") {
        Ok(asked) if asked.contains("rmcp") => filter,
        _ => filter.add_directive("rmcp=warn".parse().expect("a directive")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let log = tracing_subscriber::fmt().with_env_filter(log_filter()).with_writer(std::io::stderr);
    match cli.log_format {
        // Colours only on a terminal: a log file or a pipe gets plain text.
        LogFormat::Text => log.with_ansi(std::io::stderr().is_terminal()).init(),
        // An event's fields at the top level; `span` names the request an event was logged in.
        LogFormat::Json => log.json().flatten_event(true).with_span_list(false).init(),
    }
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
/// Writes `text` and a newline to stdout in one write (stdout's line buffering writes each line as
/// it comes when they are formatted in pieces, and a reader that closes the pipe after the first
/// line would fail the second). A reader gone (a closed pipe) is no error: nothing else is
/// written to stdout.
fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(format!("{text}\n").as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        done => done,
    }
}

/// A search budget: seconds, more than 0 and at most an hour.
fn budget(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 3600.0 => Ok(seconds),
        _ => Err(format!("{text:?} is not a number of seconds from 0 to 3600")),
    }
}

/// A duration: seconds, or a whole number followed by s, m, h or d (`7d`).
fn duration(text: &str) -> Result<Duration, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => 0,
    };
    match digits.parse::<u64>() {
        Ok(n) if n > 0 && scale > 0 => Ok(Duration::from_secs(n.saturating_mul(scale))),
        _ => Err(format!("{text:?} is not a duration such as 3600, 90m, 12h or 7d")),
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
    let plans = match &cli.plans {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Some(Plans::parse(&text).with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    match cli.command {
        Command::Serve(args) => {
            let plans = plans.unwrap_or_else(|| Plans::free(args.rate_limit, args.max_watched));
            serve(*args, accounts.with_plans(plans), &cli.public_url)
        }
        Command::Accounts { command } => {
            manage(&accounts.with_plans(plans.unwrap_or_default()), &cli.public_url, command)
        }
    }
}

/// `serve`: opens the dataset, serves it until SIGTERM or Ctrl-C, then flushes the accounts store.
fn serve(args: ServeArgs, accounts: Accounts, public_url: &str) -> anyhow::Result<()> {
    let (pages, exports, index) = (pages_config(&args, public_url)?, exports(&args), search_index(&args));
    let watching = watching::Settings::new(webhook_policy(&args));
    let source = match (args.db, args.postgres) {
        (Some(path), _) => Source::DuckDb(path),
        (None, Some(url)) => Source::Postgres { url, schema: args.schema },
        (None, None) => anyhow::bail!("--db or --postgres is required"),
    };
    let limits = Limits { memory: args.memory_limit, search_budget: Duration::from_secs_f64(args.search_budget) };
    let store = Store::open_with(&source, &index, limits)?;
    if !store.has_search_index() {
        tracing::info!("no search index in use: searches run by SQL");
    }
    let prices = server::Prices { detail: args.price_detail, batch_item: args.price_batch, search: args.price_search };
    let limiter = limits::RateLimiter::new(Duration::from_secs(args.rate_window));
    let mail = pages.mail.clone().map(runner::mail);
    let state = Arc::new(
        server::AppState::new(store, accounts, limiter, prices)
            .with_watchlists(watching)
            .with_partners(args.partners == Switch::On)
            .with_exports(exports, mail),
    );
    let limits = serve::Limits {
        header_timeout: Duration::from_secs(args.header_timeout),
        idle_timeout: Duration::from_secs(args.idle_timeout),
        max_connections: args.max_connections as usize,
    };
    let (body_timeout, reload_check) = (Duration::from_secs(args.body_timeout), args.reload_check.max(1));
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let listener = bind(args.listen).await?;
        let metrics = match args.metrics_listen {
            Some(addr) => Some((bind(addr).await?, exposition::install()?)),
            None => None,
        };
        // Signals are caught before the URLs are printed.
        let stopping = stopping()?;
        server::reload_on_sighup(Arc::clone(&state))?;
        // Both URLs in one write: a reader that stops after the first line loses nothing.
        let mut urls = format!("http://{}", listener.local_addr()?);
        if let Some((metrics, _)) = &metrics {
            urls.push_str(&format!("\nhttp://{}/metrics", metrics.local_addr()?));
        }
        print(&urls)?;
        tracing::info!(addr = %listener.local_addr()?, "serving");
        if matches!(source, Source::Postgres { .. }) {
            server::watch_publications(Arc::clone(&state), Duration::from_secs(reload_check));
        }
        let (every, lease) = (Duration::from_secs(args.webhook_interval), Duration::from_secs(args.webhook_lease));
        deliveries::spawn(Arc::clone(&state), every, lease);
        runner::spawn(Arc::clone(&state));
        let tools = mcp::service(Arc::clone(&state));
        server::flush_usage_periodically(Arc::clone(&state));
        let pages = cnpj_pages::router(Arc::clone(state.accounts()), pages, Some(site::registry(Arc::clone(&state))));
        let routes = companies::routes(&state)
            .merge(changes::routes(&state))
            .merge(account::routes(&state))
            .merge(watchlists::routes(&state))
            .merge(deliveries::routes(&state))
            .merge(jobs::routes(&state));
        let routes = if state.partners { routes.merge(partners::routes(&state)) } else { routes };
        let router = server::router(Arc::clone(&state), body_timeout, tools, routes, pages);
        let api = serve::serve(listener, router, limits, stopped(stopping.clone()));
        match metrics {
            Some((listener, handle)) => {
                let router = exposition::router(Arc::clone(&state), handle);
                let (api, metrics) = tokio::join!(api, serve::serve(listener, router, limits, stopped(stopping)));
                api.and(metrics)?;
            }
            None => api.await?,
        }
        anyhow::Ok(())
    })?;
    // A request past the drain may still hold a blocking thread: it is not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    state.flush();
    tracing::info!("stopped");
    Ok(())
}

/// The search index to search with.
fn search_index(args: &ServeArgs) -> SearchIndexFile {
    match (&args.search_index, args.no_search_index) {
        (_, true) => SearchIndexFile::None,
        (Some(path), false) => SearchIndexFile::At(path.clone()),
        (None, false) => SearchIndexFile::Beside,
    }
}

/// The export jobs' settings.
fn exports(args: &ServeArgs) -> exporting::Exports {
    exporting::Exports::new(
        args.export_dir.clone(),
        args.export_ttl,
        Duration::from_secs(args.export_lease),
        Duration::from_secs(args.export_interval),
        args.export_jobs as usize,
    )
}

/// Where webhooks may lead (for the API's routes and the pages alike).
fn webhook_policy(args: &ServeArgs) -> cnpj_webhooks::Policy {
    cnpj_webhooks::Policy { allow_http: args.allow_http_webhooks, allow_private: args.allow_private_webhooks }
}

/// The pages' settings: who may sign up, the cookies' `Secure`, the mail, where webhooks may lead.
fn pages_config(args: &ServeArgs, public_url: &str) -> anyhow::Result<cnpj_pages::Config> {
    let signup = match args.signup {
        SignupArg::Open => cnpj_pages::Signup::Open,
        SignupArg::Invite => cnpj_pages::Signup::Invite,
        SignupArg::Closed => cnpj_pages::Signup::Closed,
    };
    let mail = match (&args.smtp_url, &args.mail_from) {
        (Some(url), Some(from)) => Some(cnpj_pages::Mailer::new(url, from, public_url)?),
        _ => None,
    };
    Ok(cnpj_pages::Config { signup, secure_cookies: !args.insecure_cookies, mail, webhooks: webhook_policy(args) })
}

async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listening on {addr}"))
}

/// Turns true at SIGTERM or Ctrl-C.
fn stopping() -> std::io::Result<tokio::sync::watch::Receiver<bool>> {
    let signal = server::shutdown_signal()?;
    let (stop, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        signal.await;
        tracing::info!("shutting down: answering the requests in flight ({} s at most)", serve::DRAIN.as_secs());
        stop.send_replace(true);
    });
    Ok(stopping)
}

/// Completes once `stopping` turns true.
async fn stopped(mut stopping: tokio::sync::watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// An `accounts` command, its outcome printed.
fn manage(accounts: &Accounts, public_url: &str, command: AccountsCommand) -> anyhow::Result<()> {
    let base = public_url.trim_end_matches('/');
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
        AccountsCommand::Invite { email, plan, credits } => {
            let token = accounts.make_link(LinkKind::Invite, &email, None, plan.as_deref(), credits)?;
            print(&format!("{base}/signup?invite={token}"))?;
        }
        AccountsCommand::SetLogin { user, email } => {
            let mut password = String::new();
            std::io::stdin().read_line(&mut password).context("reading the password from standard input")?;
            let password = password.trim_end_matches(['\r', '\n']);
            if let Some(problem) = cnpj_pages::password_problem(password, &email) {
                anyhow::bail!("the password is refused: {problem}");
            }
            let person = accounts.set_login(&user, &email, &cnpj_accounts::hash_password(password)?)?;
            print(&format!("{} logs in as {}", person.name, person.email.unwrap_or_default()))?;
        }
        AccountsCommand::Role { user, role } => {
            let role = match role {
                RoleArg::User => Role::User,
                RoleArg::Admin => Role::Admin,
            };
            accounts.set_role(&user, role)?;
            print(&format!("{user} is now {}", role.as_str()))?;
        }
        AccountsCommand::ResetLink { email } => {
            let person = accounts
                .person_by_email(&email)?
                .ok_or_else(|| cnpj_accounts::AccountsError::UnknownEmail(email.clone()))?;
            let token = accounts.make_link(LinkKind::Reset, &email, Some(person.id), None, 0)?;
            print(&format!("{base}/password/reset?token={token}"))?;
        }
    }
    Ok(())
}
