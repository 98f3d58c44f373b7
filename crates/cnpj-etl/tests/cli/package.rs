//! The binaries outside the checkout: the release tarball of `scripts/package`, unpacked and
//! moved elsewhere, and the built binaries copied out of the target folder as `cargo install` does,
//! each run from a folder of its own without the LD_LIBRARY_PATH that cargo gives the tests:
//! `--version`, a build of the sample dump and `show`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{root, sample_dump};

/// The folders a binary's dynamic section tells the loader to search (RPATH and RUNPATH), as
/// `readelf -d` reads them.
fn search_path(bin: &Path) -> Vec<String> {
    let out = Command::new("readelf").arg("-d").arg(bin).output().expect("readelf runs");
    assert!(out.status.success(), "readelf -d {}: {}", bin.display(), String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .filter(|l| l.contains("(RUNPATH)") || l.contains("(RPATH)"))
        .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0))
        .flat_map(|p| p.split(':').map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

/// The folder of this very build's binaries. cnpj-api is built beside cnpj-etl by
/// `cargo test --workspace` (scripts/test), which builds the binaries of every package with
/// integration tests.
fn bin_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_cnpj-etl")).parent().unwrap().to_owned();
    assert!(
        dir.join("cnpj-api").is_file(),
        "no cnpj-api beside cnpj-etl in {}: run `cargo test --workspace` (or `cargo test -p cnpj-api --no-run`) first",
        dir.display()
    );
    dir
}

/// Runs a binary as a user would: from `cwd`, without LD_LIBRARY_PATH (which `.cargo/config.toml`
/// points at the checkout's `.duckdb/` for every process cargo starts).
fn run_outside(bin: &Path, cwd: &Path, args: &[&str]) -> Output {
    let out = Command::new(bin).args(args).current_dir(cwd).env_remove("LD_LIBRARY_PATH").output();
    let out = out.unwrap_or_else(|e| panic!("{} runs: {e}", bin.display()));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} {args:?} failed ({}): {said}", bin.display(), out.status);
    out
}

/// `--version`, a build of the sample dump and `show` of one of its records, by the `cnpj-etl`
/// at `etl` run from `cwd`.
fn builds_the_sample(etl: &Path, cwd: &Path) {
    let out = run_outside(etl, cwd, &["--version"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), concat!("cnpj-etl ", env!("CARGO_PKG_VERSION")));
    let db = cwd.join("registry.duckdb");
    let input = sample_dump();
    run_outside(etl, cwd, &["build", "--quiet", "--input", input.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    let out = run_outside(etl, cwd, &["show", "--db", db.to_str().unwrap(), "11222333000181"]);
    assert!(String::from_utf8(out.stdout).unwrap().contains("EMPRESA EXEMPLO LTDA"));
}

/// Every file under `dir`, by its path relative to `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, base: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, found);
            } else {
                found.push(path.strip_prefix(base).unwrap().to_str().unwrap().to_owned());
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, dir, &mut found);
    found.sort();
    found
}

fn same_bytes(a: &Path, b: &Path) -> bool {
    std::fs::read(a).unwrap() == std::fs::read(b).unwrap()
}

/// The target directory of this very build (cargo's `CARGO_TARGET_DIR`, or the checkout's
/// `target/`): the folder above the profile's, which holds the binaries.
fn target_dir() -> PathBuf {
    bin_dir().parent().unwrap().to_owned()
}

#[test]
fn release_tarball_runs_unpacked_and_moved_elsewhere() {
    let tmp = tempfile::tempdir().unwrap();
    let dist = tmp.path().join("dist");
    // In the dev profile, into this build's target directory: the dependencies this test binary was
    // built with are reused, only the two binaries are compiled again (scripts/package's header).
    let mut package = Command::new(root().join("scripts/package"));
    package.args(["--profile", "dev", "--out", dist.to_str().unwrap()]);
    package.env("CARGO_TARGET_DIR", target_dir()).env_remove("LD_LIBRARY_PATH");
    // Without what cargo sets for this test (its package's manifest folder, name, version…): build
    // scripts that watch such a variable (ring's) would see it change and be built again, here and
    // in the next ordinary build, with everything that depends on them.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_", "CARGO_PRIMARY_"]
            .iter()
            .any(|prefix| name.starts_with(prefix));
        if set_by_cargo || name == "OUT_DIR" {
            package.env_remove(name.as_ref());
        }
    }
    let out = package.output().expect("scripts/package runs");
    assert!(out.status.success(), "scripts/package: {}", String::from_utf8_lossy(&out.stderr));
    let name = format!("cnpj-registry-{}-{}-linux", env!("CARGO_PKG_VERSION"), std::env::consts::ARCH);
    let tarball = dist.join(format!("{name}.tar.gz"));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), tarball.to_str().unwrap());

    let unpacked = tmp.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let tar = Command::new("tar").arg("-xzf").arg(&tarball).arg("-C").arg(&unpacked).status().unwrap();
    assert!(tar.success());
    assert_eq!(
        files(&unpacked),
        [
            format!("{name}/README.md"),
            format!("{name}/bin/cnpj-api"),
            format!("{name}/bin/cnpj-etl"),
            format!("{name}/lib/libduckdb.so"),
            format!("{name}/share/openapi.json"),
        ]
    );
    // Moved whole to another folder: nothing may point back at where it was unpacked.
    let moved: PathBuf = tmp.path().join("elsewhere/cnpj-registry");
    std::fs::create_dir(moved.parent().unwrap()).unwrap();
    std::fs::rename(unpacked.join(&name), &moved).unwrap();

    assert!(same_bytes(&moved.join("share/openapi.json"), &root().join("schemas/openapi.json")));
    assert!(same_bytes(&moved.join("README.md"), &root().join("README.md")));
    assert!(same_bytes(&moved.join("lib/libduckdb.so"), &root().join(".duckdb/libduckdb.so")));
    for bin in ["cnpj-etl", "cnpj-api"] {
        // Only the folder beside the binary: no absolute path of the build machine (the checkout,
        // the per-user copy of the library) is left to be found.
        assert_eq!(search_path(&moved.join("bin").join(bin)), ["$ORIGIN/../lib"], "{bin}");
    }
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let out = run_outside(&moved.join("bin/cnpj-api"), &work, &["--version"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), concat!("cnpj-api ", env!("CARGO_PKG_VERSION")));
    builds_the_sample(&moved.join("bin/cnpj-etl"), &work);
}

#[test]
fn installed_binaries_need_nothing_of_the_checkout() {
    // `cargo install --path crates/cnpj-etl` (and cnpj-api) copies the binary it built (with the
    // same build script, so the same rpath, in the release profile) into `~/.cargo/bin`: as good as
    // copying this build's binaries out of the target folder. Their library must be found through
    // folders outside the checkout, so that deleting the checkout leaves them working.
    let checkout = root().canonicalize().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let installed = tmp.path().join("root/bin");
    std::fs::create_dir_all(&installed).unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    for bin in ["cnpj-etl", "cnpj-api"] {
        let built = bin_dir().join(bin);
        let dirs = search_path(&built);
        assert!(!dirs.is_empty(), "{} carries no rpath", built.display());
        for dir in &dirs {
            let dir = Path::new(dir);
            assert!(dir.is_absolute(), "{}: relative rpath entry {}", built.display(), dir.display());
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
            assert!(
                !dir.starts_with(&checkout),
                "{}: rpath entry {} is in the checkout",
                built.display(),
                dir.display()
            );
        }
        assert!(dirs.iter().any(|d| Path::new(d).join("libduckdb.so").is_file()), "{bin}: no libduckdb.so in {dirs:?}");
        std::fs::copy(&built, installed.join(bin)).unwrap();
    }
    let out = run_outside(&installed.join("cnpj-api"), &work, &["--version"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), concat!("cnpj-api ", env!("CARGO_PKG_VERSION")));
    builds_the_sample(&installed.join("cnpj-etl"), &work);
}
