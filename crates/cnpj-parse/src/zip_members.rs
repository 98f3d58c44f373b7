//! Zip handling: list the members of one zip, recognise their kind, stream one member (CRC checked).

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use cnpj_model::FileKind;

/// One CSV member of a zip, recognised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub zip: PathBuf,
    pub name: String,
    pub index: usize,
    pub kind: FileKind,
    /// Uncompressed size in bytes, as the central directory says.
    pub size: u64,
    pub compressed_size: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("cannot open {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("{path} is not a readable zip: {source}")]
    Zip { path: PathBuf, source: zip::result::ZipError },
    #[error("{path}: member {member}: {source}")]
    Member { path: PathBuf, member: String, source: zip::result::ZipError },
    #[error("{path}: member {member}, line {line}: {source}")]
    Read { path: PathBuf, member: String, line: u64, source: io::Error },
    #[error("{path}: no member of a known kind (expected e.g. *.ESTABELE or a known zip name)")]
    Unrecognised { path: PathBuf },
}

fn open(path: &Path) -> Result<zip::ZipArchive<BufReader<File>>, ParseError> {
    let file = File::open(path).map_err(|source| ParseError::Open { path: path.to_owned(), source })?;
    zip::ZipArchive::new(BufReader::with_capacity(1 << 20, file))
        .map_err(|source| ParseError::Zip { path: path.to_owned(), source })
}

/// Reads the central directory of `path` and recognises every file member: by the zip's name
/// first, then by the member's suffix. Directory entries are skipped.
pub fn list_members(path: &Path) -> Result<Vec<Member>, ParseError> {
    let mut archive = open(path)?;
    let zip_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut members = Vec::new();
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(|source| ParseError::Zip { path: path.to_owned(), source })?;
        if entry.is_dir() {
            continue;
        }
        let name = entry.name().map_err(|source| ParseError::Zip { path: path.to_owned(), source })?.into_owned();
        if let Some(kind) = FileKind::recognise(&zip_name, Some(&name)) {
            members.push(Member {
                zip: path.to_owned(),
                name,
                index,
                kind,
                size: entry.size(),
                compressed_size: entry.compressed_size(),
            });
        }
    }
    if members.is_empty() {
        return Err(ParseError::Unrecognised { path: path.to_owned() });
    }
    Ok(members)
}

/// Streams the inflated bytes of one member to `f`. The zip crate checks the CRC when the member
/// has been read to its end; a mismatch surfaces as an `io::Error` from the reader.
pub fn read_member<T>(member: &Member, f: impl FnOnce(&mut dyn Read) -> T) -> Result<T, ParseError> {
    let mut archive = open(&member.zip)?;
    let mut file = archive.by_index(member.index).map_err(|source| ParseError::Member {
        path: member.zip.clone(),
        member: member.name.clone(),
        source,
    })?;
    Ok(f(&mut file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zip_with(dir: &Path, name: &str, members: &[(&str, &[u8])]) -> PathBuf {
        let path = dir.join(name);
        let mut w = zip::ZipWriter::new(File::create(&path).unwrap());
        for (m, data) in members {
            if m.ends_with('/') {
                w.add_directory(*m, zip::write::SimpleFileOptions::default()).unwrap();
            } else {
                w.start_file(*m, zip::write::SimpleFileOptions::default()).unwrap();
                w.write_all(data).unwrap();
            }
        }
        w.finish().unwrap();
        path
    }

    #[test]
    fn lists_recognised_members_and_skips_directories() {
        let dir = tempfile::tempdir().unwrap();
        let p = zip_with(
            dir.path(),
            "Lucro Presumido.zip",
            &[
                ("Lucro Presumido/", b""),
                ("Lucro Presumido/2018.csv", b"ano\n"),
                ("Lucro Presumido/2019.csv", b"ano\n"),
            ],
        );
        let members = list_members(&p).unwrap();
        assert_eq!(members.len(), 2);
        assert!(members.iter().all(|m| m.kind == FileKind::TaxRegime));
        assert_eq!(members[1].name, "Lucro Presumido/2019.csv");
    }

    #[test]
    fn zip64_members_stream() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Empresas0.zip");
        let mut w = zip::ZipWriter::new(File::create(&path).unwrap());
        let options = zip::write::SimpleFileOptions::default().large_file(true);
        w.start_file("K3241.K03200Y0.D60913.EMPRECSV", options).unwrap();
        w.write_all(b"\"11222333\"\n").unwrap();
        w.finish().unwrap();
        let members = list_members(&path).unwrap();
        let text = read_member(&members[0], |r| {
            let mut s = String::new();
            r.read_to_string(&mut s).map(|_| s)
        })
        .unwrap()
        .unwrap();
        assert_eq!((members[0].kind, text.as_str()), (FileKind::Empresas, "\"11222333\"\n"));
    }

    #[test]
    fn a_file_that_is_not_a_zip_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("Empresas0.zip");
        std::fs::write(&p, b"not a zip at all").unwrap();
        let err = list_members(&p).unwrap_err().to_string();
        assert!(err.contains("Empresas0.zip") && err.contains("not a readable zip"), "{err}");
    }

    #[test]
    fn a_corrupt_member_fails_while_streaming() {
        let dir = tempfile::tempdir().unwrap();
        let data = vec![b'x'; 4096];
        let p = zip_with(dir.path(), "Cnaes.zip", &[("F.K03200$Z.D60314.CNAECSV", &data)]);
        // Flip one byte of the stored payload: deflate output or CRC no longer agree.
        let mut bytes = std::fs::read(&p).unwrap();
        let at = bytes.windows(4).position(|w| w == b"CNAE").unwrap() + 20;
        bytes[at] ^= 0xFF;
        std::fs::write(&p, &bytes).unwrap();
        let members = list_members(&p).unwrap();
        let result = read_member(&members[0], |r| {
            let mut sink = Vec::new();
            r.read_to_end(&mut sink)
        })
        .unwrap();
        assert!(result.is_err());
    }
}
