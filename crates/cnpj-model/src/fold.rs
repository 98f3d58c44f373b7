//! Search folding: both sides of a text filter are folded the same way.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Unicode NFKD, combining marks removed, lower case (`ª` folds to `a`).
pub fn fold(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    text.nfkd().filter(|&c| !is_combining_mark(c)).flat_map(char::to_lowercase).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &str) {
        assert_eq!(fold(input), expected, "{input:?}");
    }

    #[test]
    fn folding() {
        check("PRAÇA DA SÉ", "praca da se");
        check("1ª Rua", "1a rua");
        check("São João", "sao joao");
        check("ABC", "abc");
        check("", "");
    }
}
