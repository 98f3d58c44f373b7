-- Views for analysts, created by the build at the end of the load (after transform.sql): the
-- served tables joined into the shapes people query, with every code's label in one locale.
-- Documented column by column in README.md ("SQL for analysts").
--
-- Table macros take the locale ('pt-br', 'en' or 'es'); a view per locale calls them, so that
-- `FROM establishments_en` needs no argument and no filter. Two layers:
-- - `companies_in`, `establishment_labels_in`, `partner_labels_in`, `partner_identities_in`,
--   `partner_links_in`: one served table each, with the labels of its codes (and the municipality
--   of an establishment). They join only small tables (`labels`, `municipios`), so a scan of them
--   streams in bounded memory: `cnpj-etl export` writes its tables from them.
-- - `establishments_in`, `partners_in` (and the views): those with their company's columns
--   (a join on `cnpj_basico` with the companies, a hash table of every company when the whole
--   table is read).
-- Every row is kept: a code without a label (an unknown code keeps its code) or an establishment or
-- partner without its company has NULL there. Secondary CNAEs are labelled in list order
-- through a map of the locale's CNAE labels (one row, cross-joined); the other labels are
-- equality joins on the small `labels` table.

CREATE MACRO companies_in(lang) AS TABLE
SELECT
    c.cnpj_basico, c.razao_social,
    c.natureza_juridica, nj.descricao AS natureza_juridica_descricao,
    c.qualificacao_responsavel, qr.descricao AS qualificacao_responsavel_descricao,
    c.capital_social,
    c.porte_empresa, pe.descricao AS porte_empresa_descricao,
    c.ente_federativo_responsavel
FROM empresas c
LEFT JOIN labels nj ON nj.tabela = 'naturezas' AND nj.locale = lang AND nj.codigo = c.natureza_juridica
LEFT JOIN labels qr ON qr.tabela = 'qualificacoes' AND qr.locale = lang AND qr.codigo = c.qualificacao_responsavel
LEFT JOIN labels pe ON pe.tabela = 'porte_empresa' AND pe.locale = lang AND pe.codigo = c.porte_empresa;

CREATE MACRO establishment_labels_in(lang) AS TABLE
WITH cnaes AS (
    SELECT map(list(codigo), list(descricao)) AS label FROM labels WHERE tabela = 'cnaes' AND locale = lang
)
SELECT
    e.cnpj, e.cnpj_basico, e.cnpj_ordem, e.cnpj_dv,
    e.matriz_filial, mf.descricao AS matriz_filial_descricao,
    e.nome_fantasia,
    e.situacao_cadastral, sc.descricao AS situacao_cadastral_descricao, e.data_situacao_cadastral,
    e.motivo_situacao_cadastral, mo.descricao AS motivo_situacao_cadastral_descricao,
    e.situacao_especial, e.data_situacao_especial,
    e.data_inicio_atividade,
    e.cnae_fiscal, cn.descricao AS cnae_fiscal_descricao,
    e.cnaes_secundarios,
    list_transform(e.cnaes_secundarios, code -> cnaes.label[code]) AS cnaes_secundarios_descricao,
    e.logradouro, e.numero, e.complemento, e.bairro, e.cep, e.uf,
    e.municipio, m.name AS municipio_nome, m.ibge AS municipio_ibge,
    e.nome_cidade_exterior, e.pais, pa.descricao AS pais_descricao,
    e.ddd_1, e.telefone_1, e.ddd_2, e.telefone_2, e.ddd_fax, e.fax, e.email
FROM estabelecimentos e
CROSS JOIN cnaes
LEFT JOIN municipios m ON m.code = e.municipio
LEFT JOIN labels mf ON mf.tabela = 'matriz_filial' AND mf.locale = lang AND mf.codigo = e.matriz_filial
LEFT JOIN labels sc ON sc.tabela = 'situacao_cadastral' AND sc.locale = lang AND sc.codigo = e.situacao_cadastral
LEFT JOIN labels mo ON mo.tabela = 'motivos' AND mo.locale = lang AND mo.codigo = e.motivo_situacao_cadastral
LEFT JOIN labels cn ON cn.tabela = 'cnaes' AND cn.locale = lang AND cn.codigo = e.cnae_fiscal
LEFT JOIN labels pa ON pa.tabela = 'paises' AND pa.locale = lang AND pa.codigo = e.pais;

CREATE MACRO partner_labels_in(lang) AS TABLE
SELECT
    s.cnpj_basico,
    s.tipo, ts.descricao AS tipo_descricao,
    s.nome, s.documento,
    s.qualificacao, q.descricao AS qualificacao_descricao,
    s.data_entrada,
    s.faixa_etaria, fe.descricao AS faixa_etaria_descricao,
    s.pais, pa.descricao AS pais_descricao,
    s.representante_legal, s.nome_representante,
    s.qualificacao_representante, qr.descricao AS qualificacao_representante_descricao
FROM socios s
LEFT JOIN labels ts ON ts.tabela = 'tipo_socio' AND ts.locale = lang AND ts.codigo = s.tipo
LEFT JOIN labels q ON q.tabela = 'qualificacoes' AND q.locale = lang AND q.codigo = s.qualificacao
LEFT JOIN labels fe ON fe.tabela = 'faixa_etaria' AND fe.locale = lang AND fe.codigo = s.faixa_etaria
LEFT JOIN labels pa ON pa.tabela = 'paises' AND pa.locale = lang AND pa.codigo = s.pais
LEFT JOIN labels qr ON qr.tabela = 'qualificacoes' AND qr.locale = lang AND qr.codigo = s.qualificacao_representante;

CREATE MACRO establishments_in(lang) AS TABLE
SELECT
    e.cnpj, e.cnpj_basico, e.cnpj_ordem, e.cnpj_dv,
    e.matriz_filial, e.matriz_filial_descricao,
    c.razao_social, e.nome_fantasia,
    e.situacao_cadastral, e.situacao_cadastral_descricao, e.data_situacao_cadastral,
    e.motivo_situacao_cadastral, e.motivo_situacao_cadastral_descricao,
    e.situacao_especial, e.data_situacao_especial,
    e.data_inicio_atividade,
    e.cnae_fiscal, e.cnae_fiscal_descricao,
    e.cnaes_secundarios, e.cnaes_secundarios_descricao,
    c.natureza_juridica, c.natureza_juridica_descricao,
    c.porte_empresa, c.porte_empresa_descricao,
    c.capital_social, c.ente_federativo_responsavel,
    e.logradouro, e.numero, e.complemento, e.bairro, e.cep, e.uf,
    e.municipio, e.municipio_nome, e.municipio_ibge,
    e.nome_cidade_exterior, e.pais, e.pais_descricao,
    e.ddd_1, e.telefone_1, e.ddd_2, e.telefone_2, e.ddd_fax, e.fax, e.email
FROM establishment_labels_in(lang) e
LEFT JOIN companies_in(lang) c ON c.cnpj_basico = e.cnpj_basico;

CREATE MACRO partners_in(lang) AS TABLE
SELECT
    s.cnpj_basico, c.razao_social,
    c.natureza_juridica, c.natureza_juridica_descricao,
    c.porte_empresa, c.porte_empresa_descricao, c.capital_social,
    s.* EXCLUDE (cnpj_basico)
FROM partner_labels_in(lang) s
LEFT JOIN companies_in(lang) c ON c.cnpj_basico = s.cnpj_basico;

-- Partners as identities (contract §14; `partner_identities`, `partner_links`: see transform.sql),
-- one table each with the labels of its codes, like the layer above: a partner with its type's and
-- country's labels; a link of a partner to a company with its qualificação's label.
CREATE MACRO partner_identities_in(lang) AS TABLE
SELECT
    i.partner_id,
    i.tipo, ts.descricao AS tipo_descricao,
    i.nome, i.nome_busca, i.documento,
    i.pais, pa.descricao AS pais_descricao,
    i.partner_basico, i.companies, i.first_entry
FROM partner_identities i
LEFT JOIN labels ts ON ts.tabela = 'tipo_socio' AND ts.locale = lang AND ts.codigo = i.tipo
LEFT JOIN labels pa ON pa.tabela = 'paises' AND pa.locale = lang AND pa.codigo = i.pais;

CREATE MACRO partner_links_in(lang) AS TABLE
SELECT
    l.partner_id, l.cnpj_basico,
    l.qualificacao, q.descricao AS qualificacao_descricao,
    l.data_entrada
FROM partner_links l
LEFT JOIN labels q ON q.tabela = 'qualificacoes' AND q.locale = lang AND q.codigo = l.qualificacao;

CREATE VIEW companies_pt_br AS SELECT * FROM companies_in('pt-br');
CREATE VIEW companies_en AS SELECT * FROM companies_in('en');
CREATE VIEW companies_es AS SELECT * FROM companies_in('es');
CREATE VIEW establishments_pt_br AS SELECT * FROM establishments_in('pt-br');
CREATE VIEW establishments_en AS SELECT * FROM establishments_in('en');
CREATE VIEW establishments_es AS SELECT * FROM establishments_in('es');
CREATE VIEW partners_pt_br AS SELECT * FROM partners_in('pt-br');
CREATE VIEW partners_en AS SELECT * FROM partners_in('en');
CREATE VIEW partners_es AS SELECT * FROM partners_in('es');
CREATE VIEW partner_identities_pt_br AS SELECT * FROM partner_identities_in('pt-br');
CREATE VIEW partner_identities_en AS SELECT * FROM partner_identities_in('en');
CREATE VIEW partner_identities_es AS SELECT * FROM partner_identities_in('es');
CREATE VIEW partner_links_pt_br AS SELECT * FROM partner_links_in('pt-br');
CREATE VIEW partner_links_en AS SELECT * FROM partner_links_in('en');
CREATE VIEW partner_links_es AS SELECT * FROM partner_links_in('es');
