//! Webhook deliveries of watchlists, kept in the accounts store so that every replica sees them:
//! one row per page of a month's events of a list, with a stable id (`wl<list>-<month>-<page>`),
//! the body posted at every attempt, its state (`pending`, `waiting_credits`, `delivered`,
//! `failed`), attempts, next attempt and last error. A sender claims due rows under a lease, so
//! that one replica sends each; a row whose sender died is claimed again once its lease ran out
//! (at least once, the same id).

mod postgres;
mod sqlite;

use crate::{Accounts, AccountsError, Inner, Watchlist};

/// One delivery as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub id: String,
    pub watchlist_id: i64,
    pub user_id: i64,
    pub month: String,
    pub page: i64,
    pub pages: i64,
    pub status: String,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub delivered_at: Option<i64>,
}

/// A delivery claimed for sending: where to, signed with what, and the body.
#[derive(Clone, Debug)]
pub struct Due {
    pub delivery: Delivery,
    /// `None`: the list has no webhook any more.
    pub url: Option<String>,
    pub secret: String,
    pub body: String,
}

/// What became of an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    Delivered,
    /// Another attempt at `next_at`.
    Retry {
        error: String,
        next_at: i64,
    },
    /// No more attempts (a user may retry it).
    Failed {
        error: String,
    },
    /// Not attempted: the user had no credit; tried again at `next_at`.
    WaitingCredits {
        next_at: i64,
    },
}

/// The stable id of a page of a month's events of a list.
pub fn delivery_id(watchlist_id: i64, month: &str, page: i64) -> String {
    format!("wl{watchlist_id}-{month}-{page}")
}

impl Accounts {
    /// Every list, and its user (the month's matching takes them all: deliveries for those with a
    /// webhook, and each one's events ready for its pages).
    pub fn every_watchlist(&self) -> Result<Vec<(i64, Watchlist)>, AccountsError> {
        dispatch!(self, s => s.every_watchlist())
    }

    /// Whether a list's deliveries of `month` were made already.
    pub fn has_deliveries(&self, watchlist_id: i64, month: &str) -> Result<bool, AccountsError> {
        dispatch!(self, s => s.has_deliveries(watchlist_id, month))
    }

    /// The deliveries of a month of a list, one per body (page 1 first), due now; a page made
    /// already (by another replica) is kept as it is.
    pub fn enqueue(
        &self,
        user_id: i64,
        watchlist_id: i64,
        month: &str,
        bodies: &[String],
    ) -> Result<(), AccountsError> {
        dispatch!(self, s => s.enqueue(user_id, watchlist_id, month, bodies, crate::now()))
    }

    /// Up to `limit` deliveries due at `now`, leased for `lease` seconds to the caller.
    pub fn claim_deliveries(&self, now: i64, lease: i64, limit: i64) -> Result<Vec<Due>, AccountsError> {
        dispatch!(self, s => s.claim_deliveries(now, lease, limit))
    }

    /// Records an attempt (or its postponement) and releases the lease.
    pub fn finish_delivery(&self, id: &str, attempt: &Attempt, now: i64) -> Result<(), AccountsError> {
        dispatch!(self, s => s.finish_delivery(id, attempt, now))
    }

    /// The deliveries of one of the user's lists, newest month first, then by page, from
    /// `offset` (at most `limit`) and how many in all; `None` when the user has no such list.
    pub fn deliveries(
        &self,
        user_id: i64,
        watchlist_id: i64,
        offset: u64,
        limit: u64,
    ) -> Result<Option<(u64, Vec<Delivery>)>, AccountsError> {
        dispatch!(self, s => s.deliveries(user_id, watchlist_id, offset, limit))
    }

    /// Makes one of the user's deliveries due now, for another 24 hours of attempts; `None` when
    /// the user has no such list or delivery.
    pub fn retry_delivery(&self, user_id: i64, watchlist_id: i64, id: &str) -> Result<Option<Delivery>, AccountsError> {
        dispatch!(self, s => s.retry_delivery(user_id, watchlist_id, id, crate::now()))
    }
}
