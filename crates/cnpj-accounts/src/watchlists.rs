//! Watchlists: each user's lists of followed CNPJs (a name, the events followed, an optional
//! webhook and its secret, the entries). An entry is a CNPJ in any accepted input form, kept
//! normalized: 14 characters follow that establishment and its company, 8 the whole company. A
//! request with any invalid CNPJ is refused whole (every invalid one named) and stores nothing; a
//! user's entries, over all their lists, never pass the cap they are given; another user's list is
//! not found.

mod postgres;
mod sqlite;

use cnpj_model::CnpjQuery;

use crate::{Accounts, AccountsError, Inner};

/// A list as stored (its entries counted, not listed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watchlist {
    pub id: i64,
    pub name: String,
    /// The event names followed; empty: every event.
    pub events: Vec<String>,
    pub webhook_url: Option<String>,
    /// How many entries it holds.
    pub entries: i64,
    /// Grows with every change of the list.
    pub revision: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A new list: its entries as sent (any accepted CNPJ form).
#[derive(Clone, Copy, Debug)]
pub struct NewWatchlist<'a> {
    pub name: &'a str,
    pub cnpjs: &'a [String],
    pub events: &'a [String],
    pub webhook_url: Option<&'a str>,
}

/// A change of a list; what is `None` (or empty) stays as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct WatchlistChange<'a> {
    pub name: Option<&'a str>,
    pub add: &'a [String],
    pub remove: &'a [String],
    pub events: Option<&'a [String]>,
    /// `Some(None)` removes the webhook.
    pub webhook_url: Option<Option<&'a str>>,
    /// A new webhook secret (one is also made when a webhook is set on a list without one).
    pub rotate_secret: bool,
}

/// A list as created or changed, with its webhook secret when one was just made (shown once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    pub watchlist: Watchlist,
    pub webhook_secret: Option<String>,
}

/// An entry that is no CNPJ: the text as sent and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidEntry {
    pub entry: String,
    pub reason: String,
}

/// The stored key of an entry: the 14-character CNPJ, or the 8-character `cnpj_basico`.
pub fn watch_key(entry: &str) -> Result<String, String> {
    match CnpjQuery::parse(entry) {
        Ok(CnpjQuery::Full(cnpj)) => Ok(cnpj.as_str().to_owned()),
        Ok(query) => Ok(query.basico().to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// The keys of `entries` (duplicates merged), or every invalid one.
fn keys(entries: &[String]) -> Result<Vec<String>, AccountsError> {
    let mut keys = Vec::with_capacity(entries.len());
    let mut invalid = Vec::new();
    for entry in entries {
        match watch_key(entry) {
            Ok(key) => keys.push(key),
            Err(reason) => invalid.push(InvalidEntry { entry: entry.clone(), reason }),
        }
    }
    if !invalid.is_empty() {
        return Err(AccountsError::InvalidCnpjs(invalid));
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// A webhook secret: 32 random bytes, hex, after `whsec_`.
fn new_secret() -> Result<String, AccountsError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AccountsError::Random(e.to_string()))?;
    Ok(format!("whsec_{}", hex::encode(bytes)))
}

/// The stored form of the events followed.
fn events_text(events: &[String]) -> String {
    events.join(",")
}

fn events_of(text: &str) -> Vec<String> {
    text.split(',').filter(|e| !e.is_empty()).map(str::to_owned).collect()
}

/// What a create or a change stores, its CNPJs checked: the keys to add and to remove.
pub(crate) struct Checked {
    add: Vec<String>,
    remove: Vec<String>,
}

/// Both lists' CNPJs checked together, so that a 400 names every invalid one.
fn checked(add: &[String], remove: &[String]) -> Result<Checked, AccountsError> {
    match (keys(add), keys(remove)) {
        (Ok(add), Ok(remove)) => Ok(Checked { add, remove }),
        (Err(AccountsError::InvalidCnpjs(mut a)), Err(AccountsError::InvalidCnpjs(b))) => {
            a.extend(b);
            Err(AccountsError::InvalidCnpjs(a))
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

impl Accounts {
    /// Creates a list for `user_id`; `max_watched` caps the user's entries over all their lists.
    pub fn create_watchlist(
        &self,
        user_id: i64,
        list: &NewWatchlist<'_>,
        max_watched: u64,
    ) -> Result<Saved, AccountsError> {
        let entries = checked(list.cnpjs, &[])?;
        let secret = list.webhook_url.map(|_| new_secret()).transpose()?;
        dispatch!(self, s => s.create_watchlist(user_id, list, &entries.add, secret, max_watched))
    }

    /// The user's lists, oldest first.
    pub fn watchlists(&self, user_id: i64) -> Result<Vec<Watchlist>, AccountsError> {
        dispatch!(self, s => s.watchlists(user_id))
    }

    /// One of the user's lists and its entries from `offset` (at most `limit`, in key order);
    /// `None` when the user has no such list.
    pub fn watchlist(
        &self,
        user_id: i64,
        id: i64,
        offset: u64,
        limit: Option<u64>,
    ) -> Result<Option<(Watchlist, Vec<String>)>, AccountsError> {
        dispatch!(self, s => s.watchlist(user_id, id, offset, limit))
    }

    /// Changes one of the user's lists; `None` when the user has no such list.
    pub fn update_watchlist(
        &self,
        user_id: i64,
        id: i64,
        change: &WatchlistChange<'_>,
        max_watched: u64,
    ) -> Result<Option<Saved>, AccountsError> {
        let entries = checked(change.add, change.remove)?;
        // A secret is drawn in case the list needs one: used only then.
        let secret = new_secret()?;
        dispatch!(self, s => s.update_watchlist(user_id, id, change, &entries, secret, max_watched))
    }

    /// Deletes one of the user's lists; false when the user has no such list.
    pub fn delete_watchlist(&self, user_id: i64, id: i64) -> Result<bool, AccountsError> {
        dispatch!(self, s => s.delete_watchlist(user_id, id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(entries: &[&str], expected: Result<&[&str], &[&str]>) {
        let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
        let got = keys(&entries).map_err(|e| match e {
            AccountsError::InvalidCnpjs(invalid) => invalid.into_iter().map(|i| i.entry).collect::<Vec<_>>(),
            other => panic!("{other}"),
        });
        let expected = expected
            .map(|k| k.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>())
            .map_err(|k| k.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>());
        assert_eq!(got, expected, "{entries:?}");
    }

    #[test]
    fn entries_are_normalized_and_merged_or_refused_together() {
        check(
            &["11.222.333/0001-81", "11222333000181", "11222333", "12abc34501de35", " 33.683.111 "],
            Ok(&["11222333", "11222333000181", "12ABC34501DE35", "33683111"]),
        );
        check(&["11222333000182", "11222333", "x", "1122233300018"], Err(&["11222333000182", "x", "1122233300018"]));
        check(&[], Ok(&[]));
    }
}
