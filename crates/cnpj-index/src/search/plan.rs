//! A search planned and answered: each condition resolved to a set of ordinals (a CNPJ by the
//! column's binary search, a code by its key, a CEP prefix of 1 to 4 digits as the union of the
//! keys that start with it and a longer one as its `cep4` bitmap filtered by the column of the
//! last four digits, a term by `terms`), then intersected, smallest first.
//!
//! A date range is its whole decades (one decade's bitmap, or `desde` of the first ∩ `antes` of
//! the one after the last, either dropped at an open end) less or plus its edges, each end moved
//! to the decade boundary below or above it, whichever leaves the fewer bitmap bytes to read; an
//! edge, or a range cheaper tiled whole, is the fewest whole years and months that tile it, and a
//! month covered in part is its month's bitmap filtered by the day-of-month column. The whole
//! decades join the other filters' intersection (smallest first), and the edges are applied to
//! what it leaves: an open-ended range from a decade boundary costs one stored bitmap.

use std::sync::Arc;

use roaring::{MultiOps, RoaringBitmap};

use super::SearchIndexError;
use super::format::{
    BEFORE, CAPITAL_LIMIT, CAPITAL_TABLES, Field, Flag, SINCE, Table, capital_key, capital_of_key, capital_range, pack,
    unpack,
};
use super::read::{Cached, Keys, SearchIndex, intersect, union};
use crate::text::{civil_from_days, days_from_civil, parse_date};

/// A condition of a search, in the index's terms. All conditions hold at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition {
    /// A 14-character CNPJ, or the 8 characters of a company's establishments.
    Cnpj(String),
    /// The establishments of any of these companies (8 characters each; a partner's companies).
    Companies(Vec<String>),
    /// The key of `table` is one of `values` (several: a city name of several codes).
    AnyOf { table: &'static str, values: Vec<String> },
    /// The opening date, `YYYY-MM-DD`, inclusive on both sides.
    Opening { from: Option<String>, to: Option<String> },
    /// A CEP prefix of digits.
    ZipPrefix(String),
    /// A folded term in the words of `table` (`nome` or `bairro`).
    Term { table: &'static str, folded: String },
    /// The main or a secondary activity is one of these CNAEs.
    Sector(Vec<String>),
    /// The company's capital, in cents, inclusive on both sides (`None`: open).
    Capital { from: Option<u64>, to: Option<u64> },
    /// `flag` is `value`.
    Flag { flag: Flag, value: bool },
    /// A head office (true) or a branch (false).
    HeadOffice(bool),
}

/// The `matriz_filial` code of a branch.
const BRANCH: &str = "2";

/// The establishments that match a search: `ordinals`, or `ordinals ∩ within` when `within` is
/// given. Of several filters the sparsest is kept apart from the intersection of the others,
/// which stays dense: a sparse intersection, once made, is every container turned from bits into
/// an array, and that was most of a search of three broad filters (state, status and size at
/// 1.0: 19–21 ms, 55 % of it in the conversion). The size and a page are read without making it.
#[derive(Debug)]
pub struct Matches {
    /// Shared with the index's cache when one bitmap is the answer or the dense part.
    ordinals: Arc<RoaringBitmap>,
    within: Option<Arc<RoaringBitmap>>,
}

/// A page is found by walking the smaller part while about this many ordinals are read (else
/// the intersection is made).
const PAGE_WALK: u64 = 200_000;

impl Matches {
    /// How many establishments match.
    pub fn len(&self) -> u64 {
        match &self.within {
            Some(within) => self.ordinals.intersection_len(within),
            None => self.ordinals.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every matching ordinal, in order.
    pub fn ordinals(&self) -> Arc<RoaringBitmap> {
        match &self.within {
            Some(within) => Arc::new(self.ordinals.as_ref() & within.as_ref()),
            None => Arc::clone(&self.ordinals),
        }
    }

    /// The matching ordinals from rank `offset` on, at most `limit` of them, of `total`.
    fn page(&self, total: u64, offset: u64, limit: u64) -> Vec<u32> {
        if let Some(within) = &self.within {
            let (small, large) =
                if within.len() <= self.ordinals.len() { (within, &self.ordinals) } else { (&self.ordinals, within) };
            // The ordinals of `small` read to reach the page's end, at the rate they match.
            let reads = (offset + limit).saturating_mul(small.len()) / total.max(1);
            if reads <= PAGE_WALK {
                return small
                    .iter()
                    .filter(|&o| large.contains(o))
                    .skip(offset as usize)
                    .take(limit as usize)
                    .collect();
            }
        }
        let set = self.ordinals();
        let Some(first) = u32::try_from(offset).ok().and_then(|o| set.select(o)) else { return Vec::new() };
        set.range(first..).take(limit as usize).collect()
    }
}

/// A condition's set is kept once its reckoning took this long (a union of many words' or codes'
/// bitmaps, every establishment but a key's, a search of the whole text of repeating fields): a
/// term people type is typed again (one letter, then the next), an analyst counts before paging
/// and exporting, and the set is read back in microseconds. At 1.0 a list of 50 CNAEs took
/// 42–53 ms to union, 50 cities 23–27 ms.
const KEPT_FROM: std::time::Duration = std::time::Duration::from_millis(1);

/// Which of `sets` (two or more, of establishments out of `universe`) to leave out of the
/// intersection made of the others (a count or a page reads it beside that intersection). Roaring
/// turns each container of an intersection that holds 4,096 ordinals or fewer (of 65,536) into
/// an array, at a cost that grows with what it holds; a denser result stays a bitmap, its words
/// and-ed. So the set left out is the one whose absence leaves the fewest ordinals to turn into
/// arrays, the sets' densities taken as independent; the sparsest, where none do. At 1.0,
/// `simples, capital 10k-100k, state` took 23 ms to count with the state left out (46 % of it in
/// that conversion), and `mei, phone, state` 17 ms with the phone left out.
fn left_out(sets: &[Arc<RoaringBitmap>], universe: u64) -> usize {
    let density = |s: &Arc<RoaringBitmap>| s.len() as f64 / universe.max(1) as f64;
    let converted = |out: usize| {
        let rest: f64 = sets.iter().enumerate().filter(|&(i, _)| i != out).map(|(_, s)| density(s)).product();
        if rest > 4_096.0 / 65_536.0 { 0.0 } else { rest * universe as f64 }
    };
    let by_cost =
        |&a: &usize, &b: &usize| converted(a).total_cmp(&converted(b)).then(sets[a].len().cmp(&sets[b].len()));
    (0..sets.len()).min_by(by_cost).unwrap_or(0)
}

impl SearchIndex {
    /// Every establishment but those of `set`.
    fn all_but(&self, set: &RoaringBitmap) -> Arc<RoaringBitmap> {
        let mut out = self.every();
        out -= set;
        Arc::new(out)
    }

    /// What one condition resolves to; `None` when it is beyond the index. A costly set is kept
    /// (see [`KEPT_FROM`]).
    fn condition(&self, condition: &Condition) -> Result<Option<Resolved>, SearchIndexError> {
        let key = Cached::Condition(format!("{condition:?}"));
        if let Some(hit) = self.cached(&key) {
            return Ok(Some(Resolved::Set(hit)));
        }
        let started = std::time::Instant::now();
        let resolved = self.resolve(condition)?;
        if let Some(Resolved::Set(set)) = &resolved
            && started.elapsed() >= KEPT_FROM
        {
            self.keep(key, set, set.serialized_size() + 64);
        }
        Ok(resolved)
    }

    /// What one condition resolves to, reckoned.
    fn resolve(&self, condition: &Condition) -> Result<Option<Resolved>, SearchIndexError> {
        let set = match condition {
            Condition::Companies(bases) => {
                // Each company's establishments are one run of positions (CNPJ order).
                let mut set = RoaringBitmap::new();
                for basico in bases {
                    set |= self.ordinals(self.company_positions(basico));
                }
                Arc::new(set)
            }
            Condition::Cnpj(cnpj) => {
                let (start, end) = match cnpj.len() {
                    14 => {
                        let packed = pack(cnpj.as_bytes());
                        (self.lower_bound(packed), self.lower_bound(packed.saturating_add(1)))
                    }
                    _ => {
                        let positions = self.company_positions(cnpj);
                        (positions.start, positions.end)
                    }
                };
                let mut set = self.ordinals(start..end);
                // A full CNPJ must also have its check digits.
                if cnpj.len() == 14 && start < end && unpack(self.packed_at(start as usize)) != *cnpj {
                    set.clear();
                }
                Arc::new(set)
            }
            Condition::AnyOf { table, values } => {
                let keys = self.keys(table)?;
                self.union(keys, values.iter().filter_map(|v| keys.find(v.as_bytes())))?
            }
            Condition::Opening { from, to } => return Ok(Some(Resolved::Dates(self.opening(from, to)?))),
            Condition::ZipPrefix(prefix) => {
                let (table, head) =
                    if prefix.len() <= 2 { ("cep2", prefix.len()) } else { ("cep4", prefix.len().min(4)) };
                let keys = self.keys(table)?;
                let set = self.union(keys, keys.prefixed(&prefix.as_bytes()[..head]))?;
                if prefix.len() <= 4 {
                    set
                } else {
                    // The last four digits start with the rest of the prefix.
                    let rest = &prefix[4..];
                    let scale = 10u16.pow(4 - rest.len() as u32);
                    let low: u16 = rest.parse::<u16>().unwrap_or(0) * scale;
                    let range = low..low + scale;
                    Arc::new(self.filtered(&set, |p| range.contains(&self.cep_suffix_at(p))))
                }
            }
            Condition::Sector(codes) => self.sector(codes)?,
            Condition::Capital { from, to } => self.capital_between(*from, *to)?,
            Condition::Flag { flag, value } => self.flag(*flag, *value)?,
            Condition::HeadOffice(head) => self.head_office(*head)?,
            Condition::Term { table, folded } => match self.term(table, folded)? {
                Some(set) => set,
                None => return Ok(None),
            },
        };
        Ok(Some(Resolved::Set(set)))
    }

    /// The establishments whose main or a secondary activity is one of `codes`.
    fn sector(&self, codes: &[String]) -> Result<Arc<RoaringBitmap>, SearchIndexError> {
        let (main, secondary) = (self.keys("cnae")?, self.keys("cnae2")?);
        let mut parts = Vec::with_capacity(codes.len() * 2);
        for code in codes {
            for keys in [main, secondary] {
                if let Some(i) = keys.find(code.as_bytes()) {
                    parts.push(self.bitmap(keys, i)?);
                }
            }
        }
        Ok(Arc::new(union(parts)))
    }

    /// The establishments whose company's capital is from `from` to `to` cents (inclusive,
    /// `None`: open).
    fn capital_between(&self, from: Option<u64>, to: Option<u64>) -> Result<Arc<RoaringBitmap>, SearchIndexError> {
        let low = from.map_or(-CAPITAL_LIMIT, |c| i64::try_from(c).unwrap_or(CAPITAL_LIMIT));
        let high = to.map_or(CAPITAL_LIMIT - 1, |c| i64::try_from(c).unwrap_or(CAPITAL_LIMIT - 1));
        let mut parts = Vec::new();
        if low <= high {
            self.capital(0, (-CAPITAL_LIMIT, CAPITAL_LIMIT), (low, high), &mut parts)?;
        }
        Ok(Arc::new(union(parts)))
    }

    /// The establishments of which `flag` is `value`.
    fn flag(&self, flag: Flag, value: bool) -> Result<Arc<RoaringBitmap>, SearchIndexError> {
        let (table, key) = flag.table_and_key();
        let keys = self.keys(Field::name(table))?;
        let set = match keys.find(key.as_bytes()) {
            Some(i) => self.bitmap(keys, i)?,
            None => Arc::default(),
        };
        Ok(if value { set } else { self.all_but(&set) })
    }

    /// The head offices (`true`: every establishment of no key of `matriz`), or the branches.
    fn head_office(&self, head: bool) -> Result<Arc<RoaringBitmap>, SearchIndexError> {
        let keys = self.keys(Field::name(Table::Matriz))?;
        if head {
            Ok(self.all_but(self.union(keys, 0..keys.len())?.as_ref()))
        } else {
            self.union(keys, keys.find(BRANCH.as_bytes()))
        }
    }

    /// Pushes on `parts` the bitmaps of the capital's table of precision `level` (0 or 1 of
    /// [`CAPITAL_TABLES`]) whose ranges lie within `within` (`[low, high)` cents, the range of the
    /// coarser key being read) and together hold the amounts `wanted` (inclusive) there: each
    /// range inside `wanted` whole, each across one of its ends from the next finer table.
    fn capital(
        &self,
        level: usize,
        within: (i64, i64),
        wanted: (i64, i64),
        parts: &mut Vec<Arc<RoaringBitmap>>,
    ) -> Result<(), SearchIndexError> {
        let table = CAPITAL_TABLES[level];
        let keys = self.keys(Field::name(table))?;
        let end = keys.lower_bound(capital_key(within.1).as_bytes());
        for i in keys.lower_bound(capital_key(within.0).as_bytes())..end {
            let low =
                capital_of_key(keys.key(i)).ok_or_else(|| self.corrupt("a capital key is not an amount".into()))?;
            let (low, high) = capital_range(table, low);
            if high - 1 < wanted.0 || low > wanted.1 {
                continue;
            }
            if wanted.0 <= low && high - 1 <= wanted.1 {
                parts.push(self.bitmap(keys, i)?);
            } else if level == 0 {
                self.capital(1, (low, high), wanted, parts)?;
            } else {
                parts.push(self.capital_edge(keys, i, (low, high), wanted)?);
            }
        }
        Ok(())
    }

    /// The establishments of `faixa`'s key `i` (the amounts `[low, high)` of the same first two
    /// digits) whose amount is `wanted`, from the exact table, which holds every amount there but
    /// `low`: the key's less the amounts above the wanted ones when `low` is wanted, else the
    /// wanted amounts'.
    fn capital_edge(
        &self,
        faixa: &Keys,
        i: usize,
        (low, high): (i64, i64),
        wanted: (i64, i64),
    ) -> Result<Arc<RoaringBitmap>, SearchIndexError> {
        let exact = self.keys(Field::name(Table::Capital))?;
        let (from, to) = (low.max(wanted.0), (high - 1).min(wanted.1));
        let keys =
            |a: i64, b: i64| exact.lower_bound(capital_key(a).as_bytes())..exact.lower_bound(capital_key(b).as_bytes());
        if from == low {
            let above = self.union(exact, keys(to + 1, high))?;
            Ok(Arc::new(self.bitmap(faixa, i)?.as_ref() - above.as_ref()))
        } else {
            self.union(exact, keys(from, to + 1))
        }
    }

    /// The establishments opened from `from` to `to`    /// The establishments opened from `from` to `to` (`YYYY-MM-DD`, inclusive; `None`: open).
    fn opening(&self, from: &Option<String>, to: &Option<String>) -> Result<DateSet, SearchIndexError> {
        let decades = self.keys("decada")?;
        if decades.len() == 0 {
            return Ok(DateSet::default());
        }
        // Dates are held from the first decade's start to the end of the last.
        let start = |key: &[u8]| {
            let decade: i32 = std::str::from_utf8(key).ok().and_then(|k| k.parse().ok())?;
            Some(days_from_civil(decade * 10, 1, 1))
        };
        let (Some(first), Some(last)) = (start(decades.key(0)), start(decades.key(decades.len() - 1))) else {
            return Err(self.corrupt("a decade key is not a number".into()));
        };
        let held = (first, days_from_civil(civil_from_days(last).0 + 10, 1, 1));
        let day = |text: &Option<String>, open: i32, shift: i32| match text {
            None => Ok(open),
            Some(t) => {
                parse_date(t).map(|d| d + shift).ok_or_else(|| self.corrupt(format!("the date {t} does not parse")))
            }
        };
        let lo = day(from, held.0, 0)?.max(held.0);
        let hi = day(to, held.1, 1)?.min(held.1);
        let plan = plan(lo, hi, |days| {
            tiles(days)
                .iter()
                .filter_map(|(table, key, _)| self.span(table, key))
                .map(|(_, _, len)| u64::from(len))
                .sum()
        });
        let edges = |ranges: &[Days]| -> Result<Vec<Arc<RoaringBitmap>>, SearchIndexError> {
            let mut parts = Vec::new();
            for (table, key, days) in ranges.iter().flat_map(|&r| tiles(r)) {
                let Some((keys, i, _)) = self.span(table, &key) else { continue };
                let set = self.bitmap(keys, i)?;
                parts.push(match days {
                    None => set,
                    Some(days) => Arc::new(self.filtered(&set, |p| days.contains(&self.day_at(p)))),
                });
            }
            Ok(parts)
        };
        let cores = match plan.middle {
            None => Vec::new(),
            Some(middle) => self.middle(middle, held)?,
        };
        let (minus, plus) = (edges(&plan.minus)?, edges(&plan.plus)?);
        Ok(DateSet { cores, minus, plus })
    }

    /// The bitmaps whose intersection is the establishments opened in the whole decades `[l, h)`
    /// of the decades `held`: the decade's own for one, else those opened since `l` and before `h`.
    fn middle(&self, (l, h): Days, held: Days) -> Result<Vec<Arc<RoaringBitmap>>, SearchIndexError> {
        let key = |day: i32| format!("{:03}", civil_from_days(day).0.div_euclid(10));
        // The bitmap of `table` at the first decade held from the one of `day` on (no
        // establishment opened in the decades between).
        let from_on = |table: &str, day: i32| {
            let keys = self.keys(table)?;
            match keys.lower_bound(key(day).as_bytes()) {
                i if i < keys.len() => self.bitmap(keys, i),
                _ => Ok(Arc::default()),
            }
        };
        if civil_from_days(h).0 - civil_from_days(l).0 == 10 {
            let decades = self.keys("decada")?;
            return Ok(vec![match decades.find(key(l).as_bytes()) {
                Some(i) => self.bitmap(decades, i)?,
                None => Arc::default(),
            }]);
        }
        let mut cores = Vec::with_capacity(2);
        if l > held.0 {
            cores.push(from_on(SINCE, l)?);
        }
        if h < held.1 {
            cores.push(from_on(BEFORE, h)?);
        }
        if cores.is_empty() {
            cores.push(from_on(SINCE, held.0)?);
        }
        Ok(cores)
    }

    /// The establishments that match every condition (all of them for none), or `None` when a
    /// condition is beyond the index (a term without a word character): the caller then
    /// searches by SQL.
    pub fn matches(&self, conditions: &[Condition]) -> Result<Option<Matches>, SearchIndexError> {
        let none = || Ok(Some(Matches { ordinals: Arc::default(), within: None }));
        let mut sets = Vec::with_capacity(conditions.len());
        let mut dates = Vec::new();
        for condition in conditions {
            match self.condition(condition)? {
                None => return Ok(None),
                Some(Resolved::Set(set)) => {
                    if set.is_empty() {
                        return none();
                    }
                    sets.push(set);
                }
                Some(Resolved::Dates(range)) if range.is_empty() => return none(),
                Some(Resolved::Dates(range)) => dates.push(range),
            }
        }
        // A search has one date range; any other is resolved alone.
        let range = dates.pop();
        sets.extend(dates.into_iter().map(|d| d.within(Vec::new())));
        let (ordinals, within) = match range {
            Some(range) => (range.within(sets), None),
            None if sets.is_empty() => (Arc::new(self.ordinals(0..self.len())), None),
            None if sets.len() == 1 => (sets.pop().expect("one"), None),
            None => {
                let out = left_out(&sets, self.len());
                let within = sets.swap_remove(out);
                (intersect(sets), Some(within))
            }
        };
        Ok(Some(Matches { ordinals, within }))
    }

    /// The CNPJs of `matches` from rank `offset` on, at most `limit` of them, of `total` (their
    /// [`Matches::len`]).
    pub fn cnpjs(&self, matches: &Matches, total: u64, offset: u64, limit: u64) -> Vec<String> {
        let page = matches.page(total, offset, limit);
        page.into_iter().map(|ordinal| self.cnpj_of(ordinal)).collect()
    }

    /// The CNPJ of the establishment `ordinal` (one of [`Matches::ordinals`]).
    pub fn cnpj_of(&self, ordinal: u32) -> String {
        unpack(self.packed_at(self.position(ordinal)))
    }
}

/// The first day of the month after the one of `day`.
fn next_month(day: i32) -> i32 {
    let (y, m, _) = civil_from_days(day);
    if m == 12 { days_from_civil(y + 1, 1, 1) } else { days_from_civil(y, m + 1, 1) }
}

/// The days `[start, end)`, in days since 1970-01-01.
type Days = (i32, i32);

/// A tile of a date range: a posting table and its key, and for a month covered in part the
/// days of the month covered.
type Tile = (&'static str, String, Option<std::ops::RangeInclusive<u8>>);

/// The fewest whole decades, years and months that tile `days`, and the months covered in part.
fn tiles((start, end): Days) -> Vec<Tile> {
    let mut out = Vec::new();
    let mut day = start;
    while day < end {
        let (y, m, d) = civil_from_days(day);
        let next_year = days_from_civil(y + 1, 1, 1);
        let next_decade = days_from_civil(y - y.rem_euclid(10) + 10, 1, 1);
        let month_end = next_month(day);
        let (tile, next) = if m == 1 && d == 1 && y.rem_euclid(10) == 0 && next_decade <= end {
            (("decada", format!("{:03}", y.div_euclid(10)), None), next_decade)
        } else if m == 1 && d == 1 && next_year <= end {
            (("ano", format!("{y:04}"), None), next_year)
        } else if d == 1 && month_end <= end {
            (("mes", format!("{y:04}-{m:02}"), None), month_end)
        } else {
            let last = month_end.min(end);
            (("mes", format!("{y:04}-{m:02}"), Some(d as u8..=(d as i32 + last - 1 - day) as u8)), last)
        };
        out.push(tile);
        day = next;
    }
    out
}

/// How the days `[lo, hi)` are read: the whole decades `middle` (from the cumulative tables),
/// less the `minus` ranges, plus the `plus` ranges (both tiled by [`tiles`]).
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    middle: Option<Days>,
    minus: Vec<Days>,
    plus: Vec<Days>,
}

/// The plan of the days `[lo, hi)` whose edges `cost` least: each end moved to the decade
/// boundary below or above it (the days between are then taken out or added), or no middle
/// (the range tiled whole) when that costs less. `lo` and `hi` lie within the decades held, and
/// the whole decades between them cost nothing (one stored bitmap or two, kept once read).
fn plan(lo: i32, hi: i32, cost: impl Fn(Days) -> u64) -> Plan {
    if lo >= hi {
        return Plan::default();
    }
    let boundaries = |day: i32| {
        let y = civil_from_days(day).0;
        let below = days_from_civil(y - y.rem_euclid(10), 1, 1);
        [below, if below == day { day } else { days_from_civil(y - y.rem_euclid(10) + 10, 1, 1) }]
    };
    let mut best = (cost((lo, hi)), Plan { middle: None, minus: Vec::new(), plus: vec![(lo, hi)] });
    for l in boundaries(lo) {
        for h in boundaries(hi) {
            // The edges must lie inside the middle (minus) or beside it (plus).
            if l > h || lo > h || l > hi {
                continue;
            }
            let minus: Vec<Days> = [(l, lo), (hi, h)].into_iter().filter(|r| r.0 < r.1).collect();
            let plus: Vec<Days> = [(lo, l), (h, hi)].into_iter().filter(|r| r.0 < r.1).collect();
            let edges = minus.iter().chain(&plus).map(|&r| cost(r)).sum();
            if edges < best.0 {
                best = (edges, Plan { middle: (l < h).then_some((l, h)), minus, plus });
            }
        }
    }
    best.1
}

/// The establishments opened in a date range: `(∩ cores ∖ ∪ minus) ∪ ∪ plus`, no cores for an
/// empty middle. The cores join the other conditions' intersection (smallest first) and the
/// edges are applied to what it leaves, so that a range of whole decades costs one intersection
/// more than its other conditions, not a union of its decades.
#[derive(Default)]
struct DateSet {
    cores: Vec<Arc<RoaringBitmap>>,
    minus: Vec<Arc<RoaringBitmap>>,
    plus: Vec<Arc<RoaringBitmap>>,
}

impl DateSet {
    fn is_empty(&self) -> bool {
        self.plus.iter().all(|p| p.is_empty()) && (self.cores.is_empty() || self.cores.iter().any(|c| c.is_empty()))
    }

    /// The range's establishments among those of every set of `others` (all of them for none).
    fn within(self, mut others: Vec<Arc<RoaringBitmap>>) -> Arc<RoaringBitmap> {
        let DateSet { mut cores, minus, mut plus } = self;
        if !others.is_empty() && !plus.is_empty() {
            // The edges among the other conditions' establishments: few, merged into one first.
            let rest = intersect(std::mem::take(&mut others));
            plus = vec![Arc::new(union(plus.iter().map(|p| Arc::new(rest.as_ref() & p.as_ref())).collect()))];
            others.push(rest);
        }
        if cores.is_empty() {
            return match plus.len() {
                1 => plus.pop().expect("one"),
                _ => Arc::new(plus.iter().map(|p| p.as_ref()).union()),
            };
        }
        cores.extend(others);
        let out = intersect(cores);
        if minus.is_empty() && plus.is_empty() {
            return out;
        }
        let mut out = Arc::unwrap_or_clone(out);
        for part in &minus {
            out -= part.as_ref();
        }
        for part in &plus {
            out |= part.as_ref();
        }
        Arc::new(out)
    }
}

/// What a condition resolves to.
enum Resolved {
    /// The establishments that match.
    Set(Arc<RoaringBitmap>),
    /// A date range.
    Dates(DateSet),
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn a_page_of_a_part_kept_apart_is_the_page_of_the_intersection(
            a in proptest::collection::vec(0u32..5_000, 0..2_000),
            b in proptest::collection::vec(0u32..5_000, 0..3_000),
            offset in 0u64..1_500,
            limit in 1u64..50,
        ) {
            let (a, b): (RoaringBitmap, RoaringBitmap) = (a.into_iter().collect(), b.into_iter().collect());
            check_page(&a, &b, offset, limit);
        }
    }

    fn check_page(a: &RoaringBitmap, b: &RoaringBitmap, offset: u64, limit: u64) {
        let matches = Matches { ordinals: Arc::new(b.clone()), within: Some(Arc::new(a.clone())) };
        let all: Vec<u32> = (a & b).iter().collect();
        assert_eq!(matches.len(), all.len() as u64);
        let expected: Vec<u32> = all.iter().copied().skip(offset as usize).take(limit as usize).collect();
        assert_eq!(matches.page(matches.len(), offset, limit), expected, "from {offset}");
    }

    #[test]
    fn a_deep_page_of_a_sparse_intersection_is_read_from_the_intersection() {
        let evens: RoaringBitmap = (0..1_000_000).step_by(2).collect();
        let thirds: RoaringBitmap = (0..1_000_000).step_by(3).collect();
        // Every second multiple of 3 is even: a page is walked to up to rank 100,000 (two reads a
        // match, PAGE_WALK reads), past it read from the intersection.
        for offset in [0, 50_000, 150_000, 166_660, 170_000] {
            check_page(&evens, &thirds, offset, 20);
        }
    }

    #[test]
    fn the_set_left_out_leaves_the_cheapest_intersection() {
        // Sets of these many establishments of 72,000 (1.0's densities, a thousandth the size).
        let check = |sizes: &[u32], expected: usize| {
            let sets: Vec<Arc<RoaringBitmap>> =
                sizes.iter().map(|&n| Arc::new(RoaringBitmap::from_sorted_iter(0..n).unwrap())).collect();
            assert_eq!(left_out(&sets, 72_000), expected, "{sizes:?}");
        };
        // mei, phone, a state: mei and phone stay dense together.
        check(&[19_241, 64_802, 8_300], 2);
        // simples, capital 10k-100k, a state: capital and the state make the fewest to convert.
        check(&[27_560, 11_434, 8_300], 0);
        // Dense together whichever is left out: the sparsest.
        check(&[60_000, 50_000, 40_000], 2);
        check(&[40_000, 60_000], 0);
    }
}

/// How a date range is read: which decade boundaries and edges.
#[cfg(test)]
mod date_plans {
    use super::*;

    /// The plan of `[from, to]` (days of `YYYY-MM-DD`) when a day costs one.
    fn check(from: &str, to: &str, expected: Plan) {
        let day = |t: &str| parse_date(t).unwrap();
        let found = plan(day(from), day(to) + 1, |(a, b)| (b - a) as u64);
        assert_eq!(found, expected, "{from}..{to}");
    }

    #[test]
    fn a_range_is_whole_decades_and_the_cheapest_edges() {
        let d = |t: &str| parse_date(t).unwrap();
        let plan = |middle: Option<(&str, &str)>, minus: &[(&str, &str)], plus: &[(&str, &str)]| Plan {
            middle: middle.map(|(a, b)| (d(a), d(b))),
            minus: minus.iter().map(|&(a, b)| (d(a), d(b))).collect(),
            plus: plus.iter().map(|&(a, b)| (d(a), d(b))).collect(),
        };
        // Whole decades: no edge.
        check("2010-01-01", "2029-12-31", plan(Some(("2010-01-01", "2030-01-01")), &[], &[]));
        check("2010-01-01", "2019-12-31", plan(Some(("2010-01-01", "2020-01-01")), &[], &[]));
        // An end near a boundary: the days beyond it taken out, or the days before it added.
        check(
            "2011-01-01",
            "2019-12-31",
            plan(Some(("2010-01-01", "2020-01-01")), &[("2010-01-01", "2011-01-01")], &[]),
        );
        check(
            "2008-06-01",
            "2029-12-31",
            plan(Some(("2010-01-01", "2030-01-01")), &[], &[("2008-06-01", "2010-01-01")]),
        );
        check(
            "2000-01-01",
            "2027-12-31",
            plan(Some(("2000-01-01", "2030-01-01")), &[("2028-01-01", "2030-01-01")], &[]),
        );
        check(
            "2000-01-01",
            "2022-12-31",
            plan(Some(("2000-01-01", "2020-01-01")), &[], &[("2020-01-01", "2023-01-01")]),
        );
        // Inside one decade, or across a boundary, tiled when that is cheaper.
        check("2013-03-05", "2013-03-20", plan(None, &[], &[("2013-03-05", "2013-03-21")]));
        check("2013-03-05", "2016-12-31", plan(None, &[], &[("2013-03-05", "2017-01-01")]));
        check("2018-03-05", "2021-07-09", plan(None, &[], &[("2018-03-05", "2021-07-10")]));
        check(
            "2012-03-05",
            "2020-01-01",
            plan(Some(("2010-01-01", "2020-01-01")), &[("2010-01-01", "2012-03-05")], &[("2020-01-01", "2020-01-02")]),
        );
        // Nothing.
        check("2013-03-05", "2013-03-04", Plan::default());
        check("2013-03-05", "2001-01-01", Plan::default());
    }
}

/// Date ranges read from a real index file, against a scan of the dates it was written from.
#[cfg(test)]
pub(crate) mod date_ranges {
    use std::path::Path;

    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    use super::*;
    use crate::search::{HalfColumns, Postings, Table, UPPER, write_index};
    use crate::text::date_text;

    /// The ordinal of the `i`-th of `n` establishments (the first half in the lower half).
    fn ordinal(i: usize, n: usize) -> u32 {
        if i < n / 2 { i as u32 } else { UPPER + (i - n / 2) as u32 }
    }

    /// An index in `dir` of establishments opened on `dates`, every other one in `SP`.
    pub(crate) fn index(dir: &Path, dates: &[Option<i32>]) -> SearchIndex {
        index_with(dir, dates.len(), |i, ordinal, postings| {
            if i % 2 == 0 {
                postings.add(Table::Uf, "SP", ordinal);
            }
            let Some(date) = dates[i] else { return 0 };
            let text = date_text(date);
            postings.add(Table::Mes, &text[..7], ordinal);
            postings.add(Table::Ano, &text[..4], ordinal);
            postings.add(Table::Decada, &text[..3], ordinal);
            text[8..].parse().unwrap()
        })
    }

    /// An index in `dir` of `n` establishments (half in each half), each given its postings by
    /// `add(i, ordinal, postings)`, which returns its opening day (0 for none).
    pub(crate) fn index_with(dir: &Path, n: usize, add: impl Fn(usize, u32, &mut Postings) -> u8) -> SearchIndex {
        let mut halves = Vec::new();
        let mut spills = Vec::new();
        for (half, rows) in [0..n / 2, n / 2..n].into_iter().enumerate() {
            let file = |name: &str| dir.join(format!("{name}{half}"));
            let mut postings = Postings::default();
            let (mut cnpjs, mut days, mut ceps) = (Vec::new(), Vec::new(), Vec::new());
            for i in rows.clone() {
                cnpjs.extend_from_slice(&pack(format!("{i:012}").as_bytes()).to_le_bytes());
                ceps.extend_from_slice(&u16::MAX.to_le_bytes());
                days.push(add(i, ordinal(i, n), &mut postings));
            }
            for (name, bytes) in [("cnpjs", cnpjs), ("days", days), ("ceps", ceps)] {
                std::fs::write(file(name), bytes).unwrap();
            }
            spills.push(file("spill"));
            postings.spill(&file("spill")).unwrap();
            halves.push(HalfColumns {
                cnpjs: file("cnpjs"),
                days: file("days"),
                ceps: file("ceps"),
                rows: rows.len() as u64,
            });
        }
        let path = dir.join("index.search");
        let halves: [HalfColumns; 2] = halves.try_into().ok().unwrap();
        write_index(&path, halves, None, &spills, "build").unwrap();
        SearchIndex::open(&path, 1 << 20).unwrap()
    }

    /// The ordinal of the `i`-th of `n` establishments, for the tests of other conditions.
    pub(crate) fn ordinal_of(i: usize, n: usize) -> u32 {
        ordinal(i, n)
    }

    /// The index finds the establishments opened from `from` to `to` (inclusive, `None` open),
    /// alone and with another condition.
    fn check(index: &SearchIndex, dates: &[Option<i32>], from: Option<i32>, to: Option<i32>) {
        let opening = Condition::Opening { from: from.map(date_text), to: to.map(date_text) };
        let sp = Condition::AnyOf { table: "uf", values: vec!["SP".into()] };
        let held = |d: &Option<i32>| d.is_some_and(|d| from.is_none_or(|f| f <= d) && to.is_none_or(|t| d <= t));
        for (conditions, every) in [(vec![opening.clone()], 1), (vec![sp, opening], 2)] {
            let expected: Vec<u32> = (0..dates.len())
                .filter(|&i| i % every == 0 && held(&dates[i]))
                .map(|i| ordinal(i, dates.len()))
                .collect();
            let found = index.matches(&conditions).unwrap().unwrap();

            let found: Vec<u32> = found.ordinals().iter().collect();
            assert_eq!(found, expected, "{:?}..{:?} of {conditions:?}", from.map(date_text), to.map(date_text));
        }
    }

    /// Dates in a few decades with gaps between (1800s, 1890s, 1950–2029, 2100), a tenth unknown,
    /// and the days around some boundaries.
    pub(crate) fn dates() -> Vec<Option<i32>> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        let mut dates: Vec<Option<i32>> = (0..6000)
            .map(|_| {
                let year = match next() % 100 {
                    0..10 => return None,
                    10 => 1800,
                    11 => 1805,
                    12 | 13 => 1899,
                    14 => 2100,
                    _ => 1950 + (next() % 80) as i32,
                };
                Some(days_from_civil(year, 1, 1) + (next() % 365) as i32)
            })
            .collect();
        for (i, text) in
            ["2009-12-31", "2010-01-01", "2019-12-31", "2020-02-29", "1899-12-31", "2100-12-31"].iter().enumerate()
        {
            dates[i * 997] = parse_date(text);
        }
        dates
    }

    #[test]
    fn a_date_range_finds_what_a_scan_finds() {
        let dir = tempfile::tempdir().unwrap();
        let dates = dates();
        let index = index(dir.path(), &dates);
        let d = |t: &str| Some(parse_date(t).unwrap());
        let cases = [
            (d("2013-03-05"), d("2013-03-20")), // inside one month
            (d("2013-03-05"), d("2017-08-01")), // inside one decade
            (d("2013-03-05"), d("2021-07-09")), // across a decade boundary
            (d("2011-01-01"), d("2019-12-31")), // a decade less a year
            (d("2010-01-01"), d("2019-12-31")), // one whole decade
            (d("1955-06-01"), d("2024-12-31")), // several, both edges inside
            (d("2005-01-01"), None),            // open above
            (d("2010-01-01"), None),            // open above from a boundary
            (None, d("1999-12-31")),            // open below
            (None, d("2010-01-01")),            // open below, one day past a boundary
            (d("2024-01-01"), d("2013-01-01")), // from after to
            (d("1700-01-01"), d("1899-12-31")), // before 1900
            (d("2099-12-31"), d("2200-01-01")), // after 2099
            (None, d("1700-01-01")),            // before everything
            (d("2200-01-01"), None),            // after everything
            (d("1800-01-01"), None),            // every known date, no unknown one
            (d("1810-01-01"), d("1889-12-31")), // only decades that hold none
            (d("1806-01-01"), d("1899-12-30")), // edges in decades held, a gap between
        ];
        for (from, to) in cases {
            check(&index, &dates, from, to);
        }
        let day = prop_oneof![
            Just(None),
            (-100_000i32..50_000).prop_map(Some),
            proptest::sample::select(dates.clone()).prop_flat_map(|d| (-1i32..=1).prop_map(move |s| d.map(|d| d + s))),
            (175i32..215, -1i32..=1).prop_map(|(decade, s)| Some(days_from_civil(decade * 10, 1, 1) + s)),
        ];
        let mut runner = TestRunner::new_with_rng(
            Config { cases: 1000, failure_persistence: None, ..Config::default() },
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        runner
            .run(&(day.clone(), day), |(from, to)| {
                check(&index, &dates, from, to);
                Ok(())
            })
            .unwrap();
    }
}

/// Capital ranges read from a real index file, against a scan of the amounts it was written from.
#[cfg(test)]
mod capital_ranges {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    use super::date_ranges::{index_with, ordinal_of};
    use super::*;
    use crate::feed::capital_keys;

    /// Amounts in cents as a register holds them: round ones mostly, some odd, some tiny, a few
    /// negative, a tenth unknown, and the largest DECIMAL(18, 2) holds.
    fn amounts() -> Vec<Option<i64>> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        let mut amounts: Vec<Option<i64>> = (0..5000)
            .map(|_| {
                let magnitude = 10i64.pow((next() % 14) as u32);
                Some(match next() % 10 {
                    0 => return None,
                    1 => -((next() % 100_000) as i64),
                    2 => (next() % 1000) as i64,
                    3 | 4 => (next() as i64 % 1_000_000_007) * ((next() % 100) as i64 + 1),
                    _ => ((next() % 99) as i64 + 1) * magnitude,
                })
            })
            .collect();
        amounts[0] = Some(CAPITAL_LIMIT - 1);
        amounts[1] = Some(0);
        amounts
    }

    fn check(index: &SearchIndex, amounts: &[Option<i64>], from: Option<u64>, to: Option<u64>) {
        let condition = Condition::Capital { from, to };
        let held = |a: &Option<i64>| {
            a.is_some_and(|a| {
                from.is_none_or(|f| i128::from(f) <= i128::from(a)) && to.is_none_or(|t| i128::from(a) <= i128::from(t))
            })
        };
        let expected: Vec<u32> =
            (0..amounts.len()).filter(|&i| held(&amounts[i])).map(|i| ordinal_of(i, amounts.len())).collect();
        let found: Vec<u32> = index.matches(&[condition]).unwrap().unwrap().ordinals().iter().collect();
        assert_eq!(found, expected, "{from:?}..{to:?}");
    }

    #[test]
    fn a_capital_range_finds_what_a_scan_finds() {
        let dir = tempfile::tempdir().unwrap();
        let amounts = amounts();
        let index = index_with(dir.path(), amounts.len(), |i, ordinal, postings| {
            if let Some(cents) = amounts[i] {
                let text =
                    format!("{}{}.{:02}", if cents < 0 { "-" } else { "" }, cents.abs() / 100, cents.abs() % 100);
                for (table, key) in capital_keys(&text) {
                    postings.add(table, &key, ordinal);
                }
            }
            0
        });
        for (from, to) in
            [(None, None), (Some(0), None), (None, Some(0)), (Some(100_000), Some(99_999)), (Some(u64::MAX), None)]
        {
            check(&index, &amounts, from, to);
        }
        let held: Vec<u64> = amounts.iter().flatten().filter(|&&a| a >= 0).map(|&a| a as u64).collect();
        let bound = prop_oneof![
            Just(None),
            (0u64..u64::MAX).prop_map(Some),
            (0u32..19).prop_map(|p| Some(10u64.pow(p))),
            proptest::sample::select(held)
                .prop_flat_map(|a| (0u64..=2).prop_map(move |s| Some((a + s).saturating_sub(1)))),
        ];
        let mut runner = TestRunner::new_with_rng(
            Config { cases: 1000, failure_persistence: None, ..Config::default() },
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        runner
            .run(&(bound.clone(), bound), |(from, to)| {
                check(&index, &amounts, from, to);
                Ok(())
            })
            .unwrap();
    }
}

/// A flag's `false` and the head offices: every establishment but a key's.
#[cfg(test)]
mod complements {
    use super::date_ranges::{index_with, ordinal_of};
    use super::*;

    /// Of `n` establishments, every third has an email and every fifth is a branch; the index
    /// answers each flag both ways, asked twice (the second from the cache once kept).
    fn check(n: usize) {
        let dir = tempfile::tempdir().unwrap();
        let index = index_with(dir.path(), n, |i, ordinal, postings| {
            if i % 3 == 0 {
                postings.add(Table::Contato, "email", ordinal);
            }
            if i % 5 == 0 {
                postings.add(Table::Matriz, BRANCH, ordinal);
            }
            0
        });
        let expect = |keep: &dyn Fn(usize) -> bool| -> Vec<u32> {
            (0..n).filter(|&i| keep(i)).map(|i| ordinal_of(i, n)).collect()
        };
        let cases: [(Condition, Vec<u32>); 4] = [
            (Condition::Flag { flag: Flag::Email, value: true }, expect(&|i| i % 3 == 0)),
            (Condition::Flag { flag: Flag::Email, value: false }, expect(&|i| i % 3 != 0)),
            (Condition::HeadOffice(true), expect(&|i| i % 5 != 0)),
            (Condition::HeadOffice(false), expect(&|i| i % 5 == 0)),
        ];
        for (condition, expected) in cases {
            for _ in 0..2 {
                let found = index.matches(std::slice::from_ref(&condition)).unwrap().unwrap();
                assert_eq!(found.ordinals().iter().collect::<Vec<_>>(), expected, "{condition:?} of {n}");
                assert_eq!(found.len(), expected.len() as u64);
            }
        }
    }

    #[test]
    fn a_complement_is_every_establishment_but_the_keys() {
        // Halves of no establishment, of fewer than a byte's, of several containers and a tail.
        for n in [0, 1, 2, 7, 17, 130_001] {
            check(n);
        }
    }
}
