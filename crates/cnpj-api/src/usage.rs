//! Usage counting off the request path: every authenticated request adds one to an in-memory
//! aggregate by (user, UTC day, endpoint, status class), with the credits it was charged, and
//! notes when its token was used; the aggregate is written to the accounts store in one batch
//! every `FLUSH_EVERY` and at shutdown. A crash loses at most those seconds of counts, never a
//! credit (the ledger is written per request).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cnpj_accounts::{Accounts, AccountsError, UsageRow};

/// How long counts may wait in memory.
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// (user, days since the epoch, endpoint, status class).
type Key = (i64, i64, &'static str, &'static str);

/// Requests and credits by key; token prefixes → when last used.
type Pending = (HashMap<Key, (i64, i64)>, HashMap<String, i64>);

#[derive(Debug, Default)]
pub struct UsageCounter {
    pending: Mutex<Pending>,
}

/// The endpoint a request path names, as usage counts it.
pub fn endpoint(path: &str) -> &'static str {
    let rest = path.strip_prefix("/api/v1/").unwrap_or(path);
    match rest {
        "companies/search" => "search",
        "companies/count" => "count",
        "companies/batch" => "batch",
        "changes" => "changes",
        "reference-data" => "reference-data",
        "cities" => "cities",
        "account" => "account",
        "account/usage" => "account-usage",
        "/mcp" => "mcp",
        r if r.starts_with("companies/") && r.ends_with("/history") => "history",
        r if r.starts_with("companies/") => "detail",
        _ => "other",
    }
}

/// `2xx`, `3xx`, `4xx` or `5xx`.
pub fn status_class(status: u16) -> &'static str {
    match status {
        ..300 => "2xx",
        300..400 => "3xx",
        400..500 => "4xx",
        _ => "5xx",
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

impl UsageCounter {
    /// Counts one request (no I/O), and the use of its token when it had one (a page's has none).
    pub fn record(&self, user_id: i64, endpoint: &'static str, status: u16, credits: i64, token_prefix: Option<&str>) {
        let at = now();
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let counts = pending.0.entry((user_id, at.div_euclid(86_400), endpoint, status_class(status))).or_default();
        counts.0 += 1;
        counts.1 += credits;
        let Some(prefix) = token_prefix else { return };
        match pending.1.get_mut(prefix) {
            Some(last) => *last = at,
            None => {
                pending.1.insert(prefix.to_owned(), at);
            }
        }
    }

    /// Writes what was counted (blocking); on a failure the counts are kept for the next try.
    pub fn flush(&self, accounts: &Accounts) -> Result<usize, AccountsError> {
        let (counts, tokens) = std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        let rows: Vec<UsageRow> = counts
            .iter()
            .map(|(&(user_id, day, endpoint, class), &(requests, credits))| UsageRow {
                user_id,
                day: cnpj_model::utc_text(day * 86_400)[..10].to_owned(),
                endpoint: endpoint.to_owned(),
                status_class: class.to_owned(),
                requests,
                credits,
            })
            .collect();
        let used: Vec<(String, i64)> = tokens.iter().map(|(p, at)| (p.clone(), *at)).collect();
        match accounts.record_usage(&rows, &used) {
            Ok(()) => Ok(rows.len()),
            Err(e) => {
                let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                for (key, (requests, credits)) in counts {
                    let kept = pending.0.entry(key).or_default();
                    kept.0 += requests;
                    kept.1 += credits;
                }
                for (prefix, at) in tokens {
                    let kept = pending.1.entry(prefix).or_default();
                    *kept = (*kept).max(at);
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(path: &str, expected: &str) {
        assert_eq!(endpoint(path), expected, "{path}");
    }

    #[test]
    fn endpoints_by_path() {
        check("/api/v1/companies/11222333000181", "detail");
        check("/api/v1/companies/11.222.333/0001-81", "detail");
        check("/api/v1/companies/11222333/history", "history");
        check("/api/v1/companies/search", "search");
        check("/api/v1/companies/count", "count");
        check("/api/v1/companies/batch", "batch");
        check("/api/v1/account/usage", "account-usage");
        check("/mcp", "mcp");
        assert_eq!((status_class(200), status_class(402), status_class(503)), ("2xx", "4xx", "5xx"));
    }

    #[test]
    fn counts_add_up_across_threads() {
        let dir = tempfile::tempdir().unwrap();
        let accounts = Accounts::open(&dir.path().join("a.sqlite")).unwrap();
        let user = accounts.create_user("ana", 0).unwrap();
        let counter = UsageCounter::default();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for i in 0..500 {
                        counter.record(
                            user.id,
                            "detail",
                            if i % 5 == 0 { 404 } else { 200 },
                            i64::from(i % 5 != 0),
                            Some("cnpj_abcdefg"),
                        );
                    }
                });
            }
        });
        assert_eq!(counter.flush(&accounts).unwrap(), 2);
        assert_eq!(counter.flush(&accounts).unwrap(), 0, "nothing twice");
        let usage = accounts.usage(user.id, 1).unwrap();
        assert_eq!((usage[0].requests, usage[0].credits), (4000, 3200));
    }
}
