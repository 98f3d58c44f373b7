//! Watchlists in the Postgres store: each change in one transaction that first locks the user's
//! row (and reads their plan), so that replicas changing one user's lists at once check the cap
//! one after the other.

use postgres::{GenericClient, Transaction};

use super::{Checked, NewWatchlist, Saved, Watchlist, WatchlistChange, events_of, events_text};
use crate::postgres::Pg;
use crate::{AccountsError, now};

const COLUMNS: &str = "id, name, events, webhook_url, entries, revision, created_at, updated_at";

fn watchlist(r: &postgres::Row) -> Watchlist {
    Watchlist {
        id: r.get(0),
        name: r.get(1),
        events: events_of(r.get(2)),
        webhook_url: r.get(3),
        entries: r.get(4),
        revision: r.get(5),
        created_at: r.get(6),
        updated_at: r.get(7),
    }
}

fn find(c: &mut impl GenericClient, user_id: i64, id: i64) -> Result<Option<Watchlist>, AccountsError> {
    let sql = format!("SELECT {COLUMNS} FROM watchlists WHERE id = $1 AND user_id = $2");
    Ok(c.query_opt(&sql, &[&id, &user_id])?.map(|r| watchlist(&r)))
}

/// Locks the user's row for the rest of the transaction; their cap (by their plan, as it is now).
fn lock_user(tx: &mut Transaction<'_>, user_id: i64, entries: &Checked<'_>) -> Result<u64, AccountsError> {
    let plan: Option<String> =
        tx.query_opt("SELECT plan FROM users WHERE id = $1 FOR UPDATE", &[&user_id])?.and_then(|r| r.get(0));
    Ok(entries.cap(plan.as_deref()))
}

/// Adds and removes entries, recounts the list, and checks the user's cap.
fn apply(
    tx: &mut Transaction<'_>,
    user_id: i64,
    id: i64,
    entries: &Checked<'_>,
    cap: u64,
) -> Result<(), AccountsError> {
    tx.execute(
        "INSERT INTO watchlist_entries (watchlist_id, entry) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING",
        &[&id, &entries.add],
    )?;
    tx.execute("DELETE FROM watchlist_entries WHERE watchlist_id = $1 AND entry = ANY($2)", &[&id, &entries.remove])?;
    tx.execute(
        "UPDATE watchlists SET entries = (SELECT count(*) FROM watchlist_entries WHERE watchlist_id = $1) WHERE id = $1",
        &[&id],
    )?;
    let watched: i64 = tx
        .query_one("SELECT coalesce(sum(entries), 0)::bigint FROM watchlists WHERE user_id = $1", &[&user_id])?
        .get(0);
    if watched as u64 > cap {
        return Err(AccountsError::OverCap { cap, watched: watched as u64 });
    }
    Ok(())
}

impl Pg {
    pub(crate) fn create_watchlist(
        &self,
        user_id: i64,
        list: &NewWatchlist<'_>,
        entries: &Checked<'_>,
        secret: Option<String>,
    ) -> Result<Saved, AccountsError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            let cap = lock_user(&mut tx, user_id, entries)?;
            let at = now();
            let id: i64 = tx
                .query_one(
                    "INSERT INTO watchlists (user_id, name, events, webhook_url, webhook_secret, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING id",
                    &[&user_id, &list.name, &events_text(list.events), &list.webhook_url, &secret, &at],
                )?
                .get(0);
            apply(&mut tx, user_id, id, entries, cap)?;
            let watchlist = find(&mut tx, user_id, id)?.expect("inserted in this transaction");
            tx.commit()?;
            Ok(Saved { watchlist, webhook_secret: secret.clone() })
        })
    }

    pub(crate) fn watchlists(&self, user_id: i64) -> Result<Vec<Watchlist>, AccountsError> {
        self.with(|c| {
            let sql = format!("SELECT {COLUMNS} FROM watchlists WHERE user_id = $1 ORDER BY id");
            Ok(c.query(&sql, &[&user_id])?.iter().map(watchlist).collect())
        })
    }

    pub(crate) fn watchlist(
        &self,
        user_id: i64,
        id: i64,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<Option<(Watchlist, Vec<String>)>, AccountsError> {
        self.with(|c| {
            let Some(list) = find(c, user_id, id)? else { return Ok(None) };
            let limit = limit.map(|l| l.min(i64::MAX as u64) as i64);
            let rows = c.query(
                "SELECT entry FROM watchlist_entries WHERE watchlist_id = $1 ORDER BY entry COLLATE \"C\" \
                 LIMIT $2 OFFSET $3",
                &[&id, &limit, &(offset.min(i64::MAX as u64) as i64)],
            )?;
            Ok(Some((list, rows.iter().map(|r| r.get(0)).collect())))
        })
    }

    pub(crate) fn update_watchlist(
        &self,
        user_id: i64,
        id: i64,
        change: &WatchlistChange<'_>,
        entries: &Checked<'_>,
        secret: String,
    ) -> Result<Option<Saved>, AccountsError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            let cap = lock_user(&mut tx, user_id, entries)?;
            let Some(before) = find(&mut tx, user_id, id)? else { return Ok(None) };
            let has_secret: bool =
                tx.query_one("SELECT webhook_secret IS NOT NULL FROM watchlists WHERE id = $1", &[&id])?.get(0);
            let url = change.webhook_url.unwrap_or(before.webhook_url.as_deref());
            let new_secret = (url.is_some() && (change.rotate_secret || !has_secret)).then(|| secret.clone());
            tx.execute(
                "UPDATE watchlists SET name = $2, events = $3, webhook_url = $4, \
                 webhook_secret = CASE WHEN $4::text IS NULL THEN NULL ELSE coalesce($5, webhook_secret) END, \
                 revision = revision + 1, updated_at = $6 WHERE id = $1",
                &[
                    &id,
                    &change.name.unwrap_or(&before.name),
                    &events_text(change.events.unwrap_or(&before.events)),
                    &url,
                    &new_secret,
                    &now(),
                ],
            )?;
            apply(&mut tx, user_id, id, entries, cap)?;
            let watchlist = find(&mut tx, user_id, id)?.expect("found in this transaction");
            tx.commit()?;
            Ok(Some(Saved { watchlist, webhook_secret: new_secret }))
        })
    }

    pub(crate) fn delete_watchlist(&self, user_id: i64, id: i64) -> Result<bool, AccountsError> {
        self.with(|c| {
            let deleted = c.execute("DELETE FROM watchlists WHERE id = $1 AND user_id = $2", &[&id, &user_id])?;
            Ok(deleted > 0)
        })
    }
}
