-- Rows loaded and duplicates per source file, for the reconciliation (per file, rows read =
-- loaded + duplicates + rejected).
SELECT source_file, sum(loaded)::BIGINT AS loaded, sum(duplicates)::BIGINT AS duplicates,
       sum(differing)::BIGINT AS differing
FROM (
    SELECT source_file, count(*) AS loaded, 0 AS duplicates, 0 AS differing FROM empresas GROUP BY ALL
    UNION ALL SELECT source_file, count(*), 0, 0 FROM estabelecimentos GROUP BY ALL
    UNION ALL SELECT source_file, count(*), 0, 0 FROM simples GROUP BY ALL
    UNION ALL SELECT source_file, count(*), 0, 0 FROM socios GROUP BY ALL
    UNION ALL SELECT source_file, count(*), 0, 0 FROM regimes_tributarios GROUP BY ALL
    UNION ALL SELECT source_file, 0, count(*), count(*) FILTER (differs_from_winner) FROM duplicates GROUP BY ALL
)
GROUP BY source_file
ORDER BY source_file;
