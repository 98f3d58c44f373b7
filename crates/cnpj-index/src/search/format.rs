//! The search index file, byte by byte (`CNPJSRC8`). Integers are little-endian; a varint is
//! LEB128 (7 bits a byte, the lowest first, the high bit set on every byte but the last).
//!
//! Ordinals number the establishments in CNPJ order. The build stores a table in two halves at
//! once, so the lower half is numbered from 0 and the upper half from [`UPPER`]: no half waits
//! for the other to know where it starts. A position (0..n) in the columns is an ordinal of the
//! lower half, or `lower +` its rank in the upper half.
//!
//! ```text
//! magic       8 bytes   "CNPJSRC8"
//! cnpjs       8 × n     u64 per position: the CNPJ's 12 characters before its check digits
//!                       ([0-9A-Z], 0–9 then A–Z as 10–35) as a base-36 number, which sorts as
//!                       the text does
//! days        1 × n     u8 per position: the day of the month of the opening date, 0 for none
//! ceps        2 × n     u16 per position: the CEP's last four digits, u16::MAX for none
//! partners    10 × m    per partner ordinal, the 10 bytes its `partner_id` encodes
//!                       (`cnpj_model::partner::id_bytes`)
//! bitmaps     …         each table's in key order one after another, the tables in directory
//!                       order
//! directory   …         below
//! checksum    8 bytes   u64: the directory's XXH3-64
//! offset      8 bytes   u64: where the directory starts
//! magic       8 bytes   "CNPJSRC8" again
//! ```
//!
//! Each column holds the lower half's positions, then the upper half's (n = lower + upper); a
//! CNPJ is packed by [`pack`]. Keys are in byte order.
//!
//! Partners (contract §14) have ordinals of their own: the partner identities numbered in the order
//! a partners' search lists them (folded name, then `partner_id`), from 0 to m.
//!
//! The directory: `lower` and `upper` (the halves' sizes), the offsets of the three columns, `m`
//! and the offset of the partners' column, the number of tables, and per table its name's length and bytes, its key count and its first
//! bitmap's offset (0 for none), then per key its text's length and bytes, its bitmap's size (its
//! length in bytes `<< 1`, `| 1` when it is a list) and the XXH3-64 of the bitmap's bytes
//! truncated to its low 32 bits (4 bytes); last, the build id's length and bytes. A bitmap's
//! offset is the one before it plus its length: the directory holds only lengths.
//!
//! A bitmap is roaring's portable format or, where it holds at most 2^20 ordinals and that is at
//! most three quarters as long, a list ([`encode`]): the count of its ordinals (a varint), then
//! per full block of 128 its bit width (a byte) and the block's gaps less one bit-packed by
//! `bitpacking`'s `BitPacker4x` (strictly sorted, from the last ordinal of the block before),
//! then the other ordinals' gaps as varints (from the last block's last ordinal, or from 0), no
//! gap 0 but the first.
//!
//! The tables (a sorted list of keys, a bitmap per key), in file order ([`TABLES`], then the
//! derived ones, which the writer makes from the others once they are written):
//! - equality filters by their stored code: `uf`, `municipio`, `cnae`, `situacao`, and the
//!   company's `porte` and `natureza` carried down to its establishments;
//! - the opening date by `mes` (`YYYY-MM`), `ano` and `decada` (`199`);
//! - the CEP by its first 2 and 4 digits (`cep2`, `cep4`). (A bitmap per day or per full CEP
//!   costs about one 8-byte container header per establishment: the columns cost one and two
//!   bytes.)
//! - the folded words (runs of alphanumeric characters) of `nome` (nome fantasia and razão
//!   social, the company's carried down) and of `bairro`;
//! - phrases per text field (`fantasia`, `razao`, `bairro`): `pares_*` keys every two adjacent
//!   words with the separator between them, and a field's first or last word with the separator
//!   before or after it (`text::phrase_keys`); `repetidos_*` keys the whole folded text of the
//!   fields that hold a word twice;
//! - the secondary activities by code (`cnae2`; any_sector is it and `cnae`), the head office or
//!   branch code but the head office's (`matriz`: a head office is every establishment of no key,
//!   most of them), the contacts served (`contato`: keys `email`, and `telefone` for a
//!   first or second phone number), and the company's options now (`opcao`: keys `simples` and
//!   `mei` where the Simples table says `S`), carried down like its size; a flag's `false` is
//!   every establishment but its key's;
//! - the company's capital, carried down, at three precisions, each key the lowest value of its
//!   range in cents as [`capital_key`] writes it: `capital_ordem` by order of magnitude (one key
//!   per number of digits, and one for every negative amount), `capital_faixa` by the first two
//!   digits (`12` of 12,345.67: 12,000.00 to 12,999.99), and `capital` by the exact amount but
//!   for the lowest of its first two digits (12,000.00: of `capital_faixa`'s key, less the other
//!   amounts of `capital`; most capitals are round). A range of amounts is read from the coarsest
//!   whole ranges inside it, and only its two ends from the finer tables (see `plan`);
//! - over partner ordinals: the words of a partner's folded name (`socio`), its phrase keys and
//!   repeated names (`pares_socio`, `repetidos_socio`), its type (`socio_tipo`), the states of
//!   its companies' establishments (`socio_uf`) and a person's six digits shown (`socio_cpf`);
//! - derived: `antes` and `desde` by decade key (the establishments opened before the decade, and
//!   those opened in it or later, in the decades held: no `antes` for the first), and per field
//!   `repete_*` (one key, empty: every establishment of its `repetidos_*`).
//!
//! The magic names the format's version (`CNPJSRC8`: lists bit-packed; 7 had lists of varint
//! gaps only, 6 no partners, 5 no secondary activities, head office, contacts, tax options or
//! capital); a file of another version is refused, and the store searches by SQL.

use bitpacking::{BitPacker, BitPacker4x};
use roaring::RoaringBitmap;

use crate::lookup::{put_varint, varint};

/// The format's version, the file's first and last 8 bytes.
pub(super) const MAGIC: &[u8; 8] = b"CNPJSRC8";

/// The derived posting tables, by decade key (`201`): the establishments opened before the
/// decade, and those opened in it or later (in the decades held; none before the first).
pub(super) const BEFORE: &str = "antes";
pub(super) const SINCE: &str = "desde";

/// Bytes per partner in the partners' column.
pub(crate) const PARTNER_ID_BYTES: usize = 10;

/// The first ordinal of the upper half of the establishments.
pub const UPPER: u32 = 1 << 31;

/// The posting tables, in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Table {
    Uf,
    Municipio,
    Cnae,
    Situacao,
    Porte,
    Natureza,
    Mes,
    Ano,
    Decada,
    Cep2,
    Cep4,
    Nome,
    Bairro,
    PairsFantasia,
    PairsRazao,
    PairsBairro,
    RepeatsFantasia,
    RepeatsRazao,
    RepeatsBairro,
    Cnae2,
    Matriz,
    Contato,
    Opcao,
    CapitalOrdem,
    CapitalFaixa,
    Capital,
    Socio,
    PairsSocio,
    RepeatsSocio,
    SocioTipo,
    SocioUf,
    SocioCpf,
}

pub(super) const TABLES: [(Table, &str); 32] = [
    (Table::Uf, "uf"),
    (Table::Municipio, "municipio"),
    (Table::Cnae, "cnae"),
    (Table::Situacao, "situacao"),
    (Table::Porte, "porte"),
    (Table::Natureza, "natureza"),
    (Table::Mes, "mes"),
    (Table::Ano, "ano"),
    (Table::Decada, "decada"),
    (Table::Cep2, "cep2"),
    (Table::Cep4, "cep4"),
    (Table::Nome, "nome"),
    (Table::Bairro, "bairro"),
    (Table::PairsFantasia, "pares_fantasia"),
    (Table::PairsRazao, "pares_razao"),
    (Table::PairsBairro, "pares_bairro"),
    (Table::RepeatsFantasia, "repetidos_fantasia"),
    (Table::RepeatsRazao, "repetidos_razao"),
    (Table::RepeatsBairro, "repetidos_bairro"),
    (Table::Cnae2, "cnae2"),
    (Table::Matriz, "matriz"),
    (Table::Contato, "contato"),
    (Table::Opcao, "opcao"),
    (Table::CapitalOrdem, "capital_ordem"),
    (Table::CapitalFaixa, "capital_faixa"),
    (Table::Capital, "capital"),
    (Table::Socio, "socio"),
    (Table::PairsSocio, "pares_socio"),
    (Table::RepeatsSocio, "repetidos_socio"),
    (Table::SocioTipo, "socio_tipo"),
    (Table::SocioUf, "socio_uf"),
    (Table::SocioCpf, "socio_cpf"),
];

/// A yes-or-no fact of an establishment: its table and key hold the establishments of which it is
/// true.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// An email served.
    Email,
    /// A first or second phone number served.
    Phone,
    /// The company opted for the Simples Nacional.
    Simples,
    /// The company opted for the MEI.
    Mei,
}

impl Flag {
    pub(crate) fn table_and_key(self) -> (Table, &'static str) {
        match self {
            Flag::Email => (Table::Contato, "email"),
            Flag::Phone => (Table::Contato, "telefone"),
            Flag::Simples => (Table::Opcao, "simples"),
            Flag::Mei => (Table::Opcao, "mei"),
        }
    }
}

/// The `matriz_filial` code of a head office, the one the `matriz` table does not key.
pub(crate) const HEAD_OFFICE: &str = "1";

/// The capital's tables, coarsest first.
pub(super) const CAPITAL_TABLES: [Table; 3] = [Table::CapitalOrdem, Table::CapitalFaixa, Table::Capital];

/// Amounts are held from `-CAPITAL_LIMIT` to `CAPITAL_LIMIT - 1` cents (DECIMAL(18, 2)).
pub(crate) const CAPITAL_LIMIT: i64 = 1_000_000_000_000_000_000;

/// The key of an amount in cents: `amount + CAPITAL_LIMIT`, 19 digits, so that keys sort as the
/// amounts do.
pub(crate) fn capital_key(cents: i64) -> String {
    format!("{:019}", i128::from(cents) + i128::from(CAPITAL_LIMIT))
}

/// The amount of a key written by [`capital_key`].
pub(super) fn capital_of_key(key: &[u8]) -> Option<i64> {
    let n: i128 = std::str::from_utf8(key).ok()?.parse().ok()?;
    i64::try_from(n - i128::from(CAPITAL_LIMIT)).ok()
}

/// The range `[low, high)` of cents that holds `cents` in the capital's table `table` (one of
/// [`CAPITAL_TABLES`]): every negative amount; an order of magnitude (`[10^(d-1), 10^d)`, 0 on its
/// own); the amounts of the same first two digits; the amount itself.
pub(crate) fn capital_range(table: Table, cents: i64) -> (i64, i64) {
    if cents < 0 && table != Table::Capital {
        return (-CAPITAL_LIMIT, 0);
    }
    let digits = if cents == 0 { 1 } else { cents.ilog10() + 1 };
    match table {
        Table::CapitalOrdem if cents == 0 => (0, 1),
        Table::CapitalOrdem => (10i64.pow(digits - 1), 10i64.pow(digits)),
        Table::CapitalFaixa if digits > 2 => {
            let unit = 10i64.pow(digits - 2);
            (cents - cents % unit, cents - cents % unit + unit)
        }
        _ => (cents, cents + 1),
    }
}

/// A text field searched by phrase: its phrase and repeated-text tables, and the name of its
/// derived table of every establishment whose field holds a word twice (one key, empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Fantasia,
    Razao,
    Bairro,
    /// A partner identity's folded name (over partner ordinals).
    Socio,
}

impl Field {
    pub(super) const ALL: [Field; 4] = [Field::Fantasia, Field::Razao, Field::Bairro, Field::Socio];

    pub(super) fn tables(self) -> (Table, Table, &'static str) {
        match self {
            Field::Fantasia => (Table::PairsFantasia, Table::RepeatsFantasia, "repete_fantasia"),
            Field::Razao => (Table::PairsRazao, Table::RepeatsRazao, "repete_razao"),
            Field::Bairro => (Table::PairsBairro, Table::RepeatsBairro, "repete_bairro"),
            Field::Socio => (Table::PairsSocio, Table::RepeatsSocio, "repete_socio"),
        }
    }

    /// The word table of the field's words.
    pub(super) fn words_table(self) -> Table {
        match self {
            Field::Fantasia | Field::Razao => Table::Nome,
            Field::Bairro => Table::Bairro,
            Field::Socio => Table::Socio,
        }
    }

    pub(super) fn name(table: Table) -> &'static str {
        TABLES.iter().find(|(t, _)| *t == table).map(|(_, name)| *name).expect("every table is named")
    }

    /// The fields a term of a word table is searched in as a phrase.
    pub(super) fn of(table: &str) -> &'static [Field] {
        match table {
            "nome" => &[Field::Fantasia, Field::Razao],
            "socio" => &[Field::Socio],
            _ => &[Field::Bairro],
        }
    }
}

/// Packs the 12 characters of a CNPJ before its check digits (`[0-9A-Z]`) into a number that
/// sorts as the text does.
pub(crate) fn pack(base: &[u8]) -> u64 {
    base.iter().take(12).fold(0u64, |n, &c| {
        let digit = if c.is_ascii_digit() { c - b'0' } else { c.wrapping_sub(b'A').wrapping_add(10) };
        n * 36 + u64::from(digit.min(35))
    })
}

pub(super) fn unpack(mut n: u64) -> String {
    let mut base = [0u8; 12];
    for slot in base.iter_mut().rev() {
        let d = (n % 36) as u8;
        *slot = if d < 10 { b'0' + d } else { b'A' + d - 10 };
        n /= 36;
    }
    let dv = cnpj_model::check_digits(&base).expect("packed characters are valid");
    let mut cnpj = String::from_utf8(base.to_vec()).expect("ASCII");
    cnpj.push(char::from(dv[0]));
    cnpj.push(char::from(dv[1]));
    cnpj
}

/// Bitmaps of at most this many ordinals are tried as a list: reading one back costs a few
/// nanoseconds an ordinal (its bitmap made again), a few milliseconds at most.
const LIST_UP_TO: u64 = 1 << 20;

/// Ordinals of a list's bit-packed block (`bitpacking`'s 4×32-bit lanes).
const BLOCK: usize = BitPacker4x::BLOCK_LEN;

/// Puts `bitmap`'s bytes into `out` and says whether they are a list: roaring's portable format,
/// or, where it is at most three quarters as long, the ordinals as a list of gaps ([`put_list`]).
/// Roaring's arrays cost two bytes an ordinal and its sparse containers about ten, where the
/// gaps of most keys' ordinals take 8 to 12 bits; roaring is kept where its bitmap containers
/// are denser than that, and past [`LIST_UP_TO`], being quicker to read. Measured at 1.0
/// (BENCHMARKS.md, "the search index's lists bit-packed"): the index from 4,582 MB to 4,141
/// (`cnae2` from 342 to 251), where the first lists, of varint gaps, were kept only at half of
/// roaring's bytes.
pub(super) fn encode(bitmap: &RoaringBitmap, out: &mut Vec<u8>) -> bool {
    out.clear();
    if bitmap.len() <= LIST_UP_TO {
        put_list(bitmap, out);
        if out.len() * 4 <= bitmap.serialized_size() * 3 {
            return true;
        }
        out.clear();
    }
    bitmap.serialize_into(&mut *out).expect("a Vec takes every byte");
    false
}

/// Writes `bitmap`'s ordinals as a list: their count and the first ordinal (varints), then every
/// full block of [`BLOCK`] ordinals after it as its bit width (a byte) and its gaps less one
/// bit-packed (`bitpacking`'s strictly sorted codec, each block from the ordinal before it), then
/// the rest as varint gaps. Gaps bit-packed by a library made for posting lists (tantivy's),
/// rather than roaring's two bytes an ordinal.
fn put_list(bitmap: &RoaringBitmap, out: &mut Vec<u8>) {
    let ordinals: Vec<u32> = bitmap.iter().collect();
    put_varint(out, ordinals.len() as u64);
    let Some((&first, after)) = ordinals.split_first() else { return };
    put_varint(out, u64::from(first));
    let packer = BitPacker4x::new();
    let mut previous = first;
    let blocks = after.chunks_exact(BLOCK);
    let rest = blocks.remainder();
    for block in blocks {
        let bits = packer.num_bits_strictly_sorted(Some(previous), block);
        out.push(bits);
        let at = out.len();
        out.resize(at + BitPacker4x::compressed_block_size(bits), 0);
        packer.compress_strictly_sorted(Some(previous), block, &mut out[at..], bits);
        previous = block[BLOCK - 1];
    }
    for &ordinal in rest {
        put_varint(out, u64::from(ordinal - previous));
        previous = ordinal;
    }
}

/// The bitmap of a list written by [`put_list`]; `None` when it is cut short, runs on, or its
/// ordinals do not ascend within `u32`.
pub(super) fn decode_list(bytes: &[u8]) -> Option<RoaringBitmap> {
    let mut pos = 0;
    let count = varint(bytes, &mut pos).filter(|&n| n <= LIST_UP_TO)? as usize;
    let mut ordinals = Vec::with_capacity(count);
    if count > 0 {
        let mut previous = u32::try_from(varint(bytes, &mut pos)?).ok()?;
        ordinals.push(previous);
        let packer = BitPacker4x::new();
        let mut block = [0u32; BLOCK];
        for _ in 0..(count - 1) / BLOCK {
            let bits = *bytes.get(pos).filter(|&&b| b <= 32)?;
            let packed = bytes.get(pos + 1..pos + 1 + BitPacker4x::compressed_block_size(bits))?;
            pos += 1 + packed.len();
            packer.decompress_strictly_sorted(Some(previous), packed, &mut block, bits);
            // Gaps that overflow wrap around: the block no longer ascends.
            if block[0] <= previous || block.windows(2).any(|w| w[0] >= w[1]) {
                return None;
            }
            ordinals.extend_from_slice(&block);
            previous = block[BLOCK - 1];
        }
        for _ in 0..(count - 1) % BLOCK {
            let gap = varint(bytes, &mut pos).filter(|&g| g > 0)?;
            previous = u32::try_from(u64::from(previous) + gap).ok()?;
            ordinals.push(previous);
        }
    }
    if pos != bytes.len() {
        return None;
    }
    RoaringBitmap::from_sorted_iter(ordinals).ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn packing_keeps_text_order(a in "[0-9A-Z]{12}", b in "[0-9A-Z]{12}") {
            prop_assert_eq!(pack(a.as_bytes()).cmp(&pack(b.as_bytes())), a.cmp(&b));
            let dv = cnpj_model::check_digits(a.as_bytes().try_into().unwrap()).unwrap();
            prop_assert_eq!(unpack(pack(a.as_bytes())), format!("{a}{}", String::from_utf8_lossy(&dv)));
        }

        #[test]
        fn a_bitmap_reads_back_as_it_was_written(
            ordinals in proptest::collection::vec(any::<u32>(), 0..1_000),
            run in proptest::option::of((any::<u32>(), 0u32..200_000)),
        ) {
            let mut bitmap: RoaringBitmap = ordinals.into_iter().collect();
            if let Some((start, len)) = run {
                bitmap.insert_range(start..start.saturating_add(len));
            }
            let mut bytes = Vec::new();
            let read = match encode(&bitmap, &mut bytes) {
                true => decode_list(&bytes).unwrap(),
                false => RoaringBitmap::deserialize_from(bytes.as_slice()).unwrap(),
            };
            prop_assert!(bytes.len() <= bitmap.serialized_size());
            // Which form is chosen is its own test; this one checks both forms read back.
            prop_assert_eq!(read, bitmap);
        }
    }

    #[test]
    fn sparse_bitmaps_are_lists_and_dense_ones_roaring() {
        let check = |ordinals: &[u32], list: bool| {
            let mut bytes = Vec::new();
            assert_eq!(encode(&ordinals.iter().copied().collect(), &mut bytes), list, "{} ordinals", ordinals.len());
        };
        check(&[], true);
        check(&[7], true);
        check(&[3, 1 << 20, 1 << 31, u32::MAX], true);
        // Gaps of 200 take 8 bits, where roaring's arrays take 16.
        check(&(0..4_000).map(|i| i * 200).collect::<Vec<_>>(), true);
        check(&(0..4_000).map(|i| i * 100_000).collect::<Vec<_>>(), true);
        // Runs: no bit a gap.
        check(&(0..300_000).collect::<Vec<_>>(), true);
        // Eight of every ten ordinals: gaps of up to 3 take 2 bits, roaring's bitmap containers 1.25.
        check(&(0..300_000).filter(|i| i % 10 > 1).collect::<Vec<_>>(), false);
        // Past LIST_UP_TO, roaring whatever the gaps.
        check(&(0..=LIST_UP_TO as u32).map(|i| i * 1_000).collect::<Vec<_>>(), false);
    }

    #[test]
    fn lists_that_do_not_ascend_within_u32_are_refused() {
        let check = |count: u64, gaps: &[u64], expected: Option<&[u32]>| {
            let mut bytes = Vec::new();
            put_varint(&mut bytes, count);
            gaps.iter().for_each(|&g| put_varint(&mut bytes, g));
            assert_eq!(decode_list(&bytes), expected.map(|o| o.iter().copied().collect()), "{count} {gaps:?}");
        };
        check(3, &[0, 1, 2], Some(&[0, 1, 3]));
        check(2, &[5, 0], None);
        check(2, &[u64::from(u32::MAX), 1], None);
        check(1, &[1 << 40], None);
        // Fewer gaps than counted, and more.
        check(3, &[1, 2], None);
        check(1, &[1, 2], None);
        // A count past LIST_UP_TO is refused before anything is allocated.
        check(u64::MAX, &[], None);
        // A varint cut short.
        assert_eq!(decode_list(&[1, 0x80]), None);
    }

    #[test]
    fn packed_blocks_that_overflow_or_are_cut_short_are_refused() {
        let mut bytes = Vec::new();
        let ordinals: RoaringBitmap = (0..=BLOCK as u32).map(|i| u32::MAX - 1_000 + i * 3).collect();
        assert!(encode(&ordinals, &mut bytes));
        assert_eq!(decode_list(&bytes), Some(ordinals));
        // The count and the first ordinal take 2 and 5 bytes, then the block's bit width.
        assert_eq!(bytes[7], 2, "gaps of 3 less one");
        let mut wide = bytes.clone();
        wide[7] = 33;
        assert_eq!(decode_list(&wide), None);
        assert_eq!(decode_list(&bytes[..bytes.len() - 1]), None);
        // Gaps of the widest kind wrap past u32::MAX.
        let mut wrapping = bytes[..7].to_vec();
        wrapping.push(32);
        wrapping.extend(std::iter::repeat_n(0xff, BitPacker4x::compressed_block_size(32)));
        assert_eq!(decode_list(&wrapping), None);
    }
}
