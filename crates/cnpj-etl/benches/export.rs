//! Export benchmark (not a test): `cnpj-etl export` of a built dataset as Parquet, Parquet
//! partitioned by state, CSV, and Parquet of one state (a filter), each measured as a child
//! process: wall time, CPU time, peak RSS, rows written, size of the output, rows/s. Prints a
//! Markdown table.
//!
//! Run: `CNPJ_BENCH_DB=registry.duckdb cargo bench -p cnpj-etl --bench export` (an existing
//! dataset), or `CNPJ_BENCH_SCALES=0.01,0.1` (a synthetic month of each scale written and built
//! first; default `0.001`). `CNPJ_BENCH_DIR` keeps the data there (the exports are deleted once
//! measured); `CNPJ_BENCH_EXPORT_MEMORY` is the export's `--memory-limit` (default `1GB`).

use std::path::PathBuf;
use std::process::Command;

mod common;
use common::measure_child;

fn main() {
    let keep = std::env::var("CNPJ_BENCH_DIR").ok().map(PathBuf::from);
    let tmp = tempfile::tempdir().unwrap();
    let root = keep.unwrap_or_else(|| tmp.path().to_owned());
    std::fs::create_dir_all(&root).unwrap();
    let memory = std::env::var("CNPJ_BENCH_EXPORT_MEMORY").unwrap_or_else(|_| "1GB".into());
    let datasets: Vec<(String, PathBuf)> = match std::env::var("CNPJ_BENCH_DB") {
        Ok(db) => vec![(db.clone(), PathBuf::from(db))],
        Err(_) => std::env::var("CNPJ_BENCH_SCALES")
            .unwrap_or_else(|_| "0.001".into())
            .split(',')
            .map(|s| {
                let scale: f64 = s.trim().parse().expect("a scale");
                let dir = root.join(format!("scale-{scale}"));
                cnpj_synth::generate(&cnpj_synth::SynthOptions::new(scale, &dir)).expect("the month is written");
                let db = root.join(format!("export-{scale}.duckdb"));
                let out = Command::new(env!("CARGO_BIN_EXE_cnpj-etl"))
                    .args(["build", "--quiet", "--input"])
                    .arg(&dir)
                    .arg("--db")
                    .arg(&db)
                    .status()
                    .expect("the build runs");
                assert!(out.success(), "the build failed");
                std::fs::remove_dir_all(&dir).unwrap();
                (format!("scale {scale}"), db)
            })
            .collect(),
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("Export benchmark: {cpus} CPUs, --memory-limit {memory}\n");
    println!("| dataset | DuckDB MB | export | rows | wall s | CPU s | peak RSS MB | output MB | rows/s |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let variants: [(&str, &[&str]); 4] = [
        ("parquet", &["--format", "parquet"]),
        ("parquet, --partition-by uf", &["--format", "parquet", "--partition-by", "uf"]),
        ("csv", &["--format", "csv"]),
        ("parquet, --state SP", &["--format", "parquet", "--state", "SP"]),
    ];
    for (label, db) in &datasets {
        let db_mb = std::fs::metadata(db).expect("the dataset exists").len() as f64 / 1e6;
        for (name, args) in variants {
            let out = root.join("export-out");
            let _ = std::fs::remove_dir_all(&out);
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_cnpj-etl"));
            cmd.args(["export", "--quiet", "--memory-limit", &memory, "--db"]).arg(db).arg("--out").arg(&out);
            cmd.args(args).stdout(std::process::Stdio::null());
            let (wall, cpu, rss) = measure_child(cmd);
            let manifest: serde_json::Value =
                serde_json::from_slice(&std::fs::read(out.join("_manifest.json")).unwrap()).unwrap();
            let tables = manifest["tables"].as_array().unwrap();
            let rows: u64 = tables.iter().map(|t| t["rows"].as_u64().unwrap()).sum();
            let bytes: u64 =
                tables.iter().flat_map(|t| t["files"].as_array().unwrap()).map(|f| f["bytes"].as_u64().unwrap()).sum();
            println!(
                "| {label} | {db_mb:.0} | {name} | {rows} | {:.1} | {cpu:.1} | {:.0} | {:.0} | {:.0} |",
                wall.as_secs_f64(),
                rss as f64 / 1e6,
                bytes as f64 / 1e6,
                rows as f64 / wall.as_secs_f64(),
            );
            std::fs::remove_dir_all(&out).unwrap();
        }
    }
}
