//! The CSV dialect of the dump: records (not lines), quoted fields that may hold `;`, doubled quotes
//! or newlines, backslashes as plain bytes, empty lines skipped, CR LF or LF.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::Read;
use std::rc::Rc;

use csv::ByteRecord;

/// Byte offsets of the newlines read ahead by the CSV reader and not yet passed by a record,
/// plus how many have been passed: turns a record's byte offset into its physical line (the CSV
/// reader's own line count skips empty lines).
#[derive(Default)]
struct Newlines {
    ahead: VecDeque<u64>,
    passed: u64,
}

struct LineTracking<R> {
    inner: R,
    offset: u64,
    newlines: Rc<RefCell<Newlines>>,
}

impl<R: Read> Read for LineTracking<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut newlines = self.newlines.borrow_mut();
        for i in newline_positions(b'\n', &buf[..n]) {
            newlines.ahead.push_back(self.offset + i as u64);
        }
        self.offset += n as u64;
        Ok(n)
    }
}

fn newline_positions(needle: u8, haystack: &[u8]) -> impl Iterator<Item = usize> + '_ {
    haystack.iter().enumerate().filter(move |&(_, &b)| b == needle).map(|(i, _)| i)
}

/// One record's raw fields; implements [`cnpj_model::rows::Fields`] for the normalizer.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a>(&'a ByteRecord);

impl Record<'_> {
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.0.iter()
    }
}

impl cnpj_model::rows::Fields for Record<'_> {
    fn count(&self) -> usize {
        self.0.len()
    }

    fn field(&self, i: usize) -> &[u8] {
        self.0.get(i).unwrap_or_default()
    }
}

/// A lending reader of records: call [`Records::advance`], then look at [`Records::record`].
pub struct Records<R: Read> {
    inner: csv::Reader<LineTracking<R>>,
    newlines: Rc<RefCell<Newlines>>,
    record: ByteRecord,
    read: u64,
    line: u64,
}

impl<R: Read> Records<R> {
    /// The RFB main and lookup files: `;`, every field quoted, no header.
    pub fn rfb(reader: R) -> Records<R> {
        Self::with(reader, b';', false)
    }

    /// The tax-regime files: `,`, a header line, unquoted.
    pub fn tax_regime(reader: R) -> Records<R> {
        Self::with(reader, b',', true)
    }

    fn with(reader: R, delimiter: u8, has_headers: bool) -> Records<R> {
        let newlines = Rc::new(RefCell::new(Newlines::default()));
        let inner = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(has_headers)
            .flexible(true)
            .double_quote(true)
            .escape(None)
            .buffer_capacity(1 << 20)
            .from_reader(LineTracking { inner: reader, offset: 0, newlines: Rc::clone(&newlines) });
        Records { inner, newlines, record: ByteRecord::new(), read: 0, line: 0 }
    }

    /// The header of a headed file (tax regime).
    pub fn headers(&mut self) -> std::io::Result<Vec<String>> {
        let h = self.inner.byte_headers().map_err(into_io)?;
        Ok(h.iter().map(|f| String::from_utf8_lossy(f).trim().to_ascii_lowercase()).collect())
    }

    /// Reads the next record; `Ok(false)` at the end. Errors are I/O errors of the underlying
    /// stream (a truncated or corrupt member).
    pub fn advance(&mut self) -> std::io::Result<bool> {
        let more = self.inner.read_byte_record(&mut self.record).map_err(into_io)?;
        if more {
            self.read += 1;
            self.line = self.start_line();
        }
        Ok(more)
    }

    /// The CSV reader reports where a record ends but counts neither empty lines nor the line a
    /// record starts on; so count the newlines before its end, less its own.
    fn start_line(&mut self) -> u64 {
        let end = self.inner.position().byte();
        let mut newlines = self.newlines.borrow_mut();
        let mut last = None;
        while newlines.ahead.front().is_some_and(|&at| at < end) {
            last = newlines.ahead.pop_front();
            newlines.passed += 1;
        }
        let terminated = u64::from(last.is_some_and(|at| at + 1 == end));
        let inside = self.record.as_slice().iter().filter(|&&b| b == b'\n').count() as u64;
        newlines.passed.saturating_sub(terminated + inside) + 1
    }

    pub fn record(&self) -> Record<'_> {
        Record(&self.record)
    }

    /// Physical line (1-based) where the current record starts.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Bytes of input consumed so far.
    pub fn bytes(&self) -> u64 {
        self.inner.position().byte()
    }

    /// Records read so far.
    pub fn count(&self) -> u64 {
        self.read
    }
}

fn into_io(e: csv::Error) -> std::io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => io,
        other => std::io::Error::other(format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(input: &[u8], expected: &[(u64, &[&[u8]])]) {
        let mut r = Records::rfb(input);
        let mut got = Vec::new();
        while r.advance().unwrap() {
            got.push((r.line(), r.record().iter().map(<[u8]>::to_vec).collect::<Vec<_>>()));
        }
        let expected: Vec<_> =
            expected.iter().map(|(l, f)| (*l, f.iter().map(|x| x.to_vec()).collect::<Vec<_>>())).collect();
        assert_eq!(got, expected, "input {:?}", String::from_utf8_lossy(input));
    }

    #[test]
    fn quoted_semicolons_stay_in_their_field() {
        check(b"\"1\";\"EDIF X;BLOCO 2\";\"\"\n", &[(1, &[b"1", b"EDIF X;BLOCO 2", b""])]);
    }

    #[test]
    fn doubled_quotes_are_one_quote() {
        check(b"\"A \"\"B\"\" C\";\"2\"\n", &[(1, &[b"A \"B\" C", b"2"])]);
    }

    #[test]
    fn backslash_is_not_an_escape() {
        check(b"\"ABC\\\";\"X\"\n", &[(1, &[b"ABC\\", b"X"])]);
    }

    #[test]
    fn nul_and_latin1_bytes_pass_through() {
        check(b"\"A\x00B\";\"PRA\xc7A\"\n", &[(1, &[b"A\x00B", b"PRA\xc7A"])]);
    }

    #[test]
    fn empty_lines_are_not_records_and_lines_count_physically() {
        check(b"\"1\"\n\n\"2\"\r\n\n\n", &[(1, &[b"1"]), (3, &[b"2"])]);
    }

    #[test]
    fn a_quoted_newline_makes_one_record_of_two_lines() {
        check(b"\"A\nB\";\"C\"\n\"D\";\"E\"\n", &[(1, &[b"A\nB", b"C"]), (3, &[b"D", b"E"])]);
    }

    #[test]
    fn short_and_long_records_are_returned_as_they_are() {
        check(b"\"1\";\"2\"\n\"1\"\n", &[(1, &[b"1", b"2"]), (2, &[b"1"])]);
    }

    #[test]
    fn tax_regime_header_is_separate() {
        let mut r = Records::tax_regime(&b"ano,cnpj\r\n2023,00.000.000/0001-91\r\n"[..]);
        assert_eq!(r.headers().unwrap(), vec!["ano", "cnpj"]);
        assert!(r.advance().unwrap());
        assert_eq!(r.record().iter().collect::<Vec<_>>(), vec![&b"2023"[..], b"00.000.000/0001-91"]);
        assert_eq!(r.line(), 2);
        assert!(!r.advance().unwrap());
    }

    proptest! {
        #[test]
        fn quoted_fields_round_trip(fields in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..8)) {
            let mut line = Vec::new();
            for (i, f) in fields.iter().enumerate() {
                if i > 0 { line.push(b';'); }
                line.push(b'"');
                for &b in f { if b == b'"' { line.push(b'"'); } line.push(b); }
                line.push(b'"');
            }
            line.push(b'\n');
            let mut r = Records::rfb(&line[..]);
            prop_assert!(r.advance().unwrap());
            let got: Vec<Vec<u8>> = r.record().iter().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, fields);
        }
    }
}
