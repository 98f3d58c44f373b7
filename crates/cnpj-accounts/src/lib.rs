//! The API's accounts store: users, API tokens kept only as SHA-256 hashes (listed
//! by prefix, revocable, with an optional expiry), credit balances with a debit ledger, and, when
//! shared by several API replicas, the rate-limit counters. A SQLite file by default (separate from
//! the monthly dataset), or a Postgres schema that every replica uses. Charging is atomic on both
//! (the balance never goes negative). Users also keep watchlists here (`watchlists`).

mod deliveries;
mod postgres;
mod sqlite;
mod watchlists;

pub use deliveries::{Attempt, Delivery, Due, delivery_id};

pub use watchlists::{InvalidEntry, NewWatchlist, Saved, Watchlist, WatchlistChange, watch_key};

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
    #[error("no user named {0:?}")]
    UnknownUser(String),
    #[error("a user named {0:?} exists already")]
    UserExists(String),
    #[error("no token with prefix {0:?}")]
    UnknownToken(String),
    #[error("cannot draw random bytes for a token: {0}")]
    Random(String),
    /// Entries of a watchlist request that are no CNPJ: the request stored nothing.
    #[error("invalid CNPJs: {0:?}")]
    InvalidCnpjs(Vec<InvalidEntry>),
    /// The user's entries over all their lists would pass their cap: nothing stored.
    #[error("{watched} CNPJs watched, over the cap of {cap}")]
    OverCap { cap: u64, watched: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub credits: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenInfo {
    pub prefix: String,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// A charge that the balance cannot cover; nothing was debited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insufficient {
    pub balance: i64,
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// 32 random bytes, hex, after the `cnpj_` prefix.
fn new_token() -> Result<String, AccountsError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AccountsError::Random(e.to_string()))?;
    Ok(format!("{TOKEN_PREFIX}{}", hex::encode(bytes)))
}

pub struct Accounts(Inner);

enum Inner {
    Sqlite(sqlite::Sqlite),
    Postgres(postgres::Pg),
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_shared() { "Accounts(Postgres)" } else { "Accounts(SQLite)" })
    }
}

macro_rules! dispatch {
    ($self:ident, $store:ident => $call:expr) => {
        match &$self.0 {
            Inner::Sqlite($store) => $call,
            Inner::Postgres($store) => $call,
        }
    };
}

impl Accounts {
    /// The SQLite store at `path` (created when missing).
    pub fn open(path: &Path) -> Result<Accounts, AccountsError> {
        let store = sqlite::Sqlite::open(path)?;
        store.create_watchlist_tables()?;
        Ok(Accounts(Inner::Sqlite(store)))
    }

    /// The Postgres store (schema `cnpj_accounts`, created when missing) that replicas share.
    pub fn open_postgres(url: &str) -> Result<Accounts, AccountsError> {
        let store = postgres::Pg::open(url)?;
        store.create_watchlist_tables()?;
        Ok(Accounts(Inner::Postgres(store)))
    }

    /// Whether several processes share this store (and its rate-limit counters).
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Inner::Postgres(_))
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

    /// Debits `amount` credits atomically; `Ok(Err(Insufficient))` when the balance is short, in
    /// which case nothing is debited. Returns the balance left.
    pub fn charge(&self, user_id: i64, amount: i64, what: &str) -> Result<Result<i64, Insufficient>, AccountsError> {
        dispatch!(self, s => s.charge(user_id, amount, what))
    }

    /// Whether the store answers a trivial query (a readiness probe).
    pub fn ping(&self) -> Result<(), AccountsError> {
        dispatch!(self, s => s.ping())
    }

    /// Writes every debit so far into the store's main file, for a shutdown: SQLite checkpoints
    /// and empties its write-ahead log (a commit there survives a crash of the process, not
    /// a power loss); Postgres has nothing to do (a commit is durable).
    pub fn flush(&self) -> Result<(), AccountsError> {
        match &self.0 {
            Inner::Sqlite(s) => s.flush(),
            Inner::Postgres(_) => Ok(()),
        }
    }

    /// The shared rolling-window rate limit (Postgres only; a SQLite store serves one process,
    /// whose limiter is in memory): `Ok(Ok(remaining))`, or `Ok(Err(seconds until a slot frees))`
    /// when `limit` requests were counted in the last `window` (a refused request is not counted).
    pub fn rate_check(&self, user_id: i64, limit: u32, window: Duration) -> Result<Result<u32, u64>, AccountsError> {
        match &self.0 {
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
