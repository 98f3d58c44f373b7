//! Deliveries in the SQLite store (one process sends them: a claim is one `BEGIN IMMEDIATE`
//! transaction all the same).

use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::{Attempt, Delivery, Due, delivery_id};
use crate::sqlite::Sqlite;
use crate::{AccountsError, Watchlist};

const COLUMNS: &str = "d.id, d.watchlist_id, d.user_id, d.month, d.page, d.pages, d.status, d.attempts, \
     d.next_attempt_at, d.last_error, d.created_at, d.delivered_at";

fn delivery(r: &rusqlite::Row<'_>) -> rusqlite::Result<Delivery> {
    Ok(Delivery {
        id: r.get(0)?,
        watchlist_id: r.get(1)?,
        user_id: r.get(2)?,
        month: r.get(3)?,
        page: r.get(4)?,
        pages: r.get(5)?,
        status: r.get(6)?,
        attempts: r.get(7)?,
        next_attempt_at: r.get(8)?,
        last_error: r.get(9)?,
        created_at: r.get(10)?,
        delivered_at: r.get(11)?,
    })
}

impl Sqlite {
    pub(crate) fn every_watchlist(&self) -> Result<Vec<(i64, Watchlist)>, AccountsError> {
        let lists = {
            let conn = self.conn();
            let mut stmt = conn.prepare("SELECT user_id, id FROM watchlists ORDER BY id")?;
            stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?.collect::<Result<Vec<_>, _>>()?
        };
        let mut out = Vec::with_capacity(lists.len());
        for (user, id) in lists {
            if let Some((list, _)) = self.watchlist(user, id, 0, Some(0))? {
                out.push((user, list));
            }
        }
        Ok(out)
    }

    pub(crate) fn has_deliveries(&self, watchlist_id: i64, month: &str) -> Result<bool, AccountsError> {
        let sql = "SELECT EXISTS (SELECT 1 FROM deliveries WHERE watchlist_id = ?1 AND month = ?2)";
        Ok(self.conn().query_row(sql, params![watchlist_id, month], |r| r.get(0))?)
    }

    pub(crate) fn enqueue(
        &self,
        user_id: i64,
        watchlist_id: i64,
        month: &str,
        bodies: &[String],
        now: i64,
    ) -> Result<(), AccountsError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut insert = tx.prepare_cached(
                "INSERT OR IGNORE INTO deliveries (id, watchlist_id, user_id, month, page, pages, body, status, \
                 next_attempt_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending', ?8, ?8)",
            )?;
            for (i, body) in bodies.iter().enumerate() {
                let page = i as i64 + 1;
                let id = delivery_id(watchlist_id, month, page);
                insert.execute(params![id, watchlist_id, user_id, month, page, bodies.len() as i64, body, now])?;
            }
        }
        Ok(tx.commit()?)
    }

    pub(crate) fn claim_deliveries(&self, now: i64, lease: i64, limit: i64) -> Result<Vec<Due>, AccountsError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let due = {
            let sql = format!(
                "SELECT {COLUMNS}, w.webhook_url, coalesce(w.webhook_secret, ''), d.body FROM deliveries d \
                 JOIN watchlists w ON w.id = d.watchlist_id \
                 WHERE d.status IN ('pending', 'waiting_credits') AND d.next_attempt_at <= ?1 AND d.lease_until < ?1 \
                 ORDER BY d.next_attempt_at, d.id LIMIT ?2"
            );
            let mut stmt = tx.prepare(&sql)?;
            let rows = stmt.query_map(params![now, limit], |r| {
                Ok(Due { delivery: delivery(r)?, url: r.get(12)?, secret: r.get(13)?, body: r.get(14)? })
            })?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        for d in &due {
            tx.execute("UPDATE deliveries SET lease_until = ?2 WHERE id = ?1", params![d.delivery.id, now + lease])?;
        }
        tx.commit()?;
        Ok(due)
    }

    pub(crate) fn finish_delivery(&self, id: &str, attempt: &Attempt, now: i64) -> Result<(), AccountsError> {
        let (status, tried, next, error, delivered) = match attempt {
            Attempt::Delivered => ("delivered", 1, now, None, Some(now)),
            Attempt::Retry { error, next_at } => ("pending", 1, *next_at, Some(error.as_str()), None),
            Attempt::Failed { error } => ("failed", 1, now, Some(error.as_str()), None),
            Attempt::WaitingCredits { next_at } => ("waiting_credits", 0, *next_at, None, None),
        };
        self.conn().execute(
            "UPDATE deliveries SET status = ?2, attempts = attempts + ?3, next_attempt_at = ?4, \
             last_error = coalesce(?5, last_error), delivered_at = ?6, lease_until = 0 WHERE id = ?1",
            params![id, status, tried, next, error, delivered],
        )?;
        Ok(())
    }

    pub(crate) fn deliveries(
        &self,
        user_id: i64,
        watchlist_id: i64,
        offset: u64,
        limit: u64,
    ) -> Result<Option<(u64, Vec<Delivery>)>, AccountsError> {
        let conn = self.conn();
        let mine = "SELECT 1 FROM watchlists WHERE id = ?1 AND user_id = ?2";
        if conn.query_row(mine, params![watchlist_id, user_id], |_| Ok(())).optional()?.is_none() {
            return Ok(None);
        }
        let total: i64 =
            conn.query_row("SELECT count(*) FROM deliveries WHERE watchlist_id = ?1", [watchlist_id], |r| r.get(0))?;
        let sql = format!(
            "SELECT {COLUMNS} FROM deliveries d WHERE d.watchlist_id = ?1 ORDER BY d.month DESC, d.page LIMIT ?2 OFFSET ?3"
        );
        let mut stmt = conn.prepare(&sql)?;
        let page = stmt
            .query_map(
                params![watchlist_id, limit.min(i64::MAX as u64) as i64, offset.min(i64::MAX as u64) as i64],
                delivery,
            )?
            .collect::<Result<_, _>>()?;
        Ok(Some((total as u64, page)))
    }

    pub(crate) fn retry_delivery(
        &self,
        user_id: i64,
        watchlist_id: i64,
        id: &str,
        now: i64,
    ) -> Result<Option<Delivery>, AccountsError> {
        let conn = self.conn();
        let changed = conn.execute(
            "UPDATE deliveries SET status = 'pending', next_attempt_at = ?4, created_at = ?4, lease_until = 0 \
             WHERE id = ?1 AND watchlist_id = ?2 AND user_id = ?3",
            params![id, watchlist_id, user_id, now],
        )?;
        if changed == 0 {
            return Ok(None);
        }
        let sql = format!("SELECT {COLUMNS} FROM deliveries d WHERE d.id = ?1");
        Ok(conn.query_row(&sql, [id], delivery).optional()?)
    }
}
