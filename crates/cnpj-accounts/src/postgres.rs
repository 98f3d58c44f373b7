//! The accounts store in Postgres, shared by API replicas: row locks make charges atomic across
//! processes, and a per-user advisory lock serialises the rate-limit count. The store's version is
//! the one row of `cnpj_accounts.version`, migrated when opened (under a lock: replicas may start
//! together).

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use postgres::{Client, NoTls};

use crate::sql::Sql;
use crate::{
    AccountsError, Insufficient, PREFIX_LEN, Plans, TokenInfo, User, allowance_left, hash, month_of, new_token, now,
};

const SCHEMA: &str = include_str!("../../../sql/postgres/accounts.sql");
/// The migrations, in order: the store's version is how many of them it has had.
const MIGRATIONS: [&str; 4] = [
    include_str!("../../../sql/postgres/accounts-1.sql"),
    include_str!("../../../sql/postgres/accounts-2.sql"),
    include_str!("../../../sql/postgres/accounts-3.sql"),
    include_str!("../../../sql/postgres/accounts-4.sql"),
];

/// Brings the store to the newest version (in the caller's transaction).
fn migrate(tx: &mut postgres::Transaction<'_>) -> Result<(), AccountsError> {
    tx.batch_execute("CREATE TABLE IF NOT EXISTS version (version integer NOT NULL)")?;
    let version = match tx.query_opt("SELECT version FROM version", &[])? {
        Some(row) => row.get::<_, i32>(0),
        None => {
            tx.execute("INSERT INTO version (version) VALUES (0)", &[])?;
            0
        }
    };
    for migration in MIGRATIONS.iter().skip(version as usize) {
        tx.batch_execute(migration)?;
    }
    tx.execute("UPDATE version SET version = $1", &[&(MIGRATIONS.len() as i32)])?;
    Ok(())
}

/// Connections open at most per process; more concurrent calls wait for one to be free.
const MAX_CONNECTIONS: usize = 8;

pub(crate) struct Pg {
    url: String,
    /// Idle connections, and how many are open in all.
    pool: Mutex<(Vec<Client>, usize)>,
    freed: Condvar,
}

fn user(row: &postgres::Row) -> User {
    User { id: row.get(0), name: row.get(1), credits: row.get(2), plan: row.get(3) }
}

impl Pg {
    pub(crate) fn open(url: &str) -> Result<Pg, AccountsError> {
        let pg = Pg { url: url.to_owned(), pool: Mutex::new((Vec::new(), 1)), freed: Condvar::new() };
        let mut client = pg.connect()?;
        // Replicas may start together: create the schema under a lock.
        let mut tx = client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock(hashtext('cnpj_accounts'))", &[])?;
        tx.batch_execute(SCHEMA)?;
        migrate(&mut tx)?;
        tx.commit()?;
        pg.pool.lock().unwrap_or_else(PoisonError::into_inner).0.push(client);
        Ok(pg)
    }

    fn connect(&self) -> Result<Client, AccountsError> {
        let mut client = Client::connect(&self.url, NoTls)?;
        client.batch_execute("SET search_path TO cnpj_accounts")?;
        Ok(client)
    }

    /// Runs `f` on a pooled connection (a broken one is closed, not returned to the pool).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Client) -> Result<T, AccountsError>) -> Result<T, AccountsError> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        let pooled = loop {
            if let Some(client) = pool.0.pop() {
                break Some(client);
            }
            if pool.1 < MAX_CONNECTIONS {
                pool.1 += 1;
                break None;
            }
            pool = self.freed.wait(pool).unwrap_or_else(PoisonError::into_inner);
        };
        drop(pool);
        let client = match pooled {
            Some(client) => Ok(client),
            None => self.connect(),
        };
        let (result, keep) = match client {
            Ok(mut client) => {
                let result = f(&mut client);
                (result, (!client.is_closed()).then_some(client))
            }
            Err(e) => (Err(e), None),
        };
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        match keep {
            Some(client) => pool.0.push(client),
            None => {
                // A connection lost (a restart, an outage): the idle ones most likely went with it
                // (each would fail one request before it is known), so they go too.
                let idle = pool.0.len();
                pool.0.clear();
                pool.1 -= 1 + idle;
            }
        }
        self.freed.notify_all();
        result
    }

    /// Runs `f` in a transaction, committed when it succeeds.
    pub(crate) fn tx<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T, AccountsError>) -> Result<T, AccountsError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            let result = f(&mut tx)?;
            tx.commit()?;
            Ok(result)
        })
    }

    fn user_by_name(client: &mut impl postgres::GenericClient, name: &str) -> Result<User, AccountsError> {
        client
            .query_opt("SELECT id, name, credits, plan FROM users WHERE name = $1", &[&name])?
            .map(|r| user(&r))
            .ok_or_else(|| AccountsError::UnknownUser(name.to_owned()))
    }

    pub(crate) fn ping(&self) -> Result<(), AccountsError> {
        self.with(|c| Ok(c.simple_query("SELECT 1").map(drop)?))
    }

    pub(crate) fn create_user(&self, name: &str, credits: i64) -> Result<User, AccountsError> {
        self.with(|c| {
            c.query_opt(
                "INSERT INTO users (name, credits, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING \
                 RETURNING id, name, credits, plan",
                &[&name, &credits, &now()],
            )?
            .map(|r| user(&r))
            .ok_or_else(|| AccountsError::UserExists(name.to_owned()))
        })
    }

    pub(crate) fn issue_token(&self, name: &str, expires_in_days: Option<u32>) -> Result<String, AccountsError> {
        let token = new_token()?;
        self.with(|c| {
            let u = Self::user_by_name(c, name)?;
            let created = now();
            let expires = expires_in_days.map(|d| created + i64::from(d) * 86_400);
            c.execute(
                "INSERT INTO tokens (prefix, hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)",
                &[&&token[..PREFIX_LEN], &hash(&token), &u.id, &created, &expires],
            )?;
            Ok(())
        })?;
        Ok(token)
    }

    pub(crate) fn revoke_token(&self, prefix: &str) -> Result<(), AccountsError> {
        let changed = self.with(|c| {
            Ok(c.execute(
                "UPDATE tokens SET revoked_at = coalesce(revoked_at, $1) WHERE prefix = $2",
                &[&now(), &prefix],
            )?)
        })?;
        if changed == 0 { Err(AccountsError::UnknownToken(prefix.to_owned())) } else { Ok(()) }
    }

    pub(crate) fn grant(&self, name: &str, credits: i64) -> Result<User, AccountsError> {
        self.with(|c| {
            c.query_opt(
                "UPDATE users SET credits = greatest(0, credits + $1) WHERE name = $2 RETURNING id, name, credits, plan",
                &[&credits, &name],
            )?
            .map(|r| user(&r))
            .ok_or_else(|| AccountsError::UnknownUser(name.to_owned()))
        })
    }

    pub(crate) fn show(&self, name: &str) -> Result<(User, Vec<TokenInfo>, i64), AccountsError> {
        self.with(|c| {
            let u = Self::user_by_name(c, name)?;
            let tokens = c
                .query(
                    "SELECT prefix, name, created_at, last_used_at, expires_at, revoked_at FROM tokens \
                     WHERE user_id = $1 ORDER BY created_at, prefix",
                    &[&u.id],
                )?
                .iter()
                .map(|r| TokenInfo {
                    prefix: r.get(0),
                    name: r.get(1),
                    created_at: r.get(2),
                    last_used_at: r.get(3),
                    expires_at: r.get(4),
                    revoked_at: r.get(5),
                })
                .collect();
            let used: i64 =
                c.query_one("SELECT coalesce(sum(amount), 0)::bigint FROM debits WHERE user_id = $1", &[&u.id])?.get(0);
            Ok((u, tokens, used))
        })
    }

    pub(crate) fn authenticate(&self, token: &str) -> Result<Option<User>, AccountsError> {
        self.with(|c| {
            Ok(c.query_opt(
                "SELECT u.id, u.name, u.credits, u.plan FROM tokens t JOIN users u ON u.id = t.user_id \
                 WHERE t.hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > $2) \
                 AND u.status = 'active'",
                &[&hash(token), &now()],
            )?
            .map(|r| user(&r)))
        })
    }

    /// Debits `amount` atomically, the month's allowance first (see `Accounts::charge`).
    pub(crate) fn charge(
        &self,
        user_id: i64,
        amount: i64,
        what: &str,
        plans: &Plans,
    ) -> Result<Result<i64, Insufficient>, AccountsError> {
        let at = now();
        let balances = |row: postgres::Row| -> (i64, i64) {
            let (credits, stored, month, plan): (i64, i64, Option<String>, Option<String>) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            (credits, allowance_left(plans, plan.as_deref(), stored, month.as_deref(), at))
        };
        self.with(|c| {
            let read = "SELECT credits, allowance, allowance_month, plan FROM users WHERE id = $1";
            if amount <= 0 {
                let (credits, allowance) = balances(c.query_one(read, &[&user_id])?);
                return Ok(Ok(credits + allowance));
            }
            let mut tx = c.transaction()?;
            // The row lock serialises concurrent charges of one user across replicas.
            let (credits, allowance) = balances(tx.query_one(&format!("{read} FOR UPDATE"), &[&user_id])?);
            if credits + allowance < amount {
                return Ok(Err(Insufficient { balance: credits + allowance }));
            }
            let from_allowance = amount.min(allowance);
            tx.execute(
                "UPDATE users SET allowance = $1, allowance_month = $2, credits = credits - $3 WHERE id = $4",
                &[&(allowance - from_allowance), &month_of(at), &(amount - from_allowance), &user_id],
            )?;
            tx.execute(
                "INSERT INTO debits (user_id, amount, at, what) VALUES ($1, $2, $3, $4)",
                &[&user_id, &amount, &at, &what],
            )?;
            tx.commit()?;
            Ok(Ok(credits + allowance - amount))
        })
    }

    pub(crate) fn rate_check(
        &self,
        user_id: i64,
        limit: u32,
        window: Duration,
    ) -> Result<Result<u32, u64>, AccountsError> {
        let seconds = window.as_secs_f64();
        self.with(|c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock(7734, $1::int)", &[&(user_id as i32)])?;
            tx.execute(
                "DELETE FROM rate_hits WHERE user_id = $1 AND at <= clock_timestamp() - make_interval(secs => $2)",
                &[&user_id, &seconds],
            )?;
            let row = tx.query_one(
                "SELECT count(*), coalesce(extract(epoch FROM min(at) + make_interval(secs => $2) - clock_timestamp()), 0)::float8 \
                 FROM rate_hits WHERE user_id = $1",
                &[&user_id, &seconds],
            )?;
            let (count, wait): (i64, f64) = (row.get(0), row.get(1));
            if count >= i64::from(limit) {
                return Ok(Err(wait.ceil().max(1.0) as u64));
            }
            tx.execute("INSERT INTO rate_hits (user_id, at) VALUES ($1, clock_timestamp())", &[&user_id])?;
            tx.commit()?;
            Ok(Ok(limit - count as u32 - 1))
        })
    }
}
