-- The served tables of a registry dataset in Postgres, created UNLOGGED in a fresh schema (the
-- session's search_path) and filled by binary COPY from the built DuckDB dataset; see
-- crates/cnpj-load/src/postgres.rs. Same columns and values as sql/duckdb/transform.sql.
-- Text is compared and sorted byte-wise (COLLATE "C"), as DuckDB does, so that every ORDER BY
-- of the API gives the same order on both backends. Autovacuum is off while the tables are
-- loaded (the publication runs VACUUM (FREEZE, ANALYZE) itself, then turns it back on).

CREATE UNLOGGED TABLE empresas (
    cnpj_basico text COLLATE "C" NOT NULL,
    razao_social text COLLATE "C" NOT NULL,
    razao_social_fold text COLLATE "C" NOT NULL,
    natureza_juridica text COLLATE "C" NOT NULL,
    qualificacao_responsavel text COLLATE "C" NOT NULL,
    capital_social numeric(18, 2),
    porte_empresa text COLLATE "C" NOT NULL,
    ente_federativo_responsavel text COLLATE "C" NOT NULL,
    source_file integer NOT NULL,
    seq bigint NOT NULL
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE estabelecimentos (
    cnpj text COLLATE "C" NOT NULL,
    cnpj_basico text COLLATE "C" NOT NULL,
    cnpj_ordem text COLLATE "C" NOT NULL,
    cnpj_dv text COLLATE "C" NOT NULL,
    matriz_filial text COLLATE "C" NOT NULL,
    nome_fantasia text COLLATE "C" NOT NULL,
    nome_fantasia_fold text COLLATE "C" NOT NULL,
    situacao_cadastral text COLLATE "C" NOT NULL,
    data_situacao_cadastral date,
    motivo_situacao_cadastral text COLLATE "C" NOT NULL,
    nome_cidade_exterior text COLLATE "C" NOT NULL,
    pais text COLLATE "C" NOT NULL,
    data_inicio_atividade date,
    cnae_fiscal text COLLATE "C" NOT NULL,
    cnaes_secundarios text[] COLLATE "C" NOT NULL,
    logradouro text COLLATE "C" NOT NULL,
    numero text COLLATE "C" NOT NULL,
    complemento text COLLATE "C" NOT NULL,
    bairro text COLLATE "C" NOT NULL,
    bairro_fold text COLLATE "C" NOT NULL,
    cep text COLLATE "C" NOT NULL,
    uf text COLLATE "C" NOT NULL,
    municipio text COLLATE "C" NOT NULL,
    ddd_1 text COLLATE "C" NOT NULL,
    telefone_1 text COLLATE "C" NOT NULL,
    ddd_2 text COLLATE "C" NOT NULL,
    telefone_2 text COLLATE "C" NOT NULL,
    ddd_fax text COLLATE "C" NOT NULL,
    fax text COLLATE "C" NOT NULL,
    email text COLLATE "C" NOT NULL,
    situacao_especial text COLLATE "C" NOT NULL,
    data_situacao_especial date,
    source_file integer NOT NULL,
    seq bigint NOT NULL
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE socios (
    cnpj_basico text COLLATE "C" NOT NULL,
    tipo text COLLATE "C" NOT NULL,
    nome text COLLATE "C" NOT NULL,
    documento text COLLATE "C" NOT NULL,
    qualificacao text COLLATE "C" NOT NULL,
    data_entrada date,
    pais text COLLATE "C" NOT NULL,
    representante_legal text COLLATE "C" NOT NULL,
    nome_representante text COLLATE "C" NOT NULL,
    qualificacao_representante text COLLATE "C" NOT NULL,
    faixa_etaria text COLLATE "C" NOT NULL,
    partner_id text COLLATE "C" NOT NULL,
    partner_basico text COLLATE "C" NOT NULL,
    source_file integer NOT NULL,
    seq bigint NOT NULL
) WITH (autovacuum_enabled = false);

-- Partners (contract §14): one row per partner, and a view of one row per socios row (see
-- sql/duckdb/transform.sql).
CREATE VIEW partner_links AS SELECT partner_id, cnpj_basico, qualificacao, data_entrada FROM socios;

CREATE UNLOGGED TABLE partner_identities (
    partner_id text COLLATE "C" NOT NULL,
    tipo text COLLATE "C" NOT NULL,
    nome text COLLATE "C" NOT NULL,
    nome_busca text COLLATE "C" NOT NULL,
    documento text COLLATE "C" NOT NULL,
    pais text COLLATE "C" NOT NULL,
    partner_basico text COLLATE "C" NOT NULL,
    companies bigint NOT NULL,
    first_entry date
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE simples (
    cnpj_basico text COLLATE "C" NOT NULL,
    opcao_simples text COLLATE "C" NOT NULL,
    data_opcao_simples date,
    data_exclusao_simples date,
    opcao_mei text COLLATE "C" NOT NULL,
    data_opcao_mei date,
    data_exclusao_mei date,
    source_file integer NOT NULL,
    seq bigint NOT NULL
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE regimes_tributarios (
    cnpj_basico text COLLATE "C" NOT NULL,
    cnpj text COLLATE "C" NOT NULL,
    ano integer NOT NULL,
    regime text COLLATE "C" NOT NULL,
    source_file integer NOT NULL,
    seq bigint NOT NULL
) WITH (autovacuum_enabled = false);

-- Month over month: one row per change event; old/new are JSON text.
CREATE UNLOGGED TABLE changes (
    month text COLLATE "C" NOT NULL,
    cnpj text COLLATE "C",
    cnpj_basico text COLLATE "C" NOT NULL,
    event text COLLATE "C" NOT NULL,
    field text COLLATE "C",
    old text COLLATE "C",
    new text COLLATE "C",
    uf text COLLATE "C",
    municipio text COLLATE "C",
    cnae text COLLATE "C"
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE labels (
    tabela text COLLATE "C" NOT NULL,
    codigo text COLLATE "C" NOT NULL,
    locale text COLLATE "C" NOT NULL,
    descricao text COLLATE "C" NOT NULL
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE municipios (
    code text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    uf text COLLATE "C" NOT NULL,
    ibge text COLLATE "C"
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE rejects (
    source_file integer NOT NULL,
    line bigint NOT NULL,
    reason text COLLATE "C" NOT NULL,
    record text COLLATE "C" NOT NULL
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE duplicates (
    tabela text COLLATE "C" NOT NULL,
    chave text COLLATE "C" NOT NULL,
    source_file integer NOT NULL,
    seq bigint NOT NULL,
    differs_from_winner boolean NOT NULL
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE source_files (
    id integer NOT NULL,
    zip text COLLATE "C" NOT NULL,
    member text COLLATE "C" NOT NULL,
    kind text COLLATE "C" NOT NULL,
    rows_read bigint NOT NULL,
    rows_loaded bigint NOT NULL,
    duplicates bigint NOT NULL,
    duplicates_differing bigint NOT NULL,
    rows_rejected bigint NOT NULL
) WITH (autovacuum_enabled = false);

CREATE UNLOGGED TABLE metadata (
    key text COLLATE "C" NOT NULL,
    value text COLLATE "C" NOT NULL
) WITH (autovacuum_enabled = false);
