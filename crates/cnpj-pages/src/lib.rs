//! The service's pages for people, beside the JSON API on the same listener: sign-up, log in and
//! out, forgotten and reset passwords, email verification (`auth`), and the profile page where a
//! user sees their plan, balances, usage and ledger and makes and revokes their own API tokens
//! (`profile`), their watchlists, each on a page of its own with its webhook and deliveries
//! (`watchlists`), and the admin pages (`admin`); with a registry (`registry`: the API's
//! endpoints, answered and charged by the service), the company search (`search`), a company's
//! page (`company`), a search's export as CSV (`export`) and a whole result as an export job whose
//! page follows it to its file (`jobs`), and while partners are served a
//! partner's page and a company's network with its files (`partners`, drawn by `network`); a
//! page that charges, opened from
//! another site, shows its price and charges only once the person goes on. Server-rendered HTML
//! (askama templates, compiled in, every value escaped), no JavaScript, in pt-br, en and es
//! (`i18n`), one plain style sheet; verification and reset links by mail when SMTP is configured
//! (`mail`). What keeps them safe (session cookies, CSRF tokens, the Origin check, the person's
//! own steps, password rules, headers) is `guard`.

mod admin;
mod auth;
mod chart;
mod company;
mod export;
mod guard;
mod i18n;
mod jobs;
mod mail;
mod network;
mod partners;
mod profile;
mod registry;
mod search;
mod show;
mod watchlists;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cnpj_accounts::{Accounts, AccountsError, Role, Session};

pub use export::{csv_columns, csv_header, csv_line, write_csv_line};
use guard::{
    FORM_COOKIE, LOCALE_COOKIE, SESSION_COOKIE, cookie, csrf_ok, csrf_token, own_navigation, random_hex, same_origin,
    set_cookie,
};
pub use i18n::Lang;
pub use mail::{MailError, Mailer};
pub use registry::{Answer, ExportCost, PagePrices, Pairs, Refusal, Registry};

/// Who may sign up at `/signup`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signup {
    /// Anyone, on the default plan.
    Open,
    /// Only with a one-time link the operator makes (`cnpj-api accounts invite`).
    Invite,
    /// Nobody: there is no sign-up page.
    Closed,
}

/// How the pages are served.
#[derive(Clone, Debug)]
pub struct Config {
    pub signup: Signup,
    /// Session cookies with `Secure` (off only for plain HTTP on a laptop).
    pub secure_cookies: bool,
    /// Mail (verification at sign-up, reset links), when SMTP is configured.
    pub mail: Option<Mailer>,
    /// Where a watchlist's webhook may lead (as the API allows it).
    pub webhooks: cnpj_webhooks::Policy,
}

/// Why a password is refused, in English (for the CLI), if it is: under 10 characters, all white
/// space, one character repeated, among the 100,000 most common passwords (or one of them with
/// digits added), or the email itself.
pub fn password_problem(password: &str, email: &str) -> Option<&'static str> {
    guard::password_problem(password, email).map(|key| Lang::En.t(key))
}

#[derive(Clone)]
pub(crate) struct Pages {
    accounts: Arc<Accounts>,
    config: Arc<Config>,
    /// The registry the company pages read (none: those pages are not served).
    registry: Option<Arc<dyn Registry>>,
}

/// The pages' routes (each answers its own methods), to merge into the service's router; the
/// company search, pages and export only with a `registry`.
pub fn router(accounts: Arc<Accounts>, config: Config, registry: Option<Arc<dyn Registry>>) -> Router {
    // A HEAD would be charged like the GET it stands for: 405 instead, and the same 405 (`Allow:
    // GET`) to every other method (axum's would name HEAD).
    let only_get = || async { (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "GET")]) };
    let companies = Router::new()
        .route("/search", get(search::page).head(only_get).fallback(only_get))
        .route("/search/export", get(export::confirm).post(export::run))
        .route("/search/exports", get(jobs::confirm).post(jobs::create))
        .route("/search/exports/{id}", get(jobs::page).head(only_get).fallback(only_get))
        .route("/search/exports/{id}/file", get(jobs::file).head(only_get).fallback(only_get))
        .route("/companies/{cnpj}", get(company::page).head(only_get).fallback(only_get))
        .route("/companies/{cnpj}/watch", post(company::watch));
    // The partners' pages only when partners are served (`serve --partners`).
    let partners = Router::new()
        .route("/partners/{partner_id}", get(partners::partner).head(only_get).fallback(only_get))
        .route("/companies/{cnpj}/network", get(partners::network).head(only_get).fallback(only_get))
        .route("/companies/{cnpj}/network.csv", get(partners::csv).head(only_get).fallback(only_get))
        .route("/companies/{cnpj}/network.json", get(partners::json).head(only_get).fallback(only_get))
        .route("/companies/{cnpj}/network.graphml", get(partners::graphml).head(only_get).fallback(only_get));
    let pages = Pages { accounts, config: Arc::new(config), registry };
    let companies = match pages.registry.as_deref() {
        Some(registry) if registry.partners_served() => companies.merge(partners),
        Some(_) => companies,
        None => Router::new(),
    };
    Router::new()
        .merge(companies)
        .route("/", get(|| async { see_other("/account") }))
        .route("/pages/style.css", get(style))
        .route("/signup", get(auth::signup_page).post(auth::signup))
        .route("/login", get(auth::login_page).post(auth::login))
        .route("/logout", post(auth::logout))
        .route("/password/forgot", get(auth::forgot_page).post(auth::forgot))
        .route("/password/reset", get(auth::reset_page).post(auth::reset))
        .route("/verify", get(auth::verify))
        .route("/account", get(profile::page))
        .route("/account/tokens", post(profile::create_token))
        .route("/account/tokens/{prefix}/revoke", post(profile::revoke_token))
        .route("/account/password", post(profile::change_password))
        .route("/account/delete", post(profile::delete))
        .route("/account/watchlists", post(watchlists::create))
        .route("/account/watchlists/{id}", get(watchlists::page))
        .route("/account/watchlists/{id}/entries", post(watchlists::entries))
        .route("/account/watchlists/{id}/webhook", post(watchlists::webhook))
        .route("/account/watchlists/{id}/secret", post(watchlists::rotate_secret))
        .route("/account/watchlists/{id}/delete", post(watchlists::delete))
        .route("/account/watchlists/{id}/deliveries/{delivery}/retry", post(watchlists::retry))
        .route("/admin", get(admin::page))
        .route("/admin/users/{id}/grant", post(admin::grant))
        .route("/admin/users/{id}/plan", post(admin::plan))
        .route("/admin/users/{id}/status", post(admin::status))
        .route("/admin/tokens/revoke", post(admin::revoke))
        .layer(axum::middleware::map_response(|mut response: Response| async move {
            guard::page_headers(response.headers_mut());
            response
        }))
        .with_state(pages)
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("../assets/style.css")).into_response()
}

/// A 303 to `to`.
pub(crate) fn see_other(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, to.to_owned())]).into_response()
}

/// What every page knows of its request: the language, the session (if live), the secret the
/// forms' CSRF token is made of, the peer's address and whether the request came from this site.
pub(crate) struct Visit {
    lang: Lang,
    /// `?locale=` was given: remembered in a cookie.
    lang_asked: bool,
    session: Option<(String, Session)>,
    form_secret: String,
    new_form_cookie: bool,
    peer: Option<IpAddr>,
    same_origin: bool,
    /// A GET that the person asked for on this site (`guard::own_navigation`): a page may charge.
    own_navigation: bool,
    secure: bool,
}

impl FromRequestParts<Pages> for Visit {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, pages: &Pages) -> Result<Visit, Response> {
        let headers = &parts.headers;
        let query = parts.uri.query();
        let lang_asked = query.is_some_and(|q| q.split('&').any(|p| p.starts_with("locale=")));
        let lang = Lang::of(query, headers);
        let session = match cookie(headers, SESSION_COOKIE) {
            Some(id) => {
                let lookup = id.clone();
                blocking(pages, move |a| a.session(&lookup)).await.map_err(|e| e.into_response())?.map(|s| (id, s))
            }
            None => None,
        };
        let (form_secret, new_form_cookie) = match cookie(headers, FORM_COOKIE) {
            Some(secret) => (secret, false),
            None => (random_hex(), true),
        };
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        Ok(Visit {
            lang,
            lang_asked,
            session,
            form_secret,
            new_form_cookie,
            peer,
            same_origin: same_origin(headers),
            own_navigation: own_navigation(headers),
            secure: pages.config.secure_cookies,
        })
    }
}

/// The fields every template shows (the layout's).
pub(crate) struct Common {
    pub lang: Lang,
    pub title: String,
    pub csrf: String,
    pub logged_in: bool,
    pub admin: bool,
}

impl Visit {
    /// The CSRF token of this visitor's forms: bound to the session, else to the form cookie.
    fn csrf(&self) -> String {
        csrf_token(self.session.as_ref().map_or(&self.form_secret, |(id, _)| id))
    }

    pub(crate) fn common(&self, title_key: &str) -> Common {
        Common {
            lang: self.lang,
            title: self.lang.t(title_key).to_owned(),
            csrf: self.csrf(),
            logged_in: self.session.is_some(),
            admin: self.session.as_ref().is_some_and(|(_, s)| s.person.role == Role::Admin),
        }
    }

    /// Whether a POST is this site's own form: the Origin/Referer (when sent) is this service and
    /// `csrf_token` matches the session (`logged_in`) or the form cookie.
    fn post_allowed(&self, sent: Option<&str>, logged_in: bool) -> bool {
        let secret =
            if logged_in { self.session.as_ref().map(|(id, _)| id.as_str()) } else { Some(self.form_secret.as_str()) };
        self.same_origin && csrf_ok(secret, sent)
    }

    /// The 403 of a POST that is not this site's own form (nothing was changed).
    fn forbidden(&self) -> Response {
        self.message(StatusCode::FORBIDDEN, "forbidden", self.lang.t("forbidden"), true, None)
    }

    pub(crate) fn not_found(&self) -> Response {
        self.message(StatusCode::NOT_FOUND, "not_found", self.lang.t("not_found"), true, None)
    }

    /// The page of a registry's refusal (an invalid parameter has a page of its own where a form
    /// can show it).
    fn refused(&self, refusal: &Refusal) -> Response {
        let (status, key) = match refusal {
            Refusal::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid"),
            Refusal::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            Refusal::InsufficientCredits => (StatusCode::PAYMENT_REQUIRED, "no_credits"),
            Refusal::TooManyRequests { .. } => (StatusCode::TOO_MANY_REQUESTS, "too_many_requests"),
            Refusal::Failed => (StatusCode::INTERNAL_SERVER_ERROR, "failed"),
        };
        let mut response = self.message(status, key, self.lang.t(key), true, Some(("/account", "account")));
        if let Refusal::TooManyRequests { retry_after } = refusal {
            response.headers_mut().insert(header::RETRY_AFTER, (*retry_after).into());
        }
        response
    }

    /// What a charged page answers when it was not the person's own step here (a link from another
    /// site): its price (`price_key` says when it is charged) and a button that asks for the same
    /// page again, its query as hidden fields, from this page (so the button's request is this
    /// site's own). Nothing is charged.
    fn ask_first(&self, price_key: &str, price: i64, query: Option<&str>) -> Response {
        let page = templates::Ask {
            common: self.common("ask_first"),
            price_label: self.lang.t(price_key).to_owned(),
            price: show::count(self.lang, price.max(0) as u64),
            fields: form_urlencoded::parse(query.unwrap_or("").as_bytes()).into_owned().collect(),
        };
        self.render(StatusCode::OK, &page)
    }

    /// A page of one message (and maybe a link).
    fn message(
        &self,
        status: StatusCode,
        title_key: &str,
        message: &str,
        bad: bool,
        link: Option<(&str, &str)>,
    ) -> Response {
        let page = templates::Message {
            common: self.common(title_key),
            message: message.to_owned(),
            bad,
            link: link.map(|(href, key)| (href.to_owned(), self.lang.t(key).to_owned())),
        };
        self.render(status, &page)
    }

    /// A rendered page, with the cookies this visit must set.
    fn render(&self, status: StatusCode, page: &impl Template) -> Response {
        match page.render() {
            Ok(html) => {
                self.with_cookies((status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response())
            }
            Err(e) => {
                tracing::error!(error = %e, "rendering a page failed");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
    }

    /// Adds the form cookie (when new) and the locale cookie (when asked for).
    fn with_cookies(&self, mut response: Response) -> Response {
        let headers = response.headers_mut();
        if self.new_form_cookie {
            headers.append(header::SET_COOKIE, set_cookie(FORM_COOKIE, &self.form_secret, 86_400, self.secure));
        }
        if self.lang_asked {
            headers.append(header::SET_COOKIE, set_cookie(LOCALE_COOKIE, self.lang.code(), 365 * 86_400, self.secure));
        }
        response
    }

    /// A 303 to `to` that sets the session cookie to `session` (`None`: deletes it).
    fn redirect_with_session(&self, to: &str, session: Option<&str>) -> Response {
        let mut response = see_other(to);
        let value = match session {
            Some(id) => set_cookie(SESSION_COOKIE, id, cnpj_accounts::SESSION_MAX, self.secure),
            None => set_cookie(SESSION_COOKIE, "", 0, self.secure),
        };
        response.headers_mut().append(header::SET_COOKIE, value);
        response
    }
}

/// A failure of the accounts store: logged, answered 500 (a page without details).
pub(crate) struct StoreFailed(AccountsError);

impl IntoResponse for StoreFailed {
    fn into_response(self) -> Response {
        tracing::error!(error = %self.0, "the accounts store failed");
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "Internal server error.",
        )
            .into_response()
    }
}

/// Runs `f` on the accounts store off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    pages: &Pages,
    f: impl FnOnce(&Accounts) -> Result<T, AccountsError> + Send + 'static,
) -> Result<T, StoreFailed> {
    let accounts = Arc::clone(&pages.accounts);
    match tokio::task::spawn_blocking(move || f(&accounts)).await {
        Ok(result) => result.map_err(StoreFailed),
        Err(e) => Err(StoreFailed(AccountsError::Random(format!("a blocking task failed: {e}")))),
    }
}

/// A form's fields (`application/x-www-form-urlencoded`); a repeated field keeps its last value.
pub(crate) struct Fields(std::collections::HashMap<String, String>);

impl Fields {
    /// The fields of a form or a query string; a name given more than once (a multi-select's
    /// choices) holds its values joined by commas, as the API's lists take them.
    pub(crate) fn parse(body: &[u8]) -> Fields {
        let mut fields = std::collections::HashMap::<String, String>::new();
        for (name, value) in form_urlencoded::parse(body).into_owned() {
            match fields.get_mut(&name) {
                Some(held) if !value.is_empty() && !held.is_empty() => {
                    held.push(',');
                    held.push_str(&value);
                }
                Some(held) if held.is_empty() => *held = value,
                Some(_) => {}
                None => {
                    fields.insert(name, value);
                }
            }
        }
        Fields(fields)
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// A field trimmed, `""` when absent, at most `max` characters.
    pub(crate) fn text(&self, name: &str, max: usize) -> String {
        self.get(name).unwrap_or("").trim().chars().take(max).collect()
    }
}

mod templates {
    //! The templates' data (`templates/*.html`).

    use askama::Template;

    use crate::Common;

    #[derive(Template)]
    #[template(path = "message.html")]
    pub struct Message {
        pub common: Common,
        pub message: String,
        pub bad: bool,
        pub link: Option<(String, String)>,
    }

    #[derive(Template)]
    #[template(path = "ask.html")]
    pub struct Ask {
        pub common: Common,
        pub price_label: String,
        pub price: String,
        /// The page's query, sent again by the button.
        pub fields: Vec<(String, String)>,
    }

    #[derive(Template)]
    #[template(path = "login.html")]
    pub struct Login {
        pub common: Common,
        pub error: Option<String>,
        pub notice: Option<String>,
        pub email: String,
        pub signup_open: bool,
    }

    #[derive(Template)]
    #[template(path = "signup.html")]
    pub struct Signup {
        pub common: Common,
        pub error: Option<String>,
        pub invite: Option<String>,
        pub email: String,
        pub display_name: String,
    }

    #[derive(Template)]
    #[template(path = "forgot.html")]
    pub struct Forgot {
        pub common: Common,
        pub notice: Option<String>,
    }

    #[derive(Template)]
    #[template(path = "reset.html")]
    pub struct Reset {
        pub common: Common,
        pub error: Option<String>,
        pub token: String,
        /// The account's, for password managers (a hidden username field).
        pub email: String,
    }

    pub struct TokenRow {
        pub name: String,
        pub prefix: String,
        pub created: String,
        pub last_used: String,
        pub expires: String,
    }

    pub struct UsageLine {
        pub day: String,
        pub endpoint: String,
        pub requests: i64,
        pub credits: i64,
    }

    pub struct LedgerLine {
        pub when: String,
        pub what: String,
        pub amount: i64,
    }

    pub struct ListLine {
        pub id: i64,
        pub name: String,
        pub entries: i64,
        pub webhook: String,
    }

    /// The form that makes a list, as sent when it was refused (else empty), and why.
    #[derive(Default)]
    pub struct ListForm {
        pub error: Option<String>,
        pub invalid: Vec<String>,
        pub name: String,
        pub cnpjs: String,
        pub webhook_url: String,
    }

    #[derive(Template)]
    #[template(path = "account.html")]
    pub struct Account {
        pub common: Common,
        pub error: Option<String>,
        pub notice: Option<String>,
        pub new_token: Option<String>,
        pub name: String,
        pub email: String,
        pub plan: String,
        pub allowance: i64,
        pub monthly: i64,
        pub credits: i64,
        pub total: i64,
        pub per_minute: u32,
        pub tokens: Vec<TokenRow>,
        pub chart: Option<String>,
        pub usage: Vec<UsageLine>,
        pub ledger: Vec<LedgerLine>,
        pub watchlists: Vec<ListLine>,
        /// How many CNPJs the user watches, and how many their plan allows.
        pub watched: i64,
        pub max_watched: u32,
        pub list_form: ListForm,
    }

    pub struct DeliveryLine {
        pub id: String,
        pub month: String,
        pub page: String,
        pub status: String,
        pub attempts: i64,
        pub last_error: String,
        /// Whether it may be retried (it failed, or was delivered).
        pub retry: bool,
    }

    #[derive(Template)]
    #[template(path = "watchlist.html")]
    pub struct Watchlist {
        pub common: Common,
        pub error: Option<String>,
        pub invalid: Vec<String>,
        pub notice: Option<String>,
        pub new_secret: Option<String>,
        pub id: i64,
        pub name: String,
        pub entries: i64,
        pub events: String,
        pub webhook: String,
        pub has_webhook: bool,
        pub created: String,
        pub cnpjs: Vec<String>,
        /// The pages of entries before and after this one, when there are.
        pub previous: Option<u64>,
        pub next: Option<u64>,
        /// The forms' fields as sent when they were refused (else empty; the webhook's: the URL).
        pub add: String,
        pub remove: String,
        pub webhook_url: String,
        pub deliveries: Vec<DeliveryLine>,
        pub deliveries_shown: String,
    }

    pub struct UserLine {
        pub id: i64,
        pub label: String,
        pub plan: String,
        pub status: &'static str,
        pub disabled: bool,
        pub allowance: i64,
        pub credits: i64,
        pub last_activity: String,
        pub requests: i64,
        pub spent: i64,
    }

    pub struct AuditLine {
        pub when: String,
        pub admin: String,
        pub action: String,
        pub target: String,
        pub detail: String,
    }

    #[derive(Template)]
    #[template(path = "admin.html")]
    pub struct Admin {
        pub common: Common,
        pub error: Option<String>,
        pub query: String,
        pub users: Vec<UserLine>,
        pub plans: Vec<String>,
        pub audit: Vec<AuditLine>,
    }
}
