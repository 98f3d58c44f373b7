//! A record reader for synthetic members, in the dialect `rows::record` writes (`;` between
//! fields, every field quoted, inner quotes doubled, LF at the end). A record keeps its raw bytes,
//! so that one left alone is written back byte for byte.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::SynthError;

pub(crate) struct Records<R> {
    input: R,
    path: PathBuf,
    raw: Vec<u8>,
    /// The fields' contents, unquoted, one after the other; `ends[i]` is where field `i` ends.
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl<R: BufRead> Records<R> {
    /// Reads `input`, a member of the zip at `path` (named in errors).
    pub(crate) fn new(input: R, path: &Path) -> Records<R> {
        Records { input, path: path.to_owned(), raw: Vec::new(), data: Vec::new(), ends: Vec::new() }
    }

    /// Reads the next record (empty lines skipped); false at the end.
    pub(crate) fn next(&mut self) -> Result<bool, SynthError> {
        loop {
            self.raw.clear();
            // A record ends at a line feed outside quotes.
            loop {
                let read = self
                    .input
                    .read_until(b'\n', &mut self.raw)
                    .map_err(|source| SynthError::Io { path: self.path.clone(), source })?;
                if read == 0 || self.raw.iter().filter(|&&b| b == b'"').count() % 2 == 0 {
                    break;
                }
            }
            if self.raw.is_empty() {
                return Ok(false);
            }
            if self.raw != b"\n" {
                self.split();
                return Ok(true);
            }
        }
    }

    fn split(&mut self) {
        self.data.clear();
        self.ends.clear();
        let body = self.raw.strip_suffix(b"\n").unwrap_or(&self.raw);
        let mut i = 0;
        loop {
            if body.get(i) == Some(&b'"') {
                i += 1;
                while let Some(&b) = body.get(i) {
                    i += 1;
                    if b != b'"' {
                        self.data.push(b);
                    } else if body.get(i) == Some(&b'"') {
                        self.data.push(b'"');
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            while let Some(&b) = body.get(i).filter(|&&b| b != b';') {
                self.data.push(b);
                i += 1;
            }
            self.ends.push(self.data.len());
            if body.get(i) != Some(&b';') {
                break;
            }
            i += 1;
        }
    }

    /// The record as read, line feed included.
    pub(crate) fn raw(&self) -> &[u8] {
        &self.raw
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Field `i`, unquoted (empty past the last field).
    pub(crate) fn field(&self, i: usize) -> &[u8] {
        match self.ends.get(i) {
            Some(&end) => &self.data[if i == 0 { 0 } else { self.ends[i - 1] }..end],
            None => &[],
        }
    }

    /// The fields, field `i` replaced by `with` where `patch` holds `(i, with)` (the last one for
    /// an `i` wins), written as a record into `out`.
    pub(crate) fn patched(&self, patch: &[(usize, Vec<u8>)], out: &mut Vec<u8>) {
        let fields: Vec<&[u8]> = (0..self.len())
            .map(|i| patch.iter().rev().find(|(j, _)| *j == i).map_or(self.field(i), |(_, v)| v.as_slice()))
            .collect();
        crate::rows::record(out, &fields);
    }
}

pub(crate) fn open(path: &Path) -> Result<zip::ZipArchive<File>, SynthError> {
    let file = File::open(path).map_err(|source| SynthError::Io { path: path.to_owned(), source })?;
    zip::ZipArchive::new(file).map_err(|source| SynthError::Zip { path: path.to_owned(), source })
}

/// Streams the first member of the zip at `path`, a record at a time, to `read`.
pub(crate) fn with_records<T>(
    path: &Path,
    read: impl FnOnce(&mut Records<BufReader<zip::read::ZipFile<'_, File>>>) -> Result<T, SynthError>,
) -> Result<T, SynthError> {
    let mut archive = open(path)?;
    let member = archive.by_index(0).map_err(|source| SynthError::Zip { path: path.to_owned(), source })?;
    read(&mut Records::new(BufReader::with_capacity(1 << 20, member), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &[u8], expected: &[&[&str]]) {
        let mut records = Records::new(input, Path::new("test"));
        let mut got: Vec<Vec<String>> = Vec::new();
        while records.next().unwrap() {
            got.push((0..records.len()).map(|i| String::from_utf8_lossy(records.field(i)).into_owned()).collect());
        }
        assert_eq!(got, expected, "{}", String::from_utf8_lossy(input));
    }

    #[test]
    fn quoted_fields_with_delimiters_quotes_and_newlines() {
        check(b"\"a\";\"\";\"b;c\"\n", &[&["a", "", "b;c"]]);
        check(b"\"say \"\"hi\"\"\";\"x\"\n\"2\"\n", &[&["say \"hi\"", "x"], &["2"]]);
        check(b"\"line\nbreak\";\"y\"\n", &[&["line\nbreak", "y"]]);
        check(b"\"no end\"", &[&["no end"]]);
        check(b"\"a\"\n\n\"b\"\n", &[&["a"], &["b"]]);
    }

    #[test]
    fn records_written_back_unpatched_are_the_same_bytes() {
        let input = b"\"1\";\"a;b\";\"say \"\"hi\"\"\"\n\"2\";\"\";\"\xc7\"\n";
        let mut records = Records::new(&input[..], Path::new("test"));
        let mut out = Vec::new();
        while records.next().unwrap() {
            let start = out.len();
            records.patched(&[], &mut out);
            assert_eq!(&out[start..], records.raw());
        }
        assert_eq!(out, input);
    }

    #[test]
    fn patched_replaces_fields_and_quotes_them() {
        let mut records = Records::new(&b"\"1\";\"two\";\"3\"\n"[..], Path::new("test"));
        assert!(records.next().unwrap());
        let mut out = Vec::new();
        records.patched(&[(1, b"x".to_vec()), (1, b"a \"b\"".to_vec())], &mut out);
        assert_eq!(out, b"\"1\";\"a \"\"b\"\"\";\"3\"\n");
    }
}
