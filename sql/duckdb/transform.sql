-- Finishes a registry dataset once the loader has merged the main tables (one row per key, the
-- first in reading order; later occurrences in `duplicates`; see
-- crates/cnpj-load/src/runs.rs): the small inputs appended to staging tables become their
-- served tables, sorted.
CREATE TABLE labels AS SELECT * FROM stg_labels ORDER BY tabela, codigo, locale;
CREATE TABLE municipios AS SELECT * FROM stg_municipios ORDER BY code;
CREATE TABLE rejects AS SELECT * FROM stg_rejects ORDER BY source_file, line;

-- Partners (contract §14): each `socios` row carries its partner's `partner_id` (and, for a legal
-- entity, the company it is, `partner_basico`), computed by the normalizer from the raw document
-- (crates/cnpj-model/src/partner.rs). Two tables make partners first-class:
-- - `partner_links`: one row per `socios` row (the reconciliation checks it), ordered by partner
--   and company so that a partner's rows sit together (the zone maps prune the rest).
-- - `partner_identities`: one row per partner. Of the identity's rows, `nome` is the smallest by
--   byte order and `documento` and `pais` the smallest that is not empty (deterministic: the same
--   rows, the same values); `nome_busca` is that name folded as search folds text. Ordered by
--   `partner_id`, so that the zone maps find a partner by its id (cnpj-store reads it so; a
--   search by name scans the table whatever its order).
-- The fold of §5 (cnpj_model::fold: NFKD, marks removed, lower case) on the only characters a
-- name can hold (Latin-1, as the dump is decoded, with no white space but the space), each folded
-- alone, as NFKD folds them; a test in crates/cnpj-load/src/loader.rs checks every one of them
-- against the Rust function. DuckDB's `strip_accents(lower(…))` folds every one of them alike but
-- the compatibility characters (`ª`, `²`, `¼`…), which a name seldom holds: those names take the
-- character table (`translate` with a long table costs about 20 times as much: 17 µs a name).
CREATE TEMP MACRO latin1_fold(s) AS CASE WHEN regexp_matches(s, '[¨ª¯²³´µ¸¹º¼½¾]')
    THEN replace(replace(replace(translate(s,
        'ABCDEFGHIJKLMNOPQRSTUVWXYZ¨ª¯²³´µ¸¹ºÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÐÑÒÓÔÕÖØÙÚÛÜÝÞàáâãäåçèéêëìíîïñòóôõöùúûüýÿ',
        'abcdefghijklmnopqrstuvwxyz a 23 μ 1oaaaaaaæceeeeiiiiðnoooooøuuuuyþaaaaaaceeeeiiiinooooouuuuyy'),
        '¼', '1⁄4'), '½', '1⁄2'), '¾', '3⁄4')
    ELSE strip_accents(lower(s)) END;
CREATE TABLE partner_links AS
SELECT partner_id, cnpj_basico, qualificacao, data_entrada
FROM socios
ORDER BY partner_id, cnpj_basico, qualificacao, data_entrada;
CREATE TABLE partner_identities AS
SELECT partner_id, tipo, nome, latin1_fold(nome) AS nome_busca, documento, pais, partner_basico, companies, first_entry
FROM (
    SELECT partner_id, min(tipo) AS tipo, min(nome) AS nome,
           coalesce(min(documento) FILTER (WHERE documento <> ''), '') AS documento,
           coalesce(min(pais) FILTER (WHERE pais <> ''), '') AS pais,
           max(partner_basico) AS partner_basico,
           count(DISTINCT cnpj_basico) AS companies, min(data_entrada) AS first_entry
    FROM socios
    GROUP BY partner_id
)
ORDER BY partner_id;

DROP TABLE stg_labels;
DROP TABLE stg_municipios;
DROP TABLE stg_rejects;

-- No ART indexes: they took 60 % of the file and a tenth of the build. Point lookups read the
-- lookup file written after the build (cnpj-store); SQL by key still prunes row groups through
-- the zone maps of the key-sorted tables.
