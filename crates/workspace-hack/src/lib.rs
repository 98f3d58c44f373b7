//! No code: a dependency of the two binaries that pins one set of features for the crates they
//! reach only through other crates.
//!
//! Cargo gives a dependency the features that the packages being built ask for, so
//! `cargo build -p cnpj-etl` (scripts/build-sample), `cargo test --workspace` (scripts/test, with
//! every member and the tests' dependencies) and `cargo run -p cnpj-api` would each compile
//! serde, tokio, arrow, duckdb and the proc macros with features of their own, and a newcomer
//! would compile dozens of crates two or three times. Depending on this crate, both binaries ask
//! for what the whole workspace's test build does (the versions and features are the root
//! `Cargo.toml`'s feature pins), so the three builds share every dependency. The test below
//! keeps it so: it compares, with `cargo tree`, the features each of those builds resolves.

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::process::Command;

    /// Every registry crate a build of `selection` compiles (`name vX.Y.Z`), with the feature sets
    /// cargo resolves for it: one per build of it (a crate compiled for proc macros and build
    /// scripts as well may have two).
    fn features(selection: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args(["tree", "--offline", "--locked", "--manifest-path", manifest, "--prefix", "none"])
            .args(["--format", "{p} [{f}]"])
            .args(selection)
            .output()
            .expect("cargo tree runs");
        assert!(out.status.success(), "cargo tree {selection:?}: {}", String::from_utf8_lossy(&out.stderr));
        let mut found = BTreeMap::<String, BTreeSet<String>>::new();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            // `name vX.Y.Z [features]`, maybe with `(proc-macro)` and `(*)`; a member shows its path.
            let line = line.replace(" (proc-macro)", "").replace(" (*)", "");
            let mut parts = line.splitn(3, ' ');
            let (Some(name), Some(version), Some(features)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            if !features.starts_with('(') {
                found.entry(format!("{name} {version}")).or_default().insert(features.to_owned());
            }
        }
        found
    }

    #[test]
    fn the_builds_a_newcomer_meets_share_the_test_builds_dependencies() {
        let tests = features(&["--workspace"]);
        let builds: [(&str, &[&str]); 5] = [
            ("cargo build -p cnpj-etl (scripts/build-sample)", &["-e", "normal,build", "-p", "cnpj-etl"]),
            ("cargo run -p cnpj-api", &["-e", "normal,build", "-p", "cnpj-api"]),
            ("scripts/package", &["-e", "normal,build", "-p", "cnpj-etl", "-p", "cnpj-api"]),
            ("cargo bench -p cnpj-etl", &["-p", "cnpj-etl"]),
            ("cargo bench -p cnpj-api", &["-p", "cnpj-api"]),
        ];
        let mut differ = Vec::new();
        for (build, selection) in builds {
            for (krate, sets) in features(selection) {
                let in_tests = tests.get(&krate).cloned().unwrap_or_default();
                if sets != in_tests {
                    differ.push(format!("{build}: {krate} {sets:?}; cargo test --workspace: {in_tests:?}"));
                }
            }
        }
        assert!(
            differ.is_empty(),
            "dependencies a build would compile a second time, with other features than the tests' build \
             (pin the tests' features in the root Cargo.toml's feature pins, listed in crates/workspace-hack):\n{}",
            differ.join("\n")
        );
    }
}
