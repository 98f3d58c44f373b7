//! The month-over-month history beside a DuckDB dataset (`<dataset>.history`): a
//! DuckDB file of its own, so that each build copies it whole (a second or two at full scale)
//! instead of carrying 24 months of rows through SQL (≈ 31 s), deletes the month that drops out
//! and appends its own (BENCHMARKS.md, "The history in a file of its own"). cnpj-load writes it
//! and cnpj-store reads it; this module holds what both must agree on: its name, its tables, and
//! the set of companies with changes in a month, stored per month so that a company's history
//! reads only the months it changed in.
//!
//! Tables: `changes` (the served rows, in the served order), `change_companies` (per month, the
//! month's [`Companies`] as bytes), `change_keys` (per row of `changes`, its place in its month and
//! its company, establishment, event and field as numbers and small strings: [`CHANGE_KEYS`]) and
//! `metadata` (the dataset's `build_id`: a history of another build is not used).

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

/// The fields of company events (`changes` emits them without a CNPJ; the history gives them
/// their head office's): a watched establishment follows these of its company, and its own
/// events by CNPJ.
pub const COMPANY_FIELDS: [&str; 8] = [
    "razao_social",
    "natureza_juridica",
    "capital_social",
    "porte_empresa",
    "socios",
    "opcao_simples",
    "opcao_mei",
    "regime_tributario",
];

/// `change_keys`, one row per row of `changes`, each month's in company order: `position` (its
/// place among its month's rows in the stored order, from 0), `company` ([`company_key`]),
/// `branch` ([`branch_key`], NULL for a company event without an establishment), `event`, and
/// `of_company` (its field is one of [`COMPANY_FIELDS`]; a string `field` costs twice the
/// whole lookup to scan). A watchlist's rows of a month are found here by integer keys, where a semi-join of
/// the month's `cnpj_basico` (FSST-compressed strings) and reading the matches' CNPJ and field
/// cost 100 ms a month at 1.0 (BENCHMARKS.md, "A watchlist's rows by their keys"). Written by
/// builds since it was added (`CREATE TABLE IF NOT EXISTS` in a history carried over).
pub const CHANGE_KEYS: &str = "change_keys (month VARCHAR, company UBIGINT, position UINTEGER, branch UINTEGER, \
     event VARCHAR, of_company BOOLEAN)";

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

/// A company's key: numeric bases are their value; alphanumeric ones (2026 on) come after them,
/// by their base-36 value: dense keys for the numeric bases of today, and a key for every base.
pub fn company_key(basico: &str) -> Option<u64> {
    let bytes = basico.as_bytes();
    if bytes.len() != 8 {
        return None;
    }
    if bytes.iter().all(u8::is_ascii_digit) {
        return Some(bytes.iter().fold(0, |k, b| k * 10 + u64::from(b - b'0')));
    }
    bytes.iter().try_fold(100_000_000, |k, &b| Some((k - 100_000_000) * 36 + u64::from(base36(b)?) + 100_000_000))
}

/// The base of a key (the inverse of [`company_key`]).
pub fn company_base(key: u64) -> String {
    if key < 100_000_000 {
        return format!("{key:08}");
    }
    let mut rest = key - 100_000_000;
    let mut out = [b'0'; 8];
    for slot in out.iter_mut().rev() {
        *slot = digit36((rest % 36) as u8);
        rest /= 36;
    }
    String::from_utf8(out.to_vec()).expect("ASCII")
}

/// An establishment's key within its company: the base-36 value of its order (the CNPJ's
/// characters 9 to 12, `[0-9A-Z]`) times 100 plus its two check digits; `None` for a CNPJ not of
/// 14 such characters.
pub fn branch_key(cnpj: &str) -> Option<u32> {
    let bytes = cnpj.as_bytes();
    let (order, digits) = (bytes.get(8..12)?, bytes.get(12..)?);
    if digits.len() != 2 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let order = order.iter().try_fold(0, |k, &b| Some(k * 36 + u32::from(base36(b)?)))?;
    Some(order * 100 + u32::from(digits[0] - b'0') * 10 + u32::from(digits[1] - b'0'))
}

/// The CNPJ of a company's key and an establishment's (the inverse of [`company_key`] and
/// [`branch_key`]).
pub fn cnpj_of(company: u64, branch: u32) -> String {
    let mut cnpj = company_base(company);
    let mut order = [b'0'; 4];
    let mut rest = branch / 100;
    for slot in order.iter_mut().rev() {
        *slot = digit36((rest % 36) as u8);
        rest /= 36;
    }
    cnpj.push_str(std::str::from_utf8(&order).expect("ASCII"));
    cnpj.push_str(&format!("{:02}", branch % 100));
    cnpj
}

fn base36(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'Z' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn digit36(value: u8) -> u8 {
    if value < 10 { b'0' + value } else { b'A' + value - 10 }
}

impl Companies {
    /// Adds a company; false when its base is not 8 characters of `[0-9A-Z]` (none is: the
    /// normalizer rejects such a CNPJ).
    pub fn insert(&mut self, basico: &str) -> bool {
        company_key(basico).is_some_and(|k| {
            self.0.insert(k);
            true
        })
    }

    pub fn contains(&self, basico: &str) -> bool {
        company_key(basico).is_some_and(|k| self.0.contains(k))
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
        self.0.iter().map(company_base)
    }

    /// The companies' keys ([`company_key`]), in ascending order.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter()
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
        assert_eq!(company_key(basico), expected, "{basico}");
        if let Some(k) = expected {
            assert_eq!(company_base(k), basico, "the base of {k}");
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

    /// The key of an establishment's CNPJ, and back.
    fn check_branch(cnpj: &str, expected: Option<u32>) {
        assert_eq!(branch_key(cnpj), expected, "{cnpj}");
        if let Some(branch) = expected {
            assert_eq!(cnpj_of(company_key(&cnpj[..8]).unwrap(), branch), cnpj, "the CNPJ of {branch}");
        }
    }

    #[test]
    fn every_establishment_has_a_key_within_its_company() {
        check_branch("11222333000181", Some(181));
        check_branch("11222333999999", Some((((9 * 36 + 9) * 36 + 9) * 36 + 9) * 100 + 99));
        check_branch("12ABC34501DE35", Some(((36 + 13) * 36 + 14) * 100 + 35));
        check_branch("12ABC345ZZZZ99", Some((36u32.pow(4) - 1) * 100 + 99));
        check_branch("1122233300018", None);
        check_branch("112223330001811", None);
        check_branch("1122233300018A", None);
        check_branch("11222333000a81", None);
    }

    proptest::proptest! {
        /// Every CNPJ of `[0-9A-Z]{12}[0-9]{2}` is its company's key and its branch's, and two
        /// establishments of a company order by their keys as by their CNPJs' order and digits.
        #[test]
        fn a_cnpj_survives_its_keys(a in "[0-9A-Z]{12}[0-9]{2}", b in "[0-9A-Z]{4}[0-9]{2}") {
            let (company, branch) = (company_key(&a[..8]).unwrap(), branch_key(&a).unwrap());
            proptest::prop_assert_eq!(cnpj_of(company, branch), a.clone());
            let sibling = format!("{}{b}", &a[..8]);
            let numeric = |c: &str| c[8..12].bytes().all(|x| x.is_ascii_digit());
            if numeric(&a) && numeric(&sibling) {
                proptest::prop_assert_eq!(branch.cmp(&branch_key(&sibling).unwrap()), a.cmp(&sibling));
            }
        }
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
