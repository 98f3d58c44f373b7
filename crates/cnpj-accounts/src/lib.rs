//! The API's accounts store: users, API tokens kept only as SHA-256 hashes (listed
//! by prefix, named, revocable, with an optional expiry), two balances (the plan's monthly
//! allowance and the operator's credits) with a debit ledger, and, when shared by several API
//! replicas, the rate-limit counters. People's accounts beside (`people`: email, argon2id password,
//! role, status), their sessions and one-time links (`sessions`), the throttles of logging in and
//! signing up with device tokens (`throttle`), usage counts, the ledger and the
//! admin audit log (`usage`), plans (`plans`), each user's watchlists (`watchlists`) with their
//! webhook deliveries (`deliveries`), and export jobs (`exports`). A SQLite file by default (separate from the monthly
//! dataset), or a Postgres schema that every replica uses. Charging is atomic on both (no balance
//! ever goes negative). A store is migrated from older versions when opened.

/// Calls the same method on whichever store `self` holds (defined before the modules, which use
/// it too).
macro_rules! dispatch {
    ($self:ident, $store:ident => $call:expr) => {
        match &$self.inner {
            Inner::Sqlite($store) => $call,
            Inner::Postgres($store) => $call,
        }
    };
}

mod deliveries;
mod exports;
mod people;
mod plans;
mod postgres;
mod sessions;
mod sql;
mod sqlite;
mod throttle;
mod usage;
mod watchlists;

pub use deliveries::{Attempt, Delivery, Due, delivery_id};
pub use exports::{EXPORT_ATTEMPTS, ExportJob, NewExport};
pub use people::{Person, Role, Status, check_password, hash_password};
pub use plans::{Plan, Plans, PlansError};
pub use sessions::{Link, LinkKind, SESSION_IDLE, SESSION_MAX, Session};
pub use throttle::{DEVICE_MAX, LoginTry};
pub use usage::{AuditEntry, Debit, UsageRow, UserSummary};
pub use watchlists::{
    InvalidEntry, MAX_NAME, MAX_PER_REQUEST, NewWatchlist, Saved, Watchlist, WatchlistChange, watch_key,
};

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

const TOKEN_PREFIX: &str = "cnpj_";
const PREFIX_LEN: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    #[error("accounts store: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("accounts store (Postgres): {0}")]
    Postgres(#[from] ::postgres::Error),
    /// A migration that would leave a row naming a missing one: nothing of it was kept.
    #[error("accounts store: migrating to version {version} would leave rows of {table} naming missing rows")]
    Migration { version: usize, table: String },
    #[error("no user named {0:?}")]
    UnknownUser(String),
    #[error("a user named {0:?} exists already")]
    UserExists(String),
    #[error("no token with prefix {0:?}")]
    UnknownToken(String),
    #[error("cannot draw random bytes for a token: {0}")]
    Random(String),
    #[error("an account with the email {0:?} exists already")]
    EmailTaken(String),
    #[error("{0:?} is not an email address")]
    InvalidEmail(String),
    #[error("no account with the email {0:?}")]
    UnknownEmail(String),
    #[error("no plan named {0:?} in the plans")]
    UnknownPlan(String),
    #[error("the plan allows {0} tokens at most")]
    TooManyTokens(u32),
    #[error("password hashing: {0}")]
    Password(String),
    /// Entries of a watchlist request that are no CNPJ: the request stored nothing.
    #[error("invalid CNPJs: {0:?}")]
    InvalidCnpjs(Vec<InvalidEntry>),
    /// More than `MAX_PER_REQUEST` CNPJs in a field of a watchlist request: nothing stored.
    #[error("at most {MAX_PER_REQUEST} CNPJs a request ({0})")]
    TooManyCnpjs(&'static str),
    /// A watchlist's name that is empty or longer than `MAX_NAME` characters: nothing stored.
    #[error("a list's name has 1 to {MAX_NAME} characters")]
    WatchlistName,
    /// The user's entries over all their lists would pass their plan's cap: nothing stored.
    #[error("{watched} CNPJs watched, over the cap of {cap}")]
    OverCap { cap: u64, watched: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub credits: i64,
    /// `None`: the default plan.
    pub plan: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenInfo {
    pub prefix: String,
    pub name: String,
    pub last_used_at: Option<i64>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// A charge that the balances (allowance left and credits) cannot cover; nothing was debited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insufficient {
    pub balance: i64,
}

pub(crate) fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The UTC month (`YYYY-MM`) of a time.
pub(crate) fn month_of(unix_seconds: i64) -> String {
    cnpj_model::utc_text(unix_seconds)[..7].to_owned()
}

/// The month's allowance left: what is stored for this month, else the plan's whole amount.
pub(crate) fn allowance_left(plans: &Plans, plan: Option<&str>, stored: i64, month: Option<&str>, at: i64) -> i64 {
    if month == Some(month_of(at).as_str()) { stored } else { plans.of(plan).1.monthly_allowance }
}

/// An email as stored: trimmed and lower-cased.
pub(crate) fn normal_email(email: &str) -> String {
    email.trim().to_lowercase()
}

/// Whether `email` is an address, by the `email_address` parser: a plain local part (no quoted
/// one), `@`, a domain name with a dot (no literal address), nothing around it (no display name).
pub fn valid_email(email: &str) -> bool {
    let options = email_address::Options::default().with_required_tld().without_domain_literal().without_display_text();
    !email.starts_with('"') && email_address::EmailAddress::parse_with_options(email, options).is_ok()
}

pub(crate) fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// 32 random bytes, hex.
pub(crate) fn random_hex() -> Result<String, AccountsError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AccountsError::Random(e.to_string()))?;
    Ok(hex::encode(bytes))
}

/// 32 random bytes, hex, after the `cnpj_` prefix.
fn new_token() -> Result<String, AccountsError> {
    Ok(format!("{TOKEN_PREFIX}{}", random_hex()?))
}

pub struct Accounts {
    inner: Inner,
    plans: Plans,
}

enum Inner {
    Sqlite(sqlite::Sqlite),
    Postgres(postgres::Pg),
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_shared() { "Accounts(Postgres)" } else { "Accounts(SQLite)" })
    }
}

impl Accounts {
    /// The SQLite store at `path` (created when missing).
    pub fn open(path: &Path) -> Result<Accounts, AccountsError> {
        let store = sqlite::Sqlite::open(path)?;
        Ok(Accounts { inner: Inner::Sqlite(store), plans: Plans::default() })
    }

    /// The Postgres store (schema `cnpj_accounts`, created when missing) that replicas share.
    pub fn open_postgres(url: &str) -> Result<Accounts, AccountsError> {
        let store = postgres::Pg::open(url)?;
        Ok(Accounts { inner: Inner::Postgres(store), plans: Plans::default() })
    }

    /// The store with these plans (the built-in `free` otherwise).
    pub fn with_plans(self, plans: Plans) -> Accounts {
        Accounts { plans, ..self }
    }

    pub fn plans(&self) -> &Plans {
        &self.plans
    }

    /// Runs `f` in one transaction of the store (committed when `f` succeeds).
    fn tx<T>(&self, f: impl FnOnce(&mut dyn sql::Sql) -> Result<T, AccountsError>) -> Result<T, AccountsError> {
        dispatch!(self, s => s.tx(f))
    }

    /// Whether several processes share this store (and its rate-limit counters).
    pub fn is_shared(&self) -> bool {
        matches!(self.inner, Inner::Postgres(_))
    }

    pub fn create_user(&self, name: &str, credits: i64) -> Result<User, AccountsError> {
        dispatch!(self, s => s.create_user(name, credits.max(0)))
    }

    /// Issues a new token for `user`; returns it: it is never stored nor shown again.
    pub fn issue_token(&self, user: &str, expires_in_days: Option<u32>) -> Result<String, AccountsError> {
        dispatch!(self, s => s.issue_token(user, expires_in_days))
    }

    pub fn revoke_token(&self, prefix: &str) -> Result<(), AccountsError> {
        dispatch!(self, s => s.revoke_token(prefix))
    }

    /// Adds `credits` (may be negative, never below zero) and returns the user.
    pub fn grant(&self, user: &str, credits: i64) -> Result<User, AccountsError> {
        dispatch!(self, s => s.grant(user, credits))
    }

    /// A user with their tokens (by prefix) and the credits they used.
    pub fn show(&self, user: &str) -> Result<(User, Vec<TokenInfo>, i64), AccountsError> {
        dispatch!(self, s => s.show(user))
    }

    /// The user a token belongs to, if the token is known, not revoked and not expired.
    pub fn authenticate(&self, token: &str) -> Result<Option<User>, AccountsError> {
        if !token.starts_with(TOKEN_PREFIX) || token.len() < PREFIX_LEN {
            return Ok(None);
        }
        dispatch!(self, s => s.authenticate(token))
    }

    /// Debits `amount` atomically, from the month's allowance first (set to the plan's amount at
    /// the first charge of a UTC month), then from the credits; `Ok(Err(Insufficient))` when both
    /// together are short, in which case nothing is debited. Returns what is left of both.
    pub fn charge(&self, user_id: i64, amount: i64, what: &str) -> Result<Result<i64, Insufficient>, AccountsError> {
        dispatch!(self, s => s.charge(user_id, amount, what, &self.plans))
    }

    /// Whether the store answers a trivial query (a readiness probe).
    pub fn ping(&self) -> Result<(), AccountsError> {
        dispatch!(self, s => s.ping())
    }

    /// Writes every debit so far into the store's main file, for a shutdown: SQLite checkpoints
    /// and empties its write-ahead log (a commit there survives a crash of the process, not
    /// a power loss); Postgres has nothing to do (a commit is durable).
    pub fn flush(&self) -> Result<(), AccountsError> {
        match &self.inner {
            Inner::Sqlite(s) => s.flush(),
            Inner::Postgres(_) => Ok(()),
        }
    }

    /// The shared rolling-window rate limit (Postgres only; a SQLite store serves one process,
    /// whose limiter is in memory): `Ok(Ok(remaining))`, or `Ok(Err(seconds until a slot frees))`
    /// when `limit` requests were counted in the last `window` (a refused request is not counted).
    pub fn rate_check(&self, user_id: i64, limit: u32, window: Duration) -> Result<Result<u32, u64>, AccountsError> {
        match &self.inner {
            Inner::Postgres(s) => s.rate_check(user_id, limit, window),
            Inner::Sqlite(_) => Ok(Ok(limit)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Accounts) {
        let dir = tempfile::tempdir().unwrap();
        let accounts = Accounts::open(&dir.path().join("accounts.sqlite")).unwrap();
        (dir, accounts)
    }

    #[test]
    fn tokens_authenticate_until_revoked_or_expired() {
        let (_dir, a) = store();
        let user = a.create_user("ana", 10).unwrap();
        let token = a.issue_token("ana", None).unwrap();
        assert_eq!(token.len(), 5 + 64);
        assert_eq!(a.authenticate(&token).unwrap(), Some(user.clone()));
        assert_eq!(a.authenticate("cnpj_00000000000000").unwrap(), None);
        assert_eq!(a.authenticate("").unwrap(), None);
        let (_, tokens, _) = a.show("ana").unwrap();
        assert_eq!(tokens.len(), 1);
        assert_eq!(tokens[0].prefix, token[..12]);
        let expired = a.issue_token("ana", Some(0)).unwrap();
        assert_eq!(a.authenticate(&expired).unwrap(), None, "an expiry of 0 days is already past");
        let second = a.issue_token("ana", Some(30)).unwrap();
        assert!(a.authenticate(&second).unwrap().is_some());
        a.revoke_token(&second[..12]).unwrap();
        assert_eq!(a.authenticate(&second).unwrap(), None);
        assert!(matches!(a.revoke_token("cnpj_nothing"), Err(AccountsError::UnknownToken(_))));
    }

    #[test]
    fn charges_never_overdraw_and_are_ledgered() {
        let (_dir, a) = store();
        let user = a.create_user("bia", 3).unwrap();
        assert_eq!(a.charge(user.id, 2, "batch").unwrap(), Ok(1));
        assert_eq!(a.charge(user.id, 2, "batch").unwrap(), Err(Insufficient { balance: 1 }));
        assert_eq!(a.charge(user.id, 0, "cities").unwrap(), Ok(1));
        assert_eq!(a.grant("bia", 5).unwrap().credits, 6);
        assert_eq!(a.show("bia").unwrap().2, 2);
        assert!(matches!(a.create_user("bia", 1), Err(AccountsError::UserExists(_))));
        assert!(matches!(a.grant("nobody", 1), Err(AccountsError::UnknownUser(_))));
    }

    #[test]
    fn flush_writes_the_log_into_the_file() {
        let (dir, a) = store();
        let user = a.create_user("cid", 3).unwrap();
        a.charge(user.id, 1, "detail").unwrap().unwrap();
        let wal = dir.path().join("accounts.sqlite-wal");
        assert!(std::fs::metadata(&wal).unwrap().len() > 0, "the debit is in the log");
        a.ping().unwrap();
        a.flush().unwrap();
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0, "the log is emptied into the file");
        assert_eq!(a.show("cid").unwrap().0.credits, 2);
    }
}

#[cfg(test)]
mod people_tests {
    use super::*;

    fn store(plans: &str) -> (tempfile::TempDir, Accounts) {
        let dir = tempfile::tempdir().unwrap();
        let accounts = Accounts::open(&dir.path().join("accounts.sqlite")).unwrap();
        (dir, accounts.with_plans(Plans::parse(plans).unwrap()))
    }

    const PLANS: &str = "default = \"free\"\n[plans.free]\nmonthly_allowance = 5\nmax_tokens = 2\n";

    fn sql(dir: &tempfile::TempDir, statement: &str) {
        rusqlite::Connection::open(dir.path().join("accounts.sqlite")).unwrap().execute_batch(statement).unwrap();
    }

    #[test]
    fn a_store_of_version_0_is_migrated_and_keeps_working() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("accounts.sqlite");
        let old = rusqlite::Connection::open(&path).unwrap();
        old.execute_batch(include_str!("../../../sql/sqlite/accounts.sql")).unwrap();
        old.execute_batch(&format!(
            "INSERT INTO users (name, credits, created_at) VALUES ('ana', 7, 1);
             INSERT INTO tokens (prefix, hash, user_id, created_at) VALUES ('cnpj_abcdefg', '{}', 1, 1);
             INSERT INTO debits (user_id, amount, at, what) VALUES (1, 2, 1, 'detail');",
            hash("cnpj_abcdefghijkl")
        ))
        .unwrap();
        drop(old);
        let a = Accounts::open(&path).unwrap();
        let user = a.authenticate("cnpj_abcdefghijkl").unwrap().expect("the old token works");
        assert_eq!((user.name.as_str(), user.credits, user.plan), ("ana", 7, None));
        assert_eq!(a.charge(user.id, 1, "detail").unwrap(), Ok(6));
        assert_eq!(a.ledger(user.id, 50).unwrap().len(), 2);
        let version: i64 =
            rusqlite::Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, 4);
        drop(a);
        Accounts::open(&path).unwrap().authenticate("cnpj_abcdefghijkl").unwrap().expect("opened again");
    }

    #[test]
    fn a_store_of_version_1_gets_the_watchlists_whether_it_has_their_tables_or_not() {
        for had_tables in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("accounts.sqlite");
            let old = rusqlite::Connection::open(&path).unwrap();
            old.execute_batch(include_str!("../../../sql/sqlite/accounts.sql")).unwrap();
            old.execute_batch(include_str!("../../../sql/sqlite/accounts-1.sql")).unwrap();
            old.execute_batch(
                "PRAGMA user_version = 1; INSERT INTO users (name, credits, created_at) VALUES ('ana', 0, 1)",
            )
            .unwrap();
            if had_tables {
                // Earlier builds made the very same tables whenever a store was opened.
                old.execute_batch(include_str!("../../../sql/sqlite/accounts-2.sql")).unwrap();
                old.execute_batch(
                    "INSERT INTO watchlists (user_id, name, events, entries, created_at, updated_at) \
                     VALUES (1, 'kept', '', 1, 1, 1); INSERT INTO watchlist_entries VALUES (1, '11222333')",
                )
                .unwrap();
            }
            drop(old);
            let a = Accounts::open(&path).unwrap();
            let version: i64 =
                rusqlite::Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
            assert_eq!(version, 4, "had the tables: {had_tables}");
            let cnpjs = ["33683111".to_owned()];
            let new = NewWatchlist { name: "new", cnpjs: &cnpjs, events: &[], webhook_url: None };
            let made = a.create_watchlist(1, &new).unwrap().watchlist.id;
            let names: Vec<String> = a.watchlists(1).unwrap().into_iter().map(|l| l.name).collect();
            let expected: &[&str] = if had_tables { &["kept", "new"] } else { &["new"] };
            assert_eq!(names, expected);
            if had_tables {
                assert_eq!(a.watchlist(1, 1, 0, None).unwrap().unwrap().1, ["11222333"], "its entries kept");
            }
            // Version 3: the newest list's id, once deleted, is not handed out again.
            assert!(a.delete_watchlist(1, made).unwrap());
            assert_eq!(a.create_watchlist(1, &new).unwrap().watchlist.id, made + 1, "had the tables: {had_tables}");
        }
    }

    #[test]
    fn a_charge_takes_the_allowance_first_and_it_resets_monthly() {
        let (dir, a) = store(PLANS);
        let user = a.create_user("bia", 3).unwrap();
        assert_eq!(a.charge(user.id, 0, "cities").unwrap(), Ok(8), "5 of the allowance and 3 credits");
        assert_eq!(a.charge(user.id, 4, "batch").unwrap(), Ok(4));
        let p = a.person(user.id).unwrap().unwrap();
        assert_eq!((a.allowance_left(&p), p.credits), (1, 3));
        assert_eq!(a.charge(user.id, 2, "batch").unwrap(), Ok(2));
        assert_eq!(a.charge(user.id, 3, "batch").unwrap(), Err(Insufficient { balance: 2 }));
        let p = a.person(user.id).unwrap().unwrap();
        assert_eq!((a.allowance_left(&p), p.credits), (0, 2));
        sql(&dir, "UPDATE users SET allowance_month = '2000-01'");
        assert_eq!(a.charge(user.id, 0, "cities").unwrap(), Ok(7), "a new month: the plan's amount again");
        assert_eq!(a.charge(user.id, 6, "batch").unwrap(), Ok(1));
        assert_eq!(a.show("bia").unwrap().2, 12, "every debit is in the ledger");
    }

    #[test]
    fn people_sessions_and_links() {
        let (dir, a) = store(PLANS);
        let hashed = hash_password("correct horse battery").unwrap();
        assert!(check_password(&hashed, "correct horse battery") && !check_password(&hashed, "wrong"));
        let ana = a.create_person("Ana@Example.com", &hashed, "Ana", "en", Status::Active).unwrap();
        assert_eq!(ana.email.as_deref(), Some("ana@example.com"));
        assert!(matches!(
            a.create_person("ANA@example.com ", &hashed, "", "en", Status::Active),
            Err(AccountsError::EmailTaken(_))
        ));
        assert_eq!(a.person_by_email("ANA@EXAMPLE.COM").unwrap().map(|p| p.id), Some(ana.id));

        let session = a.open_session(ana.id).unwrap();
        assert_eq!(session.len(), 64);
        assert_eq!(a.session(&session).unwrap().map(|s| s.person.id), Some(ana.id));
        sql(&dir, &format!("UPDATE sessions SET seen_at = seen_at - {SESSION_IDLE}"));
        assert!(a.session(&session).unwrap().is_none(), "idle for 2 hours: ended");
        let second = a.open_session(ana.id).unwrap();
        sql(&dir, &format!("UPDATE sessions SET created_at = created_at - {SESSION_MAX}"));
        assert!(a.session(&second).unwrap().is_none(), "30 days old: ended");
        let third = a.open_session(ana.id).unwrap();
        a.set_password(ana.id, &hashed).unwrap();
        assert!(a.session(&third).unwrap().is_none(), "a new password ends every session");
        let fourth = a.open_session(ana.id).unwrap();
        a.close_session(&fourth).unwrap();
        assert!(a.session(&fourth).unwrap().is_none());

        let invite = a.make_link(LinkKind::Invite, "Cid@Example.com", None, None, 40).unwrap();
        assert_eq!(a.peek_link(&invite, LinkKind::Invite).unwrap().map(|l| l.email), Some("cid@example.com".into()));
        assert!(a.peek_link(&invite, LinkKind::Reset).unwrap().is_none(), "a link is of one kind");
        let cid = a.accept_invite(&invite, &hashed, "Cid", "es").unwrap().expect("the invite is valid");
        assert_eq!((cid.credits, cid.status), (40, Status::Active));
        assert!(a.accept_invite(&invite, &hashed, "Cid", "es").unwrap().is_none(), "single use");
        assert!(matches!(
            a.make_link(LinkKind::Invite, "x@y.z", None, Some("gold"), 0),
            Err(AccountsError::UnknownPlan(_))
        ));

        let reset = a.make_link(LinkKind::Reset, "cid@example.com", None, None, 0).unwrap();
        let new_hash = hash_password("another long secret").unwrap();
        assert_eq!(a.reset_password(&reset, &new_hash).unwrap(), Some(cid.id));
        assert_eq!(a.reset_password(&reset, &new_hash).unwrap(), None, "single use");
        sql(&dir, "UPDATE links SET expires_at = 0, used_at = NULL");
        assert_eq!(a.reset_password(&reset, &new_hash).unwrap(), None, "expired");

        let unverified = a.create_person("dan@example.com", &hashed, "", "pt-br", Status::Unverified).unwrap();
        let verify = a.make_link(LinkKind::Verify, "dan@example.com", Some(unverified.id), None, 0).unwrap();
        let s = a.open_session(unverified.id).unwrap();
        assert!(a.session(&s).unwrap().is_none(), "an unverified account has no session");
        assert_eq!(a.verify_email(&verify).unwrap(), Some(unverified.id));
        assert_eq!(a.person(unverified.id).unwrap().unwrap().status, Status::Active);
    }

    #[test]
    fn tokens_within_the_plan_and_erasure_keeps_the_ledger() {
        let (_dir, a) = store(PLANS);
        let p = a
            .create_person("eva@example.com", &hash_password("0123456789ab").unwrap(), "Eva", "en", Status::Active)
            .unwrap();
        let t1 = a.create_token(p.id, "laptop", Some(30)).unwrap();
        a.create_token(p.id, "server", None).unwrap();
        assert!(matches!(a.create_token(p.id, "third", None), Err(AccountsError::TooManyTokens(2))));
        assert!(a.tokens(p.id).unwrap().iter().any(|t| t.name == "laptop" && t.expires_at.is_some()));
        assert!(!a.revoke_token_of(Some(p.id + 1), &t1[..12]).unwrap(), "not someone else's token");
        assert!(a.revoke_token_of(Some(p.id), &t1[..12]).unwrap());
        assert!(a.authenticate(&t1).unwrap().is_none());
        let t3 = a.create_token(p.id, "third", None).unwrap();
        a.charge(p.id, 3, "detail").unwrap().unwrap();
        let today = usage::day_of(now());
        let row = |endpoint: &str, status_class: &str, requests, credits| UsageRow {
            user_id: p.id,
            day: today.clone(),
            endpoint: endpoint.into(),
            status_class: status_class.into(),
            requests,
            credits,
        };
        a.record_usage(&[row("detail", "2xx", 2, 2), row("detail", "4xx", 1, 0)], &[(t3[..12].to_owned(), 99)])
            .unwrap();
        a.record_usage(&[row("detail", "2xx", 1, 1)], &[]).unwrap();
        let usage = a.usage(p.id, 30).unwrap();
        assert_eq!(usage, vec![UsageRow { status_class: String::new(), ..row("detail", "", 4, 3) }]);
        let used = a.tokens(p.id).unwrap().into_iter().find(|t| t.prefix == t3[..12]).unwrap();
        assert_eq!(used.last_used_at, Some(99));
        a.admin_grant(p.id, p.id, 5, "a gift").unwrap();
        assert_eq!(a.audit_log(10).unwrap()[0].detail, "5 credits: a gift");
        assert_eq!(a.user_summaries("EVA").unwrap()[0].requests_30d, 4);
        a.erase(p.id).unwrap();
        let erased = a.person(p.id).unwrap().unwrap();
        assert_eq!((erased.has_password(), erased.email, erased.display_name), (false, None, None));
        assert!(a.authenticate(&t3).unwrap().is_none() && a.tokens(p.id).unwrap().is_empty());
        assert_eq!(a.ledger(p.id, 50).unwrap().len(), 1, "the ledger stays, anonymous");
        assert_eq!(a.usage(p.id, 30).unwrap().len(), 1, "and the usage");
        assert!(a.person_by_email("eva@example.com").unwrap().is_none());
        assert!(a.user_summaries("").unwrap().is_empty(), "an erased user is not listed");
    }

    fn try_from(email: &str, address: &str, device: Option<&str>) -> LoginTry {
        LoginTry { email: email.into(), address: address.into(), device: device.map(str::to_owned) }
    }

    #[test]
    fn logins_are_throttled_by_account_and_address_by_address_and_by_account() {
        let (dir, a) = store(PLANS);
        let from_a = try_from("x@y.z", "10.0.0.1", None);
        for _ in 0..4 {
            a.login_failed(&from_a).unwrap();
        }
        assert_eq!(a.login_wait(&from_a).unwrap(), None, "4 failures: no wait");
        a.login_failed(&from_a).unwrap();
        assert!(matches!(a.login_wait(&from_a).unwrap(), Some(59..=60)), "5 from the address: a minute");
        assert_eq!(a.login_wait(&try_from("X@y.z", "10.0.0.2", None)).unwrap(), None, "another address gets in");
        let other = try_from("w@y.z", "10.0.0.1", None);
        assert_eq!(a.login_wait(&other).unwrap(), None, "another account from the address");
        for n in 0..15 {
            a.login_failed(&try_from(&format!("{n}@y.z"), "10.0.0.1", None)).unwrap();
        }
        assert!(a.login_wait(&other).unwrap().is_some(), "20 failures from the address: it waits for all");
        a.login_failed(&from_a).unwrap();
        assert!(matches!(a.login_wait(&from_a).unwrap(), Some(119..=120)), "growing");
        for _ in 0..10 {
            a.login_failed(&from_a).unwrap();
        }
        assert!(matches!(a.login_wait(&from_a).unwrap(), Some(899..=900)), "up to a 15-minute lock");
        sql(&dir, "UPDATE login_failures SET at = at - 900");
        assert_eq!(a.login_wait(&from_a).unwrap(), None, "failures older than 15 minutes are forgotten");

        let person = a.create_person("ann@y.z", &hash_password("a long password").unwrap(), "", "en", Status::Active);
        let id = person.unwrap().id;
        let device = a.device_token(id).unwrap().unwrap();
        for n in 0..50 {
            let wait = a.login_wait(&try_from("ann@y.z", &format!("10.9.{n}.1"), None)).unwrap();
            assert_eq!(wait, None, "failure {n} from its own address");
            a.login_failed(&try_from("ann@y.z", &format!("10.9.{n}.1"), None)).unwrap();
        }
        let fresh = try_from("ann@y.z", "10.0.2.1", None);
        assert!(a.login_wait(&fresh).unwrap().is_some(), "50 failures lock the account");
        assert_eq!(a.login_wait(&try_from("ann@y.z", "10.0.2.1", Some(&device))).unwrap(), None, "but its device");
        for forged in [format!("{id}.1.00"), device.replacen(&format!("{id}."), &format!("{}.", id + 1), 1), "x".into()]
        {
            assert!(a.login_wait(&try_from("ann@y.z", "10.0.2.1", Some(&forged))).unwrap().is_some(), "{forged}");
        }
        let link = a.make_link(LinkKind::Reset, "ann@y.z", Some(id), None, 0).unwrap();
        a.reset_password(&link, &hash_password("another long one").unwrap()).unwrap();
        assert_eq!(a.login_wait(&fresh).unwrap(), None, "a reset ends the lock");
        for n in 0..50 {
            a.login_failed(&try_from("ann@y.z", &format!("10.9.{n}.1"), None)).unwrap();
        }
        let old_device = try_from("ann@y.z", "10.0.2.1", Some(&device));
        assert!(a.login_wait(&old_device).unwrap().is_some(), "a new password retires the device tokens");
    }

    #[test]
    fn sign_ups_are_throttled_by_address_and_by_network() {
        let (dir, a) = store(PLANS);
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        for _ in 0..5 {
            assert_eq!(a.signup_try(ip("10.0.0.1")).unwrap(), None);
        }
        assert!(matches!(a.signup_try(ip("10.0.0.1")).unwrap(), Some(3599..=3600)), "5 an hour from an address");
        for n in 2..17 {
            assert_eq!(a.signup_try(ip(&format!("10.0.0.{n}"))).unwrap(), None, "{n}");
        }
        assert!(a.signup_try(ip("10.0.0.99")).unwrap().is_some(), "20 an hour from a /24");
        assert_eq!(a.signup_try(ip("10.0.1.1")).unwrap(), None, "another /24");
        for n in 0..5 {
            assert_eq!(a.signup_try(ip(&format!("2001:db8::{n}"))).unwrap(), None);
        }
        assert!(a.signup_try(ip("2001:db8::9")).unwrap().is_none(), "5 from each address of a /64");
        sql(&dir, "UPDATE login_failures SET at = at - 3600");
        assert_eq!(a.signup_try(ip("10.0.0.1")).unwrap(), None, "an hour later");
    }

    #[test]
    fn emails_are_addresses() {
        let (_dir, a) = store(PLANS);
        let hash = hash_password("a long password").unwrap();
        for bad in
            ["x<svg/onload=alert(1)>@evil.example", "a@b", "Ann <a@b.c>", "a@[10.0.0.1]", "\"a b\"@c.d", "a b@c.d"]
        {
            assert!(!valid_email(bad), "{bad}");
            let made = a.create_person(bad, &hash, "", "en", Status::Active);
            assert!(matches!(made, Err(AccountsError::InvalidEmail(_))), "{bad}: {made:?}");
            assert!(matches!(a.make_link(LinkKind::Invite, bad, None, None, 0), Err(AccountsError::InvalidEmail(_))));
        }
        a.create_user("cli", 0).unwrap();
        assert!(matches!(a.set_login("cli", "x<svg>@evil.example", &hash), Err(AccountsError::InvalidEmail(_))));
        assert!(valid_email("ana.maria+x@sub.example.com.br") && a.set_login("cli", "Cli@Example.com", &hash).is_ok());
    }
}
