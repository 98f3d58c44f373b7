//! The API's accounts store (contract §7): users, API tokens kept only as SHA-256 hashes (listed
//! by prefix, revocable, with an optional expiry) and credit balances with a debit ledger. A SQLite
//! file, separate from the monthly dataset; safe to use from the server and the operator's CLI at
//! once (WAL, busy timeout), and charging is atomic (`BEGIN IMMEDIATE`, balance never negative).

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use sha2::{Digest, Sha256};

const SCHEMA: &str = include_str!("../../../sql/sqlite/accounts.sql");
const TOKEN_PREFIX: &str = "cnpj_";
const PREFIX_LEN: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    #[error("accounts store: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("no user named {0:?}")]
    UnknownUser(String),
    #[error("a user named {0:?} exists already")]
    UserExists(String),
    #[error("no token with prefix {0:?}")]
    UnknownToken(String),
    #[error("cannot draw random bytes for a token: {0}")]
    Random(String),
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

pub struct Accounts {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Accounts")
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Accounts {
    pub fn open(path: &Path) -> Result<Accounts, AccountsError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.execute_batch(SCHEMA)?;
        // WAL with NORMAL sync: a commit survives a crash of the process; only a power loss may
        // drop the last few debits (never corrupt the file). Charging pays one fsync per checkpoint,
        // not one per request.
        conn.execute_batch("PRAGMA synchronous = NORMAL")?;
        Ok(Accounts { conn: Mutex::new(conn) })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn create_user(&self, name: &str, credits: i64) -> Result<User, AccountsError> {
        let conn = self.conn();
        let inserted = conn.execute(
            "INSERT INTO users (name, credits, created_at) VALUES (?1, ?2, ?3) ON CONFLICT (name) DO NOTHING",
            params![name, credits.max(0), now()],
        )?;
        if inserted == 0 {
            return Err(AccountsError::UserExists(name.to_owned()));
        }
        Ok(User { id: conn.last_insert_rowid(), name: name.to_owned(), credits: credits.max(0) })
    }

    fn user_by_name(conn: &Connection, name: &str) -> Result<User, AccountsError> {
        conn.query_row("SELECT id, name, credits FROM users WHERE name = ?1", [name], |r| {
            Ok(User { id: r.get(0)?, name: r.get(1)?, credits: r.get(2)? })
        })
        .optional()?
        .ok_or_else(|| AccountsError::UnknownUser(name.to_owned()))
    }

    /// Issues a new token for `user` (32 random bytes); returns it: it is never stored nor shown again.
    pub fn issue_token(&self, user: &str, expires_in_days: Option<u32>) -> Result<String, AccountsError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| AccountsError::Random(e.to_string()))?;
        let token = format!("{TOKEN_PREFIX}{}", hex::encode(bytes));
        let conn = self.conn();
        let user = Self::user_by_name(&conn, user)?;
        let created = now();
        let expires = expires_in_days.map(|d| created + i64::from(d) * 86_400);
        conn.execute(
            "INSERT INTO tokens (prefix, hash, user_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![&token[..PREFIX_LEN], hash(&token), user.id, created, expires],
        )?;
        Ok(token)
    }

    pub fn revoke_token(&self, prefix: &str) -> Result<(), AccountsError> {
        let changed = self.conn().execute(
            "UPDATE tokens SET revoked_at = coalesce(revoked_at, ?1) WHERE prefix = ?2",
            params![now(), prefix],
        )?;
        if changed == 0 { Err(AccountsError::UnknownToken(prefix.to_owned())) } else { Ok(()) }
    }

    /// Adds `credits` (may be negative, never below zero) and returns the user.
    pub fn grant(&self, user: &str, credits: i64) -> Result<User, AccountsError> {
        let conn = self.conn();
        let u = Self::user_by_name(&conn, user)?;
        conn.execute("UPDATE users SET credits = max(0, credits + ?1) WHERE id = ?2", params![credits, u.id])?;
        Self::user_by_name(&conn, user)
    }

    /// A user with their tokens (by prefix) and the credits they used.
    pub fn show(&self, user: &str) -> Result<(User, Vec<TokenInfo>, i64), AccountsError> {
        let conn = self.conn();
        let u = Self::user_by_name(&conn, user)?;
        let mut stmt = conn.prepare(
            "SELECT prefix, created_at, expires_at, revoked_at FROM tokens WHERE user_id = ?1 ORDER BY created_at, prefix",
        )?;
        let tokens = stmt
            .query_map([u.id], |r| {
                Ok(TokenInfo { prefix: r.get(0)?, created_at: r.get(1)?, expires_at: r.get(2)?, revoked_at: r.get(3)? })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let used: i64 =
            conn.query_row("SELECT coalesce(sum(amount), 0) FROM debits WHERE user_id = ?1", [u.id], |r| r.get(0))?;
        Ok((u, tokens, used))
    }

    /// The user a token belongs to, if the token is known, not revoked and not expired.
    pub fn authenticate(&self, token: &str) -> Result<Option<User>, AccountsError> {
        if !token.starts_with(TOKEN_PREFIX) || token.len() < PREFIX_LEN {
            return Ok(None);
        }
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT u.id, u.name, u.credits FROM tokens t JOIN users u ON u.id = t.user_id \
             WHERE t.hash = ?1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > ?2)",
        )?;
        let user = stmt
            .query_row(params![hash(token), now()], |r| Ok(User { id: r.get(0)?, name: r.get(1)?, credits: r.get(2)? }))
            .optional()?;
        Ok(user)
    }

    /// Debits `amount` credits atomically; `Ok(Err(Insufficient))` when the balance is short, in
    /// which case nothing is debited. Returns the balance left.
    pub fn charge(&self, user_id: i64, amount: i64, what: &str) -> Result<Result<i64, Insufficient>, AccountsError> {
        let mut conn = self.conn();
        if amount <= 0 {
            return Ok(Ok(conn.query_row("SELECT credits FROM users WHERE id = ?1", [user_id], |r| r.get(0))?));
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let changed = tx
            .prepare_cached("UPDATE users SET credits = credits - ?1 WHERE id = ?2 AND credits >= ?1")?
            .execute(params![amount, user_id])?;
        let balance: i64 =
            tx.prepare_cached("SELECT credits FROM users WHERE id = ?1")?.query_row([user_id], |r| r.get(0))?;
        if changed == 0 {
            return Ok(Err(Insufficient { balance }));
        }
        tx.prepare_cached("INSERT INTO debits (user_id, amount, at, what) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![user_id, amount, now(), what])?;
        tx.commit()?;
        Ok(Ok(balance))
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
}
