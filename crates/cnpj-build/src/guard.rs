//! The month-over-month guard: before the swap, a build with a previous month compares its counts
//! with the previous build report's and refuses a month that is visibly broken (a main table that
//! shrank or grew too much, too many CNPJs gone, a reject rate far above last month's, a kind of
//! file that was there last month and is missing now), unless the operator accepts it. The
//! structural checks of a single month are `checks.rs`.

use std::collections::BTreeSet;

use serde::Deserialize;

use crate::report::{Anomaly, BuildReport};

/// The thresholds, each an option of `cnpj-etl build`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// A main table may shrink by this share at most (0.02 = 2 %).
    pub max_shrink: f64,
    /// A main table may grow by this share at most.
    pub max_growth: f64,
    /// The CNPJs that disappeared, as a share of last month's establishments.
    pub max_disappeared: f64,
    /// The reject rate may be this many times last month's at most.
    pub max_reject_ratio: f64,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds { max_shrink: 0.02, max_growth: 0.10, max_disappeared: 0.01, max_reject_ratio: 10.0 }
    }
}

/// A reject rate below one in a million counts as one in a million: ten times "no rejects at
/// all" would refuse a month for its first reject.
const REJECT_RATE_FLOOR: f64 = 1e-6;

/// The main tables the guard watches.
pub const MAIN_TABLES: [&str; 4] = ["empresas", "estabelecimentos", "socios", "simples"];

/// What the guard reads of a previous build report (older reports may lack fields).
#[derive(Debug, Default, Deserialize)]
pub struct PreviousReport {
    #[serde(default)]
    pub tables: Vec<PreviousTable>,
    #[serde(default)]
    pub files: Vec<PreviousFile>,
    #[serde(default)]
    pub rows_read: u64,
    #[serde(default)]
    pub rows_rejected: u64,
}

#[derive(Debug, Deserialize)]
pub struct PreviousTable {
    pub table: String,
    pub rows: u64,
}

#[derive(Debug, Deserialize)]
pub struct PreviousFile {
    pub kind: String,
    #[serde(default)]
    pub member: String,
}

impl PreviousReport {
    pub fn rows(&self, table: &str) -> Option<u64> {
        self.tables.iter().find(|t| t.table == table).map(|t| t.rows)
    }

    /// The previous delivery's date stamp (`D61012`), from its main tables' member names.
    pub fn delivery(&self) -> Option<String> {
        let main = self.files.iter().filter(|f| MAIN_TABLES.contains(&f.kind.as_str()));
        crate::checks::delivery_stamp(main.map(|f| f.member.as_str()))
    }
}

fn percent(share: f64) -> String {
    format!("{:.2} %", share * 100.0)
}

/// The anomalies of `report` next to `previous`; `disappeared`: CNPJs gone since last month.
pub fn anomalies(previous: &PreviousReport, report: &BuildReport, disappeared: u64, t: &Thresholds) -> Vec<Anomaly> {
    let mut out = table_sizes(previous, report, t);
    out.extend(disappeared_share(previous, disappeared, t));
    out.extend(reject_rate(previous, report, t));
    out.extend(missing_kinds(previous, report));
    out
}

/// A main table that shrank or grew past its threshold.
fn table_sizes(previous: &PreviousReport, report: &BuildReport, t: &Thresholds) -> Vec<Anomaly> {
    let mut out = Vec::new();
    let now = |table: &str| report.tables.iter().find(|r| r.table == table).map_or(0, |r| r.rows);
    for table in MAIN_TABLES {
        let Some(before) = previous.rows(table).filter(|&n| n > 0) else { continue };
        let (b, c) = (before as f64, now(table) as f64);
        let change = c / b - 1.0;
        if change < -t.max_shrink {
            out.push(Anomaly {
                kind: "table_shrank".into(),
                subject: table.into(),
                previous: b,
                current: c,
                threshold: t.max_shrink,
                message: format!(
                    "{table} shrank by {} ({before} rows last month, {} now; at most {} allowed)",
                    percent(-change),
                    now(table),
                    percent(t.max_shrink)
                ),
            });
        } else if change > t.max_growth {
            out.push(Anomaly {
                kind: "table_grew".into(),
                subject: table.into(),
                previous: b,
                current: c,
                threshold: t.max_growth,
                message: format!(
                    "{table} grew by {} ({before} rows last month, {} now; at most {} allowed)",
                    percent(change),
                    now(table),
                    percent(t.max_growth)
                ),
            });
        }
    }
    out
}

/// Too many of last month's CNPJs gone.
fn disappeared_share(previous: &PreviousReport, disappeared: u64, t: &Thresholds) -> Option<Anomaly> {
    let before = previous.rows("estabelecimentos").filter(|&n| n > 0)?;
    let share = disappeared as f64 / before as f64;
    (share > t.max_disappeared).then(|| Anomaly {
        kind: "disappeared_share".into(),
        subject: "estabelecimentos".into(),
        previous: before as f64,
        current: disappeared as f64,
        threshold: t.max_disappeared,
        message: format!(
            "{disappeared} CNPJs of last month's {before} are gone ({}; at most {} allowed)",
            percent(share),
            percent(t.max_disappeared)
        ),
    })
}

/// A reject rate too many times last month's.
fn reject_rate(previous: &PreviousReport, report: &BuildReport, t: &Thresholds) -> Option<Anomaly> {
    let rate = |rejected: u64, read: u64| if read == 0 { 0.0 } else { rejected as f64 / read as f64 };
    let (before, current) =
        (rate(previous.rows_rejected, previous.rows_read), rate(report.rows_rejected, report.rows_read));
    (current > t.max_reject_ratio * before.max(REJECT_RATE_FLOOR)).then(|| Anomaly {
        kind: "reject_rate".into(),
        subject: String::new(),
        previous: before,
        current,
        threshold: t.max_reject_ratio,
        message: format!(
            "{} of the rows were rejected, {} last month (at most {} times last month's allowed)",
            percent(current),
            percent(before),
            t.max_reject_ratio
        ),
    })
}

/// A kind of file that was there last month and is missing now.
fn missing_kinds(previous: &PreviousReport, report: &BuildReport) -> Vec<Anomaly> {
    let kinds_now: BTreeSet<&str> = report.files.iter().map(|f| f.kind.name()).collect();
    let kinds_before: BTreeSet<&str> = previous.files.iter().map(|f| f.kind.as_str()).collect();
    kinds_before
        .difference(&kinds_now)
        .map(|kind| Anomaly {
            kind: "file_kind_missing".into(),
            subject: (*kind).to_owned(),
            previous: 1.0,
            current: 0.0,
            threshold: 0.0,
            message: format!("last month had {kind} files, this month has none"),
        })
        .collect()
}
