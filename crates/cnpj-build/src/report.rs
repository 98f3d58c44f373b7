//! The build report: per source file rows read, loaded, rejected and duplicated;
//! unknown and untranslated codes; the source month (and what decides it); timings.

use cnpj_load::UnknownCode;
use cnpj_model::FileKind;
use cnpj_normalize::Untranslated;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct BuildReport {
    pub source_month: Option<String>,
    pub built_at: String,
    pub input: String,
    pub dataset: String,
    pub files: Vec<FileReport>,
    /// Zips in the input folder that are not part of a dump (skipped).
    pub ignored_files: Vec<String>,
    /// Rows per served table.
    pub tables: Vec<TableRows>,
    pub rows_read: u64,
    pub rows_loaded: u64,
    pub rows_rejected: u64,
    /// Rejected rows per reason, the values a reason names masked (`expected … fields, found …`),
    /// most first; they add up to `rows_rejected`.
    pub rejects_by_reason: Vec<Count>,
    pub duplicates: u64,
    pub duplicates_differing: u64,
    pub estabelecimentos_sem_empresa: u64,
    pub unknown_codes: Vec<UnknownCode>,
    pub untranslated: Vec<UntranslatedCode>,
    /// Capital values that could not be loaded exactly (too big, malformed): the rows are loaded
    /// with a null capital, and counted here per file and reason, with a few examples.
    pub capital_not_loaded: Vec<CapitalNotLoaded>,
    /// Problems of the input that an option (`accept_incomplete`, `ignore_stale`) let through.
    pub warnings: Vec<String>,
    /// The comparison with the previous month's dataset (`--previous`), when one was given.
    pub month_over_month: Option<MonthOverMonth>,
    pub seconds: Timings,
}

/// What changed since the previous month's dataset, and the guard's verdict.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MonthOverMonth {
    /// `YYYY-MM` of the previous dataset.
    pub previous_month: Option<String>,
    /// The previous dataset's path.
    pub previous_dataset: String,
    /// Rows per served table then and now.
    pub tables: Vec<TableThenNow>,
    /// Changes recorded this month, per event name, most first.
    pub events: Vec<Count>,
    /// Changes recorded this month, per state (`uf` of the establishment), most first.
    pub states: Vec<Count>,
    /// Rows of the history carried over from the previous dataset (`--keep-months`).
    pub history_rows: u64,
    /// What the guard found; with `--accept-anomalies` the build went on regardless.
    pub anomalies: Vec<Anomaly>,
    /// Whether the anomalies were accepted by the operator (`--accept-anomalies`).
    pub anomalies_accepted: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct TableThenNow {
    pub table: String,
    pub previous: u64,
    pub current: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Count {
    pub name: String,
    pub count: u64,
}

/// One thing the guard refuses a month for (see `checks::guard`).
#[derive(Clone, Debug, Serialize)]
pub struct Anomaly {
    /// `table_shrank`, `table_grew`, `disappeared_share`, `reject_rate`, `file_kind_missing`.
    pub kind: String,
    /// What it is about: a table, a file kind, or empty.
    pub subject: String,
    pub previous: f64,
    pub current: f64,
    /// The threshold that was crossed (a ratio or a share).
    pub threshold: f64,
    /// One sentence for people.
    pub message: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct FileReport {
    pub zip: String,
    pub member: String,
    pub kind: FileKind,
    pub rows_read: u64,
    pub rows_loaded: u64,
    pub rows_rejected: u64,
    pub duplicates: u64,
    pub duplicates_differing: u64,
}

/// Capital values of one file and reason that were not loaded.
#[derive(Clone, Debug, Serialize)]
pub struct CapitalNotLoaded {
    pub zip: String,
    pub member: String,
    pub reason: &'static str,
    pub rows: u64,
    pub examples: Vec<CapitalExample>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CapitalExample {
    pub line: u64,
    pub value: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct TableRows {
    pub table: String,
    pub rows: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct UntranslatedCode {
    pub table: &'static str,
    pub code: String,
    pub locale: &'static str,
}

impl From<&Untranslated> for UntranslatedCode {
    fn from(u: &Untranslated) -> Self {
        UntranslatedCode { table: u.table, code: u.code.clone(), locale: u.locale.code() }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Timings {
    pub lookups: f64,
    pub load: f64,
    pub transform: f64,
    /// Recording the changes and carrying the history over (with `--previous`).
    pub changes: f64,
    /// Finishing the lookup file and the search index.
    pub serving_files: f64,
    pub total: f64,
}

/// What decided the month of a build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MonthFrom {
    /// `--month`.
    Given,
    /// The input folder's name.
    Folder,
    /// The main tables' date stamp (`D61012`).
    Stamp(String),
}

impl std::fmt::Display for MonthFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MonthFrom::Given => write!(f, "given by --month"),
            MonthFrom::Folder => write!(f, "from the input folder's name"),
            MonthFrom::Stamp(stamp) => write!(f, "from the main tables' date stamp {stamp}"),
        }
    }
}

fn is_month(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 7
        && b[4] == b'-'
        && b[..4].iter().chain(&b[5..]).all(u8::is_ascii_digit)
        && text[5..].parse::<u8>().is_ok_and(|m| (1..=12).contains(&m))
}

/// `YYYY-MM` of the dump, and what decided it: `given` (`--month`) when there is one, else the
/// input folder's name when it is a month (`2026-10`), else the delivery's date stamp, which the
/// main tables' members carry (`K3241.K03200Y0.D61012.EMPRECSV` → written 2026-10-12 →
/// `2026-10`). Lookup tables' stamps never decide: a folder may hold lookups of an older delivery.
pub fn source_month(given: Option<&str>, folder: &str, delivery: Option<&str>) -> Option<(String, MonthFrom)> {
    if let Some(month) = given {
        return Some((month.to_owned(), MonthFrom::Given));
    }
    if is_month(folder) {
        return Some((folder.to_owned(), MonthFrom::Folder));
    }
    let stamp = delivery?;
    let code = stamp.strip_prefix('D').filter(|c| c.len() == 5 && c.bytes().all(|b| b.is_ascii_digit()))?;
    let month = format!("202{}-{}", &code[..1], &code[1..3]);
    is_month(&month).then(|| (month, MonthFrom::Stamp(stamp.to_owned())))
}

/// Checks a `--month` value: `YYYY-MM`.
pub fn month_arg(text: &str) -> Result<String, String> {
    is_month(text).then(|| text.to_owned()).ok_or_else(|| format!("{text:?} is not a month YYYY-MM"))
}

/// Now, as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    cnpj_model::utc_text(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(given: Option<&str>, folder: &str, delivery: Option<&str>, expected: Option<(&str, MonthFrom)>) {
        let got = source_month(given, folder, delivery);
        assert_eq!(got, expected.map(|(m, from)| (m.to_owned(), from)), "{given:?} {folder} {delivery:?}");
    }

    #[test]
    fn month_from_the_flag_the_folder_or_the_delivery_stamp() {
        let stamp = |s: &str| MonthFrom::Stamp(s.into());
        check(None, "2026-03", Some("D61012"), Some(("2026-03", MonthFrom::Folder)));
        check(Some("2026-11"), "2026-03", Some("D61012"), Some(("2026-11", MonthFrom::Given)));
        check(None, "sample", Some("D61012"), Some(("2026-10", stamp("D61012"))));
        check(None, "sample", Some("D61112"), Some(("2026-11", stamp("D61112"))));
        check(None, "sample", None, None);
        check(None, "2026-3", Some("D60913"), Some(("2026-09", stamp("D60913"))));
        check(None, "2026-13", None, None);
        assert_eq!(month_arg("2026-10"), Ok("2026-10".into()));
        assert!(month_arg("2026-1").is_err() && month_arg("2026-00").is_err() && month_arg("10/2026").is_err());
    }

    #[test]
    fn now_is_well_formed() {
        let now = utc_now();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.starts_with("20") && now.ends_with('Z'), "{now}");
    }
}
