//! Embeds the location of the prebuilt libduckdb.so (DUCKDB_LIB_DIR, set by .cargo/config.toml)
//! as an rpath, so that the built binary runs without LD_LIBRARY_PATH.

fn main() {
    println!("cargo:rerun-if-env-changed=DUCKDB_LIB_DIR");
    if let Ok(dir) = std::env::var("DUCKDB_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
