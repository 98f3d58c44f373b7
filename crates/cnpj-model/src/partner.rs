//! A partner's identity (contract §14): who a `Socios` row is, as far as the registry can know it,
//! and its `partner_id`, a short opaque string derived from the identity alone.
//!
//! - A legal entity (`tipo` 1) is its company: `1|` and the first 8 characters of its document
//!   when that is a well-formed CNPJ (the dump holds the whole CNPJ, so the base is taken here,
//!   before §4 masks the served document); else `1|` and its folded name.
//! - A person (`tipo` 2) is the folded name and the six digits the dump shows of the CPF
//!   (`***123456**`): `2|name|123456`. Two people with the same name and the same six digits are
//!   one partner to the registry, and every answer says so.
//! - A foreign partner (`tipo` 3) is the folded name and the country code: `3|name|country`.
//! - Any other `tipo`: `0|name|masked document`.
//!
//! The folded name is the §5 search folding (`cnpj_model::fold`) of the cleaned, masked name.
//! `partner_id` is `p` and the lower-case RFC 4648 base32 (no padding) of the first 10 bytes of
//! the identity's SHA-256: 17 characters. It is fixed and public by design (no key): the same in
//! every build and every month, so that a link to a partner keeps working. It reveals nothing the
//! masked answer does not: what goes into it (the name, the six digits, the country, a company's
//! base) is served anyway, in the partner's own record.

use crate::Cnpj;
use sha2::{Digest, Sha256};

/// The RFC 4648 base32 alphabet, lower-cased.
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// The company a legal-entity partner is: the first 8 characters of its document when that is a
/// well-formed CNPJ (14 characters of `[0-9A-Z]`, valid check digits); `""` otherwise.
pub fn partner_basico(document: &str) -> &str {
    match Cnpj::from_bytes(document.as_bytes()) {
        Ok(_) => &document[..8],
        Err(_) => "",
    }
}

/// The six digits a person's document shows in the dump (`***123456**` → `123456`); `""` when
/// the document is not of that shape.
fn shown_digits(document: &str) -> &str {
    let b = document.as_bytes();
    let shaped = b.len() == 11 && b[3..9].iter().all(u8::is_ascii_digit);
    if shaped { &document[3..9] } else { "" }
}

/// The identity string of a partner (module docs). `key` is, by `tipo`: `1`, the partner's
/// company base ([`partner_basico`], may be empty); `2`, the raw document as the dump has it
/// (`***123456**`); `3`, the country code; any other, the masked document.
pub fn identity(tipo: &str, folded_name: &str, key: &str) -> String {
    match tipo {
        "1" if !key.is_empty() => format!("1|{key}"),
        "1" => format!("1|{folded_name}"),
        "2" => format!("2|{folded_name}|{}", shown_digits(key)),
        "3" => format!("3|{folded_name}|{key}"),
        _ => format!("0|{folded_name}|{key}"),
    }
}

/// The `partner_id` of a partner: `p` and 16 base32 characters of the SHA-256 of its
/// [`identity`].
pub fn partner_id(tipo: &str, folded_name: &str, key: &str) -> String {
    let digest = Sha256::digest(identity(tipo, folded_name, key).as_bytes());
    // 10 bytes are 80 bits: 16 groups of 5, no padding.
    id_of_bytes(digest[..10].try_into().expect("a SHA-256 has 32 bytes"))
}

/// The `partner_id` a company has as a partner of others: its legal-entity identity (`1|` and its
/// base), whatever name a `Socios` row gives it.
pub fn company_partner_id(cnpj_basico: &str) -> String {
    partner_id("1", "", cnpj_basico)
}

/// The `partner_id` of a partner as a company's record serves it (the masked document, the
/// country code) and the company a legal entity is (`partner_basico`, kept beside the record):
/// the same id the normalizer gave the raw row, for the masked form of a person's document shows
/// the six digits its identity holds.
pub fn served_partner_id(tipo: &str, nome: &str, documento: &str, pais: &str, partner_basico: &str) -> String {
    let folded = crate::fold(nome);
    let shown: String = documento.bytes().filter(u8::is_ascii_digit).map(char::from).collect();
    let person = if shown.len() == 6 { format!("***{shown}**") } else { String::new() };
    let key = match tipo {
        "1" => partner_basico,
        "2" => &person,
        "3" => pais,
        _ => documento,
    };
    partner_id(tipo, &folded, key)
}

/// The 10 bytes a `partner_id` encodes (`None` for text that is not one).
pub fn id_bytes(id: &str) -> Option<[u8; 10]> {
    let b = id.as_bytes();
    if b.len() != 17 || b[0] != b'p' {
        return None;
    }
    let mut bits = 0u128;
    for &c in &b[1..] {
        // The alphabet's two runs (a scan of it took a tenth of indexing the partners).
        let value = match c {
            b'a'..=b'z' => c - b'a',
            b'2'..=b'7' => c - b'2' + 26,
            _ => return None,
        };
        bits = bits << 5 | u128::from(value);
    }
    Some(std::array::from_fn(|i| (bits >> (8 * (9 - i))) as u8))
}

/// The `partner_id` of 10 bytes ([`id_bytes`] undone).
pub fn id_of_bytes(bytes: &[u8; 10]) -> String {
    let bits = bytes.iter().fold(0u128, |acc, &b| (acc << 8) | u128::from(b));
    let mut id = String::with_capacity(17);
    id.push('p');
    for group in (0..16).rev() {
        id.push(char::from(BASE32[((bits >> (group * 5)) & 31) as usize]));
    }
    id
}

/// The rule an identity follows, as every answer names it: a company by its base; a person by
/// name and the six digits shown (people alike in both are one partner); a foreign partner by name
/// and country; a legal entity without a well-formed CNPJ by its name alone.
pub fn identity_rule(tipo: &str, partner_basico: &str) -> &'static str {
    match tipo {
        "1" if !partner_basico.is_empty() => "company",
        "1" => "name",
        "3" => "name_and_country",
        _ => "name_and_masked_document",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(input: (&str, &str, &str), expected: &str) {
        let (tipo, name, key) = input;
        assert_eq!(identity(tipo, name, key), expected, "{input:?}");
    }

    #[test]
    fn identities_by_type() {
        check(("1", "holding exemplo sa", "44555666"), "1|44555666");
        check(("1", "holding exemplo sa", ""), "1|holding exemplo sa");
        check(("2", "fulano de tal", "***456789**"), "2|fulano de tal|456789");
        check(("2", "fulano de tal", "12345678909"), "2|fulano de tal|456789");
        check(("2", "fulano de tal", "***4567**"), "2|fulano de tal|");
        check(("2", "fulano de tal", ""), "2|fulano de tal|");
        check(("3", "foreign partner llc", "493"), "3|foreign partner llc|493");
        check(("", "sem tipo", ""), "0|sem tipo|");
        check(("9", "outro", "***.456.789-**"), "0|outro|***.456.789-**");
    }

    proptest! {
        #[test]
        fn an_id_is_its_bytes_in_base32(bytes in proptest::array::uniform10(any::<u8>())) {
            let id = id_of_bytes(&bytes);
            prop_assert_eq!(id_bytes(&id), Some(bytes));
        }
    }

    #[test]
    fn text_that_is_no_id_has_no_bytes() {
        for text in ["", "p", "paaaaaaaaaaaaaaa", "qaaaaaaaaaaaaaaaa", "paaaaaaaaaaaaaaaaa"] {
            assert_eq!(id_bytes(text), None, "{text}");
        }
        // Each side of the alphabet's two runs.
        for c in ["1", "8", "A", "`", "{"] {
            let text = format!("paaaaaaaaaaaaaaa{c}");
            assert_eq!(id_bytes(&text), None, "{text}");
        }
    }

    #[test]
    fn a_company_partner_is_its_base_when_the_cnpj_is_well_formed() {
        assert_eq!(partner_basico("11222333000181"), "11222333");
        assert_eq!(partner_basico("12ABC34501DE35"), "12ABC345", "alphanumeric CNPJ");
        assert_eq!(partner_basico("11222333000182"), "", "wrong check digits");
        assert_eq!(partner_basico("1122233300018"), "");
        assert_eq!(partner_basico("11.222.333/0001-81"), "");
        assert_eq!(partner_basico(""), "");
    }

    #[test]
    fn ids_are_fixed() {
        // The id is public and must never change between builds or releases: these are pinned.
        assert_eq!(partner_id("2", "fulano de tal", "***456789**"), partner_id("2", "fulano de tal", "00045678900"));
        let id = partner_id("1", "holding exemplo sa", "44555666");
        assert_eq!(id, partner_id("1", "other name sa", "44555666"), "a company is its base, whatever its name");
        assert_eq!(id, format!("p{}", base32_of_sha256("1|44555666")));
        assert_eq!(partner_id("1", "x", "44555666"), "pjnrquzm2ntgqdkaa");
        assert_eq!(company_partner_id("44555666"), "pjnrquzm2ntgqdkaa");
    }

    /// The reference: a plain bit-by-bit base32 of the digest's first 10 bytes.
    fn base32_of_sha256(identity: &str) -> String {
        let digest = Sha256::digest(identity.as_bytes());
        let bits: Vec<u8> = digest[..10].iter().flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1)).collect();
        bits.chunks(5).map(|c| char::from(BASE32[c.iter().fold(0usize, |a, &b| a * 2 + usize::from(b))])).collect()
    }

    proptest! {
        #[test]
        fn ids_hide_their_identity(
            tipo in prop_oneof![Just("1"), Just("2"), Just("3"), Just(""), Just("7")],
            name in "[a-z ]{0,30}",
            digits in "[0-9]{6}",
            other in "[a-z ]{0,30}",
        ) {
            let document = format!("***{digits}**");
            let id = partner_id(tipo, &name, &document);
            prop_assert_eq!(id.len(), 17);
            prop_assert!(id.starts_with('p'));
            prop_assert!(id[1..].bytes().all(|b| BASE32.contains(&b)), "{}", id);
            prop_assert_eq!(&id[1..], base32_of_sha256(&identity(tipo, &name, &document)));
            // The same identity, the same id; another name, another id (but for a company, which is
            // its base).
            prop_assert_eq!(&id, &partner_id(tipo, &name, &document));
            if other != name && tipo != "1" {
                prop_assert_ne!(&id, &partner_id(tipo, &other, &document));
            }
            // Nothing of the person shows: not the six digits, not a word of the name (of six letters
            // or more: a shorter one may come out of a hash by chance).
            prop_assert!(!id.contains(&digits), "{}", id);
            for word in name.split(' ').filter(|w| w.len() >= 6) {
                prop_assert!(!id.contains(word), "{} in {}", word, id);
            }
        }
    }
}
