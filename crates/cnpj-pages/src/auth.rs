//! Getting in and out: sign-up (open and throttled by address, or by an operator's invitation,
//! whose link is the limit), log in with throttling (one message for an unknown email and a wrong
//! password; a device cookie past an account's lock), log out, the forgotten password, the
//! reset by a one-time link, and email verification.

use std::net::{IpAddr, Ipv4Addr};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cnpj_accounts::{LinkKind, LoginTry, Person, Status};
use serde::Deserialize;

use crate::guard::{DEVICE_COOKIE, SESSION_COOKIE, cookie, password_problem};
use crate::i18n::Lang;
use crate::mail::Mail;
use crate::{Fields, Pages, Signup, StoreFailed, Visit, blocking, see_other, templates};

/// The longest email and display name taken.
const MAX_EMAIL: usize = 254;
const MAX_NAME: usize = 100;

#[derive(Deserialize)]
pub(crate) struct LinkQuery {
    invite: Option<String>,
    token: Option<String>,
}

impl Visit {
    fn signup_form(
        &self,
        status: StatusCode,
        error: Option<&str>,
        invite: Option<(String, String)>,
        name: &str,
        email: &str,
    ) -> Response {
        let (invite, email) = match invite {
            Some((token, invited)) => (Some(token), invited),
            None => (None, email.to_owned()),
        };
        let page = templates::Signup {
            common: self.common("signup"),
            error: error.map(|k| self.lang.t(k).to_owned()),
            invite,
            email,
            display_name: name.to_owned(),
        };
        self.render(status, &page)
    }

    fn login_form(
        &self,
        status: StatusCode,
        error: Option<&str>,
        notice: Option<&str>,
        email: &str,
        pages: &Pages,
    ) -> Response {
        let page = templates::Login {
            common: self.common("login"),
            error: error.map(|k| self.lang.t(k).to_owned()),
            notice: notice.map(|k| self.lang.t(k).to_owned()),
            email: email.to_owned(),
            signup_open: pages.config.signup == Signup::Open,
        };
        self.render(status, &page)
    }

    /// Logs `person` in: a new session (any previous one of this browser ends) and a new device
    /// token (past the account's lock next time), then `/account`.
    async fn log_in(&self, pages: &Pages, person: &Person) -> Result<Response, StoreFailed> {
        let (id, old) = (person.id, self.session.as_ref().map(|(s, _)| s.clone()));
        let (session, device) = blocking(pages, move |a| {
            if let Some(old) = old {
                a.close_session(&old)?;
            }
            Ok((a.open_session(id)?, a.device_token(id)?))
        })
        .await?;
        metrics::counter!("cnpj_sessions_opened_total").increment(1);
        let mut response = self.redirect_with_session("/account", Some(&session));
        if let Some(device) = device {
            let cookie = crate::guard::set_cookie(DEVICE_COOKIE, &device, cnpj_accounts::DEVICE_MAX, self.secure);
            response.headers_mut().append(header::SET_COOKIE, cookie);
        }
        Ok(response)
    }
}

/// GET /signup (`?invite=` in invite mode).
pub(crate) async fn signup_page(State(pages): State<Pages>, visit: Visit, Query(q): Query<LinkQuery>) -> Response {
    match pages.config.signup {
        Signup::Closed => visit.not_found(),
        Signup::Open => visit.signup_form(StatusCode::OK, None, None, "", ""),
        Signup::Invite => {
            let Some(token) = q.invite.filter(|t| t.len() <= 128) else {
                return visit.message(StatusCode::OK, "signup", visit.lang.t("invite_needed"), false, None);
            };
            let peek = token.clone();
            match blocking(&pages, move |a| a.peek_link(&peek, LinkKind::Invite)).await {
                Ok(Some(link)) => visit.signup_form(StatusCode::OK, None, Some((token, link.email)), "", ""),
                Ok(None) => visit.message(StatusCode::NOT_FOUND, "signup", visit.lang.t("link_invalid"), true, None),
                Err(e) => e.into_response(),
            }
        }
    }
}

/// POST /signup: the account is made and logged in (open mode: on the default plan; invite mode:
/// as the invitation says).
pub(crate) async fn signup(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    if pages.config.signup == Signup::Closed {
        return visit.not_found();
    }
    if !visit.post_allowed(form.get("csrf_token"), false) {
        return visit.forbidden();
    }
    let (name, password) = (form.text("display_name", MAX_NAME), form.get("password").unwrap_or("").to_owned());
    let result = match pages.config.signup {
        Signup::Invite => signup_invited(&pages, &visit, &form, &name, password).await,
        _ => signup_open(&pages, &visit, &form, &name, password).await,
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

async fn signup_invited(
    pages: &Pages,
    visit: &Visit,
    form: &Fields,
    name: &str,
    password: String,
) -> Result<Response, StoreFailed> {
    let token = form.text("invite", 128);
    let peek = token.clone();
    let Some(link) = blocking(pages, move |a| a.peek_link(&peek, LinkKind::Invite)).await? else {
        return Ok(visit.message(StatusCode::NOT_FOUND, "signup", visit.lang.t("link_invalid"), true, None));
    };
    if let Some(problem) = password_problem(&password, &link.email) {
        return Ok(visit.signup_form(StatusCode::BAD_REQUEST, Some(problem), Some((token, link.email)), name, ""));
    }
    let (name_owned, locale) = (name.to_owned(), visit.lang.code());
    let made = blocking(pages, move |a| {
        let hash = cnpj_accounts::hash_password(&password)?;
        match a.accept_invite(&token, &hash, &name_owned, locale) {
            Err(cnpj_accounts::AccountsError::EmailTaken(_)) => Ok(Err("email_taken")),
            other => other.map(|p| p.ok_or("link_invalid")),
        }
    })
    .await?;
    match made {
        Ok(person) => visit.log_in(pages, &person).await,
        Err(key) => Ok(visit.message(StatusCode::BAD_REQUEST, "signup", visit.lang.t(key), true, None)),
    }
}

/// Open sign-up, throttled by address and network (429 past 5 an hour from an address, 20 from
/// its /24 or /64). With mail, a taken email is answered exactly as a new one (the same page,
/// after the same password hash) and its owner is told by mail; without mail, it is said.
async fn signup_open(
    pages: &Pages,
    visit: &Visit,
    form: &Fields,
    name: &str,
    password: String,
) -> Result<Response, StoreFailed> {
    let email = form.text("email", MAX_EMAIL).trim().to_lowercase();
    let problem =
        if cnpj_accounts::valid_email(&email) { password_problem(&password, &email) } else { Some("email_invalid") };
    if let Some(problem) = problem {
        return Ok(visit.signup_form(StatusCode::BAD_REQUEST, Some(problem), None, name, &email));
    }
    let peer = visit.peer.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    if let Some(wait) = blocking(pages, move |a| a.signup_try(peer)).await? {
        let mut response = visit.signup_form(StatusCode::TOO_MANY_REQUESTS, Some("too_many_tries"), None, name, &email);
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait));
        return Ok(response);
    }
    let (name_owned, email_owned, locale) = (name.to_owned(), email.clone(), visit.lang.code());
    // With mail, the account is usable once its email is verified.
    let status = if pages.config.mail.is_some() { Status::Unverified } else { Status::Active };
    let made = blocking(pages, move |a| {
        let hash = cnpj_accounts::hash_password(&password)?;
        match a.create_person(&email_owned, &hash, &name_owned, locale, status) {
            Err(cnpj_accounts::AccountsError::EmailTaken(_)) => Ok(None),
            other => other.map(Some),
        }
    })
    .await?;
    match (made, &pages.config.mail) {
        (Some(person), None) => visit.log_in(pages, &person).await,
        (None, None) => Ok(visit.signup_form(StatusCode::BAD_REQUEST, Some("email_taken"), None, name, &email)),
        (made, Some(mailer)) => {
            let (accounts, mailer, lang) = (std::sync::Arc::clone(&pages.accounts), mailer.clone(), visit.lang);
            mail_off_path(move || match made {
                Some(person) => {
                    let link = accounts.make_link(LinkKind::Verify, &email, Some(person.id), None, 0);
                    let link = link.map_err(|e| e.to_string())?;
                    mailer.send(Mail::Verify, lang, &email, &format!("/verify?token={link}"))
                }
                None => {
                    let found = accounts.person_by_email(&email).map_err(|e| e.to_string())?;
                    let Some(owner) = found.filter(|p| p.status != Status::Disabled) else { return Ok(()) };
                    let lang = owner.locale.as_deref().and_then(Lang::parse).unwrap_or(lang);
                    mailer.send(Mail::Taken, lang, &email, "/password/forgot")
                }
            });
            Ok(visit.message(StatusCode::OK, "signup", visit.lang.t("check_mail"), false, None))
        }
    }
}

/// Sends a mail on a blocking thread, not waited for; a failure is logged (without the link).
fn mail_off_path(send: impl FnOnce() -> Result<(), String> + Send + 'static) {
    tokio::task::spawn_blocking(move || {
        if let Err(error) = send() {
            tracing::error!(%error, "sending a mail failed");
        }
    });
}

/// GET /login (a live session goes to /account).
pub(crate) async fn login_page(State(pages): State<Pages>, visit: Visit) -> Response {
    if visit.session.is_some() {
        return see_other("/account");
    }
    visit.login_form(StatusCode::OK, None, None, "", &pages)
}

/// POST /login: throttled by account from the address and by address (429 after 5 failures in
/// 15 minutes), and by account from anywhere (after 50, unless the browser holds the account's
/// device cookie); one message for an unknown email and a wrong password, after the same work.
/// Counted in `cnpj_logins_total` by outcome.
pub(crate) async fn login(State(pages): State<Pages>, visit: Visit, headers: HeaderMap, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    if !visit.post_allowed(form.get("csrf_token"), false) {
        return visit.forbidden();
    }
    let email = form.text("email", MAX_EMAIL).to_lowercase();
    let password = form.get("password").unwrap_or("").chars().take(1024).collect::<String>();
    let login = LoginTry {
        email: email.clone(),
        address: visit.peer.map_or("unknown".into(), |p| p.to_string()),
        device: cookie(&headers, DEVICE_COOKIE),
    };
    let outcome = blocking(&pages, move |a| {
        if let Some(wait) = a.login_wait(&login)? {
            return Ok(Err(Some(wait)));
        }
        match a.verify_login(&login.email, &password)? {
            Some(person) => {
                a.login_succeeded(&login)?;
                Ok(Ok(person))
            }
            None => {
                a.login_failed(&login)?;
                Ok(Err(None))
            }
        }
    })
    .await;
    let label = match &outcome {
        Ok(Ok(_)) => "success",
        Ok(Err(Some(_))) => "throttled",
        Ok(Err(None)) => "failure",
        Err(_) => "error",
    };
    metrics::counter!("cnpj_logins_total", "outcome" => label).increment(1);
    match outcome {
        Ok(Ok(person)) => visit.log_in(&pages, &person).await.unwrap_or_else(IntoResponse::into_response),
        Ok(Err(Some(wait))) => {
            let mut response =
                visit.login_form(StatusCode::TOO_MANY_REQUESTS, Some("too_many_tries"), None, &email, &pages);
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait));
            response
        }
        Ok(Err(None)) => visit.login_form(StatusCode::UNAUTHORIZED, Some("login_failed"), None, &email, &pages),
        Err(e) => e.into_response(),
    }
}

/// POST /logout: the session is deleted in the store and its cookie cleared.
pub(crate) async fn logout(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    let Some((id, _)) = visit.session.as_ref() else { return visit.redirect_with_session("/login", None) };
    if !visit.post_allowed(form.get("csrf_token"), true) {
        return visit.forbidden();
    }
    let id = id.clone();
    match blocking(&pages, move |a| a.close_session(&id)).await {
        Ok(()) => visit.redirect_with_session("/login", None),
        Err(e) => e.into_response(),
    }
}

/// GET /password/forgot.
pub(crate) async fn forgot_page(visit: Visit) -> Response {
    visit.render(StatusCode::OK, &templates::Forgot { common: visit.common("forgot"), notice: None })
}

/// POST /password/forgot: the same answer, at once, whether or not the email has an account; with
/// mail, a reset link is sent (off the request's path) to an account that is not disabled.
/// Without mail, nothing is sent: the operator makes reset links (`cnpj-api accounts reset-link`).
pub(crate) async fn forgot(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    if !visit.post_allowed(form.get("csrf_token"), false) {
        return visit.forbidden();
    }
    if let Some(mailer) = pages.config.mail.clone() {
        let (accounts, email, lang) =
            (std::sync::Arc::clone(&pages.accounts), form.text("email", MAX_EMAIL), visit.lang);
        mail_off_path(move || {
            let found = accounts.person_by_email(&email).map_err(|e| e.to_string())?;
            let Some(person) = found.filter(|p| p.status != Status::Disabled) else { return Ok(()) };
            let to = person.email.unwrap_or_default();
            let link = accounts.make_link(LinkKind::Reset, &to, Some(person.id), None, 0).map_err(|e| e.to_string())?;
            mailer.send(Mail::Reset, lang, &to, &format!("/password/reset?token={link}"))
        });
    }
    let notice = Some(visit.lang.t("forgot_sent").to_owned());
    visit.render(StatusCode::OK, &templates::Forgot { common: visit.common("forgot"), notice })
}

/// GET /password/reset?token=.
pub(crate) async fn reset_page(State(pages): State<Pages>, visit: Visit, Query(q): Query<LinkQuery>) -> Response {
    let token = q.token.unwrap_or_default().chars().take(128).collect::<String>();
    let peek = token.clone();
    match blocking(&pages, move |a| a.peek_link(&peek, LinkKind::Reset)).await {
        Ok(Some(link)) => {
            let page = templates::Reset { common: visit.common("reset"), error: None, token, email: link.email };
            visit.render(StatusCode::OK, &page)
        }
        Ok(None) => visit.message(
            StatusCode::NOT_FOUND,
            "reset",
            visit.lang.t("link_invalid"),
            true,
            Some(("/password/forgot", "forgot")),
        ),
        Err(e) => e.into_response(),
    }
}

/// POST /password/reset: a new password by the link; every session of the user ends.
pub(crate) async fn reset(State(pages): State<Pages>, visit: Visit, body: Bytes) -> Response {
    let form = Fields::parse(&body);
    if !visit.post_allowed(form.get("csrf_token"), false) {
        return visit.forbidden();
    }
    let token = form.text("token", 128);
    let password = form.get("password").unwrap_or("").to_owned();
    let peek = token.clone();
    let link = match blocking(&pages, move |a| a.peek_link(&peek, LinkKind::Reset)).await {
        Ok(Some(link)) => link,
        Ok(None) => return visit.message(StatusCode::NOT_FOUND, "reset", visit.lang.t("link_invalid"), true, None),
        Err(e) => return e.into_response(),
    };
    if let Some(problem) = password_problem(&password, &link.email) {
        let error = Some(visit.lang.t(problem).to_owned());
        let page = templates::Reset { common: visit.common("reset"), error, token, email: link.email.clone() };
        return visit.render(StatusCode::BAD_REQUEST, &page);
    }
    let done = blocking(&pages, move |a| a.reset_password(&token, &cnpj_accounts::hash_password(&password)?)).await;
    match done {
        Ok(Some(_)) => {
            let mut response = visit.login_form(StatusCode::OK, None, Some("password_changed"), &link.email, &pages);
            response
                .headers_mut()
                .append(header::SET_COOKIE, crate::guard::set_cookie(SESSION_COOKIE, "", 0, visit.secure));
            response
        }
        Ok(None) => visit.message(StatusCode::NOT_FOUND, "reset", visit.lang.t("link_invalid"), true, None),
        Err(e) => e.into_response(),
    }
}

/// GET /verify?token=: the account becomes usable.
pub(crate) async fn verify(State(pages): State<Pages>, visit: Visit, Query(q): Query<LinkQuery>) -> Response {
    let token = q.token.unwrap_or_default().chars().take(128).collect::<String>();
    match blocking(&pages, move |a| a.verify_email(&token)).await {
        Ok(Some(_)) => {
            visit.message(StatusCode::OK, "login", visit.lang.t("verified"), false, Some(("/login", "login")))
        }
        Ok(None) => visit.message(StatusCode::NOT_FOUND, "login", visit.lang.t("link_invalid"), true, None),
        Err(e) => e.into_response(),
    }
}
