//! The admin pages (role `admin`), `/admin`: users with search, their plan, balances, last
//! activity and 30-day totals; granting credits with a reason, changing a plan, disabling and
//! enabling a user, revoking any token; every action in the audit log shown there. To anyone
//! else the pages do not exist (404).

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cnpj_accounts::{Accounts, AccountsError, Role, Session, Status};
use serde::Deserialize;

use crate::templates::{self, AuditLine, UserLine};
use crate::{Fields, Pages, Visit, blocking, see_other};

#[derive(Deserialize)]
pub(crate) struct Search {
    q: Option<String>,
}

/// The admin's session, or the answer instead: 404 to anyone but an admin.
fn admin(visit: &Visit) -> Result<&Session, Box<Response>> {
    match visit.session.as_ref() {
        Some((_, s)) if s.person.role == Role::Admin => Ok(s),
        _ => Err(Box::new(visit.not_found())),
    }
}

fn time(at: i64) -> String {
    cnpj_model::utc_text(at).replace('T', " ").replace('Z', " UTC")
}

fn admin_page(
    a: &Accounts,
    visit: &Visit,
    query: &str,
    error: Option<&str>,
) -> Result<templates::Admin, AccountsError> {
    let users = a
        .user_summaries(query)?
        .into_iter()
        .map(|u| UserLine {
            id: u.person.id,
            label: u.person.email.clone().unwrap_or_else(|| u.person.name.clone()),
            plan: a.plans().of(u.person.plan.as_deref()).0.to_owned(),
            status: visit.lang.t(match u.person.status {
                Status::Active => "status_active",
                Status::Disabled => "status_disabled",
                Status::Unverified => "status_unverified",
            }),
            disabled: u.person.status == Status::Disabled,
            allowance: a.allowance_left(&u.person),
            credits: u.person.credits,
            last_activity: u
                .last_activity
                .map_or_else(|| "-".to_owned(), |at| at.replace('T', " ").replace('Z', " UTC")),
            requests: u.requests_30d,
            spent: u.credits_30d,
        })
        .collect();
    let audit = a
        .audit_log(100)?
        .into_iter()
        .map(|e| AuditLine {
            when: time(e.at),
            admin: e.admin,
            action: e.action,
            target: e.target.unwrap_or_default(),
            detail: e.detail,
        })
        .collect();
    Ok(templates::Admin {
        common: visit.common("admin"),
        error: error.map(|k| visit.lang.t(k).to_owned()),
        query: query.to_owned(),
        users,
        plans: a.plans().names().map(str::to_owned).collect(),
        audit,
    })
}

async fn show(
    pages: &Pages,
    visit: Visit,
    status: StatusCode,
    query: String,
    outcome: Result<(), &'static str>,
) -> Response {
    let visit = std::sync::Arc::new(visit);
    let v = std::sync::Arc::clone(&visit);
    let error = outcome.err();
    match blocking(pages, move |a| admin_page(a, &v, &query, error)).await {
        Ok(page) => visit.render(status, &page),
        Err(e) => e.into_response(),
    }
}

/// GET /admin?q=.
pub(crate) async fn page(State(pages): State<Pages>, visit: Visit, Query(search): Query<Search>) -> Response {
    if let Err(response) = admin(&visit) {
        return *response;
    }
    let query = search.q.unwrap_or_default().chars().take(100).collect();
    show(&pages, visit, StatusCode::OK, query, Ok(())).await
}

/// An admin's POST: its session and fields, or the answer instead (404 to anyone but an admin,
/// 403 without a valid CSRF token or from another origin).
fn allowed(visit: &Visit, body: &[u8]) -> Result<(i64, Fields), Box<Response>> {
    let admin = admin(visit)?.person.id;
    let form = Fields::parse(body);
    if !visit.post_allowed(form.get("csrf_token"), true) {
        return Err(Box::new(visit.forbidden()));
    }
    Ok((admin, form))
}

/// Runs an admin action; back to /admin when it is done, else the page with what was wrong.
async fn act(
    pages: Pages,
    visit: Visit,
    action: impl FnOnce(&Accounts) -> Result<Result<(), &'static str>, AccountsError> + Send + 'static,
) -> Response {
    match blocking(&pages, action).await {
        Ok(Ok(())) => see_other("/admin"),
        Ok(Err(key)) => show(&pages, visit, StatusCode::BAD_REQUEST, String::new(), Err(key)).await,
        Err(e) => e.into_response(),
    }
}

/// POST /admin/users/{id}/grant: `credits` (negative takes away) and a `reason`.
pub(crate) async fn grant(State(pages): State<Pages>, visit: Visit, Path(id): Path<i64>, body: Bytes) -> Response {
    let (admin, form) = match allowed(&visit, &body) {
        Ok(ok) => ok,
        Err(response) => return *response,
    };
    let credits = form.text("credits", 12).parse::<i64>().ok().filter(|c| c.abs() <= 1_000_000_000);
    let reason = form.text("reason", 200);
    act(pages, visit, move |a| match credits {
        Some(credits) if !reason.is_empty() => match a.admin_grant(admin, id, credits, &reason) {
            Err(AccountsError::UnknownUser(_)) => Ok(Err("invalid")),
            other => other.map(Ok),
        },
        _ => Ok(Err("invalid")),
    })
    .await
}

/// POST /admin/users/{id}/plan: one of the plans.
pub(crate) async fn plan(State(pages): State<Pages>, visit: Visit, Path(id): Path<i64>, body: Bytes) -> Response {
    let (admin, form) = match allowed(&visit, &body) {
        Ok(ok) => ok,
        Err(response) => return *response,
    };
    let plan = form.text("plan", 100);
    act(pages, visit, move |a| match a.admin_set_plan(admin, id, &plan) {
        Err(AccountsError::UnknownPlan(_)) => Ok(Err("invalid")),
        other => other.map(Ok),
    })
    .await
}

/// POST /admin/users/{id}/status: `active` or `disabled` (which ends their sessions).
pub(crate) async fn status(State(pages): State<Pages>, visit: Visit, Path(id): Path<i64>, body: Bytes) -> Response {
    let (admin, form) = match allowed(&visit, &body) {
        Ok(ok) => ok,
        Err(response) => return *response,
    };
    let status = Status::parse(form.get("status").unwrap_or("")).filter(|s| *s != Status::Unverified);
    act(pages, visit, move |a| match status {
        Some(status) => a.admin_set_status(admin, id, status).map(Ok),
        None => Ok(Err("invalid")),
    })
    .await
}

/// POST /admin/tokens/revoke: any token, by its prefix.
pub(crate) async fn revoke(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let (admin, form) = match allowed(&visit, &body) {
        Ok(ok) => ok,
        Err(response) => return *response,
    };
    let prefix = form.text("prefix", 12);
    act(pages, visit, move |a| Ok(if a.admin_revoke(admin, &prefix)? { Ok(()) } else { Err("invalid") })).await
}
