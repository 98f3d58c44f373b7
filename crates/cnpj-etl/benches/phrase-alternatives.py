# The search index's phrase postings against the alternatives, counted on a built dataset (not a
# test): for the folded names (nome fantasia, razão social) and neighbourhoods of a sample of
# establishments, the postings (one per distinct key of a text) and distinct keys of
#   - words (today's word tables),
#   - phrase keys (adjacent word pairs with their separator, and a field's end keys: what the
#     index adds),
#   - trigrams of the folded text (a trigram index: a posting per distinct trigram),
#   - word positions (a positional index such as tantivy's: the word postings plus a position per
#     word occurrence),
# scaled to the whole dataset. A posting costs about 2 bytes in a roaring array container.
# Run (Python's duckdb 1.5.6): python3 phrase-alternatives.py DATASET.duckdb [SAMPLE_PERCENT]
import duckdb, sys

db, percent = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
con = duckdb.connect(db, read_only=True)
con.execute("SET threads = 2")
texts = {
    "nome fantasia": f"SELECT nome_fantasia_fold AS t FROM estabelecimentos USING SAMPLE {percent}% (system, 7)",
    "razão social": f"SELECT razao_social_fold AS t FROM empresas USING SAMPLE {percent}% (system, 7)",
    "bairro": f"SELECT bairro_fold AS t FROM estabelecimentos USING SAMPLE {percent}% (system, 7)",
}
print(f"sample: {percent} % of the rows, scaled by {100 / percent:.0f}")
print("| field | rows | words: postings, keys | phrase keys: postings, keys | trigrams: postings, keys | positions |")
print("|---|---|---|---|---|---|")
scale = 100 / percent
for field, sql in texts.items():
    row = con.execute(f"""
        WITH s AS (SELECT t, regexp_extract_all(t, '[[:alnum:]]+') AS w,
                          regexp_extract_all(t, '[[:alnum:]]+[^[:alnum:]]+[[:alnum:]]+') AS p0
                   FROM ({sql}) WHERE t <> ''),
        k AS (SELECT t, w,
                     -- adjacent pairs (each word with the next), and the end keys
                     list_transform(range(1, len(w)), i -> w[i] || regexp_extract(t, w[i] || '([^[:alnum:]]+)' || w[i + 1], 1) || w[i + 1])
                       || CASE WHEN regexp_matches(t, '^[^[:alnum:]]') THEN ['<lead>'] ELSE [] END
                       || CASE WHEN regexp_matches(t, '[^[:alnum:]]$') THEN ['<trail>'] ELSE [] END AS pairs,
                     list_distinct(list_transform(range(1, greatest(length(t) - 1, 1)), i -> substr(t, i, 3))) AS tri
              FROM s)
        SELECT count(*),
               sum(len(list_distinct(w))), (SELECT count(DISTINCT x) FROM (SELECT unnest(w) x FROM k)),
               sum(len(list_distinct(pairs))), (SELECT count(DISTINCT x) FROM (SELECT unnest(pairs) x FROM k)),
               sum(len(tri)), (SELECT count(DISTINCT x) FROM (SELECT unnest(tri) x FROM k)),
               sum(len(w))
        FROM k""").fetchone()
    rows, wp, wk, pp, pk, tp, tk, pos = row
    f = lambda n: f"{n * scale / 1e6:,.1f} M"
    print(f"| {field} | {f(rows)} | {f(wp)}, {wk:,} | {f(pp)}, {pk:,} | {f(tp)}, {tk:,} | {f(pos)} |")
print("(keys are the sample's distinct keys, not scaled: a full month has more)")
