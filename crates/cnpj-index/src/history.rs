//! The month-over-month history beside a DuckDB dataset (`<dataset>.history`): a
//! DuckDB file of its own, so that each build copies it whole (a second or two at full scale)
//! instead of carrying 24 months of rows through SQL (≈ 31 s), deletes the month that drops out
//! and appends its own (BENCHMARKS.md, "The history in a file of its own"). cnpj-load writes it
//! and cnpj-store reads it; this module holds what both must agree on: its name, its tables, and
//! the set of companies with changes in a month, stored per month so that a company's history
//! reads only the months it changed in.
//!
//! Tables: `changes` (the served rows, in the served order), `change_companies` (per month, the
//! month's [`Companies`] as bytes) and `metadata` (the dataset's `build_id`: a history of another
//! build is not used).

use std::path::{Path, PathBuf};

use roaring::RoaringTreemap;

/// Where the history of the dataset at `dataset` is.
pub fn history_path(dataset: &Path) -> PathBuf {
    let mut name = dataset.as_os_str().to_owned();
    name.push(".history");
    PathBuf::from(name)
}

/// The history's tables, created by the first build that has a previous month.
pub const HISTORY_DDL: &str = "\
    CREATE TABLE changes (month VARCHAR, cnpj VARCHAR, cnpj_basico VARCHAR, event VARCHAR, field VARCHAR, \
        old VARCHAR, new VARCHAR, uf VARCHAR, municipio VARCHAR, cnae VARCHAR);
    CREATE TABLE change_companies (month VARCHAR, companies BLOB);
    CREATE TABLE metadata (key VARCHAR PRIMARY KEY, value VARCHAR);";

/// With the history attached as `history` to a connection on its dataset: 1 when the history is
/// of the dataset's build, else 0.
pub const SAME_BUILD: &str = "SELECT count(*) FROM history.metadata h JOIN metadata m USING (key) \
     WHERE key = 'build_id' AND h.value = m.value";

/// `ATTACH` of the history of the dataset at `dataset` as `history`, read-only.
pub fn attach_history_sql(dataset: &Path) -> String {
    format!("ATTACH '{}' AS history (READ_ONLY)", history_path(dataset).display().to_string().replace('\'', "''"))
}

/// The companies (by `cnpj_basico`) with changes in one month: a roaring bitmap of their keys.
/// A company's months are found in microseconds with all of them in memory (≈ 2 bytes a
/// company: 2-3 MB a month at full scale), where a table of (company, month) rows in company
/// order cost 11 s a build to re-sort and 190 MB at 24 months.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Companies(RoaringTreemap);

/// Numeric bases are their value; alphanumeric ones (2026 on) come after them, by their base-36
/// value: dense keys for the numeric bases of today, and a key for every base.
fn key(basico: &str) -> Option<u64> {
    let bytes = basico.as_bytes();
    if bytes.len() != 8 {
        return None;
    }
    if bytes.iter().all(u8::is_ascii_digit) {
        return Some(bytes.iter().fold(0, |k, b| k * 10 + u64::from(b - b'0')));
    }
    bytes.iter().try_fold(100_000_000, |k, &b| {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'A'..=b'Z' => b - b'A' + 10,
            _ => return None,
        };
        Some((k - 100_000_000) * 36 + u64::from(digit) + 100_000_000)
    })
}

/// The base of a key (the inverse of [`key`]).
fn basico(key: u64) -> String {
    if key < 100_000_000 {
        return format!("{key:08}");
    }
    let mut rest = key - 100_000_000;
    let mut out = [b'0'; 8];
    for slot in out.iter_mut().rev() {
        let digit = (rest % 36) as u8;
        *slot = if digit < 10 { b'0' + digit } else { b'A' + digit - 10 };
        rest /= 36;
    }
    String::from_utf8(out.to_vec()).expect("ASCII")
}

impl Companies {
    /// Adds a company; false when its base is not 8 characters of `[0-9A-Z]` (none is: the
    /// normalizer rejects such a CNPJ).
    pub fn insert(&mut self, basico: &str) -> bool {
        key(basico).is_some_and(|k| {
            self.0.insert(k);
            true
        })
    }

    pub fn contains(&self, basico: &str) -> bool {
        key(basico).is_some_and(|k| self.0.contains(k))
    }

    /// The companies in both sets.
    pub fn intersection(&self, other: &Companies) -> Companies {
        Companies(&self.0 & &other.0)
    }

    /// Adds the companies of `other`.
    pub fn union_with(&mut self, other: &Companies) {
        self.0 |= &other.0;
    }

    /// The bases (`cnpj_basico`), numeric ones first, each in ascending order.
    pub fn bases(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(basico)
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The stored form (roaring's portable 64-bit format).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.0.serialized_size());
        self.0.serialize_into(&mut bytes).expect("writing to a Vec does not fail");
        bytes
    }

    pub fn from_bytes(bytes: &[u8]) -> std::io::Result<Companies> {
        RoaringTreemap::deserialize_from(bytes).map(Companies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(basico: &str, expected: Option<u64>) {
        assert_eq!(key(basico), expected, "{basico}");
        if let Some(k) = expected {
            assert_eq!(super::basico(k), basico, "the base of {k}");
        }
    }

    #[test]
    fn every_base_has_a_key_of_its_own() {
        check("00000000", Some(0));
        check("11222333", Some(11_222_333));
        check("99999999", Some(99_999_999));
        check("0000000A", Some(100_000_010));
        check("A0000000", Some(100_000_000 + 10 * 36u64.pow(7)));
        check("ZZZZZZZZ", Some(100_000_000 + 36u64.pow(8) - 1));
        check("1122233", None);
        check("1122233a", None);
        check("11.22233", None);
    }

    #[test]
    fn a_month_s_companies_survive_their_bytes() {
        let mut companies = Companies::default();
        for basico in ["11222333", "00000001", "12ABC345", "99999999"] {
            assert!(companies.insert(basico));
        }
        assert!(!companies.insert("bad"));
        let read = Companies::from_bytes(&companies.to_bytes()).unwrap();
        assert_eq!(read, companies);
        assert_eq!(read.len(), 4);
        assert!(read.contains("12ABC345") && read.contains("00000001"));
        assert!(!read.contains("11222334") && !read.contains("12ABC346") && !read.contains("bad"));
        assert!(Companies::from_bytes(&companies.to_bytes()[..10]).is_err(), "a cut blob is an error");
        assert!(Companies::from_bytes(&Companies::default().to_bytes()).unwrap().is_empty());
    }

    #[test]
    fn sets_intersect_and_list_their_bases() {
        let set = |bases: &[&str]| {
            let mut companies = Companies::default();
            bases.iter().for_each(|b| assert!(companies.insert(b)));
            companies
        };
        let mut a = set(&["11222333", "12ABC345", "00000001"]);
        let both = a.intersection(&set(&["12ABC345", "00000001", "99999999"]));
        assert_eq!(both.bases().collect::<Vec<_>>(), ["00000001", "12ABC345"]);
        a.union_with(&set(&["99999999"]));
        assert_eq!(a.bases().collect::<Vec<_>>(), ["00000001", "11222333", "99999999", "12ABC345"]);
    }
}
