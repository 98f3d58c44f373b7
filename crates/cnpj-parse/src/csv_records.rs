//! The CSV dialect of the dump: records (not lines), quoted fields that may hold `;`, doubled quotes
//! or newlines, backslashes as plain bytes, empty lines skipped, CR LF, LF or CR alone.
//!
//! Memory is bounded whatever the input: a record is kept up to a cap ([`DEFAULT_MAX_RECORD_BYTES`]
//! unless [`Records::max_record_bytes`] says otherwise) and the rest of an over-long record is
//! skipped (the record comes out with [`Record::over_cap`] set, for the caller to reject); lines are
//! counted, never remembered, so a member of nothing but newlines costs nothing. A member that
//! ends inside a quoted field or right after a delimiter (cut short) gives a last record with
//! [`Record::unterminated`] set.

use std::io::Read;

use csv_core::{ReadRecordResult, ReaderBuilder, Terminator};

/// The record cap of a build unless told otherwise: the longest real record is under 1 KiB.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 1 << 20;

/// Input read from the member at a time.
const INPUT_BUFFER: usize = 1 << 20;

/// Byte counts of a member's text that tell its encoding: complete UTF-8 multi-byte sequences,
/// and bytes ≥ 0x80 that are not part of one (Latin-1 letters: `Ç` alone is `0xC7`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TextStats {
    pub bytes: u64,
    pub utf8_sequences: u64,
    pub other_high_bytes: u64,
    pub nul_bytes: u64,
}

impl TextStats {
    /// Whether the text reads as UTF-8 (multi-byte sequences, and next to no byte that is not
    /// part of one) where Latin-1 is expected: `Ç` would be served as `Ã‡`.
    pub fn looks_like_utf8(&self) -> bool {
        self.utf8_sequences > 0 && self.other_high_bytes.saturating_mul(10) <= self.utf8_sequences
    }

    /// Whether the bytes are not Latin-1 text at all: more than a tenth of them NUL (UTF-16 is
    /// half NUL; the dump's stray NUL bytes are a handful per file).
    pub fn looks_like_binary(&self) -> bool {
        self.nul_bytes.saturating_mul(10) > self.bytes
    }
}

/// Where the bytes consumed so far stand in the quoting, as csv-core reads them: at a record's
/// start, at a field's start after a delimiter, in an unquoted field, in a quoted one, or just
/// after a quote inside a quoted one (which either closes the field or, doubled, is a quote).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Quoting {
    #[default]
    RecordStart,
    AfterDelimiter,
    Unquoted,
    Quoted,
    QuoteInQuoted,
}

/// Line and encoding bookkeeping over the bytes the parser consumes: a few counters, whatever
/// the input.
#[derive(Default)]
struct Scan {
    delimiter: u8,
    quoting: Quoting,
    /// Line terminators passed: `\n`, `\r`, or `\r\n` counted once.
    terminators: u64,
    last_was_cr: bool,
    /// Continuation bytes still expected by a UTF-8 sequence, and the bytes it has so far.
    utf8_need: u8,
    utf8_have: u8,
    stats: TextStats,
}

impl Scan {
    /// Counts `bytes`; when `find_start` asks for it, returns the line of the first byte that is
    /// not a line terminator (where a record starts: the parser skips empty lines).
    ///
    /// Hand-rolled for speed (BENCHMARKS.md, "The build's CPU back"): a byte-at-a-time state
    /// machine over every byte of the month cost about 40 CPU s at scale 1.0; this counts line
    /// ends with `memchr` and steps over 8 bytes at a time where there is no byte ≥ 0x80 and no
    /// NUL.
    fn feed(&mut self, bytes: &[u8], find_start: bool) -> Option<u64> {
        let mut start = None;
        let mut rest = bytes;
        if find_start {
            let lead = bytes.iter().position(|&b| b != b'\n' && b != b'\r').unwrap_or(bytes.len());
            self.lines(&bytes[..lead]);
            if lead < bytes.len() {
                start = Some(self.terminators + 1);
            }
            rest = &bytes[lead..];
        }
        self.lines(rest);
        self.text(bytes);
        self.stats.bytes += bytes.len() as u64;
        start
    }

    /// Line ends in `bytes`: `\n`, `\r`, and `\r\n` once (also when a chunk ends between the two).
    fn lines(&mut self, bytes: &[u8]) {
        let Some(&last) = bytes.last() else { return };
        let lf = memchr::memchr_iter(b'\n', bytes).count();
        let (mut cr, mut pairs) = (0, 0);
        for at in memchr::memchr_iter(b'\r', bytes) {
            cr += 1;
            pairs += usize::from(bytes.get(at + 1) == Some(&b'\n'));
        }
        let carried = usize::from(self.last_was_cr && bytes[0] == b'\n');
        self.terminators += (lf + cr - pairs - carried) as u64;
        self.last_was_cr = last == b'\r';
    }

    /// Follows the quoting over `bytes` that csv-core consumed. A record it ended (its
    /// terminator consumed) leaves the quoting at a record's start, so that the bytes of whole
    /// records are not looked at: only those of a record the input ran out in.
    fn quotes(&mut self, bytes: &[u8], record_ended: bool) {
        if record_ended {
            self.quoting = Quoting::RecordStart;
            return;
        }
        // csv-core skips a UTF-8 byte-order mark at the very start: it opens no field.
        let skip = if self.stats.bytes == 0 && bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
        for &b in &bytes[skip..] {
            self.quote(b);
        }
    }

    /// The encoding evidence of `bytes`: 8 bytes at a time are skipped while they are ASCII
    /// without NUL and no UTF-8 sequence is open.
    fn text(&mut self, bytes: &[u8]) {
        const HIGH: u64 = 0x8080_8080_8080_8080;
        const ONES: u64 = 0x0101_0101_0101_0101;
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let v = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            let plain = v & HIGH == 0 && v.wrapping_sub(ONES) & !v & HIGH == 0;
            if !plain || self.utf8_need > 0 {
                word.iter().for_each(|&b| self.encoding(b));
            }
        }
        words.remainder().iter().for_each(|&b| self.encoding(b));
    }

    fn quote(&mut self, b: u8) {
        let at_start = matches!(self.quoting, Quoting::RecordStart | Quoting::AfterDelimiter);
        self.quoting = match (self.quoting, b) {
            (Quoting::Quoted, b'"') => Quoting::QuoteInQuoted,
            (Quoting::Quoted, _) => Quoting::Quoted,
            (Quoting::QuoteInQuoted, b'"') => Quoting::Quoted,
            (_, b'"') if at_start => Quoting::Quoted,
            (_, b) if b == self.delimiter => Quoting::AfterDelimiter,
            (_, b'\n' | b'\r') => Quoting::RecordStart,
            _ => Quoting::Unquoted,
        };
    }

    fn encoding(&mut self, b: u8) {
        if self.utf8_need > 0 {
            if b & 0xC0 == 0x80 {
                self.utf8_need -= 1;
                self.utf8_have += 1;
                if self.utf8_need == 0 {
                    self.stats.utf8_sequences += 1;
                    self.utf8_have = 0;
                }
                return;
            }
            self.stats.other_high_bytes += u64::from(self.utf8_have);
            self.utf8_need = 0;
            self.utf8_have = 0;
        }
        match b {
            0 => self.stats.nul_bytes += 1,
            0xC2..=0xDF => (self.utf8_need, self.utf8_have) = (1, 1),
            0xE0..=0xEF => (self.utf8_need, self.utf8_have) = (2, 1),
            0xF0..=0xF4 => (self.utf8_need, self.utf8_have) = (3, 1),
            0x80..=0xFF => self.stats.other_high_bytes += 1,
            _ => {}
        }
    }
}

/// One record's raw fields; implements [`cnpj_model::rows::Fields`] for the normalizer.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    bytes: &'a [u8],
    ends: &'a [usize],
    over_cap: Option<(u64, u64)>,
    unterminated: bool,
}

impl<'a> Record<'a> {
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + use<'a> {
        let (bytes, ends) = (self.bytes, self.ends);
        (0..ends.len()).map(move |i| &bytes[if i == 0 { 0 } else { ends[i - 1] }..ends[i]])
    }
}

impl cnpj_model::rows::Fields for Record<'_> {
    fn count(&self) -> usize {
        self.ends.len()
    }

    fn field(&self, i: usize) -> &[u8] {
        match self.ends.get(i) {
            Some(&end) => &self.bytes[if i == 0 { 0 } else { self.ends[i - 1] }..end],
            None => &[],
        }
    }

    fn over_cap(&self) -> Option<(u64, u64)> {
        self.over_cap
    }

    fn unterminated(&self) -> bool {
        self.unterminated
    }
}

/// A lending reader of records: call [`Records::advance`], then look at [`Records::record`].
pub struct Records<R: Read> {
    reader: R,
    core: csv_core::Reader,
    input: Vec<u8>,
    at: usize,
    filled: usize,
    eof: bool,
    done: bool,
    /// The current record's field bytes and field ends, up to the cap.
    bytes: Vec<u8>,
    ends: Vec<usize>,
    used: (usize, usize),
    /// Where an over-long record's rest goes (and is forgotten).
    scratch: Vec<u8>,
    scratch_ends: Vec<usize>,
    max_record: usize,
    over_cap: Option<(u64, u64)>,
    unterminated: bool,
    scan: Scan,
    consumed: u64,
    has_headers: bool,
    headers: Option<Vec<String>>,
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
        let core = ReaderBuilder::new()
            .delimiter(delimiter)
            .terminator(Terminator::CRLF)
            .quoting(true)
            .double_quote(true)
            .escape(None)
            .build();
        Records {
            reader,
            core,
            input: vec![0; INPUT_BUFFER],
            at: 0,
            filled: 0,
            eof: false,
            done: false,
            bytes: vec![0; 4096],
            ends: vec![0; 64],
            used: (0, 0),
            scratch: vec![0; 64 << 10],
            scratch_ends: vec![0; 1024],
            max_record: DEFAULT_MAX_RECORD_BYTES,
            over_cap: None,
            unterminated: false,
            scan: Scan { delimiter, ..Scan::default() },
            consumed: 0,
            has_headers,
            headers: None,
            read: 0,
            line: 0,
        }
    }

    /// Caps the bytes kept of one record (its fields' content; at least 1 KiB). A longer record
    /// is read to its end without being kept, and comes out with [`Record::over_cap`] set.
    pub fn max_record_bytes(mut self, cap: usize) -> Records<R> {
        self.max_record = cap.max(1024);
        // The buffers start small, but not above the cap: a cap below their first size held
        // records up to that size (found by the property test below).
        self.bytes.truncate(self.max_record);
        self.ends.truncate(self.max_record / 8);
        self
    }

    /// The header of a headed file (tax regime), lower-cased and trimmed.
    pub fn headers(&mut self) -> std::io::Result<Vec<String>> {
        self.read_headers()?;
        Ok(self.headers.clone().unwrap_or_default())
    }

    fn read_headers(&mut self) -> std::io::Result<()> {
        if self.has_headers && self.headers.is_none() {
            let header = if self.next()? {
                self.record().iter().map(|f| String::from_utf8_lossy(f).trim().to_ascii_lowercase()).collect()
            } else {
                Vec::new()
            };
            self.headers = Some(header);
        }
        Ok(())
    }

    /// Reads the next record; `Ok(false)` at the end. Errors are I/O errors of the underlying
    /// stream (a truncated or corrupt member); [`Records::current_line`] says where.
    pub fn advance(&mut self) -> std::io::Result<bool> {
        self.read_headers()?;
        let more = self.next()?;
        if more {
            self.read += 1;
        }
        Ok(more)
    }

    fn next(&mut self) -> std::io::Result<bool> {
        if self.done {
            return Ok(false);
        }
        self.used = (0, 0);
        self.over_cap = None;
        self.unterminated = false;
        let (mut skipped, mut skipped_ends): (u64, usize) = (0, 0);
        let mut start_line = None;
        loop {
            if self.at == self.filled && !self.eof {
                self.fill()?;
            }
            let input = &self.input[self.at..self.filled];
            let (result, nin, nout, nends) = if self.over_cap.is_some() {
                self.core.read_record(input, &mut self.scratch, &mut self.scratch_ends)
            } else {
                self.core.read_record(input, &mut self.bytes[self.used.0..], &mut self.ends[self.used.1..])
            };
            // At the end of the input csv-core ends a record without consuming a byte: the
            // quoting then tells where the input ran out.
            self.scan.quotes(&input[..nin], result == ReadRecordResult::Record && !self.eof);
            if let Some(line) = self.scan.feed(&input[..nin], start_line.is_none()) {
                start_line = Some(line);
            }
            self.at += nin;
            self.consumed += nin as u64;
            if self.over_cap.is_some() {
                skipped += nout as u64;
                skipped_ends += nends;
            } else {
                self.used.0 += nout;
                self.used.1 += nends;
            }
            match result {
                ReadRecordResult::InputEmpty => {}
                ReadRecordResult::OutputFull | ReadRecordResult::OutputEndsFull if self.over_cap.is_none() => {
                    self.grow(result == ReadRecordResult::OutputFull);
                }
                ReadRecordResult::OutputFull | ReadRecordResult::OutputEndsFull => {}
                ReadRecordResult::Record => {
                    if self.over_cap.is_some() {
                        self.end_over_cap(skipped, skipped_ends);
                    }
                    self.line = start_line.unwrap_or(self.scan.terminators + 1);
                    // The input ran out inside a quoted field, or where a field should begin after
                    // a delimiter: csv-core ends the record there, its last field cut or empty.
                    self.unterminated =
                        self.eof && matches!(self.scan.quoting, Quoting::Quoted | Quoting::AfterDelimiter);
                    return Ok(true);
                }
                ReadRecordResult::End => {
                    self.done = true;
                    return Ok(false);
                }
            }
        }
    }

    /// Refills the input buffer from the reader (`eof` when it has no more).
    fn fill(&mut self) -> std::io::Result<()> {
        self.filled = loop {
            match self.reader.read(&mut self.input) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                read => break read?,
            }
        };
        self.at = 0;
        self.eof = self.filled == 0;
        Ok(())
    }

    /// The record's bytes (`full_bytes`) or field ends filled their buffer: it doubles, up to the
    /// cap; past the cap the record's rest goes to the scratch buffers.
    fn grow(&mut self, full_bytes: bool) {
        if full_bytes && self.bytes.len() < self.max_record {
            let grown = (self.bytes.len() * 2).min(self.max_record);
            self.bytes.resize(grown, 0);
        } else if !full_bytes && self.ends.len() < self.max_record / 8 {
            let grown = (self.ends.len() * 2).min(self.max_record / 8);
            self.ends.resize(grown, 0);
        } else {
            self.over_cap = Some((0, self.max_record as u64));
        }
    }

    /// An over-long record ended, `skipped` bytes and `skipped_ends` fields past the cap: what was
    /// kept becomes its fields, and its size is noted unless it was whole after all.
    fn end_over_cap(&mut self, skipped: u64, skipped_ends: usize) {
        // Keep what was read as fields: the last one ends where the kept bytes do.
        let last = if self.used.1 == 0 { 0 } else { self.ends[self.used.1 - 1] };
        if last < self.used.0 || self.used.1 == 0 {
            if self.used.1 == self.ends.len() {
                self.ends.push(0);
            }
            self.ends[self.used.1] = self.used.0;
            self.used.1 += 1;
        }
        // csv-core reports a full buffer before it looks at the next byte: a record whose bytes
        // fill the cap exactly ends with no byte and no field more, and is whole.
        let exact = skipped == 0 && skipped_ends <= 1 && self.used.1 <= self.max_record / 8;
        self.over_cap = (!exact).then_some((self.used.0 as u64 + skipped, self.max_record as u64));
    }

    pub fn record(&self) -> Record<'_> {
        Record {
            bytes: &self.bytes[..self.used.0],
            ends: &self.ends[..self.used.1],
            over_cap: self.over_cap,
            unterminated: self.unterminated,
        }
    }

    /// Physical line (1-based) where the current record starts.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The physical line (1-based) the reader has reached: where a stream error happened.
    pub fn current_line(&self) -> u64 {
        self.scan.terminators + 1
    }

    /// Bytes of input consumed so far.
    pub fn bytes(&self) -> u64 {
        self.consumed
    }

    /// Records read so far (the header of a headed file is not one).
    pub fn count(&self) -> u64 {
        self.read
    }

    /// The encoding evidence of the bytes read so far.
    pub fn text_stats(&self) -> TextStats {
        self.scan.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cnpj_model::rows::Fields;
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
        check(b"\n\n\"1\"", &[(3, &[b"1"])]);
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
    fn cr_only_line_ends_count_as_lines() {
        let input: Vec<u8> = (1..=10).flat_map(|i| format!("\"{i}\"\r").into_bytes()).collect();
        let mut r = Records::rfb(&input[..]);
        let mut lines = Vec::new();
        while r.advance().unwrap() {
            lines.push((r.line(), String::from_utf8(r.record().field(0).to_vec()).unwrap()));
        }
        let expected: Vec<(u64, String)> = (1..=10).map(|i| (i, i.to_string())).collect();
        assert_eq!(lines, expected);
        check(b"\"1\"\r\r\"2\"\r\n\"3\"", &[(1, &[b"1"]), (3, &[b"2"]), (4, &[b"3"])]);
    }

    #[test]
    fn a_member_cut_inside_a_quoted_field_ends_in_an_unterminated_record() {
        let last = |input: &[u8]| {
            let mut r = Records::rfb(input);
            let mut out = None;
            while r.advance().unwrap() {
                let rec = r.record();
                out = Some((r.line(), rec.count(), rec.unterminated()));
                if rec.unterminated() {
                    assert!(!r.advance().unwrap(), "a record after the end");
                }
            }
            out
        };
        // Cut inside the last field: as many fields as a whole record, but cut (fuzz: Cnaes cut
        // inside a label was loaded with half its label).
        assert_eq!(last(b"\"1\";\"A\"\n\"2\";\"CULTIVO DE AR"), Some((2, 2, true)));
        assert_eq!(last(b"\"1\";\"A\"\n\"2\";\""), Some((2, 2, true)));
        assert_eq!(last(b"\"1\";\"A\nB"), Some((1, 2, true)));
        assert_eq!(last(b"\"1\";\"A \"\"B"), Some((1, 2, true)));
        assert_eq!(last("\u{feff}\"1\";\"A".as_bytes()), Some((1, 2, true)));
        // Cut right after a delimiter: the last field is empty, where it had a value (fuzz: a
        // Naturezas line cut after its code loaded the code with an empty label).
        assert_eq!(last(b"\"1\";\"A\"\n\"2\";"), Some((2, 2, true)));
        assert_eq!(last(b"\"1\";\"A\";"), Some((1, 3, true)));
        // Whole records, with or without a last newline, a doubled quote, a BOM, CR alone.
        assert_eq!(last(b"\"1\";\"A\""), Some((1, 2, false)));
        assert_eq!(last(b"\"1\";\"A \"\"B\"\"\"\r\n\n"), Some((1, 2, false)));
        assert_eq!(last("\u{feff}\"1\";\"A\"\r".as_bytes()), Some((1, 2, false)));
        assert_eq!(last(b"1;A\"B"), Some((1, 2, false)));
        assert_eq!(last(b"\"1\";\"A\";\r\n"), Some((1, 3, false)));
        let mut r = Records::tax_regime(&b"ano,cnpj\n2023,\"00.000.000/0001-91"[..]);
        assert!(r.advance().unwrap());
        assert!(r.record().unterminated());
    }

    #[test]
    fn tax_regime_header_is_separate() {
        let mut r = Records::tax_regime(&b"ano,cnpj\r\n2023,00.000.000/0001-91\r\n"[..]);
        assert_eq!(r.headers().unwrap(), vec!["ano", "cnpj"]);
        assert!(r.advance().unwrap());
        assert_eq!(r.record().iter().collect::<Vec<_>>(), vec![&b"2023"[..], b"00.000.000/0001-91"]);
        assert_eq!(r.line(), 2);
        assert_eq!(r.count(), 1);
        assert!(!r.advance().unwrap());
        // Without asking for the header first, it is still not a record.
        let mut r = Records::tax_regime(&b"ano,cnpj\n2023,x\n"[..]);
        assert!(r.advance().unwrap());
        assert_eq!((r.line(), r.record().field(0)), (2, &b"2023"[..]));
    }

    /// A reader that yields `n` bytes of `byte` without holding them.
    struct Repeat {
        byte: u8,
        left: u64,
    }

    impl Read for Repeat {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = (buf.len() as u64).min(self.left) as usize;
            buf[..n].fill(self.byte);
            self.left -= n as u64;
            Ok(n)
        }
    }

    #[test]
    fn huge_record_over_the_cap_is_flagged_not_kept() {
        // 64 MiB in one field without a newline, then a normal record.
        let huge = Repeat { byte: b'x', left: 64 << 20 };
        let rest = &b"\n\"2\";\"B\"\n"[..];
        let mut r = Records::rfb(Read::chain(&b"\"1\";\""[..], huge).chain(&b"\""[..]).chain(rest));
        assert!(r.advance().unwrap());
        let rec = r.record();
        assert_eq!(rec.over_cap(), Some(((64 << 20) + 1, DEFAULT_MAX_RECORD_BYTES as u64)));
        assert!(rec.iter().map(<[u8]>::len).sum::<usize>() <= DEFAULT_MAX_RECORD_BYTES);
        assert_eq!(rec.field(0), b"1");
        assert!(r.bytes.len() <= DEFAULT_MAX_RECORD_BYTES, "kept {} bytes", r.bytes.len());
        assert!(r.advance().unwrap());
        assert_eq!((r.line(), r.record().over_cap(), r.record().field(1)), (2, None, &b"B"[..]));
        assert!(!r.advance().unwrap());
    }

    #[test]
    fn huge_record_of_empty_fields_is_flagged() {
        let mut r = Records::rfb(Repeat { byte: b';', left: 8 << 20 }).max_record_bytes(4096);
        assert!(r.advance().unwrap());
        assert!(r.record().over_cap().is_some());
        assert!(r.ends.len() <= 4096, "{}", r.ends.len());
        assert!(!r.advance().unwrap());
    }

    #[test]
    fn a_member_of_only_newlines_is_no_record_and_costs_no_memory() {
        let mut r = Records::rfb(Repeat { byte: b'\n', left: 256 << 20 });
        assert!(!r.advance().unwrap());
        assert_eq!(r.current_line(), (256 << 20) + 1);
        assert_eq!(r.bytes(), 256 << 20);
    }

    #[test]
    fn a_stream_error_on_the_first_read_is_on_line_1() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("corrupt deflate stream"))
            }
        }
        let mut r = Records::rfb(Broken);
        assert!(r.advance().is_err());
        assert_eq!(r.current_line(), 1);
    }

    #[test]
    fn text_stats_tell_utf8_from_latin1() {
        let stats = |input: &[u8]| {
            let mut r = Records::rfb(input);
            while r.advance().unwrap() {}
            r.text_stats()
        };
        let latin1 = stats(
            "\"PRA\u{c7}A DA S\u{c9}\";\"1\u{aa} RUA\"\n".chars().map(|c| c as u8).collect::<Vec<_>>().as_slice(),
        );
        assert_eq!((latin1.utf8_sequences, latin1.other_high_bytes), (0, 3));
        assert!(!latin1.looks_like_utf8());
        let utf8 = stats("\"PRAÇA DA SÉ\";\"1ª RUA\"\n".as_bytes());
        assert_eq!((utf8.utf8_sequences, utf8.other_high_bytes), (3, 0));
        assert!(utf8.looks_like_utf8());
        assert!(!stats(b"\"ASCII ONLY\"\n").looks_like_utf8());
        let utf16: Vec<u8> = b"\"11222333\";\"2\"\n".iter().flat_map(|&b| [b, 0]).collect();
        assert!(stats(&utf16).looks_like_binary());
        assert!(stats(&[0; 100]).looks_like_binary());
        assert!(!stats(b"\"A\x00B\";\"PRA\xc7A\"\n").looks_like_binary());
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

    // Fuzz targets of the record reader, on stable: any bytes, and near-valid records. A few
    // hundred cases by default; PROPTEST_CASES=100000 for a long run.

    /// Bytes the dialect cares about, often, and any byte.
    fn dialect_byte() -> impl Strategy<Value = u8> {
        prop_oneof![
            4 => any::<u8>(),
            2 => Just(b'"'),
            2 => Just(b';'),
            1 => Just(b','),
            1 => Just(b'\n'),
            1 => Just(b'\r'),
            1 => Just(0u8),
            1 => Just(0xC3u8),
        ]
    }

    /// Terminators met after each line: `\n`, `\r\n` and `\r` each count once.
    fn terminators(bytes: &[u8]) -> u64 {
        let mut n = 0;
        for (i, &b) in bytes.iter().enumerate() {
            n += u64::from(b == b'\n' && (i == 0 || bytes[i - 1] != b'\r') || b == b'\r');
        }
        n
    }

    /// Complete UTF-8 multi-byte sequences, and the other bytes ≥ 0x80, byte by byte.
    fn utf8_evidence(bytes: &[u8]) -> (u64, u64) {
        let (mut sequences, mut other, mut at) = (0, 0, 0);
        while at < bytes.len() {
            let need = match bytes[at] {
                0xC2..=0xDF => 1,
                0xE0..=0xEF => 2,
                0xF0..=0xF4 => 3,
                b => {
                    other += u64::from(b >= 0x80);
                    at += 1;
                    continue;
                }
            };
            let continued = bytes[at + 1..].iter().take(need).take_while(|&&b| b & 0xC0 == 0x80).count();
            if continued == need {
                sequences += 1;
            } else if at + 1 + continued < bytes.len() {
                other += 1 + continued as u64; // cut by another byte (not by the end)
            }
            at += 1 + continued;
        }
        (sequences, other)
    }

    /// A reader that yields at most `chunk` bytes a read.
    struct Trickle<'a> {
        bytes: &'a [u8],
        chunk: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.bytes.len().min(self.chunk).min(buf.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    /// A record read: its line, its fields, whether it is unterminated.
    type ReadRecord = (u64, Vec<Vec<u8>>, bool);

    /// A record written: its fields, its line end, and how many empty lines follow it.
    type Written = (Vec<Vec<u8>>, &'static [u8], usize);

    /// Reads everything: each record's line, fields, and flag, checking the reader's own
    /// invariants on the way.
    fn read_all<R: Read>(mut r: Records<R>, cap: usize) -> Result<Vec<ReadRecord>, TestCaseError> {
        let mut out: Vec<ReadRecord> = Vec::new();
        while r.advance().unwrap() {
            let rec = r.record();
            prop_assert!(out.last().is_none_or(|last| !last.2), "a record after an unterminated one");
            prop_assert!(
                out.last().is_none_or(|last| last.0 < r.line()),
                "lines go back: {:?} then {}",
                out.last(),
                r.line()
            );
            prop_assert!(r.line() >= 1 && r.line() <= r.current_line());
            let kept: usize = rec.iter().map(<[u8]>::len).sum();
            prop_assert!(kept <= cap.max(1024), "kept {} bytes over the cap {}", kept, cap);
            prop_assert_eq!(rec.count(), rec.iter().count());
            if let Some((bytes, limit)) = rec.over_cap() {
                prop_assert!(bytes > limit || rec.count() > limit as usize / 8, "{} of {}", bytes, limit);
            }
            out.push((r.line(), rec.iter().map(<[u8]>::to_vec).collect(), rec.unterminated()));
        }
        prop_assert_eq!(r.count(), out.len() as u64);
        Ok(out)
    }

    /// A record in the RFB form: every field quoted, quotes doubled.
    fn rfb_line(fields: &[Vec<u8>]) -> Vec<u8> {
        let mut line = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                line.push(b';');
            }
            line.push(b'"');
            for &b in f {
                if b == b'"' {
                    line.push(b'"');
                }
                line.push(b);
            }
            line.push(b'"');
        }
        line
    }

    fn near_valid_records() -> impl Strategy<Value = Vec<Written>> {
        let field = proptest::collection::vec(dialect_byte(), 0..12);
        let record = proptest::collection::vec(field, 1..8);
        let terminator = prop_oneof![Just(&b"\n"[..]), Just(&b"\r\n"[..]), Just(&b"\r"[..])];
        proptest::collection::vec((record, terminator, 0..3usize), 0..12)
    }

    proptest! {
        #[test]
        fn any_bytes_read_without_panic_and_every_byte_is_counted(
            input in proptest::collection::vec(dialect_byte(), 0..4096),
            cap in prop_oneof![Just(1024usize), Just(4096), Just(DEFAULT_MAX_RECORD_BYTES)],
            chunk in 1..64usize,
        ) {
            for tax in [false, true] {
                // Read in chunks of a few bytes too: a CR LF or a UTF-8 sequence split between two.
                let trickle = Trickle { bytes: &input, chunk };
                let r = if tax { Records::tax_regime(trickle) } else { Records::rfb(trickle) };
                let mut r = r.max_record_bytes(cap);
                while r.advance().unwrap() {}
                prop_assert_eq!(r.bytes(), input.len() as u64);
                prop_assert_eq!(r.current_line(), terminators(&input) + 1);
                let stats = r.text_stats();
                prop_assert_eq!(stats.bytes, input.len() as u64);
                prop_assert_eq!(stats.nul_bytes, input.iter().filter(|&&b| b == 0).count() as u64);
                prop_assert_eq!((stats.utf8_sequences, stats.other_high_bytes), utf8_evidence(&input));
                read_all(if tax { Records::tax_regime(&input[..]) } else { Records::rfb(&input[..]) }.max_record_bytes(cap), cap)?;
            }
        }

        #[test]
        fn near_valid_records_read_back_and_rejoin_to_their_input(records in near_valid_records()) {
            let mut input = Vec::new();
            let mut expected = Vec::new();
            for (fields, terminator, empty_lines) in &records {
                let line = 1 + terminators(&input);
                input.extend(rfb_line(fields));
                for _ in 0..=*empty_lines {
                    input.extend(*terminator);
                }
                expected.push((line, fields.clone(), false));
            }
            let got = read_all(Records::rfb(&input[..]), DEFAULT_MAX_RECORD_BYTES)?;
            prop_assert_eq!(&got, &expected);
            // The fields re-joined in the RFB form, with the input's line ends, are the input.
            let mut rejoined = Vec::new();
            for ((_, fields, _), (_, terminator, empty_lines)) in got.iter().zip(&records) {
                rejoined.extend(rfb_line(fields));
                for _ in 0..=*empty_lines {
                    rejoined.extend(*terminator);
                }
            }
            prop_assert_eq!(rejoined, input);
        }

        #[test]
        fn a_member_cut_inside_a_quoted_field_ends_unterminated(
            records in near_valid_records(),
            last in proptest::collection::vec(proptest::collection::vec(dialect_byte(), 0..12), 1..8),
            field in any::<prop::sample::Index>(),
            at in any::<prop::sample::Index>(),
        ) {
            let mut input = Vec::new();
            for (fields, terminator, _) in &records {
                input.extend(rfb_line(fields));
                input.extend(*terminator);
            }
            let whole = read_all(Records::rfb(&input[..]), DEFAULT_MAX_RECORD_BYTES)?;
            // The last record, cut after the opening quote of one of its fields and before its
            // closing quote (a doubled quote is not cut in two: that would close the field).
            let k = field.index(last.len());
            let mut cut = rfb_line(&last[..k]);
            if k > 0 {
                cut.push(b';');
            }
            cut.push(b'"');
            let content = &last[k][..at.index(last[k].len() + 1)];
            for &b in content {
                if b == b'"' {
                    cut.push(b'"');
                }
                cut.push(b);
            }
            input.extend(&cut);
            let got = read_all(Records::rfb(&input[..]), DEFAULT_MAX_RECORD_BYTES)?;
            prop_assert_eq!(&got[..got.len() - 1], &whole[..]);
            let (_, fields, unterminated) = got.last().unwrap();
            prop_assert!(*unterminated);
            prop_assert_eq!(fields.len(), k + 1);
            prop_assert_eq!(&fields[k], &content.to_vec());
        }

        #[test]
        fn a_record_over_the_cap_is_flagged_and_one_within_is_whole(
            len in 900usize..5000,
            cap in prop_oneof![Just(1024usize), Just(2048), Just(4096)],
        ) {
            let mut input = rfb_line(&[vec![b'X'; len]]);
            input.extend(b"\n\"NEXT\"\n");
            let got = read_all(Records::rfb(&input[..]).max_record_bytes(cap), cap)?;
            let mut r = Records::rfb(&input[..]).max_record_bytes(cap);
            prop_assert!(r.advance().unwrap());
            prop_assert_eq!(r.record().over_cap().is_some(), len > cap, "{} bytes, cap {}", len, cap);
            prop_assert_eq!(got.len(), 2);
            prop_assert_eq!(&got[1].1, &vec![b"NEXT".to_vec()]);
            if len <= cap {
                prop_assert_eq!(&got[0].1, &vec![vec![b'X'; len]]);
            }
        }
    }
}
