//! What users did: usage counts (requests and credits per user, UTC day, endpoint and status
//! class, added in batches by the API), the debit ledger, and for the admin pages the users'
//! summaries and the audit log of every admin action.

use crate::people::{PERSON, Person, Status, person};
use crate::sql::Sql;
use crate::{Accounts, AccountsError, now};

/// Requests and credits of one user, day (`YYYY-MM-DD`, UTC), endpoint and status class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRow {
    pub user_id: i64,
    pub day: String,
    pub endpoint: String,
    pub status_class: String,
    pub requests: i64,
    pub credits: i64,
}

/// One debit of the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Debit {
    pub at: i64,
    pub amount: i64,
    pub what: String,
}

/// A user as the admin page lists them.
#[derive(Clone, Debug)]
pub struct UserSummary {
    pub person: Person,
    /// The latest request counted or session seen (a UTC day or a time), if any.
    pub last_activity: Option<String>,
    pub requests_30d: i64,
    pub credits_30d: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEntry {
    pub at: i64,
    pub admin: String,
    pub action: String,
    pub target: Option<String>,
    pub detail: String,
}

/// The UTC day of a time, `YYYY-MM-DD`.
pub(crate) fn day_of(unix_seconds: i64) -> String {
    cnpj_model::utc_text(unix_seconds)[..10].to_owned()
}

fn audit(db: &mut dyn Sql, admin: i64, action: &str, target: Option<i64>, detail: &str) -> Result<(), AccountsError> {
    db.run(
        "INSERT INTO audit (at, admin_id, action, target_id, detail) VALUES ($1, $2, $3, $4, $5)",
        &[now().into(), admin.into(), action.into(), target.into(), detail.into()],
    )?;
    Ok(())
}

impl Accounts {
    /// Adds counts to the stored ones (one transaction for the batch), and notes when tokens
    /// (by prefix) were last used.
    pub fn record_usage(&self, rows: &[UsageRow], tokens_used: &[(String, i64)]) -> Result<(), AccountsError> {
        if rows.is_empty() && tokens_used.is_empty() {
            return Ok(());
        }
        self.tx(|db| {
            for r in rows {
                db.run(
                    "INSERT INTO usage (user_id, day, endpoint, status_class, requests, credits) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (user_id, day, endpoint, status_class) \
                     DO UPDATE SET requests = usage.requests + excluded.requests, credits = usage.credits + excluded.credits",
                    &[
                        r.user_id.into(),
                        r.day.as_str().into(),
                        r.endpoint.as_str().into(),
                        r.status_class.as_str().into(),
                        r.requests.into(),
                        r.credits.into(),
                    ],
                )?;
            }
            for (prefix, at) in tokens_used {
                db.run(
                    "UPDATE tokens SET last_used_at = $1 WHERE prefix = $2 AND (last_used_at IS NULL OR last_used_at < $1)",
                    &[(*at).into(), prefix.as_str().into()],
                )?;
            }
            Ok(())
        })
    }

    /// A user's usage of the last `days` days (today included), by day and endpoint (status
    /// classes added up), oldest first.
    pub fn usage(&self, user_id: i64, days: u32) -> Result<Vec<UsageRow>, AccountsError> {
        let since = day_of(now() - i64::from(days.max(1) - 1) * 86_400);
        self.tx(|db| {
            let rows = db.rows(
                "SELECT day, endpoint, CAST(sum(requests) AS bigint), CAST(sum(credits) AS bigint) FROM usage \
                 WHERE user_id = $1 AND day >= $2 GROUP BY day, endpoint ORDER BY day, endpoint",
                &[user_id.into(), since.into()],
            )?;
            Ok(rows
                .iter()
                .map(|r| UsageRow {
                    user_id,
                    day: r.text(0),
                    endpoint: r.text(1),
                    status_class: String::new(),
                    requests: r.int(2),
                    credits: r.int(3),
                })
                .collect())
        })
    }

    /// A user's last `limit` debits, newest first.
    pub fn ledger(&self, user_id: i64, limit: u32) -> Result<Vec<Debit>, AccountsError> {
        self.tx(|db| {
            let rows = db.rows(
                "SELECT at, amount, what FROM debits WHERE user_id = $1 ORDER BY at DESC, id DESC LIMIT $2",
                &[user_id.into(), i64::from(limit).into()],
            )?;
            Ok(rows.iter().map(|r| Debit { at: r.int(0), amount: r.int(1), what: r.text(2) }).collect())
        })
    }

    /// Users whose email, name or display name holds `search` (case-insensitively; all when
    /// empty), at most 200, with their last activity and 30-day totals.
    pub fn user_summaries(&self, search: &str) -> Result<Vec<UserSummary>, AccountsError> {
        let pattern = format!("%{}%", search.trim().to_lowercase().replace(['%', '_'], ""));
        let since = day_of(now() - 29 * 86_400);
        self.tx(|db| {
            let people: Vec<Person> = db
                .rows(
                    &format!(
                        "{PERSON} WHERE name NOT LIKE 'erased-%' \
                         ORDER BY id LIMIT 1000"
                    ),
                    &[],
                )?
                .iter()
                .map(person)
                .filter(|p| {
                    let fields = [Some(p.name.as_str()), p.email.as_deref(), p.display_name.as_deref()];
                    fields.into_iter().flatten().any(|f| like(&f.to_lowercase(), &pattern))
                })
                .take(200)
                .collect();
            let mut summaries = Vec::with_capacity(people.len());
            for person in people {
                let totals = db.row(
                    "SELECT CAST(coalesce(sum(requests), 0) AS bigint), CAST(coalesce(sum(credits), 0) AS bigint), max(day) \
                     FROM usage WHERE user_id = $1 AND day >= $2",
                    &[person.id.into(), since.as_str().into()],
                )?;
                let (requests_30d, credits_30d, last_day) =
                    totals.map_or((0, 0, None), |r| (r.int(0), r.int(1), r.opt_text(2)));
                let seen = db
                    .row("SELECT max(seen_at) FROM sessions WHERE user_id = $1", &[person.id.into()])?
                    .and_then(|r| r.opt_int(0))
                    .map(cnpj_model::utc_text);
                let last_activity = last_day.into_iter().chain(seen).max();
                summaries.push(UserSummary { person, last_activity, requests_30d, credits_30d });
            }
            Ok(summaries)
        })
    }

    /// An admin grants credits (negative takes away, never below zero), with a reason.
    pub fn admin_grant(&self, admin: i64, user_id: i64, credits: i64, reason: &str) -> Result<(), AccountsError> {
        self.tx(|db| {
            let changed = db.run(
                "UPDATE users SET credits = CASE WHEN credits + $1 < 0 THEN 0 ELSE credits + $1 END WHERE id = $2",
                &[credits.into(), user_id.into()],
            )?;
            if changed == 0 {
                return Err(AccountsError::UnknownUser(user_id.to_string()));
            }
            audit(db, admin, "grant", Some(user_id), &format!("{credits} credits: {reason}"))
        })
    }

    /// An admin changes a user's plan (one of the plans).
    pub fn admin_set_plan(&self, admin: i64, user_id: i64, plan: &str) -> Result<(), AccountsError> {
        if !self.plans.contains(plan) {
            return Err(AccountsError::UnknownPlan(plan.to_owned()));
        }
        self.tx(|db| {
            db.run("UPDATE users SET plan = $1 WHERE id = $2", &[plan.into(), user_id.into()])?;
            audit(db, admin, "plan", Some(user_id), plan)
        })
    }

    /// An admin disables (sessions end, tokens refused) or enables a user.
    pub fn admin_set_status(&self, admin: i64, user_id: i64, status: Status) -> Result<(), AccountsError> {
        self.tx(|db| {
            db.run("UPDATE users SET status = $1 WHERE id = $2", &[status.as_str().into(), user_id.into()])?;
            if status == Status::Disabled {
                db.run("DELETE FROM sessions WHERE user_id = $1", &[user_id.into()])?;
            }
            audit(db, admin, "status", Some(user_id), status.as_str())
        })
    }

    /// An admin revokes any token.
    pub fn admin_revoke(&self, admin: i64, prefix: &str) -> Result<bool, AccountsError> {
        self.tx(|db| {
            let owner = db.row("SELECT user_id FROM tokens WHERE prefix = $1", &[prefix.into()])?.map(|r| r.int(0));
            let Some(owner) = owner else { return Ok(false) };
            db.run(
                "UPDATE tokens SET revoked_at = coalesce(revoked_at, $1) WHERE prefix = $2",
                &[now().into(), prefix.into()],
            )?;
            audit(db, admin, "revoke", Some(owner), prefix)?;
            Ok(true)
        })
    }

    /// The audit log, newest first (at most `limit` entries).
    pub fn audit_log(&self, limit: u32) -> Result<Vec<AuditEntry>, AccountsError> {
        self.tx(|db| {
            let rows = db.rows(
                "SELECT a.at, coalesce(u.name, ''), a.action, t.name, a.detail FROM audit a \
                 LEFT JOIN users u ON u.id = a.admin_id LEFT JOIN users t ON t.id = a.target_id \
                 ORDER BY a.id DESC LIMIT $1",
                &[i64::from(limit).into()],
            )?;
            Ok(rows
                .iter()
                .map(|r| AuditEntry {
                    at: r.int(0),
                    admin: r.text(1),
                    action: r.text(2),
                    target: r.opt_text(3),
                    detail: r.text(4),
                })
                .collect())
        })
    }
}

/// Whether `text` holds the `%…%` pattern's middle.
fn like(text: &str, pattern: &str) -> bool {
    text.contains(pattern.trim_matches('%'))
}
