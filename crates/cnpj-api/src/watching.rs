//! What the server is told about watchlists' webhooks (where one may lead), and the lists' entries
//! it keeps in memory between requests for their events, each while its list's revision stays.
//! (The cap of watched CNPJs is each user's plan's, checked by the accounts store.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use cnpj_store::Watched;

/// Lists whose entries are kept.
const KEPT_LISTS: usize = 256;

#[derive(Debug, Default)]
pub struct Settings {
    /// Where webhooks may lead (`http`, private addresses: tests, a receiver on the same host).
    pub webhooks: cnpj_webhooks::Policy,
    /// Each list's entries as last read, by list id: (revision, entries).
    kept: Mutex<HashMap<i64, (i64, Arc<Watched>)>>,
}

impl Settings {
    pub fn new(webhooks: cnpj_webhooks::Policy) -> Settings {
        Settings { webhooks, kept: Mutex::default() }
    }

    /// A list's entries, if they were kept at this revision.
    pub fn kept(&self, id: i64, revision: i64) -> Option<Arc<Watched>> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.get(&id).filter(|(at, _)| *at == revision).map(|(_, watched)| Arc::clone(watched))
    }

    /// Keeps a list's entries at a revision (all are dropped when `KEPT_LISTS` are kept).
    pub fn keep(&self, id: i64, revision: i64, watched: Arc<Watched>) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= KEPT_LISTS {
            kept.clear();
        }
        kept.insert(id, (revision, watched));
    }
}
