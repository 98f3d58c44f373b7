//! The systemd units of `deploy/`: `systemd-analyze verify` on a copy whose binaries are the ones
//! built here, the API's sandbox (its directives, and `systemd-analyze security`'s exposure), the
//! run service's exit codes, reload and metrics file, the timer's calendar (monthly), and the
//! example environment files against the variables the units use. `systemd-analyze` comes with
//! Debian's `systemd` package. The alert rules of `deploy/prometheus/` through `promtool check
//! rules` and `promtool test rules`, and the dashboard's queries through `promtool check rules`
//! (Debian's `prometheus` package). `scripts/setup-test-deps` installs both.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::runs::EXIT_NOTHING_NEW;
use crate::{root, text};

const UNITS: [&str; 3] = ["cnpj-etl-run.service", "cnpj-etl-run.timer", "cnpj-api.service"];

fn deploy() -> PathBuf {
    root().join("deploy")
}

fn systemd_analyze(dir: &Path, args: &[&str]) -> Output {
    Command::new("systemd-analyze")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("systemd-analyze runs (Debian: apt-get install systemd; scripts/setup-test-deps installs it)")
}

/// Every `key=value` of a unit, in order (a key may come more than once), comments left out.
fn directives(unit: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(deploy().join(unit)).unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// The values of `key` in a unit.
fn values(unit: &str, key: &str) -> Vec<String> {
    directives(unit).into_iter().filter(|(k, _)| k == key).map(|(_, v)| v).collect()
}

/// The value of `key` in a unit, which must be there once.
fn value(unit: &str, key: &str) -> String {
    let found = values(unit, key);
    assert_eq!(found.len(), 1, "{unit}: {key}= once: {found:?}");
    found[0].clone()
}

/// The units in a temporary folder, the installed binaries' paths replaced by the ones built here
/// (`cnpj-api` from the same target folder when it was built, else a stand-in: verify only
/// checks that the command is an executable file).
fn units_with_built_binaries() -> tempfile::TempDir {
    let etl = PathBuf::from(env!("CARGO_BIN_EXE_cnpj-etl"));
    let api = etl.with_file_name("cnpj-api");
    let api = if api.is_file() { api } else { etl.clone() };
    let dir = tempfile::tempdir().unwrap();
    for unit in UNITS {
        let text = std::fs::read_to_string(deploy().join(unit)).unwrap();
        let text = text
            .replace("/usr/local/bin/cnpj-etl", etl.to_str().unwrap())
            .replace("/usr/local/bin/cnpj-api", api.to_str().unwrap());
        std::fs::write(dir.path().join(unit), text).unwrap();
    }
    dir
}

#[test]
fn the_units_pass_systemd_analyze_verify() {
    assert!(value("cnpj-etl-run.service", "ExecStart").starts_with("/usr/local/bin/cnpj-etl run "));
    assert!(value("cnpj-api.service", "ExecStart").starts_with("/usr/local/bin/cnpj-api serve "));
    let dir = units_with_built_binaries();
    let out = systemd_analyze(dir.path(), &["verify", UNITS[0], UNITS[1], UNITS[2]]);
    // An unknown or misspelt directive is only a warning: no line may name the units.
    let said = text(&out);
    let about_ours: Vec<&str> =
        said.lines().filter(|l| UNITS.iter().any(|u| l.contains(u)) || l.contains("cnpj")).collect();
    assert!(out.status.success() && about_ours.is_empty(), "systemd-analyze verify: {said}");
}

/// The API's sandbox: each directive here is required, and `systemd-analyze security` rates the
/// unit's exposure at most 1.5 (of 10).
#[test]
fn the_api_runs_in_a_hardened_sandbox() {
    let unit = "cnpj-api.service";
    for (key, expected) in [
        ("User", "cnpj-registry"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectKernelLogs", "yes"),
        ("ProtectControlGroups", "yes"),
        ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
        ("RestrictNamespaces", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("LockPersonality", "yes"),
        ("MemoryDenyWriteExecute", "yes"),
        ("SystemCallArchitectures", "native"),
        ("CapabilityBoundingSet", ""),
        ("ReadOnlyPaths", "/var/lib/cnpj-registry/data"),
        ("ReadWritePaths", "/var/lib/cnpj-registry/accounts"),
        ("ExecReload", "/bin/kill -HUP $MAINPID"),
    ] {
        assert_eq!(value(unit, key), expected, "{unit}: {key}");
    }
    assert!(values(unit, "SystemCallFilter").contains(&"@system-service".to_owned()), "{unit}: SystemCallFilter");
    // The accounts file is where the API writes, in the folder it may write to.
    let env = env_file("api.env");
    assert!(env["CNPJ_API_ACCOUNTS"].starts_with(&(value(unit, "ReadWritePaths") + "/")), "{env:?}");
    assert!(env["CNPJ_DB"].starts_with(&(value(unit, "ReadOnlyPaths") + "/")), "{env:?}");

    let dir = units_with_built_binaries();
    let out = systemd_analyze(dir.path(), &["security", "--offline=yes", "--threshold=15", unit]);
    assert!(out.status.success(), "exposure over 1.5: {}", String::from_utf8_lossy(&out.stdout));
}

/// The run service: a oneshot whose "nothing new" exit code is a success, that reloads the API
/// after a new month only, and writes the dataset where the API reads it; its timer is monthly.
#[test]
fn the_run_is_a_monthly_oneshot_whose_nothing_new_is_no_failure() {
    let unit = "cnpj-etl-run.service";
    assert_eq!(value(unit, "Type"), "oneshot");
    assert_eq!(value(unit, "SuccessExitStatus"), EXIT_NOTHING_NEW.to_string());
    assert_eq!(value(unit, "EnvironmentFile"), "/etc/cnpj-registry/run.env");
    let reload = value(unit, "ExecStopPost");
    assert!(
        reload.contains(r#"[ "$$EXIT_STATUS" = 0 ]"#) && reload.contains("try-reload-or-restart cnpj-api.service"),
        "{reload}"
    );
    let (run, api) = (env_file("run.env"), env_file("api.env"));
    assert_eq!(run["CNPJ_DB"], api["CNPJ_DB"], "the API serves what the run builds");
    assert!(value(unit, "ExecStart").contains(" --metrics-file ${CNPJ_METRICS_FILE} "));
    // The sandbox lets the run write its metrics file ("-": a folder that may be missing).
    let metrics_folder = value(unit, "ReadWritePaths");
    let metrics_folder = metrics_folder.strip_prefix('-').unwrap_or(&metrics_folder);
    assert_eq!(Path::new(&run["CNPJ_METRICS_FILE"]).parent(), Some(Path::new(metrics_folder)));

    let timer = "cnpj-etl-run.timer";
    assert_eq!(value(timer, "Persistent"), "true");
    assert!(!value(timer, "RandomizedDelaySec").is_empty());
    assert_eq!(value(timer, "Unit"), unit);
    let calendar = value(timer, "OnCalendar");
    let out = systemd_analyze(&deploy(), &["calendar", "--iterations=13", &calendar]);
    assert!(out.status.success(), "{}", text(&out));
    // `Next elapse: Tue 2026-12-15 03:00:00 UTC`, then `Iter. #2: …`: one a month, a month apart.
    let elapses: Vec<(i32, u32, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("Next elapse:") || l.contains("Iter. #"))
        .map(|l| {
            let date = l.split_whitespace().find(|w| w.len() == 10 && w.as_bytes()[4] == b'-').unwrap();
            (date[..4].parse().unwrap(), date[5..7].parse().unwrap(), date[8..].to_owned())
        })
        .collect();
    assert_eq!(elapses.len(), 13, "{calendar}");
    for pair in elapses.windows(2) {
        let ((y0, m0, d0), (y1, m1, d1)) = (&pair[0], &pair[1]);
        assert_eq!(y1 * 12 + *m1 as i32, y0 * 12 + *m0 as i32 + 1, "{calendar}: {pair:?}");
        assert_eq!(d0, d1, "{calendar}: the same day every month");
    }
}

/// An example environment file of `deploy/`: its variables, which must include every one the
/// units that read it use.
fn env_file(name: &str) -> HashMap<String, String> {
    let text = std::fs::read_to_string(deploy().join(name)).unwrap();
    let vars: HashMap<String, String> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let variable = regex::Regex::new(r"\$\{?([A-Z_]+)\}?").unwrap();
    for unit in ["cnpj-etl-run.service", "cnpj-api.service"] {
        if !value(unit, "EnvironmentFile").ends_with(&format!("/{name}")) {
            continue;
        }
        let used: BTreeSet<String> = variable
            .captures_iter(&value(unit, "ExecStart"))
            .map(|c| c[1].to_owned())
            .filter(|v| v != "MAINPID")
            .collect();
        for var in used {
            assert!(vars.contains_key(&var), "{unit} uses ${var}, which {name} does not set");
        }
    }
    vars
}

fn promtool(dir: &Path, args: &[&str]) -> Output {
    Command::new("promtool").args(args).current_dir(dir).output().unwrap_or_else(|e| {
        panic!(
            "promtool does not run ({e}): install it (Debian: apt-get install prometheus; scripts/setup-test-deps does)"
        )
    })
}

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), text(out))
}

/// The alert rules pass `promtool check rules`, and their tests (`rules_test.yml`, which makes
/// every alert fire and not fire) pass `promtool test rules`.
#[test]
fn the_alert_rules_pass_promtool_and_their_tests() {
    let dir = deploy().join("prometheus");
    let out = promtool(&dir, &["check", "rules", "rules.yml"]);
    assert!(out.status.success(), "promtool check rules: {}", said(&out));
    let out = promtool(&dir, &["test", "rules", "rules_test.yml"]);
    assert!(out.status.success(), "promtool test rules: {}", said(&out));
    let [rules, tests] = ["rules.yml", "rules_test.yml"].map(|f| std::fs::read_to_string(dir.join(f)).unwrap());
    let alert = regex::Regex::new(r"(?m)^\s*- alert: (\w+)$").unwrap();
    let alerts: Vec<&str> = alert.captures_iter(&rules).map(|c| c.get(1).unwrap().as_str()).collect();
    assert!(alerts.len() >= 8, "{alerts:?}");
    for name in alerts {
        assert!(tests.contains(&format!("alertname: {name}\n")), "rules_test.yml does not test {name}");
    }
}

/// Every query of the Grafana dashboard is PromQL that promtool accepts (each checked as a
/// recording rule, Grafana's variables replaced by values).
#[test]
fn the_dashboards_queries_are_promql() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(deploy().join("prometheus/dashboard.json")).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    let exprs: Vec<&str> = panels
        .iter()
        .filter_map(|p| p["targets"].as_array())
        .flatten()
        .map(|t| t["expr"].as_str().expect("a target with an expr"))
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    let rules: String = exprs
        .iter()
        .enumerate()
        .map(|(i, expr)| {
            let expr = expr.replace("$__rate_interval", "5m").replace("$instance", ".*");
            format!("      - record: dashboard:query_{i}\n        expr: {}\n", serde_json::to_string(&expr).unwrap())
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dashboard.yml"), format!("groups:\n  - name: dashboard\n    rules:\n{rules}"))
        .unwrap();
    let out = promtool(dir.path(), &["check", "rules", "dashboard.yml"]);
    assert!(out.status.success(), "promtool check rules on the dashboard's queries: {}", said(&out));
}
