//! Embeds where the binaries find the prebuilt libduckdb.so at run time as their rpath. By default
//! the copy that `scripts/setup-duckdb` installs outside the checkout (the folder named in
//! `$DUCKDB_LIB_DIR/rpath`), so that a binary runs without LD_LIBRARY_PATH, straight from the
//! target folder or installed by `cargo install`, after the checkout is deleted too. With the
//! `packaged` feature (`scripts/package`), `$ORIGIN/../lib` and nothing else: the release
//! tarball's `bin/` finds the library in the `lib/` beside it. Shared by every crate that links
//! DuckDB (`build = "../cnpj-etl/build.rs"`), for their test binaries too.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DUCKDB_LIB_DIR");
    if std::env::var_os("CARGO_FEATURE_PACKAGED").is_some() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN/../lib");
        return;
    }
    let Ok(dir) = std::env::var("DUCKDB_LIB_DIR") else { return };
    let named = Path::new(&dir).join("rpath");
    match std::fs::read_to_string(&named) {
        Ok(runtime) => {
            println!("cargo:rerun-if-changed={}", named.display());
            let runtime = runtime.trim();
            if !Path::new(runtime).join("libduckdb.so").is_file() {
                println!("cargo:warning={runtime}/libduckdb.so is missing: run scripts/setup-duckdb");
            }
            println!("cargo:rustc-link-arg=-Wl,-rpath,{runtime}");
        }
        Err(_) => {
            // An older .duckdb/ or a DUCKDB_LIB_DIR of one's own: the library's folder itself.
            // Watching the folder (a missing file would rerun this script on every build).
            println!("cargo:rerun-if-changed={dir}");
            println!(
                "cargo:warning={} not found (run scripts/setup-duckdb): the binaries will need {dir}",
                named.display()
            );
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
