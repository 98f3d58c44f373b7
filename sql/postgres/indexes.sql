-- Constraints and indexes of a Postgres registry dataset, created after the COPY (one pass over
-- each table instead of one insert per row), then ANALYZE. Each search filter has an index:
-- equality filters are paired with cnpj so that a page in CNPJ order can be read off the index;
-- the folded text filters use trigram GIN indexes (pg_trgm), which serve `LIKE '%term%'`.
-- The plans, as EXPLAIN prints them, are in docs/postgres-plans.md.

ALTER TABLE estabelecimentos ADD PRIMARY KEY (cnpj);
ALTER TABLE empresas ADD PRIMARY KEY (cnpj_basico);
ALTER TABLE simples ADD PRIMARY KEY (cnpj_basico);
ALTER TABLE labels ADD PRIMARY KEY (tabela, codigo, locale);
ALTER TABLE municipios ADD PRIMARY KEY (code);
ALTER TABLE source_files ADD PRIMARY KEY (id);
ALTER TABLE metadata ADD PRIMARY KEY (key);

CREATE INDEX estabelecimentos_basico ON estabelecimentos (cnpj_basico, cnpj_ordem);
CREATE INDEX socios_basico ON socios (cnpj_basico);
ALTER TABLE partner_identities ADD PRIMARY KEY (partner_id);
-- A partner's links (`partner_links` is a view of socios).
CREATE INDEX socios_partner ON socios (partner_id);
CREATE INDEX regimes_tributarios_basico ON regimes_tributarios (cnpj_basico, ano DESC, source_file, seq);

-- Search filters.
CREATE INDEX estabelecimentos_cnae ON estabelecimentos (cnae_fiscal, cnpj);
CREATE INDEX estabelecimentos_uf ON estabelecimentos (uf, cnpj);
CREATE INDEX estabelecimentos_municipio ON estabelecimentos (municipio, cnpj);
CREATE INDEX estabelecimentos_situacao ON estabelecimentos (situacao_cadastral, cnpj);
CREATE INDEX estabelecimentos_inicio ON estabelecimentos (data_inicio_atividade);
-- COLLATE "C" text: a btree serves the prefix match `cep LIKE '01310%'`.
CREATE INDEX estabelecimentos_cep ON estabelecimentos (cep);
CREATE INDEX estabelecimentos_bairro_trgm ON estabelecimentos USING gin (bairro_fold gin_trgm_ops);
CREATE INDEX estabelecimentos_nome_fantasia_trgm ON estabelecimentos USING gin (nome_fantasia_fold gin_trgm_ops);
CREATE INDEX empresas_razao_social_trgm ON empresas USING gin (razao_social_fold gin_trgm_ops);
CREATE INDEX empresas_porte ON empresas (porte_empresa);
CREATE INDEX empresas_natureza ON empresas (natureza_juridica);
-- The partners' search (cnpj-store/src/partners.rs): a name by trigrams, the order of a page, a
-- legal entity by its company.
CREATE INDEX partner_identities_nome_trgm ON partner_identities USING gin (nome_busca gin_trgm_ops);
CREATE INDEX partner_identities_order ON partner_identities (nome_busca, partner_id);
CREATE INDEX partner_identities_basico ON partner_identities (partner_basico);

-- Changes. Pages come in the served order off (month, cnpj, cnpj_basico), the rest
-- of the order (event, field, old, new) by an incremental sort of equal keys. A CNPJ filter and a company's
-- history use cnpj_basico, and each other filter has the month beside it, so that a month or
-- `since` bounds it. (No semicolon in these comments: the file is split on them.)
CREATE INDEX changes_order ON changes (month, cnpj, cnpj_basico);
CREATE INDEX changes_basico ON changes (cnpj_basico, month);
CREATE INDEX changes_event ON changes (event, month);
CREATE INDEX changes_uf ON changes (uf, month);
CREATE INDEX changes_municipio ON changes (municipio, month);
CREATE INDEX changes_cnae ON changes (cnae, month);
