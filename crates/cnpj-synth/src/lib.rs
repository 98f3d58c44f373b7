//! Writes a synthetic month of RFB dumps shaped exactly like the real ones (37 zips, the same
//! member names, Latin-1, every field quoted, part 0 of each main table four times bigger), at any
//! scale: scale 1.0 is a 2026 month (≈ 69 M Empresas, 72 M Estabelecimentos, 28 M Socios, 49 M
//! Simples). Lookups are the real tables. Field values follow the distributions of
//! `rfb/FORMAT.md` §2 and §4, and the gotchas of §7 are planted at realistic rates, plus one of each
//! at the start of every part so that even a tiny scale shows them. Deterministic for a seed: every
//! (table, part) has its own random stream, so parts are generated in parallel on all cores and
//! memory stays flat (each part streams into its zip).

mod rows;

use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

pub use rows::Tables;

/// Rows of a month at scale 1.0.
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
}

/// What one written file holds, and what was planted in it.
#[derive(Clone, Debug, Default, Serialize)]
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

#[derive(Clone, Debug, Default, Serialize)]
pub struct SynthReport {
    pub scale: f64,
    pub seed: u64,
    pub files: Vec<FileSummary>,
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
    let count = |t: Table| -> u64 {
        let full = FULL_SCALE.iter().find(|(x, _)| *x == t).map_or(0, |(_, n)| *n);
        ((full as f64 * opts.scale).round() as u64).max(1)
    };
    let empresas = count(Table::Empresas);
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
            let (zip, member) = match table {
                Table::Empresas => (format!("Empresas{part}.zip"), format!("K3241.K03200Y{part}.{date}.EMPRECSV")),
                Table::Estabelecimentos => {
                    (format!("Estabelecimentos{part}.zip"), format!("K3241.K03200Y{part}.{date}.ESTABELE"))
                }
                Table::Socios => (format!("Socios{part}.zip"), format!("K3241.K03200Y{part}.{date}.SOCIOCSV")),
                Table::Simples => ("Simples.zip".to_owned(), format!("F.K03200$W.SIMPLES.CSV.{date}")),
            };
            let path = opts.out.join(&zip);
            let mut summary = FileSummary { zip, member: member.clone(), ..Default::default() };
            write_zip(&path, &member, |w| {
                tables.write_part(*table, *part, range.clone(), empresas, opts.seed, w, &mut summary)
            })?;
            Ok(summary)
        })
        .collect::<Result<_, SynthError>>()?;
    for (zip, member, bytes) in &lookups {
        let path = opts.out.join(zip);
        write_zip(&path, member, |w| w.write_all(bytes))?;
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
    let report = SynthReport { scale: opts.scale, seed: opts.seed, files };
    let manifest = opts.out.join("synth.json");
    std::fs::write(&manifest, serde_json::to_vec_pretty(&report).expect("a report serializes"))
        .map_err(|source| SynthError::Io { path: manifest, source })?;
    Ok(report)
}

/// Writes one zip with one deflated member (fixed timestamp, so output is byte-identical per seed).
fn write_zip(
    path: &Path,
    member: &str,
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
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
        body(&mut buffered).map_err(io)?;
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
}
