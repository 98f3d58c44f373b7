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

/// A zip member may inflate to at most this many times its compressed size once it is bigger
/// than [`BOMB_MIN_BYTES`]: the RFB's CSV compresses 2–5:1 (the real 2026 extract: 4.7:1 at
/// most), deflate cannot do better than about 1032:1, and a member of nothing but newlines
/// reaches that.
pub const BOMB_RATIO: u64 = 200;
/// Members smaller than this are never refused for their ratio.
pub const BOMB_MIN_BYTES: u64 = 16 << 20;

// Causes are not repeated in the messages: they are the errors' `source`, which the binaries
// print after the message (anyhow's `{:#}`).
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("cannot open {path}")]
    Open { path: PathBuf, source: io::Error },
    #[error("{path} is not a readable zip")]
    Zip { path: PathBuf, source: zip::result::ZipError },
    #[error("{path}: member {member}")]
    Member { path: PathBuf, member: String, source: zip::result::ZipError },
    #[error("{path}: member {member}, line {line}")]
    Read { path: PathBuf, member: String, line: u64, source: io::Error },
    #[error("{path}: no member of a known kind (expected e.g. *.ESTABELE or a known zip name)")]
    Unrecognised { path: PathBuf },
    #[error("{path}: the zip has no member")]
    Empty { path: PathBuf },
    #[error("{path}: two members are named {member} (an RFB zip holds one member of each name): refused")]
    DuplicateName { path: PathBuf, member: String },
    #[error(
        "{path}: member {member} would inflate {compressed} bytes into {size} (more than {BOMB_RATIO}:1): \
         refused as a zip bomb"
    )]
    Bomb { path: PathBuf, member: String, size: u64, compressed: u64 },
}

fn open(path: &Path) -> Result<zip::ZipArchive<BufReader<File>>, ParseError> {
    let file = File::open(path).map_err(|source| ParseError::Open { path: path.to_owned(), source })?;
    zip::ZipArchive::new(BufReader::with_capacity(1 << 20, file))
        .map_err(|source| ParseError::Zip { path: path.to_owned(), source })
}

/// Reads the central directory of `path` and recognises every file member: by the zip's name
/// first, then by the member's suffix. Directory entries are skipped. A zip with two entries of
/// the same name is refused: only one of them could be read.
pub fn list_members(path: &Path) -> Result<Vec<Member>, ParseError> {
    let mut archive = open(path)?;
    if archive.has_duplicate_names() {
        let member = duplicate_name(path, archive.central_directory_start())?;
        return Err(ParseError::DuplicateName { path: path.to_owned(), member });
    }
    let zip_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut members = Vec::new();
    let mut files = 0;
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(|source| ParseError::Zip { path: path.to_owned(), source })?;
        if entry.is_dir() {
            continue;
        }
        files += 1;
        let name = entry.name().map_err(|source| ParseError::Zip { path: path.to_owned(), source })?.into_owned();
        let (size, compressed) = (entry.size(), entry.compressed_size());
        if size > BOMB_MIN_BYTES && size > compressed.saturating_mul(BOMB_RATIO) {
            return Err(ParseError::Bomb { path: path.to_owned(), member: name, size, compressed });
        }
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
    if files == 0 {
        return Err(ParseError::Empty { path: path.to_owned() });
    }
    if members.is_empty() {
        return Err(ParseError::Unrecognised { path: path.to_owned() });
    }
    Ok(members)
}

/// The name that two entries of the central directory share (the zip library keeps one of them
/// only, so the directory, from `start`, is read here).
fn duplicate_name(path: &Path, start: u64) -> Result<String, ParseError> {
    use std::io::{Seek, SeekFrom};
    let failed = |source| ParseError::Open { path: path.to_owned(), source };
    let mut file = File::open(path).map_err(failed)?;
    file.seek(SeekFrom::Start(start)).map_err(failed)?;
    let mut directory = Vec::new();
    file.read_to_end(&mut directory).map_err(failed)?;
    let field = |at: usize| directory.get(at..at + 2).map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])));
    let mut seen = std::collections::HashSet::new();
    let mut at = 0;
    // An entry: its signature and 42 bytes of fields, then its name, extra field and comment.
    while directory.get(at..at + 4) == Some(b"PK\x01\x02") {
        let (Some(name), Some(extra), Some(comment)) = (field(at + 28), field(at + 30), field(at + 32)) else { break };
        let Some(bytes) = directory.get(at + 46..at + 46 + name) else { break };
        if !seen.insert(bytes) {
            return Ok(String::from_utf8_lossy(bytes).into_owned());
        }
        at += 46 + name + extra + comment;
    }
    Ok("alike".into())
}

/// Streams the inflated bytes of one member to `f`. The zip crate checks the CRC when the member
/// has been read to its end; a mismatch surfaces as an `io::Error` from the reader, and so does a
/// member that inflates to more or fewer bytes than the size its directory declares.
pub fn read_member<T>(member: &Member, f: impl FnOnce(&mut dyn Read) -> T) -> Result<T, ParseError> {
    let mut archive = open(&member.zip)?;
    let file = archive.by_index(member.index).map_err(|source| ParseError::Member {
        path: member.zip.clone(),
        member: member.name.clone(),
        source,
    })?;
    Ok(f(&mut Declared { inner: file, left: member.size }))
}

/// A member's bytes, refused past its declared size and short of it: a forged directory cannot
/// make it inflate more than it says, and a member that ends early is not taken as whole.
struct Declared<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Declared<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Ask for one byte more than is left, to tell the end from an overflow.
        let want = buf.len().min(usize::try_from(self.left.saturating_add(1)).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 && self.left > 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the member inflates to {} bytes fewer than its declared size: the zip is corrupt", self.left),
            ));
        }
        if n as u64 > self.left {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the member inflates to more bytes than its declared size",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
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

    #[test]
    fn zip_bomb_is_refused_by_its_ratio() {
        let dir = tempfile::tempdir().unwrap();
        let newlines = vec![b'\n'; (BOMB_MIN_BYTES + 1) as usize];
        let options = zip::write::SimpleFileOptions::default().compression_level(Some(9));
        let path = dir.path().join("Estabelecimentos0.zip");
        let mut w = zip::ZipWriter::new(File::create(&path).unwrap());
        w.start_file("K3241.K03200Y0.D60913.ESTABELE", options).unwrap();
        w.write_all(&newlines).unwrap();
        w.finish().unwrap();
        let err = list_members(&path).unwrap_err();
        assert!(matches!(err, ParseError::Bomb { size, .. } if size == BOMB_MIN_BYTES + 1), "{err}");
        let text = err.to_string();
        assert!(text.contains("Estabelecimentos0.zip") && text.contains("zip bomb"), "{text}");
        // The same bytes just under the floor are read: small members are never refused.
        let p = zip_with(dir.path(), "Cnaes.zip", &[("F.K03200$Z.D60913.CNAECSV", &newlines[..1 << 20])]);
        assert_eq!(list_members(&p).unwrap().len(), 1);
    }

    #[test]
    fn a_member_that_inflates_past_its_declared_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data = vec![b'x'; 100_000];
        let p = zip_with(dir.path(), "Cnaes.zip", &[("F.K03200$Z.D60913.CNAECSV", &data)]);
        // Forge the declared size (local header and central directory) down to 1,000 bytes.
        let mut bytes = std::fs::read(&p).unwrap();
        let patch = |bytes: &mut Vec<u8>, signature: &[u8], offset: usize| {
            let at = bytes.windows(4).position(|w| w == signature).unwrap() + offset;
            bytes[at..at + 4].copy_from_slice(&1000u32.to_le_bytes());
        };
        patch(&mut bytes, b"PK\x03\x04", 22);
        patch(&mut bytes, b"PK\x01\x02", 24);
        std::fs::write(&p, &bytes).unwrap();
        let members = list_members(&p).unwrap();
        assert_eq!(members[0].size, 1000);
        let mut sink = Vec::new();
        let err = read_member(&members[0], |r| r.read_to_end(&mut sink)).unwrap().unwrap_err();
        assert!(err.to_string().contains("declared"), "{err}");
        assert!(sink.len() <= 1000, "{} bytes inflated", sink.len());
    }

    #[test]
    fn a_member_that_inflates_short_of_its_declared_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let data = vec![b'x'; 1000];
        let p = zip_with(dir.path(), "Cnaes.zip", &[("F.K03200$Z.D60913.CNAECSV", &data)]);
        // Forge the declared size up by 10 MB: the CRC still agrees with the bytes there are.
        let mut bytes = std::fs::read(&p).unwrap();
        for (signature, offset) in [(&b"PK\x03\x04"[..], 22), (b"PK\x01\x02", 24)] {
            let at = bytes.windows(4).position(|w| w == signature).unwrap() + offset;
            bytes[at..at + 4].copy_from_slice(&10_001_000u32.to_le_bytes());
        }
        std::fs::write(&p, &bytes).unwrap();
        let members = list_members(&p).unwrap();
        let mut sink = Vec::new();
        let err = read_member(&members[0], |r| r.read_to_end(&mut sink)).unwrap().unwrap_err();
        assert!(err.to_string().contains("10000000 bytes fewer than its declared size"), "{err}");
    }

    #[test]
    fn two_members_of_one_name_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let name = "K3241.K03200Y0.D60913.EMPRECSV";
        for second in [&b"\"11222333\"\n"[..], b"\"11"] {
            // Written under another name of the same length, then renamed in both headers.
            let p = zip_with(
                dir.path(),
                "Empresas0.zip",
                &[(name, b"\"11222333\"\n"), ("Q3241.K03200Y0.D60913.EMPRECSV", second)],
            );
            let mut bytes = std::fs::read(&p).unwrap();
            while let Some(at) = bytes.windows(5).position(|w| w == b"Q3241") {
                bytes[at] = b'K';
            }
            std::fs::write(&p, &bytes).unwrap();
            let err = list_members(&p).unwrap_err();
            assert!(matches!(&err, ParseError::DuplicateName { member, .. } if member == name), "{err}");
            assert!(err.to_string().contains("Empresas0.zip: two members are named K3241"), "{err}");
        }
    }

    #[test]
    fn a_zip_without_members_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = zip_with(dir.path(), "Municipios.zip", &[]);
        let err = list_members(&p).unwrap_err();
        assert!(matches!(err, ParseError::Empty { .. }), "{err}");
        let p = zip_with(dir.path(), "Paises.zip", &[("dir/", b"")]);
        assert!(matches!(list_members(&p).unwrap_err(), ParseError::Empty { .. }));
    }

    #[test]
    fn error_messages_do_not_repeat_their_cause() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("Empresas0.zip");
        std::fs::write(&p, b"not a zip at all").unwrap();
        let err = list_members(&p).unwrap_err();
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(!err.to_string().contains(&cause), "{err} repeats {cause}");
    }
}
