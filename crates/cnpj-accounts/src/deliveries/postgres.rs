//! Deliveries in the Postgres store, shared by replicas: a claim takes due rows with `FOR UPDATE
//! SKIP LOCKED` and leases them in the same statement, so that two replicas never take one row.

use postgres::GenericClient;

use super::{Attempt, Delivery, Due, delivery_id};
use crate::postgres::Pg;
use crate::{AccountsError, Watchlist};

const COLUMNS: &str = "d.id, d.watchlist_id, d.user_id, d.month, d.page, d.pages, d.status, d.attempts, \
     d.next_attempt_at, d.last_error, d.created_at, d.delivered_at";

fn delivery(r: &postgres::Row) -> Delivery {
    Delivery {
        id: r.get(0),
        watchlist_id: r.get(1),
        user_id: r.get(2),
        month: r.get(3),
        page: r.get(4),
        pages: r.get(5),
        status: r.get(6),
        attempts: r.get(7),
        next_attempt_at: r.get(8),
        last_error: r.get(9),
        created_at: r.get(10),
        delivered_at: r.get(11),
    }
}

fn mine(c: &mut impl GenericClient, user_id: i64, watchlist_id: i64) -> Result<bool, AccountsError> {
    let sql = "SELECT 1 FROM watchlists WHERE id = $1 AND user_id = $2";
    Ok(c.query_opt(sql, &[&watchlist_id, &user_id])?.is_some())
}

impl Pg {
    pub(crate) fn every_watchlist(&self) -> Result<Vec<(i64, Watchlist)>, AccountsError> {
        let lists = self.with(|c| {
            let rows = c.query("SELECT user_id, id FROM watchlists ORDER BY id", &[])?;
            Ok(rows.iter().map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1))).collect::<Vec<_>>())
        })?;
        let mut out = Vec::with_capacity(lists.len());
        for (user, id) in lists {
            if let Some((list, _)) = self.watchlist(user, id, 0, Some(0))? {
                out.push((user, list));
            }
        }
        Ok(out)
    }

    pub(crate) fn has_deliveries(&self, watchlist_id: i64, month: &str) -> Result<bool, AccountsError> {
        self.with(|c| {
            let sql = "SELECT EXISTS (SELECT 1 FROM deliveries WHERE watchlist_id = $1 AND month = $2)";
            Ok(c.query_one(sql, &[&watchlist_id, &month])?.get(0))
        })
    }

    pub(crate) fn enqueue(
        &self,
        user_id: i64,
        watchlist_id: i64,
        month: &str,
        bodies: &[String],
        now: i64,
    ) -> Result<(), AccountsError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            let insert = tx.prepare(
                "INSERT INTO deliveries (id, watchlist_id, user_id, month, page, pages, body, status, \
                 next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $8) \
                 ON CONFLICT (id) DO NOTHING",
            )?;
            for (i, body) in bodies.iter().enumerate() {
                let page = i as i64 + 1;
                let id = delivery_id(watchlist_id, month, page);
                let pages = bodies.len() as i64;
                tx.execute(&insert, &[&id, &watchlist_id, &user_id, &month, &page, &pages, body, &now])?;
            }
            Ok(tx.commit()?)
        })
    }

    pub(crate) fn claim_deliveries(&self, now: i64, lease: i64, limit: i64) -> Result<Vec<Due>, AccountsError> {
        self.with(|c| {
            let sql = format!(
                "UPDATE deliveries d SET lease_until = $3 FROM watchlists w \
                 WHERE w.id = d.watchlist_id AND d.id IN (SELECT id FROM deliveries \
                   WHERE status IN ('pending', 'waiting_credits') AND next_attempt_at <= $1 AND lease_until < $1 \
                   ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) \
                 RETURNING {COLUMNS}, w.webhook_url, coalesce(w.webhook_secret, ''), d.body"
            );
            let rows = c.query(&sql, &[&now, &limit, &(now + lease)])?;
            Ok(rows
                .iter()
                .map(|r| Due { delivery: delivery(r), url: r.get(12), secret: r.get(13), body: r.get(14) })
                .collect())
        })
    }

    pub(crate) fn finish_delivery(&self, id: &str, attempt: &Attempt, now: i64) -> Result<(), AccountsError> {
        let (status, tried, next, error, delivered): (&str, i64, i64, Option<&str>, Option<i64>) = match attempt {
            Attempt::Delivered => ("delivered", 1, now, None, Some(now)),
            Attempt::Retry { error, next_at } => ("pending", 1, *next_at, Some(error.as_str()), None),
            Attempt::Failed { error } => ("failed", 1, now, Some(error.as_str()), None),
            Attempt::WaitingCredits { next_at } => ("waiting_credits", 0, *next_at, None, None),
        };
        self.with(|c| {
            c.execute(
                "UPDATE deliveries SET status = $2, attempts = attempts + $3, next_attempt_at = $4, \
                 last_error = coalesce($5, last_error), delivered_at = $6, lease_until = 0 WHERE id = $1",
                &[&id, &status, &tried, &next, &error, &delivered],
            )?;
            Ok(())
        })
    }

    pub(crate) fn deliveries(
        &self,
        user_id: i64,
        watchlist_id: i64,
        offset: u64,
        limit: u64,
    ) -> Result<Option<(u64, Vec<Delivery>)>, AccountsError> {
        self.with(|c| {
            if !mine(c, user_id, watchlist_id)? {
                return Ok(None);
            }
            let total: i64 =
                c.query_one("SELECT count(*) FROM deliveries WHERE watchlist_id = $1", &[&watchlist_id])?.get(0);
            let sql = format!(
                "SELECT {COLUMNS} FROM deliveries d WHERE d.watchlist_id = $1 \
                 ORDER BY d.month COLLATE \"C\" DESC, d.page LIMIT $2 OFFSET $3"
            );
            let (limit, offset) = (limit.min(i64::MAX as u64) as i64, offset.min(i64::MAX as u64) as i64);
            let page = c.query(&sql, &[&watchlist_id, &limit, &offset])?.iter().map(delivery).collect();
            Ok(Some((total as u64, page)))
        })
    }

    pub(crate) fn retry_delivery(
        &self,
        user_id: i64,
        watchlist_id: i64,
        id: &str,
        now: i64,
    ) -> Result<Option<Delivery>, AccountsError> {
        self.with(|c| {
            let sql = format!(
                "UPDATE deliveries d SET status = 'pending', next_attempt_at = $4, created_at = $4, lease_until = 0 \
                 WHERE id = $1 AND watchlist_id = $2 AND user_id = $3 RETURNING {COLUMNS}"
            );
            Ok(c.query_opt(&sql, &[&id, &watchlist_id, &user_id, &now])?.map(|r| delivery(&r)))
        })
    }
}
