# The 24-month history at 1.0: the month of changes recorded by the 1.0 build with --previous,
# repeated over the 24 months before it (month relabelled; each earlier month's companies shifted
# to others, so that a company's changes are not in every month), stored as the build stores it; then
# what the next build pays to carry it over (the build's own SQL, its DuckDB limits).
# Run (Python's duckdb 1.5.6): python3 history24.py DATASET.duckdb SCRATCH.duckdb, DATASET built with
# --previous at the scale to measure (its `changes` is rewritten in place); SCRATCH is deleted.
import duckdb, sys, time, os

# The build's DuckDB limits at its default --memory-limit 2GB (cnpj_build::Budget).
LIMITS = "SET threads = 2; SET memory_limit = '846MB'"
CHANGE_MONTHS = "CREATE TABLE change_months AS SELECT DISTINCT cnpj_basico, month FROM changes ORDER BY cnpj_basico, month"


def history_24(one):
    """`changes` from the one month of changes in table `one`, over the 24 months up to it."""
    return f"""CREATE TABLE changes AS
  SELECT strftime(CAST(month || '-01' AS DATE) - to_months(k::INT), '%Y-%m') AS month,
         CASE WHEN k = 0 OR b IS NULL THEN cnpj ELSE b || substr(cnpj, 9) END AS cnpj,
         coalesce(b, cnpj_basico) AS cnpj_basico, event, field, old, new, uf, municipio, cnae
  FROM (SELECT *, CASE WHEN k > 0 THEN lpad(((TRY_CAST(cnpj_basico AS BIGINT) + k * 2999983) % 100000000)::VARCHAR, 8, '0') END AS b
        FROM {one}, range(24) t(k))
  ORDER BY month, cnpj, cnpj_basico, event, field, old, new"""


def next_month(month):
    y, m = int(month[:4]), int(month[5:]) + 1
    return f"{y + (m > 12):04d}-{(m - 1) % 12 + 1:02d}"


def main(db, sim):
    con = duckdb.connect(db)
    def blocks(t):
        return con.execute(f"SELECT count(DISTINCT block_id) FROM pragma_storage_info('{t}') WHERE block_id >= 0").fetchone()[0]
    bs = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
    month = con.execute("SELECT max(month) FROM changes").fetchone()[0]
    n1 = con.execute("SELECT count(*) FROM changes").fetchone()[0]
    print(f"one month {month}: {n1} rows, changes {blocks('changes')*bs/1e6:.1f} MB, change_months {blocks('change_months')*bs/1e6:.1f} MB", flush=True)
    con.execute(LIMITS)
    con.execute("CREATE TEMP TABLE one AS SELECT * FROM changes; DROP TABLE change_months; DROP TABLE changes")
    con.execute(history_24("one"))
    con.execute(CHANGE_MONTHS)
    con.execute("DROP TABLE one; CHECKPOINT")
    n24 = con.execute("SELECT count(*) FROM changes").fetchone()[0]
    ms = con.execute("SELECT min(month), max(month), count(DISTINCT month) FROM changes").fetchone()
    cb, mb = blocks('changes') * bs, blocks('change_months') * bs
    cm = con.execute("SELECT count(*) FROM change_months").fetchone()[0]
    print(f"24 months {ms}: {n24} rows, changes {cb/1e6:.1f} MB ({cb/n24:.1f} B/row), change_months {cm} rows {mb/1e6:.1f} MB, history {(cb+mb)/1e6:.1f} MB", flush=True)
    con.close()
    # The next month's build carries 23 of them over (the oldest drops out) and recreates change_months.
    if os.path.exists(sim):
        os.remove(sim)
    s = duckdb.connect(sim)
    s.execute(LIMITS)
    s.execute("CREATE TABLE changes (month VARCHAR, cnpj VARCHAR, cnpj_basico VARCHAR, event VARCHAR, field VARCHAR, old VARCHAR, new VARCHAR, uf VARCHAR, municipio VARCHAR, cnae VARCHAR)")
    s.execute(f"ATTACH '{db}' AS previous (READ_ONLY)")
    t = time.time()
    n = s.execute(f"INSERT INTO changes SELECT month, cnpj, cnpj_basico, event, field, old, new, uf, municipio, cnae FROM previous.changes WHERE month >= '{next_month(ms[0])}'").fetchone()[0]
    carry = time.time() - t
    s.execute("DETACH previous")
    t = time.time()
    s.execute(CHANGE_MONTHS)
    cms = time.time() - t
    t = time.time()
    s.execute("CHECKPOINT")
    ck = time.time() - t
    print(f"next build: carry-over of {n} rows {carry:.1f} s, change_months {cms:.1f} s, checkpoint {ck:.1f} s", flush=True)
    s.close()
    os.remove(sim)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
