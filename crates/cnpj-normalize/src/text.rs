//! Text rules for every text field: Latin-1 decoding, NUL removal, whitespace folding, and CPF masking.

/// Decodes Latin-1 (each byte is the code point of the same value, so decoding never fails and
/// loses nothing), deletes NUL bytes, turns every run of white space into one space and trims.
pub fn clean(raw: &[u8], out: &mut String) {
    out.clear();
    let mut space = false;
    for &b in raw {
        if b == 0 {
            continue;
        }
        let c = char::from(b);
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(c);
    }
}

/// Masks every CPF in a name as `***.456.789-**` (no served name shows one): a run of exactly 11 ASCII digits
/// (not part of a longer run of digits), and the same digits written in groups of 3, 3, 3 and 2
/// with a `.`, `-` or space between groups (`123.456.789-09`, `123456789-09`, `123 456 789 09`).
pub fn mask_cpf_runs(text: &mut String) {
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts_a_run = bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit());
        if let Some((end, digits)) = starts_a_run.then(|| cpf_at(bytes, i)).flatten() {
            found.push((i, end, digits));
            i = end;
            continue;
        }
        i += 1;
    }
    for (start, end, d) in found.into_iter().rev() {
        let masked = format!("***.{}.{}-**", &d[3..6], &d[6..9]);
        text.replace_range(start..end, &masked);
    }
}

/// A CPF starting at `start` (a digit not preceded by one): its end and its 11 digits.
fn cpf_at(bytes: &[u8], start: usize) -> Option<(usize, String)> {
    let mut at = start;
    let mut digits = String::with_capacity(11);
    for (group, len) in [3, 3, 3, 2].into_iter().enumerate() {
        if group > 0 && matches!(bytes.get(at), Some(b'.' | b'-' | b' ')) {
            at += 1;
        }
        for _ in 0..len {
            let b = *bytes.get(at).filter(|b| b.is_ascii_digit())?;
            digits.push(char::from(b));
            at += 1;
        }
    }
    let ends_here = !bytes.get(at).is_some_and(u8::is_ascii_digit);
    ends_here.then_some((at, digits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(raw: &[u8], expected: &str) {
        let mut out = String::from("left over");
        clean(raw, &mut out);
        assert_eq!(out, expected, "raw {raw:?}");
    }

    #[test]
    fn whitespace_runs_collapse_and_ends_trim() {
        check(b"  LOTE  2                   QUADRAF ", "LOTE 2 QUADRAF");
        check(b"SALA\t01\r\nB", "SALA 01 B");
        check(b"A\xa0\xa0B", "A B"); // NBSP is white space
        check(b"   ", "");
        check(b"", "");
    }

    #[test]
    fn nul_bytes_are_deleted_not_spaces() {
        check(b"AB\x00C\x00", "ABC");
        check(b"\x00 A", "A");
    }

    #[test]
    fn latin1_decodes_exactly() {
        check(b"PRA\xc7A DA S\xc9", "PRAÇA DA SÉ");
        check(b"1\xaa RUA", "1ª RUA");
        check(b"RESID?NCIA", "RESID?NCIA");
        check(b"\x8f", "\u{8f}");
    }

    fn check_mask(input: &str, expected: &str) {
        let mut s = input.to_owned();
        mask_cpf_runs(&mut s);
        assert_eq!(s, expected);
    }

    #[test]
    fn eleven_digit_runs_are_masked_anywhere() {
        check_mask("JOSE DA SILVA 12345678909", "JOSE DA SILVA ***.456.789-**");
        check_mask("12345678909 JOSE", "***.456.789-** JOSE");
        check_mask("A 12345678909 B 98765432100", "A ***.456.789-** B ***.654.321-**");
    }

    #[test]
    fn punctuated_and_spaced_cpfs_are_masked() {
        check_mask("JOSE 123.456.789-09", "JOSE ***.456.789-**");
        check_mask("JOSE 123456789-09 ME", "JOSE ***.456.789-** ME");
        check_mask("123 456 789 09 JOSE", "***.456.789-** JOSE");
        check_mask("A 123.456.789.09", "A ***.456.789-**");
        check_mask("LOJA (123.456.789-09) E 98765432100", "LOJA (***.456.789-**) E ***.654.321-**");
        check_mask("SÃO JOSÉ 123.456.789-09", "SÃO JOSÉ ***.456.789-**");
    }

    #[test]
    fn other_digit_runs_stay() {
        check_mask("12.345.678/0001-90 LTDA", "12.345.678/0001-90 LTDA");
        check_mask("123.456.789-0", "123.456.789-0");
        check_mask("123.456.789-091", "123.456.789-091");
        check_mask("1234.456.789-09", "1234.456.789-09");
        check_mask("12.345.678 FULANO DE TAL", "12.345.678 FULANO DE TAL");
        check_mask("LOJA 1234567890", "LOJA 1234567890");
        check_mask("X 123456789012", "X 123456789012");
        check_mask("", "");
    }

    // Fuzz targets of the text rules, on stable: a few hundred cases by default,
    // PROPTEST_CASES=100000 for a long run.

    /// A CPF's shape at `start` (a digit not after a digit): 3, 3, 3 and 2 digits, each group
    /// but the first after at most one `.`, `-` or space, and no digit after.
    fn cpf_shape_at(b: &[u8], start: usize) -> bool {
        let mut at = start;
        for (group, len) in [3, 3, 3, 2].into_iter().enumerate() {
            if group > 0 && matches!(b.get(at), Some(b'.' | b'-' | b' ')) {
                at += 1;
            }
            if b.len() < at + len || !b[at..at + len].iter().all(u8::is_ascii_digit) {
                return false;
            }
            at += len;
        }
        !b.get(at).is_some_and(u8::is_ascii_digit)
    }

    fn unmasked(text: &str) -> Vec<usize> {
        let b = text.as_bytes();
        (0..b.len())
            .filter(|&i| b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) && cpf_shape_at(b, i))
            .collect()
    }

    fn name_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => proptest::char::range('0', '9').prop_map(String::from),
            1 => Just(".".to_owned()),
            1 => Just("-".to_owned()),
            1 => Just(" ".to_owned()),
            1 => Just("123.456.789-09".to_owned()),
            1 => Just("12345678909".to_owned()),
            1 => Just("***.456.789-**".to_owned()),
            1 => "[A-Z ÇÉ*/]{1,4}",
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|p| p.concat())
    }

    proptest! {
        #[test]
        fn clean_text_is_latin1_without_nul_or_runs_of_space_and_is_a_fixed_point(
            raw in proptest::collection::vec(prop_oneof![any::<u8>(), Just(b' '), Just(0u8), Just(0xA0u8), Just(b'\t')], 0..256),
        ) {
            let mut out = String::new();
            clean(&raw, &mut out);
            prop_assert!(out.chars().count() <= raw.len());
            prop_assert!(out.chars().all(|c| u32::from(c) < 0x100 && c != '\0'));
            prop_assert!(out.chars().all(|c| c == ' ' || !c.is_whitespace()), "{:?}", out);
            prop_assert!(!out.starts_with(' ') && !out.ends_with(' ') && !out.contains("  "), "{:?}", out);
            let again: Vec<u8> = out.chars().map(|c| u32::from(c) as u8).collect();
            let mut twice = String::from("left over");
            clean(&again, &mut twice);
            prop_assert_eq!(twice, out);
        }

        #[test]
        fn masking_leaves_no_cpf_and_is_a_fixed_point(text in name_text()) {
            let mut masked = text.clone();
            mask_cpf_runs(&mut masked);
            prop_assert!(unmasked(&masked).is_empty(), "{:?} → {:?}", text, masked);
            // Only CPFs change: with none, the text stays; each one is 14 characters masked.
            if unmasked(&text).is_empty() {
                prop_assert_eq!(&masked, &text);
            }
            let mut again = masked.clone();
            mask_cpf_runs(&mut again);
            prop_assert_eq!(again, masked);
        }
    }
}
