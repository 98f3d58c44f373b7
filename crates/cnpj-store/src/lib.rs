//! Reads a built registry dataset (DuckDB file, opened read-only): detail records by CNPJ in any
//! locale. The CLI's `show` and the API serve records through this crate.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cnpj_model::{Address, CnpjQuery, Contact, DetailRecord, Locale, Partner, SecondaryActivity};
use duckdb::{AccessMode, Config, Connection, OptionalExt, Row};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the dataset {path}: {source}")]
    Open {
        path: PathBuf,
        source: duckdb::Error,
    },
    #[error("{path} is not a registry dataset (no metadata table)")]
    NotADataset { path: PathBuf },
    #[error("query failed ({context}): {source}")]
    Query {
        context: &'static str,
        source: duckdb::Error,
    },
}

fn query(context: &'static str) -> impl FnOnce(duckdb::Error) -> StoreError {
    move |source| StoreError::Query { context, source }
}

/// An open dataset with its labels in memory.
pub struct Store {
    conn: Connection,
    labels: HashMap<(Locale, String, String), String>,
    municipios: HashMap<String, (String, Option<String>)>,
    source_month: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store(source month {})", self.source_month)
    }
}

const DETAIL: &str = "
SELECT e.cnpj, coalesce(c.razao_social, ''), e.nome_fantasia, e.situacao_cadastral,
       coalesce(c.natureza_juridica, ''), coalesce(c.porte_empresa, ''), e.cnae_fiscal,
       e.cnaes_secundarios, e.logradouro, e.numero, e.complemento, e.bairro, e.municipio, e.uf, e.cep,
       e.endereco_completo, e.ddd_1, e.telefone_1, e.telefone_formatado, e.email,
       CAST(e.data_inicio_atividade AS VARCHAR), CAST(c.capital_social AS VARCHAR), e.matriz_filial,
       CAST(e.data_situacao_cadastral AS VARCHAR), e.motivo_situacao_cadastral, e.situacao_especial,
       CAST(e.data_situacao_especial AS VARCHAR), coalesce(c.ente_federativo_responsavel, ''),
       e.nome_cidade_exterior, e.pais, e.ddd_2, e.telefone_2, e.ddd_fax, e.fax, e.cnpj_basico
FROM estabelecimentos e LEFT JOIN empresas c ON c.cnpj_basico = e.cnpj_basico";

const SOCIOS: &str = "
SELECT nome, qualificacao, tipo, documento, CAST(data_entrada AS VARCHAR), faixa_etaria, pais,
       representante_legal, nome_representante, qualificacao_representante
FROM socios WHERE cnpj_basico = ?
ORDER BY data_entrada NULLS LAST, nome, documento";

impl Store {
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.to_owned(),
            source,
        };
        if !path.is_file() {
            return Err(open_err(duckdb::Error::InvalidPath(path.to_owned())));
        }
        let config = Config::default()
            .access_mode(AccessMode::ReadOnly)
            .map_err(open_err)?;
        let conn = Connection::open_with_flags(path, config).map_err(open_err)?;
        let source_month: String = conn
            .query_row(
                "SELECT value FROM metadata WHERE key = 'source_month'",
                [],
                |r| r.get(0),
            )
            .map_err(|_| StoreError::NotADataset {
                path: path.to_owned(),
            })?;
        let mut labels = HashMap::new();
        {
            let mut stmt = conn
                .prepare("SELECT locale, tabela, codigo, descricao FROM labels")
                .map_err(query("labels"))?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .map_err(query("labels"))?;
            for row in rows {
                let (locale, table, code, label) = row.map_err(query("labels"))?;
                if let Ok(locale) = locale.parse::<Locale>() {
                    labels.insert((locale, table, code), label);
                }
            }
        }
        let mut municipios = HashMap::new();
        {
            let mut stmt = conn
                .prepare("SELECT code, name, ibge FROM municipios")
                .map_err(query("municipios"))?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
                .map_err(query("municipios"))?;
            for row in rows {
                let (code, value) = row.map_err(query("municipios"))?;
                municipios.insert(code, value);
            }
        }
        Ok(Store {
            conn,
            labels,
            municipios,
            source_month,
        })
    }

    /// The `YYYY-MM` of the dump this dataset was built from (empty when unknown).
    pub fn source_month(&self) -> &str {
        &self.source_month
    }

    /// The label of `code` in `table`, `""` for an unknown or empty code.
    pub fn label(&self, locale: Locale, table: &str, code: &str) -> String {
        self.labels
            .get(&(locale, table.to_owned(), code.to_owned()))
            .cloned()
            .unwrap_or_default()
    }

    /// The detail record of one establishment, or of a company's head office for an 8-character query.
    pub fn detail(
        &self,
        query_: &CnpjQuery,
        locale: Locale,
    ) -> Result<Option<DetailRecord>, StoreError> {
        let record = match query_ {
            CnpjQuery::Full(cnpj) => {
                let sql = format!("{DETAIL} WHERE e.cnpj = ?");
                let mut stmt = self.conn.prepare_cached(&sql).map_err(query("detail"))?;
                stmt.query_row([cnpj.as_str()], |r| self.record(r, locale)).optional()
            }
            CnpjQuery::Basico(_) => {
                let sql = format!(
                    "{DETAIL} WHERE e.cnpj_basico = ? ORDER BY (e.matriz_filial = '1') DESC, e.cnpj_ordem LIMIT 1"
                );
                let mut stmt = self.conn.prepare_cached(&sql).map_err(query("detail"))?;
                stmt.query_row([query_.basico()], |r| self.record(r, locale)).optional()
            }
        }
        .map_err(query("detail"))?;
        let Some((mut record, basico)) = record else {
            return Ok(None);
        };
        record.socios = self.partners(&basico, locale)?;
        Ok(Some(record))
    }

    fn record(&self, r: &Row<'_>, locale: Locale) -> duckdb::Result<(DetailRecord, String)> {
        let s = |i: usize| -> duckdb::Result<String> { r.get(i) };
        let label = |table: &str, code: &str| self.label(locale, table, code);
        let cnpj = s(0)?;
        let situacao = s(3)?;
        let natureza = s(4)?;
        let porte = s(5)?;
        let cnae = s(6)?;
        let secundarios: Vec<String> = match r.get_ref(7)?.to_owned() {
            duckdb::types::Value::List(items) => items
                .into_iter()
                .filter_map(|v| {
                    if let duckdb::types::Value::Text(t) = v {
                        Some(t)
                    } else {
                        None
                    }
                })
                .collect(),
            _ => Vec::new(),
        };
        let municipio = s(12)?;
        let (municipio_nome, municipio_ibge) =
            self.municipios.get(&municipio).cloned().unwrap_or_default();
        let matriz = s(22)?;
        let motivo = s(24)?;
        let pais = s(29)?;
        let record = DetailRecord {
            id: cnpj.clone(),
            cnpj,
            razao_social: s(1)?,
            nome_fantasia: s(2)?,
            situacao_cadastral: label("situacao_cadastral", &situacao),
            situacao_cadastral_code: situacao,
            natureza_juridica: label("naturezas", &natureza),
            natureza_juridica_code: natureza,
            porte_empresa: label("porte_empresa", &porte),
            porte_empresa_code: porte,
            cnae_fiscal_descricao: label("cnaes", &cnae),
            cnae_fiscal: cnae,
            cnaes_secundarios: secundarios
                .into_iter()
                .map(|codigo| SecondaryActivity {
                    descricao: label("cnaes", &codigo),
                    codigo,
                })
                .collect(),
            endereco: Address {
                logradouro: s(8)?,
                numero: s(9)?,
                complemento: s(10)?,
                bairro: s(11)?,
                municipio,
                municipio_nome,
                uf: s(13)?,
                cep: s(14)?,
                endereco_completo: s(15)?,
                municipio_ibge,
                nome_cidade_exterior: s(28)?,
                pais: label("paises", &pais),
                pais_code: pais,
            },
            contato: Contact {
                ddd: s(16)?,
                telefone: s(17)?,
                telefone_formatado: s(18)?,
                email: s(19)?,
                ddd_2: s(30)?,
                telefone_2: s(31)?,
                ddd_fax: s(32)?,
                fax: s(33)?,
            },
            socios: Vec::new(),
            data_inicio_atividades: r.get(20)?,
            capital_social: r.get(21)?,
            matriz_filial: label("matriz_filial", &matriz),
            matriz_filial_code: matriz,
            data_situacao_cadastral: r.get(23)?,
            motivo_situacao_cadastral: label("motivos", &motivo),
            motivo_situacao_cadastral_code: motivo,
            situacao_especial: s(25)?,
            data_situacao_especial: r.get(26)?,
            ente_federativo_responsavel: s(27)?,
        };
        Ok((record, s(34)?))
    }

    fn partners(&self, basico: &str, locale: Locale) -> Result<Vec<Partner>, StoreError> {
        let mut stmt = self.conn.prepare_cached(SOCIOS).map_err(query("socios"))?;
        let rows = stmt
            .query_map([basico], |r| {
                let s = |i: usize| -> duckdb::Result<String> { r.get(i) };
                let (qualificacao, tipo, faixa) = (s(1)?, s(2)?, s(5)?);
                Ok(Partner {
                    nome: s(0)?,
                    qualificacao_descricao: self.label(locale, "qualificacoes", &qualificacao),
                    qualificacao,
                    tipo_descricao: self.label(locale, "tipo_socio", &tipo),
                    tipo,
                    documento: s(3)?,
                    data_entrada: r.get(4)?,
                    faixa_etaria: self.label(locale, "faixa_etaria", &faixa),
                    faixa_etaria_code: faixa,
                    pais_code: s(6)?,
                    representante_legal: s(7)?,
                    nome_representante: s(8)?,
                    qualificacao_representante: s(9)?,
                })
            })
            .map_err(query("socios"))?;
        rows.collect::<Result<_, _>>().map_err(query("socios"))
    }
}
