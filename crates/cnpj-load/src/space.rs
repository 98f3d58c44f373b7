//! Out-of-space failures told as such: DuckDB reports a full disk as `… No space left on device`
//! followed by its C API's "Error code 1: Unknown error code"; the loader's errors say "no space
//! left on device", the folder, and the space left there (`statvfs`, through `rustix`).

use std::path::{Path, PathBuf};

/// A DuckDB error shown by its message alone: the C API's code behind it ("Error code 1:
/// Unknown error code") says nothing more, so it is not given as a cause.
#[derive(Debug)]
pub struct DuckDbError(pub duckdb::Error);

impl std::fmt::Display for DuckDbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            duckdb::Error::DuckDBFailure(_, Some(message)) => f.write_str(message),
            other => write!(f, "{other}"),
        }
    }
}

impl std::error::Error for DuckDbError {}

/// Bytes that an unprivileged process can still write in the file system of `path`.
pub fn available(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|p| p.exists() && !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let stat = rustix::fs::statvfs(existing).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// `": no space left on device in DIR (N free)"`, to follow an error's context.
pub fn note(dir: Option<&Path>) -> String {
    match dir {
        Some(dir) => {
            let free = available(dir).map_or_else(|| "free space unknown".to_owned(), |n| format!("{} free", human(n)));
            format!(": no space left on device in {} ({free})", dir.display())
        }
        None => ": no space left on device".to_owned(),
    }
}

/// The folder of the first quoted path in a message (`Could not write file "/x/.db.building-1"`).
fn quoted_folder(message: &str) -> Option<PathBuf> {
    let start = message.find('"')? + 1;
    let end = start + message[start..].find('"')?;
    let path = Path::new(&message[start..end]);
    path.is_absolute().then(|| path.parent().map(Path::to_owned)).flatten()
}

/// What to add to a DuckDB error's context when it is a full disk.
pub fn db_note(error: &DuckDbError) -> String {
    let message = error.to_string();
    if message.contains("No space left on device") || message.contains("ENOSPC") {
        note(quoted_folder(&message).as_deref())
    } else {
        String::new()
    }
}

/// What to add to an I/O error's path when it is a full disk.
pub fn io_note(path: &Path, error: &std::io::Error) -> String {
    if error.kind() == std::io::ErrorKind::StorageFull || error.raw_os_error() == Some(28) {
        note(Some(path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))))
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_named_with_its_folder_and_free_space() {
        let dir = tempfile::tempdir().unwrap();
        let message = format!(
            "FATAL Error: Failed to create checkpoint because of error: Could not write file \"{}/.r.duckdb.building-1\": No space left on device",
            dir.path().display()
        );
        let error = DuckDbError(duckdb::Error::DuckDBFailure(
            duckdb::ffi::Error { code: duckdb::ffi::ErrorCode::Unknown, extended_code: 1 },
            Some(message.clone()),
        ));
        assert_eq!(error.to_string(), message);
        assert!(std::error::Error::source(&error).is_none());
        let note = db_note(&error);
        assert!(note.starts_with(&format!(": no space left on device in {} (", dir.path().display())), "{note}");
        assert!(note.ends_with(" free)"), "{note}");
        let other = DuckDbError(duckdb::Error::DuckDBFailure(
            duckdb::ffi::Error { code: duckdb::ffi::ErrorCode::Unknown, extended_code: 1 },
            Some("Catalog Error: no such table".into()),
        ));
        assert_eq!(db_note(&other), "");
        let full = std::io::Error::from_raw_os_error(28);
        assert!(io_note(&dir.path().join("run-1"), &full).starts_with(": no space left on device in "));
        assert_eq!(io_note(Path::new("/x/run-1"), &std::io::Error::other("other")), "");
        assert_eq!((human(0), human(1_500), human(12_300_000)), ("0 B".into(), "1.5 KB".into(), "12.3 MB".into()));
    }
}
