//! The search index beside a DuckDB dataset (`<dataset>.search`): every filter of contract §5 as
//! compressed bitmaps (`roaring`) of establishment ordinals, so that a search is a few bitmap
//! operations instead of a scan. A total is the cardinality of an intersection, a page a select
//! by rank; the page's CNPJs come from a column of the file.
//!
//! Ordinals number the establishments in CNPJ order. The build stores a table in two halves at
//! once, so the lower half is numbered from 0 and the upper half from [`UPPER`]: no half waits
//! for the other to know where it starts. A position (0..n) in the CNPJ column is an ordinal of
//! the lower half, or `UPPER +` its rank in the upper half.
//!
//! Posting tables (a sorted list of keys, a bitmap per key):
//! - equality filters by their stored code: `uf`, `municipio`, `cnae`, `situacao`, and the
//!   company's `porte` and `natureza` carried down to its establishments;
//! - the opening date at four levels, `dia` (`YYYY-MM-DD`), `mes`, `ano`, `decada` (`199`): a
//!   range is the union of the fewest whole units that tile it;
//! - the CEP at three levels, `cep2`, `cep5`, `cep8`: a prefix is the union of the keys of the
//!   first level at least as long that start with it;
//! - the folded words (runs of alphanumeric characters) of `nome` (nome fantasia and razão
//!   social, the company's carried down) and of `bairro`. A one-word term's matches are exactly
//!   the union of the words that contain it; a term of several words or with other characters
//!   yields candidates that the store verifies on the records (see `text::term_words`).
//!
//! Layout: the magic, the CNPJ column (per position, the 12 characters before the check digits
//! packed as a base-36 number, `u64` little-endian, order-preserving), the bitmaps (roaring's
//! portable format), then the directory (varints: counts, per table its name and per key its
//! text, bitmap offset and the XXH3 of the bitmap's bytes, truncated to 32 bits), the build id,
//! the directory's XXH3, its offset and the magic again.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use roaring::{MultiOps, RoaringBitmap};

use crate::lookup::{put_varint, varint};
use crate::text::{Place, civil_from_days, date_text, days_from_civil, parse_date, term_words, words};

const MAGIC: &[u8; 8] = b"CNPJSRC1";

/// The first ordinal of the upper half of the establishments.
pub const UPPER: u32 = 1 << 31;

/// The search index of the dataset at `dataset`.
pub fn search_index_path(dataset: &Path) -> PathBuf {
    let mut name = dataset.as_os_str().to_owned();
    name.push(".search");
    PathBuf::from(name)
}

#[derive(Debug, thiserror::Error)]
pub enum SearchIndexError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// The posting tables, in file order.
const TABLES: [&str; 15] = [
    "uf",
    "municipio",
    "cnae",
    "situacao",
    "porte",
    "natureza",
    "dia",
    "mes",
    "ano",
    "decada",
    "cep2",
    "cep5",
    "cep8",
    "nome",
    "bairro",
];

/// Posting lists of one part of the build, by key.
#[derive(Default)]
pub(crate) struct Postings(foldhash::HashMap<Box<str>, RoaringBitmap>);

impl Postings {
    /// Adds `ordinal`, which is not below any ordinal added before under any key.
    pub(crate) fn add(&mut self, key: &str, ordinal: u32) {
        if key.contains('\n') {
            return; // no filter value can hold a newline (the API validates them)
        }
        match self.0.get_mut(key) {
            // An ordinal added twice (a word twice in a name) is kept once.
            Some(bitmap) => {
                let _ = bitmap.try_push(ordinal);
            }
            None => {
                self.0.insert(key.into(), RoaringBitmap::from_sorted_iter([ordinal]).expect("one value"));
            }
        }
    }

    pub(crate) fn add_range(&mut self, key: &str, ordinals: std::ops::Range<u32>) {
        if !key.contains('\n') {
            self.0.entry(key.into()).or_default().insert_range(ordinals);
        }
    }

    pub(crate) fn add_words(&mut self, folded: &str, ordinals: std::ops::Range<u32>) {
        if ordinals.len() == 1 {
            words(folded, |w| self.add(w, ordinals.start));
        } else {
            words(folded, |w| self.add_range(w, ordinals.clone()));
        }
    }
}

/// What one feed of the build indexed: its posting tables by name.
#[derive(Default)]
pub(crate) struct PartIndex {
    pub(crate) tables: HashMap<&'static str, Postings>,
}

impl PartIndex {
    pub(crate) fn table(&mut self, name: &'static str) -> &mut Postings {
        self.tables.entry(name).or_default()
    }
}

/// Packs the 12 characters of a CNPJ before its check digits (`[0-9A-Z]`) into a number that
/// sorts as the text does.
pub(crate) fn pack(base: &[u8]) -> u64 {
    base.iter().take(12).fold(0u64, |n, &c| {
        let digit = if c.is_ascii_digit() { c - b'0' } else { c.wrapping_sub(b'A').wrapping_add(10) };
        n * 36 + u64::from(digit.min(35))
    })
}

fn unpack(mut n: u64) -> String {
    let mut base = [0u8; 12];
    for slot in base.iter_mut().rev() {
        let d = (n % 36) as u8;
        *slot = if d < 10 { b'0' + d } else { b'A' + d - 10 };
        n /= 36;
    }
    let dv = cnpj_model::check_digits(&base).expect("packed characters are valid");
    let mut cnpj = String::from_utf8(base.to_vec()).expect("ASCII");
    cnpj.push(char::from(dv[0]));
    cnpj.push(char::from(dv[1]));
    cnpj
}

/// Unions each key's bitmaps over the parts; keys sorted.
fn merged(parts: &mut [PartIndex], table: &str) -> Vec<(Box<str>, RoaringBitmap)> {
    let mut all: foldhash::HashMap<Box<str>, RoaringBitmap> = foldhash::HashMap::default();
    for part in parts.iter_mut() {
        let Some(postings) = part.tables.remove(table) else { continue };
        for (key, bitmap) in postings.0 {
            match all.get_mut(&key) {
                Some(acc) => *acc |= bitmap,
                None => {
                    all.insert(key, bitmap);
                }
            }
        }
    }
    let mut keys: Vec<(Box<str>, RoaringBitmap)> = all.into_iter().collect();
    keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    keys
}

/// Groups sorted `(key, bitmap)` by `group(key)` and unions each group.
fn rolled_up(keys: &[(Box<str>, RoaringBitmap)], group: impl Fn(&str) -> String) -> Vec<(Box<str>, RoaringBitmap)> {
    let mut out: Vec<(Box<str>, RoaringBitmap)> = Vec::new();
    let mut start = 0;
    while start < keys.len() {
        let g = group(&keys[start].0);
        let end = start + keys[start..].iter().take_while(|(k, _)| group(k) == g).count();
        out.push((g.into(), keys[start..end].iter().map(|(_, b)| b).union()));
        start = end;
    }
    out
}

/// Writes the search index file from the parts' postings and CNPJ columns (`columns`: the lower
/// half's file, then the upper half's, each of packed `u64`s).
pub(crate) fn write_index(
    path: &Path,
    mut parts: Vec<PartIndex>,
    columns: [(&Path, u64); 2],
    build_id: &str,
) -> Result<(), SearchIndexError> {
    let io = |source| SearchIndexError::Io { path: path.to_owned(), source };
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?);
    out.write_all(MAGIC).map_err(io)?;
    let mut offset = MAGIC.len() as u64;
    let cnpjs_at = offset;
    for (column, _) in columns {
        let mut file = File::open(column).map_err(|source| SearchIndexError::Io { path: column.to_owned(), source })?;
        offset += std::io::copy(&mut file, &mut out).map_err(io)?;
    }
    let mut directory = Vec::new();
    put_varint(&mut directory, columns[0].1);
    put_varint(&mut directory, columns[1].1);
    put_varint(&mut directory, cnpjs_at);
    let mut bytes = Vec::new();
    let mut write_table = |name: &str, keys: &[(Box<str>, RoaringBitmap)], directory: &mut Vec<u8>| {
        put_varint(directory, name.len() as u64);
        directory.extend_from_slice(name.as_bytes());
        put_varint(directory, keys.len() as u64);
        for (key, bitmap) in keys {
            bytes.clear();
            bitmap.serialize_into(&mut bytes).map_err(io)?;
            put_varint(directory, key.len() as u64);
            directory.extend_from_slice(key.as_bytes());
            put_varint(directory, offset);
            directory.extend_from_slice(&(xxhash_rust::xxh3::xxh3_64(&bytes) as u32).to_le_bytes());
            out.write_all(&bytes).map_err(io)?;
            offset += bytes.len() as u64;
        }
        Ok::<(), SearchIndexError>(())
    };
    put_varint(&mut directory, TABLES.len() as u64);
    for name in TABLES {
        match name {
            "mes" | "ano" | "decada" | "cep5" | "cep2" => continue, // rolled up below
            "dia" => {
                let days = merged(&mut parts, "dia");
                let months = rolled_up(&days, |k| k[..7].to_owned());
                let years = rolled_up(&months, |k| k[..4].to_owned());
                let decades = rolled_up(&years, |k| k[..3].to_owned());
                write_table("dia", &days, &mut directory)?;
                write_table("mes", &months, &mut directory)?;
                write_table("ano", &years, &mut directory)?;
                write_table("decada", &decades, &mut directory)?;
            }
            "cep8" => {
                let ceps = merged(&mut parts, "cep8");
                let ceps5 = rolled_up(&ceps, |k| k[..5.min(k.len())].to_owned());
                let ceps2 = rolled_up(&ceps5, |k| k[..2.min(k.len())].to_owned());
                write_table("cep2", &ceps2, &mut directory)?;
                write_table("cep5", &ceps5, &mut directory)?;
                write_table("cep8", &ceps, &mut directory)?;
            }
            name => {
                let keys = merged(&mut parts, name);
                write_table(name, &keys, &mut directory)?;
            }
        }
    }
    // The end of the last bitmap.
    put_varint(&mut directory, offset);
    put_varint(&mut directory, build_id.len() as u64);
    directory.extend_from_slice(build_id.as_bytes());
    out.write_all(&directory).map_err(io)?;
    out.write_all(&xxhash_rust::xxh3::xxh3_64(&directory).to_le_bytes()).map_err(io)?;
    out.write_all(&offset.to_le_bytes()).map_err(io)?;
    out.write_all(MAGIC).map_err(io)?;
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)
}

/// The keys of one posting table, `\n`-separated in one buffer (so that words can be searched
/// with `memmem`), and where each key's bitmap is.
struct Keys {
    /// `\n` key `\n` key … `\n`.
    text: Vec<u8>,
    /// Where each key starts in `text`, and the end of the last one + 1.
    starts: Vec<u32>,
    /// Where each key's bitmap starts in the file, and the end of the last one.
    offsets: Vec<u64>,
    checksums: Vec<u32>,
}

impl Keys {
    fn len(&self) -> usize {
        self.checksums.len()
    }

    fn key(&self, i: usize) -> &[u8] {
        &self.text[self.starts[i] as usize..self.starts[i + 1] as usize - 1]
    }

    /// The first key not below `key`.
    fn lower_bound(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) < key { lo = mid + 1 } else { hi = mid }
        }
        lo
    }

    fn find(&self, key: &[u8]) -> Option<usize> {
        let i = self.lower_bound(key);
        (i < self.len() && self.key(i) == key).then_some(i)
    }

    /// The keys that start with `prefix`.
    fn prefixed(&self, prefix: &[u8]) -> std::ops::Range<usize> {
        let start = self.lower_bound(prefix);
        let end = start + (start..self.len()).take_while(|&i| self.key(i).starts_with(prefix)).count();
        start..end
    }

    /// The keys (words) in which `word` stands at `place`, in key order.
    fn placed(&self, word: &str, place: Place) -> Vec<usize> {
        if place == Place::Whole {
            return self.find(word.as_bytes()).into_iter().collect();
        }
        let mut needle = Vec::with_capacity(word.len() + 2);
        if place == Place::Start {
            needle.push(b'\n');
        }
        needle.extend_from_slice(word.as_bytes());
        if place == Place::End {
            needle.push(b'\n');
        }
        let mut found: Vec<usize> = Vec::new();
        for at in memchr::memmem::find_iter(&self.text, &needle) {
            // The key that holds the match (a leading `\n` belongs to the key after it).
            let at = (at + usize::from(place == Place::Start)) as u32;
            let key = self.starts.partition_point(|&s| s <= at) - 1;
            if found.last() != Some(&key) {
                found.push(key);
            }
        }
        found
    }
}

/// A condition of a search, in the index's terms. All conditions hold at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// A 14-character CNPJ, or the 8 characters of a company's establishments.
    Cnpj(String),
    /// The key of `table` is one of `values` (several: a city name of several codes).
    AnyOf { table: &'static str, values: Vec<String> },
    /// The opening date, `YYYY-MM-DD`, inclusive on both sides.
    Opening { from: Option<String>, to: Option<String> },
    /// A CEP prefix of digits.
    ZipPrefix(String),
    /// A folded term in the words of `table` (`nome` or `bairro`).
    Term { table: &'static str, folded: String },
}

/// Establishments that match (or may match) a search.
#[derive(Debug)]
pub struct Matches {
    pub ordinals: RoaringBitmap,
    /// False when a term of several words (or with other characters) gave candidates that must
    /// still be checked against the text.
    pub exact: bool,
}

/// An open search index.
pub struct SearchIndex {
    file: File,
    path: PathBuf,
    build_id: String,
    lower: u64,
    upper: u64,
    cnpjs_at: u64,
    tables: HashMap<String, Keys>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SearchIndex({})", self.path.display())
    }
}

impl SearchIndex {
    pub fn open(path: &Path) -> Result<SearchIndex, SearchIndexError> {
        let invalid = |reason: &str| SearchIndexError::Invalid { path: path.to_owned(), reason: reason.to_owned() };
        let io = |source| SearchIndexError::Io { path: path.to_owned(), source };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut tail = [0u8; 24];
        if len < 32 || file.read_exact_at(&mut tail, len - 24).is_err() || &tail[16..] != MAGIC {
            return Err(invalid("not a search index of this version"));
        }
        let at = u64::from_le_bytes(tail[8..16].try_into().expect("8 bytes"));
        let checksum = u64::from_le_bytes(tail[..8].try_into().expect("8 bytes"));
        let size = (len - 24).checked_sub(at).ok_or_else(|| invalid("bad directory offset"))?;
        let mut directory = vec![0u8; size as usize];
        file.read_exact_at(&mut directory, at).map_err(io)?;
        if xxhash_rust::xxh3::xxh3_64(&directory) != checksum {
            return Err(invalid("the directory does not match its checksum"));
        }
        let parsed = (|| {
            let mut pos = 0;
            let (lower, upper) = (varint(&directory, &mut pos)?, varint(&directory, &mut pos)?);
            let cnpjs_at = varint(&directory, &mut pos)?;
            let n = varint(&directory, &mut pos)? as usize;
            let mut pos_tables = Vec::with_capacity(n);
            for _ in 0..n {
                let len = varint(&directory, &mut pos)? as usize;
                let name = String::from_utf8(directory.get(pos..pos + len)?.to_vec()).ok()?;
                pos += len;
                let count = varint(&directory, &mut pos)? as usize;
                let mut keys = Keys {
                    text: vec![b'\n'],
                    starts: Vec::with_capacity(count + 1),
                    offsets: Vec::with_capacity(count + 1),
                    checksums: Vec::with_capacity(count),
                };
                for _ in 0..count {
                    let len = varint(&directory, &mut pos)? as usize;
                    keys.starts.push(keys.text.len() as u32);
                    keys.text.extend_from_slice(directory.get(pos..pos + len)?);
                    keys.text.push(b'\n');
                    pos += len;
                    keys.offsets.push(varint(&directory, &mut pos)?);
                    keys.checksums.push(u32::from_le_bytes(directory.get(pos..pos + 4)?.try_into().ok()?));
                    pos += 4;
                }
                keys.starts.push(keys.text.len() as u32);
                pos_tables.push((name, keys));
            }
            let end = varint(&directory, &mut pos)?;
            // Each table's bitmaps end where the next table's begin; the last end is recorded.
            let mut ends: Vec<u64> = pos_tables.iter().filter_map(|(_, k)| k.offsets.first().copied()).collect();
            ends.push(end);
            for (_, keys) in pos_tables.iter_mut() {
                let next = keys.offsets.first().and_then(|&first| ends.iter().copied().find(|&e| e > first));
                keys.offsets.push(next.unwrap_or(end));
            }
            let len = varint(&directory, &mut pos)? as usize;
            let build_id = String::from_utf8(directory.get(pos..pos + len)?.to_vec()).ok()?;
            Some((lower, upper, cnpjs_at, pos_tables, build_id))
        })();
        let (lower, upper, cnpjs_at, tables, build_id) = parsed.ok_or_else(|| invalid("corrupt directory"))?;
        Ok(SearchIndex {
            file,
            path: path.to_owned(),
            build_id,
            lower,
            upper,
            cnpjs_at,
            tables: tables.into_iter().collect(),
        })
    }

    /// The build this index was written for.
    pub fn build_id(&self) -> &str {
        &self.build_id
    }

    /// Establishments in the index.
    pub fn len(&self) -> u64 {
        self.lower + self.upper
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn corrupt(&self, reason: String) -> SearchIndexError {
        SearchIndexError::Invalid { path: self.path.clone(), reason }
    }

    fn keys(&self, table: &str) -> Result<&Keys, SearchIndexError> {
        self.tables.get(table).ok_or_else(|| self.corrupt(format!("no posting table {table}")))
    }

    /// The bitmap of key `i` of `table`, checked against its checksum.
    fn bitmap(&self, keys: &Keys, i: usize) -> Result<RoaringBitmap, SearchIndexError> {
        let (start, end) = (keys.offsets[i], keys.offsets[i + 1]);
        let mut bytes = vec![0u8; end.saturating_sub(start) as usize];
        self.file
            .read_exact_at(&mut bytes, start)
            .map_err(|source| SearchIndexError::Io { path: self.path.clone(), source })?;
        if xxhash_rust::xxh3::xxh3_64(&bytes) as u32 != keys.checksums[i] {
            return Err(self.corrupt(format!("the bitmap at {start} does not match its checksum")));
        }
        RoaringBitmap::deserialize_from(bytes.as_slice())
            .map_err(|e| self.corrupt(format!("the bitmap at {start}: {e}")))
    }

    fn union(&self, keys: &Keys, indexes: impl IntoIterator<Item = usize>) -> Result<RoaringBitmap, SearchIndexError> {
        let bitmaps = indexes.into_iter().map(|i| self.bitmap(keys, i)).collect::<Result<Vec<_>, _>>()?;
        Ok(bitmaps.union())
    }

    fn position(&self, ordinal: u32) -> u64 {
        if ordinal >= UPPER { self.lower + u64::from(ordinal - UPPER) } else { u64::from(ordinal) }
    }

    /// Ordinals of the positions `range`.
    fn ordinals(&self, range: std::ops::Range<u64>) -> RoaringBitmap {
        let mut out = RoaringBitmap::new();
        let lower = range.start.min(self.lower)..range.end.min(self.lower);
        if !lower.is_empty() {
            out.insert_range(lower.start as u32..lower.end as u32);
        }
        let upper = range.start.max(self.lower) - self.lower..range.end.max(self.lower) - self.lower;
        if !upper.is_empty() {
            out.insert_range(UPPER + upper.start as u32..UPPER + upper.end as u32);
        }
        out
    }

    fn packed_at(&self, position: u64) -> Result<u64, SearchIndexError> {
        let mut bytes = [0u8; 8];
        self.file
            .read_exact_at(&mut bytes, self.cnpjs_at + position * 8)
            .map_err(|source| SearchIndexError::Io { path: self.path.clone(), source })?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// The first position whose packed CNPJ is not below `packed`.
    fn lower_bound(&self, packed: u64) -> Result<u64, SearchIndexError> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.packed_at(mid)? < packed { lo = mid + 1 } else { hi = mid }
        }
        Ok(lo)
    }

    /// The establishments of one condition, and whether they are exactly its matches.
    fn condition(&self, condition: &Condition) -> Result<Option<(RoaringBitmap, bool)>, SearchIndexError> {
        Ok(Some(match condition {
            Condition::Cnpj(cnpj) => {
                let (first, last) = match cnpj.len() {
                    14 => (pack(cnpj.as_bytes()), pack(cnpj.as_bytes())),
                    _ => (pack(format!("{cnpj}0000").as_bytes()), pack(format!("{cnpj}ZZZZ").as_bytes())),
                };
                let start = self.lower_bound(first)?;
                let end = self.lower_bound(last.saturating_add(1))?;
                let mut set = self.ordinals(start..end);
                // A full CNPJ must also have its check digits.
                if cnpj.len() == 14 && start < end && unpack(self.packed_at(start)?) != *cnpj {
                    set.clear();
                }
                (set, true)
            }
            Condition::AnyOf { table, values } => {
                let keys = self.keys(table)?;
                (self.union(keys, values.iter().filter_map(|v| keys.find(v.as_bytes())))?, true)
            }
            Condition::Opening { from, to } => {
                let days = self.keys("dia")?;
                if days.len() == 0 {
                    return Ok(Some((RoaringBitmap::new(), true)));
                }
                let day = |i: usize| parse_date(std::str::from_utf8(days.key(i)).unwrap_or_default());
                let bound = |text: &Option<String>, default: Option<i32>| match text {
                    Some(t) => parse_date(t),
                    None => default,
                };
                let (Some(from), Some(to)) = (bound(from, day(0)), bound(to, day(days.len() - 1))) else {
                    return Err(self.corrupt("a date key does not parse".into()));
                };
                (self.date_range(from, to)?, true)
            }
            Condition::ZipPrefix(prefix) => {
                let level = [("cep2", 2), ("cep5", 5), ("cep8", 8)].into_iter().find(|(_, n)| *n >= prefix.len());
                let Some((table, _)) = level else { return Ok(Some((RoaringBitmap::new(), true))) };
                let keys = self.keys(table)?;
                (self.union(keys, keys.prefixed(prefix.as_bytes()))?, true)
            }
            Condition::Term { table, folded } => {
                let (words, exact) = term_words(folded);
                if words.is_empty() {
                    return Ok(None);
                }
                let keys = self.keys(table)?;
                let mut sets = Vec::with_capacity(words.len());
                for (word, place) in words {
                    sets.push(self.union(keys, keys.placed(word, place))?);
                }
                (intersect(sets), exact)
            }
        }))
    }

    /// The days `from..=to` as the union of the fewest whole decades, years, months and days.
    fn date_range(&self, from: i32, to: i32) -> Result<RoaringBitmap, SearchIndexError> {
        let mut parts: Vec<(&str, String)> = Vec::new();
        let mut day = from;
        while day <= to {
            let (y, m, d) = civil_from_days(day);
            let next_year = days_from_civil(y + 1, 1, 1);
            let next_decade = days_from_civil(y - y.rem_euclid(10) + 10, 1, 1);
            let next_month = if m == 12 { next_year } else { days_from_civil(y, m + 1, 1) };
            let (table, key, next) = if m == 1 && d == 1 && y.rem_euclid(10) == 0 && next_decade - 1 <= to {
                ("decada", format!("{:03}", y.div_euclid(10)), next_decade)
            } else if m == 1 && d == 1 && next_year - 1 <= to {
                ("ano", format!("{y:04}"), next_year)
            } else if d == 1 && next_month - 1 <= to {
                ("mes", format!("{y:04}-{m:02}"), next_month)
            } else {
                ("dia", date_text(day), day + 1)
            };
            parts.push((table, key));
            day = next;
        }
        let mut bitmaps = Vec::with_capacity(parts.len());
        for (table, key) in parts {
            let keys = self.keys(table)?;
            if let Some(i) = keys.find(key.as_bytes()) {
                bitmaps.push(self.bitmap(keys, i)?);
            }
        }
        Ok(bitmaps.union())
    }

    /// The establishments that match every condition (all of them for none), or `None` when a
    /// condition is beyond the index (a term without a word character): the caller then
    /// searches by SQL.
    pub fn matches(&self, conditions: &[Condition]) -> Result<Option<Matches>, SearchIndexError> {
        let mut sets = Vec::with_capacity(conditions.len());
        let mut exact = true;
        for condition in conditions {
            let Some((set, is_exact)) = self.condition(condition)? else { return Ok(None) };
            exact &= is_exact;
            if set.is_empty() {
                return Ok(Some(Matches { ordinals: set, exact: true }));
            }
            sets.push(set);
        }
        let ordinals = if sets.is_empty() { self.ordinals(0..self.len()) } else { intersect(sets) };
        Ok(Some(Matches { ordinals, exact }))
    }

    /// The CNPJs of the ordinals of `set` from rank `offset` on, at most `limit` of them.
    pub fn cnpjs(&self, set: &RoaringBitmap, offset: u64, limit: u64) -> Result<Vec<String>, SearchIndexError> {
        let Some(first) = u32::try_from(offset).ok().and_then(|o| set.select(o)) else { return Ok(Vec::new()) };
        set.range(first..)
            .take(limit as usize)
            .map(|ordinal| self.packed_at(self.position(ordinal)).map(unpack))
            .collect()
    }
}

/// The intersection of `sets`, smallest first.
fn intersect(mut sets: Vec<RoaringBitmap>) -> RoaringBitmap {
    sets.sort_by_key(RoaringBitmap::len);
    let mut sets = sets.into_iter();
    let Some(mut acc) = sets.next() else { return RoaringBitmap::new() };
    for set in sets {
        if acc.is_empty() {
            break;
        }
        acc &= set;
    }
    acc
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn packing_keeps_text_order(a in "[0-9A-Z]{12}", b in "[0-9A-Z]{12}") {
            prop_assert_eq!(pack(a.as_bytes()).cmp(&pack(b.as_bytes())), a.cmp(&b));
            let dv = cnpj_model::check_digits(a.as_bytes().try_into().unwrap()).unwrap();
            prop_assert_eq!(unpack(pack(a.as_bytes())), format!("{a}{}", String::from_utf8_lossy(&dv)));
        }
    }

    fn check(keys: &[&str], word: &str, place: Place, expected: &[&str]) {
        let mut k = Keys { text: vec![b'\n'], starts: Vec::new(), offsets: Vec::new(), checksums: Vec::new() };
        for key in keys {
            k.starts.push(k.text.len() as u32);
            k.text.extend_from_slice(key.as_bytes());
            k.text.push(b'\n');
            k.checksums.push(0);
        }
        k.starts.push(k.text.len() as u32);
        let found: Vec<&str> = k.placed(word, place).into_iter().map(|i| keys[i]).collect();
        assert_eq!(found, expected, "{word} {place:?}");
    }

    #[test]
    fn words_are_found_where_they_stand() {
        let keys = ["ana", "banana", "bar", "nan", "padaria", "ria"];
        check(&keys, "an", Place::Inside, &["ana", "banana", "nan"]);
        check(&keys, "ana", Place::Inside, &["ana", "banana"]);
        check(&keys, "ria", Place::End, &["padaria", "ria"]);
        check(&keys, "ba", Place::Start, &["banana", "bar"]);
        check(&keys, "ria", Place::Whole, &["ria"]);
        check(&keys, "ar", Place::Whole, &[]);
        check(&keys, "x", Place::Inside, &[]);
        check(&keys, "a", Place::Start, &["ana"]);
    }
}
