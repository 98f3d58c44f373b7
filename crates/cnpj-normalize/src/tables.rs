//! One function per file kind: a raw record in, a normalized row out, or a [`Reject`].

use std::fmt;

use cnpj_model::rows::{EmpresaRow, EstabelecimentoRow, Fields, LookupRow, RegimeRow, SimplesRow, SocioRow};
use cnpj_model::{Cnpj, CnpjQuery, FileKind, InvalidCnpj, fold};

use crate::fields::{
    CapitalIssue, capital, cep, date, ddd, email, logradouro, mask_company_document, mask_person_document, pad_code,
    telefone,
};
use crate::text::{clean, mask_cpf_runs};
use cnpj_model::partner::{partner_basico, partner_id};

/// Why a record is not loaded. The record itself is kept verbatim in the rejects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reject {
    FieldCount {
        expected: usize,
        found: usize,
    },
    /// Longer than the reader keeps (`--max-record-bytes`): `bytes` of content, over `cap`.
    TooLong {
        bytes: u64,
        cap: u64,
    },
    /// The member ended inside the record (in a quoted field, or after a delimiter): the record
    /// was cut short.
    Unterminated,
    Cnpj {
        value: String,
        error: InvalidCnpj,
    },
    CnpjBasico {
        value: String,
    },
    /// A municipality code that is not one: the RFB's are 1 to 4 digits.
    Municipio {
        value: String,
    },
    Year {
        value: String,
    },
    Regime {
        value: String,
    },
}

impl fmt::Display for Reject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reject::FieldCount { expected, found } => {
                write!(f, "expected {expected} fields, found {found}")
            }
            Reject::TooLong { bytes, cap } => {
                write!(f, "record of {bytes} bytes is over the {cap}-byte cap (kept: its beginning)")
            }
            Reject::Unterminated => write!(f, "the member ends inside this record (cut short)"),
            Reject::Cnpj { value, error } => write!(f, "invalid CNPJ {value:?}: {error}"),
            Reject::CnpjBasico { value } => {
                write!(f, "invalid cnpj_basico {value:?}: 8 characters of [0-9A-Z] expected")
            }
            Reject::Municipio { value } => write!(f, "invalid municipio {value:?}: a code of 1 to 4 digits expected"),
            Reject::Year { value } => write!(f, "invalid year {value:?}"),
            Reject::Regime { value } => write!(f, "unknown forma_de_tributacao {value:?}"),
        }
    }
}

/// Column positions of a tax-regime file, read from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaxRegimeColumns {
    ano: usize,
    cnpj: usize,
    forma: usize,
}

impl TaxRegimeColumns {
    /// Finds `ano`, `cnpj` and `forma_de_tributacao` in a header (lower-cased names).
    pub fn from_header(header: &[String]) -> Result<TaxRegimeColumns, String> {
        let find = |name: &str| {
            header.iter().position(|h| h == name).ok_or_else(|| format!("header has no column {name:?}: {header:?}"))
        };
        Ok(TaxRegimeColumns { ano: find("ano")?, cnpj: find("cnpj")?, forma: find("forma_de_tributacao")? })
    }
}

/// A 64-bit hash of a record's raw content, to tell duplicates that differ from the winner.
pub fn record_hash(fields: &(impl Fields + ?Sized)) -> i64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for i in 0..fields.count() {
        h.update(fields.field(i));
        h.update(&[0xFF]);
    }
    h.digest() as i64
}

/// Normalizes records of every kind, with scratch space reused between records.
#[derive(Debug, Default)]
pub struct Normalizer {
    s: String,
    t: String,
    capital_issue: Option<(CapitalIssue, String)>,
}

impl Normalizer {
    fn text(&mut self, rec: &(impl Fields + ?Sized), i: usize) -> &str {
        clean(rec.field(i), &mut self.s);
        &self.s
    }

    /// A code field into `out` (see [`pad_code`]).
    fn code(rec: &(impl Fields + ?Sized), i: usize, width: usize, out: &mut String) {
        clean(rec.field(i), out);
        pad_code(out, width);
    }

    fn date(&mut self, rec: &(impl Fields + ?Sized), i: usize) -> Option<i32> {
        date(self.text(rec, i))
    }

    fn fields(rec: &(impl Fields + ?Sized), kind: FileKind) -> Result<(), Reject> {
        Self::whole(rec)?;
        let expected = kind.field_count().expect("RFB kinds have a fixed field count");
        match rec.count() {
            n if n == expected => Ok(()),
            found => Err(Reject::FieldCount { expected, found }),
        }
    }

    /// A record cut at the reader's cap, or by the end of its member, is a reject, whatever its
    /// kind.
    fn whole(rec: &(impl Fields + ?Sized)) -> Result<(), Reject> {
        match rec.over_cap() {
            Some((bytes, cap)) => Err(Reject::TooLong { bytes, cap }),
            None if rec.unterminated() => Err(Reject::Unterminated),
            None => Ok(()),
        }
    }

    /// The capital of the last company normalized, when it was not empty and could not be
    /// loaded (the row is, with a null capital): why, and the value as it stood.
    pub fn take_capital_issue(&mut self) -> Option<(CapitalIssue, String)> {
        self.capital_issue.take()
    }

    /// A CNPJ part: cleaned, upper-cased, numeric values left-padded to `width`.
    fn part(&mut self, rec: &(impl Fields + ?Sized), i: usize, width: usize) -> String {
        let mut part = self.text(rec, i).to_ascii_uppercase();
        pad_code(&mut part, width);
        part
    }

    fn basico(&mut self, rec: &(impl Fields + ?Sized), i: usize) -> Result<String, Reject> {
        let b = self.part(rec, i, 8);
        if b.len() == 8 && b.bytes().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()) {
            Ok(b)
        } else {
            Err(Reject::CnpjBasico { value: b })
        }
    }

    pub fn empresa(&mut self, rec: &(impl Fields + ?Sized), out: &mut EmpresaRow) -> Result<(), Reject> {
        Self::fields(rec, FileKind::Empresas)?;
        out.cnpj_basico = self.basico(rec, 0)?;
        clean(rec.field(1), &mut out.razao_social);
        mask_cpf_runs(&mut out.razao_social);
        out.razao_social_fold = fold(&out.razao_social);
        Self::code(rec, 2, 4, &mut out.natureza_juridica);
        Self::code(rec, 3, 2, &mut out.qualificacao_responsavel);
        out.capital_social = match capital(self.text(rec, 4)) {
            Ok(value) => value,
            Err(issue) => {
                self.capital_issue = Some((issue, self.s.clone()));
                None
            }
        };
        Self::code(rec, 5, 2, &mut out.porte_empresa);
        if !matches!(out.porte_empresa.as_str(), "00" | "01" | "03" | "05") {
            out.porte_empresa.replace_range(.., "00");
        }
        clean(rec.field(6), &mut out.ente_federativo_responsavel);
        Ok(())
    }

    pub fn estabelecimento(
        &mut self,
        rec: &(impl Fields + ?Sized),
        out: &mut EstabelecimentoRow,
    ) -> Result<(), Reject> {
        Self::fields(rec, FileKind::Estabelecimentos)?;
        let (b, o, d) = (self.part(rec, 0, 8), self.part(rec, 1, 4), self.part(rec, 2, 2));
        let joined = format!("{b}{o}{d}");
        let cnpj = Cnpj::from_bytes(joined.as_bytes()).map_err(|error| Reject::Cnpj { value: joined, error })?;
        out.cnpj = cnpj.to_string();
        out.cnpj_basico = b;
        Self::code(rec, 3, 1, &mut out.matriz_filial);
        clean(rec.field(4), &mut out.nome_fantasia);
        mask_cpf_runs(&mut out.nome_fantasia);
        out.nome_fantasia_fold = fold(&out.nome_fantasia);
        Self::code(rec, 5, 2, &mut out.situacao_cadastral);
        out.data_situacao_cadastral = self.date(rec, 6);
        Self::code(rec, 7, 2, &mut out.motivo_situacao_cadastral);
        clean(rec.field(8), &mut out.nome_cidade_exterior);
        Self::code(rec, 9, 3, &mut out.pais);
        out.data_inicio_atividade = self.date(rec, 10);
        Self::code(rec, 11, 7, &mut out.cnae_fiscal);
        self.secondary_cnaes(rec, 12, &mut out.cnaes_secundarios);
        clean(rec.field(13), &mut self.t);
        clean(rec.field(14), &mut self.s);
        out.logradouro = logradouro(&self.t, &self.s);
        clean(rec.field(15), &mut out.numero);
        clean(rec.field(16), &mut out.complemento);
        clean(rec.field(17), &mut out.bairro);
        out.bairro_fold = fold(&out.bairro);
        out.cep = cep(self.text(rec, 18));
        clean(rec.field(19), &mut out.uf);
        out.uf.make_ascii_uppercase();
        Self::code(rec, 20, 4, &mut out.municipio);
        let code = out.municipio.len() == 4 && out.municipio.bytes().all(|b| b.is_ascii_digit());
        if !(code || out.municipio.is_empty()) {
            return Err(Reject::Municipio { value: std::mem::take(&mut out.municipio) });
        }
        out.ddd_1 = ddd(self.text(rec, 21));
        out.telefone_1 = telefone(self.text(rec, 22));
        out.ddd_2 = ddd(self.text(rec, 23));
        out.telefone_2 = telefone(self.text(rec, 24));
        out.ddd_fax = ddd(self.text(rec, 25));
        out.fax = telefone(self.text(rec, 26));
        out.email = email(self.text(rec, 27));
        clean(rec.field(28), &mut out.situacao_especial);
        out.data_situacao_especial = self.date(rec, 29);
        Ok(())
    }

    /// Secondary CNAEs: codes padded, empty ones and repeats dropped, comma-separated into `out`.
    fn secondary_cnaes(&mut self, rec: &(impl Fields + ?Sized), i: usize, out: &mut String) {
        out.clear();
        clean(rec.field(i), &mut self.s);
        for item in self.s.split(',') {
            self.t.clear();
            self.t.push_str(item.trim());
            pad_code(&mut self.t, 7);
            if !self.t.is_empty() && !out.split(',').any(|c| c == self.t) {
                if !out.is_empty() {
                    out.push(',');
                }
                out.push_str(&self.t);
            }
        }
    }

    pub fn socio(&mut self, rec: &(impl Fields + ?Sized), out: &mut SocioRow) -> Result<(), Reject> {
        Self::fields(rec, FileKind::Socios)?;
        out.cnpj_basico = self.basico(rec, 0)?;
        Self::code(rec, 1, 1, &mut out.tipo);
        clean(rec.field(2), &mut out.nome);
        mask_cpf_runs(&mut out.nome);
        let document = self.text(rec, 3).to_ascii_uppercase();
        out.documento = match out.tipo.as_str() {
            "1" => mask_company_document(&document),
            "2" => mask_person_document(&document),
            _ => String::new(),
        };
        Self::code(rec, 4, 2, &mut out.qualificacao);
        out.data_entrada = self.date(rec, 5);
        Self::code(rec, 6, 3, &mut out.pais);
        // The identity needs the raw document: a company partner's base is gone once it is masked.
        out.partner_basico.clear();
        if out.tipo == "1" {
            out.partner_basico.push_str(partner_basico(&document));
        }
        let key = match out.tipo.as_str() {
            "1" => &out.partner_basico,
            "2" => &document,
            "3" => &out.pais,
            _ => &out.documento,
        };
        out.partner_id = partner_id(&out.tipo, &fold(&out.nome), key);
        let representante = self.text(rec, 7);
        out.representante_legal =
            if representante == "***000000**" { String::new() } else { mask_person_document(representante) };
        clean(rec.field(8), &mut out.nome_representante);
        mask_cpf_runs(&mut out.nome_representante);
        Self::code(rec, 9, 2, &mut out.qualificacao_representante);
        Self::code(rec, 10, 1, &mut out.faixa_etaria);
        Ok(())
    }

    pub fn simples(&mut self, rec: &(impl Fields + ?Sized), out: &mut SimplesRow) -> Result<(), Reject> {
        Self::fields(rec, FileKind::Simples)?;
        out.cnpj_basico = self.basico(rec, 0)?;
        out.opcao_simples = flag(self.text(rec, 1));
        out.data_opcao_simples = self.date(rec, 2);
        out.data_exclusao_simples = self.date(rec, 3);
        out.opcao_mei = flag(self.text(rec, 4));
        out.data_opcao_mei = self.date(rec, 5);
        out.data_exclusao_mei = self.date(rec, 6);
        Ok(())
    }

    pub fn tax_regime(
        &mut self,
        rec: &(impl Fields + ?Sized),
        cols: TaxRegimeColumns,
        out: &mut RegimeRow,
    ) -> Result<(), Reject> {
        Self::whole(rec)?;
        let found = rec.count();
        let needed = cols.ano.max(cols.cnpj).max(cols.forma) + 1;
        if found < needed {
            return Err(Reject::FieldCount { expected: needed, found });
        }
        let raw = self.text(rec, cols.cnpj).to_owned();
        out.cnpj = match CnpjQuery::parse(&raw) {
            Ok(CnpjQuery::Full(c)) => c.to_string(),
            Ok(CnpjQuery::Basico(_)) => {
                return Err(Reject::Cnpj { value: raw, error: InvalidCnpj::Length(8) });
            }
            Err(error) => return Err(Reject::Cnpj { value: raw, error }),
        };
        out.cnpj_basico = out.cnpj[..8].to_owned();
        let year = self.text(rec, cols.ano);
        out.ano = year.parse().map_err(|_| Reject::Year { value: year.to_owned() })?;
        let forma = self.text(rec, cols.forma).to_uppercase();
        out.regime = match forma.as_str() {
            "LUCRO REAL" => "lucro_real",
            "LUCRO PRESUMIDO" => "lucro_presumido",
            "LUCRO ARBITRADO" => "lucro_arbitrado",
            f if f.starts_with("IMUNE") => "imune",
            f if f.starts_with("ISENTA") => "isenta",
            _ => return Err(Reject::Regime { value: forma }),
        }
        .to_owned();
        Ok(())
    }

    /// A lookup line: the code padded to the table's width, the label cleaned.
    pub fn lookup(&mut self, kind: FileKind, rec: &(impl Fields + ?Sized), out: &mut LookupRow) -> Result<(), Reject> {
        Self::fields(rec, kind)?;
        let width = match kind {
            FileKind::Cnaes => 7,
            FileKind::Municipios | FileKind::Naturezas => 4,
            FileKind::Paises => 3,
            _ => 2,
        };
        Self::code(rec, 0, width, &mut out.code);
        clean(rec.field(1), &mut out.label);
        Ok(())
    }
}

/// `S`/`N` options: upper-cased; anything else is `""` ("outros").
fn flag(text: &str) -> String {
    match text {
        "S" | "s" => "S".into(),
        "N" | "n" => "N".into(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fields(line: &[&str]) -> Vec<Vec<u8>> {
        line.iter().map(|s| s.bytes().collect()).collect()
    }

    fn with<T>(raw: &[Vec<u8>], f: impl FnOnce(&mut Normalizer, &[&[u8]]) -> T) -> T {
        let mut n = Normalizer::default();
        let slices: Vec<&[u8]> = raw.iter().map(Vec::as_slice).collect();
        f(&mut n, &slices)
    }

    fn check_estab(line: &[&str], expected: Result<EstabelecimentoRow, Reject>) {
        let got = with(&fields(line), |n, rec| {
            let mut row = EstabelecimentoRow::default();
            n.estabelecimento(rec, &mut row).map(|()| row)
        });
        assert_eq!(got, expected);
    }

    const ESTAB: [&str; 30] = [
        "11222333",
        "0001",
        "81",
        "1",
        "EXEMPLO",
        "02",
        "20200101",
        "00",
        "",
        "",
        "20200101",
        "6204000",
        "6201501,6202300,6203100",
        "RUA",
        "DAS FLORES",
        "S/N",
        "EDIF X;BLOCO 2;APTO 3",
        "CENTRO",
        "1005010",
        "SP",
        "7107",
        "011",
        "12345678",
        "",
        "",
        "",
        "",
        "contato@exemplo.com.br",
        "",
        "",
    ];

    fn estab_row() -> EstabelecimentoRow {
        EstabelecimentoRow {
            cnpj: "11222333000181".into(),
            cnpj_basico: "11222333".into(),
            matriz_filial: "1".into(),
            nome_fantasia: "EXEMPLO".into(),
            nome_fantasia_fold: "exemplo".into(),
            situacao_cadastral: "02".into(),
            data_situacao_cadastral: Some(18262),
            motivo_situacao_cadastral: "00".into(),
            data_inicio_atividade: Some(18262),
            cnae_fiscal: "6204000".into(),
            cnaes_secundarios: "6201501,6202300,6203100".into(),
            logradouro: "RUA DAS FLORES".into(),
            numero: "S/N".into(),
            complemento: "EDIF X;BLOCO 2;APTO 3".into(),
            bairro: "CENTRO".into(),
            bairro_fold: "centro".into(),
            cep: "01005010".into(),
            uf: "SP".into(),
            municipio: "7107".into(),
            ddd_1: "11".into(),
            telefone_1: "12345678".into(),
            email: "contato@exemplo.com.br".into(),
            ..Default::default()
        }
    }

    #[test]
    fn estabelecimento_from_the_format_example() {
        check_estab(&ESTAB, Ok(estab_row()));
    }

    #[test]
    fn estabelecimento_with_unpadded_codes_and_lower_case_letters() {
        let mut line = ESTAB;
        line[0] = "ab12cd34";
        line[2] = "84";
        line[5] = "2";
        line[7] = "0";
        line[11] = "111301";
        line[12] = "111301,,111301,6201501";
        let mut row = estab_row();
        row.cnpj = "AB12CD34000184".into();
        row.cnpj_basico = "AB12CD34".into();
        row.cnae_fiscal = "0111301".into();
        row.cnaes_secundarios = "0111301,6201501".into();
        check_estab(&line, Ok(row));
    }

    #[test]
    fn estabelecimento_rejects() {
        let mut bad_dv = ESTAB;
        bad_dv[2] = "82";
        check_estab(
            &bad_dv,
            Err(Reject::Cnpj {
                value: "11222333000182".into(),
                error: InvalidCnpj::CheckDigits { expected: "81".into() },
            }),
        );
        check_estab(&ESTAB[..29], Err(Reject::FieldCount { expected: 30, found: 29 }));
        let mut bad_char = ESTAB;
        bad_char[0] = "1122-333";
        check_estab(
            &bad_char,
            Err(Reject::Cnpj { value: "1122-333000181".into(), error: InvalidCnpj::Character('-') }),
        );
        for (municipio, expected) in [("ZZ", Some("ZZ")), ("71070", Some("71070")), ("7 1", Some("7 1")), ("", None)] {
            let mut line = ESTAB;
            line[20] = municipio;
            let got = with(&fields(&line), |n, rec| n.estabelecimento(rec, &mut EstabelecimentoRow::default()));
            assert_eq!(got.err(), expected.map(|value| Reject::Municipio { value: value.into() }), "{municipio:?}");
        }
        let mut short = ESTAB;
        short[20] = "107";
        let got = with(&fields(&short), |n, rec| {
            let mut row = EstabelecimentoRow::default();
            n.estabelecimento(rec, &mut row).map(|()| row.municipio)
        });
        assert_eq!(got.as_deref(), Ok("0107"), "an unpadded code is padded");
    }

    #[test]
    fn empresa_masks_cpf_and_defaults_porte() {
        let got =
            with(&fields(&["22333444", "FULANO  DE TAL 12345678909", "2135", "50", "1000,00", "", ""]), |n, rec| {
                let mut row = EmpresaRow::default();
                n.empresa(rec, &mut row).map(|()| row)
            });
        assert_eq!(
            got,
            Ok(EmpresaRow {
                cnpj_basico: "22333444".into(),
                razao_social: "FULANO DE TAL ***.456.789-**".into(),
                razao_social_fold: "fulano de tal ***.456.789-**".into(),
                natureza_juridica: "2135".into(),
                qualificacao_responsavel: "50".into(),
                capital_social: Some("1000.00".into()),
                porte_empresa: "00".into(),
                ente_federativo_responsavel: String::new(),
            })
        );
    }

    #[test]
    fn socio_documents_by_type() {
        let row = |line: &[&str]| {
            with(&fields(line), |n, rec| {
                let mut row = SocioRow::default();
                n.socio(rec, &mut row).map(|()| row)
            })
            .unwrap()
        };
        let pf = row(&["11222333", "2", "FULANO", "***456789**", "49", "20200101", "", "***000000**", "", "00", "5"]);
        assert_eq!((pf.documento.as_str(), pf.representante_legal.as_str()), ("***.456.789-**", ""));
        let pj =
            row(&["11222333", "1", "HOLDING", "44555666000181", "22", "", "", "***123456**", "BELTRANO", "05", "0"]);
        assert_eq!((pj.documento.as_str(), pj.representante_legal.as_str()), ("**.555.666/0001-**", "***.123.456-**"));
        let foreign = row(&["11222333", "3", "LLC", "", "37", "20020320", "493", "***972348**", "REP", "17", "0"]);
        assert_eq!((foreign.documento.as_str(), foreign.pais.as_str()), ("", "493"));
    }

    #[test]
    fn socio_identities_are_taken_before_masking() {
        let row = |tipo: &str, nome: &str, doc: &str, pais: &str| {
            let mut raw = fields(&["11222333", tipo, "", doc, "49", "", pais, "***000000**", "", "00", "0"]);
            raw[2] = nome.chars().map(|c| u8::try_from(c).expect("Latin-1")).collect();
            with(&raw, |n, rec| {
                let mut row = SocioRow::default();
                n.socio(rec, &mut row).map(|()| row)
            })
            .unwrap()
        };
        let check = |row: SocioRow, basico: &str, identity: (&str, &str, &str)| {
            assert_eq!(row.partner_basico, basico, "{row:?}");
            assert_eq!(row.partner_id, partner_id(identity.0, identity.1, identity.2), "{row:?}");
        };
        // A company partner is its company, whatever its name; the served document is masked.
        let pj = row("1", "HOLDING  EXEMPLO SA", "44555666000181", "");
        assert_eq!(pj.documento, "**.555.666/0001-**");
        check(pj, "44555666", ("1", "", "44555666"));
        check(row("1", "Outra Razão", "44555666000262", ""), "44555666", ("1", "", "44555666"));
        check(row("1", "ALFA", "12abc34501de35", ""), "12ABC345", ("1", "", "12ABC345"));
        check(row("1", "Holding Exemplo", "44555666000182", ""), "", ("1", "holding exemplo", ""));
        // A person is the folded name and the six digits shown: accents and case do not count.
        let pf = row("2", "JOSÉ  DA SILVA", "***456789**", "");
        check(pf.clone(), "", ("2", "jose da silva", "***456789**"));
        assert_eq!(pf.partner_id, row("2", "Jose da Silva", "***456789**", "").partner_id);
        assert_ne!(pf.partner_id, row("2", "JOSE DA SILVA", "***456780**", "").partner_id);
        check(row("3", "LLC", "", "493"), "", ("3", "llc", "493"));
        check(row("", "X", "", ""), "", ("0", "x", ""));
    }

    #[test]
    fn cpf_in_partner_and_representative_names_is_masked() {
        let got = with(
            &fields(&[
                "11222333",
                "2",
                "FULANO 11122233344",
                "***222333**",
                "49",
                "",
                "",
                "***123456**",
                "BELTRANO 123.456.789-09",
                "05",
                "0",
            ]),
            |n, rec| {
                let mut row = SocioRow::default();
                n.socio(rec, &mut row).map(|()| row)
            },
        )
        .unwrap();
        assert_eq!(
            (got.nome.as_str(), got.nome_representante.as_str()),
            ("FULANO ***.222.333-**", "BELTRANO ***.456.789-**")
        );
    }

    /// A record cut at the reader's cap, with the fields of a valid row.
    struct Cut<'a>(&'a [&'a [u8]]);

    impl Fields for Cut<'_> {
        fn count(&self) -> usize {
            self.0.len()
        }
        fn field(&self, i: usize) -> &[u8] {
            self.0.get(i).copied().unwrap_or_default()
        }
        fn over_cap(&self) -> Option<(u64, u64)> {
            Some((2_000_000, 1_048_576))
        }
    }

    #[test]
    fn record_over_the_cap_is_a_reject_of_any_kind() {
        let raw = fields(&ESTAB);
        let slices: Vec<&[u8]> = raw.iter().map(Vec::as_slice).collect();
        let mut n = Normalizer::default();
        let got = n.estabelecimento(&Cut(&slices), &mut EstabelecimentoRow::default());
        assert_eq!(got, Err(Reject::TooLong { bytes: 2_000_000, cap: 1_048_576 }));
        assert_eq!(
            got.unwrap_err().to_string(),
            "record of 2000000 bytes is over the 1048576-byte cap (kept: its beginning)"
        );
        let cols = TaxRegimeColumns { ano: 0, cnpj: 1, forma: 2 };
        let got = n.tax_regime(&Cut(&[b"2023", b"00.000.000/0001-91", b"LUCRO REAL"]), cols, &mut RegimeRow::default());
        assert!(matches!(got, Err(Reject::TooLong { .. })));
    }

    /// A record the end of its member cut short.
    struct Unterminated<'a>(&'a [&'a [u8]]);

    impl Fields for Unterminated<'_> {
        fn count(&self) -> usize {
            self.0.len()
        }
        fn field(&self, i: usize) -> &[u8] {
            self.0.get(i).copied().unwrap_or_default()
        }
        fn unterminated(&self) -> bool {
            true
        }
    }

    #[test]
    fn record_cut_inside_a_quoted_field_is_a_reject_of_any_kind() {
        let mut n = Normalizer::default();
        let got = n.lookup(FileKind::Cnaes, &Unterminated(&[b"0111301", b"CULTIVO DE AR"]), &mut LookupRow::default());
        assert_eq!(got, Err(Reject::Unterminated));
        assert_eq!(got.unwrap_err().to_string(), "the member ends inside this record (cut short)");
        let raw = fields(&ESTAB);
        let slices: Vec<&[u8]> = raw.iter().map(Vec::as_slice).collect();
        let got = n.estabelecimento(&Unterminated(&slices), &mut EstabelecimentoRow::default());
        assert_eq!(got, Err(Reject::Unterminated));
        let cols = TaxRegimeColumns { ano: 0, cnpj: 1, forma: 2 };
        let got = n.tax_regime(
            &Unterminated(&[b"2023", b"00.000.000/0001-91", b"LUCRO REAL"]),
            cols,
            &mut RegimeRow::default(),
        );
        assert_eq!(got, Err(Reject::Unterminated));
    }

    #[test]
    fn capital_that_cannot_be_loaded_is_told_not_dropped() {
        let mut n = Normalizer::default();
        let mut row = EmpresaRow::default();
        let raw = fields(&["22333444", "X", "2135", "50", "12345678901234567,00", "", ""]);
        let slices: Vec<&[u8]> = raw.iter().map(Vec::as_slice).collect();
        n.empresa(slices.as_slice(), &mut row).unwrap();
        assert_eq!(row.capital_social, None);
        assert_eq!(n.take_capital_issue(), Some((CapitalIssue::TooBig, "12345678901234567,00".into())));
        assert_eq!(n.take_capital_issue(), None);
        let raw = fields(&["22333444", "X", "2135", "50", "1.000,00", "", ""]);
        let slices: Vec<&[u8]> = raw.iter().map(Vec::as_slice).collect();
        n.empresa(slices.as_slice(), &mut row).unwrap();
        assert_eq!((row.capital_social.as_deref(), n.take_capital_issue()), (Some("1000.00"), None));
    }

    #[test]
    fn tax_regime_lines() {
        let cols = TaxRegimeColumns::from_header(&[
            "ano".into(),
            "cnpj".into(),
            "cnpj_da_scp".into(),
            "forma_de_tributacao".into(),
        ])
        .unwrap();
        let got = with(&fields(&["2023", "00.000.000/0001-91", "0", "LUCRO REAL"]), |n, rec| {
            let mut row = RegimeRow::default();
            n.tax_regime(rec, cols, &mut row).map(|()| row)
        });
        assert_eq!(
            got,
            Ok(RegimeRow {
                cnpj_basico: "00000000".into(),
                cnpj: "00000000000191".into(),
                ano: 2023,
                regime: "lucro_real".into()
            })
        );
        let bad = with(&fields(&["2023", "00.000.000/0001-91", "0", "LUCRO INVENTADO"]), |n, rec| {
            n.tax_regime(rec, cols, &mut RegimeRow::default())
        });
        assert_eq!(bad, Err(Reject::Regime { value: "LUCRO INVENTADO".into() }));
        assert!(TaxRegimeColumns::from_header(&["ano".into()]).is_err());
    }

    #[test]
    fn record_hash_sees_field_boundaries() {
        let a: Vec<&[u8]> = vec![b"AB", b"C"];
        let b: Vec<&[u8]> = vec![b"A", b"BC"];
        assert_ne!(record_hash(a.as_slice()), record_hash(b.as_slice()));
        assert_eq!(record_hash(a.as_slice()), record_hash(a.clone().as_slice()));
    }

    // Fuzz targets of the normalizer, on stable: records of any bytes, and near-valid records
    // (a real line of each kind with some fields replaced). A few hundred cases by default,
    // PROPTEST_CASES=100000 for a long run.

    const EMPRESA: [&str; 7] = ["11222333", "EMPRESA EXEMPLO LTDA", "2062", "49", "1000,00", "01", ""];
    const SOCIO: [&str; 11] =
        ["11222333", "2", "FULANO", "***456789**", "49", "20200101", "", "***000000**", "", "00", "5"];
    const SIMPLES: [&str; 7] = ["11222333", "S", "20200101", "", "N", "", ""];

    fn field_bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..16),
            "[0-9]{0,15}".prop_map(String::into_bytes),
            "[0-9a-zA-Z .,/*-]{0,16}".prop_map(String::into_bytes),
            Just(b"123.456.789-09".to_vec()),
            Just(b"ABC 12345678909".to_vec()),
        ]
    }

    /// A template's fields, some replaced, some dropped or added at the end.
    fn near(template: &'static [&'static str]) -> impl Strategy<Value = Vec<Vec<u8>>> {
        let n = template.len();
        (proptest::collection::vec((0..n + 2, field_bytes()), 0..4), prop_oneof![8 => Just(n), 1 => 0..n + 2]).prop_map(
            move |(changes, len)| {
                let mut fields: Vec<Vec<u8>> = template.iter().map(|f| f.as_bytes().to_vec()).collect();
                for (i, bytes) in changes {
                    if i < n {
                        fields[i] = bytes;
                    }
                }
                fields.resize(len, b"X".to_vec());
                fields
            },
        )
    }

    fn masked(name: &str) -> bool {
        let mut again = name.to_owned();
        mask_cpf_runs(&mut again);
        again == name
    }

    fn code_width(code: &str, width: usize) -> bool {
        code.is_empty() || !code.bytes().all(|b| b.is_ascii_digit()) || code.len() >= width
    }

    fn in_range(date: Option<i32>) -> bool {
        date.is_none_or(|d| (-62091..=47846).contains(&d))
    }

    proptest! {
        #[test]
        fn records_of_any_bytes_never_panic(fields in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 0..34)) {
            let slices: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
            let rec = slices.as_slice();
            let mut n = Normalizer::default();
            let _ = n.empresa(rec, &mut EmpresaRow::default());
            let _ = n.estabelecimento(rec, &mut EstabelecimentoRow::default());
            let _ = n.socio(rec, &mut SocioRow::default());
            let _ = n.simples(rec, &mut SimplesRow::default());
            let _ = n.tax_regime(rec, TaxRegimeColumns { ano: 0, cnpj: 1, forma: 3 }, &mut RegimeRow::default());
            for kind in [FileKind::Cnaes, FileKind::Municipios, FileKind::Paises, FileKind::Motivos] {
                let _ = n.lookup(kind, rec, &mut LookupRow::default());
            }
            let _ = record_hash(rec);
        }

        #[test]
        fn a_company_row_has_its_shapes(fields in near(&EMPRESA)) {
            let slices: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
            let mut row = EmpresaRow::default();
            let mut n = Normalizer::default();
            match n.empresa(slices.as_slice(), &mut row) {
                Ok(()) => {
                    prop_assert!(row.cnpj_basico.len() == 8 && row.cnpj_basico.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()));
                    prop_assert!(masked(&row.razao_social), "{:?}", row.razao_social);
                    prop_assert!(code_width(&row.natureza_juridica, 4) && code_width(&row.qualificacao_responsavel, 2));
                    prop_assert!(["00", "01", "03", "05"].contains(&row.porte_empresa.as_str()));
                    prop_assert_eq!(row.capital_social.is_none(), n.take_capital_issue().is_some() || fields[4].iter().all(|b| *b == 0 || char::from(*b).is_whitespace()));
                }
                Err(reject) => {
                    let basico = matches!(reject, Reject::CnpjBasico { .. });
                    prop_assert!(fields.len() != 7 || basico, "{}", reject);
                }
            }
        }

        #[test]
        fn an_establishment_row_has_its_shapes(fields in near(&ESTAB)) {
            let slices: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
            let mut row = EstabelecimentoRow::default();
            if Normalizer::default().estabelecimento(slices.as_slice(), &mut row).is_ok() {
                prop_assert!(Cnpj::from_bytes(row.cnpj.as_bytes()).is_ok() && row.cnpj.starts_with(&row.cnpj_basico));
                prop_assert!(masked(&row.nome_fantasia), "{:?}", row.nome_fantasia);
                prop_assert!(code_width(&row.cnae_fiscal, 7) && code_width(&row.municipio, 4) && code_width(&row.pais, 3));
                prop_assert!(row.cnaes_secundarios.split(',').all(|c| code_width(c, 7)));
                prop_assert!(in_range(row.data_situacao_cadastral) && in_range(row.data_inicio_atividade) && in_range(row.data_situacao_especial));
                prop_assert!(row.cep.is_empty() || row.cep.len() == 8);
                prop_assert!(!row.uf.bytes().any(|b| b.is_ascii_lowercase()));
                prop_assert!(!row.email.chars().any(char::is_uppercase));
            }
        }

        #[test]
        fn a_partner_row_shows_no_document_whole(fields in near(&SOCIO)) {
            let slices: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
            let mut row = SocioRow::default();
            if Normalizer::default().socio(slices.as_slice(), &mut row).is_ok() {
                prop_assert!(masked(&row.nome) && masked(&row.nome_representante), "{:?}", row);
                for document in [&row.documento, &row.representante_legal] {
                    prop_assert!(document.is_empty() || document.contains("**"), "{:?}", document);
                }
                prop_assert!(in_range(row.data_entrada));
                // The store gives the id again from what it keeps of the row.
                let served = cnpj_model::partner::served_partner_id(
                    &row.tipo, &row.nome, &row.documento, &row.pais, &row.partner_basico,
                );
                prop_assert_eq!(served, row.partner_id.clone(), "{:?}", row);
            }
        }

        #[test]
        fn a_simples_row_has_flags_and_dates(fields in near(&SIMPLES)) {
            let slices: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
            let mut row = SimplesRow::default();
            if Normalizer::default().simples(slices.as_slice(), &mut row).is_ok() {
                prop_assert!(["S", "N", ""].contains(&row.opcao_simples.as_str()) && ["S", "N", ""].contains(&row.opcao_mei.as_str()));
                prop_assert!(in_range(row.data_opcao_simples) && in_range(row.data_exclusao_mei));
            }
        }
    }
}
