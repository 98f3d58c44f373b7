//! Watchlists: each user's lists of followed CNPJs (a name, the events followed, an optional
//! webhook and its secret, the entries). An entry is a CNPJ in any accepted input form, kept
//! normalized: 14 characters follow that establishment and its company, 8 the whole company. The
//! rules of a change are here, for every caller (the API and the pages alike): a name of 1 to 100
//! characters, at most 1,000 CNPJs added (or removed) at once, any invalid CNPJ refusing the whole
//! request (every invalid one named), and a user's entries over all their lists never past their
//! plan's `max_watched`; a refused request stores nothing. Another user's list is not found.

mod postgres;
mod sqlite;

use cnpj_model::{CnpjQuery, InvalidCnpj};

use crate::{Accounts, AccountsError, Inner, Plans};

/// The most CNPJs a request may add, or remove.
pub const MAX_PER_REQUEST: usize = 1000;
/// The longest list name, in characters.
pub const MAX_NAME: usize = 100;

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

/// An entry that is no CNPJ: the field it was sent in (`cnpjs`, `add` or `remove`), the text as
/// sent, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidEntry {
    pub field: &'static str,
    pub entry: String,
    pub reason: InvalidCnpj,
}

/// The stored key of an entry: the 14-character CNPJ, or the 8-character `cnpj_basico`.
pub fn watch_key(entry: &str) -> Result<String, InvalidCnpj> {
    match CnpjQuery::parse(entry)? {
        CnpjQuery::Full(cnpj) => Ok(cnpj.as_str().to_owned()),
        query => Ok(query.basico().to_owned()),
    }
}

/// The keys of the entries of `field` (duplicates merged); every invalid one goes to `invalid`.
fn keys(field: &'static str, entries: &[String], invalid: &mut Vec<InvalidEntry>) -> Vec<String> {
    let mut keys = Vec::with_capacity(entries.len());
    for entry in entries {
        match watch_key(entry) {
            Ok(key) => keys.push(key),
            Err(reason) => invalid.push(InvalidEntry { field, entry: entry.clone(), reason }),
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// A list's name: 1 to `MAX_NAME` characters once trimmed.
fn list_name(raw: &str) -> Result<&str, AccountsError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() || trimmed.chars().count() > MAX_NAME {
        return Err(AccountsError::WatchlistName);
    }
    Ok(trimmed)
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

/// What a create or a change stores, its CNPJs checked: the keys to add and to remove, and the
/// user's plans (their cap is checked in the transaction that stores them).
pub(crate) struct Checked<'a> {
    add: Vec<String>,
    remove: Vec<String>,
    plans: &'a Plans,
}

impl Checked<'_> {
    /// The most CNPJs a user of `plan` may watch over all their lists.
    fn cap(&self, plan: Option<&str>) -> u64 {
        u64::from(self.plans.of(plan).1.max_watched)
    }
}

/// The CNPJs of a request, each field at most `MAX_PER_REQUEST`, checked together so that every
/// invalid one is named, whichever field it was sent in.
fn checked<'a>(fields: [(&'static str, &[String]); 2], plans: &'a Plans) -> Result<Checked<'a>, AccountsError> {
    if let Some((field, _)) = fields.iter().find(|(_, entries)| entries.len() > MAX_PER_REQUEST) {
        return Err(AccountsError::TooManyCnpjs(field));
    }
    let mut invalid = Vec::new();
    let [add, remove] = fields.map(|(field, entries)| keys(field, entries, &mut invalid));
    if !invalid.is_empty() {
        return Err(AccountsError::InvalidCnpjs(invalid));
    }
    Ok(Checked { add, remove, plans })
}

impl Accounts {
    /// Creates a list for `user_id` (its name trimmed), within the user's plan's cap.
    pub fn create_watchlist(&self, user_id: i64, list: &NewWatchlist<'_>) -> Result<Saved, AccountsError> {
        let list = NewWatchlist { name: list_name(list.name)?, ..*list };
        let entries = checked([("cnpjs", list.cnpjs), ("remove", &[])], &self.plans)?;
        let secret = list.webhook_url.map(|_| new_secret()).transpose()?;
        dispatch!(self, s => s.create_watchlist(user_id, &list, &entries, secret))
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

    /// Changes one of the user's lists (a new name trimmed), within the user's plan's cap; `None`
    /// when the user has no such list.
    pub fn update_watchlist(
        &self,
        user_id: i64,
        id: i64,
        change: &WatchlistChange<'_>,
    ) -> Result<Option<Saved>, AccountsError> {
        let change = WatchlistChange { name: change.name.map(list_name).transpose()?, ..*change };
        let entries = checked([("add", change.add), ("remove", change.remove)], &self.plans)?;
        // A secret is drawn in case the list needs one: used only then.
        let secret = new_secret()?;
        dispatch!(self, s => s.update_watchlist(user_id, id, &change, &entries, secret))
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
        let plans = Plans::default();
        let got = checked([("cnpjs", &entries), ("remove", &[])], &plans).map(|c| c.add).map_err(|e| match e {
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
        check(&["11222333"; MAX_PER_REQUEST], Ok(&["11222333"]));
        let many = vec!["11222333".to_owned(); MAX_PER_REQUEST + 1];
        let over = checked([("add", &[]), ("remove", &many)], &Plans::default()).map(|_| ());
        assert!(matches!(over, Err(AccountsError::TooManyCnpjs("remove"))), "{over:?}");
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(list_name("  suppliers ").unwrap(), "suppliers");
        assert_eq!(list_name(&"é".repeat(MAX_NAME)).unwrap().chars().count(), MAX_NAME);
        for bad in ["", "   ", &"x".repeat(MAX_NAME + 1)] {
            assert!(matches!(list_name(bad), Err(AccountsError::WatchlistName)), "{bad:?}");
        }
    }
}
