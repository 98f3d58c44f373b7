//! Build benchmark (not a test): for each scale, writes a synthetic month, then measures side by
//! side, in one run, on the same zips:
//! - the decompression floor: inflating every member to nowhere;
//! - a naive baseline: the members extracted to CSV files, then imported by DuckDB's own `read_csv`
//!   (the SQL a data engineer writes in an afternoon), extraction included;
//! - `cnpj-etl build`: wall time, CPU time, peak RSS, dataset size (DuckDB file, lookup file and
//!   search index; the index alone in the last column), rows/s and MB/s of CSV;
//! - the store floor: DuckDB writing the built main tables once more into a new file, the part
//!   of any DuckDB-based build that no pipeline change removes;
//!
//! and prints a Markdown table with ratios. `CNPJ_BENCH_BASELINE_ETL` names another `cnpj-etl`
//! (e.g. today's main, built apart): the same zips are built with it too, right after ours, and a
//! second table compares the two (wall, CPU, peak RSS, dataset and search index sizes).
//! `CNPJ_BENCH_FLOORS=0` leaves out the decompression floor, the naive import and the store
//! floor; a month already written in `CNPJ_BENCH_DIR` (its `synth.json`) is reused. With
//! `CNPJ_BENCH_POSTGRES` (a database URL; or
//! `CNPJ_TEST_POSTGRES`, the server that `scripts/with-postgres` starts), a second table gives the
//! Postgres load of the same dataset (`cnpj-etl publish`): time, rows/s, peak RSS, size on disk.
//! Run: `cargo bench -p cnpj-etl --bench build` with `CNPJ_BENCH_SCALES=0.01,0.03,0.1` (default
//! `0.001`); `CNPJ_BENCH_DIR` keeps the data there; `CNPJ_BENCH_MEMORY_LIMITS=500MB,2000MB` builds
//! each month again under each limit and prints its peak RSS against the limit.
//!
//! Month over month: the next month is evolved from each month (`cnpj-etl synth --evolve-from`)
//! and built twice, alone and with `--previous` (the first month's dataset), in the same run: the
//! difference is what the comparison costs (the build report's `changes` stage is the part of it
//! done after the rows are stored), and its history file is one month of history (times 24: about
//! its size at `--keep-months 24`; `benches/history24.py` writes a real one). `CNPJ_BENCH_MONTH_OVER_MONTH=0` leaves
//! it out. It runs last, and frees what is no longer read as it goes (the first month's zips once
//! evolved, its search index, which `--previous` does not read, the month built alone once
//! measured), so that scale 1.0 fits in ≈ 55 GB: the first month's dataset (14 GB without its
//! index), the next month's zips (6 GB) and a build (its runs take about the CSV's 27 GB until
//! merged). With `CNPJ_BENCH_DIR` the month built with `--previous` and its zips are kept.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::measure_child;

fn members(dir: &Path) -> Vec<PathBuf> {
    let mut zips: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "zip"))
        .collect();
    zips.sort();
    zips
}

/// Inflates every member to nowhere; returns the time and the CSV bytes.
fn floor(dir: &Path) -> (Duration, u64) {
    let started = Instant::now();
    let mut bytes = 0;
    for zip in members(dir) {
        let mut archive = zip::ZipArchive::new(std::fs::File::open(&zip).unwrap()).unwrap();
        for i in 0..archive.len() {
            let mut m = archive.by_index(i).unwrap();
            bytes += std::io::copy(&mut m, &mut std::io::sink()).unwrap();
        }
    }
    (started.elapsed(), bytes)
}

/// Extracts the members as CSV files and imports them with DuckDB's `read_csv`.
fn naive(dir: &Path, work: &Path) -> Duration {
    let started = Instant::now();
    let csv = work.join("csv");
    std::fs::create_dir_all(&csv).unwrap();
    for zip in members(dir) {
        let mut archive = zip::ZipArchive::new(std::fs::File::open(&zip).unwrap()).unwrap();
        for i in 0..archive.len() {
            let mut m = archive.by_index(i).unwrap();
            let name = m.name().unwrap().replace('$', "_");
            let mut out = std::fs::File::create(csv.join(name)).unwrap();
            std::io::copy(&mut m, &mut out).unwrap();
        }
    }
    let db = work.join("naive.duckdb");
    let _ = std::fs::remove_file(&db);
    let conn = duckdb::Connection::open(&db).unwrap();
    let read = |suffix: &str| {
        format!(
            "read_csv('{}/*{suffix}*', delim = ';', header = false, quote = '\"', escape = '\"', \
             encoding = 'latin-1', all_varchar = true, null_padding = true, ignore_errors = true)",
            csv.display()
        )
    };
    for (table, suffix) in [
        ("empresas", "EMPRECSV"),
        ("estabelecimentos", "ESTABELE"),
        ("socios", "SOCIOCSV"),
        ("simples", "SIMPLES"),
        ("cnaes", "CNAECSV"),
        ("municipios", "MUNICCSV"),
    ] {
        conn.execute_batch(&format!("CREATE TABLE {table} AS SELECT * FROM {}", read(suffix))).unwrap();
    }
    drop(conn);
    let elapsed = started.elapsed();
    let _ = std::fs::remove_dir_all(&csv);
    let _ = std::fs::remove_file(&db);
    elapsed
}

/// The store floor: DuckDB writing the built dataset's main tables once more into a new file
/// (same threads and memory limit as the build). Any build that stores them in DuckDB pays it.
fn store_floor(db: &Path, work: &Path) -> Duration {
    let copy = work.join("store-floor.duckdb");
    let _ = std::fs::remove_file(&copy);
    let conn = duckdb::Connection::open(&copy).unwrap();
    conn.execute_batch(&format!(
        "SET threads = 2; SET memory_limit = '2GB'; ATTACH '{}' AS built (READ_ONLY)",
        db.display()
    ))
    .unwrap();
    let started = Instant::now();
    for table in ["empresas", "estabelecimentos", "socios", "simples"] {
        conn.execute_batch(&format!("CREATE TABLE {table} AS SELECT * FROM built.{table}; CHECKPOINT")).unwrap();
    }
    let elapsed = started.elapsed();
    drop(conn);
    let _ = std::fs::remove_file(&copy);
    elapsed
}

/// A built dataset's files: the DuckDB file, its lookup file, its search index and its history.
fn dataset_files(db: &Path) -> [PathBuf; 4] {
    [db.to_owned(), cnpj_store::lookup_path(db), cnpj_store::search_index_path(db), cnpj_store::history_path(db)]
}

/// Bytes on disk of a built dataset.
fn dataset_size(db: &Path) -> u64 {
    dataset_files(db).iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum()
}

fn remove_dataset(db: &Path) {
    for path in dataset_files(db) {
        let _ = std::fs::remove_file(path);
    }
}

/// Evolves the month in `dir` into the next one and builds it alone and with `--previous db`;
/// returns the table line. `dir` and the search index of `db` are removed once the next month is
/// written; the next month's zips and its dataset built with `--previous` are kept when `keep`.
fn month_over_month(scale: f64, dir: &Path, db: &Path, root: &Path, keep: bool) -> String {
    let next = root.join(format!("scale-{scale}-next"));
    let status = Command::new(env!("CARGO_BIN_EXE_cnpj-etl"))
        .args(["synth", "--quiet", "--evolve-from"])
        .arg(dir)
        .arg("--out")
        .arg(&next)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("synth starts");
    assert!(status.success(), "the next month is written");
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_file(cnpj_store::search_index_path(db));
    let build = |db: &Path, previous: Option<&Path>, report: &Path| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cnpj-etl"));
        cmd.args(["build", "--quiet", "--input"]).arg(&next).arg("--db").arg(db).arg("--report").arg(report);
        if let Some(previous) = previous {
            cmd.arg("--previous").arg(previous);
        }
        measure_child(cmd)
    };
    let alone = root.join(format!("next-{scale}.duckdb"));
    let with = root.join(format!("next-with-previous-{scale}.duckdb"));
    let report = root.join(format!("next-{scale}.json"));
    let (alone_wall, alone_cpu, alone_rss) = build(&alone, None, &report);
    remove_dataset(&alone);
    let (with_wall, with_cpu, with_rss) = build(&with, Some(db), &report);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("the report")).expect("JSON");
    let changes: u64 = report["month_over_month"]["events"]
        .as_array()
        .map_or(0, |events| events.iter().filter_map(|e| e["count"].as_u64()).sum());
    let stage = report["seconds"]["changes"].as_f64().unwrap_or(f64::NAN);
    let month_mb = std::fs::metadata(cnpj_store::history_path(&with)).map_or(0, |m| m.len()) as f64 / 1e6;
    let added = with_wall.as_secs_f64() - alone_wall.as_secs_f64();
    if !keep {
        remove_dataset(&with);
        let _ = std::fs::remove_dir_all(&next);
    }
    format!(
        "| {scale} | {changes} | {:.1} | {:.1} | {added:+.1} | {:+.1} % | {:+.1} | {stage:.1} | {:.0}, {:.0} | {month_mb:.1} | {:.0} |",
        alone_wall.as_secs_f64(),
        with_wall.as_secs_f64(),
        added / alone_wall.as_secs_f64() * 100.0,
        with_cpu - alone_cpu,
        alone_rss as f64 / 1e6,
        with_rss as f64 / 1e6,
        month_mb * 24.0,
    )
}

/// Writes the synthetic month of `scale` into `dir`, or reuses the one already there (its
/// `synth.json`); returns its rows.
fn synthetic_month(scale: f64, dir: &Path) -> u64 {
    let records = |files: &serde_json::Value| {
        files.as_array().map_or(0, |files| files.iter().filter_map(|f| f["records"].as_u64()).sum())
    };
    if let Ok(text) = std::fs::read_to_string(dir.join("synth.json")) {
        let report: serde_json::Value = serde_json::from_str(&text).expect("synth.json is JSON");
        println!("(scale {scale}: the month already in {} is reused)", dir.display());
        return records(&report["files"]);
    }
    let opts = cnpj_synth::SynthOptions::new(scale, dir);
    let report = cnpj_synth::generate(&opts).expect("the synthetic month is written");
    report.files.iter().map(|f| f.records).sum()
}

/// Builds `dir` into `db` with the `cnpj-etl` at `etl`: wall time, CPU seconds, peak RSS.
fn build_with(etl: &Path, dir: &Path, db: &Path) -> (Duration, f64, u64) {
    let mut cmd = Command::new(etl);
    cmd.args(["build", "--quiet", "--input"]).arg(dir).arg("--db").arg(db);
    measure_child(cmd)
}

/// Builds `dir` with the baseline `etl` beside ours (`db`, built in `ours`); the table line. The
/// baseline's dataset is kept in `root` when `CNPJ_BENCH_DIR` is set (as `baseline-SCALE.duckdb`).
fn compare_with_baseline(
    etl: &Path,
    scale: f64,
    dir: &Path,
    db: &Path,
    (wall, cpu, rss): (Duration, f64, u64),
    root: &Path,
) -> String {
    let base_db = root.join(format!("baseline-{scale}.duckdb"));
    let (base_wall, base_cpu, base_rss) = build_with(etl, dir, &base_db);
    let index = |db: &Path| std::fs::metadata(cnpj_store::search_index_path(db)).map_or(0, |m| m.len()) as f64;
    let (base_index, ours_index) = (index(&base_db), index(db));
    let line = format!(
        "| {scale} | {:.1} | {:.1} | {:+.1} % | {base_cpu:.1} | {cpu:.1} | {:+.1} % | {:.0}, {:.0} | {:.0}, {:.0} | {:.0}, {:.0} | {:+.1} % |",
        base_wall.as_secs_f64(),
        wall.as_secs_f64(),
        (wall.as_secs_f64() / base_wall.as_secs_f64() - 1.0) * 100.0,
        (cpu / base_cpu - 1.0) * 100.0,
        base_rss as f64 / 1e6,
        rss as f64 / 1e6,
        dataset_size(&base_db) as f64 / 1e6,
        dataset_size(db) as f64 / 1e6,
        base_index / 1e6,
        ours_index / 1e6,
        (ours_index / base_index - 1.0) * 100.0,
    );
    if std::env::var("CNPJ_BENCH_DIR").is_err() {
        remove_dataset(&base_db);
    }
    line
}

fn main() {
    let scales: Vec<f64> = std::env::var("CNPJ_BENCH_SCALES")
        .unwrap_or_else(|_| "0.001".into())
        .split(',')
        .map(|s| s.trim().parse().expect("a scale"))
        .collect();
    let kept = std::env::var("CNPJ_BENCH_DIR").ok().map(PathBuf::from);
    let keep = kept.is_some();
    let tmp = tempfile::tempdir().unwrap();
    let root = kept.unwrap_or_else(|| tmp.path().to_owned());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut mem = String::new();
    let _ = std::fs::File::open("/proc/meminfo").and_then(|mut f| f.read_to_string(&mut mem));
    let mem = mem.lines().next().unwrap_or("").replace("MemTotal:", "").trim().to_owned();
    println!("Build benchmark: {cpus} CPUs, {mem} memory\n");
    println!(
        "| scale | rows | CSV MB | floor s | naive s | ours s | ours CPU s | ours peak RSS MB | dataset MB | rows/s | CSV MB/s | ours / naive | ours / floor | store floor s | search index MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let postgres = std::env::var("CNPJ_BENCH_POSTGRES")
        .ok()
        .or_else(|| std::env::var("CNPJ_TEST_POSTGRES").ok().map(|server| format!("{server}/postgres")));
    let mut pg_lines = Vec::new();
    // `CNPJ_BENCH_MEMORY_LIMITS=500MB,2000MB`: the build again under each limit (in MB).
    let limits: Vec<String> = std::env::var("CNPJ_BENCH_MEMORY_LIMITS")
        .map(|v| v.split(',').map(|l| l.trim().to_owned()).collect())
        .unwrap_or_default();
    let mut limit_lines = Vec::new();
    let mut change_lines = Vec::new();
    let month_over_month_too = std::env::var("CNPJ_BENCH_MONTH_OVER_MONTH").map_or(true, |v| v != "0");
    let floors = std::env::var("CNPJ_BENCH_FLOORS").map_or(true, |v| v != "0");
    let baseline = std::env::var("CNPJ_BENCH_BASELINE_ETL").ok().map(PathBuf::from);
    let mut baseline_lines = Vec::new();
    for scale in scales {
        let dir = root.join(format!("scale-{scale}"));
        let rows = synthetic_month(scale, &dir);
        let (floor_time, csv_bytes) = if floors { floor(&dir) } else { (Duration::ZERO, 0) };
        let naive_time = if floors { naive(&dir, &root) } else { Duration::ZERO };
        let db = root.join(format!("ours-{scale}.duckdb"));
        let (wall, cpu, rss) = build_with(Path::new(env!("CARGO_BIN_EXE_cnpj-etl")), &dir, &db);
        if let Some(etl) = &baseline {
            baseline_lines.push(compare_with_baseline(etl, scale, &dir, &db, (wall, cpu, rss), &root));
        }
        let store = if floors { store_floor(&db, &root) } else { Duration::ZERO };
        let mb = csv_bytes as f64 / 1e6;
        println!(
            "| {scale} | {rows} | {mb:.0} | {:.1} | {:.1} | {:.1} | {cpu:.1} | {:.0} | {:.0} | {:.0} | {:.1} | {:.2} | {:.2} | {:.1} | {:.0} |",
            floor_time.as_secs_f64(),
            naive_time.as_secs_f64(),
            wall.as_secs_f64(),
            rss as f64 / 1e6,
            dataset_size(&db) as f64 / 1e6,
            rows as f64 / wall.as_secs_f64(),
            mb / wall.as_secs_f64(),
            wall.as_secs_f64() / naive_time.as_secs_f64(),
            wall.as_secs_f64() / floor_time.as_secs_f64(),
            store.as_secs_f64(),
            std::fs::metadata(cnpj_store::search_index_path(&db)).map_or(0, |m| m.len()) as f64 / 1e6,
        );
        for limit in &limits {
            let db = root.join(format!("limited-{scale}.duckdb"));
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_cnpj-etl"));
            cmd.args(["build", "--quiet", "--memory-limit", limit, "--input"]).arg(&dir).arg("--db").arg(&db);
            let (wall, _, rss) = measure_child(cmd);
            let bytes: f64 = limit.trim_end_matches("MB").parse::<f64>().map_or(0.0, |mb| mb * 1e6);
            limit_lines.push(format!(
                "| {scale} | {limit} | {:.1} | {:.0} | {:+.0} |",
                wall.as_secs_f64(),
                rss as f64 / 1e6,
                (rss as f64 - bytes) / 1e6
            ));
            remove_dataset(&db);
        }
        if let Some(url) = &postgres {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_cnpj-etl"));
            cmd.args(["publish", "--quiet", "--schema", "bench", "--postgres", url, "--db"]).arg(&db);
            let (pg_wall, pg_cpu, pg_rss) = measure_child(cmd);
            let mut client = postgres::Client::connect(url, postgres::NoTls).expect("Postgres answers");
            let size: i64 = client
                .query_one(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
                     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'bench' AND c.relkind = 'r'",
                    &[],
                )
                .expect("the schema's size")
                .get(0);
            let loaded: i64 = client
                .query_one(
                    "SELECT (SELECT count(*) FROM bench.empresas) + (SELECT count(*) FROM bench.estabelecimentos) \
                     + (SELECT count(*) FROM bench.socios) + (SELECT count(*) FROM bench.simples)",
                    &[],
                )
                .expect("the loaded rows")
                .get(0);
            client.batch_execute("DROP SCHEMA IF EXISTS bench_previous CASCADE").expect("cleaning up");
            pg_lines.push(format!(
                "| {scale} | {loaded} | {:.1} | {:.0} | {:.1} | {pg_cpu:.1} | {:.0} | {:.0} | {:.0} | {:.1} |",
                wall.as_secs_f64(),
                dataset_size(&db) as f64 / 1e6,
                pg_wall.as_secs_f64(),
                pg_rss as f64 / 1e6,
                loaded as f64 / pg_wall.as_secs_f64(),
                size as f64 / 1e6,
                wall.as_secs_f64() + pg_wall.as_secs_f64(),
            ));
        }
        if month_over_month_too {
            change_lines.push(month_over_month(scale, &dir, &db, &root, keep));
        }
    }
    table(
        "The same zips built by the baseline (`CNPJ_BENCH_BASELINE_ETL`) right after ours",
        "| scale | baseline s | ours s | wall | baseline CPU s | ours CPU s | CPU | peak RSS MB (baseline, ours) | dataset MB (baseline, ours) | search index MB (baseline, ours) | index |",
        &baseline_lines,
    );
    table(
        "Month over month: the next month (evolved) built alone, then with `--previous` (the first month)",
        "| scale | changes | next month alone s | with --previous s | comparison s | comparison / build | comparison CPU s | of which `changes` stage s | peak RSS MB (alone, with) | one month of history MB | 24 months MB |",
        &change_lines,
    );
    table(
        "The same month under a memory limit (`--memory-limit`): peak RSS against the limit",
        "| scale | limit | wall s | peak RSS MB | RSS − limit MB |",
        &limit_lines,
    );
    table(
        "Postgres load of the same dataset (`cnpj-etl publish`: binary COPY, indexes, ANALYZE, swap)",
        "| scale | rows loaded | DuckDB build s | DuckDB MB | Postgres load s | load CPU s (client) | load peak RSS MB | rows/s | Postgres MB | build + load s |",
        &pg_lines,
    );
}

/// Prints a Markdown table after its title, unless it has no line.
fn table(title: &str, header: &str, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    println!("\n{title}\n");
    println!("{header}");
    println!("|{}", "---|".repeat(header.matches('|').count() - 1));
    for line in lines {
        println!("{line}");
    }
}
