//! The search index read: the file mapped, its directory parsed into each table's keys, a key's
//! bitmap read and checked against its checksum, the columns read by position. Big bitmaps once
//! read, and the sets of terms that took a while to reckon, are kept in memory up to the cache's
//! budget.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use roaring::{MultiOps, RoaringBitmap};

use super::SearchIndexError;
use super::format::{MAGIC, PARTNER_ID_BYTES, UPPER, decode_list, pack};
use crate::lookup::varint;

/// The keys of one posting table, `\n`-separated in one buffer (so that words can be searched
/// with `memmem`), and where each key's bitmap is.
pub(super) struct Keys {
    /// `\n` key `\n` key … `\n`.
    pub(super) text: Vec<u8>,
    /// Where each key starts in `text`, and the end of the last one + 1.
    pub(super) starts: Vec<u32>,
    pub(super) spans: Vec<Span>,
}

/// Where a key's bitmap is in the file.
#[derive(Clone, Copy)]
pub(super) struct Span {
    pub(super) at: u64,
    /// Its length `<< 1 | list` (see [`encode`](super::format::encode)).
    pub(super) size: u32,
    /// The XXH3 of its bytes, truncated.
    pub(super) checksum: u32,
}

impl Span {
    fn len(self) -> usize {
        (self.size >> 1) as usize
    }
}

impl Keys {
    pub(super) fn len(&self) -> usize {
        self.spans.len()
    }

    pub(super) fn key(&self, i: usize) -> &[u8] {
        &self.text[self.starts[i] as usize..self.starts[i + 1] as usize - 1]
    }

    /// The first key not below `key`.
    pub(super) fn lower_bound(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.key(mid) < key { lo = mid + 1 } else { hi = mid }
        }
        lo
    }

    pub(super) fn find(&self, key: &[u8]) -> Option<usize> {
        let i = self.lower_bound(key);
        (i < self.len() && self.key(i) == key).then_some(i)
    }

    /// The keys that start with `prefix`.
    pub(super) fn prefixed(&self, prefix: &[u8]) -> std::ops::Range<usize> {
        let start = self.lower_bound(prefix);
        let end = start + (start..self.len()).take_while(|&i| self.key(i).starts_with(prefix)).count();
        start..end
    }
}

/// An open search index.
pub struct SearchIndex {
    map: memmap2::Mmap,
    path: PathBuf,
    build_id: String,
    lower: u64,
    upper: u64,
    /// Offsets of the CNPJ, day and CEP columns.
    columns: [usize; 3],
    /// Partner identities, and the offset of their ids' column.
    partners: (u64, usize),
    tables: HashMap<String, Keys>,
    cache: Mutex<Cache>,
}

/// Bitmaps of at least this many bytes are kept once read (about 1.5 % of the establishments).
const CACHED_FROM: usize = 128 << 10;
/// Lists of at least this many bytes too (some 25,000 ordinals or more): making a list's bitmap
/// again costs more than reading roaring's.
const LIST_CACHED_FROM: usize = 32 << 10;

/// What the cache keeps: a big bitmap by its offset, or a costly condition's set by the
/// condition written out (`plan`'s `Condition` in full, as `Debug` writes it).
#[derive(PartialEq, Eq, Hash)]
pub(super) enum Cached {
    Bitmap(u64),
    Condition(String),
}

/// Big bitmaps already read and costly conditions' sets, up to `limit` bytes (past it the cache starts
/// over).
struct Cache {
    map: HashMap<Cached, Arc<RoaringBitmap>>,
    bytes: usize,
    limit: usize,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SearchIndex({})", self.path.display())
    }
}

/// Maps `file` into memory.
#[allow(unsafe_code)]
fn map(file: &File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: the index file is written once under a temporary name and renamed into place, never
    // modified: a new build renames another file over the name, and this mapping keeps the old
    // inode. Every read of the mapping is bounds-checked against its length.
    unsafe { memmap2::Mmap::map(file) }
}

impl SearchIndex {
    /// Opens the index at `path`, keeping up to `cache_bytes` of its big bitmaps once read.
    pub fn open(path: &Path, cache_bytes: usize) -> Result<SearchIndex, SearchIndexError> {
        let invalid = |reason: &str| SearchIndexError::Invalid { path: path.to_owned(), reason: reason.to_owned() };
        let io = |source| SearchIndexError::Io { path: path.to_owned(), source };
        let file = File::open(path).map_err(io)?;
        let map = map(&file).map_err(io)?;
        let len = map.len();
        if len < 32 {
            return Err(invalid("not a search index"));
        }
        if let Some(found) = [&map[..8], &map[len - 8..]].into_iter().find(|magic| magic != MAGIC) {
            return Err(invalid(&crate::refused_format("search index", found, MAGIC)));
        }
        let word = |at: usize| u64::from_le_bytes(map[at..at + 8].try_into().expect("8 bytes"));
        let (checksum, at) = (word(len - 24), word(len - 16) as usize);
        let directory = map.get(at..len - 24).ok_or_else(|| invalid("bad directory offset"))?;
        if xxhash_rust::xxh3::xxh3_64(directory) != checksum {
            return Err(invalid("the directory does not match its checksum"));
        }
        let parsed = (|| {
            let mut pos = 0;
            let next = |pos: &mut usize| varint(directory, pos);
            let (lower, upper) = (next(&mut pos)?, next(&mut pos)?);
            let columns = [next(&mut pos)? as usize, next(&mut pos)? as usize, next(&mut pos)? as usize];
            let partners = (next(&mut pos)?, next(&mut pos)? as usize);
            let n = next(&mut pos)? as usize;
            let mut tables = HashMap::with_capacity(n);
            for _ in 0..n {
                let len = next(&mut pos)? as usize;
                let name = String::from_utf8(directory.get(pos..pos + len)?.to_vec()).ok()?;
                pos += len;
                let count = next(&mut pos)? as usize;
                let mut offset = next(&mut pos)?;
                let mut keys =
                    Keys { text: vec![b'\n'], starts: Vec::with_capacity(count + 1), spans: Vec::with_capacity(count) };
                for _ in 0..count {
                    let len = next(&mut pos)? as usize;
                    keys.starts.push(keys.text.len() as u32);
                    keys.text.extend_from_slice(directory.get(pos..pos + len)?);
                    keys.text.push(b'\n');
                    pos += len;
                    let size = u32::try_from(next(&mut pos)?).ok()?;
                    let checksum = u32::from_le_bytes(directory.get(pos..pos + 4)?.try_into().ok()?);
                    pos += 4;
                    let span = Span { at: offset, size, checksum };
                    offset = offset.checked_add(span.len() as u64).filter(|&end| end <= at as u64)?;
                    keys.spans.push(span);
                }
                keys.starts.push(keys.text.len() as u32);
                tables.insert(name, keys);
            }
            let n = next(&mut pos)? as usize;
            let build_id = String::from_utf8(directory.get(pos..pos + n)?.to_vec()).ok()?;
            let rows = (lower + upper) as usize;
            (columns[2] + rows * 2 <= at && columns[1] + rows <= at && columns[0] + rows * 8 <= at).then_some(())?;
            (partners.1.checked_add((partners.0 as usize).checked_mul(PARTNER_ID_BYTES)?)? <= at).then_some(())?;
            Some((lower, upper, columns, partners, tables, build_id))
        })();
        let (lower, upper, columns, partners, tables, build_id) = parsed.ok_or_else(|| invalid("corrupt directory"))?;
        let cache = Mutex::new(Cache { map: HashMap::new(), bytes: 0, limit: cache_bytes });
        Ok(SearchIndex { map, path: path.to_owned(), build_id, lower, upper, columns, partners, tables, cache })
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

    /// Partner identities in the index.
    pub fn partners(&self) -> u64 {
        self.partners.0
    }

    /// The `partner_id` of the partner `ordinal` (below [`SearchIndex::partners`]).
    pub(super) fn partner_id_at(&self, ordinal: u32) -> String {
        let at = self.partners.1 + ordinal as usize * PARTNER_ID_BYTES;
        cnpj_model::partner::id_of_bytes(self.map[at..at + PARTNER_ID_BYTES].try_into().expect("10 bytes"))
    }

    pub(super) fn corrupt(&self, reason: String) -> SearchIndexError {
        SearchIndexError::Invalid { path: self.path.clone(), reason }
    }

    pub(super) fn keys(&self, table: &str) -> Result<&Keys, SearchIndexError> {
        self.tables.get(table).ok_or_else(|| self.corrupt(format!("no posting table {table}")))
    }

    /// The bitmap of key `i`, checked against its checksum; the big ones (the broad filters,
    /// whose reading and checking is most of a search's time) kept once read, up to
    /// the cache's limit.
    pub(super) fn bitmap(&self, keys: &Keys, i: usize) -> Result<Arc<RoaringBitmap>, SearchIndexError> {
        let span = keys.spans[i];
        let (start, len) = (span.at, span.len());
        let list = span.size & 1 == 1;
        let cached = len >= if list { LIST_CACHED_FROM } else { CACHED_FROM };
        if cached && let Some(hit) = self.cached(&Cached::Bitmap(start)) {
            return Ok(hit);
        }
        let bytes = &self.map[start as usize..start as usize + len];
        if xxhash_rust::xxh3::xxh3_64(bytes) as u32 != span.checksum {
            return Err(self.corrupt(format!("the bitmap at {start} does not match its checksum")));
        }
        let bitmap = match list {
            true => decode_list(bytes).ok_or_else(|| "a list of ordinals that does not read back".to_owned()),
            false => RoaringBitmap::deserialize_from(bytes).map_err(|e| e.to_string()),
        };
        let bitmap = Arc::new(bitmap.map_err(|e| self.corrupt(format!("the bitmap at {start}: {e}")))?);
        if cached {
            self.keep(Cached::Bitmap(start), &bitmap, bitmap.serialized_size());
        }
        Ok(bitmap)
    }

    pub(super) fn cached(&self, key: &Cached) -> Option<Arc<RoaringBitmap>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).map.get(key).cloned()
    }

    /// Keeps `set`, of about `bytes`, under `key`; past the cache's limit the cache starts over.
    pub(super) fn keep(&self, key: Cached, set: &Arc<RoaringBitmap>, bytes: usize) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.bytes + bytes > cache.limit {
            cache.map.clear();
            cache.bytes = 0;
        }
        cache.bytes += bytes;
        cache.map.insert(key, Arc::clone(set));
    }

    pub(super) fn union(
        &self,
        keys: &Keys,
        indexes: impl IntoIterator<Item = usize>,
    ) -> Result<Arc<RoaringBitmap>, SearchIndexError> {
        let mut bitmaps = indexes.into_iter().map(|i| self.bitmap(keys, i)).collect::<Result<Vec<_>, _>>()?;
        if bitmaps.len() == 1 {
            return Ok(bitmaps.pop().expect("one"));
        }
        Ok(Arc::new(bitmaps.iter().map(|b| b.as_ref()).union()))
    }

    pub(super) fn position(&self, ordinal: u32) -> usize {
        (if ordinal >= UPPER { self.lower + u64::from(ordinal - UPPER) } else { u64::from(ordinal) }) as usize
    }

    /// Every ordinal, as full bitmap containers. Hand-made for speed: `insert_range` makes run
    /// containers, from which taking the branches' 3.1 M scattered ordinals at 1.0 took 54 ms
    /// (a microbenchmark of roaring 0.12); from full bitmap containers, 13 ms.
    pub(super) fn every(&self) -> RoaringBitmap {
        let full = |start: u32, len: u64| {
            let whole = (len / 8) as usize;
            let mut part = RoaringBitmap::from_lsb0_bytes(start, &vec![0xFF; whole]);
            part.insert_range(start + (whole * 8) as u32..start + len as u32);
            part
        };
        let mut out = full(0, self.lower);
        if self.upper > 0 {
            out |= full(UPPER, self.upper);
        }
        out
    }

    /// Ordinals of the positions `range`.
    pub(super) fn ordinals(&self, range: std::ops::Range<u64>) -> RoaringBitmap {
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

    pub(super) fn packed_at(&self, position: usize) -> u64 {
        let at = self.columns[0] + position * 8;
        u64::from_le_bytes(self.map[at..at + 8].try_into().expect("8 bytes"))
    }

    pub(super) fn day_at(&self, position: usize) -> u8 {
        self.map[self.columns[1] + position]
    }

    pub(super) fn cep_suffix_at(&self, position: usize) -> u16 {
        let at = self.columns[2] + position * 2;
        u16::from_le_bytes(self.map[at..at + 2].try_into().expect("2 bytes"))
    }

    /// The first position whose packed CNPJ is not below `packed`.
    pub(super) fn lower_bound(&self, packed: u64) -> u64 {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.packed_at(mid as usize) < packed { lo = mid + 1 } else { hi = mid }
        }
        lo
    }

    /// The positions of a company's establishments (its 8 characters): one run, in CNPJ order.
    pub(super) fn company_positions(&self, basico: &str) -> std::ops::Range<u64> {
        let (first, last) = (pack(format!("{basico}0000").as_bytes()), pack(format!("{basico}ZZZZ").as_bytes()));
        self.lower_bound(first)..self.lower_bound(last.saturating_add(1))
    }

    /// `set` filtered by `keep(position)`.
    pub(super) fn filtered(&self, set: &RoaringBitmap, keep: impl Fn(usize) -> bool) -> RoaringBitmap {
        RoaringBitmap::from_sorted_iter(set.iter().filter(|&o| keep(self.position(o)))).expect("ascending")
    }

    /// The keys of `table`, the index of `key` in them and its bitmap's length, if it is held.
    pub(super) fn span(&self, table: &str, key: &str) -> Option<(&Keys, usize, u32)> {
        let keys = self.tables.get(table)?;
        keys.find(key.as_bytes()).map(|i| (keys, i, keys.spans[i].len() as u32))
    }
}

/// The union of `parts`, into a copy of the biggest (arrays merged as arrays: `MultiOps::union`
/// turns each into a bitmap and back, which costs more than the merge for the small parts of a
/// date range).
pub(super) fn union(mut parts: Vec<Arc<RoaringBitmap>>) -> RoaringBitmap {
    parts.sort_by_key(|p| std::cmp::Reverse(p.len()));
    let mut parts = parts.into_iter();
    let Some(first) = parts.next() else { return RoaringBitmap::new() };
    let mut out = Arc::unwrap_or_clone(first);
    for part in parts {
        out |= part.as_ref();
    }
    out
}

/// The intersection of `sets`, smallest first (one set is itself, not a copy).
pub(super) fn intersect(mut sets: Vec<Arc<RoaringBitmap>>) -> Arc<RoaringBitmap> {
    sets.sort_by_key(|s| s.len());
    let mut sets = sets.into_iter();
    let Some(first) = sets.next() else { return Arc::default() };
    let Some(second) = sets.next() else { return first };
    let mut acc = first.as_ref() & second.as_ref();
    for set in sets {
        if acc.is_empty() {
            break;
        }
        acc &= set.as_ref();
    }
    Arc::new(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::plan::date_ranges::{dates, index};

    #[test]
    fn an_index_of_another_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let index = index(dir.path(), &dates());
        let path = index.path.clone();
        drop(index);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        for at in [0, n - 8] {
            bytes[at..at + 8].copy_from_slice(b"CNPJSRC2");
        }
        std::fs::write(&path, bytes).unwrap();
        let error = SearchIndex::open(&path, 1 << 20).unwrap_err();
        let expected = "a search index of format CNPJSRC2, and this version reads CNPJSRC8: build the month again";
        assert!(error.to_string().ends_with(expected), "{error}");
    }
}
