-- Codes met in the data that the month's lookup tables (or the fixed domains) do not know,
-- with the number of rows that carry each. They keep their code and get an empty label.
WITH known AS (SELECT tabela, codigo FROM labels WHERE locale = 'pt-br'),
used AS (
    SELECT 'cnaes' AS tabela, cnae_fiscal AS codigo FROM estabelecimentos
    UNION ALL SELECT 'cnaes', unnest(cnaes_secundarios) FROM estabelecimentos
    UNION ALL SELECT 'motivos', motivo_situacao_cadastral FROM estabelecimentos
    UNION ALL SELECT 'paises', pais FROM estabelecimentos
    UNION ALL SELECT 'situacao_cadastral', situacao_cadastral FROM estabelecimentos
    UNION ALL SELECT 'matriz_filial', matriz_filial FROM estabelecimentos
    UNION ALL SELECT 'naturezas', natureza_juridica FROM empresas
    UNION ALL SELECT 'qualificacoes', qualificacao_responsavel FROM empresas
    UNION ALL SELECT 'porte_empresa', porte_empresa FROM empresas
    UNION ALL SELECT 'qualificacoes', qualificacao FROM socios
    UNION ALL SELECT 'qualificacoes', qualificacao_representante FROM socios
    UNION ALL SELECT 'paises', pais FROM socios
    UNION ALL SELECT 'tipo_socio', tipo FROM socios
    UNION ALL SELECT 'faixa_etaria', faixa_etaria FROM socios
)
SELECT tabela, codigo, count(*)::BIGINT AS rows
FROM used
WHERE codigo <> '' AND NOT EXISTS (SELECT 1 FROM known k WHERE k.tabela = used.tabela AND k.codigo = used.codigo)
GROUP BY ALL
UNION ALL
SELECT 'municipios', municipio, count(*)::BIGINT
FROM estabelecimentos
WHERE municipio <> '' AND municipio NOT IN (SELECT code FROM municipios)
GROUP BY ALL
ORDER BY tabela, codigo;
