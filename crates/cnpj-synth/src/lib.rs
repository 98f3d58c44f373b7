//! Writes a synthetic month of RFB dumps shaped exactly like the real ones (37 zips, the same
//! member names, Latin-1, every field quoted, part 0 of each main table four times bigger), at any
//! scale: scale 1.0 is a 2026 month (≈ 69 M Empresas, 72 M Estabelecimentos, 28 M Socios, 49 M
//! Simples). Lookups are the real tables. Field values follow the distributions of the real
//! dumps, and their known gotchas are planted at realistic rates, plus one of each at the start of
//! every part so that even a tiny scale shows them. Partners recur across companies, and
//! legal-entity partners are companies of the month (`partners.rs`). Deterministic for a seed:
//! every (table, part) has its own random stream, so parts are generated in parallel on all cores
//! and memory stays flat (each part streams into its zip).
//!
//! `evolve` writes the month after one (`evolve.rs`): the same registry a month later, with a
//! month's openings, closings and other changes, each listed in the new month's `synth.json`.

mod evolve;
mod partners;
mod records;
mod rows;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::ser::{Error as _, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};

pub use evolve::{EvolveOptions, PlantedChange, evolve};
pub use rows::Tables;

use crate::partners::Partners;
use crate::rows::{Rng, write_part};

/// Rows of a month at scale 1.0 (Socios: the 2026-04 delivery had 27.6 M rows, 26.7 M of them
/// without a legal representative).
pub const FULL_SCALE: [(Table, u64); 4] = [
    (Table::Empresas, 69_000_000),
    (Table::Estabelecimentos, 72_000_000),
    (Table::Socios, 28_000_000),
    (Table::Simples, 49_000_000),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Table {
    Empresas,
    Estabelecimentos,
    Socios,
    Simples,
}

#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub scale: f64,
    pub out: PathBuf,
    pub seed: u64,
    /// Parts of each main table (RFB ships 10).
    pub parts: u32,
    /// `YYYY-MM` of the month the member names carry.
    pub month: String,
}

impl SynthOptions {
    pub fn new(scale: f64, out: impl Into<PathBuf>) -> SynthOptions {
        SynthOptions { scale, out: out.into(), seed: 1, parts: 10, month: "2026-11".into() }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {source}")]
    Zip { path: PathBuf, source: zip::result::ZipError },
    #[error("the scale must be positive and finite, not {0}")]
    Scale(f64),
    #[error("{path}: {source}")]
    Manifest { path: PathBuf, source: serde_json::Error },
    #[error("{path}: not a month written by `synth`: {reason}")]
    NotSynthetic { path: PathBuf, reason: String },
    #[error("{0}: the evolved month must go to another folder than the month it evolves")]
    SameFolder(PathBuf),
    #[error("{path}: no room for this month's new keys ({reason})")]
    Exhausted { path: PathBuf, reason: String },
}

/// What one written file holds, and what was planted in it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FileSummary {
    pub zip: String,
    pub member: String,
    /// CSV records written (a planted duplicate counts, as it is a record).
    pub records: u64,
    pub csv_bytes: u64,
    /// Records a correct build must reject (wrong field count, wrong check digits).
    pub planted_rejects: u64,
    /// Records that repeat an earlier record of the same key exactly.
    pub planted_duplicates: u64,
}

/// What `synth.json` says of a month (besides its `planted_changes`, which it streams).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SynthReport {
    pub scale: f64,
    pub seed: u64,
    /// The seed of the month the chain started from, which the partners' identities derive
    /// from (`partners.rs`): the same people and holdings in every month of the chain.
    pub origin_seed: u64,
    /// `YYYY-MM`, as the member names' date stamps carry it.
    pub month: String,
    /// The month this one was evolved from (none for a month written by `generate`).
    pub evolved_from: Option<String>,
    /// 0 for a month written by `generate`, n for the n-th month evolved from it.
    pub generation: u32,
    /// The lowest company index (see `rows::basico`) that no month of the chain has used.
    pub next_company: u64,
    /// The lowest `cnpj_ordem` that no establishment of the chain has had.
    pub next_ordem: u32,
    pub files: Vec<FileSummary>,
    /// Planted changes by event (an evolved month; each is listed in `planted_changes`).
    pub churn: BTreeMap<String, u64>,
}

impl FileSummary {
    /// Rows a correct build serves from the file: its records less rejects and duplicates.
    fn served(&self) -> u64 {
        self.records - self.planted_rejects - self.planted_duplicates
    }
}

/// The real lookup tables (as the project's sample dump carries them).
const LOOKUPS: [(&str, &str, &[u8]); 6] = [
    ("Cnaes.zip", "CNAECSV", include_bytes!("../../../data/sample-dump/Cnaes.zip")),
    ("Motivos.zip", "MOTICSV", include_bytes!("../../../data/sample-dump/Motivos.zip")),
    ("Municipios.zip", "MUNICCSV", include_bytes!("../../../data/sample-dump/Municipios.zip")),
    ("Naturezas.zip", "NATJUCSV", include_bytes!("../../../data/sample-dump/Naturezas.zip")),
    ("Paises.zip", "PAISCSV", include_bytes!("../../../data/sample-dump/Paises.zip")),
    ("Qualificacoes.zip", "QUALSCSV", include_bytes!("../../../data/sample-dump/Qualificacoes.zip")),
];

fn unzip_first(bytes: &[u8]) -> Vec<u8> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).expect("an embedded lookup zip");
    let mut member = archive.by_index(0).expect("one member");
    let mut out = Vec::new();
    member.read_to_end(&mut out).expect("an embedded lookup member");
    out
}

/// The date code of member names: `D` + last digit of the year + `MM13`.
fn date_code(month: &str) -> String {
    let year_digit = month.get(3..4).unwrap_or("6");
    let mm = month.get(5..7).unwrap_or("11");
    format!("D{year_digit}{mm}13")
}

/// The month after a `YYYY-MM`.
fn next_month(month: &str) -> Option<String> {
    let (y, m) = month.split_once('-')?;
    let (y, m): (u32, u32) = (y.parse().ok()?, m.parse().ok()?);
    match m {
        12 => Some(format!("{:04}-01", y + 1)),
        1..=11 => Some(format!("{y:04}-{:02}", m + 1)),
        _ => None,
    }
}

/// The zip and member names of a main table's part, for the date code `date`.
fn file_names(table: Table, part: u32, date: &str) -> (String, String) {
    match table {
        Table::Empresas => (format!("Empresas{part}.zip"), format!("K3241.K03200Y{part}.{date}.EMPRECSV")),
        Table::Estabelecimentos => {
            (format!("Estabelecimentos{part}.zip"), format!("K3241.K03200Y{part}.{date}.ESTABELE"))
        }
        Table::Socios => (format!("Socios{part}.zip"), format!("K3241.K03200Y{part}.{date}.SOCIOCSV")),
        Table::Simples => ("Simples.zip".to_owned(), format!("F.K03200$W.SIMPLES.CSV.{date}")),
    }
}

/// Rows of `table` in a month at `scale` (at least one).
fn rows_at(table: Table, scale: f64) -> u64 {
    let full = FULL_SCALE.iter().find(|(t, _)| *t == table).map_or(0, |(_, n)| *n);
    ((full as f64 * scale).round() as u64).max(1)
}

/// Rows of each part: part 0 weighs 4, the others 1.
fn part_ranges(total: u64, parts: u32) -> Vec<std::ops::Range<u64>> {
    let units = u64::from(parts) + 3;
    let mut ranges = Vec::new();
    let mut start = 0;
    for p in 0..u64::from(parts) {
        let end = if p + 1 == u64::from(parts) { total } else { start + total * if p == 0 { 4 } else { 1 } / units };
        ranges.push(start..end.max(start));
        start = end.max(start);
    }
    ranges
}

/// Writes the month into `opts.out` (created if missing) and returns what it wrote.
pub fn generate(opts: &SynthOptions) -> Result<SynthReport, SynthError> {
    if !(opts.scale.is_finite() && opts.scale > 0.0) {
        return Err(SynthError::Scale(opts.scale));
    }
    std::fs::create_dir_all(&opts.out).map_err(|source| SynthError::Io { path: opts.out.clone(), source })?;
    let date = date_code(&opts.month);
    let lookups: Vec<(&str, String, Vec<u8>)> = LOOKUPS
        .iter()
        .map(|(zip, suffix, bytes)| (*zip, format!("F.K03200$Z.{date}.{suffix}"), unzip_first(bytes)))
        .collect();
    let tables = Tables::from_lookups(&lookups.iter().map(|(z, _, b)| (*z, b.as_slice())).collect::<Vec<_>>());
    let count = |t: Table| rows_at(t, opts.scale);
    let empresas = count(Table::Empresas);
    let partners = Partners::new(opts.seed, count(Table::Socios), empresas);
    let mut tasks: Vec<(Table, u32, std::ops::Range<u64>)> = Vec::new();
    for table in [Table::Empresas, Table::Estabelecimentos, Table::Socios] {
        for (p, range) in part_ranges(count(table), opts.parts).into_iter().enumerate() {
            tasks.push((table, p as u32, range));
        }
    }
    tasks.push((Table::Simples, 0, 0..count(Table::Simples).min(empresas)));
    // Biggest first keeps every core busy to the end.
    tasks.sort_by_key(|(_, _, r)| std::cmp::Reverse(r.end - r.start));
    let mut files: Vec<FileSummary> = tasks
        .par_iter()
        .map(|(table, part, range)| {
            let (zip, member) = file_names(*table, *part, &date);
            let path = opts.out.join(&zip);
            let mut summary = FileSummary { zip, member: member.clone(), ..Default::default() };
            let row = |rng: &mut Rng, i: u64, line: &mut Vec<u8>| match table {
                Table::Empresas => tables.empresa(rng, i, line),
                Table::Estabelecimentos => tables.estabelecimento(rng, i, empresas, line),
                Table::Socios => partners.socio(&tables, rng, i, partners.company(i), line),
                Table::Simples => tables.simples(rng, i, line),
            };
            write_zip(&path, &member, |w| {
                write_part(Rng::new(opts.seed, *table, *part), range.clone(), w, &mut summary, row)
                    .map_err(|source| SynthError::Io { path: path.clone(), source })
            })?;
            Ok(summary)
        })
        .collect::<Result<_, SynthError>>()?;
    for (zip, member, bytes) in &lookups {
        let path = opts.out.join(zip);
        write_zip(&path, member, |w| {
            w.write_all(bytes).map_err(|source| SynthError::Io { path: path.clone(), source })
        })?;
        let records = bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count() as u64;
        files.push(FileSummary {
            zip: (*zip).to_owned(),
            member: member.clone(),
            records,
            csv_bytes: bytes.len() as u64,
            ..Default::default()
        });
    }
    files.sort_by(|a, b| a.zip.cmp(&b.zip));
    let estabelecimentos = count(Table::Estabelecimentos);
    let report = SynthReport {
        scale: opts.scale,
        seed: opts.seed,
        origin_seed: opts.seed,
        month: opts.month.clone(),
        evolved_from: None,
        generation: 0,
        next_company: empresas,
        // Establishment j has the ordem j / empresas + 1.
        next_ordem: u32::try_from((estabelecimentos - 1) / empresas + 2).unwrap_or(u32::MAX),
        files,
        churn: BTreeMap::new(),
    };
    write_manifest(&opts.out.join("synth.json"), &report, &[])?;
    Ok(report)
}

/// Reads what `synth.json` says of a month (its `planted_changes` are skipped as they stream by).
pub(crate) fn read_manifest(path: &Path) -> Result<SynthReport, SynthError> {
    let file = File::open(path).map_err(|source| SynthError::Io { path: path.to_owned(), source })?;
    serde_json::from_reader(BufReader::with_capacity(1 << 20, file))
        .map_err(|source| SynthError::Manifest { path: path.to_owned(), source })
}

/// Writes `synth.json`: the report, then `planted_changes` streamed from `changes` (files of one
/// JSON change a line), so that the list never is in memory.
fn write_manifest(path: &Path, report: &SynthReport, changes: &[PathBuf]) -> Result<(), SynthError> {
    #[derive(Serialize)]
    struct Manifest<'a> {
        #[serde(flatten)]
        report: &'a SynthReport,
        planted_changes: Streamed<'a>,
    }
    struct Streamed<'a>(&'a [PathBuf]);
    impl Serialize for Streamed<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(None)?;
            for path in self.0 {
                let fail = |e: &dyn std::fmt::Display| S::Error::custom(format!("{}: {e}", path.display()));
                let file = File::open(path).map_err(|e| fail(&e))?;
                for line in BufReader::new(file).lines() {
                    let change: PlantedChange =
                        serde_json::from_str(&line.map_err(|e| fail(&e))?).map_err(|e| fail(&e))?;
                    seq.serialize_element(&change)?;
                }
            }
            seq.end()
        }
    }
    let io = |source| SynthError::Io { path: path.to_owned(), source };
    let mut out = std::io::BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?);
    serde_json::to_writer_pretty(&mut out, &Manifest { report, planted_changes: Streamed(changes) })
        .map_err(|source| SynthError::Manifest { path: path.to_owned(), source })?;
    out.write_all(b"\n").and_then(|()| out.flush()).map_err(io)
}

/// Writes one zip with one deflated member (fixed timestamp, so output is byte-identical per seed).
fn write_zip(
    path: &Path,
    member: &str,
    body: impl FnOnce(&mut dyn Write) -> Result<(), SynthError>,
) -> Result<(), SynthError> {
    let io = |source| SynthError::Io { path: path.to_owned(), source };
    let zip_err = |source| SynthError::Zip { path: path.to_owned(), source };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut writer = zip::ZipWriter::new(std::io::BufWriter::with_capacity(1 << 20, file));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(6))
        .last_modified_time(zip::DateTime::from_date_and_time(2026, 1, 1, 0, 0, 0).expect("a valid date"))
        .large_file(true);
    writer.start_file(member, options).map_err(zip_err)?;
    {
        let mut buffered = std::io::BufWriter::with_capacity(1 << 20, &mut writer);
        body(&mut buffered)?;
        buffered.flush().map_err(io)?;
    }
    writer.finish().map_err(zip_err)?.flush().map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_zero_is_four_times_the_others_and_ranges_cover_all() {
        let ranges = part_ranges(1300, 10);
        assert_eq!(ranges[0], 0..400);
        assert_eq!(ranges[1], 400..500);
        assert_eq!(ranges.last().unwrap().end, 1300);
        assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
        let tiny = part_ranges(3, 10);
        assert_eq!(tiny.iter().map(|r| r.end - r.start).sum::<u64>(), 3);
    }

    #[test]
    fn member_date_codes() {
        assert_eq!(date_code("2026-11"), "D61113");
        assert_eq!(date_code("2027-03"), "D70313");
    }

    fn check_next(month: &str, expected: Option<&str>) {
        assert_eq!(next_month(month).as_deref(), expected, "{month}");
    }

    #[test]
    fn the_next_month_rolls_the_year_over() {
        check_next("2026-11", Some("2026-12"));
        check_next("2026-12", Some("2027-01"));
        check_next("2027-01", Some("2027-02"));
        check_next("2026-13", None);
        check_next("2026", None);
        assert_eq!(date_code(&next_month("2026-12").unwrap()), "D70113");
    }
}
