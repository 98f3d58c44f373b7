-- Finishes a registry dataset once the loader has merged the main tables (one row per key, the
-- first in reading order; later occurrences in `duplicates`; see
-- crates/cnpj-load/src/runs.rs): the small inputs appended to staging tables become their
-- served tables, sorted.
CREATE TABLE labels AS SELECT * FROM stg_labels ORDER BY tabela, codigo, locale;
CREATE TABLE municipios AS SELECT * FROM stg_municipios ORDER BY code;
CREATE TABLE rejects AS SELECT * FROM stg_rejects ORDER BY source_file, line;

DROP TABLE stg_labels;
DROP TABLE stg_municipios;
DROP TABLE stg_rejects;

-- No ART indexes: they took 60 % of the file and a tenth of the build. Point lookups read the
-- lookup file written after the build (cnpj-store); SQL by key still prunes row groups through
-- the zone maps of the key-sorted tables.
