//! A partners' search (contract §14) over partner ordinals: the identities numbered in the order
//! the search lists them (folded name, then `partner_id`), so that a page is a select by rank and
//! needs no sort. A name is a folded text term found as an establishment's name is (`terms`:
//! words, phrase keys, repeated names); the type, the states and a person's six digits shown are
//! one key each; a company's own identity is one ordinal. Filters combine with AND.

use std::sync::Arc;

use roaring::RoaringBitmap;

use super::SearchIndexError;
use super::read::{SearchIndex, intersect};

/// The conditions of a partners' search, each optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartnerConditions {
    /// A folded name term.
    pub name: Option<String>,
    /// `1`, `2` or `3`.
    pub tipo: Option<String>,
    /// A state: partners of a company with an establishment there.
    pub uf: Option<String>,
    /// A person's six digits shown.
    pub shown: Option<String>,
    /// One identity by its ordinal (a company's, found by its id); `Some(None)`: none.
    pub only: Option<Option<u32>>,
}

impl SearchIndex {
    /// The total of the partners that match `conditions` and the ids of ranks `offset` to
    /// `offset + limit` of them; `None` when a term is beyond the index.
    pub fn partner_page(
        &self,
        conditions: &PartnerConditions,
        offset: u64,
        limit: u64,
    ) -> Result<Option<(u64, Vec<String>)>, SearchIndexError> {
        let Some(set) = self.partner_set(conditions)? else { return Ok(None) };
        let total = set.len();
        let ids = (offset..offset.saturating_add(limit).min(total))
            .filter_map(|rank| set.select(rank as u32))
            .map(|ordinal| self.partner_id_at(ordinal))
            .collect();
        Ok(Some((total, ids)))
    }

    fn partner_set(&self, conditions: &PartnerConditions) -> Result<Option<Arc<RoaringBitmap>>, SearchIndexError> {
        let n = u32::try_from(self.partners()).map_err(|_| self.corrupt("too many partners".into()))?;
        let mut sets = Vec::new();
        if let Some(only) = conditions.only {
            sets.push(Arc::new(only.filter(|&o| o < n).into_iter().collect()));
        }
        for (table, key) in
            [("socio_tipo", &conditions.tipo), ("socio_uf", &conditions.uf), ("socio_cpf", &conditions.shown)]
        {
            if let Some(key) = key {
                let keys = self.keys(table)?;
                sets.push(match keys.find(key.as_bytes()) {
                    Some(i) => self.bitmap(keys, i)?,
                    None => Arc::default(),
                });
            }
        }
        if let Some(folded) = &conditions.name {
            let Some(set) = self.term("socio", folded)? else { return Ok(None) };
            sets.push(set);
        }
        if sets.is_empty() {
            let mut all = RoaringBitmap::new();
            all.insert_range(0..n);
            return Ok(Some(Arc::new(all)));
        }
        Ok(Some(intersect(sets)))
    }
}
