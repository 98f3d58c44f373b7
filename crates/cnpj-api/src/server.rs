//! The HTTP service: the router, the state every family of endpoints shares (`crate::companies`,
//! `crate::changes`, `crate::exports`, `crate::account`, `crate::watchlists`), authentication and
//! rate limiting, credits, pagination, dataset swap; and the probes and status an operator (or a
//! load balancer) asks for, none of them authenticated, charged or counted: `/healthz` (the
//! process answers), `/readyz` (the dataset and the accounts store answer) and `/api/v1/status`
//! (the dataset served: its month, its build, since when).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use cnpj_accounts::{Accounts, User};
use cnpj_model::{CnpjQuery, Locale};
use cnpj_store::{Store, StoreError};
use serde_json::{Value, json};

use crate::docs;
use crate::error::ApiError;
use crate::exporting::ExportMail;
use crate::limits::{BatchCache, RateLimiter};
use crate::observe::{self, Usage};
use crate::params::{self, Params};
use crate::usage::{self as counting, UsageCounter};

/// Credits per request (by default 1: a detail found, each batch CNPJ found, a non-empty page).
#[derive(Clone, Copy, Debug)]
pub struct Prices {
    /// A detail record found; a company history answered (priced like detail).
    pub detail: i64,
    pub batch_item: i64,
    /// A search, or a page of changes (priced like search), with at least one item.
    pub search: i64,
}

impl Default for Prices {
    fn default() -> Prices {
        Prices { detail: 1, batch_item: 1, search: 1 }
    }
}

/// The dataset being served, and since when (a swap resets it).
#[derive(Clone)]
pub struct Served {
    pub store: Arc<Store>,
    pub since: SystemTime,
}

pub struct AppState {
    served: RwLock<Served>,
    pub(crate) accounts: Arc<Accounts>,
    limiter: RateLimiter,
    pub(crate) cache: BatchCache,
    pub(crate) prices: Prices,
    usage: UsageCounter,
    pub(crate) watchlists: crate::watching::Settings,
    /// Whether partners are served first-class (`serve --partners`): their search and pages and
    /// the companies' networks; off, those answer 404.
    pub(crate) partners: bool,
    /// The export jobs' settings (`crate::runner`).
    pub(crate) exports: crate::exporting::Exports,
    /// Mails a job's owner its link once it is done (with SMTP configured).
    pub(crate) exports_mail: Option<ExportMail>,
}

impl AppState {
    pub fn new(store: Store, accounts: Accounts, limiter: RateLimiter, prices: Prices) -> AppState {
        AppState {
            served: RwLock::new(Served { store: Arc::new(store), since: SystemTime::now() }),
            accounts: Arc::new(accounts),
            limiter,
            cache: BatchCache::new(Duration::from_secs(6 * 3600)),
            prices,
            usage: UsageCounter::default(),
            watchlists: crate::watching::Settings::default(),
            partners: true,
            exports: crate::exporting::Exports::default(),
            exports_mail: None,
        }
    }

    /// The export jobs' settings, and what mails a finished job's link.
    pub fn with_exports(mut self, exports: crate::exporting::Exports, mail: Option<ExportMail>) -> AppState {
        self.exports = exports;
        self.exports_mail = mail;
        self
    }

    pub fn accounts(&self) -> &Arc<Accounts> {
        &self.accounts
    }

    /// Writes the usage counted so far to the accounts store (blocking).
    pub fn flush_usage(&self) {
        if let Err(e) = timed("record_usage", || self.usage.flush(&self.accounts)) {
            tracing::warn!(error = %e, "writing the usage counts failed; kept for the next try");
        }
    }

    /// Counts a request of `user_id` in usage (no token: a page's, `crate::site`).
    pub(crate) fn count_usage(&self, user_id: i64, endpoint: &'static str, status: u16, credits: i64) {
        self.usage.record(user_id, endpoint, status, credits, None);
    }

    /// The rate limit of `user_id` at `per_minute`, counted for one more request: the requests
    /// left, or a 429 (shared by replicas on Postgres, in memory on SQLite, as `authenticate`).
    pub(crate) async fn admit(self: &Arc<Self>, user_id: i64, per_minute: u32) -> Result<u32, ApiError> {
        let verdict = if self.accounts.is_shared() {
            let (accounts, window) = (Arc::clone(&self.accounts), self.limiter.window());
            blocking(move || Ok(timed("rate_check", || accounts.rate_check(user_id, per_minute, window))?)).await?
        } else {
            self.limiter.check(user_id, per_minute)
        };
        verdict.map_err(|retry_after| ApiError::TooManyRequests { retry_after })
    }

    /// Partners served first-class or not (`serve --partners`).
    pub fn with_partners(mut self, partners: bool) -> AppState {
        self.partners = partners;
        self
    }

    /// The watchlists' settings (the default cap of watched CNPJs per user, which webhook
    /// URLs are allowed).
    pub fn with_watchlists(mut self, settings: crate::watching::Settings) -> AppState {
        self.watchlists = settings;
        self
    }

    /// The dataset being served; a request keeps the one it started with (`with_dataset`).
    pub fn served(&self) -> Served {
        self.served.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Opens the dataset again and serves it from now on; the batch cache is dropped.
    pub fn reload(&self) -> Result<String, cnpj_store::StoreError> {
        let store = self.served().store.reopen()?;
        let month = store.source_month().to_owned();
        let served = Served { store: Arc::new(store), since: SystemTime::now() };
        *self.served.write().unwrap_or_else(std::sync::PoisonError::into_inner) = served;
        self.cache.clear();
        Ok(month)
    }

    /// At shutdown, once the last request was answered: writes the usage counts, then the
    /// accounts store's debits into its file.
    pub fn flush(&self) {
        self.flush_usage();
        match self.accounts.flush() {
            Ok(()) => tracing::info!("accounts store flushed"),
            Err(e) => tracing::error!(error = %e, "flushing the accounts store failed"),
        }
    }
}

/// The authenticated user of a request, and the credits charged to them by it.
#[derive(Clone)]
pub struct Caller {
    pub(crate) user: User,
    charged: Arc<AtomicI64>,
}

impl Caller {
    /// A caller that no token named: a person of the pages (`crate::site`), charged nothing yet.
    pub(crate) fn new(user: User) -> Caller {
        Caller { user, charged: Arc::default() }
    }

    pub fn user_id(&self) -> i64 {
        self.user.id
    }

    /// The credits charged to this caller so far.
    pub(crate) fn charged(&self) -> i64 {
        self.charged.load(Ordering::SeqCst)
    }

    /// Counts credits charged to this caller by the accounts store directly (an export job's hold).
    pub(crate) fn add_charged(&self, credits: i64) {
        self.charged.fetch_add(credits, Ordering::SeqCst);
    }
}

/// Runs `f`, a call of the accounts store, timed in `cnpj_accounts_duration_seconds`.
pub(crate) fn timed<T>(operation: &'static str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = f();
    metrics::histogram!("cnpj_accounts_duration_seconds", "operation" => operation).record(started.elapsed());
    result
}

pub type Shared = Arc<AppState>;

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ApiError::Internal(e.to_string()))?
}

/// The largest request body (413 beyond it).
pub const MAX_BODY: usize = 64 * 1024;
/// The longest request target (path and query) answered with more than a 414.
pub const MAX_URI: usize = 8 * 1024;

/// The month of the dataset that answered, on every response of a route that reads it.
const DATASET_MONTH: HeaderName = HeaderName::from_static("x-dataset-month");

/// Every route. Each answers its methods: any other, HEAD included, is a 405 with `Allow`, before
/// authentication (so it is neither charged nor counted by the rate limit). `mcp` answers `/mcp`
/// (the MCP endpoint, whose tools call the endpoints' functions); `routes` are the other modules'
/// (the companies, the changes, the account, watchlists, their deliveries), each behind its own
/// methods and authentication; `pages` the pages for people (`cnpj-pages`, which answer their own
/// methods).
pub fn router<M>(state: Shared, body_timeout: Duration, mcp: M, routes: Router<Shared>, pages: Router) -> Router
where
    M: tower::Service<Request, Error = std::convert::Infallible> + Clone + Send + Sync + 'static,
    M::Response: IntoResponse,
    M::Future: Send + 'static,
{
    let authenticate = || middleware::from_fn_with_state(Arc::clone(&state), authenticate);
    let with_dataset = || middleware::from_fn_with_state(Arc::clone(&state), with_dataset);
    let gets = Router::new()
        .route("/api/v1/status", get(status).fallback(not_allowed("GET")))
        .route_layer(with_dataset())
        .route("/healthz", get(healthz).fallback(not_allowed("GET")))
        .route("/readyz", get(readyz).fallback(not_allowed("GET")))
        .route("/api/v1/openapi.json", get(openapi).fallback(not_allowed("GET")))
        .route("/docs", get(docs::page).fallback(not_allowed("GET")))
        .route("/docs/{file}", get(docs::asset).fallback(not_allowed("GET")))
        .route_layer(middleware::from_fn_with_state("GET", only_method));
    // Authenticated and rate-limited as the REST routes are (its tools charge as they do).
    let mcp = Router::new()
        .route_service("/mcp", mcp)
        .route_layer(authenticate())
        .route_layer(with_dataset())
        .route_layer(middleware::from_fn_with_state("POST", only_method));
    Router::new()
        .merge(gets)
        .merge(routes)
        .merge(mcp)
        .with_state(state)
        .merge(pages)
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(body_timeout, read_body))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| ApiError::Internal("panic".into()).into_response()))
        .layer(middleware::from_fn(observe::observe))
}

/// A 405 naming the route's methods in `Allow`.
fn method_not_allowed(allowed: &'static str) -> Response {
    let mut response = ApiError::MethodNotAllowed.into_response();
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allowed));
    response
}

/// The fallback of a route for the methods it does not answer (axum's would say `GET,HEAD`; a
/// route's own fallback is also kept by `method_not_allowed_fallback`, and so stays behind
/// `only_method`).
pub(crate) fn not_allowed(allowed: &'static str) -> impl Fn() -> std::future::Ready<Response> + Clone {
    move || std::future::ready(method_not_allowed(allowed))
}

/// The route layer that answers a wrong method before authentication (HEAD on a GET route included,
/// which axum would give to the GET handler, charging it); `allowed` is one method or several
/// (`GET, POST`).
pub(crate) async fn only_method(State(allowed): State<&'static str>, request: Request, next: Next) -> Response {
    if allowed.split(", ").any(|method| method == request.method().as_str()) {
        return next.run(request).await;
    }
    method_not_allowed(allowed)
}

/// Before routing: a request target over `MAX_URI` is a 414, and a body is read whole (at most
/// `MAX_BODY`, else 413) within `timeout` of the request head, else 408 and the connection closed.
async fn read_body(State(timeout): State<Duration>, request: Request, next: Next) -> Response {
    if request.uri().path_and_query().map_or(0, |pq| pq.as_str().len()) > MAX_URI {
        return ApiError::UriTooLong.into_response();
    }
    let headers = request.headers();
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return ApiError::PayloadTooLarge.into_response();
    }
    if declared.unwrap_or(0) == 0 && !headers.contains_key(header::TRANSFER_ENCODING) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    let bytes = match tokio::time::timeout(timeout, http_body_util::BodyExt::collect(limited)).await {
        Err(_) => return ApiError::RequestTimeout.into_response(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return ApiError::PayloadTooLarge.into_response(),
        Ok(Err(e)) => return ApiError::invalid("body", format!("The body could not be read: {e}.")).into_response(),
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive
/// (RFC 9110 §11.1).
fn bearer_token(request: &Request) -> Option<String> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once([' ', '\t'])?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

/// Gives a data route the dataset served when the request arrived (kept to its end, across a
/// swap), and puts its month on the response.
pub(crate) async fn with_dataset(State(state): State<Shared>, mut request: Request, next: Next) -> Response {
    let served = state.served();
    let month = HeaderValue::from_str(served.store.source_month()).ok().filter(|m| !m.is_empty());
    request.extensions_mut().insert(served);
    let mut response = next.run(request).await;
    if let Some(month) = month {
        response.headers_mut().insert(DATASET_MONTH, month);
    }
    response
}

/// The rate limit as counted for this request, put on it by authentication.
#[derive(Clone, Copy, Debug)]
pub struct RateInfo {
    pub per_minute: u32,
    pub remaining: u32,
}

/// Bearer token → user; then the rate limit of their plan; the limit headers go on every
/// authenticated response, the user and the credits charged on its extensions (`Usage`, for the
/// log), and the request is counted (`UsageCounter`, in memory).
pub(crate) async fn authenticate(State(state): State<Shared>, mut request: Request, next: Next) -> Response {
    let token = bearer_token(&request);
    let Some(token) = token else { return ApiError::Unauthenticated.into_response() };
    let accounts = Arc::clone(&state.accounts);
    let window = state.limiter.window();
    let prefix: String = token.chars().take(12).collect();
    // Accounts shared by replicas (Postgres) count requests there, in the same blocking call.
    let checked = blocking(move || {
        let Some(user) = timed("authenticate", || accounts.authenticate(&token))? else { return Ok(None) };
        let limit = accounts.plans().of(user.plan.as_deref()).1.requests_per_minute;
        let verdict = if accounts.is_shared() {
            Some(timed("rate_check", || accounts.rate_check(user.id, limit, window))?)
        } else {
            None
        };
        Ok(Some((user, limit, verdict)))
    })
    .await;
    let (user, limit, verdict) = match checked {
        Ok(Some(found)) => found,
        Ok(None) => return ApiError::Unauthenticated.into_response(),
        Err(e) => return e.into_response(),
    };
    let verdict = verdict.unwrap_or_else(|| state.limiter.check(user.id, limit));
    let charged = Arc::new(AtomicI64::new(0));
    let user_id = user.id;
    let endpoint = counting::endpoint(request.uri().path());
    let (mut response, remaining) = match verdict {
        Ok(remaining) => {
            request.extensions_mut().insert(Caller { user, charged: Arc::clone(&charged) });
            request.extensions_mut().insert(RateInfo { per_minute: limit, remaining });
            (next.run(request).await, remaining)
        }
        Err(retry_after) => (ApiError::TooManyRequests { retry_after }.into_response(), 0),
    };
    let credits = charged.load(Ordering::SeqCst);
    state.usage.record(user_id, endpoint, response.status().as_u16(), credits, Some(&prefix));
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", HeaderValue::from(limit));
    headers.insert("x-ratelimit-remaining", HeaderValue::from(remaining));
    response.extensions_mut().insert(Usage { user_id, credits });
    response
}

/// `routes` of `method` that read the dataset: each behind the method's check, then the dataset
/// the request arrived on, then authentication (the order every family of endpoints keeps).
pub(crate) fn dataset_routes(state: &Shared, method: &'static str, routes: Router<Shared>) -> Router<Shared> {
    routes
        .route_layer(middleware::from_fn_with_state(Arc::clone(state), authenticate))
        .route_layer(middleware::from_fn_with_state(Arc::clone(state), with_dataset))
        .route_layer(middleware::from_fn_with_state(method, only_method))
}

/// Debits `amount`; `Err(402)` when the balance cannot cover it (nothing is debited). Counted in
/// `cnpj_credits_charged_total` by what was charged.
pub(crate) async fn charge(state: &Shared, caller: &Caller, amount: i64, what: &'static str) -> Result<i64, ApiError> {
    let accounts = Arc::clone(&state.accounts);
    let id = caller.user.id;
    let remaining = blocking(move || {
        timed("charge", || accounts.charge(id, amount, what))?.map_err(|_| ApiError::InsufficientCredits)
    })
    .await?;
    caller.charged.fetch_add(amount, Ordering::SeqCst);
    metrics::counter!("cnpj_credits_charged_total", "endpoint" => what).increment(amount.unsigned_abs());
    Ok(remaining)
}

/// How long each readiness check may take.
const READY_WITHIN: Duration = Duration::from_secs(5);

/// GET /healthz: reads nothing.
async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// GET /readyz: 200, or 503 naming what does not answer (the error itself is logged, not shown).
async fn readyz(State(state): State<Shared>) -> Response {
    let store = state.served().store;
    let accounts = Arc::clone(&state.accounts);
    let checks = async {
        check("the dataset", blocking(move || Ok(store.ping()?))).await?;
        check("the accounts store", blocking(move || Ok(timed("ping", || accounts.ping())?))).await
    };
    match checks.await {
        Ok(()) => Json(json!({"status": "ready"})).into_response(),
        Err(e) => e.into_response(),
    }
}

/// A readiness check: its answer within `READY_WITHIN`, else `ApiError::NotReady` naming `what`.
async fn check(what: &str, answer: impl Future<Output = Result<(), ApiError>>) -> Result<(), ApiError> {
    let error = match tokio::time::timeout(READY_WITHIN, answer).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) => format!("{e:?}"),
        Err(_) => format!("no answer within {} s", READY_WITHIN.as_secs()),
    };
    tracing::warn!(%error, "not ready: {what} does not answer");
    Err(ApiError::NotReady(format!("{what} does not answer")))
}

/// GET /api/v1/status.
async fn status(Extension(served): Extension<Served>) -> Json<Value> {
    let known = |text: &str| if text.is_empty() { Value::Null } else { json!(text) };
    let since = served.since.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let store = &served.store;
    Json(json!({
        "success": true,
        "data": {
            "dataset_month": known(store.source_month()),
            "build_id": known(store.build_id()),
            "built_at": known(store.built_at()),
            "served_since": cnpj_model::utc_text(since),
        },
    }))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], include_str!("../../../schemas/openapi.json"))
}

/// A company's answer (its detail or its history) for the CNPJ as sent, priced like detail when
/// it answers (charged as `what`).
pub(crate) async fn of_company<T: serde::Serialize + Send + 'static>(
    state: &Shared,
    caller: &Caller,
    cnpj: &str,
    params: &Params,
    what: &'static str,
    look_up: impl FnOnce(&CnpjQuery, Locale) -> Result<Option<T>, StoreError> + Send + 'static,
) -> Result<Value, ApiError> {
    let locale = params::locale(params)?;
    let query = CnpjQuery::parse(cnpj).map_err(|e| ApiError::invalid("cnpj", format!("Invalid CNPJ: {e}.")))?;
    let data = blocking(move || Ok(look_up(&query, locale)?)).await?.ok_or(ApiError::CompanyNotFound)?;
    charge(state, caller, state.prices.detail, what).await?;
    Ok(json!({"success": true, "data": data}))
}

/// A page's pagination fields (an empty page has `from` = `to` = 0).
pub(crate) fn pagination(total: u64, page: u64, per_page: u64, items: usize) -> serde_json::Map<String, Value> {
    let from = if items == 0 { 0 } else { (page - 1) * per_page + 1 };
    let to = if items == 0 { 0 } else { from + items as u64 - 1 };
    let fields = json!({
        "total": total,
        "per_page": per_page,
        "current_page": page,
        "last_page": total.div_ceil(per_page).max(1),
        "from": from,
        "to": to,
    });
    let Value::Object(map) = fields else { unreachable!("an object literal") };
    map
}

/// Writes the usage counts every `FLUSH_EVERY` (the last ones at shutdown, `AppState::flush`).
pub fn flush_usage_periodically(state: Shared) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(counting::FLUSH_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let s = Arc::clone(&state);
            if let Err(e) = tokio::task::spawn_blocking(move || s.flush_usage()).await {
                tracing::error!(error = %e, "writing the usage counts panicked");
            }
        }
    });
}

/// Reloads the dataset on SIGHUP, for a swap without restart.
pub fn reload_on_sighup(state: Shared) -> std::io::Result<()> {
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let s = Arc::clone(&state);
            match tokio::task::spawn_blocking(move || s.reload()).await {
                Ok(Ok(month)) => tracing::info!(source_month = %month, "dataset reloaded"),
                Ok(Err(e)) => tracing::error!(error = %e, "dataset reload failed; still serving the previous one"),
                Err(e) => tracing::error!(error = %e, "dataset reload panicked"),
            }
        }
    });
    Ok(())
}

/// Reloads a Postgres dataset once a newer publication was swapped in (checked every `every`).
pub fn watch_publications(state: Shared, every: Duration) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let s = Arc::clone(&state);
            let reloaded = tokio::task::spawn_blocking(move || match s.served().store.is_current() {
                Ok(true) => Ok(None),
                Ok(false) => s.reload().map(Some),
                Err(e) => Err(e),
            })
            .await;
            match reloaded {
                Ok(Ok(Some(month))) => tracing::info!(source_month = %month, "new publication swapped in: reloaded"),
                Ok(Ok(None)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "checking for a new publication failed"),
                Err(e) => tracing::error!(error = %e, "publication check panicked"),
            }
        }
    });
}

/// Completes at SIGTERM or Ctrl-C (SIGINT), caught from this call on.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut interrupt) = (signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?);
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = interrupt.recv() => {},
        }
    })
}
