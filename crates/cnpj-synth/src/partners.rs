//! The partners of a synthetic month (Socios): which company a row belongs to and who its partner
//! is, each a pure function of (seed, row index), so that parts are written in parallel and no
//! table of partners is ever kept in memory.
//!
//! The shape the registry's partner pages and company network need (contract §14), at the rates of
//! the real dump (2,000-row extract of 2026: tipo 2 = 1,958, tipo 1 = 41, tipo 3 = 1; no accented
//! partner name):
//! - a company's partners are consecutive rows: a row starts a company's partners with
//!   probability 0.6, so 60 % of the companies with partners have one, 24 % two, 10 % three,
//!   some a dozen (1.67 rows a company: 28 M rows at scale 1.0 are 17 M companies, a quarter);
//! - 20 % of the person rows name a recurring person: one of a pool whose members recur about
//!   2, 3, 5, 10, 25 or 60 times (by class, the classes holding 45, 25, 15, 10, 4 and 1 % of the
//!   pool's rows; every class has a member at any scale, so a person in dozens of companies is
//!   there even in a tiny month); a recurring person always has the same name and the same six
//!   CPF digits, except that 0.5 % of their rows spell the name with its accents (`JOÃO`,
//!   `CONCEIÇÃO`), and 10 % of them bear another recurring person's name with other digits
//!   (homonyms);
//! - every legal-entity partner is a company of the month (the head office's full CNPJ, check
//!   digits valid, and a name that is the same wherever that company is a partner); half are
//!   holdings that recur by the same classes; 20 % of the holdings are themselves companies with
//!   a legal-entity partner, so that chains of three companies (and longer) are real.
//!
//! Entry dates never fall on the 10th: `evolve` dates its entering partners the 10th of the new
//! month, so that a partner entering a company is never a row already there.

use crate::rows::{LAST, Rng, Tables, WORDS, basico, cnpj, record};

/// A row starts a new company's partners with this probability.
const GROUP_START: f64 = 0.6;
/// Partner types by weight, as the real extract has them.
const TIPOS: [(&str, u32); 3] = [("2", 979), ("1", 20), ("3", 1)];
/// Share of the person rows that name a recurring person.
const RECURRING: f64 = 0.2;
/// Share of the legal-entity rows that name a recurring holding.
const RECURRING_HOLDING: f64 = 0.5;
/// Recurrence classes: (rows of a member on average, share of the pool's rows in per-mille).
const CLASSES: [(u64, u32); 6] = [(2, 450), (3, 250), (5, 150), (10, 100), (25, 40), (60, 10)];
/// Share of recurring people named as another recurring person.
const HOMONYM: f64 = 0.1;
/// Share of a recurring person's rows that spell the name with its accents.
const ACCENTED: f64 = 0.005;
/// Share of the legal-entity partners that have a legal-entity partner themselves.
const CHAINED: f64 = 0.2;
/// Rows tried for a chained holding's company before taking any.
const CHAIN_TRIES: u32 = 1000;
/// The company of the `k`-th group start (a bijection of 0..companies when it is prime to them).
const SPREAD: u64 = 2_654_435_761;

/// What each pick is for: each has its own stream per key.
mod salt {
    pub const GROUP: u64 = 101;
    pub const WHO: u64 = 102;
    pub const PERSON: u64 = 103;
    pub const NAME: u64 = 104;
    pub const HOLDING: u64 = 105;
    pub const COMPANY_NAME: u64 = 106;
}

/// Who a partner is: what a Socios row says of the partner.
#[derive(Debug)]
pub(crate) struct Partner {
    pub tipo: &'static str,
    pub nome: Vec<u8>,
    pub documento: String,
    pub faixa: u64,
}

/// The partners of a chain of months, from the month the chain started from.
pub(crate) struct Partners {
    seed: u64,
    /// Socios rows of that month.
    rows: u64,
    /// Its companies.
    companies: u64,
    /// Members of each recurrence class: people, holdings.
    people: [u64; CLASSES.len()],
    holdings: [u64; CLASSES.len()],
}

impl Partners {
    pub(crate) fn new(seed: u64, rows: u64, companies: u64) -> Partners {
        let share = |tipo: &str| {
            let weight = TIPOS.iter().find(|(t, _)| *t == tipo).map_or(0, |(_, w)| *w);
            rows as f64 * f64::from(weight) / f64::from(TIPOS.iter().map(|(_, w)| w).sum::<u32>())
        };
        let members = |pool: f64| {
            CLASSES
                .map(|(size, per_mille)| ((pool * f64::from(per_mille) / 1000.0 / size as f64).round() as u64).max(1))
        };
        Partners {
            seed,
            rows: rows.max(1),
            companies: companies.max(1),
            people: members(share("2") * RECURRING),
            holdings: members(share("1") * RECURRING_HOLDING),
        }
    }

    /// The stream of a key of one or two numbers (on the stack: it is drawn for every row).
    fn rng(&self, salt: u64, key: &[u64]) -> Rng {
        let mut bytes = [0; 16];
        for (i, k) in key.iter().take(2).enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&k.to_le_bytes());
        }
        Rng::keyed(self.seed, salt, &bytes[..key.len().min(2) * 8])
    }

    /// The first row of the company's partners that row `k` is one of.
    fn group_start(&self, k: u64) -> u64 {
        let mut start = k;
        while start > 0 && !self.rng(salt::GROUP, &[start]).chance(GROUP_START) {
            start -= 1;
        }
        start
    }

    /// The company (index) whose partner row `k` is.
    pub(crate) fn company(&self, k: u64) -> u64 {
        self.group_start(k).wrapping_mul(SPREAD) % self.companies
    }

    /// A member of a pool: (class, index).
    fn member(&self, rng: &mut Rng, pool: &[u64; CLASSES.len()]) -> [u64; 2] {
        let mut x = rng.below(1000) as u32;
        let mut class = 0;
        while x >= CLASSES[class].1 && class + 1 < CLASSES.len() {
            x -= CLASSES[class].1;
            class += 1;
        }
        [class as u64, rng.below(pool[class])]
    }

    /// The partner of row `k` (any index: `evolve` draws some) of the company `basico`.
    fn who(&self, k: u64, basico: &str) -> Partner {
        let mut rng = self.rng(salt::WHO, &[k]);
        match rng.weighted(&TIPOS) {
            "1" => {
                // A holding's key is its pool member, an operating company's its row.
                let key = if rng.chance(RECURRING_HOLDING) {
                    self.member(&mut rng, &self.holdings)
                } else {
                    [CLASSES.len() as u64, k]
                };
                self.holding(key, basico)
            }
            "3" => Partner {
                tipo: "3",
                nome: format!("{} HOLDINGS LLC", rng.pick(&LAST)).into_bytes(),
                documento: String::new(),
                faixa: 0,
            },
            _ if rng.chance(RECURRING) => {
                let member = self.member(&mut rng, &self.people);
                let mut person = self.person(member);
                if rng.chance(ACCENTED) {
                    person.nome = accented(&person.nome);
                }
                person
            }
            _ => Partner {
                tipo: "2",
                nome: Tables::name(&mut rng).into_bytes(),
                documento: format!("***{:06}**", rng.below(1_000_000)),
                faixa: 1 + rng.below(9),
            },
        }
    }

    /// A recurring person, drawn from `rng` (for `evolve`'s entering partners).
    pub(crate) fn recurring_person(&self, rng: &mut Rng) -> Partner {
        let member = self.member(rng, &self.people);
        self.person(member)
    }

    /// A recurring holding, drawn from `rng`, as a partner of the company `basico`.
    pub(crate) fn recurring_holding(&self, rng: &mut Rng, basico: &str) -> Partner {
        let member = self.member(rng, &self.holdings);
        self.holding(member, basico)
    }

    /// The recurring person `member`: always the same name (unaccented) and digits.
    fn person(&self, member: [u64; 2]) -> Partner {
        let mut rng = self.rng(salt::PERSON, &member);
        let documento = format!("***{:06}**", rng.below(1_000_000));
        let faixa = 2 + rng.below(8);
        let named = if rng.chance(HOMONYM) { self.member(&mut rng, &self.people) } else { member };
        Partner { tipo: "2", nome: Tables::name(&mut self.rng(salt::NAME, &named)).into_bytes(), documento, faixa }
    }

    /// The legal-entity partner `key` of the company `basico`: a company of the month, by its
    /// head office, never `basico` itself (unless the month has one company).
    fn holding(&self, key: [u64; 2], of: &str) -> Partner {
        let mut rng = self.rng(salt::HOLDING, &key);
        let chained = rng.chance(CHAINED);
        let mut row = rng.below(self.rows);
        for _ in 0..CHAIN_TRIES {
            // The row's type, as `who` draws it first.
            if !chained || self.rng(salt::WHO, &[row]).weighted(&TIPOS) == "1" {
                break;
            }
            row = rng.below(self.rows);
        }
        let mut company = self.company(row);
        if basico(company) == of {
            // The company before it in the rows.
            let start = self.group_start(row);
            company = self.company(if start > 0 { start - 1 } else { self.rows - 1 });
        }
        let base = basico(company);
        let (ordem, dv) = cnpj(&base, 1);
        let mut rng = self.rng(salt::COMPANY_NAME, &[company]);
        Partner {
            tipo: "1",
            nome: format!("{} {} SA", rng.pick(&WORDS), rng.pick(&LAST)).into_bytes(),
            documento: format!("{base}{ordem}{dv}"),
            faixa: 0,
        }
    }

    /// A row of Socios: row `k`'s partner, in the company `company`, the other fields from `rng`.
    pub(crate) fn socio(&self, tables: &Tables, rng: &mut Rng, k: u64, company: u64, out: &mut Vec<u8>) {
        let base = basico(company);
        let partner = self.who(k, &base);
        let qual = rng.weighted(&[("49", 60), ("22", 25), ("16", 6), ("05", 5), ("10", 4)]);
        let entrada = if rng.chance(0.001) { "0".to_owned() } else { entry_date(rng) };
        let pais = if partner.tipo == "3" { rng.pick(&tables.paises).clone() } else { String::new() };
        let (rep, rep_nome, rep_qual) = if rng.chance(0.97) {
            ("***000000**".to_owned(), String::new(), "00")
        } else {
            (format!("***{:06}**", rng.below(1_000_000)), Tables::name(rng), "05")
        };
        record(
            out,
            &[
                base.as_bytes(),
                partner.tipo.as_bytes(),
                &partner.nome,
                partner.documento.as_bytes(),
                qual.as_bytes(),
                entrada.as_bytes(),
                pais.as_bytes(),
                rep.as_bytes(),
                rep_nome.as_bytes(),
                rep_qual.as_bytes(),
                partner.faixa.to_string().as_bytes(),
            ],
        );
    }
}

/// An entry date, never on the 10th of a month (the day `evolve`'s partners enter).
fn entry_date(rng: &mut Rng) -> String {
    let date = rng.date(1970, 2026);
    if date.ends_with("10") { format!("{}11", &date[..6]) } else { date }
}

/// The words of the name lists that are written with accents, and their Latin-1 spelling.
const ACCENTS: [(&str, &[u8]); 18] = [
    ("JOSE", b"JOS\xc9"),
    ("JOAO", b"JO\xc3O"),
    ("ANTONIO", b"ANT\xd4NIO"),
    ("SEBASTIAO", b"SEBASTI\xc3O"),
    ("LUCIA", b"L\xdaCIA"),
    ("FATIMA", b"F\xc1TIMA"),
    ("ANDRE", b"ANDR\xc9"),
    ("MONICA", b"M\xd4NICA"),
    ("BARBARA", b"B\xc1RBARA"),
    ("CECILIA", b"CEC\xcdLIA"),
    ("ARAUJO", b"ARA\xdaJO"),
    ("CONCEICAO", b"CONCEI\xc7\xc3O"),
    ("GONCALVES", b"GON\xc7ALVES"),
    ("SIMOES", b"SIM\xd5ES"),
    ("BRANDAO", b"BRAND\xc3O"),
    ("FALCAO", b"FALC\xc3O"),
    ("ASSUNCAO", b"ASSUN\xc7\xc3O"),
    ("MAGALHAES", b"MAGALH\xc3ES"),
];

/// A name with every word that has accents written with them.
fn accented(name: &[u8]) -> Vec<u8> {
    let words: Vec<&[u8]> = name
        .split(|&b| b == b' ')
        .map(|word| ACCENTS.iter().find(|(plain, _)| plain.as_bytes() == word).map_or(word, |(_, with)| *with))
        .collect();
    words.join(&b' ')
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};
    use std::path::Path;

    use super::*;
    use crate::records::with_records;
    use crate::rows::FIRST;
    use crate::{SynthOptions, generate};

    fn check(name: &str, expected: &[u8]) {
        assert_eq!(accented(name.as_bytes()), expected, "{name}");
    }

    #[test]
    fn accents_are_written_in_latin_1_on_the_words_that_have_them() {
        check("JOAO SILVA CONCEICAO", b"JO\xc3O SILVA CONCEI\xc7\xc3O");
        check("MARIA SANTOS GONCALVES", b"MARIA SANTOS GON\xc7ALVES");
        check("PEDRO LIMA COSTA", b"PEDRO LIMA COSTA");
        for (plain, with) in ACCENTS {
            assert!(FIRST.contains(&plain) != LAST.contains(&plain), "{plain} is in one list");
            assert_eq!(fold(with), plain.as_bytes());
        }
        assert!(FIRST.iter().all(|f| !LAST.contains(f)), "no word is a first name and a surname");
    }

    #[test]
    fn a_company_s_partners_are_consecutive_rows_and_companies_differ() {
        let partners = Partners::new(1, 20_000, 50_000);
        let companies: Vec<u64> = (0..20_000).map(|k| partners.company(k)).collect();
        let mut starts = HashSet::new();
        for k in 0..20_000 {
            let start = partners.group_start(k);
            assert!(start <= k && companies[start as usize..=k as usize].iter().all(|&c| c == companies[k as usize]));
            starts.insert(start);
        }
        let distinct: HashSet<u64> = companies.iter().copied().collect();
        assert_eq!(distinct.len(), starts.len(), "one company per group of rows, each once");
        let per_company = 20_000.0 / starts.len() as f64;
        assert!((1.55..1.8).contains(&per_company), "{per_company} rows a company");
    }

    /// Latin-1 letters with accents as their plain letter.
    fn fold(name: &[u8]) -> Vec<u8> {
        name.iter()
            .map(|&b| match b {
                0xc0..=0xc5 => b'A',
                0xc7 => b'C',
                0xc8..=0xcb => b'E',
                0xcc..=0xcf => b'I',
                0xd2..=0xd6 => b'O',
                0xd9..=0xdc => b'U',
                _ => b,
            })
            .collect()
    }

    /// The companies of a month, and its partner rows as (company, tipo, nome, documento).
    fn month(dir: &Path) -> (HashSet<Vec<u8>>, Vec<[Vec<u8>; 4]>) {
        let (mut companies, mut socios) = (HashSet::new(), Vec::new());
        let mut zips: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        zips.sort();
        for zip in zips.iter().filter(|z| z.starts_with("Empresas") || z.starts_with("Socios")) {
            with_records(&dir.join(zip), |rec| {
                while rec.next()? {
                    match rec.len() {
                        7 => _ = companies.insert(rec.field(0).to_vec()),
                        11 => socios.push([0, 1, 2, 3].map(|i| rec.field(i).to_vec())),
                        _ => {}
                    }
                }
                Ok(())
            })
            .unwrap();
        }
        (companies, socios)
    }

    /// A person's companies and spellings of the name.
    type Seen<'a> = (HashSet<&'a [u8]>, HashSet<&'a [u8]>);

    #[test]
    fn a_month_has_recurring_partners_homonyms_accents_and_chains_of_companies() {
        let dir = tempfile::tempdir().unwrap();
        let (base, again) = (dir.path().join("base"), dir.path().join("again"));
        let opts = SynthOptions { seed: 4, month: "2026-11".into(), ..SynthOptions::new(0.0005, &base) };
        generate(&opts).unwrap();
        generate(&SynthOptions { out: again.clone(), ..opts }).unwrap();
        for part in 0..10 {
            let zip = format!("Socios{part}.zip");
            assert!(std::fs::read(base.join(&zip)).unwrap() == std::fs::read(again.join(&zip)).unwrap(), "{zip}");
        }
        let (companies, socios) = month(&base);
        let share = |tipo: &[u8]| socios.iter().filter(|r| r[1] == tipo).count() as f64 / socios.len() as f64;
        assert!((0.97..0.985).contains(&share(b"2")) && (0.015..0.025).contains(&share(b"1")), "tipos");

        // People: (folded name, six digits) → companies, spellings.
        let mut people: HashMap<(Vec<u8>, Vec<u8>), Seen> = HashMap::new();
        for [company, _, nome, documento] in socios.iter().filter(|r| r[1] == b"2") {
            let entry = people.entry((fold(nome), documento.clone())).or_default();
            entry.0.insert(company);
            entry.1.insert(nome);
        }
        let recurring: Vec<_> = people.iter().filter(|(_, (c, _))| c.len() >= 2).collect();
        let most = recurring.iter().map(|(_, (c, _))| c.len()).max().unwrap_or(0);
        assert!(recurring.len() > 100 && most >= 10, "{} people in 2+ companies, at most {most}", recurring.len());
        let mut digits: HashMap<&[u8], HashSet<&[u8]>> = HashMap::new();
        for ((name, documento), _) in &recurring {
            digits.entry(name).or_default().insert(documento);
        }
        assert!(digits.values().any(|d| d.len() >= 2), "homonyms: a recurring name with other digits");
        let variants = recurring.iter().filter(|(_, (_, spellings))| spellings.len() >= 2).count();
        assert!(variants > 0, "a person written with and without accents");

        // Legal entities: companies of the month, by their head office; chains of three.
        let mut owners: HashMap<&[u8], HashSet<&[u8]>> = HashMap::new();
        let mut names: HashMap<&[u8], HashSet<&[u8]>> = HashMap::new();
        for [company, _, nome, documento] in socios.iter().filter(|r| r[1] == b"1") {
            assert!(cnpj_model::Cnpj::from_bytes(documento).is_ok() && &documento[8..12] == b"0001", "{documento:?}");
            assert!(companies.contains(&documento[..8]) && documento[..8] != company[..], "{documento:?}");
            owners.entry(company).or_default().insert(&documento[..8]);
            names.entry(documento).or_default().insert(nome);
        }
        assert!(names.values().all(|n| n.len() == 1), "a company has one name as a partner");
        assert!(names.len() < owners.values().map(HashSet::len).sum::<usize>(), "holdings recur");
        // A company that is a partner has one itself far more often than by chance (3 %).
        let held: HashSet<&[u8]> = owners.values().flatten().copied().collect();
        let chains = held.iter().filter(|b| owners.contains_key(*b)).count();
        assert!(chains * 8 > held.len(), "{chains} of {} companies that are partners have one", held.len());
        let three = owners.iter().any(|(a, bs)| bs.iter().any(|b| owners.get(b).is_some_and(|cs| !cs.contains(a))));
        assert!(three, "A's partner is B, B's partner is C");
    }
}
