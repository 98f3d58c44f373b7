//! Month over month (issue 18): a synthetic month evolved with planted changes and built with
//! `--previous` holds exactly the planted events in its history file's `changes`; the history
//! carries over (from a history file, or from a dataset that kept its changes inside) and is
//! trimmed to `--keep-months`, each month's companies and each row's keys beside it; a truncated month trips the
//! guard and leaves the dataset; the month of a build is its main tables' (issue 29), and a
//! previous dataset of the same month is said or refused.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use cnpj_model::FileKind;

use super::{build_in, copy_dir, etl, first_member, query, root, sample_dump, text, write_zip};

/// Whether an event is about an establishment (keyed by its CNPJ) rather than its company.
fn of_establishment(event: &str, field: &str) -> bool {
    matches!(
        event,
        "opened"
            | "disappeared"
            | "status_changed"
            | "moved"
            | "main_activity_changed"
            | "secondary_activities_changed"
    ) || field == "nome_fantasia"
}

/// (event, field, key) → count: the key is the CNPJ of an establishment event, else the company's base.
type Events = BTreeMap<(String, String, String), usize>;

fn planted(month_dir: &Path) -> Events {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(month_dir.join("synth.json")).unwrap()).unwrap();
    let mut out = Events::new();
    for c in manifest["planted_changes"].as_array().expect("planted_changes") {
        let (event, field) = (c["event"].as_str().unwrap(), c["field"].as_str().unwrap_or(""));
        let key = if of_establishment(event, field) { c["cnpj"].as_str() } else { c["cnpj_basico"].as_str() };
        *out.entry((event.to_owned(), field.to_owned(), key.unwrap().to_owned())).or_default() += 1;
    }
    out
}

fn recorded(db: &Path, month: &str) -> Events {
    let mut out = Events::new();
    for row in
        query(db, &format!("SELECT event, field, cnpj, cnpj_basico FROM history.changes WHERE month = '{month}'"))
    {
        let key = if of_establishment(&row[0], &row[1]) { &row[2] } else { &row[3] };
        *out.entry((row[0].clone(), row[1].clone(), key.clone())).or_default() += 1;
    }
    out
}

/// Each month of the history's companies, and how many there are, from `change_companies`.
fn companies(db: &Path) -> Vec<(String, u64)> {
    let conn = duckdb::Connection::open(cnpj_index::history_path(db)).unwrap();
    let mut stmt = conn.prepare("SELECT month, companies FROM change_companies ORDER BY month").unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))).unwrap();
    rows.map(|r| {
        let (month, bytes) = r.unwrap();
        (month, cnpj_index::Companies::from_bytes(&bytes).unwrap().len())
    })
    .collect()
}

/// The rows of the history's `changes` that their `change_keys` row (by month and position in
/// the stored order) does not give back, and the keys of no row (the first five); and how many
/// rows there are.
fn unkeyed(db: &Path) -> (Vec<Vec<String>>, usize) {
    let sql = "WITH c AS (SELECT month, cnpj, cnpj_basico, event, field, \
                 row_number() OVER (PARTITION BY month ORDER BY rowid) - 1 AS position FROM history.changes) \
               SELECT c.month, c.cnpj, c.cnpj_basico, c.event, c.field, \
                 k.month, k.company::VARCHAR, k.branch::VARCHAR, k.event, k.of_company::VARCHAR \
               FROM c FULL JOIN history.change_keys k ON c.month = k.month AND c.position = k.position";
    let rows = query(db, sql);
    let count = rows.len();
    let given_back = |r: &Vec<String>| {
        let company: u64 = r[6].parse().ok()?;
        let cnpj = if r[7].is_empty() { String::new() } else { cnpj_index::cnpj_of(company, r[7].parse().ok()?) };
        let of_company = cnpj_index::COMPANY_FIELDS.contains(&r[4].as_str()).to_string();
        Some(
            [&r[5], &cnpj, &cnpj_index::company_base(company), &r[8], &r[9]]
                == [&r[0], &r[1], &r[2], &r[3], &of_company],
        )
    };
    (rows.into_iter().filter(|r| given_back(r) != Some(true)).take(5).collect(), count)
}

fn history_rows(db: &Path) -> usize {
    query(db, "SELECT count(*)::VARCHAR FROM history.changes")[0][0].parse().unwrap()
}

/// The companies of `month` with changes, counted by SQL.
fn changed_companies(db: &Path, month: &str) -> u64 {
    let sql = format!("SELECT count(DISTINCT cnpj_basico)::VARCHAR FROM history.changes WHERE month = '{month}'");
    query(db, &sql)[0][0].parse().unwrap()
}

fn synth(args: &[&str]) {
    let out = etl(&[&["synth", "--quiet"], args].concat());
    assert!(out.status.success(), "synth {args:?}: {}", text(&out));
}

#[test]
fn the_changes_table_holds_exactly_the_planted_changes_and_keeps_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    synth(&["--scale", "0.0005", "--month", "2026-11", "--out", &path("m1")]);
    synth(&["--evolve-from", &path("m1"), "--out", &path("m2"), "--seed", "7"]);
    synth(&["--evolve-from", &path("m2"), "--out", &path("m3"), "--seed", "8"]);
    for month in ["a", "b", "c", "d", "e", "f"] {
        std::fs::create_dir(dir.path().join(month)).unwrap();
    }
    let first = build_in(&dir.path().join("m1"), &dir.path().join("a"), &[]);
    assert!(!cnpj_index::history_path(&first.db).exists(), "no previous month, no history");
    let second = build_in(&dir.path().join("m2"), &dir.path().join("b"), &["--previous", first.db.to_str().unwrap()]);
    assert_eq!(second.report["source_month"], "2026-12");
    let expected = planted(&dir.path().join("m2"));
    let events: std::collections::BTreeSet<&str> = expected.keys().map(|(e, ..)| e.as_str()).collect();
    assert!(events.len() >= 15, "every kind of event is planted: {events:?}");
    assert_eq!(recorded(&second.db, "2026-12"), expected);
    let mom = &second.report["month_over_month"];
    assert_eq!(mom["previous_month"], "2026-11");
    assert_eq!(mom["anomalies"], serde_json::json!([]));
    let total: u64 = mom["events"].as_array().unwrap().iter().map(|e| e["count"].as_u64().unwrap()).sum();
    assert_eq!(total as usize, expected.values().sum::<usize>());
    // Company events carry their head office now.
    let headless = query(
        &second.db,
        "SELECT count(*)::VARCHAR FROM history.changes WHERE cnpj IS NULL OR cnpj_basico <> left(cnpj, 8)",
    );
    assert_eq!(headless, [["0"]]);

    // A third month: the second's changes carried over, the third's added.
    let third = build_in(&dir.path().join("m3"), &dir.path().join("c"), &["--previous", second.db.to_str().unwrap()]);
    assert_eq!(recorded(&third.db, "2026-12"), expected, "the history carries over");
    assert_eq!(recorded(&third.db, "2027-01"), planted(&dir.path().join("m3")));
    assert_eq!(
        third.report["month_over_month"]["history_rows"].as_u64().unwrap() as usize,
        expected.values().sum::<usize>()
    );
    let ordered = query(
        &third.db,
        "SELECT count(*)::VARCHAR FROM (SELECT month, cnpj, lag(month) OVER (ORDER BY rowid) AS pm, lag(cnpj) OVER (ORDER BY rowid) AS pc FROM history.changes) WHERE pm IS NOT NULL AND (pm, pc) > (month, cnpj)",
    );
    assert_eq!(ordered, [["0"]], "rows in month then CNPJ order");
    let months = ["2026-12", "2027-01"].map(|m| (m.to_owned(), changed_companies(&third.db, m)));
    assert_eq!(companies(&third.db), months, "each month's companies beside the rows");
    assert!(months.iter().all(|(_, n)| *n > 0));
    assert_eq!(unkeyed(&third.db), (Vec::new(), history_rows(&third.db)), "every row keyed, no other key");
    let trimmed = build_in(
        &dir.path().join("m3"),
        &dir.path().join("d"),
        &["--previous", second.db.to_str().unwrap(), "--keep-months", "1"],
    );
    assert_eq!(query(&trimmed.db, "SELECT DISTINCT month FROM history.changes"), [["2027-01"]]);
    assert_eq!(companies(&trimmed.db), [months[1].clone()]);
    assert_eq!(unkeyed(&trimmed.db), (Vec::new(), history_rows(&trimmed.db)), "the month dropped, its keys too");

    // A history file written before `change_keys`: every month of it gets its keys.
    let history = duckdb::Connection::open(cnpj_index::history_path(&second.db)).unwrap();
    history.execute_batch("DROP TABLE change_keys; CHECKPOINT").map(|()| drop(history)).unwrap();
    let keyed = build_in(&dir.path().join("m3"), &dir.path().join("f"), &["--previous", second.db.to_str().unwrap()]);
    assert_eq!(unkeyed(&keyed.db), (Vec::new(), history_rows(&keyed.db)));
    assert_eq!(companies(&keyed.db), months);

    // A second month of the earlier layout (its changes inside the dataset, no history file)
    // hands its history over all the same, each month's companies computed.
    let conn = duckdb::Connection::open(&second.db).unwrap();
    let history = cnpj_index::history_path(&second.db);
    conn.execute_batch(&format!(
        "ATTACH '{}' AS history; CREATE TABLE changes AS SELECT * FROM history.changes; DETACH history",
        history.display()
    ))
    .unwrap();
    drop(conn);
    std::fs::remove_file(&history).unwrap();
    let converted =
        build_in(&dir.path().join("m3"), &dir.path().join("e"), &["--previous", second.db.to_str().unwrap()]);
    assert_eq!(recorded(&converted.db, "2026-12"), expected, "the history carries over from the table");
    assert_eq!(recorded(&converted.db, "2027-01"), planted(&dir.path().join("m3")));
    assert_eq!(companies(&converted.db), months);
    assert_eq!(unkeyed(&converted.db), (Vec::new(), history_rows(&converted.db)));
}

/// Rewrites the member of `zip` with only its first `keep` lines.
fn truncate(zip: &Path, keep: usize) {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(zip).unwrap()).unwrap();
    let mut member = archive.by_index(0).unwrap();
    let name = member.name().unwrap().to_string();
    let mut bytes = Vec::new();
    member.read_to_end(&mut bytes).unwrap();
    drop(member);
    let kept: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').take(keep).collect();
    let mut out = zip::ZipWriter::new(std::fs::File::create(zip).unwrap());
    out.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
    out.write_all(&kept.concat()).unwrap();
    out.finish().unwrap();
}

#[test]
fn a_truncated_month_trips_the_guard_and_the_served_dataset_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    synth(&["--scale", "0.0005", "--month", "2026-11", "--out", &path("m1")]);
    synth(&["--evolve-from", &path("m1"), "--out", &path("m2"), "--seed", "7"]);
    let served = build_in(&dir.path().join("m1"), dir.path(), &[]);
    let before = std::fs::read(&served.db).unwrap();
    // Part 0 of the establishments cut to a tenth of its lines (a transfer cut short, re-zipped).
    let part = std::fs::read_dir(dir.path().join("m2"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("Estabelecimentos0"))
        .unwrap();
    truncate(&part, 1_000);
    let db = served.db.to_str().unwrap();
    let args = ["build", "--quiet", "--input", &path("m2"), "--db", db, "--previous", db, "--report", &path("r.json")];
    let out = etl(&args);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("estabelecimentos shrank by"), "{said}");
    assert!(said.contains("CNPJs of last month's"), "{said}");
    assert!(said.contains("--accept-anomalies"), "{said}");
    assert_eq!(std::fs::read(&served.db).unwrap(), before, "the served dataset is untouched");
    assert!(!cnpj_index::history_path(&served.db).exists(), "the refused month left no history");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(path("r.json")).unwrap()).unwrap();
    let kinds: Vec<&str> = report["month_over_month"]["anomalies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"table_shrank") && kinds.contains(&"disappeared_share"), "{kinds:?}");

    let out = etl(&[&args[..], &["--accept-anomalies"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(path("r.json")).unwrap()).unwrap();
    assert_eq!(report["month_over_month"]["anomalies_accepted"], true);
    assert_ne!(std::fs::read(&served.db).unwrap(), before, "accepted, the month is served");
}

#[test]
fn a_previous_dataset_that_cannot_be_compared_with_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let sample = super::sample_dump();
    let sample = sample.to_str().unwrap();
    // The sample dump is of 2026-09; a tiny synthetic month of 2026-08 comes before it.
    synth(&["--scale", "0.0002", "--month", "2026-08", "--out", &path("august")]);
    let built = |input: &str, db: &str| {
        let out = etl(&["build", "--quiet", "--input", input, "--db", &path(db)]);
        assert!(out.status.success(), "{}", text(&out));
        path(db)
    };
    let refused = |input: &str, previous: &str| {
        let out = etl(&["build", "--quiet", "--input", input, "--db", &path("new.duckdb"), "--previous", previous]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(!dir.path().join("new.duckdb").exists(), "nothing is built");
        text(&out).replace('\n', " ")
    };
    let said = refused(sample, &path("absent.duckdb"));
    assert!(said.contains("the previous dataset does not exist"), "{said}");
    let september = built(sample, "september.duckdb");
    let said = refused(&path("august"), &september);
    assert!(
        said.contains("it is of 2026-09, which is after this month (2026-08, from the main tables' date stamp D60813)"),
        "{said}"
    );

    let august = built(&path("august"), "august.duckdb");
    std::fs::remove_file(format!("{august}.lookup")).unwrap();
    let said = refused(sample, &august);
    assert!(said.contains("lookup file") && said.contains("rebuild the previous month"), "{said}");

    // A damaged block of the previous lookup file stops the comparison (each block has a checksum).
    let august = built(&path("august"), "august.duckdb");
    let lookup = format!("{august}.lookup");
    let mut bytes = std::fs::read(&lookup).unwrap();
    let at = bytes.len() / 4;
    bytes[at..at + 64].iter_mut().for_each(|b| *b ^= 0x5a);
    std::fs::write(&lookup, &bytes).unwrap();
    let said = refused(sample, &august);
    assert!(said.contains("the previous dataset's lookup file"), "{said}");
    assert!(said.contains("checksum") || said.contains("inflate"), "{said}");
}

/// Gives every stamped member of the month in `dir` the date stamp `main` (main tables) or
/// `lookups` (lookup tables), as a delivery of that date would carry.
fn restamp(dir: &Path, main: &str, lookups: &str) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let zip = path.file_name().unwrap().to_str().unwrap().to_owned();
        let Some(kind) = FileKind::recognise(&zip, None).filter(|k| *k != FileKind::TaxRegime) else { continue };
        let (member, bytes) = first_member(&path);
        let stamp = member.split('.').find(|p| p.len() == 6 && p.starts_with('D')).unwrap();
        write_zip(&path, &member.replace(stamp, if kind.is_lookup() { lookups } else { main }), &bytes);
    }
}

/// Issue 29: folders not named by month, whose lookups are of an older delivery (March): the
/// main tables' stamps decide, so two consecutive months come out as 2026-10 and 2026-11 and
/// the second records its changes; `--month` overrides; a previous dataset of this very month
/// is said (log and report), and one of this month but of another delivery is refused.
#[test]
fn the_month_is_the_main_tables_and_month_over_month_records_the_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    copy_dir(&sample_dump(), &first);
    copy_dir(&root().join("data/sample-dump-next"), &second);
    restamp(&first, "D61012", "D60314");
    restamp(&second, "D61112", "D60314");
    for out in ["a", "b", "c", "d"] {
        std::fs::create_dir(dir.path().join(out)).unwrap();
    }
    let october = build_in(&first, &dir.path().join("a"), &[]);
    assert_eq!(october.report["source_month"], "2026-10");
    let previous = october.db.to_str().unwrap();
    let november = build_in(&second, &dir.path().join("b"), &["--previous", previous, "--accept-anomalies"]);
    assert_eq!(november.report["source_month"], "2026-11");
    let mom = &november.report["month_over_month"];
    assert_eq!(mom["previous_month"], "2026-10");
    assert!(!mom["events"].as_array().unwrap().is_empty(), "{mom}");
    let recorded = query(&november.db, "SELECT count(*)::VARCHAR FROM history.changes WHERE month = '2026-11'");
    assert_ne!(recorded, [["0"]]);
    assert_eq!(build_in(&first, &dir.path().join("c"), &["--month", "2026-08"]).report["source_month"], "2026-08");

    // The same month again: built, nothing compared, and said in the log and the report.
    let report = dir.path().join("d/report.json");
    let (db, report_arg) = (dir.path().join("d/again.duckdb"), report.to_str().unwrap());
    let args = ["build", "--quiet", "--input", second.to_str().unwrap(), "--db", db.to_str().unwrap()];
    let previous = ["--previous", november.db.to_str().unwrap(), "--accept-anomalies"];
    let out = etl(&[&args[..], &["--report", report_arg], &previous[..]].concat());
    assert!(out.status.success(), "{}", text(&out));
    let said = format!(
        "--previous {} holds this very month (2026-11, from the main tables' date stamp D61112): nothing is compared",
        november.db.display()
    );
    assert!(text(&out).contains(&said), "{}", text(&out));
    let again: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert!(again["warnings"].to_string().contains(&said), "{}", again["warnings"]);
    assert_eq!(again["month_over_month"]["events"], mom["events"], "the month's changes, carried over");

    // October's zips given as November: this month, but another delivery: refused.
    let out = etl(&[
        &args[..2],
        &[
            "--input",
            first.to_str().unwrap(),
            "--month",
            "2026-11",
            "--db",
            db.to_str().unwrap(),
            "--previous",
            november.db.to_str().unwrap(),
        ],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out).replace('\n', " ");
    assert!(
        said.contains("it holds 2026-11 too (given by --month), but of another delivery: its main tables are stamped D61112, this folder's D61012"),
        "{said}"
    );
}
