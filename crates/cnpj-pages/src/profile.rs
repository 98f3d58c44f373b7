//! The profile page, `/account`: plan, the allowance left and the credits, the rate limit, the
//! tokens (made here, shown once; revoked here), the watchlists (made here; each has a page of its
//! own, `watchlists`), usage of the last 30 days as a chart and a table, the last 50 debits; and
//! changing the password or deleting the account (erasure: the ledger and the usage stay under an
//! anonymous id).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cnpj_accounts::{Accounts, AccountsError, Session};

use crate::guard::password_problem;
use crate::templates::{self, LedgerLine, ListForm, ListLine, TokenRow, UsageLine};
use crate::{Fields, Pages, Visit, blocking, see_other};

/// Days of usage shown.
const USAGE_DAYS: u32 = 30;
/// Debits shown.
const LEDGER: u32 = 50;

pub(crate) fn time(at: i64) -> String {
    cnpj_model::utc_text(at).replace('T', " ").replace('Z', " UTC")
}

/// What the page shows besides its messages.
#[derive(Default)]
pub(crate) struct Shown {
    pub error: Option<&'static str>,
    pub notice: Option<&'static str>,
    pub new_token: Option<String>,
    /// The form that makes a watchlist, as sent when it was refused.
    pub list_form: ListForm,
}

/// The page's data for `session`'s user, read from the store (blocking).
fn account_page(
    a: &Accounts,
    visit: &Visit,
    session: &Session,
    shown: Shown,
) -> Result<templates::Account, AccountsError> {
    let id = session.person.id;
    let person = a.person(id)?.unwrap_or_else(|| session.person.clone());
    let (plan, terms) = a.plans().of(person.plan.as_deref());
    let allowance = a.allowance_left(&person);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let never = visit.lang.t("never");
    let tokens = a
        .tokens(id)?
        .into_iter()
        .filter(|t| t.revoked_at.is_none() && t.expires_at.is_none_or(|e| e > now))
        .map(|t| TokenRow {
            name: t.name,
            prefix: t.prefix,
            created: time(t.created_at),
            last_used: t.last_used_at.map_or_else(|| "-".to_owned(), time),
            expires: t.expires_at.map_or_else(|| never.to_owned(), time),
        })
        .collect();
    let usage = a.usage(id, USAGE_DAYS)?;
    let chart = crate::chart::requests_per_day(&per_day(&usage, now), visit.lang.t("chart_title"));
    let ledger = a
        .ledger(id, LEDGER)?
        .into_iter()
        .map(|d| LedgerLine { when: time(d.at), what: d.what, amount: d.amount })
        .collect();
    let (watchlists, watched) = watchlist_lines(a, visit, id)?;
    Ok(templates::Account {
        common: visit.common("account"),
        error: shown.error.map(|k| visit.lang.t(k).to_owned()),
        notice: shown.notice.map(|k| visit.lang.t(k).to_owned()),
        new_token: shown.new_token,
        name: person.shown_name().to_owned(),
        email: person.email.clone().unwrap_or_default(),
        plan: plan.to_owned(),
        allowance,
        monthly: terms.monthly_allowance,
        credits: person.credits,
        total: allowance + person.credits,
        per_minute: terms.requests_per_minute,
        tokens,
        chart,
        usage: usage
            .into_iter()
            .rev()
            .map(|u| UsageLine { day: u.day, endpoint: u.endpoint, requests: u.requests, credits: u.credits })
            .collect(),
        ledger,
        watchlists,
        watched,
        max_watched: terms.max_watched,
        list_form: shown.list_form,
    })
}

/// The user's watchlists (each a link to its page, `watchlists`), and how many CNPJs they watch.
fn watchlist_lines(a: &Accounts, visit: &Visit, user: i64) -> Result<(Vec<ListLine>, i64), AccountsError> {
    let lists = a.watchlists(user)?;
    let watched = lists.iter().map(|l| l.entries).sum();
    let lines = lists
        .into_iter()
        .map(|l| ListLine {
            id: l.id,
            name: l.name,
            entries: l.entries,
            webhook: l.webhook_url.unwrap_or_else(|| visit.lang.t("none").to_owned()),
        })
        .collect();
    Ok((lines, watched))
}

/// Requests per day of the last `USAGE_DAYS` days, oldest first, days without any included.
fn per_day(usage: &[cnpj_accounts::UsageRow], now: i64) -> Vec<(String, i64)> {
    (0..i64::from(USAGE_DAYS))
        .rev()
        .map(|ago| {
            let day = cnpj_model::utc_text(now - ago * 86_400)[..10].to_owned();
            let requests = usage.iter().filter(|u| u.day == day).map(|u| u.requests).sum();
            (day, requests)
        })
        .collect()
}

/// Renders the page for this visit's session.
pub(crate) async fn show(pages: &Pages, visit: Visit, status: StatusCode, shown: Shown) -> Response {
    let Some((_, session)) = visit.session.clone() else { return see_other("/login") };
    let visit = std::sync::Arc::new(visit);
    let v = std::sync::Arc::clone(&visit);
    match blocking(pages, move |a| account_page(a, &v, &session, shown)).await {
        Ok(page) => visit.render(status, &page),
        Err(e) => e.into_response(),
    }
}

/// GET /account (without a session: to /login).
pub(crate) async fn page(State(pages): State<Pages>, visit: Visit) -> Response {
    show(&pages, visit, StatusCode::OK, Shown::default()).await
}

/// The session of a POST from this site's own form, or the answer to give instead: to /login
/// without a session, 403 without a valid CSRF token or from another origin.
pub(crate) fn allowed(visit: &Visit, form: &Fields) -> Result<Session, Box<Response>> {
    let Some((_, session)) = visit.session.as_ref() else { return Err(Box::new(see_other("/login"))) };
    if !visit.post_allowed(form.get("csrf_token"), true) {
        return Err(Box::new(visit.forbidden()));
    }
    Ok(session.clone())
}

/// POST /account/tokens: a name and an optional expiry in days; the token is shown once.
pub(crate) async fn create_token(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let session = match allowed(&visit, &form) {
        Ok(s) => s,
        Err(response) => return *response,
    };
    let name = form.text("name", 100);
    let expiry = form.text("expires_days", 10);
    let days = if expiry.is_empty() {
        Ok(None)
    } else {
        expiry.parse::<u32>().ok().filter(|d| (1..=3650).contains(d)).map(Some).ok_or(())
    };
    let (Ok(days), false) = (days, name.is_empty()) else {
        return show(&pages, visit, StatusCode::BAD_REQUEST, Shown { error: Some("token_name"), ..Shown::default() })
            .await;
    };
    let id = session.person.id;
    match blocking(&pages, move |a| match a.create_token(id, &name, days) {
        Err(AccountsError::TooManyTokens(_)) => Ok(None),
        other => other.map(Some),
    })
    .await
    {
        Ok(Some(token)) => {
            show(&pages, visit, StatusCode::OK, Shown { new_token: Some(token), ..Shown::default() }).await
        }
        Ok(None) => {
            show(&pages, visit, StatusCode::BAD_REQUEST, Shown { error: Some("too_many_tokens"), ..Shown::default() })
                .await
        }
        Err(e) => e.into_response(),
    }
}

/// POST /account/tokens/{prefix}/revoke: only the user's own token.
pub(crate) async fn revoke_token(
    State(pages): State<Pages>,
    visit: Visit,
    Path(prefix): Path<String>,
    body: Bytes,
) -> Response {
    let form = Fields::parse(&body);
    let session = match allowed(&visit, &form) {
        Ok(s) => s,
        Err(response) => return *response,
    };
    let id = session.person.id;
    match blocking(&pages, move |a| a.revoke_token_of(Some(id), &prefix)).await {
        Ok(true) => see_other("/account"),
        Ok(false) => visit.not_found(),
        Err(e) => e.into_response(),
    }
}

/// POST /account/password: the current password and a new one; a new session id follows.
pub(crate) async fn change_password(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let session = match allowed(&visit, &form) {
        Ok(s) => s,
        Err(response) => return *response,
    };
    let (current, new) = (form.get("current").unwrap_or("").to_owned(), form.get("password").unwrap_or("").to_owned());
    let email = session.person.email.clone().unwrap_or_default();
    let problem =
        if session.person.password_matches(&current) { password_problem(&new, &email) } else { Some("pw_wrong") };
    if let Some(problem) = problem {
        return show(&pages, visit, StatusCode::BAD_REQUEST, Shown { error: Some(problem), ..Shown::default() }).await;
    }
    let id = session.person.id;
    let rotated = blocking(&pages, move |a| {
        a.set_password(id, &cnpj_accounts::hash_password(&new)?)?;
        a.open_session(id)
    })
    .await;
    match rotated {
        Ok(session) => visit.redirect_with_session("/account", Some(&session)),
        Err(e) => e.into_response(),
    }
}

/// POST /account/delete: with the password, the account is erased and the session ends.
pub(crate) async fn delete(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let session = match allowed(&visit, &form) {
        Ok(s) => s,
        Err(response) => return *response,
    };
    if !session.person.password_matches(form.get("password").unwrap_or("")) {
        return show(&pages, visit, StatusCode::BAD_REQUEST, Shown { error: Some("pw_wrong"), ..Shown::default() })
            .await;
    }
    let id = session.person.id;
    match blocking(&pages, move |a| a.erase(id)).await {
        Ok(()) => {
            let page = visit.message(StatusCode::OK, "delete_account", visit.lang.t("deleted"), false, None);
            let mut response = page;
            response.headers_mut().append(
                axum::http::header::SET_COOKIE,
                crate::guard::set_cookie(crate::guard::SESSION_COOKIE, "", 0, visit.secure),
            );
            response
        }
        Err(e) => e.into_response(),
    }
}
