//! Export jobs (contract §15), kept in the accounts store so that every replica sees them: a
//! search's whole result written to a file by one process. A job is accepted with its credits held
//! in the same transaction (the user's balances debited, the ledger written, the job inserted:
//! all or nothing); it is then claimed under a lease by one runner at a time (`claim_export`:
//! claims are serialised, by SQLite's `BEGIN IMMEDIATE` or a Postgres advisory lock, so that a
//! user has one job running at once over all replicas); a runner that dies leaves a lease that
//! runs out, and the job is claimed again (never charged again). A failed job gives its credits
//! back, once (`refunded`), and its hold leaves the ledger (which holds debits only). Written once in `$n` SQL for both backends.

use crate::sql::{Row, Val};
use crate::{Accounts, AccountsError, Insufficient, allowance_left, month_of, now};

/// The attempts a job gets: one claimed a third time after its runner died fails (and refunds).
pub const EXPORT_ATTEMPTS: i64 = 3;

/// A job as its owner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportJob {
    pub id: String,
    pub user_id: i64,
    /// The search's parameters, a JSON object of strings.
    pub filters: String,
    pub format: String,
    pub locale: String,
    pub build_id: String,
    /// `queued`, `running`, `done`, `failed` or `expired`.
    pub status: String,
    pub rows: i64,
    pub rows_written: i64,
    pub credits: i64,
    pub attempts: i64,
    pub file: Option<String>,
    pub bytes: Option<i64>,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub expires_at: Option<i64>,
}

/// A job to accept.
#[derive(Clone, Debug)]
pub struct NewExport<'a> {
    pub user_id: i64,
    pub filters: &'a str,
    pub format: &'a str,
    pub locale: &'a str,
    pub build_id: &'a str,
    pub rows: i64,
    pub credits: i64,
}

const COLUMNS: &str = "id, user_id, filters, format, locale, build_id, status, rows, rows_written, credits, \
     attempts, file, bytes, error, created_at, started_at, finished_at, expires_at";

fn job(r: &Row) -> ExportJob {
    ExportJob {
        id: r.text(0),
        user_id: r.int(1),
        filters: r.text(2),
        format: r.text(3),
        locale: r.text(4),
        build_id: r.text(5),
        status: r.text(6),
        rows: r.int(7),
        rows_written: r.int(8),
        credits: r.int(9),
        attempts: r.int(10),
        file: r.opt_text(11),
        bytes: r.opt_int(12),
        error: r.opt_text(13),
        created_at: r.int(14),
        started_at: r.opt_int(15),
        finished_at: r.opt_int(16),
        expires_at: r.opt_int(17),
    }
}

/// 16 random bytes, hex.
fn new_id() -> Result<String, AccountsError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| AccountsError::Random(e.to_string()))?;
    Ok(hex::encode(bytes))
}

impl Accounts {
    /// Accepts a job: its credits held (the month's allowance first, as a charge takes them, and
    /// written in the ledger as `export`) and the job queued, in one transaction; `Ok(Err(_))`
    /// when the balances are short, and then nothing is held nor queued.
    pub fn create_export(&self, new: &NewExport<'_>) -> Result<Result<ExportJob, Insufficient>, AccountsError> {
        let id = new_id()?;
        let lock = if self.is_shared() { " FOR UPDATE" } else { "" };
        self.tx(|db| {
            let at = now();
            let read = format!("SELECT credits, allowance, allowance_month, plan FROM users WHERE id = $1{lock}");
            let Some(user) = db.row(&read, &[new.user_id.into()])? else {
                return Err(AccountsError::UnknownUser(new.user_id.to_string()));
            };
            let (credits, plan) = (user.int(0), user.opt_text(3));
            let allowance = allowance_left(&self.plans, plan.as_deref(), user.int(1), user.opt_text(2).as_deref(), at);
            if credits + allowance < new.credits {
                return Ok(Err(Insufficient { balance: credits + allowance }));
            }
            let from_allowance = new.credits.min(allowance);
            let month = month_of(at);
            db.run(
                "UPDATE users SET allowance = $1, allowance_month = $2, credits = credits - $3 WHERE id = $4",
                &[
                    (allowance - from_allowance).into(),
                    month.as_str().into(),
                    (new.credits - from_allowance).into(),
                    new.user_id.into(),
                ],
            )?;
            let debit = if new.credits > 0 {
                let sql = "INSERT INTO debits (user_id, amount, at, what) VALUES ($1, $2, $3, 'export') RETURNING id";
                db.row(sql, &[new.user_id.into(), new.credits.into(), at.into()])?.map(|r| r.int(0))
            } else {
                None
            };
            db.run(
                "INSERT INTO exports (id, user_id, filters, format, locale, build_id, status, rows, credits, \
                 held_allowance, held_credits, held_month, created_at, debit_id, seq) \
                 VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8, $9, $10, $11, $12, $13, \
                 (SELECT coalesce(max(seq), 0) + 1 FROM exports))",
                &[
                    id.as_str().into(),
                    new.user_id.into(),
                    new.filters.into(),
                    new.format.into(),
                    new.locale.into(),
                    new.build_id.into(),
                    new.rows.into(),
                    new.credits.into(),
                    from_allowance.into(),
                    (new.credits - from_allowance).into(),
                    month.as_str().into(),
                    at.into(),
                    debit.into(),
                ],
            )?;
            let row = db.row(&format!("SELECT {COLUMNS} FROM exports WHERE id = $1"), &[id.as_str().into()])?;
            Ok(Ok(job(&row.expect("the job was inserted"))))
        })
    }

    /// One of the user's jobs (`None`: no such job, or another user's).
    pub fn export(&self, user_id: i64, id: &str) -> Result<Option<ExportJob>, AccountsError> {
        self.tx(|db| {
            let sql = format!("SELECT {COLUMNS} FROM exports WHERE id = $1 AND user_id = $2");
            Ok(db.row(&sql, &[id.into(), user_id.into()])?.as_ref().map(job))
        })
    }

    /// The user's last `limit` jobs, newest first.
    pub fn exports(&self, user_id: i64, limit: i64) -> Result<Vec<ExportJob>, AccountsError> {
        self.tx(|db| {
            let sql = format!("SELECT {COLUMNS} FROM exports WHERE user_id = $1 ORDER BY created_at DESC, id LIMIT $2");
            Ok(db.rows(&sql, &[user_id.into(), limit.into()])?.iter().map(job).collect())
        })
    }

    /// Claims the oldest job that may run now for `owner`, leased until `now + lease`: a queued
    /// one, or a running one whose lease ran out (its runner died), of a user with no other job
    /// running (unexpired) and not in `busy` (users this process runs a job of). A job claimed
    /// past its [`EXPORT_ATTEMPTS`] fails instead (refunded) and the next is looked at.
    pub fn claim_export(&self, owner: &str, lease: i64, busy: &[i64]) -> Result<Option<ExportJob>, AccountsError> {
        loop {
            let claimed = self.tx(|db| {
                if self.is_shared() {
                    // Claims one at a time over all replicas: a user's running job is then seen.
                    db.run("SELECT pg_advisory_xact_lock(7736)", &[])?;
                }
                let at = now();
                let busy_users: String = busy.iter().map(|u| format!(" AND user_id <> {u}")).collect();
                let pick = format!(
                    "SELECT id, attempts FROM exports WHERE (status = 'queued' OR (status = 'running' AND lease_until < $1)) \
                     AND user_id NOT IN (SELECT user_id FROM exports WHERE status = 'running' AND lease_until >= $1){busy_users} \
                     ORDER BY seq, id LIMIT 1"
                );
                let Some(row) = db.row(&pick, &[at.into()])? else { return Ok(None) };
                let (id, attempts) = (row.text(0), row.int(1));
                if attempts >= EXPORT_ATTEMPTS {
                    return Ok(Some(Err(id)));
                }
                db.run(
                    "UPDATE exports SET status = 'running', lease_owner = $2, lease_until = $3, attempts = attempts + 1, \
                     rows_written = 0, started_at = coalesce(started_at, $4) WHERE id = $1",
                    &[id.as_str().into(), owner.into(), (at + lease).into(), at.into()],
                )?;
                let row = db.row(&format!("SELECT {COLUMNS} FROM exports WHERE id = $1"), &[id.as_str().into()])?;
                Ok(row.as_ref().map(|r| Ok(job(r))))
            })?;
            match claimed {
                None => return Ok(None),
                Some(Ok(job)) => return Ok(Some(job)),
                Some(Err(id)) => {
                    let error = "The job was interrupted too often.";
                    self.fail_export(&id, None, error)?;
                }
            }
        }
    }

    /// Extends the lease of a job `owner` runs, with its progress; false when the job is no longer
    /// `owner`'s (its lease ran out and another process claimed it): the caller stops.
    pub fn renew_export(&self, id: &str, owner: &str, lease: i64, rows_written: i64) -> Result<bool, AccountsError> {
        self.tx(|db| {
            let changed = db.run(
                "UPDATE exports SET lease_until = $3, rows_written = $4 \
                 WHERE id = $1 AND lease_owner = $2 AND status = 'running'",
                &[id.into(), owner.into(), (now() + lease).into(), rows_written.into()],
            )?;
            Ok(changed == 1)
        })
    }

    /// Marks a job `owner` ran done: its file, the rows written, when it expires. False when the
    /// job is no longer `owner`'s (nothing changed: the file is not the job's).
    pub fn finish_export(
        &self,
        id: &str,
        owner: &str,
        file: &str,
        bytes: i64,
        rows_written: i64,
        ttl: i64,
    ) -> Result<bool, AccountsError> {
        self.tx(|db| {
            let at = now();
            let changed = db.run(
                "UPDATE exports SET status = 'done', file = $3, bytes = $4, rows_written = $5, finished_at = $6, \
                 expires_at = $7, lease_until = 0, error = NULL WHERE id = $1 AND lease_owner = $2 AND status = 'running'",
                &[id.into(), owner.into(), file.into(), bytes.into(), rows_written.into(), at.into(), (at + ttl).into()],
            )?;
            Ok(changed == 1)
        })
    }

    /// Fails a job (of `owner` when given, else whoever held it) and gives its held credits back,
    /// once: to the month's allowance what came from it while that month lasts, the rest to the
    /// credits; the hold's row leaves the ledger. False when the job had ended already.
    pub fn fail_export(&self, id: &str, owner: Option<&str>, error: &str) -> Result<bool, AccountsError> {
        self.tx(|db| {
            let at = now();
            let owned = if owner.is_some() { " AND lease_owner = $4" } else { "" };
            let mut params: Vec<Val> = vec![id.into(), error.into(), at.into()];
            params.extend(owner.map(Val::from));
            let changed = db.run(
                &format!(
                    "UPDATE exports SET status = 'failed', error = $2, finished_at = $3, lease_until = 0, refunded = 1 \
                     WHERE id = $1 AND refunded = 0 AND status IN ('queued', 'running'){owned}"
                ),
                &params,
            )?;
            if changed == 0 {
                return Ok(false);
            }
            let sql = "SELECT user_id, held_allowance, held_credits, held_month, debit_id FROM exports WHERE id = $1";
            let held = db.row(sql, &[id.into()])?.expect("the job was just updated");
            let (user, from_allowance, from_credits, month, debit) =
                (held.int(0), held.int(1), held.int(2), held.text(3), held.opt_int(4));
            db.run(
                "UPDATE users SET allowance = allowance + CASE WHEN allowance_month = $2 THEN CAST($3 AS BIGINT) ELSE 0 END, \
                 credits = credits + CAST($4 AS BIGINT) + CASE WHEN allowance_month = $2 THEN 0 ELSE CAST($3 AS BIGINT) END \
                 WHERE id = $1",
                &[user.into(), month.as_str().into(), from_allowance.into(), from_credits.into()],
            )?;
            if let Some(debit) = debit {
                db.run("DELETE FROM debits WHERE id = $1", &[debit.into()])?;
            }
            Ok(true)
        })
    }

    /// The jobs done whose files expired by `at`: marked `expired`; their files' names, for the
    /// caller to delete.
    pub fn expire_exports(&self, at: i64) -> Result<Vec<String>, AccountsError> {
        self.tx(|db| {
            let rows = db.rows(
                "SELECT id, file FROM exports WHERE status = 'done' AND expires_at <= $1 ORDER BY id",
                &[at.into()],
            )?;
            for row in &rows {
                db.run("UPDATE exports SET status = 'expired' WHERE id = $1", &[row.text(0).into()])?;
            }
            Ok(rows.iter().filter_map(|r| r.opt_text(1)).collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Plans;

    fn store() -> (tempfile::TempDir, Accounts) {
        let dir = tempfile::tempdir().unwrap();
        let plans = Plans::parse("default = \"free\"\n[plans.free]\nmonthly_allowance = 5\n").unwrap();
        let accounts = Accounts::open(&dir.path().join("accounts.sqlite")).unwrap().with_plans(plans);
        (dir, accounts)
    }

    fn new(user_id: i64, credits: i64) -> NewExport<'static> {
        NewExport { user_id, filters: "{}", format: "csv", locale: "en", build_id: "b", rows: credits, credits }
    }

    fn balance(a: &Accounts, id: i64) -> i64 {
        let p = a.person(id).unwrap().unwrap();
        a.allowance_left(&p) + p.credits
    }

    #[test]
    fn a_job_holds_its_credits_or_nothing() {
        let (_dir, a) = store();
        let ana = a.create_user("ana", 10).unwrap();
        assert_eq!(a.create_export(&new(ana.id, 16)).unwrap(), Err(Insufficient { balance: 15 }));
        assert!(a.exports(ana.id, 10).unwrap().is_empty(), "nothing queued");
        let job = a.create_export(&new(ana.id, 12)).unwrap().unwrap();
        assert_eq!((job.status.as_str(), job.rows, job.credits, job.id.len()), ("queued", 12, 12, 32));
        assert_eq!(balance(&a, ana.id), 3);
        assert_eq!(a.ledger(ana.id, 10).unwrap()[0].what, "export");
        assert_eq!(a.export(ana.id, &job.id).unwrap(), Some(job.clone()));
        assert_eq!(a.export(ana.id + 1, &job.id).unwrap(), None, "another user's");
    }

    #[test]
    fn a_failed_job_refunds_once_where_the_credits_came_from() {
        let (dir, a) = store();
        let ana = a.create_user("ana", 10).unwrap();
        let job = a.create_export(&new(ana.id, 12)).unwrap().unwrap();
        let claimed = a.claim_export("me", 60, &[]).unwrap().unwrap();
        assert_eq!((claimed.id.as_str(), claimed.status.as_str(), claimed.attempts), (job.id.as_str(), "running", 1));
        assert!(!a.fail_export(&job.id, Some("another"), "x").unwrap(), "not the other's to fail");
        assert!(a.fail_export(&job.id, Some("me"), "broken").unwrap());
        assert!(!a.fail_export(&job.id, None, "again").unwrap(), "once");
        let p = a.person(ana.id).unwrap().unwrap();
        assert_eq!((a.allowance_left(&p), p.credits), (5, 10));
        assert!(a.ledger(ana.id, 10).unwrap().is_empty(), "the hold left the ledger");
        let failed = a.export(ana.id, &job.id).unwrap().unwrap();
        assert_eq!((failed.status.as_str(), failed.error.as_deref()), ("failed", Some("broken")));
        // Held in an earlier month: the allowance's part goes to the credits.
        let job = a.create_export(&new(ana.id, 7)).unwrap().unwrap();
        let conn = rusqlite::Connection::open(dir.path().join("accounts.sqlite")).unwrap();
        conn.execute_batch("UPDATE exports SET held_month = '2000-01'").unwrap();
        assert!(a.fail_export(&job.id, None, "x").unwrap());
        let p = a.person(ana.id).unwrap().unwrap();
        assert_eq!((a.allowance_left(&p), p.credits), (0, 15));
    }

    #[test]
    fn claims_one_job_per_user_and_again_once_a_lease_ran_out() {
        let (dir, a) = store();
        let (ana, bia) = (a.create_user("ana", 100).unwrap(), a.create_user("bia", 100).unwrap());
        let first = a.create_export(&new(ana.id, 1)).unwrap().unwrap();
        let second = a.create_export(&new(ana.id, 1)).unwrap().unwrap();
        let third = a.create_export(&new(bia.id, 1)).unwrap().unwrap();
        assert_eq!(a.claim_export("p1", 60, &[]).unwrap().map(|j| j.id), Some(first.id.clone()));
        assert_eq!(a.claim_export("p2", 60, &[]).unwrap().map(|j| j.id), Some(third.id.clone()), "ana waits");
        assert_eq!(a.claim_export("p2", 60, &[]).unwrap(), None);
        assert!(a.renew_export(&first.id, "p1", 60, 1).unwrap());
        assert!(a.finish_export(&first.id, "p1", "f.csv", 10, 1, 3600).unwrap());
        assert_eq!(a.claim_export("p1", 60, &[ana.id]).unwrap(), None, "busy here");
        assert_eq!(a.claim_export("p1", 60, &[]).unwrap().map(|j| j.id), Some(second.id.clone()));
        // p1 dies: its lease runs out, p2 claims the job again, p1's late words change nothing.
        let conn = rusqlite::Connection::open(dir.path().join("accounts.sqlite")).unwrap();
        conn.execute_batch("UPDATE exports SET lease_until = 1 WHERE status = 'running'").unwrap();
        let again = a.claim_export("p2", 60, &[]).unwrap().unwrap();
        assert_eq!((again.id.as_str(), again.attempts), (second.id.as_str(), 2));
        assert!(!a.renew_export(&second.id, "p1", 60, 1).unwrap());
        assert!(!a.finish_export(&second.id, "p1", "x", 1, 1, 1).unwrap());
        assert_eq!(balance(&a, ana.id), 5 + 98, "charged once");
        conn.execute_batch("UPDATE exports SET lease_until = 1, attempts = 3 WHERE status = 'running'").unwrap();
        assert!(a.claim_export("p3", 60, &[]).unwrap().is_none(), "a third interruption fails it");
        assert_eq!(a.export(ana.id, &second.id).unwrap().unwrap().status, "failed");
        assert_eq!(balance(&a, ana.id), 5 + 99, "and refunds it");
        assert_eq!(a.expire_exports(now() + 3601).unwrap(), ["f.csv"]);
        assert_eq!(a.export(ana.id, &first.id).unwrap().unwrap().status, "expired");
    }
}
