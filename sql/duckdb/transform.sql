-- Builds the served tables of a registry dataset from the staging tables (stg_*) that the
-- loader appended. One row per key: the first in reading order (lowest seq) wins (contract §1).
-- Every later occurrence is recorded in `duplicates`, flagged when its raw content differs.

-- Keys met more than once are rare: they are found by grouping (cheap), and only their rows are
-- ranked by a window. The served tables are the staging rows minus the duplicates (an anti-join
-- on `seq`, unique per row), so no window runs over a whole table.
CREATE TABLE duplicates AS
WITH
    emp AS (SELECT cnpj_basico FROM stg_empresas GROUP BY ALL HAVING count(*) > 1),
    est AS (SELECT cnpj FROM stg_estabelecimentos GROUP BY ALL HAVING count(*) > 1),
    sim AS (SELECT cnpj_basico FROM stg_simples GROUP BY ALL HAVING count(*) > 1),
    -- Socios: only fully identical rows are duplicates.
    soc AS (SELECT cnpj_basico, row_hash, nome, documento FROM stg_socios GROUP BY ALL HAVING count(*) > 1),
    reg AS (SELECT cnpj, ano, regime FROM stg_regimes GROUP BY ALL HAVING count(*) > 1),
    ranked AS (
        SELECT 'empresas' AS tabela, cnpj_basico AS chave, source_file, seq, row_hash,
               first_value(row_hash) OVER w1 AS winner_hash, row_number() OVER w1 AS rn
        FROM stg_empresas SEMI JOIN emp USING (cnpj_basico)
        WINDOW w1 AS (PARTITION BY cnpj_basico ORDER BY seq)
        UNION ALL
        SELECT 'estabelecimentos', cnpj, source_file, seq, row_hash,
               first_value(row_hash) OVER w2, row_number() OVER w2
        FROM stg_estabelecimentos SEMI JOIN est USING (cnpj)
        WINDOW w2 AS (PARTITION BY cnpj ORDER BY seq)
        UNION ALL
        SELECT 'simples', cnpj_basico, source_file, seq, row_hash,
               first_value(row_hash) OVER w3, row_number() OVER w3
        FROM stg_simples SEMI JOIN sim USING (cnpj_basico)
        WINDOW w3 AS (PARTITION BY cnpj_basico ORDER BY seq)
        UNION ALL
        SELECT 'socios', cnpj_basico, source_file, seq, row_hash,
               first_value(row_hash) OVER w4, row_number() OVER w4
        FROM stg_socios SEMI JOIN soc USING (cnpj_basico, row_hash, nome, documento)
        WINDOW w4 AS (PARTITION BY cnpj_basico, row_hash, nome, documento ORDER BY seq)
        UNION ALL
        SELECT 'regimes_tributarios', cnpj || ':' || ano || ':' || regime, source_file, seq, row_hash,
               first_value(row_hash) OVER w5, row_number() OVER w5
        FROM stg_regimes SEMI JOIN reg USING (cnpj, ano, regime)
        WINDOW w5 AS (PARTITION BY cnpj, ano, regime ORDER BY seq)
    )
SELECT tabela, chave, source_file, seq, row_hash <> winner_hash AS differs_from_winner
FROM ranked WHERE rn > 1;

CREATE TABLE empresas AS
SELECT * EXCLUDE (capital_social, row_hash),
       CAST(capital_social AS DECIMAL(18, 2)) AS capital_social
FROM stg_empresas ANTI JOIN (SELECT seq FROM duplicates WHERE tabela = 'empresas') USING (seq)
ORDER BY cnpj_basico;

CREATE TABLE estabelecimentos AS
SELECT * EXCLUDE (cnaes_secundarios, row_hash),
       CASE WHEN cnaes_secundarios = '' THEN []::VARCHAR[]
            ELSE string_split(cnaes_secundarios, ',') END AS cnaes_secundarios
FROM stg_estabelecimentos ANTI JOIN (SELECT seq FROM duplicates WHERE tabela = 'estabelecimentos') USING (seq)
ORDER BY cnpj;

CREATE TABLE simples AS
SELECT * EXCLUDE (row_hash)
FROM stg_simples ANTI JOIN (SELECT seq FROM duplicates WHERE tabela = 'simples') USING (seq)
ORDER BY cnpj_basico;

CREATE TABLE socios AS
SELECT * EXCLUDE (row_hash)
FROM stg_socios ANTI JOIN (SELECT seq FROM duplicates WHERE tabela = 'socios') USING (seq)
ORDER BY cnpj_basico, seq;

-- Every year of every company's tax regime; the served regime is the latest year's (first read wins a tie).
CREATE TABLE regimes_tributarios AS
SELECT * EXCLUDE (row_hash)
FROM stg_regimes ANTI JOIN (SELECT seq FROM duplicates WHERE tabela = 'regimes_tributarios') USING (seq)
ORDER BY cnpj_basico, ano DESC, seq;

CREATE TABLE labels AS SELECT * FROM stg_labels ORDER BY tabela, codigo, locale;
CREATE TABLE municipios AS SELECT * FROM stg_municipios ORDER BY code;
CREATE TABLE rejects AS SELECT * FROM stg_rejects ORDER BY source_file, line;

DROP TABLE stg_empresas;
DROP TABLE stg_estabelecimentos;
DROP TABLE stg_simples;
DROP TABLE stg_socios;
DROP TABLE stg_regimes;
DROP TABLE stg_labels;
DROP TABLE stg_municipios;
DROP TABLE stg_rejects;

-- No ART indexes: they took 60 % of the file and a tenth of the build. Point lookups read the
-- lookup file written after the build (cnpj-store); SQL by key still prunes row groups through
-- the zone maps of the key-sorted tables.
