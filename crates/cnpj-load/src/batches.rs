//! Arrow record batches of normalized rows, one builder type per table, and the byte encoding of
//! the main tables' rows in sorted runs (`runs.rs`). The DDL and the run codec are derived from
//! the same column lists as the builders, so the three cannot drift apart.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Int32Builder, Int64Builder, ListBuilder, StringBuilder,
};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use cnpj_model::rows::{
    ChangeRow, EmpresaRow, EstabelecimentoRow, LabelRow, MunicipioRow, RegimeRow, RejectRow, SimplesRow, SocioRow,
};

/// Where a row comes from: the source file's id, its global reading-order position and a hash
/// of its raw record (two duplicates "differ" when their hashes do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Provenance {
    pub source_file: i32,
    /// Reading order: the file's id in the high bits, the record's index in the low 40.
    pub seq: i64,
    pub row_hash: i64,
}

impl Provenance {
    const RECORD_BITS: u32 = 40;

    /// The row read as record `index` (from 0) of file `source_file`.
    pub fn read(source_file: i32, index: u64, row_hash: i64) -> Provenance {
        Provenance { source_file, seq: (i64::from(source_file) << Self::RECORD_BITS) | index as i64, row_hash }
    }

    /// The record's index in its file: the `seq` column of the tables, which sit beside
    /// `source_file` (the whole reading order would take twice the bits: at 1.0, 0.44 GB of the
    /// DuckDB file, as rows are stored in key order, not reading order).
    pub fn record(&self) -> i64 {
        self.seq & ((1 << Self::RECORD_BITS) - 1)
    }
}

/// A record batch bound for one table.
#[derive(Debug)]
pub struct Batch {
    pub table: &'static str,
    pub data: RecordBatch,
}

/// A served table's row type, with its batch builder and run codec (made by `table!`); its sort
/// key and duplicate rule are its `Keyed` impl (`runs.rs`).
pub trait Served: Default + Send {
    type Batch: Default + Send;
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(&mut self, input: &mut &[u8]) -> Option<()>;
    fn push(batch: &mut Self::Batch, row: &Self, at: Provenance);
    fn take(batch: &mut Self::Batch) -> Batch;
    fn len(batch: &Self::Batch) -> usize;
}

/// A row field in a run file.
pub(crate) trait Codec {
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(&mut self, input: &mut &[u8]) -> Option<()>;
}

fn take<'a>(input: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, rest) = input.split_at_checked(n)?;
    *input = rest;
    Some(head)
}

/// Lengths are LEB128 varints: one byte below 128.
fn put_len(out: &mut Vec<u8>, mut len: usize) {
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
}

fn take_len(input: &mut &[u8]) -> Option<usize> {
    let mut len = 0usize;
    for shift in (0..64).step_by(7) {
        let byte = *take(input, 1)?.first()?;
        len |= usize::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(len);
        }
    }
    None
}

/// Reads `n` bytes of UTF-8 into `text`, reusing its allocation.
fn take_text(input: &mut &[u8], n: usize, text: &mut String) -> Option<()> {
    text.clear();
    text.push_str(std::str::from_utf8(take(input, n)?).ok()?);
    Some(())
}

impl Codec for String {
    fn encode(&self, out: &mut Vec<u8>) {
        put_len(out, self.len());
        out.extend_from_slice(self.as_bytes());
    }
    fn decode(&mut self, input: &mut &[u8]) -> Option<()> {
        let n = take_len(input)?;
        take_text(input, n, self)
    }
}

/// The length plus one, `0` for `None`.
impl Codec for Option<String> {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Some(text) => {
                put_len(out, text.len() + 1);
                out.extend_from_slice(text.as_bytes());
            }
            None => out.push(0),
        }
    }
    fn decode(&mut self, input: &mut &[u8]) -> Option<()> {
        match take_len(input)? {
            0 => *self = None,
            n => take_text(input, n - 1, self.get_or_insert_default())?,
        }
        Some(())
    }
}

impl Codec for i32 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode(&mut self, input: &mut &[u8]) -> Option<()> {
        *self = i32::from_le_bytes(take(input, 4)?.try_into().ok()?);
        Some(())
    }
}

impl Codec for i64 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode(&mut self, input: &mut &[u8]) -> Option<()> {
        *self = i64::from_le_bytes(take(input, 8)?.try_into().ok()?);
        Some(())
    }
}

impl Codec for Option<i32> {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Some(v) => {
                out.push(1);
                v.encode(out);
            }
            None => out.push(0),
        }
    }
    fn decode(&mut self, input: &mut &[u8]) -> Option<()> {
        *self = match take(input, 1)?[0] {
            0 => None,
            _ => {
                let mut v = 0;
                v.decode(input)?;
                Some(v)
            }
        };
        Some(())
    }
}

/// How a row field of type `V` becomes an Arrow column (and a DuckDB column).
trait Column<V> {
    type Builder;
    fn data_type() -> DataType;
    fn builder() -> Self::Builder;
    fn push(builder: &mut Self::Builder, value: &V);
    fn finish(builder: &mut Self::Builder) -> ArrayRef;
}

/// Text, `NULL` for `None`.
struct Text;
/// Days since 1970-01-01.
struct Date;
struct Int;
struct BigInt;
/// An exact decimal with two places, written `123.45`, as DECIMAL(18, 2).
struct Money;
/// A comma-separated list of codes, as a list of text (`[]` for `""`).
struct Codes;

impl Column<String> for Text {
    type Builder = StringBuilder;
    fn data_type() -> DataType {
        DataType::Utf8
    }
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

impl Column<Option<String>> for Text {
    type Builder = StringBuilder;
    fn data_type() -> DataType {
        DataType::Utf8
    }
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

impl Column<Option<i32>> for Date {
    type Builder = Date32Builder;
    fn data_type() -> DataType {
        DataType::Date32
    }
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

impl Column<i32> for Int {
    type Builder = Int32Builder;
    fn data_type() -> DataType {
        DataType::Int32
    }
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

impl Column<i64> for BigInt {
    type Builder = Int64Builder;
    fn data_type() -> DataType {
        DataType::Int64
    }
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

impl Column<bool> for bool {
    type Builder = BooleanBuilder;
    fn data_type() -> DataType {
        DataType::Boolean
    }
    fn builder() -> BooleanBuilder {
        BooleanBuilder::new()
    }
    fn push(b: &mut BooleanBuilder, v: &bool) {
        b.append_value(*v);
    }
    fn finish(b: &mut BooleanBuilder) -> ArrayRef {
        Arc::new(b.finish())
    }
}

impl Column<Option<String>> for Money {
    type Builder = Decimal128Builder;
    fn data_type() -> DataType {
        DataType::Decimal128(18, 2)
    }
    fn builder() -> Decimal128Builder {
        Decimal128Builder::new().with_data_type(Self::data_type())
    }
    fn push(b: &mut Decimal128Builder, v: &Option<String>) {
        b.append_option(v.as_deref().map(cents));
    }
    fn finish(b: &mut Decimal128Builder) -> ArrayRef {
        Arc::new(b.finish())
    }
}

/// `"1061004829.23"` → 106100482923. The normalizer writes exactly this form (digits, a point,
/// two places, an optional leading `-`).
fn cents(text: &str) -> i128 {
    let (negative, digits) = text.strip_prefix('-').map_or((false, text), |t| (true, t));
    let value = digits.bytes().filter(u8::is_ascii_digit).fold(0i128, |n, d| n * 10 + i128::from(d - b'0'));
    if negative { -value } else { value }
}

impl Column<String> for Codes {
    type Builder = ListBuilder<StringBuilder>;
    fn data_type() -> DataType {
        DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
    }
    fn builder() -> ListBuilder<StringBuilder> {
        ListBuilder::new(StringBuilder::new())
    }
    fn push(b: &mut ListBuilder<StringBuilder>, v: &String) {
        if !v.is_empty() {
            v.split(',').for_each(|code| b.values().append_value(code));
        }
        b.append(true);
    }
    fn finish(b: &mut ListBuilder<StringBuilder>) -> ArrayRef {
        Arc::new(b.finish())
    }
}

fn duckdb_type(t: &DataType) -> &'static str {
    match t {
        DataType::Utf8 => "VARCHAR",
        DataType::Date32 => "DATE",
        DataType::Int32 => "INTEGER",
        DataType::Int64 => "BIGINT",
        DataType::Boolean => "BOOLEAN",
        DataType::Decimal128(18, 2) => "DECIMAL(18, 2)",
        DataType::List(_) => "VARCHAR[]",
        other => unreachable!("no column of type {other}"),
    }
}

/// Columns DuckDB computes from a stored one whenever they are read (`VIRTUAL`): in the table's
/// schema for SQL (and Postgres, which gets them stored), neither stored nor appended. Each is
/// declared after the column named with it.
const GENERATED: [(&str, &str, &str); 2] = [
    ("estabelecimentos", "cnpj_basico", "cnpj_ordem VARCHAR GENERATED ALWAYS AS (substr(cnpj, 9, 4)) VIRTUAL"),
    ("estabelecimentos", "cnpj_ordem", "cnpj_dv VARCHAR GENERATED ALWAYS AS (substr(cnpj, 13, 2)) VIRTUAL"),
];

/// `CREATE TABLE` for a table with the given Arrow schema, and its generated columns.
pub(crate) fn ddl(table: &str, schema: &Schema) -> String {
    let mut cols: Vec<(&str, String)> = schema
        .fields()
        .iter()
        .map(|f| (f.name().as_str(), format!("{} {}", f.name(), duckdb_type(f.data_type()))))
        .collect();
    for (_, after, column) in GENERATED.iter().filter(|(t, _, _)| *t == table) {
        let at =
            cols.iter().position(|(name, _)| name == after).expect("a generated column follows a column of its table");
        let name = column.split(' ').next().expect("a column definition starts with its name");
        cols.insert(at + 1, (name, (*column).to_owned()));
    }
    format!("CREATE TABLE {table} ({})", cols.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>().join(", "))
}

/// The column kind a field type gets unless its table says otherwise.
trait Plain: Sized {
    type Col: Column<Self>;
}
impl Plain for String {
    type Col = Text;
}
impl Plain for Option<String> {
    type Col = Text;
}
impl Plain for Option<i32> {
    type Col = Date;
}
impl Plain for i32 {
    type Col = Int;
}
impl Plain for i64 {
    type Col = BigInt;
}
impl Plain for bool {
    type Col = bool;
}

macro_rules! col {
    ($ty:ty) => {
        <$ty as Plain>::Col
    };
    ($ty:ty, $col:ty) => {
        $col
    };
}

/// A batch builder per table: `served` tables get the provenance columns (`source_file`, `seq`)
/// and a run codec for their rows; the others are staging tables for small inputs.
macro_rules! table {
    ($(#[$doc:meta])* $batch:ident, $row:ty, $table:literal,
     [$($field:ident: $ty:ty $(as $col:ty)?),* $(,)?] $(, $served:ident)?) => {
        $(#[$doc])*
        pub struct $batch {
            $($field: <col!($ty $(, $col)?) as Column<$ty>>::Builder,)*
            $($served: (Int32Builder, Int64Builder),)?
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
                    $($field: <col!($ty $(, $col)?) as Column<$ty>>::builder(),)*
                    $($served: (Int32Builder::new(), Int64Builder::new()),)?
                    len: 0,
                }
            }
        }

        // Not every table's builder uses every method.
        #[allow(dead_code)]
        impl $batch {
            pub const TABLE: &'static str = $table;

            pub fn schema() -> Schema {
                #[allow(unused_mut)]
                let mut fields =
                    vec![$(Field::new(stringify!($field), <col!($ty $(, $col)?) as Column<$ty>>::data_type(), true)),*];
                $(
                let _ = stringify!($served);
                fields.push(Field::new("source_file", DataType::Int32, false));
                fields.push(Field::new("seq", DataType::Int64, false));
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
                #[allow(unused_mut)]
                let mut columns: Vec<ArrayRef> =
                    vec![$(<col!($ty $(, $col)?) as Column<$ty>>::finish(&mut self.$field),)*];
                $(
                columns.push(Arc::new(self.$served.0.finish()));
                columns.push(Arc::new(self.$served.1.finish()));
                )?
                self.len = 0;
                let data = RecordBatch::try_new(Arc::new(Self::schema()), columns).expect("columns match the schema");
                Batch { table: $table, data }
            }
        }

        table!(@push $batch, $row, [$($field: $ty $(as $col)?),*] $(, $served)?);
    };
    (@push $batch:ident, $row:ty, [$($field:ident: $ty:ty $(as $col:ty)?),*], $served:ident) => {
        impl $batch {
            pub fn push(&mut self, row: &$row, at: Provenance) {
                $(<col!($ty $(, $col)?) as Column<$ty>>::push(&mut self.$field, &row.$field);)*
                self.$served.0.append_value(at.source_file);
                self.$served.1.append_value(at.record());
                self.len += 1;
            }
        }

        impl Served for $row {
            type Batch = $batch;
            fn encode(&self, out: &mut Vec<u8>) {
                $(Codec::encode(&self.$field, out);)*
            }
            fn decode(&mut self, input: &mut &[u8]) -> Option<()> {
                $(Codec::decode(&mut self.$field, input)?;)*
                Some(())
            }
            fn push(batch: &mut $batch, row: &Self, at: Provenance) {
                batch.push(row, at);
            }
            fn take(batch: &mut $batch) -> Batch {
                batch.take()
            }
            fn len(batch: &$batch) -> usize {
                batch.len()
            }
        }
    };
    (@push $batch:ident, $row:ty, [$($field:ident: $ty:ty $(as $col:ty)?),*]) => {
        impl $batch {
            pub fn push(&mut self, row: &$row) {
                $(<col!($ty $(, $col)?) as Column<$ty>>::push(&mut self.$field, &row.$field);)*
                self.len += 1;
            }
        }
    };
}

table!(
    /// Empresas rows.
    EmpresaBatch, EmpresaRow, "empresas",
    [
        cnpj_basico: String, razao_social: String, razao_social_fold: String, natureza_juridica: String,
        qualificacao_responsavel: String, capital_social: Option<String> as Money, porte_empresa: String,
        ente_federativo_responsavel: String,
    ],
    served
);

table!(
    /// Estabelecimentos rows.
    EstabelecimentoBatch, EstabelecimentoRow, "estabelecimentos",
    [
        cnpj: String, cnpj_basico: String, matriz_filial: String,
        nome_fantasia: String, nome_fantasia_fold: String, situacao_cadastral: String,
        data_situacao_cadastral: Option<i32>, motivo_situacao_cadastral: String, nome_cidade_exterior: String,
        pais: String, data_inicio_atividade: Option<i32>, cnae_fiscal: String, cnaes_secundarios: String as Codes,
        logradouro: String, numero: String, complemento: String, bairro: String, bairro_fold: String,
        cep: String, uf: String, municipio: String, ddd_1: String, telefone_1: String, ddd_2: String,
        telefone_2: String, ddd_fax: String, fax: String, email: String, situacao_especial: String,
        data_situacao_especial: Option<i32>,
    ],
    served
);

table!(
    /// Socios rows.
    SocioBatch, SocioRow, "socios",
    [
        cnpj_basico: String, tipo: String, nome: String, documento: String, qualificacao: String,
        data_entrada: Option<i32>, pais: String, representante_legal: String, nome_representante: String,
        qualificacao_representante: String, faixa_etaria: String, partner_id: String, partner_basico: String,
    ],
    served
);

table!(
    /// Simples rows.
    SimplesBatch, SimplesRow, "simples",
    [
        cnpj_basico: String, opcao_simples: String, data_opcao_simples: Option<i32>,
        data_exclusao_simples: Option<i32>, opcao_mei: String, data_opcao_mei: Option<i32>,
        data_exclusao_mei: Option<i32>,
    ],
    served
);

table!(
    /// Tax-regime rows: every year of every company's regime.
    RegimeBatch, RegimeRow, "regimes_tributarios",
    [cnpj_basico: String, cnpj: String, ano: i32, regime: String],
    served
);

table!(
    /// Later occurrences of a key, each with the file and position it was read at.
    DuplicateBatch, DuplicateRow, "duplicates",
    [tabela: String, chave: String, source_file: i32, seq: i64, differs_from_winner: bool]
);

table!(
    /// Rejected records.
    RejectBatch, RejectRow, "stg_rejects",
    [source_file: i32, line: i64, reason: String, record: String]
);

table!(
    /// Municipalities of the month.
    MunicipioBatch, MunicipioRow, "stg_municipios",
    [code: String, name: String, uf: String, ibge: Option<String>]
);

table!(
    /// This month's changes, before their company events get a head office (see
    /// `Loader::record_changes`).
    ChangeBatch, ChangeRow, "stg_changes",
    [
        cnpj: Option<String>, cnpj_basico: String, event: String, field: Option<String>, old: Option<String>,
        new: Option<String>, uf: Option<String>, municipio: Option<String>, cnae: Option<String>,
    ]
);

/// A later occurrence of a key (the `duplicates` table).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DuplicateRow {
    pub tabela: String,
    pub chave: String,
    pub source_file: i32,
    pub seq: i64,
    /// Its raw record differs from the one that won.
    pub differs_from_winner: bool,
}

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

/// Every table the loader creates before the input is read. None is `TEMP`: the loader's
/// sessions (other connections) append to them too. The staging tables (`stg_*`, small inputs)
/// are dropped by the transform.
pub(crate) fn tables() -> Vec<(&'static str, Schema)> {
    vec![
        (EmpresaBatch::TABLE, EmpresaBatch::schema()),
        (EstabelecimentoBatch::TABLE, EstabelecimentoBatch::schema()),
        (SocioBatch::TABLE, SocioBatch::schema()),
        (SimplesBatch::TABLE, SimplesBatch::schema()),
        (RegimeBatch::TABLE, RegimeBatch::schema()),
        (DuplicateBatch::TABLE, DuplicateBatch::schema()),
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
            ddl(RegimeBatch::TABLE, &RegimeBatch::schema()),
            "CREATE TABLE regimes_tributarios (cnpj_basico VARCHAR, cnpj VARCHAR, ano INTEGER, regime VARCHAR, \
             source_file INTEGER, seq BIGINT)"
        );
        assert_eq!(
            ddl(MunicipioBatch::TABLE, &MunicipioBatch::schema()),
            "CREATE TABLE stg_municipios (code VARCHAR, name VARCHAR, uf VARCHAR, ibge VARCHAR)"
        );
        let empresas = ddl(EmpresaBatch::TABLE, &EmpresaBatch::schema());
        assert!(empresas.contains("capital_social DECIMAL(18, 2)"), "{empresas}");
        let estabelecimentos = ddl(EstabelecimentoBatch::TABLE, &EstabelecimentoBatch::schema());
        assert!(estabelecimentos.contains("cnaes_secundarios VARCHAR[]"), "{estabelecimentos}");
        assert!(
            estabelecimentos.starts_with(
                "CREATE TABLE estabelecimentos (cnpj VARCHAR, cnpj_basico VARCHAR, \
                 cnpj_ordem VARCHAR GENERATED ALWAYS AS (substr(cnpj, 9, 4)) VIRTUAL, \
                 cnpj_dv VARCHAR GENERATED ALWAYS AS (substr(cnpj, 13, 2)) VIRTUAL, matriz_filial VARCHAR,"
            ),
            "{estabelecimentos}"
        );
    }

    #[test]
    fn take_empties_the_builder() {
        let mut b = SimplesBatch::default();
        let row = SimplesRow { cnpj_basico: "11222333".into(), opcao_simples: "S".into(), ..Default::default() };
        b.push(&row, Provenance { source_file: 1, seq: 7, row_hash: 9 });
        b.push(&row, Provenance { source_file: 1, seq: 8, row_hash: 9 });
        let batch = b.take();
        assert_eq!((batch.table, batch.data.num_rows(), batch.data.num_columns()), ("simples", 2, 9));
        assert!(b.is_empty());
        assert_eq!(b.take().data.num_rows(), 0);
    }

    #[test]
    fn provenance_is_stored_as_file_and_record() {
        let mut b = SimplesBatch::default();
        let row = SimplesRow { cnpj_basico: "11222333".into(), ..Default::default() };
        let (early, late) = (Provenance::read(3, (1 << 39) + 5, 0), Provenance::read(4, 2, 0));
        assert!(early.seq < late.seq, "reading order: file first, then record");
        b.push(&row, early);
        b.push(&row, late);
        let data = b.take().data;
        let column = |name: &str| data.column_by_name(name).unwrap().clone();
        let files = column("source_file");
        let records = column("seq");
        assert_eq!(files.as_any().downcast_ref::<arrow::array::Int32Array>().unwrap().values(), &[3, 4]);
        assert_eq!(records.as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().values(), &[(1 << 39) + 5, 2]);
    }

    fn check_cents(text: &str, expected: i128) {
        assert_eq!(cents(text), expected, "{text}");
    }

    #[test]
    fn capital_becomes_cents() {
        check_cents("1061004829.23", 106_100_482_923);
        check_cents("0.00", 0);
        check_cents("-10.50", -1050);
        check_cents("9999999999999999.99", 999_999_999_999_999_999);
    }

    #[test]
    fn secondary_codes_become_a_list() {
        let mut b = <Codes as Column<String>>::builder();
        for v in ["", "4711302,4712100"] {
            <Codes as Column<String>>::push(&mut b, &v.to_owned());
        }
        let list = <Codes as Column<String>>::finish(&mut b);
        let list = list.as_any().downcast_ref::<arrow::array::ListArray>().expect("a list");
        assert_eq!((list.value_length(0), list.value_length(1)), (0, 2));
    }

    fn check<T: Codec + Default + PartialEq + std::fmt::Debug>(value: T) {
        let mut bytes = Vec::new();
        value.encode(&mut bytes);
        let mut input = bytes.as_slice();
        let mut back = T::default();
        back.decode(&mut input).unwrap();
        assert_eq!((back, input.len()), (value, 0));
    }

    #[test]
    fn fields_survive_a_run() {
        check(String::from("Açúcar"));
        check(String::new());
        check(Some(String::new()));
        check(None::<String>);
        check(Some(-3_i32));
        check(None::<i32>);
        check(i32::MIN);
        check(i64::MIN);
        check("x".repeat(300));
        check(Some("y".repeat(20_000)));
        let mut row = EstabelecimentoRow { cnpj: "11222333000181".into(), ..Default::default() };
        row.data_inicio_atividade = Some(12_000);
        let mut bytes = Vec::new();
        row.encode(&mut bytes);
        let mut back = EstabelecimentoRow::default();
        back.decode(&mut bytes.as_slice()).unwrap();
        assert_eq!(back, row);
        assert!(back.decode(&mut &bytes[..bytes.len() - 1]).is_none(), "a truncated record is an error");
    }
}
