//! `manifest.json` in the destination folder: what was downloaded, verified, and when.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub source: String,
    pub month: String,
    pub files: BTreeMap<String, ManifestEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    pub size: u64,
    /// The listing's modification time.
    pub modified: String,
    pub sha256: String,
    /// When the zip's directory and every member's CRC were checked (seconds since the epoch).
    pub verified_at: u64,
}

impl Manifest {
    pub fn path(dest: &Path) -> PathBuf {
        dest.join("manifest.json")
    }

    /// The manifest of `dest`, or an empty one (a missing or unreadable manifest trusts nothing).
    pub fn load(dest: &Path) -> Manifest {
        std::fs::read(Self::path(dest)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    /// Writes the manifest atomically (temporary file, then rename).
    pub fn save(&self, dest: &Path) -> std::io::Result<()> {
        let tmp = dest.join(".manifest.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self).expect("a manifest serializes"))?;
        std::fs::rename(tmp, Self::path(dest))
    }
}
