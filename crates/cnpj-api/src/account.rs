//! The account as JSON, for programs with a token (free; counted in the rate limit), each in the
//! `{success, data}` envelope of every other answer: `GET /api/v1/account` (user, plan,
//! allowance, credits, rate limit, live tokens) and `GET /api/v1/account/usage?days=N` (requests
//! and credits per day and endpoint, N ≤ 90).

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Json, Router, middleware};
use cnpj_accounts::{Accounts, Person, TokenInfo};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::params::{self, Params};
use crate::server::{self, Caller, RateInfo, Shared, blocking};

fn time(at: Option<i64>) -> Value {
    at.map_or(Value::Null, |t| json!(cnpj_model::utc_text(t)))
}

/// The first instant of the next UTC month, when the allowance is set again.
pub fn resets_at(now: i64) -> String {
    let month = &cnpj_model::utc_text(now)[..7];
    let (year, month) = (month[..4].parse::<i32>().unwrap_or(1970), month[5..].parse::<u32>().unwrap_or(1));
    let (year, month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
    format!("{year:04}-{month:02}-01T00:00:00Z")
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The `data` of `GET /api/v1/account`.
pub fn account_data(accounts: &Accounts, person: &Person, tokens: &[TokenInfo], rate: RateInfo) -> Value {
    let at = now();
    let (plan, terms) = accounts.plans().of(person.plan.as_deref());
    let allowance = accounts.allowance_left(person);
    let live: Vec<Value> = tokens
        .iter()
        .filter(|t| t.revoked_at.is_none() && t.expires_at.is_none_or(|e| e > at))
        .map(|t| {
            json!({
                "prefix": t.prefix,
                "name": t.name,
                "created_at": time(Some(t.created_at)),
                "last_used_at": time(t.last_used_at),
                "expires_at": time(t.expires_at),
            })
        })
        .collect();
    json!({
        "user": {"name": person.shown_name(), "email": person.email, "plan": plan},
        "allowance": {"monthly": terms.monthly_allowance, "remaining": allowance, "resets_at": resets_at(at)},
        "credits": person.credits,
        "credits_remaining": allowance + person.credits,
        "rate_limit": {"per_minute": rate.per_minute, "remaining": rate.remaining},
        "tokens": live,
    })
}

/// The account's routes: authenticated (and rate-limited), free, no dataset read.
pub fn routes(state: &Shared) -> Router<Shared> {
    Router::new()
        .route("/api/v1/account", get(account).fallback(server::not_allowed("GET")))
        .route("/api/v1/account/usage", get(usage).fallback(server::not_allowed("GET")))
        .route_layer(middleware::from_fn_with_state(Arc::clone(state), server::authenticate))
        .route_layer(middleware::from_fn_with_state("GET", server::only_method))
}

/// GET /api/v1/account.
pub async fn account(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    Extension(rate): Extension<RateInfo>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let _ = params;
    let accounts = Arc::clone(state.accounts());
    let id = caller.user_id();
    blocking(move || {
        let person = accounts.person(id)?.ok_or(ApiError::Unauthenticated)?;
        let tokens = accounts.tokens(id)?;
        Ok(Json(json!({"success": true, "data": account_data(&accounts, &person, &tokens, rate)})))
    })
    .await
}

/// GET /api/v1/account/usage?days=N (1-90, 30 by default).
pub async fn usage(
    State(state): State<Shared>,
    Extension(caller): Extension<Caller>,
    params: Params,
) -> Result<Json<Value>, ApiError> {
    let days = params::usage_days(&params)? as u32;
    let accounts = Arc::clone(state.accounts());
    let id = caller.user_id();
    let rows = blocking(move || Ok(accounts.usage(id, days)?)).await?;
    let data: Vec<Value> = rows
        .iter()
        .map(|r| json!({"date": r.day, "endpoint": r.endpoint, "requests": r.requests, "credits": r.credits}))
        .collect();
    Ok(Json(json!({"success": true, "days": days, "data": data})))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_allowance_resets_at_the_next_month() {
        for (now, expected) in [
            (0, "1970-02-01T00:00:00Z"),
            (1_795_000_000, "2026-12-01T00:00:00Z"),
            (1_798_700_000, "2027-01-01T00:00:00Z"),
        ] {
            assert_eq!(super::resets_at(now), expected, "{}", cnpj_model::utc_text(now));
        }
    }
}
