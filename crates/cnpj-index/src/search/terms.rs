//! A folded text term found in the index (`Condition::Term`). A one-word term's matches are
//! exactly the union of the words (`nome`, `bairro`) that contain it. Any other term with a word
//! character is the intersection of its links (`text::term_plan`), each the union of the phrase
//! keys (`pares_*`) it stands in, found by prefix where the link starts at a key's start, else
//! with `memmem` in the keys. That is exact unless the field holds a word twice (its links may
//! then stand apart), so a term of several links is `(links ∖ repete) ∪` the `repetidos` keys
//! that contain it. A name matches in either field. Only a term without a word character is
//! beyond the index (the store then searches by SQL, within a budget).

use std::sync::Arc;

use roaring::RoaringBitmap;

use super::SearchIndexError;
use super::format::Field;
use super::read::{Keys, SearchIndex, intersect, union};
use crate::text::{TermPlan, term_plan};

impl Keys {
    /// The keys that hold `needle`, in key order: a `\n` at its start or end pins that end to
    /// the key's (by binary search where the start is pinned, else with `memmem`).
    fn matching(&self, needle: &[u8]) -> Vec<usize> {
        match needle {
            [b'\n', whole @ .., b'\n'] => return self.find(whole).into_iter().collect(),
            [b'\n', prefix @ ..] => return self.prefixed(prefix).collect(),
            _ => {}
        }
        let mut found: Vec<usize> = Vec::new();
        for at in memchr::memmem::find_iter(&self.text, needle) {
            // The key that holds the start of the match.
            let key = self.starts.partition_point(|&s| s <= at as u32) - 1;
            if found.last() != Some(&key) {
                found.push(key);
            }
        }
        found
    }
}

impl SearchIndex {
    /// The establishments whose words of `table` contain the folded `term`; `None` when the
    /// term is beyond the index.
    pub(super) fn term(
        &self,
        table: &'static str,
        folded: &str,
    ) -> Result<Option<Arc<RoaringBitmap>>, SearchIndexError> {
        Ok(Some(match term_plan(folded) {
            TermPlan::Beyond => return Ok(None),
            TermPlan::Word(word) => {
                let keys = self.keys(table)?;
                self.union(keys, keys.matching(word.as_bytes()))?
            }
            TermPlan::Links(links) => {
                let mut found = Vec::new();
                for &field in Field::of(table) {
                    found.push(Arc::new(self.phrase(field, folded, &links)?));
                }
                Arc::new(union(found))
            }
        }))
    }

    /// The establishments whose `field` contains the folded `term`, of the phrase keys `links`.
    fn phrase(&self, field: Field, term: &str, links: &[Vec<u8>]) -> Result<RoaringBitmap, SearchIndexError> {
        let (pairs, repeats, repeating) = field.tables();
        let keys = self.keys(Field::name(pairs))?;
        let mut sets = Vec::with_capacity(links.len());
        for link in links {
            let set = self.union(keys, keys.matching(link))?;
            if set.is_empty() {
                return Ok(RoaringBitmap::new());
            }
            sets.push(set);
        }
        let mut found = Arc::unwrap_or_clone(intersect(sets));
        if links.len() == 1 || found.is_empty() {
            return Ok(found);
        }
        // Where a word stands twice, the links may stand apart: those establishments are
        // decided on their whole text.
        let repeating = self.keys(repeating)?;
        let repeating = self.bitmap(repeating, 0)?;
        if found.intersection_len(&repeating) == 0 {
            return Ok(found);
        }
        found -= repeating.as_ref();
        let texts = self.keys(Field::name(repeats))?;
        found |= self.union(texts, texts.matching(term.as_bytes()))?.as_ref();
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::read::Span;

    fn check(keys: &[&str], needle: &str, expected: &[&str]) {
        let mut k = Keys { text: vec![b'\n'], starts: Vec::new(), spans: Vec::new() };
        for key in keys {
            k.starts.push(k.text.len() as u32);
            k.text.extend_from_slice(key.as_bytes());
            k.text.push(b'\n');
            k.spans.push(Span { at: 0, size: 0, checksum: 0 });
        }
        k.starts.push(k.text.len() as u32);
        let found: Vec<&str> = k.matching(needle.as_bytes()).into_iter().map(|i| keys[i]).collect();
        assert_eq!(found, expected, "{needle:?}");
    }

    #[test]
    fn needles_are_found_where_they_are_pinned() {
        let keys = ["ana", "banana", "bar", "nan", "padaria", "ria", "ria sa", "sa ltda"];
        check(&keys, "an", &["ana", "banana", "nan"]);
        check(&keys, "ana", &["ana", "banana"]);
        check(&keys, "ria\n", &["padaria", "ria"]);
        check(&keys, "\nba", &["banana", "bar"]);
        check(&keys, "\nria\n", &["ria"]);
        check(&keys, "\nar\n", &[]);
        check(&keys, "x", &[]);
        check(&keys, "\na", &["ana"]);
        check(&keys, "ia sa\n", &["ria sa"]);
        check(&keys, "\nsa lt", &["sa ltda"]);
    }
}
