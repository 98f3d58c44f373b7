//! How the company pages write values for people, in the page's language: a CNPJ with its mask,
//! dates, months, counts and money as each language writes them, a CEP with its hyphen.

use crate::Lang;

/// `11222333000181` → `11.222.333/0001-81`; anything but 14 characters as it is.
pub fn cnpj(raw: &str) -> String {
    if raw.len() != 14 || !raw.is_ascii() {
        return raw.to_owned();
    }
    format!("{}.{}.{}/{}-{}", &raw[..2], &raw[2..5], &raw[5..8], &raw[8..12], &raw[12..])
}

/// `01310100` → `01310-100`; anything but 8 characters as it is.
pub fn cep(raw: &str) -> String {
    if raw.len() != 8 || !raw.is_ascii() {
        return raw.to_owned();
    }
    format!("{}-{}", &raw[..5], &raw[5..])
}

/// `YYYY-MM-DD` as the language writes a date (`31/12/2020`, `2020-12-31`); anything else as it is.
pub fn date(lang: Lang, raw: &str) -> String {
    let parts: Vec<&str> = raw.split('-').collect();
    match (lang, parts.as_slice()) {
        (Lang::PtBr | Lang::Es, [y, m, d]) if raw.len() == 10 => format!("{d}/{m}/{y}"),
        _ => raw.to_owned(),
    }
}

/// `YYYY-MM` as the language writes a month (`12/2026`, `2026-12`).
pub fn month(lang: Lang, raw: &str) -> String {
    match (lang, raw.split_once('-')) {
        (Lang::PtBr | Lang::Es, Some((y, m))) if raw.len() == 7 => format!("{m}/{y}"),
        _ => raw.to_owned(),
    }
}

/// The thousands separator of the language.
fn thousands(lang: Lang) -> char {
    match lang {
        Lang::En => ',',
        Lang::PtBr | Lang::Es => '.',
    }
}

/// Digits grouped by three with `separator`.
fn grouped(digits: &str, separator: char) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(separator);
        }
        out.push(c);
    }
    out
}

/// A count as the language writes it (`1.234.567`, `1,234,567`).
pub fn count(lang: Lang, n: u64) -> String {
    grouped(&n.to_string(), thousands(lang))
}

/// A served capital (`1061004829.23`) in reais as the language writes them
/// (`R$ 1.061.004.829,23`, `R$ 1,061,004,829.23`); anything else as it is.
pub fn money(lang: Lang, raw: &str) -> String {
    let Some((units, cents)) = raw.split_once('.') else { return raw.to_owned() };
    if units.is_empty() || !units.bytes().all(|b| b.is_ascii_digit()) || cents.len() != 2 {
        return raw.to_owned();
    }
    let decimal = if lang == Lang::En { '.' } else { ',' };
    format!("R$ {}{decimal}{cents}", grouped(units, thousands(lang)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(got: String, expected: &str) {
        assert_eq!(got, expected);
    }

    #[test]
    fn values_as_each_language_writes_them() {
        check(cnpj("11222333000181"), "11.222.333/0001-81");
        check(cnpj("12ABC34501DE35"), "12.ABC.345/01DE-35");
        check(cnpj("11222333"), "11222333");
        check(cep("01310100"), "01310-100");
        check(cep(""), "");
        check(date(Lang::PtBr, "2020-12-31"), "31/12/2020");
        check(date(Lang::En, "2020-12-31"), "2020-12-31");
        check(month(Lang::Es, "2026-12"), "12/2026");
        check(month(Lang::En, "2026-12"), "2026-12");
        check(count(Lang::PtBr, 1_234_567), "1.234.567");
        check(count(Lang::En, 1_234_567), "1,234,567");
        check(count(Lang::En, 999), "999");
        check(money(Lang::PtBr, "1061004829.23"), "R$ 1.061.004.829,23");
        check(money(Lang::En, "100.00"), "R$ 100.00");
        check(money(Lang::Es, "1000.5"), "1000.5");
    }
}
