//! Whether the input is one whole month of one delivery: checked before the build trusts it.
//!
//! The folder (before anything is read): every `.zip` a readable regular file holding members; when
//! the downloader's `manifest.json` is there, every zip it lists present with its size and
//! SHA-256; no two files of the same kind and part (Simples and the lookups are one file each); a
//! numbered series (Empresas, Estabelecimentos, Socios) from part 0 without a gap, and a warning
//! when it has fewer than the ten parts the RFB ships; every main-table member (Empresas,
//! Estabelecimentos, Socios, Simples) of the same date stamp (`D60913` in
//! `K3241.K03200Y0.D60913.EMPRECSV`), none without one. The lookups (once read): none empty, none
//! lacking most of the codes of the project's copy of its table. The content (once read): no file
//! without rows, rejects within [`MAX_REJECT_PERCENT`], no text that reads as UTF-8 where
//! Latin-1 is expected. Every problem is collected, then the build fails naming them all, unless
//! `accept_incomplete` (or, for stale files, `ignore_stale`) turns them into warnings.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cnpj_load::SourceFile;
use cnpj_model::FileKind;
use cnpj_model::rows::LookupRow;
use cnpj_normalize::CapitalIssue;
use cnpj_parse::{Member, ParseError, TextStats};
use rayon::prelude::*;
use serde::Deserialize;

use crate::error::{BuildError, CheckError};
use crate::report::{BuildReport, CapitalExample, CapitalNotLoaded};

/// A file fails when more than this share of its rows is rejected…
pub const MAX_REJECT_PERCENT: u64 = 1;
/// …and at least this many rows are (or all of them are): a planted reject in a ten-row
/// sample file is 10 %, and says nothing about the delivery.
pub const MIN_REJECTS: u64 = 10;

/// Examples kept per file in the report's capital section.
const CAPITAL_EXAMPLES: usize = 5;

/// The parts (0-9) of each numbered series in an RFB month.
const RFB_PARTS: usize = 10;

/// Codes named in a warning about a lookup table, at most.
const CODES_NAMED: usize = 5;

/// What the problems of a refused month are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// Incomplete or damaged input (`accept_incomplete` builds it anyway).
    Incomplete,
    /// A main-table member of another delivery (`ignore_stale` leaves it out).
    Stale,
    /// Two files of the same kind and part: which one is meant cannot be guessed.
    DuplicatePart,
    /// A required table has no file at all: there is nothing to build it from.
    Missing,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemKind,
    pub text: String,
}

/// What the reading of each member noted for the checks and the report: its text's encoding
/// evidence and the capitals that could not be loaded. Shared by the reading threads.
#[derive(Debug, Default)]
pub struct Notes {
    members: Mutex<HashMap<i32, MemberNotes>>,
}

#[derive(Debug, Default)]
struct MemberNotes {
    text: TextStats,
    capital: BTreeMap<&'static str, (u64, Vec<CapitalExample>)>,
}

impl Notes {
    pub fn text(&self, id: i32, stats: TextStats) {
        self.members.lock().expect("notes lock").entry(id).or_default().text = stats;
    }

    pub fn capital(&self, id: i32, issues: Vec<(u64, CapitalIssue, String)>, total: &HashMap<CapitalIssue, u64>) {
        if total.is_empty() {
            return;
        }
        let mut members = self.members.lock().expect("notes lock");
        let notes = members.entry(id).or_default();
        for (issue, rows) in total {
            notes.capital.entry(issue.reason()).or_default().0 += rows;
        }
        for (line, issue, value) in issues {
            let (_, examples) = notes.capital.entry(issue.reason()).or_default();
            if examples.len() < CAPITAL_EXAMPLES {
                examples.push(CapitalExample { line, value });
            }
        }
    }

    /// The report's section: capitals not loaded (the rows are, with a null capital), per file
    /// and reason.
    pub fn capital_report(&self, files: &[SourceFile]) -> Vec<CapitalNotLoaded> {
        let members = self.members.lock().expect("notes lock");
        let mut out = Vec::new();
        for file in files {
            let Some(notes) = members.get(&file.id) else { continue };
            for (reason, (rows, examples)) in &notes.capital {
                out.push(CapitalNotLoaded {
                    zip: file.zip.clone(),
                    member: file.member.clone(),
                    reason,
                    rows: *rows,
                    examples: examples.clone(),
                });
            }
        }
        out
    }
}

/// Collects the capital issues of one member while it is read: every one counted, the first few
/// kept as examples.
#[derive(Debug, Default)]
pub struct CapitalTally {
    pub examples: Vec<(u64, CapitalIssue, String)>,
    pub rows: HashMap<CapitalIssue, u64>,
}

impl CapitalTally {
    pub fn note(&mut self, line: u64, issue: CapitalIssue, value: String) {
        *self.rows.entry(issue).or_default() += 1;
        if self.examples.len() < CAPITAL_EXAMPLES * 2 {
            self.examples.push((line, issue, value));
        }
    }
}

/// The checks of one build: problems found so far, and what the options let through.
#[derive(Debug)]
pub struct Checks {
    input: PathBuf,
    accept_incomplete: bool,
    ignore_stale: bool,
    problems: Vec<Problem>,
    warnings: Vec<String>,
    /// The delivery's date stamp (`D60913`), once the members are checked.
    delivery: Option<String>,
}

/// What the build reads of the downloader's `manifest.json` (written by `cnpj-download`): each
/// zip it completed, with its size and SHA-256.
#[derive(Debug, Deserialize)]
struct DownloadManifest {
    files: BTreeMap<String, DownloadedZip>,
}

#[derive(Debug, Deserialize)]
struct DownloadedZip {
    size: u64,
    #[serde(default)]
    sha256: String,
}

fn zip_name(m: &Member) -> String {
    m.zip.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn described(m: &Member) -> String {
    format!("{} ({})", zip_name(m), m.name)
}

/// The date stamp of a member name: `D60913` in `K3241.K03200Y0.D60913.EMPRECSV` or
/// `F.K03200$W.SIMPLES.CSV.D60913`.
pub fn date_stamp(member: &str) -> Option<&str> {
    member.split('.').find(|part| {
        let b = part.as_bytes();
        b.len() == 6
            && b[0] == b'D'
            && b[1..].iter().all(u8::is_ascii_digit)
            && part[2..4].parse::<u8>().is_ok_and(|m| (1..=12).contains(&m))
    })
}

/// The part number of a member: the RFB's own (`Y3` in `K3241.K03200Y3.D60314.ESTABELE`), else
/// the digits that end the zip's name (`Estabelecimentos3.zip`); `None` for single files.
pub fn part_number(m: &Member) -> Option<u64> {
    let marker = m.name.split('.').find_map(|part| {
        let (head, digits) = part.rsplit_once('Y')?;
        (head.starts_with('K') && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    });
    marker.or_else(|| {
        let zip = zip_name(m);
        let stem = zip.strip_suffix(".zip").or_else(|| zip.strip_suffix(".ZIP")).unwrap_or(&zip);
        let digits = &stem[stem.trim_end_matches(|c: char| c.is_ascii_digit()).len()..];
        digits.parse().ok()
    })
}

fn is_main(kind: FileKind) -> bool {
    matches!(kind, FileKind::Empresas | FileKind::Estabelecimentos | FileKind::Socios | FileKind::Simples)
}

/// The kinds that come in numbered parts; every other kind is one file.
fn is_series(kind: FileKind) -> bool {
    matches!(kind, FileKind::Empresas | FileKind::Estabelecimentos | FileKind::Socios)
}

/// The delivery's date stamp among the names of main-table members: the most common, the newest
/// on a tie.
pub fn delivery_stamp<'a>(main_members: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut stamps: BTreeMap<&str, usize> = BTreeMap::new();
    for stamp in main_members.filter_map(date_stamp) {
        *stamps.entry(stamp).or_default() += 1;
    }
    stamps.iter().max_by_key(|&(stamp, n)| (*n, *stamp)).map(|(stamp, _)| (*stamp).to_owned())
}

/// The SHA-256 of a file, in hex.
fn sha256(path: &Path) -> std::io::Result<String> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

fn ranges(parts: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < parts.len() {
        let mut j = i;
        while j + 1 < parts.len() && parts[j + 1] == parts[j] + 1 {
            j += 1;
        }
        out.push(if i == j { parts[i].to_string() } else { format!("{}–{}", parts[i], parts[j]) });
        i = j + 1;
    }
    out.join(", ")
}

impl Checks {
    pub fn new(input: &Path, accept_incomplete: bool, ignore_stale: bool) -> Checks {
        Checks {
            input: input.to_owned(),
            accept_incomplete,
            ignore_stale,
            problems: Vec::new(),
            warnings: Vec::new(),
            delivery: None,
        }
    }

    fn problem(&mut self, kind: ProblemKind, text: String) {
        self.problems.push(Problem { kind, text });
    }

    /// A warning: logged, and kept for the report.
    pub fn warn(&mut self, text: String) {
        tracing::warn!("{text}");
        self.warnings.push(text);
    }

    /// The delivery's date stamp (`D60913`): the most common among the main-table members.
    pub fn delivery(&self) -> Option<&str> {
        self.delivery.as_deref()
    }

    /// When the folder holds the downloader's `manifest.json`: every zip it lists is there, of the
    /// size and SHA-256 it recorded (the zips are hashed in parallel).
    pub fn manifest(&mut self) {
        let path = self.input.join("manifest.json");
        let Ok(bytes) = std::fs::read(&path) else { return };
        let manifest: DownloadManifest = match serde_json::from_slice(&bytes) {
            Ok(manifest) => manifest,
            Err(e) => {
                self.problem(ProblemKind::Incomplete, format!("manifest.json is not the downloader's manifest ({e})"));
                return;
            }
        };
        let mut found: Vec<String> = manifest
            .files
            .par_iter()
            .filter_map(|(name, listed)| {
                let path = self.input.join(name);
                let size = match std::fs::metadata(&path) {
                    Err(_) => return Some(format!("{name} is missing: manifest.json lists it as downloaded")),
                    Ok(m) => m.len(),
                };
                if size != listed.size {
                    return Some(format!(
                        "{name} is {size} bytes, manifest.json says {} (altered since downloaded)",
                        listed.size
                    ));
                }
                if listed.sha256.is_empty() {
                    return None;
                }
                match sha256(&path) {
                    Err(e) => Some(format!("{name} cannot be read ({e})")),
                    Ok(hash) if hash != listed.sha256 => Some(format!(
                        "{name} does not have the SHA-256 manifest.json records (altered since downloaded)"
                    )),
                    Ok(_) => None,
                }
            })
            .collect();
        found.sort();
        for text in found {
            self.problem(ProblemKind::Incomplete, text);
        }
    }

    /// Every `.zip` entry of the folder is a readable regular file with members. A folder that
    /// cannot be listed is left to the build's own error.
    pub fn folder(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.input) else { return };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.extension().is_some_and(|e| e.eq_ignore_ascii_case("zip")) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let problem = match std::fs::metadata(&path) {
                Err(e) if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) => {
                    Some(format!("{name} is a dangling symbolic link ({e})"))
                }
                Err(e) => Some(format!("{name} cannot be read ({e})")),
                Ok(m) if m.is_dir() => Some(format!("{name} is a directory, not a zip file")),
                Ok(m) if !m.is_file() => Some(format!("{name} is not a regular file")),
                Ok(_) => match std::fs::File::open(&path) {
                    Err(e) => Some(format!("{name} cannot be read ({e})")),
                    Ok(_) => match cnpj_parse::list_members(&path) {
                        Err(ParseError::Empty { .. }) => Some(format!("{name} is a zip without any member")),
                        _ => None,
                    },
                },
            };
            found.extend(problem);
        }
        found.sort();
        for text in found {
            self.problem(ProblemKind::Incomplete, text);
        }
    }

    /// The members: one delivery (main-table date stamps agree, and none is missing: stale members
    /// are problems, or left out with `ignore_stale`), no two of the same kind and part, numbered
    /// series whole from part 0.
    pub fn members(&mut self, members: &mut Vec<Member>) {
        let present: BTreeSet<FileKind> = members.iter().map(|m| m.kind).collect();
        let missing: Vec<&str> =
            FileKind::ALL.iter().filter(|k| k.required() && !present.contains(k)).map(|k| k.name()).collect();
        if !missing.is_empty() {
            self.problem(ProblemKind::Missing, format!("missing required tables: {}", missing.join(", ")));
        }
        self.delivery = delivery_stamp(members.iter().filter(|m| is_main(m.kind)).map(|m| m.name.as_str()));
        if let Some(delivery) = self.delivery.clone() {
            members.retain(|m| self.of_the_delivery(m, &delivery));
        }
        self.parts(members);
    }

    /// Whether a member is kept: a main-table member whose stamp is not the delivery's (or that has
    /// none) is a problem, or left out with `ignore_stale`.
    fn of_the_delivery(&mut self, m: &Member, delivery: &str) -> bool {
        if !is_main(m.kind) {
            return true;
        }
        let stamp = date_stamp(&m.name);
        if stamp == Some(delivery) {
            return true;
        }
        let what = match stamp {
            Some(stamp) => format!("its date stamp {stamp} is not the delivery's {delivery}"),
            None => format!("it has no date stamp, while the delivery's main tables carry {delivery}"),
        };
        if self.ignore_stale {
            self.warn(format!("{} left out: {what}", described(m)));
            return false;
        }
        let text = match stamp {
            Some(stamp) => {
                format!("{}: date stamp {stamp} differs from the other main tables' {delivery}", described(m))
            }
            None => format!("{}: no date stamp, while the other main tables carry {delivery}", described(m)),
        };
        let hint = "(a file of another delivery? remove it, or --ignore-stale leaves it out)";
        self.problem(ProblemKind::Stale, format!("{text} {hint}"));
        true
    }

    /// No two files of one kind and part (Simples and the lookups are one file each); each
    /// numbered series from part 0 without a gap, with a warning for a series shorter than the
    /// RFB's ten parts.
    fn parts(&mut self, members: &[Member]) {
        let mut by_part: BTreeMap<(FileKind, Option<u64>), Vec<&Member>> = BTreeMap::new();
        for m in members.iter().filter(|m| m.kind != FileKind::TaxRegime) {
            let part = if is_series(m.kind) { part_number(m) } else { None };
            by_part.entry((m.kind, part)).or_default().push(m);
        }
        let mut series: BTreeMap<FileKind, BTreeSet<u64>> = BTreeMap::new();
        for ((kind, part), same) in &by_part {
            if same.len() > 1 {
                let files: Vec<String> = same.iter().map(|m| described(m)).collect();
                let which = part.map_or_else(String::new, |p| format!(" part {p}"));
                let text = format!("{}{which} is given twice: {}", kind.name(), files.join(" and "));
                self.problem(ProblemKind::DuplicatePart, text);
            }
            if let Some(p) = part {
                series.entry(*kind).or_default().insert(*p);
            }
        }
        let mut short = Vec::new();
        for (kind, parts) in series {
            let present: Vec<u64> = parts.iter().copied().collect();
            let high = present.last().copied().unwrap_or(0);
            let missing: Vec<u64> = (0..=high).filter(|p| !parts.contains(p)).collect();
            if !missing.is_empty() {
                let text = format!(
                    "{}: part{} {} missing (parts {} present)",
                    kind.name(),
                    if missing.len() == 1 { "" } else { "s" },
                    ranges(&missing),
                    ranges(&present)
                );
                self.problem(ProblemKind::Incomplete, text);
            }
            if present.len() < RFB_PARTS {
                short.push(format!("{} {}", kind.name(), ranges(&present)));
            }
        }
        if !short.is_empty() {
            self.warn(format!(
                "fewer parts than the {RFB_PARTS} (0-9) the RFB ships of each numbered table: {} (a month cut short \
                 at its last part is told only by the downloader's manifest.json)",
                short.join(", ")
            ));
        }
    }

    /// The lookups against the project's copy of each table: a table that lacks most of its codes
    /// is cut short (a problem), one that lacks a few is served with the project's rows for them
    /// (a warning). `seen` holds each table's codes as read; `files`, the files read. Returns the
    /// project's rows of the codes each table lacks.
    pub fn lookups(
        &mut self,
        seen: &HashMap<FileKind, HashMap<String, String>>,
        files: &[SourceFile],
    ) -> Vec<(FileKind, Vec<LookupRow>)> {
        let mut gaps = Vec::new();
        for kind in FileKind::ALL.into_iter().filter(|k| k.is_lookup()) {
            let Some(codes) = seen.get(&kind) else { continue };
            let known = cnpj_normalize::bundled(kind);
            let lacking: Vec<LookupRow> = known.iter().filter(|r| !codes.contains_key(&r.code)).cloned().collect();
            if lacking.is_empty() {
                continue;
            }
            let zips: Vec<String> =
                files.iter().filter(|f| f.kind == kind).map(|f| format!("{} ({})", f.zip, f.member)).collect();
            let table = format!("the lookup table {} of {}", kind.name(), zips.join(" and "));
            match (codes.is_empty(), lacking.len() * 2 > known.len()) {
                // An empty table is a problem of its own (`files`).
                (true, _) => {}
                (false, true) => {
                    let text = format!(
                        "{table} holds {} of the {} codes the project knows, {} of them missing: cut short?",
                        known.len() - lacking.len(),
                        known.len(),
                        lacking.len()
                    );
                    self.problem(ProblemKind::Incomplete, text);
                }
                (false, false) => {
                    let named: Vec<&str> = lacking.iter().take(CODES_NAMED).map(|r| r.code.as_str()).collect();
                    let more = if lacking.len() > CODES_NAMED { ", …" } else { "" };
                    self.warn(format!(
                        "{table} lacks {} of the {} codes the project knows ({}{more}): they are served from the \
                         project's copy of the table",
                        lacking.len(),
                        known.len(),
                        named.join(", ")
                    ));
                }
            }
            gaps.push((kind, lacking));
        }
        gaps
    }

    /// The files read: rows, rejects, encoding; and, for lookup files, that each lookup table
    /// has rows.
    pub fn files(&mut self, files: &[SourceFile], notes: &Notes) {
        let members = notes.members.lock().expect("notes lock");
        let mut lookup_rows: BTreeMap<FileKind, u64> = BTreeMap::new();
        for f in files {
            let name = format!("{} ({})", f.zip, f.member);
            if f.kind.is_lookup() {
                *lookup_rows.entry(f.kind).or_default() += f.lookup_counts.map_or(0, |c| c.rows_loaded);
            }
            if f.rows_read == 0 {
                self.problem(ProblemKind::Incomplete, format!("{name} has no rows"));
            } else if f.rows_rejected * 100 > f.rows_read * MAX_REJECT_PERCENT
                && (f.rows_rejected >= MIN_REJECTS || f.rows_rejected == f.rows_read)
            {
                let text = format!(
                    "{name}: {} of {} rows rejected ({:.1} %, more than {MAX_REJECT_PERCENT} %; see the rejects table)",
                    f.rows_rejected,
                    f.rows_read,
                    f.rows_rejected as f64 * 100.0 / f.rows_read as f64
                );
                self.problem(ProblemKind::Incomplete, text);
            }
            if let Some(notes) = members.get(&f.id).filter(|n| n.text.looks_like_binary()) {
                let text = format!(
                    "{name} is {:.0} % NUL bytes (UTF-16, or not text at all), not Latin-1 text",
                    notes.text.nul_bytes as f64 * 100.0 / notes.text.bytes as f64
                );
                self.problem(ProblemKind::Incomplete, text);
            }
            if let Some(notes) = members.get(&f.id).filter(|n| n.text.looks_like_utf8()) {
                let text = format!(
                    "{name} reads as UTF-8 ({} multi-byte sequences), not Latin-1: its accents would be served as \
                     mojibake",
                    notes.text.utf8_sequences
                );
                self.problem(ProblemKind::Incomplete, text);
            }
        }
        for (kind, rows) in lookup_rows {
            if rows == 0 {
                self.problem(ProblemKind::Incomplete, format!("the lookup table {} is empty", kind.name()));
            }
        }
    }

    /// Fails with every problem found so far, unless the options accept them all (then they are
    /// warnings, logged and kept for the report).
    pub fn verdict(&mut self) -> Result<(), CheckError> {
        let accepted = |p: &Problem| p.kind == ProblemKind::Incomplete && self.accept_incomplete;
        if self.problems.iter().all(accepted) {
            for p in self.problems.drain(..) {
                tracing::warn!("accepted by --accept-incomplete: {}", p.text);
                self.warnings.push(p.text);
            }
            return Ok(());
        }
        let mut hints = Vec::new();
        if !self.accept_incomplete && self.problems.iter().any(|p| p.kind == ProblemKind::Incomplete) {
            hints.push("--accept-incomplete builds an incomplete month anyway, with warnings");
        }
        if self.problems.iter().any(|p| p.kind == ProblemKind::Stale) {
            hints.push("--ignore-stale leaves out the members of another delivery");
        }
        let hint = hints.iter().map(|h| format!("\n({h})")).collect();
        Err(CheckError {
            path: self.input.clone(),
            problems: self.problems.iter().map(|p| p.text.clone()).collect(),
            hint,
        })
    }

    /// What the options let through, for the report.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}

/// The folder a file will be written in: its parent, or the working folder.
fn folder_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Whether `path` (a file to write) has a folder that exists and takes new files, and is not
/// itself a folder; checked before any work, so that no output fails after the dataset is replaced.
pub fn writable_file(path: &Path) -> Result<(), String> {
    if path.is_dir() {
        return Err("is a folder, not a file".into());
    }
    let folder = folder_of(path);
    if !folder.is_dir() {
        return Err(format!("its folder {} does not exist", folder.display()));
    }
    tempfile::Builder::new()
        .prefix(".cnpj-write-check-")
        .tempfile_in(folder)
        .map(drop)
        .map_err(|e| format!("its folder {} does not take new files ({e})", folder.display()))
}

/// Every output of the build (the dataset, the report and its page) can be written: checked first.
pub fn outputs(db: &Path, report: Option<&Path>) -> Result<(), BuildError> {
    let page = report.map(crate::page::page_path);
    for path in std::iter::once(db).chain(report).chain(page.as_deref()) {
        writable_file(path).map_err(|reason| BuildError::Output { path: path.to_owned(), reason })?;
    }
    Ok(())
}

/// Writes the report (pretty JSON) and its page (HTML, at [`crate::page_path`]) beside their final
/// names, then renames them there.
pub fn write_report(path: &Path, report: &BuildReport) -> Result<(), BuildError> {
    let json = serde_json::to_string_pretty(report).expect("the report serializes") + "\n";
    let page_path = crate::page::page_path(path);
    let page = crate::page::render(report).map_err(|source| BuildError::Report { path: page_path.clone(), source })?;
    let json = staged(path, json.as_bytes())?;
    let page = staged(&page_path, page.as_bytes())?;
    for (tmp, path) in [(json, path), (page, &page_path)] {
        tmp.persist(path).map_err(|e| BuildError::Report { path: path.to_owned(), source: e.error })?;
    }
    Ok(())
}

/// `bytes` in a temporary file beside `path`.
fn staged(path: &Path, bytes: &[u8]) -> Result<tempfile::NamedTempFile, BuildError> {
    let failed = |source| BuildError::Report { path: path.to_owned(), source };
    let mut tmp = tempfile::Builder::new().prefix(".report-").tempfile_in(folder_of(path)).map_err(failed)?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(failed)?;
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(zip: &str, name: &str, kind: FileKind) -> Member {
        Member { zip: PathBuf::from("/m").join(zip), name: name.into(), index: 0, kind, size: 10, compressed_size: 5 }
    }

    #[test]
    fn stamps_and_parts_from_member_names() {
        assert_eq!(date_stamp("K3241.K03200Y0.D60813.EMPRECSV"), Some("D60813"));
        assert_eq!(date_stamp("F.K03200$W.SIMPLES.CSV.D60913"), Some("D60913"));
        assert_eq!(date_stamp("Lucro Presumido/2018.csv"), None);
        assert_eq!(
            part_number(&member("Estabelecimentos3.zip", "K3241.K03200Y3.D60314.ESTABELE", FileKind::Estabelecimentos)),
            Some(3)
        );
        assert_eq!(part_number(&member("Estabelecimentos10.zip", "x.ESTABELE", FileKind::Estabelecimentos)), Some(10));
        assert_eq!(part_number(&member("Simples.zip", "F.K03200$W.SIMPLES.CSV.D60913", FileKind::Simples)), None);
        assert_eq!(ranges(&[0, 1, 2, 4, 6, 7]), "0–2, 4, 6–7");
    }

    #[test]
    fn a_gap_in_a_numbered_series_is_named() {
        let mut members: Vec<Member> = [0, 1, 2, 3, 5, 6, 7, 8, 9]
            .iter()
            .map(|p| {
                member(
                    &format!("Estabelecimentos{p}.zip"),
                    &format!("K3241.K03200Y{p}.D60913.ESTABELE"),
                    FileKind::Estabelecimentos,
                )
            })
            .collect();
        let mut checks = Checks::new(Path::new("/m"), false, false);
        checks.members(&mut members);
        let err = checks.verdict().unwrap_err().to_string();
        assert!(err.contains("estabelecimentos: part 4 missing (parts 0–3, 5–9 present)"), "{err}");
    }

    fn check_members(members: &[(&str, &str, FileKind)], problems: &[&str], warnings: &[&str]) {
        let mut members: Vec<Member> = members.iter().map(|(zip, name, kind)| member(zip, name, *kind)).collect();
        let mut checks = Checks::new(Path::new("/m"), false, false);
        checks.members(&mut members);
        let found: Vec<&str> = checks.problems.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(found, problems);
        assert_eq!(checks.warnings, warnings);
    }

    #[test]
    fn series_start_at_part_0_one_file_tables_are_one_file_and_main_members_carry_the_stamp() {
        let empresas = |p: u64| (format!("Empresas{p}.zip"), format!("K3241.K03200Y{p}.D60913.EMPRECSV"));
        let whole: Vec<(String, String)> = (0..10).map(empresas).collect();
        let with = |extra: &[(&'static str, &'static str, FileKind)]| {
            let mut all: Vec<(&str, &str, FileKind)> =
                whole.iter().map(|(z, n)| (z.as_str(), n.as_str(), FileKind::Empresas)).collect();
            all.extend_from_slice(extra);
            all
        };
        let missing = "missing required tables: estabelecimentos, socios, simples, cnaes, motivos, municipios, \
                       naturezas, paises, qualificacoes";
        check_members(&with(&[]), &[missing], &[]);
        check_members(
            &with(&[("Empresas10.zip", "K3241.K03200Y10.EMPRECSV", FileKind::Empresas)]),
            &[
                missing,
                "Empresas10.zip (K3241.K03200Y10.EMPRECSV): no date stamp, while the other main tables carry D60913 (a \
             file of another delivery? remove it, or --ignore-stale leaves it out)",
            ],
            &[],
        );
        let simples = [
            ("Simples.zip", "F.K03200$W.SIMPLES.CSV.D60913", FileKind::Simples),
            ("Simples1.zip", "F.K03200$W.SIMPLES.CSV.D60913", FileKind::Simples),
        ];
        let twice = "simples is given twice: Simples.zip (F.K03200$W.SIMPLES.CSV.D60913) and Simples1.zip \
                     (F.K03200$W.SIMPLES.CSV.D60913)";
        check_members(&with(&simples), &[&missing.replace("simples, ", ""), twice], &[]);
        let late = [
            ("Socios1.zip", "K3241.K03200Y1.D60913.SOCIOCSV", FileKind::Socios),
            ("Socios2.zip", "K3241.K03200Y2.D60913.SOCIOCSV", FileKind::Socios),
        ];
        check_members(
            &with(&late),
            &[&missing.replace("socios, ", ""), "socios: part 0 missing (parts 1–2 present)"],
            &["fewer parts than the 10 (0-9) the RFB ships of each numbered table: socios 1–2 (a month cut short at \
             its last part is told only by the downloader's manifest.json)"],
        );
    }

    #[test]
    fn stale_member_is_refused_or_left_out() {
        let fresh = || {
            vec![
                member("Empresas0 (old).zip", "K3241.K03200Y0.D60813.EMPRECSV", FileKind::Empresas),
                member("Empresas0.zip", "K3241.K03200Y0.D60913.EMPRECSV", FileKind::Empresas),
                member("Socios0.zip", "K3241.K03200Y0.D60913.SOCIOCSV", FileKind::Socios),
                member("Cnaes.zip", "F.K03200$Z.D60713.CNAECSV", FileKind::Cnaes),
                member("Paises.zip", "PAISES", FileKind::Paises),
            ]
        };
        let mut members = fresh();
        let mut checks = Checks::new(Path::new("/m"), true, false);
        checks.members(&mut members);
        let err = checks.verdict().unwrap_err().to_string();
        assert!(err.contains("Empresas0 (old).zip (K3241.K03200Y0.D60813.EMPRECSV): date stamp D60813"), "{err}");
        assert!(err.contains("empresas part 0 is given twice"), "{err}");
        assert!(!err.contains("Cnaes"), "lookups may carry an older stamp: {err}");

        let mut members = fresh();
        let mut checks = Checks::new(Path::new("/m"), false, true);
        checks.members(&mut members);
        // Only the tables this partial month lacks are left as problems.
        assert!(checks.problems.iter().all(|p| p.kind == ProblemKind::Missing), "{:?}", checks.problems);
        assert_eq!(members.len(), 4);
        assert!(checks.warnings()[0].contains("Empresas0 (old).zip"), "{:?}", checks.warnings());
    }
}
