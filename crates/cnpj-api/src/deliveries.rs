//! Webhook deliveries, sent by the API process: each tick, once a dataset is served (at start,
//! after a SIGHUP swap or a new Postgres publication), the month's events of every list with a
//! webhook that has none of that month yet are made into deliveries in the accounts store (pages of at most
//! 1,000 events, ids stable); then the deliveries due are claimed one at a time under a lease
//! (one replica sends each; one that dies leaves it to the next once the lease ran out), charged
//! 1 credit at each attempt (without one a delivery waits, and goes on once there is), and POSTed
//! by `cnpj-webhooks`. A non-2xx answer or none is tried again after 1 minute, doubling, at most
//! 6 hours apart, for 24 hours; then it has failed, and its user may retry it.
//! Routes: `GET /api/v1/watchlists/{id}/deliveries`, `POST …/deliveries/{delivery_id}/retry`.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::middleware;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use cnpj_accounts::{Attempt, Delivery, Due, Watchlist};
use cnpj_model::Locale;
use cnpj_store::{Change, Following, Store, Watched};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::params::{self, Params};
use crate::server::{self, AppState, Caller, Shared, blocking, timed};

/// Events a delivery carries at most.
const PAGE: usize = 1000;
/// The first wait after a failed attempt, doubling after each, never past `MAX_WAIT`; attempts
/// stop `RETRY_FOR` after the delivery was made (or retried by its user).
const FIRST_WAIT: i64 = 60;
const MAX_WAIT: i64 = 6 * 3600;
const RETRY_FOR: i64 = 24 * 3600;
/// A delivery waiting for credits is looked at again after this many ticks.
const CREDIT_TICKS: u32 = 6;

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Starts the sender: every `every`, the deliveries of a dataset newly served are made, and the
/// due ones sent, each claimed for `lease` (longer than an attempt: the POST's 10 s and more).
pub fn spawn(state: Shared, every: Duration, lease: Duration) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut enqueued: Option<SystemTime> = None;
        loop {
            ticks.tick().await;
            let s = Arc::clone(&state);
            let ran = tokio::task::spawn_blocking(move || tick(&s, enqueued, every, lease)).await;
            match ran {
                Ok(Ok(served)) => enqueued = served,
                Ok(Err(e)) => {
                    tracing::warn!(error = ?e, "webhook deliveries: the dataset or the accounts store failed")
                }
                Err(e) => tracing::error!(error = %e, "webhook deliveries panicked"),
            }
        }
    });
}

/// One tick: the deliveries of the dataset served, unless they were made since it was served
/// (`enqueued`: when the dataset they were made of was served); then the due ones. Returns when
/// the dataset whose deliveries are made was served.
fn tick(
    state: &AppState,
    enqueued: Option<SystemTime>,
    every: Duration,
    lease: Duration,
) -> Result<Option<SystemTime>, ApiError> {
    let served = state.served();
    if enqueued != Some(served.since) {
        enqueue(state, &served.store)?;
    }
    send_due(state, every, lease)?;
    Ok(Some(served.since))
}

/// The served month's events of every list, the lists matched against the month together
/// (`Store::watched_month`, `PASS_ENTRIES` entries at a time): made into deliveries for a list
/// with a webhook that has none of the month yet, and kept by the store for every list's pages.
fn enqueue(state: &AppState, store: &Store) -> Result<(), ApiError> {
    let month = store.source_month().to_owned();
    if month.is_empty() {
        return Ok(());
    }
    let started = Instant::now();
    let accounts = &state.accounts;
    let (mut pass, mut entries) = (Vec::new(), 0);
    let mut made = Made::default();
    for (user, list) in timed("deliveries", || accounts.every_watchlist())? {
        let hooked = list.webhook_url.is_some() && !timed("deliveries", || accounts.has_deliveries(list.id, &month))?;
        let Some((list, keys)) = timed("deliveries", || accounts.watchlist(user, list.id, 0, None))? else {
            continue;
        };
        entries += keys.len();
        pass.push(Pass { user, list, watched: Watched::new(keys.iter().map(String::as_str)), hooked });
        if entries >= PASS_ENTRIES {
            made.add(deliver(state, store, &month, &std::mem::take(&mut pass))?);
            entries = 0;
        }
    }
    made.add(deliver(state, store, &month, &pass)?);
    if made.lists > 0 {
        let seconds = started.elapsed().as_secs_f64();
        let Made { lists, delivered, deliveries } = made;
        tracing::info!(month, lists, delivered, deliveries, seconds, "watchlists matched against the month");
    }
    Ok(())
}

/// Entries matched against a month in one pass at most: their lists are held in memory
/// (≈ 100 MB a million entries), so a bigger store takes more passes, not more memory.
const PASS_ENTRIES: usize = 1_000_000;

/// A list of a pass: its user, itself, its entries, and whether it is due a delivery.
struct Pass {
    user: i64,
    list: Watchlist,
    watched: Watched,
    hooked: bool,
}

/// What `enqueue` made: lists matched, lists delivered (with events), deliveries.
#[derive(Default)]
struct Made {
    lists: usize,
    delivered: usize,
    deliveries: usize,
}

impl Made {
    fn add(&mut self, other: Made) {
        self.lists += other.lists;
        self.delivered += other.delivered;
        self.deliveries += other.deliveries;
    }
}

/// One pass: the month's events of `lists`, and the deliveries of those due one.
fn deliver(state: &AppState, store: &Store, month: &str, lists: &[Pass]) -> Result<Made, ApiError> {
    let following: Vec<Following> =
        lists.iter().map(|p| Following { watched: &p.watched, events: &p.list.events }).collect();
    let events = store.watched_month(month, &following, Locale::PtBr)?;
    let mut made = Made { lists: lists.len(), ..Made::default() };
    for (pass, events) in lists.iter().zip(events).filter(|(p, _)| p.hooked) {
        let bodies = pages(&events, pass.list.id, month);
        if !bodies.is_empty() {
            timed("deliveries", || state.accounts.enqueue(pass.user, pass.list.id, month, &bodies))?;
            made.delivered += 1;
            made.deliveries += bodies.len();
        }
    }
    Ok(made)
}

/// The bodies of a list's month: `{watchlist_id, month, delivery_id, page, pages, events}`.
fn pages(events: &[Change], id: i64, month: &str) -> Vec<String> {
    let pages = events.len().div_ceil(PAGE);
    let body = |(i, events): (usize, &[Change])| {
        let page = i as i64 + 1;
        let delivery_id = cnpj_accounts::delivery_id(id, month, page);
        json!({
            "watchlist_id": id,
            "month": month,
            "delivery_id": delivery_id,
            "page": page,
            "pages": pages,
            "events": events,
        })
        .to_string()
    };
    events.chunks(PAGE).enumerate().map(body).collect()
}

/// Sends the deliveries due until none is left, claiming one at a time: a claim of several would
/// keep the last ones past their lease while the first are sent, and another replica would send
/// them too.
fn send_due(state: &AppState, every: Duration, lease: Duration) -> Result<(), ApiError> {
    let accounts = &state.accounts;
    let lease = lease.as_secs() as i64;
    loop {
        let Some(d) = timed("deliveries", || accounts.claim_deliveries(now(), lease, 1))?.pop() else {
            return Ok(());
        };
        let (attempt, outcome) = attempt(state, &d, every);
        metrics::counter!("cnpj_webhook_deliveries_total", "outcome" => outcome).increment(1);
        timed("deliveries", || accounts.finish_delivery(&d.delivery.id, &attempt, now()))?;
    }
}

/// One attempt at a delivery: charged, then sent; what became of it and its outcome's label.
/// Every attempt is charged as it starts: a POST cut by its sender's death was charged, and the
/// one that resumes it is charged again, like any other retry.
fn attempt(state: &AppState, d: &Due, every: Duration) -> (Attempt, &'static str) {
    let Some(url) = &d.url else {
        return (Attempt::Failed { error: "the list has no webhook any more".into() }, "failed");
    };
    let user = d.delivery.user_id;
    match timed("charge", || state.accounts.charge(user, 1, "webhook")) {
        Ok(Ok(_)) => metrics::counter!("cnpj_credits_charged_total", "endpoint" => "webhook").increment(1),
        Ok(Err(_)) => {
            let next_at = now() + (every.as_secs() as i64).max(1) * i64::from(CREDIT_TICKS);
            return (Attempt::WaitingCredits { next_at }, "waiting_credits");
        }
        Err(e) => return (retry_or_fail(&d.delivery, e.to_string()), "error"),
    }
    let sent = cnpj_webhooks::send(state.watchlists.webhooks, url, &d.secret, &d.delivery.id, now(), d.body.as_bytes());
    match sent {
        Ok(answer) if answer.delivered() => (Attempt::Delivered, "delivered"),
        Ok(answer) => (retry_or_fail(&d.delivery, format!("HTTP {}", answer.status)), "rejected"),
        Err(e @ cnpj_webhooks::SendError::Refused(_)) => (retry_or_fail(&d.delivery, e.to_string()), "refused"),
        Err(e) => (retry_or_fail(&d.delivery, e.to_string()), "unreachable"),
    }
}

/// Another attempt after the wait for this many attempts, or failed once the next would fall
/// past the 24 hours.
fn retry_or_fail(delivery: &Delivery, error: String) -> Attempt {
    let attempts = delivery.attempts + 1;
    let wait = (FIRST_WAIT << (attempts - 1).clamp(0, 20)).min(MAX_WAIT);
    let next_at = now() + wait;
    if next_at > delivery.created_at + RETRY_FOR {
        Attempt::Failed { error }
    } else {
        Attempt::Retry { error, next_at }
    }
}

/// The deliveries' routes.
pub fn routes(state: &Shared) -> Router<Shared> {
    let authenticate = || middleware::from_fn_with_state(Arc::clone(state), server::authenticate);
    let methods = |allowed: &'static str| middleware::from_fn_with_state(allowed, server::only_method);
    let list = Router::new()
        .route("/api/v1/watchlists/{id}/deliveries", get(list_route).fallback(server::not_allowed("GET")))
        .route_layer(authenticate())
        .route_layer(methods("GET"));
    let retry = Router::new()
        .route(
            "/api/v1/watchlists/{id}/deliveries/{delivery_id}/retry",
            post(retry_route).fallback(server::not_allowed("POST")),
        )
        .route_layer(authenticate())
        .route_layer(methods("POST"));
    list.merge(retry)
}

/// A delivery as answered.
fn described(d: &Delivery) -> Value {
    let pending = matches!(d.status.as_str(), "pending" | "waiting_credits");
    json!({
        "delivery_id": d.id,
        "month": d.month,
        "page": d.page,
        "pages": d.pages,
        "status": d.status,
        "attempts": d.attempts,
        "next_attempt_at": pending.then(|| cnpj_model::utc_text(d.next_attempt_at)),
        "last_error": d.last_error,
        "created_at": cnpj_model::utc_text(d.created_at),
        "delivered_at": d.delivered_at.map(cnpj_model::utc_text),
    })
}

/// GET /api/v1/watchlists/{id}/deliveries: newest month first, paged like search.
async fn list_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let id = id.ok().and_then(|Path(id)| params::watchlist_id(&id)).ok_or(ApiError::WatchlistNotFound)?;
    let (page, per_page) = params::pagination(&params)?;
    let (accounts, user) = (Arc::clone(&state.accounts), caller.user.id);
    let offset = (page - 1).saturating_mul(per_page);
    let found = blocking(move || Ok(timed("deliveries", || accounts.deliveries(user, id, offset, per_page))?));
    let (total, deliveries) = found.await?.ok_or(ApiError::WatchlistNotFound)?;
    let mut body = Map::from_iter([("success".to_owned(), Value::Bool(true))]);
    body.extend(server::pagination(total, page, per_page, deliveries.len()));
    body.insert("data".into(), deliveries.iter().map(described).collect());
    Ok(Json(Value::Object(body)))
}

/// POST /api/v1/watchlists/{id}/deliveries/{delivery_id}/retry: due now, for 24 hours more.
async fn retry_route(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Ok(Path((id, delivery))) = path else { return Err(ApiError::WatchlistNotFound) };
    let id = params::watchlist_id(&id).ok_or(ApiError::WatchlistNotFound)?;
    let (accounts, user) = (Arc::clone(&state.accounts), caller.user.id);
    let retried = blocking(move || Ok(timed("deliveries", || accounts.retry_delivery(user, id, &delivery))?)).await?;
    let retried = retried.ok_or(ApiError::DeliveryNotFound)?;
    Ok(Json(json!({"success": true, "data": described(&retried)})))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(attempts: i64, age: i64, expected: Option<i64>) {
        let made = now() - age;
        let delivery = Delivery {
            id: "wl1-2026-10-1".into(),
            watchlist_id: 1,
            user_id: 1,
            month: "2026-10".into(),
            page: 1,
            pages: 1,
            status: "pending".into(),
            attempts,
            next_attempt_at: 0,
            last_error: None,
            created_at: made,
            delivered_at: None,
        };
        let got = match retry_or_fail(&delivery, "HTTP 500".into()) {
            Attempt::Retry { next_at, .. } => Some(next_at - now()),
            Attempt::Failed { .. } => None,
            other => panic!("{other:?}"),
        };
        assert!(got.zip(expected).map_or(got == expected, |(g, e)| (g - e).abs() <= 1), "{attempts}: {got:?}");
    }

    #[test]
    fn waits_double_from_a_minute_to_six_hours_for_a_day() {
        check(0, 0, Some(60));
        check(1, 0, Some(120));
        check(5, 0, Some(1920));
        check(9, 0, Some(6 * 3600));
        check(30, 0, Some(6 * 3600));
        check(12, 20 * 3600, None);
        check(0, 24 * 3600 - 30, None);
    }
}
