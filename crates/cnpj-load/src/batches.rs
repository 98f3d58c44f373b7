//! Arrow record batches of normalized rows, one builder type per staging table. The staging
//! tables' DDL is derived from the same column lists, so the two cannot drift apart.

use std::sync::Arc;

use arrow::array::{ArrayRef, Date32Builder, Int32Builder, Int64Builder, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use cnpj_model::rows::{
    EmpresaRow, EstabelecimentoRow, LabelRow, MunicipioRow, RegimeRow, RejectRow, SimplesRow, SocioRow,
};

/// Where a row comes from: the source file's id and its global reading-order position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Provenance {
    pub source_file: i32,
    pub seq: i64,
    pub row_hash: i64,
}

/// A record batch bound for one staging table.
#[derive(Debug)]
pub struct Batch {
    pub table: &'static str,
    pub data: RecordBatch,
}

trait Column {
    type Builder;
    const TYPE: DataType;
    fn builder() -> Self::Builder;
    fn push(builder: &mut Self::Builder, value: &Self);
    fn finish(builder: &mut Self::Builder) -> ArrayRef;
}

impl Column for String {
    type Builder = StringBuilder;
    const TYPE: DataType = DataType::Utf8;
    fn builder() -> StringBuilder {
        StringBuilder::new()
    }
    fn push(b: &mut StringBuilder, v: &String) {
        b.append_value(v);
    }
    fn finish(b: &mut StringBuilder) -> ArrayRef {
        Arc::new(b.finish())
    }
}

impl Column for Option<String> {
    type Builder = StringBuilder;
    const TYPE: DataType = DataType::Utf8;
    fn builder() -> StringBuilder {
        StringBuilder::new()
    }
    fn push(b: &mut StringBuilder, v: &Option<String>) {
        b.append_option(v.as_deref());
    }
    fn finish(b: &mut StringBuilder) -> ArrayRef {
        Arc::new(b.finish())
    }
}

/// Dates: days since 1970-01-01.
impl Column for Option<i32> {
    type Builder = Date32Builder;
    const TYPE: DataType = DataType::Date32;
    fn builder() -> Date32Builder {
        Date32Builder::new()
    }
    fn push(b: &mut Date32Builder, v: &Option<i32>) {
        b.append_option(*v);
    }
    fn finish(b: &mut Date32Builder) -> ArrayRef {
        Arc::new(b.finish())
    }
}

impl Column for i32 {
    type Builder = Int32Builder;
    const TYPE: DataType = DataType::Int32;
    fn builder() -> Int32Builder {
        Int32Builder::new()
    }
    fn push(b: &mut Int32Builder, v: &i32) {
        b.append_value(*v);
    }
    fn finish(b: &mut Int32Builder) -> ArrayRef {
        Arc::new(b.finish())
    }
}

impl Column for i64 {
    type Builder = Int64Builder;
    const TYPE: DataType = DataType::Int64;
    fn builder() -> Int64Builder {
        Int64Builder::new()
    }
    fn push(b: &mut Int64Builder, v: &i64) {
        b.append_value(*v);
    }
    fn finish(b: &mut Int64Builder) -> ArrayRef {
        Arc::new(b.finish())
    }
}

fn duckdb_type(t: &DataType) -> &'static str {
    match t {
        DataType::Utf8 => "VARCHAR",
        DataType::Date32 => "DATE",
        DataType::Int32 => "INTEGER",
        DataType::Int64 => "BIGINT",
        other => unreachable!("no staging column of type {other}"),
    }
}

/// `CREATE TABLE` for a staging table with the given Arrow schema.
pub(crate) fn staging_ddl(table: &str, schema: &Schema) -> String {
    let cols: Vec<String> =
        schema.fields().iter().map(|f| format!("{} {}", f.name(), duckdb_type(f.data_type()))).collect();
    format!("CREATE TEMP TABLE {table} ({})", cols.join(", "))
}

macro_rules! staging_table {
    ($(#[$doc:meta])* $batch:ident, $row:ty, $table:literal, [$($field:ident: $ty:ty),* $(,)?] $(, provenance $($p:ident)?)?) => {
        $(#[$doc])*
        pub struct $batch {
            $($field: <$ty as Column>::Builder,)*
            $($($p)? source_file: Int32Builder, seq: Int64Builder, row_hash: Int64Builder,)?
            len: usize,
        }

        impl std::fmt::Debug for $batch {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({} rows)", stringify!($batch), self.len)
            }
        }

        impl Default for $batch {
            fn default() -> Self {
                $batch {
                    $($field: <$ty as Column>::builder(),)*
                    $($($p)? source_file: Int32Builder::new(), seq: Int64Builder::new(), row_hash: Int64Builder::new(),)?
                    len: 0,
                }
            }
        }

        impl $batch {
            pub const TABLE: &'static str = $table;

            pub fn schema() -> Schema {
                #[allow(unused_mut)]
                let mut fields = vec![$(Field::new(stringify!($field), <$ty as Column>::TYPE, true)),*];
                $($($p)?
                fields.push(Field::new("source_file", DataType::Int32, false));
                fields.push(Field::new("seq", DataType::Int64, false));
                fields.push(Field::new("row_hash", DataType::Int64, false));
                )?
                Schema::new(fields)
            }

            pub fn len(&self) -> usize {
                self.len
            }

            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// Takes the rows pushed so far as a batch, leaving this builder empty.
            pub fn take(&mut self) -> Batch {
                let columns: Vec<ArrayRef> = vec![
                    $(<$ty as Column>::finish(&mut self.$field),)*
                    $($($p)? Arc::new(self.source_file.finish()), Arc::new(self.seq.finish()), Arc::new(self.row_hash.finish()),)?
                ];
                self.len = 0;
                let data = RecordBatch::try_new(Arc::new(Self::schema()), columns).expect("columns match the schema");
                Batch { table: $table, data }
            }
        }

        staging_table!(@push $batch, $row, [$($field: $ty),*] $(, provenance $($p)?)?);
    };
    (@push $batch:ident, $row:ty, [$($field:ident: $ty:ty),*], provenance) => {
        impl $batch {
            pub fn push(&mut self, row: &$row, at: Provenance) {
                $(<$ty as Column>::push(&mut self.$field, &row.$field);)*
                self.source_file.append_value(at.source_file);
                self.seq.append_value(at.seq);
                self.row_hash.append_value(at.row_hash);
                self.len += 1;
            }
        }
    };
    (@push $batch:ident, $row:ty, [$($field:ident: $ty:ty),*]) => {
        impl $batch {
            pub fn push(&mut self, row: &$row) {
                $(<$ty as Column>::push(&mut self.$field, &row.$field);)*
                self.len += 1;
            }
        }
    };
}

staging_table!(
    /// Empresas rows.
    EmpresaBatch, EmpresaRow, "stg_empresas",
    [
        cnpj_basico: String, razao_social: String, razao_social_fold: String, natureza_juridica: String,
        qualificacao_responsavel: String, capital_social: Option<String>, porte_empresa: String,
        ente_federativo_responsavel: String,
    ],
    provenance
);

staging_table!(
    /// Estabelecimentos rows.
    EstabelecimentoBatch, EstabelecimentoRow, "stg_estabelecimentos",
    [
        cnpj: String, cnpj_basico: String, cnpj_ordem: String, cnpj_dv: String, matriz_filial: String,
        nome_fantasia: String, nome_fantasia_fold: String, situacao_cadastral: String,
        data_situacao_cadastral: Option<i32>, motivo_situacao_cadastral: String, nome_cidade_exterior: String,
        pais: String, data_inicio_atividade: Option<i32>, cnae_fiscal: String, cnaes_secundarios: String,
        logradouro: String, numero: String, complemento: String, bairro: String, bairro_fold: String,
        cep: String, uf: String, municipio: String, ddd_1: String, telefone_1: String, ddd_2: String,
        telefone_2: String, ddd_fax: String, fax: String, email: String, situacao_especial: String,
        data_situacao_especial: Option<i32>,
    ],
    provenance
);

staging_table!(
    /// Socios rows.
    SocioBatch, SocioRow, "stg_socios",
    [
        cnpj_basico: String, tipo: String, nome: String, documento: String, qualificacao: String,
        data_entrada: Option<i32>, pais: String, representante_legal: String, nome_representante: String,
        qualificacao_representante: String, faixa_etaria: String,
    ],
    provenance
);

staging_table!(
    /// Simples rows.
    SimplesBatch, SimplesRow, "stg_simples",
    [
        cnpj_basico: String, opcao_simples: String, data_opcao_simples: Option<i32>,
        data_exclusao_simples: Option<i32>, opcao_mei: String, data_opcao_mei: Option<i32>,
        data_exclusao_mei: Option<i32>,
    ],
    provenance
);

staging_table!(
    /// Tax-regime rows.
    RegimeBatch, RegimeRow, "stg_regimes",
    [cnpj_basico: String, cnpj: String, ano: i32, regime: String],
    provenance
);

staging_table!(
    /// Rejected records.
    RejectBatch, RejectRow, "stg_rejects",
    [source_file: i32, line: i64, reason: String, record: String]
);

staging_table!(
    /// Municipalities of the month.
    MunicipioBatch, MunicipioRow, "stg_municipios",
    [code: String, name: String, uf: String, ibge: Option<String>]
);

/// Labels: not a plain row type (the table name is static and the locale an enum).
#[derive(Debug, Default)]
pub struct LabelBatch {
    rows: Vec<LabelRow>,
}

impl LabelBatch {
    pub const TABLE: &'static str = "stg_labels";

    pub fn schema() -> Schema {
        Schema::new(["tabela", "codigo", "locale", "descricao"].map(|n| Field::new(n, DataType::Utf8, false)).to_vec())
    }

    pub fn push(&mut self, row: &LabelRow) {
        self.rows.push(row.clone());
    }

    pub fn take(&mut self) -> Batch {
        let rows = std::mem::take(&mut self.rows);
        let column = |f: &dyn Fn(&LabelRow) -> &str| -> ArrayRef {
            Arc::new(rows.iter().map(|r| Some(f(r))).collect::<arrow::array::StringArray>())
        };
        let columns =
            vec![column(&|r| r.table), column(&|r| &r.code), column(&|r| r.locale.code()), column(&|r| &r.label)];
        let data = RecordBatch::try_new(Arc::new(Self::schema()), columns).expect("columns match the schema");
        Batch { table: Self::TABLE, data }
    }
}

/// Every staging table with its schema, for the DDL.
pub(crate) fn staging_tables() -> Vec<(&'static str, Schema)> {
    vec![
        (EmpresaBatch::TABLE, EmpresaBatch::schema()),
        (EstabelecimentoBatch::TABLE, EstabelecimentoBatch::schema()),
        (SocioBatch::TABLE, SocioBatch::schema()),
        (SimplesBatch::TABLE, SimplesBatch::schema()),
        (RegimeBatch::TABLE, RegimeBatch::schema()),
        (RejectBatch::TABLE, RejectBatch::schema()),
        (MunicipioBatch::TABLE, MunicipioBatch::schema()),
        (LabelBatch::TABLE, LabelBatch::schema()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddl_follows_the_row_fields() {
        assert_eq!(
            staging_ddl(RegimeBatch::TABLE, &RegimeBatch::schema()),
            "CREATE TEMP TABLE stg_regimes (cnpj_basico VARCHAR, cnpj VARCHAR, ano INTEGER, regime VARCHAR, \
             source_file INTEGER, seq BIGINT, row_hash BIGINT)"
        );
    }

    #[test]
    fn take_empties_the_builder() {
        let mut b = SimplesBatch::default();
        let row = SimplesRow { cnpj_basico: "11222333".into(), opcao_simples: "S".into(), ..Default::default() };
        b.push(&row, Provenance { source_file: 1, seq: 7, row_hash: 9 });
        b.push(&row, Provenance { source_file: 1, seq: 8, row_hash: 9 });
        let batch = b.take();
        assert_eq!((batch.table, batch.data.num_rows(), batch.data.num_columns()), ("stg_simples", 2, 10));
        assert!(b.is_empty());
        assert_eq!(b.take().data.num_rows(), 0);
    }
}
