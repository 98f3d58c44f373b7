//! Watchlists in the SQLite store: each change in one `BEGIN IMMEDIATE` transaction, so that the
//! cap of the user's plan is checked against every list of the user as it is.

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::{Checked, NewWatchlist, Saved, Watchlist, WatchlistChange, events_of, events_text};
use crate::sqlite::Sqlite;
use crate::{AccountsError, now};

const COLUMNS: &str = "id, name, events, webhook_url, entries, revision, created_at, updated_at";

fn watchlist(r: &rusqlite::Row<'_>) -> rusqlite::Result<Watchlist> {
    Ok(Watchlist {
        id: r.get(0)?,
        name: r.get(1)?,
        events: events_of(&r.get::<_, String>(2)?),
        webhook_url: r.get(3)?,
        entries: r.get(4)?,
        revision: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

fn find(conn: &Connection, user_id: i64, id: i64) -> Result<Option<Watchlist>, AccountsError> {
    let sql = format!("SELECT {COLUMNS} FROM watchlists WHERE id = ?1 AND user_id = ?2");
    Ok(conn.query_row(&sql, params![id, user_id], watchlist).optional()?)
}

/// Adds and removes entries, recounts the list, and checks the user's cap.
fn apply(tx: &Transaction<'_>, user_id: i64, id: i64, entries: &Checked<'_>) -> Result<(), AccountsError> {
    let mut insert =
        tx.prepare_cached("INSERT OR IGNORE INTO watchlist_entries (watchlist_id, entry) VALUES (?1, ?2)")?;
    for key in &entries.add {
        insert.execute(params![id, key])?;
    }
    let mut delete = tx.prepare_cached("DELETE FROM watchlist_entries WHERE watchlist_id = ?1 AND entry = ?2")?;
    for key in &entries.remove {
        delete.execute(params![id, key])?;
    }
    tx.execute(
        "UPDATE watchlists SET entries = (SELECT count(*) FROM watchlist_entries WHERE watchlist_id = ?1) WHERE id = ?1",
        [id],
    )?;
    let (watched, plan): (i64, Option<String>) = tx.query_row(
        "SELECT (SELECT coalesce(sum(entries), 0) FROM watchlists WHERE user_id = ?1), \
         (SELECT plan FROM users WHERE id = ?1)",
        [user_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let cap = entries.cap(plan.as_deref());
    if watched as u64 > cap {
        return Err(AccountsError::OverCap { cap, watched: watched as u64 });
    }
    Ok(())
}

impl Sqlite {
    pub(crate) fn create_watchlist(
        &self,
        user_id: i64,
        list: &NewWatchlist<'_>,
        entries: &Checked<'_>,
        secret: Option<String>,
    ) -> Result<Saved, AccountsError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let at = now();
        tx.execute(
            "INSERT INTO watchlists (user_id, name, events, webhook_url, webhook_secret, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
            params![user_id, list.name, events_text(list.events), list.webhook_url, secret, at],
        )?;
        let id = tx.last_insert_rowid();
        apply(&tx, user_id, id, entries)?;
        let watchlist = find(&tx, user_id, id)?.expect("inserted in this transaction");
        tx.commit()?;
        Ok(Saved { watchlist, webhook_secret: secret })
    }

    pub(crate) fn watchlists(&self, user_id: i64) -> Result<Vec<Watchlist>, AccountsError> {
        let conn = self.conn();
        let sql = format!("SELECT {COLUMNS} FROM watchlists WHERE user_id = ?1 ORDER BY id");
        let mut stmt = conn.prepare(&sql)?;
        Ok(stmt.query_map([user_id], watchlist)?.collect::<Result<_, _>>()?)
    }

    pub(crate) fn watchlist(
        &self,
        user_id: i64,
        id: i64,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<Option<(Watchlist, Vec<String>)>, AccountsError> {
        let conn = self.conn();
        let Some(list) = find(&conn, user_id, id)? else { return Ok(None) };
        let limit = limit.map_or(-1, |l| l.min(i64::MAX as u64) as i64);
        let mut stmt = conn.prepare_cached(
            "SELECT entry FROM watchlist_entries WHERE watchlist_id = ?1 ORDER BY entry LIMIT ?2 OFFSET ?3",
        )?;
        let entries = stmt
            .query_map(params![id, limit, offset.min(i64::MAX as u64) as i64], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(Some((list, entries)))
    }

    pub(crate) fn update_watchlist(
        &self,
        user_id: i64,
        id: i64,
        change: &WatchlistChange<'_>,
        entries: &Checked<'_>,
        secret: String,
    ) -> Result<Option<Saved>, AccountsError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let Some(before) = find(&tx, user_id, id)? else { return Ok(None) };
        let has_secret: bool =
            tx.query_row("SELECT webhook_secret IS NOT NULL FROM watchlists WHERE id = ?1", [id], |r| r.get(0))?;
        let url = change.webhook_url.unwrap_or(before.webhook_url.as_deref());
        let new_secret = (url.is_some() && (change.rotate_secret || !has_secret)).then_some(secret);
        tx.execute(
            "UPDATE watchlists SET name = ?2, events = ?3, webhook_url = ?4, \
             webhook_secret = CASE WHEN ?4 IS NULL THEN NULL ELSE coalesce(?5, webhook_secret) END, \
             revision = revision + 1, updated_at = ?6 WHERE id = ?1",
            params![
                id,
                change.name.unwrap_or(&before.name),
                events_text(change.events.unwrap_or(&before.events)),
                url,
                new_secret,
                now()
            ],
        )?;
        apply(&tx, user_id, id, entries)?;
        let watchlist = find(&tx, user_id, id)?.expect("found in this transaction");
        tx.commit()?;
        Ok(Some(Saved { watchlist, webhook_secret: new_secret }))
    }

    pub(crate) fn delete_watchlist(&self, user_id: i64, id: i64) -> Result<bool, AccountsError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if find(&tx, user_id, id)?.is_none() {
            return Ok(false);
        }
        tx.execute("DELETE FROM watchlist_entries WHERE watchlist_id = ?1", [id])?;
        tx.execute("DELETE FROM deliveries WHERE watchlist_id = ?1", [id])?;
        tx.execute("DELETE FROM watchlists WHERE id = ?1", [id])?;
        tx.commit()?;
        Ok(true)
    }
}
