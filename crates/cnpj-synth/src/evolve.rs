//! The month after a synthetic month (`cnpj-etl synth --evolve-from`): every record carried over,
//! with a month's churn planted, and every planted change listed in the new month's `synth.json`
//! (`planted_changes`) exactly as a correct month-over-month comparison of the served values finds
//! it (by the event rules of the history), no more, no less.
//!
//! Monthly rates (of the establishments, companies, partners or Simples rows met):
//!
//! | change | rate | events |
//! |---|---|---|
//! | new company (Empresas row, head office, partners, Simples row at 70 %) | 0.45 % of companies | `opened` |
//! | new branch of a company | 0.07 % of head offices | `opened` |
//! | company gone (every row of it dropped) | 0.03 % of companies | `disappeared` per establishment |
//! | branch gone | 0.5 % of branches | `disappeared` |
//! | closing (situação 08, with a date and a motivo) | 0.55 % of those not closed (≈ 0.3 %) | `status_changed` |
//! | other status change (02 → 04, 01/03/04 → 02) | 0.05 % | `status_changed` |
//! | move (30 % to another city: município and UF; always CEP, street, number) | 0.2 % | `moved` per field that differs |
//! | nome fantasia | 0.1 % | `renamed` |
//! | main CNAE | 0.1 % | `main_activity_changed` |
//! | secondary CNAEs (one added, one removed, or the list replaced) | 0.2 % | `secondary_activities_changed` |
//! | razão social (not of an empresário individual, natureza 2135) | 0.05 % of companies | `renamed` |
//! | natureza jurídica | 0.02 % of companies | `legal_nature_changed` |
//! | capital social | 0.1 % of companies | `capital_changed` |
//! | porte | 0.05 % of companies | `size_changed` |
//! | partner entering (75 % a new person, 20 % a recurring person, 5 % a recurring holding) | 0.15 % of companies | `partner_entered` |
//! | partner leaving (the row dropped; any partner: recurring people and holdings too) | 0.3 % of partners | `partner_left` |
//! | Simples exit / entry (an N row made S) | 0.2 % of S rows / 0.3 % of the others | `simples_opted_out` / `_in` |
//! | MEI exit / entry | 0.3 % of S rows / 0.2 % of the others | `mei_opted_out` / `_in` |
//!
//! Changes are dated the 10th of the new month. Only new companies get a Simples row.
//!
//! How the list stays exact:
//! - Every pick is a pure function of (seed, generation, key) (`Rng::keyed`): all occurrences of a
//!   duplicated key get the same change (listed once, from the first), and the writers of the four
//!   tables agree on which companies are gone without talking to one another.
//! - A record the build rejects (field count, check digits, `cnpj_basico`) is copied as it is.
//! - A change is listed only when the served value differs (`served`: cleaned, padded and masked
//!   as the build does): a closing of a row already 08 or a new CEP equal to the old is no change.
//!   Rows without a change are copied byte for byte.
//! - Company events are planted only on companies in Empresas in both months: every row of a
//!   synthetic month refers to a company of its Empresas (a gone company loses all its rows, a
//!   new one has its Empresas row), so a row met here has its company in the previous month, and
//!   only a gone company is missing from this one.
//! - New keys cannot collide: new companies take company indices that no month of the chain has
//!   used (from `next_company`; `rows::basico` is a bijection of 0..10^8), and a month's new
//!   branches take one `cnpj_ordem` above every ordem of the chain (`next_ordem`), at most one per
//!   company (written after its head office's record).
//! - An entering partner is none of the rows there: a new person has two first names (no
//!   generated partner has them) and a document carrying the generation (up to 1000 months); a
//!   recurring person or holding (`partners.rs`, the same as in the month the chain started from)
//!   enters on the 10th of the month, a day on which no generated partner entered and no
//!   earlier month's partner did.
//!
//! Streaming: each output member is written while its input member is read, a record at a time,
//! one rayon task per file (a Socios part also reads its Empresas part, whose companies it gives
//! partners); the changes go to a file per task, streamed into `synth.json` at the end.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufWriter, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::partners::{Partner, Partners};
use crate::records::{Records, open, with_records};
use crate::rows::{self, FIRST, LAST, Rng, STREETS, Tables, WORDS};
use crate::{
    FileSummary, SynthError, SynthReport, Table, date_code, next_month, read_manifest, rows_at, write_manifest,
    write_zip,
};

const NEW_COMPANY: f64 = 0.0045;
const NEW_BRANCH: f64 = 0.0007;
const COMPANY_GONE: f64 = 0.0003;
const BRANCH_GONE: f64 = 0.005;
const CLOSE: f64 = 0.0055;
const STATUS_OTHER: f64 = 0.0005;
const MOVE: f64 = 0.002;
const MOVE_CITY: f64 = 0.3;
const RENAME: f64 = 0.001;
const MAIN_CNAE: f64 = 0.001;
const SECONDARY_CNAES: f64 = 0.002;
const RENAME_COMPANY: f64 = 0.0005;
const NATURE: f64 = 0.0002;
const CAPITAL: f64 = 0.001;
const SIZE: f64 = 0.0005;
const PARTNER_ENTER: f64 = 0.0015;
const PARTNER_LEAVE: f64 = 0.003;
const SIMPLES_OUT: f64 = 0.002;
const SIMPLES_IN: f64 = 0.003;
const MEI_OUT: f64 = 0.003;
const MEI_IN: f64 = 0.002;
const NEW_SIMPLES: f64 = 0.7;

/// Company indices: `rows::basico` maps 0..10^8 onto the 8-digit bases.
const COMPANY_INDICES: u64 = 100_000_000;

/// What a pick is for: each has its own stream per key.
mod salt {
    pub const GENERATION: u64 = 1;
    pub const GONE: u64 = 2;
    pub const BRANCH_GONE: u64 = 3;
    pub const ESTABLISHMENT: u64 = 4;
    pub const BRANCH: u64 = 5;
    pub const COMPANY: u64 = 6;
    pub const LEAVE: u64 = 7;
    pub const ENTER: u64 = 8;
    pub const SIMPLES: u64 = 9;
    pub const NEW_COMPANY: u64 = 10;
    pub const NEW_HEAD_OFFICE: u64 = 11;
    pub const NEW_PARTNERS: u64 = 12;
    pub const NEW_SIMPLES: u64 = 13;
}

#[derive(Clone, Debug)]
pub struct EvolveOptions {
    /// A month written by `generate` or by `evolve`.
    pub from: PathBuf,
    pub out: PathBuf,
    pub seed: u64,
}

/// One planted change: an event row of the comparison, without its values.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PlantedChange {
    pub event: String,
    /// The served field compared; none for `opened` and `disappeared`.
    pub field: Option<String>,
    /// The establishment (establishment events); none for company events.
    pub cnpj: Option<String>,
    pub cnpj_basico: String,
}

/// The table and part of a main zip (`Empresas3.zip` → Empresas, 3; `Simples.zip` → part 0).
pub(crate) fn kind(zip: &str) -> Option<(Table, u32)> {
    let tables = [
        ("Estabelecimentos", Table::Estabelecimentos),
        ("Empresas", Table::Empresas),
        ("Socios", Table::Socios),
        ("Simples", Table::Simples),
    ];
    tables.into_iter().find_map(|(prefix, table)| {
        let part = zip.strip_prefix(prefix)?.strip_suffix(".zip")?;
        if part.is_empty() { Some((table, 0)) } else { Some((table, part.parse().ok()?)) }
    })
}

/// Writes the month after `opts.from` into `opts.out` (created if missing) and returns what it
/// wrote; `synth.json` there lists every planted change.
pub fn evolve(opts: &EvolveOptions) -> Result<SynthReport, SynthError> {
    let manifest = opts.from.join("synth.json");
    let input = read_manifest(&manifest)?;
    let not_synthetic = |reason: String| SynthError::NotSynthetic { path: opts.from.clone(), reason };
    std::fs::create_dir_all(&opts.out).map_err(|source| SynthError::Io { path: opts.out.clone(), source })?;
    let canonical = |p: &Path| p.canonicalize().map_err(|source| SynthError::Io { path: p.to_owned(), source });
    if canonical(&opts.from)? == canonical(&opts.out)? {
        return Err(SynthError::SameFolder(opts.out.clone()));
    }
    let month = next_month(&input.month).ok_or_else(|| not_synthetic(format!("month {:?}", input.month)))?;
    let (old_code, new_code) = (date_code(&input.month), date_code(&month));
    let generation = input.generation + 1;

    let lookups: Vec<(&FileSummary, Vec<u8>)> = input
        .files
        .iter()
        .filter(|f| kind(&f.zip).is_none())
        .map(|f| Ok((f, member_bytes(&opts.from.join(&f.zip))?)))
        .collect::<Result<_, SynthError>>()?;
    let tables =
        Tables::from_lookups(&lookups.iter().map(|(f, bytes)| (f.zip.as_str(), bytes.as_slice())).collect::<Vec<_>>());

    // New companies: a range of unused indices per Empresas part.
    let mut main: Vec<(&FileSummary, Table, u32)> =
        input.files.iter().filter_map(|f| kind(&f.zip).map(|(t, p)| (f, t, p))).collect();
    main.sort_by_key(|&(f, t, p)| (t as u8, p, f.zip.clone()));
    let mut new = BTreeMap::new();
    let mut next = input.next_company;
    for &(f, table, part) in &main {
        if table == Table::Empresas {
            let count = (NEW_COMPANY * f.served() as f64).round() as u64;
            new.insert(part, next..next + count);
            next += count;
            for other in ["Estabelecimentos", "Socios"] {
                let zip = format!("{other}{part}.zip");
                if !main.iter().any(|(f, _, _)| f.zip == zip) {
                    return Err(not_synthetic(format!("{} has no {zip}", f.zip)));
                }
            }
        }
    }
    if next > COMPANY_INDICES {
        return Err(SynthError::Exhausted { path: opts.from.clone(), reason: format!("company index {next}") });
    }
    if input.next_ordem > 9999 {
        return Err(SynthError::Exhausted { path: opts.from.clone(), reason: format!("ordem {}", input.next_ordem) });
    }
    let churn = Churn {
        tables: &tables,
        partners: Partners::new(
            input.origin_seed,
            rows_at(Table::Socios, input.scale),
            rows_at(Table::Empresas, input.scale),
        ),
        seed: Rng::keyed(opts.seed, salt::GENERATION, &generation.to_le_bytes()).next(),
        generation,
        date: format!("{}10", month.replace('-', "")),
        ordem: format!("{:04}", input.next_ordem),
        new,
    };

    let scratch = opts.out.join(".planted");
    std::fs::create_dir_all(&scratch).map_err(|source| SynthError::Io { path: scratch.clone(), source })?;
    // Biggest first keeps every core busy to the end.
    main.sort_by_key(|(f, _, _)| std::cmp::Reverse(f.csv_bytes));
    let done: Vec<(FileSummary, BTreeMap<String, u64>, PathBuf)> = main
        .par_iter()
        .map(|&(f, table, part)| {
            let member = f.member.replace(&old_code, &new_code);
            churn.file(&opts.from, &opts.out, &scratch, (&f.zip, &member), table, part)
        })
        .collect::<Result<_, SynthError>>()?;

    let mut files = Vec::new();
    let mut changes = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (summary, churned, path) in done {
        for (event, n) in churned {
            *counts.entry(event).or_default() += n;
        }
        changes.push((summary.zip.clone(), path));
        files.push(summary);
    }
    for (f, bytes) in &lookups {
        let member = f.member.replace(&old_code, &new_code);
        let path = opts.out.join(&f.zip);
        write_zip(&path, &member, |w| {
            w.write_all(bytes).map_err(|source| SynthError::Io { path: path.clone(), source })
        })?;
        files.push(FileSummary { member, ..(*f).clone() });
    }
    files.sort_by(|a, b| a.zip.cmp(&b.zip));
    changes.sort();
    let report = SynthReport {
        scale: input.scale,
        seed: opts.seed,
        origin_seed: input.origin_seed,
        month,
        evolved_from: Some(input.month.clone()),
        generation,
        next_company: next,
        next_ordem: input.next_ordem + 1,
        files,
        churn: counts,
    };
    let paths: Vec<PathBuf> = changes.into_iter().map(|(_, p)| p).collect();
    write_manifest(&opts.out.join("synth.json"), &report, &paths)?;
    std::fs::remove_dir_all(&scratch).map_err(|source| SynthError::Io { path: scratch, source })?;
    Ok(report)
}

/// The bytes of the first member of the zip at `path`.
fn member_bytes(path: &Path) -> Result<Vec<u8>, SynthError> {
    let mut archive = open(path)?;
    let mut member = archive.by_index(0).map_err(|source| SynthError::Zip { path: path.to_owned(), source })?;
    let mut bytes = Vec::new();
    member.read_to_end(&mut bytes).map_err(|source| SynthError::Io { path: path.to_owned(), source })?;
    Ok(bytes)
}

/// The served values the churn compares, by the build's rules (cnpj-normalize's).
mod served {
    use std::collections::BTreeSet;

    /// Latin-1 text with NUL bytes deleted, every run of white space one space, the ends trimmed.
    pub fn clean(raw: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(raw.len());
        let mut space = false;
        for &b in raw {
            if b == 0 {
                continue;
            }
            if char::from(b).is_whitespace() {
                space = !out.is_empty();
                continue;
            }
            if space {
                out.push(b' ');
                space = false;
            }
            out.push(b);
        }
        out
    }

    /// A code: cleaned, upper-cased, numeric ones left-padded with `0` to `width`.
    pub fn code(raw: &[u8], width: usize) -> Vec<u8> {
        let mut code = clean(raw);
        code.make_ascii_uppercase();
        if !code.is_empty() && code.len() < width && code.iter().all(u8::is_ascii_digit) {
            code.splice(0..0, std::iter::repeat_n(b'0', width - code.len()));
        }
        code
    }

    /// A `cnpj_basico` the build takes: 8 characters of `[0-9A-Z]` once padded.
    pub fn basico(raw: &[u8]) -> Option<Vec<u8>> {
        let b = code(raw, 8);
        (b.len() == 8 && b.iter().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())).then_some(b)
    }

    /// CEP: 8 digits (7 padded), anything else or all zeros empty.
    pub fn cep(raw: &[u8]) -> Vec<u8> {
        let text = clean(raw);
        let padded = match text.len() {
            8 => text,
            7 => [b"0", text.as_slice()].concat(),
            _ => return Vec::new(),
        };
        if padded.iter().all(u8::is_ascii_digit) && padded.iter().any(|&b| b != b'0') { padded } else { Vec::new() }
    }

    /// The street: type and name, cleaned, space-separated (or the one that is not empty).
    pub fn logradouro(tipo: &[u8], logradouro: &[u8]) -> Vec<u8> {
        let (tipo, logradouro) = (clean(tipo), clean(logradouro));
        match (tipo.is_empty(), logradouro.is_empty()) {
            (true, _) => logradouro,
            (false, true) => tipo,
            (false, false) => [tipo.as_slice(), b" ", &logradouro].concat(),
        }
    }

    /// An `S`/`N` option: `S`, `N` or `""`.
    pub fn flag(raw: &[u8]) -> &'static str {
        match clean(raw).as_slice() {
            b"S" | b"s" => "S",
            b"N" | b"n" => "N",
            _ => "",
        }
    }

    /// `porte_empresa`: one of 00, 01, 03, 05 (anything else 00).
    pub fn porte(raw: &[u8]) -> Vec<u8> {
        let code = code(raw, 2);
        if matches!(code.as_slice(), b"00" | b"01" | b"03" | b"05") { code } else { b"00".to_vec() }
    }

    /// `capital_social` of the synthetic form (digits, a comma, two digits) as served (`1000.00`);
    /// none for any other form, which the churn leaves alone.
    pub fn capital(raw: &[u8]) -> Option<String> {
        let text = String::from_utf8(clean(raw)).ok()?;
        let (int, frac) = text.split_once(',')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(int) || !digits(frac) || frac.len() != 2 {
            return None;
        }
        let int = int.trim_start_matches('0');
        let int = if int.is_empty() { "0" } else { int };
        (int.len() <= 16).then(|| format!("{int}.{frac}"))
    }

    /// Whether a name served from `old` differs from `new`, a clean text without digits. The
    /// build masks CPFs in names but keeps six of their digits, so a name with a digit is served
    /// with one, and one without is served cleaned.
    pub fn name_differs(old: &[u8], new: &[u8]) -> bool {
        let old = clean(old);
        old.iter().any(u8::is_ascii_digit) || old != new
    }

    /// The secondary CNAEs as compared: a set of padded codes.
    pub fn cnaes(raw: &[u8]) -> BTreeSet<Vec<u8>> {
        clean(raw).split(|&b| b == b',').map(|item| code(item, 7)).filter(|c| !c.is_empty()).collect()
    }
}

/// This month's churn: what every pick needs.
struct Churn<'a> {
    tables: &'a Tables,
    /// Who the partners of the chain are.
    partners: Partners,
    /// The evolve seed mixed with the generation: each month of a chain picks anew.
    seed: u64,
    generation: u32,
    /// `YYYYMMDD` of this month's changes.
    date: String,
    /// The `cnpj_ordem` of this month's new branches.
    ordem: String,
    /// The company indices of the new companies, per Empresas part.
    new: BTreeMap<u32, Range<u64>>,
}

/// Field changes of one record: `(field index, new value)`.
type Patch = Vec<(usize, Vec<u8>)>;
/// Events found on one record: `(event, field)`.
type Found = Vec<(&'static str, &'static str)>;

/// A member being written, and its summary.
struct Out<'w> {
    w: &'w mut dyn Write,
    path: &'w Path,
    summary: &'w mut FileSummary,
    line: Vec<u8>,
}

impl Out<'_> {
    fn put(&mut self, record: &[u8]) -> Result<(), SynthError> {
        self.summary.records += 1;
        self.summary.csv_bytes += record.len() as u64;
        self.w.write_all(record).map_err(|source| SynthError::Io { path: self.path.to_owned(), source })?;
        if !record.ends_with(b"\n") {
            self.summary.csv_bytes += 1;
            self.w.write_all(b"\n").map_err(|source| SynthError::Io { path: self.path.to_owned(), source })?;
        }
        Ok(())
    }

    /// A record the build rejects, copied.
    fn reject<R: BufRead>(&mut self, rec: &Records<R>) -> Result<(), SynthError> {
        self.summary.planted_rejects += 1;
        self.put(rec.raw())
    }

    /// A record kept, with its changes; `first` unless it repeats the key before it.
    fn record<R: BufRead>(&mut self, rec: &Records<R>, patch: &Patch, first: bool) -> Result<(), SynthError> {
        if !first {
            self.summary.planted_duplicates += 1;
        }
        if patch.is_empty() {
            return self.put(rec.raw());
        }
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        rec.patched(patch, &mut line);
        let put = self.put(&line);
        self.line = line;
        put
    }
}

/// The planted changes of one file, a JSON line each, and their count per event.
struct Events {
    w: BufWriter<File>,
    path: PathBuf,
    counts: BTreeMap<String, u64>,
}

impl Events {
    fn create(path: PathBuf) -> Result<Events, SynthError> {
        let file = File::create(&path).map_err(|source| SynthError::Io { path: path.clone(), source })?;
        Ok(Events { w: BufWriter::new(file), path, counts: BTreeMap::new() })
    }

    fn push(
        &mut self,
        event: &'static str,
        field: Option<&'static str>,
        cnpj: Option<&[u8]>,
        basico: &[u8],
    ) -> Result<(), SynthError> {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let change = PlantedChange {
            event: event.into(),
            field: field.map(Into::into),
            cnpj: cnpj.map(text),
            cnpj_basico: text(basico),
        };
        let io = |source| SynthError::Io { path: self.path.clone(), source };
        serde_json::to_writer(&mut self.w, &change).map_err(|e| io(e.into()))?;
        self.w.write_all(b"\n").map_err(io)?;
        *self.counts.entry(event.to_owned()).or_default() += 1;
        Ok(())
    }

    fn finish(mut self) -> Result<(BTreeMap<String, u64>, PathBuf), SynthError> {
        self.w.flush().map_err(|source| SynthError::Io { path: self.path.clone(), source })?;
        Ok((self.counts, self.path))
    }
}

impl Churn<'_> {
    fn rng(&self, salt: u64, key: &[u8]) -> Rng {
        Rng::keyed(self.seed, salt, key)
    }

    /// Whether the company goes this month, with all its rows.
    fn gone(&self, basico: &[u8]) -> bool {
        self.rng(salt::GONE, basico).chance(COMPANY_GONE)
    }

    fn new_companies(&self, part: u32) -> Range<u64> {
        self.new.get(&part).cloned().unwrap_or(0..0)
    }

    /// Writes one main file of the new month from its input file.
    fn file(
        &self,
        from: &Path,
        out: &Path,
        scratch: &Path,
        (zip, member): (&str, &str),
        table: Table,
        part: u32,
    ) -> Result<(FileSummary, BTreeMap<String, u64>, PathBuf), SynthError> {
        let input = from.join(zip);
        let path = out.join(zip);
        let mut events = Events::create(scratch.join(format!("{zip}.jsonl")))?;
        let mut summary = FileSummary { zip: zip.to_owned(), member: member.to_owned(), ..Default::default() };
        write_zip(&path, member, |w| {
            let mut out = Out { w, path: &path, summary: &mut summary, line: Vec::new() };
            with_records(&input, |rec| match table {
                Table::Empresas => self.empresas(rec, part, &mut out, &mut events),
                Table::Estabelecimentos => self.estabelecimentos(rec, part, &mut out, &mut events),
                Table::Socios => {
                    self.socios(rec, &mut out, &mut events)?;
                    let empresas = from.join(format!("Empresas{part}.zip"));
                    with_records(&empresas, |companies| self.entering_partners(companies, &mut out, &mut events))?;
                    self.new_partners(part, &mut out)
                }
                Table::Simples => self.simples(rec, &mut out, &mut events),
            })
        })?;
        let (counts, changes) = events.finish()?;
        Ok((summary, counts, changes))
    }

    /// Copies the rows of a table of 7 fields keyed by company (Empresas, Simples), less the
    /// gone companies', with `changes` applied; a key's changes are listed at its first row.
    fn company_rows<R: BufRead>(
        &self,
        rec: &mut Records<R>,
        out: &mut Out,
        events: &mut Events,
        changes: impl Fn(&Self, &Records<R>, &[u8]) -> (Patch, Found),
    ) -> Result<(), SynthError> {
        let mut prev = Vec::new();
        while rec.next()? {
            let Some(basico) = served::basico(rec.field(0)).filter(|_| rec.len() == 7) else {
                out.reject(rec)?;
                continue;
            };
            let first = basico != prev;
            if !self.gone(&basico) {
                let (patch, found) = changes(self, rec, &basico);
                out.record(rec, &patch, first)?;
                if first {
                    for &(event, field) in &found {
                        events.push(event, Some(field), None, &basico)?;
                    }
                }
            }
            prev = basico;
        }
        Ok(())
    }

    fn empresas<R: BufRead>(
        &self,
        rec: &mut Records<R>,
        part: u32,
        out: &mut Out,
        events: &mut Events,
    ) -> Result<(), SynthError> {
        self.company_rows(rec, out, events, Self::company_changes)?;
        let mut line = Vec::new();
        for i in self.new_companies(part) {
            line.clear();
            self.tables.empresa(&mut self.rng(salt::NEW_COMPANY, &i.to_le_bytes()), i, &mut line);
            out.put(&line)?;
        }
        Ok(())
    }

    fn company_changes<R: BufRead>(&self, rec: &Records<R>, basico: &[u8]) -> (Patch, Found) {
        let (mut patch, mut found) = (Patch::new(), Found::new());
        let mut rng = self.rng(salt::COMPANY, basico);
        let natureza = served::code(rec.field(2), 4);
        if rng.chance(RENAME_COMPANY) && natureza != b"2135" {
            let name = format!("{} {} {} LTDA", rng.pick(&WORDS), rng.pick(&LAST), rng.pick(&LAST));
            if served::name_differs(rec.field(1), name.as_bytes()) {
                patch.push((1, name.into_bytes()));
                found.push(("renamed", "razao_social"));
            }
        }
        if rng.chance(NATURE) {
            let to = rng.weighted(&[("2062", 45), ("2135", 30), ("2305", 10), ("2240", 5), ("2054", 5), ("3999", 5)]);
            if to.as_bytes() != natureza {
                patch.push((2, to.into()));
                found.push(("legal_nature_changed", "natureza_juridica"));
            }
        }
        if rng.chance(CAPITAL) {
            let to = 10u64.pow(rng.below(7) as u32) * (1 + rng.below(9));
            if served::capital(rec.field(4)).is_some_and(|old| old != format!("{to}.00")) {
                patch.push((4, format!("{to},00").into_bytes()));
                found.push(("capital_changed", "capital_social"));
            }
        }
        if rng.chance(SIZE) {
            let to = rng.weighted(&[("01", 60), ("05", 25), ("03", 15)]);
            if to.as_bytes() != served::porte(rec.field(5)) {
                patch.push((5, to.into()));
                found.push(("size_changed", "porte_empresa"));
            }
        }
        (patch, found)
    }

    fn estabelecimentos<R: BufRead>(
        &self,
        rec: &mut Records<R>,
        part: u32,
        out: &mut Out,
        events: &mut Events,
    ) -> Result<(), SynthError> {
        let mut prev = Vec::new();
        // A new branch, written after the last occurrence of its head office.
        let mut branch: Option<Vec<u8>> = None;
        while rec.next()? {
            let (basico, ordem) = (served::code(rec.field(0), 8), served::code(rec.field(1), 4));
            let cnpj = [basico.as_slice(), &ordem, &served::code(rec.field(2), 2)].concat();
            if rec.len() != 30 || cnpj_model::Cnpj::from_bytes(&cnpj).is_err() {
                out.reject(rec)?;
                continue;
            }
            let first = cnpj != prev;
            if first && let Some(row) = branch.take() {
                out.put(&row)?;
            }
            prev.clone_from(&cnpj);
            if self.gone(&basico) || (ordem != b"0001" && self.rng(salt::BRANCH_GONE, &cnpj).chance(BRANCH_GONE)) {
                if first {
                    events.push("disappeared", None, Some(&cnpj), &basico)?;
                }
                continue;
            }
            let (patch, found) = self.establishment_changes(rec, &cnpj);
            out.record(rec, &patch, first)?;
            if !first {
                continue;
            }
            for &(event, field) in &found {
                events.push(event, Some(field), Some(&cnpj), &basico)?;
            }
            let mut rng = self.rng(salt::BRANCH, &basico);
            if ordem == b"0001" && rng.chance(NEW_BRANCH) {
                let (row, new) = self.new_establishment(&mut rng, &basico, self.ordem.as_bytes(), b"2");
                events.push("opened", None, Some(&new), &basico)?;
                branch = Some(row);
            }
        }
        if let Some(row) = branch {
            out.put(&row)?;
        }
        for i in self.new_companies(part) {
            let basico = rows::basico(i);
            let mut rng = self.rng(salt::NEW_HEAD_OFFICE, &i.to_le_bytes());
            let (row, cnpj) = self.new_establishment(&mut rng, basico.as_bytes(), b"0001", b"1");
            out.put(&row)?;
            events.push("opened", None, Some(&cnpj), basico.as_bytes())?;
        }
        Ok(())
    }

    /// A new establishment, active since this month: the record and its CNPJ.
    fn new_establishment(&self, rng: &mut Rng, basico: &[u8], ordem: &[u8], matriz: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let base: [u8; 12] = [basico, ordem].concat().try_into().expect("8 + 4 characters");
        let dv = cnpj_model::check_digits(&base).expect("digits");
        let mut line = Vec::new();
        self.tables.estabelecimento(rng, 0, 1, &mut line);
        let mut generated = Records::new(line.as_slice(), Path::new("a generated record"));
        generated.next().expect("a generated record");
        let date = self.date.as_bytes().to_vec();
        let patch = vec![
            (0, basico.to_vec()),
            (1, ordem.to_vec()),
            (2, dv.to_vec()),
            (3, matriz.to_vec()),
            (5, b"02".to_vec()),
            (6, date.clone()),
            (7, b"00".to_vec()),
            (10, date),
        ];
        let mut row = Vec::new();
        generated.patched(&patch, &mut row);
        (row, [base.as_slice(), &dv].concat())
    }

    fn establishment_changes<R: BufRead>(&self, rec: &Records<R>, cnpj: &[u8]) -> (Patch, Found) {
        let (mut patch, mut found) = (Patch::new(), Found::new());
        let mut rng = self.rng(salt::ESTABLISHMENT, cnpj);
        let date = self.date.as_bytes();
        let situacao = served::code(rec.field(5), 2);
        if situacao != b"08" && rng.chance(CLOSE) {
            patch.extend([(5, b"08".to_vec()), (6, date.to_vec()), (7, b"01".to_vec())]);
            found.push(("status_changed", "situacao_cadastral"));
        } else if rng.chance(STATUS_OTHER) {
            let to: Option<(&[u8], &[u8])> = match situacao.as_slice() {
                b"02" => Some((b"04", b"63")),
                b"01" | b"03" | b"04" => Some((b"02", b"00")),
                _ => None,
            };
            if let Some((to, motivo)) = to {
                patch.extend([(5, to.to_vec()), (6, date.to_vec()), (7, motivo.to_vec())]);
                found.push(("status_changed", "situacao_cadastral"));
            }
        }
        let municipio = served::code(rec.field(20), 4);
        if rng.chance(MOVE) && municipio != b"9707" && served::clean(rec.field(19)) != b"EX" {
            if rng.chance(MOVE_CITY) {
                let (code, uf) = rng.pick(&self.tables.municipios);
                if code.as_bytes() != municipio {
                    patch.extend([(20, code.clone().into_bytes()), (19, uf.clone().into_bytes())]);
                    found.push(("moved", "municipio"));
                }
            }
            let cep = format!("{:08}", 10_000_000 + rng.below(89_999_999));
            if cep.as_bytes() != served::cep(rec.field(18)) {
                patch.push((18, cep.into_bytes()));
                found.push(("moved", "cep"));
            }
            let street = rng.pick(&STREETS).as_bytes();
            if served::logradouro(rec.field(13), street) != served::logradouro(rec.field(13), rec.field(14)) {
                patch.push((14, street.to_vec()));
                found.push(("moved", "logradouro"));
            }
            patch.push((15, (1 + rng.below(5000)).to_string().into_bytes()));
        }
        if rng.chance(RENAME) {
            let name = format!("{} {}", rng.pick(&WORDS), rng.pick(&LAST));
            if served::name_differs(rec.field(4), name.as_bytes()) {
                patch.push((4, name.into_bytes()));
                found.push(("renamed", "nome_fantasia"));
            }
        }
        if rng.chance(MAIN_CNAE) {
            let cnae = rng.pick(&self.tables.cnaes);
            if cnae.as_bytes() != served::code(rec.field(11), 7) {
                patch.push((11, cnae.clone().into_bytes()));
                found.push(("main_activity_changed", "cnae_fiscal"));
            }
        }
        if rng.chance(SECONDARY_CNAES) {
            let old = served::cnaes(rec.field(12));
            let mut codes: Vec<Vec<u8>> = old.iter().cloned().collect();
            match rng.below(3) {
                0 => codes.push(rng.pick(&self.tables.cnaes).clone().into_bytes()),
                1 if !codes.is_empty() => {
                    codes.remove(rng.below(codes.len() as u64) as usize);
                }
                _ => codes = (0..1 + rng.below(3)).map(|_| rng.pick(&self.tables.cnaes).clone().into_bytes()).collect(),
            }
            let raw = codes.join(&b',');
            if served::cnaes(&raw) != old {
                patch.push((12, raw));
                found.push(("secondary_activities_changed", "cnaes_secundarios"));
            }
        }
        (patch, found)
    }

    fn socios<R: BufRead>(&self, rec: &mut Records<R>, out: &mut Out, events: &mut Events) -> Result<(), SynthError> {
        // Partners are duplicates only when wholly identical: the previous record, raw.
        let mut prev = Vec::new();
        while rec.next()? {
            let Some(basico) = served::basico(rec.field(0)).filter(|_| rec.len() == 11) else {
                out.reject(rec)?;
                continue;
            };
            let first = rec.raw() != prev.as_slice();
            if first {
                prev.clear();
                prev.extend_from_slice(rec.raw());
            }
            if self.gone(&basico) {
                continue;
            }
            if self.rng(salt::LEAVE, rec.raw()).chance(PARTNER_LEAVE) {
                if first {
                    events.push("partner_left", Some("socios"), None, &basico)?;
                }
                continue;
            }
            out.record(rec, &Patch::new(), first)?;
        }
        Ok(())
    }

    /// Partners entering the companies of an Empresas part (read again for them).
    fn entering_partners<R: BufRead>(
        &self,
        companies: &mut Records<R>,
        out: &mut Out,
        events: &mut Events,
    ) -> Result<(), SynthError> {
        let mut prev = Vec::new();
        let mut line = Vec::new();
        while companies.next()? {
            let Some(basico) = served::basico(companies.field(0)).filter(|_| companies.len() == 7) else {
                continue;
            };
            if basico == prev {
                continue;
            }
            let mut rng = self.rng(salt::ENTER, &basico);
            if !self.gone(&basico) && rng.chance(PARTNER_ENTER) {
                let basico_text = String::from_utf8_lossy(&basico).into_owned();
                let partner = match rng.weighted(&[("new", 75), ("person", 20), ("holding", 5)]) {
                    "person" => self.partners.recurring_person(&mut rng),
                    "holding" => self.partners.recurring_holding(&mut rng, &basico_text),
                    _ => Partner {
                        tipo: "2",
                        nome: format!("{} {} {}", rng.pick(&FIRST), rng.pick(&FIRST), rng.pick(&LAST)).into_bytes(),
                        documento: format!("***{:03}{:03}**", self.generation % 1000, rng.below(1000)),
                        faixa: 1 + rng.below(9),
                    },
                };
                let qualificacao = rng.weighted(&[("49", 60), ("22", 30), ("05", 10)]);
                line.clear();
                rows::record(
                    &mut line,
                    &[
                        &basico,
                        partner.tipo.as_bytes(),
                        &partner.nome,
                        partner.documento.as_bytes(),
                        qualificacao.as_bytes(),
                        self.date.as_bytes(),
                        b"",
                        b"***000000**",
                        b"",
                        b"00",
                        partner.faixa.to_string().as_bytes(),
                    ],
                );
                out.put(&line)?;
                events.push("partner_entered", Some("socios"), None, &basico)?;
            }
            prev = basico;
        }
        Ok(())
    }

    /// The partners of the new companies of an Empresas part (none for most).
    fn new_partners(&self, part: u32, out: &mut Out) -> Result<(), SynthError> {
        let mut line = Vec::new();
        for i in self.new_companies(part) {
            let mut rng = self.rng(salt::NEW_PARTNERS, &i.to_le_bytes());
            let partners = rng.weighted(&[("0", 60), ("1", 30), ("2", 10)]);
            for _ in 0..partners.parse::<u32>().expect("a count") {
                line.clear();
                let k = rng.next();
                self.partners.socio(self.tables, &mut rng, k, i, &mut line);
                out.put(&line)?;
            }
        }
        Ok(())
    }

    fn simples<R: BufRead>(&self, rec: &mut Records<R>, out: &mut Out, events: &mut Events) -> Result<(), SynthError> {
        self.company_rows(rec, out, events, Self::simples_changes)?;
        let mut line = Vec::new();
        for i in self.new.values().flat_map(Clone::clone) {
            let mut rng = self.rng(salt::NEW_SIMPLES, &i.to_le_bytes());
            if rng.chance(NEW_SIMPLES) {
                line.clear();
                self.tables.simples(&mut rng, i, &mut line);
                out.put(&line)?;
            }
        }
        Ok(())
    }

    /// Simples and MEI exits and entries: (option, opted since, excluded since) are fields 1-3
    /// and 4-6.
    fn simples_changes<R: BufRead>(&self, rec: &Records<R>, basico: &[u8]) -> (Patch, Found) {
        let (mut patch, mut found) = (Patch::new(), Found::new());
        let mut rng = self.rng(salt::SIMPLES, basico);
        let date = self.date.as_bytes();
        let options = [
            (1, SIMPLES_OUT, SIMPLES_IN, "simples_opted_out", "simples_opted_in", "opcao_simples"),
            (4, MEI_OUT, MEI_IN, "mei_opted_out", "mei_opted_in", "opcao_mei"),
        ];
        for (at, out, into, opted_out, opted_in, field) in options {
            if served::flag(rec.field(at)) == "S" {
                if rng.chance(out) {
                    patch.extend([(at, b"N".to_vec()), (at + 2, date.to_vec())]);
                    found.push((opted_out, field));
                }
            } else if rng.chance(into) {
                patch.extend([(at, b"S".to_vec()), (at + 1, date.to_vec()), (at + 2, b"00000000".to_vec())]);
                found.push((opted_in, field));
            }
        }
        (patch, found)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashSet};

    use super::*;
    use crate::{SynthOptions, generate};

    fn check_served(got: Vec<u8>, expected: &str) {
        assert_eq!(String::from_utf8_lossy(&got), expected);
    }

    #[test]
    fn served_values_follow_the_build() {
        check_served(served::clean(b"  LOTE\x00  2 \xa0QUADRA "), "LOTE 2 QUADRA");
        check_served(served::code(b"8", 2), "08");
        check_served(served::code(b" 7107", 4), "7107");
        check_served(served::code(b"", 2), "");
        check_served(served::code(b"a1", 4), "A1");
        check_served(served::cep(b"1310100"), "01310100");
        check_served(served::cep(b"0"), "");
        check_served(served::cep(b"00000000"), "");
        check_served(served::cep(b"0131010X"), "");
        check_served(served::logradouro(b"RUA", b" DAS  FLORES"), "RUA DAS FLORES");
        check_served(served::logradouro(b"", b"BRASIL"), "BRASIL");
        check_served(served::porte(b"1"), "01");
        check_served(served::porte(b""), "00");
        check_served(served::porte(b"07"), "00");
        assert_eq!(served::basico(b"1234567"), Some(b"01234567".to_vec()));
        assert_eq!(served::basico(b"99999999X"), None);
        assert_eq!(served::flag(b" s "), "S");
        assert_eq!(served::flag(b"X"), "");
        assert_eq!(served::capital(b"000010000,00").as_deref(), Some("10000.00"));
        assert_eq!(served::capital(b"0,00").as_deref(), Some("0.00"));
        assert_eq!(served::capital(b"1.000,00"), None, "another form: left alone");
        assert_eq!(served::capital(b""), None);
        assert!(!served::name_differs(b"PADARIA  SILVA", b"PADARIA SILVA"));
        assert!(served::name_differs(b"PADARIA SILVA", b"PADARIA LIMA"));
        assert!(served::name_differs(b"JOSE SILVA 12345678901", b"JOSE SILVA"));
        let set = |codes: &[&str]| codes.iter().map(|c| c.as_bytes().to_vec()).collect::<BTreeSet<_>>();
        assert_eq!(served::cnaes(b"6201501,111301, 6201501,"), set(&["0111301", "6201501"]));
        assert_eq!(served::cnaes(b""), set(&[]));
    }

    #[test]
    fn picks_are_a_function_of_seed_salt_and_key() {
        let draws = |seed, salt, key: &[u8]| {
            let mut rng = Rng::keyed(seed, salt, key);
            (0..4).map(|_| rng.next()).collect::<Vec<_>>()
        };
        assert_eq!(draws(1, salt::GONE, b"12345678"), draws(1, salt::GONE, b"12345678"));
        assert_ne!(draws(1, salt::GONE, b"12345678"), draws(2, salt::GONE, b"12345678"));
        assert_ne!(draws(1, salt::GONE, b"12345678"), draws(1, salt::LEAVE, b"12345678"));
        assert_ne!(draws(1, salt::GONE, b"12345678"), draws(1, salt::GONE, b"12345679"));
        assert_ne!(draws(1, salt::GONE, b"1234567800"), draws(1, salt::GONE, b"12345678"));
        // Keyed picks land at their rate.
        let keys = 400_000;
        let picked =
            (0..keys).filter(|i: &u64| Rng::keyed(7, salt::ESTABLISHMENT, &i.to_le_bytes()).chance(CLOSE)).count();
        let expected = keys as f64 * CLOSE;
        assert!((picked as f64 - expected).abs() < 4.0 * expected.sqrt(), "{picked} picked, {expected} expected");
    }

    #[test]
    fn member_kinds_and_parts() {
        assert_eq!(kind("Empresas3.zip"), Some((Table::Empresas, 3)));
        assert_eq!(kind("Estabelecimentos0.zip"), Some((Table::Estabelecimentos, 0)));
        assert_eq!(kind("Simples.zip"), Some((Table::Simples, 0)));
        assert_eq!(kind("Socios9.zip"), Some((Table::Socios, 9)));
        assert_eq!(kind("Cnaes.zip"), None);
        assert_eq!(kind("Empresas.zip.part"), None);
    }

    /// The valid CNPJs of a month's Estabelecimentos, each once, and how many valid records name
    /// them.
    fn establishments(dir: &Path, report: &SynthReport) -> (HashSet<String>, u64) {
        let mut keys = HashSet::new();
        let mut records = 0;
        for f in report.files.iter().filter(|f| f.zip.starts_with("Estabelecimentos")) {
            with_records(&dir.join(&f.zip), |rec| {
                while rec.next()? {
                    let cnpj = [rec.field(0), rec.field(1), rec.field(2)].concat();
                    if rec.len() == 30 && cnpj_model::Cnpj::from_bytes(&cnpj).is_ok() {
                        records += 1;
                        keys.insert(String::from_utf8(cnpj).unwrap());
                    }
                }
                Ok(())
            })
            .unwrap();
        }
        (keys, records)
    }

    /// A month's partner rows as (tipo, nome, documento, data_entrada).
    fn partner_rows(dir: &Path, report: &SynthReport) -> Vec<[Vec<u8>; 4]> {
        let mut rows = Vec::new();
        for f in report.files.iter().filter(|f| f.zip.starts_with("Socios")) {
            with_records(&dir.join(&f.zip), |rec| {
                while rec.next()? {
                    if rec.len() == 11 {
                        rows.push([1, 2, 3, 5].map(|i| rec.field(i).to_vec()));
                    }
                }
                Ok(())
            })
            .unwrap();
        }
        rows
    }

    fn changes(dir: &Path) -> Vec<PlantedChange> {
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("synth.json")).unwrap()).unwrap();
        serde_json::from_value(manifest["planted_changes"].clone()).unwrap()
    }

    #[test]
    fn an_evolved_month_is_deterministic_with_new_keys_valid_and_unique() {
        let dir = tempfile::tempdir().unwrap();
        let (base, next, again, after) =
            (dir.path().join("base"), dir.path().join("next"), dir.path().join("again"), dir.path().join("after"));
        let first = generate(&SynthOptions { month: "2026-12".into(), ..SynthOptions::new(0.0002, &base) }).unwrap();
        assert!(changes(&base).is_empty());
        let evolved = evolve(&EvolveOptions { from: base.clone(), out: next.clone(), seed: 3 }).unwrap();
        evolve(&EvolveOptions { from: base.clone(), out: again.clone(), seed: 3 }).unwrap();
        assert_eq!((evolved.month.as_str(), evolved.generation), ("2027-01", 1));
        assert_eq!(evolved.files.len(), 37);
        for f in &evolved.files {
            assert!(f.member.contains(".D70113"), "{}", f.member);
            let same = std::fs::read(next.join(&f.zip)).unwrap() == std::fs::read(again.join(&f.zip)).unwrap();
            assert!(same, "{} differs for the same month and seed", f.zip);
        }
        assert_eq!(std::fs::read(next.join("synth.json")).unwrap(), std::fs::read(again.join("synth.json")).unwrap());
        assert!(!next.join(".planted").exists(), "the scratch folder is removed");

        let (before, _) = establishments(&base, &first);
        let (now, records) = establishments(&next, &evolved);
        let planted = changes(&next);
        let count = |event: &str| planted.iter().filter(|c| c.event == event).count() as u64;
        assert_eq!(evolved.churn["opened"], count("opened"));
        assert!(count("opened") > 0 && count("disappeared") > 0 && count("status_changed") > 0);
        let duplicates: u64 =
            evolved.files.iter().filter(|f| f.zip.starts_with("Estabelecimentos")).map(|f| f.planted_duplicates).sum();
        assert_eq!(now.len() as u64, records - duplicates, "every key once, but for the planted duplicates");
        let served: u64 =
            evolved.files.iter().filter(|f| f.zip.starts_with("Estabelecimentos")).map(FileSummary::served).sum();
        assert_eq!(now.len() as u64, served);
        assert_eq!(now.len() as u64, before.len() as u64 + count("opened") - count("disappeared"));
        for change in &planted {
            let cnpj = change.cnpj.as_deref().unwrap_or_default();
            match change.event.as_str() {
                "opened" => assert!(now.contains(cnpj) && !before.contains(cnpj), "{change:?}"),
                "disappeared" => assert!(before.contains(cnpj) && !now.contains(cnpj), "{change:?}"),
                _ if change.cnpj.is_some() => assert!(now.contains(cnpj) && before.contains(cnpj), "{change:?}"),
                _ => assert!(change.field.is_some(), "{change:?}"),
            }
        }

        // Partners enter on the 10th, recurring people of the month before among them.
        let people: HashSet<[Vec<u8>; 2]> =
            partner_rows(&base, &first).into_iter().map(|[_, nome, documento, _]| [nome, documento]).collect();
        let entered: Vec<[Vec<u8>; 4]> =
            partner_rows(&next, &evolved).into_iter().filter(|r| r[3] == b"20270110").collect();
        assert_eq!(entered.len() as u64, evolved.churn["partner_entered"]);
        let recurring = entered
            .iter()
            .filter(|[tipo, nome, documento, _]| tipo == b"2" && people.contains(&[nome.clone(), documento.clone()]));
        assert!(recurring.count() > 0, "a recurring person enters a company");

        // A chain: the evolved month evolves too, with new keys again.
        let later = evolve(&EvolveOptions { from: next.clone(), out: after.clone(), seed: 3 }).unwrap();
        assert_eq!((later.month.as_str(), later.generation), ("2027-02", 2));
        assert_eq!(later.evolved_from.as_deref(), Some("2027-01"));
        assert!(later.next_company > evolved.next_company && later.next_ordem == evolved.next_ordem + 1);
        let (after_keys, _) = establishments(&after, &later);
        let opened: Vec<PlantedChange> = changes(&after).into_iter().filter(|c| c.event == "opened").collect();
        assert!(!opened.is_empty());
        for change in opened {
            let cnpj = change.cnpj.unwrap();
            assert!(after_keys.contains(&cnpj) && !now.contains(&cnpj) && !before.contains(&cnpj), "{cnpj}");
        }

        let refused = evolve(&EvolveOptions { from: next.clone(), out: next.clone(), seed: 3 }).unwrap_err();
        assert!(matches!(refused, SynthError::SameFolder(_)), "{refused}");
    }
}
