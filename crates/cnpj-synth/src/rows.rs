//! The rows of the main tables: values drawn from the real lookup codes and from the
//! distributions of the real dumps, gotchas planted at realistic rates.

use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;

use crate::{FileSummary, Table};

/// SplitMix64: small, fast, and good enough for synthetic data.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64, table: Table, part: u32) -> Rng {
        Rng(seed
            ^ (table as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ u64::from(part).wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    /// A stream for one key (a CNPJ, a company, a record): the same for the same seed, salt and
    /// key, wherever the key is met.
    pub(crate) fn keyed(seed: u64, salt: u64, key: &[u8]) -> Rng {
        let mut rng = Rng(seed ^ salt.wrapping_mul(0xD1B5_4A32_D192_ED03));
        for chunk in key.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            rng.0 = rng.next() ^ u64::from_le_bytes(word);
        }
        rng.0 = rng.next() ^ key.len() as u64;
        rng
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// A code by weight (`(code, weight)`), weights summing to any total.
    pub(crate) fn weighted<'a>(&mut self, items: &[(&'a str, u32)]) -> &'a str {
        let total: u32 = items.iter().map(|(_, w)| w).sum();
        let mut x = self.below(u64::from(total)) as u32;
        for (code, w) in items {
            if x < *w {
                return code;
            }
            x -= w;
        }
        items[0].0
    }

    pub(crate) fn date(&mut self, from_year: u32, to_year: u32) -> String {
        let y = from_year + self.below(u64::from(to_year - from_year + 1)) as u32;
        format!("{y}{:02}{:02}", 1 + self.below(12), 1 + self.below(28))
    }
}

/// First names and surnames: no word is in both lists, so that a name of two first names (the
/// partners `evolve` makes enter) is none of the names drawn as a first name and two surnames.
pub(crate) const FIRST: [&str; 24] = [
    "JOSE",
    "MARIA",
    "ANA",
    "JOAO",
    "ANTONIO",
    "FRANCISCO",
    "CARLOS",
    "PAULO",
    "PEDRO",
    "LUCAS",
    "LUIZ",
    "MARCOS",
    "LUIS",
    "GABRIEL",
    "RAFAEL",
    "FERNANDA",
    "SEBASTIAO",
    "LUCIA",
    "FATIMA",
    "ANDRE",
    "MONICA",
    "VITOR",
    "BARBARA",
    "CECILIA",
];
pub(crate) const LAST: [&str; 24] = [
    "SILVA",
    "SANTOS",
    "OLIVEIRA",
    "SOUZA",
    "RODRIGUES",
    "FERREIRA",
    "ALVES",
    "PEREIRA",
    "LIMA",
    "GOMES",
    "COSTA",
    "RIBEIRO",
    "ARAUJO",
    "CONCEICAO",
    "GONCALVES",
    "SIMOES",
    "BRANDAO",
    "FALCAO",
    "ASSUNCAO",
    "MAGALHAES",
    "MARTINS",
    "CARVALHO",
    "ROCHA",
    "BARBOSA",
];
pub(crate) const WORDS: [&str; 14] = [
    "COMERCIO",
    "SERVICOS",
    "TRANSPORTES",
    "CONSTRUTORA",
    "DISTRIBUIDORA",
    "MERCADO",
    "AUTO PECAS",
    "CONFECCOES",
    "RESTAURANTE",
    "PADARIA",
    "INFORMATICA",
    "CONSULTORIA",
    "FARMACIA",
    "BAZAR",
];
pub(crate) const STREETS: [&str; 10] = [
    "DAS FLORES",
    "SETE DE SETEMBRO",
    "BRASIL",
    "SAO JOAO",
    "DOM PEDRO II",
    "PAULISTA",
    "XV DE NOVEMBRO",
    "DAS PALMEIRAS",
    "SANTOS DUMONT",
    "TIRADENTES",
];
const BAIRROS: [&[u8]; 8] = [
    b"CENTRO",
    b"JARDIM AMERICA",
    b"VILA NOVA",
    b"S\xc3O JOS\xc9",
    b"BELA VISTA",
    b"COLEGIALES",
    b"BOA VISTA",
    b"SANTA CRUZ",
];

/// The real lookup codes that synthetic rows draw from.
pub struct Tables {
    pub(crate) cnaes: Vec<String>,
    naturezas: Vec<String>,
    pub(crate) paises: Vec<String>,
    /// (RFB code, UF).
    pub(crate) municipios: Vec<(String, String)>,
}

fn codes(csv: &[u8]) -> Vec<String> {
    csv.split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b';').next())
        .map(|f| String::from_utf8_lossy(f).trim_matches('"').to_owned())
        .filter(|c| !c.is_empty())
        .collect()
}

pub(crate) fn basico(i: u64) -> String {
    format!("{:08}", (i.wrapping_mul(7919) + 12_345) % 100_000_000)
}

pub(crate) fn cnpj(basico: &str, ordem: u64) -> (String, String) {
    let ordem = format!("{ordem:04}");
    let base: [u8; 12] = format!("{basico}{ordem}").as_bytes().try_into().expect("12 characters");
    let dv = cnpj_model::check_digits(&base).expect("digits");
    (ordem, String::from_utf8_lossy(&dv).into_owned())
}

/// One record: every field quoted, inner quotes doubled, `;` between, LF at the end.
pub(crate) fn record(out: &mut Vec<u8>, fields: &[&[u8]]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b';');
        }
        out.push(b'"');
        for &b in *f {
            if b == b'"' {
                out.push(b'"');
            }
            out.push(b);
        }
        out.push(b'"');
    }
    out.push(b'\n');
}

/// Rare gotchas, per record.
const REJECT_RATE: f64 = 1e-6;
const DUPLICATE_RATE: f64 = 1e-6;

/// Writes the records `range` of a part to `w`, each written by `row` (from the part's
/// random stream and the record's index), with the gotchas of every part planted.
pub(crate) fn write_part(
    mut rng: Rng,
    range: Range<u64>,
    w: &mut dyn Write,
    summary: &mut FileSummary,
    row: impl Fn(&mut Rng, u64, &mut Vec<u8>),
) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(1024);
    let mut buf = Vec::with_capacity(1 << 20);
    let first = range.start;
    for i in range {
        line.clear();
        row(&mut rng, i, &mut line);
        buf.extend_from_slice(&line);
        summary.records += 1;
        // One of each at the start of every part, then at realistic rates.
        if i == first || rng.chance(DUPLICATE_RATE) {
            buf.extend_from_slice(&line);
            summary.records += 1;
            summary.planted_duplicates += 1;
        }
        if i == first || rng.chance(REJECT_RATE) {
            let short: Vec<&[u8]> = vec![b"99999999", b"REGISTRO TRUNCADO"];
            record(&mut buf, &short);
            summary.records += 1;
            summary.planted_rejects += 1;
        }
        if buf.len() >= 1 << 20 {
            summary.csv_bytes += buf.len() as u64;
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    summary.csv_bytes += buf.len() as u64;
    w.write_all(&buf)
}

impl Tables {
    pub fn from_lookups(lookups: &[(&str, &[u8])]) -> Tables {
        let get = |name: &str| lookups.iter().find(|(z, _)| *z == name).map_or(Vec::new(), |(_, b)| codes(b));
        let states: HashMap<&str, &str> = include_str!("../../../data/municipios-rfb-ibge.csv")
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                Some((*f.first()?, *f.last()?))
            })
            .collect();
        let municipios = get("Municipios.zip")
            .into_iter()
            .filter(|c| c != "9707")
            .filter_map(|c| states.get(c.as_str()).map(|uf| (c.clone(), (*uf).to_owned())))
            .collect();
        Tables {
            cnaes: get("Cnaes.zip").into_iter().filter(|c| c != "8888888").collect(),
            naturezas: get("Naturezas.zip"),
            paises: get("Paises.zip"),
            municipios,
        }
    }

    pub(crate) fn name(rng: &mut Rng) -> String {
        format!("{} {} {}", rng.pick(&FIRST), rng.pick(&LAST), rng.pick(&LAST))
    }

    pub(crate) fn empresa(&self, rng: &mut Rng, i: u64, out: &mut Vec<u8>) {
        let base = basico(i);
        let natureza =
            rng.weighted(&[("2062", 45), ("2135", 30), ("3999", 5), ("2305", 3), ("2240", 3), ("2054", 2), ("", 12)]);
        let natureza = if natureza.is_empty() { rng.pick(&self.naturezas).as_str() } else { natureza };
        let mut razao = if natureza == "2135" {
            let cpf = format!("{:011}", rng.below(100_000_000_000));
            if rng.chance(0.6) {
                format!("{} {cpf}", Self::name(rng))
            } else {
                format!("{}.{}.{} {}", &base[..2], &base[2..5], &base[5..], Self::name(rng))
            }
        } else {
            format!("{} {} LTDA", rng.pick(&WORDS), rng.pick(&LAST))
        }
        .into_bytes();
        if rng.chance(0.03) {
            razao.extend_from_slice(b"  ME");
        }
        if rng.chance(1e-6) {
            razao.insert(1, 0);
        }
        let qual = rng.weighted(&[("49", 60), ("50", 25), ("16", 5), ("05", 5), ("65", 5)]);
        let qual = if rng.chance(1e-5) { "36" } else { qual };
        let capital = if rng.chance(2e-6) {
            "999999999999,00".to_owned()
        } else {
            format!("{},00", 10u64.pow(rng.below(7) as u32) * (1 + rng.below(9)))
        };
        let porte = rng.weighted(&[("01", 7900), ("05", 1800), ("03", 299), ("", 1)]);
        let ente: &[u8] = if natureza.starts_with('1') { b"SAO PAULO - SP" } else { b"" };
        record(
            out,
            &[
                base.as_bytes(),
                &razao,
                natureza.as_bytes(),
                qual.as_bytes(),
                capital.as_bytes(),
                porte.as_bytes(),
                ente,
            ],
        );
    }

    /// A row of Estabelecimentos. A row generator whose length is its list of fields: each drawn
    /// in turn (the order of the draws is part of the output), so it stays one function.
    pub(crate) fn estabelecimento(&self, rng: &mut Rng, j: u64, empresas: u64, out: &mut Vec<u8>) {
        let base = basico(j % empresas);
        let (ordem, dv) = cnpj(&base, j / empresas + 1);
        let matriz = if (ordem == "0001") != rng.chance(0.002) { "1" } else { "2" };
        let fantasia =
            if rng.chance(0.64) { String::new() } else { format!("{} {}", rng.pick(&WORDS), rng.pick(&LAST)) };
        let situacao = rng.weighted(&[("08", 4500), ("02", 4300), ("04", 1100), ("03", 30), ("01", 10)]);
        let situacao = if rng.chance(1e-5) { situacao.trim_start_matches('0') } else { situacao };
        let data_situacao = if rng.chance(0.0025) { "0".to_owned() } else { rng.date(1990, 2026) };
        let motivo = match situacao {
            "02" | "2" => "00",
            _ if rng.chance(0.0003) => "32",
            _ => rng.weighted(&[("01", 60), ("63", 20), ("71", 15), ("80", 5)]),
        };
        let abroad = rng.chance(0.0025);
        let (uf, municipio) = if abroad {
            ("EX".to_owned(), "9707".to_owned())
        } else {
            let (code, uf) = rng.pick(&self.municipios);
            (uf.clone(), code.clone())
        };
        let pais = if abroad {
            rng.pick(&self.paises).clone()
        } else if rng.chance(0.025) {
            "105".to_owned()
        } else if rng.chance(2e-5) {
            "150".to_owned()
        } else {
            String::new()
        };
        let cidade = if abroad { "BUENOS AIRES" } else { "" };
        let inicio = if rng.chance(1e-5) { "2021221".to_owned() } else { rng.date(1950, 2026) };
        let cnae = rng.pick(&self.cnaes).clone();
        let secundarias = if rng.chance(0.5) {
            String::new()
        } else {
            let n = if rng.chance(0.001) { 97 } else { 1 + rng.below(8) };
            (0..n).map(|_| rng.pick(&self.cnaes).clone()).collect::<Vec<_>>().join(",")
        };
        let tipo: &[u8] = match rng.weighted(&[
            ("RUA", 60),
            ("AVENIDA", 20),
            ("ESTRADA", 5),
            ("TRAVESSA", 5),
            ("PRACA", 5),
            ("SITIO", 4),
            ("", 1),
        ]) {
            "PRACA" => b"PRA\xc7A",
            "SITIO" => b"S\xcdTIO",
            other => other.as_bytes(),
        };
        let numero = match rng.below(100) {
            0..=4 => "S/N".to_owned(),
            5..=8 => "SN".to_owned(),
            _ => (1 + rng.below(5000)).to_string(),
        };
        let complemento: Vec<u8> = match rng.below(1000) {
            0..=4 => b"EDIF HORTO;BLOCO 2;ANDAR 8".to_vec(),
            5..=104 => format!("SALA  {:02}", rng.below(99)).into_bytes(),
            105..=399 => format!("LOJA {}", rng.below(50)).into_bytes(),
            _ => Vec::new(),
        };
        let cep = match rng.below(10_000) {
            0..=9 => format!("{:07}", 1_000_000 + rng.below(8_999_999)),
            10..=14 => "0".to_owned(),
            _ => format!("{:08}", 10_000_000 + rng.below(89_999_999)),
        };
        let ddd = match rng.below(100) {
            0..=9 => "0".to_owned(),
            10 => format!("0{}", 11 + rng.below(88)),
            _ => (11 + rng.below(88)).to_string(),
        };
        let telefone = if ddd == "0" { "0".to_owned() } else { format!("{}", 20_000_000 + rng.below(79_999_999)) };
        let email = match rng.below(100) {
            0..=29 => String::new(),
            30..=84 => format!("CONTATO{}@EMPRESA.COM.BR", rng.below(1000)),
            _ => format!("contato{}@empresa.com.br", rng.below(1000)),
        };
        let (especial, data_especial) =
            if rng.chance(0.001) { ("RECUPERACAO JUDICIAL", rng.date(2015, 2026)) } else { ("", String::new()) };
        let logradouro = rng.pick(&STREETS);
        let bairro = rng.pick(&BAIRROS);
        record(
            out,
            &[
                base.as_bytes(),
                ordem.as_bytes(),
                dv.as_bytes(),
                matriz.as_bytes(),
                fantasia.as_bytes(),
                situacao.as_bytes(),
                data_situacao.as_bytes(),
                motivo.as_bytes(),
                cidade.as_bytes(),
                pais.as_bytes(),
                inicio.as_bytes(),
                cnae.as_bytes(),
                secundarias.as_bytes(),
                tipo,
                logradouro.as_bytes(),
                numero.as_bytes(),
                &complemento,
                bairro,
                cep.as_bytes(),
                uf.as_bytes(),
                municipio.as_bytes(),
                ddd.as_bytes(),
                telefone.as_bytes(),
                b"",
                b"",
                b"",
                b"",
                email.as_bytes(),
                especial.as_bytes(),
                data_especial.as_bytes(),
            ],
        );
    }

    pub(crate) fn simples(&self, rng: &mut Rng, i: u64, out: &mut Vec<u8>) {
        let base = basico(i);
        let simples = if rng.chance(0.53) { "S" } else { "N" };
        let mei = if rng.chance(0.37) { "S" } else { "N" };
        let date = |rng: &mut Rng, yes: bool| if yes { rng.date(2007, 2026) } else { "00000000".to_owned() };
        let excluded = simples == "N" && rng.chance(0.3);
        let (opcao, exclusao) = (date(rng, simples == "S"), date(rng, excluded));
        let (opcao_mei, exclusao_mei) = (date(rng, mei == "S"), "00000000".to_owned());
        record(
            out,
            &[
                base.as_bytes(),
                simples.as_bytes(),
                opcao.as_bytes(),
                exclusao.as_bytes(),
                mei.as_bytes(),
                opcao_mei.as_bytes(),
                exclusao_mei.as_bytes(),
            ],
        );
    }
}
