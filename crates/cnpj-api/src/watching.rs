//! What the server is told about watchlists' webhooks (where one may lead), and the lists' entries
//! it keeps in memory between requests for their events, each while its list's revision stays.
//! Kept entries are known by the list's owner and id (ids are never handed out again, see
//! `sql/sqlite/accounts-3.sql`) and its revision: no other list, of this user or another, can
//! hold that key.
//! (The cap of watched CNPJs is each user's plan's, checked by the accounts store.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use cnpj_store::Watched;

/// A list as its entries are kept by: (owner, list id).
type ListKey = (i64, i64);

/// Lists whose entries are kept.
const KEPT_LISTS: usize = 256;

#[derive(Debug, Default)]
pub struct Settings {
    /// Where webhooks may lead (`http`, private addresses: tests, a receiver on the same host).
    pub webhooks: cnpj_webhooks::Policy,
    /// Each list's entries as last read, by (owner, list id): (revision, entries).
    kept: Mutex<HashMap<ListKey, (i64, Arc<Watched>)>>,
}

impl Settings {
    pub fn new(webhooks: cnpj_webhooks::Policy) -> Settings {
        Settings { webhooks, kept: Mutex::default() }
    }

    /// The entries of `user`'s list `id`, if they were kept at this revision.
    pub fn kept(&self, user: i64, id: i64, revision: i64) -> Option<Arc<Watched>> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.get(&(user, id)).filter(|(at, _)| *at == revision).map(|(_, watched)| Arc::clone(watched))
    }

    /// Keeps the entries of `user`'s list `id` at a revision (all are dropped when `KEPT_LISTS`
    /// are kept).
    pub fn keep(&self, user: i64, id: i64, revision: i64, watched: Arc<Watched>) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= KEPT_LISTS {
            kept.clear();
        }
        kept.insert((user, id), (revision, watched));
    }
}
