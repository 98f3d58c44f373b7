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

/// Masks every run of exactly 11 ASCII digits (a CPF) as `***.456.789-**` (contract §4).
pub fn mask_cpf_runs(text: &mut String) {
    let bytes = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i - start == 11 {
                runs.push(start);
            }
        } else {
            i += 1;
        }
    }
    for start in runs.into_iter().rev() {
        let digits = &text[start..start + 11];
        let masked = format!("***.{}.{}-**", &digits[3..6], &digits[6..9]);
        text.replace_range(start..start + 11, &masked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn other_digit_runs_stay() {
        check_mask("12.345.678 FULANO DE TAL", "12.345.678 FULANO DE TAL");
        check_mask("LOJA 1234567890", "LOJA 1234567890");
        check_mask("X 123456789012", "X 123456789012");
        check_mask("", "");
    }
}
