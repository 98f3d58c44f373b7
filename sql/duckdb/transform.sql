-- Finishes a registry dataset once the loader has merged the main tables (one row per key, the
-- first in reading order; later occurrences in `duplicates`; see
-- crates/cnpj-load/src/runs.rs): the small inputs appended to staging tables become their
-- served tables, sorted.
CREATE TABLE labels AS SELECT * FROM stg_labels ORDER BY tabela, codigo, locale;
CREATE TABLE municipios AS SELECT * FROM stg_municipios ORDER BY code;
CREATE TABLE rejects AS SELECT * FROM stg_rejects ORDER BY source_file, line;

-- Partners (contract §14): each `socios` row carries its partner's `partner_id` (and, for a legal
-- entity, the company it is, `partner_basico`), computed by the normalizer from the raw document
-- (crates/cnpj-model/src/partner.rs). `partner_identities`, one row per partner, is made before
-- this from the sorted links (crates/cnpj-load/src/partners.rs). `partner_links`, one row per
-- `socios` row, is a view of it: a table of its own took 590 MB at a full month and a sort of
-- every row, to spare a scan that only SQL by partner makes (the API reads a partner's links from
-- the lookup file).
CREATE VIEW partner_links AS SELECT partner_id, cnpj_basico, qualificacao, data_entrada FROM socios;

DROP TABLE stg_labels;
DROP TABLE stg_municipios;
DROP TABLE stg_rejects;

-- No ART indexes: they took 60 % of the file and a tenth of the build. Point lookups read the
-- lookup file written after the build (cnpj-store); SQL by key still prunes row groups through
-- the zone maps of the key-sorted tables.
