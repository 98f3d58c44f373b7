# Experiment for the next step of issue 18: the history in a file of its own, copied whole by each
# build, the oldest month deleted and the new month appended. Measures the time of one such month
# and the file's size over a few cycles. Run (Python's duckdb 1.5.6): python3 history-file.py
# DATASET.duckdb, a 1.0 dataset built with --previous; it writes /work/b11/hist-*.duckdb.
import duckdb, sys, time, os, shutil
src = sys.argv[1]          # a 1.0 dataset built with --previous (one month of changes)
hist = '/work/b11/hist-0.duckdb'
for f in [hist]:
    if os.path.exists(f): os.remove(f)
c = duckdb.connect(hist)
c.execute("SET threads = 2; SET memory_limit = '846MB'")
c.execute(f"ATTACH '{src}' AS src (READ_ONLY)")
c.execute("CREATE TEMP TABLE one AS SELECT * FROM src.changes")
c.execute("""CREATE TABLE changes AS
  SELECT strftime(CAST(month || '-01' AS DATE) - to_months(k::INT), '%Y-%m') AS month,
         CASE WHEN k = 0 OR b IS NULL THEN cnpj ELSE b || substr(cnpj, 9) END AS cnpj,
         coalesce(b, cnpj_basico) AS cnpj_basico, event, field, old, new, uf, municipio, cnae
  FROM (SELECT *, CASE WHEN k > 0 THEN lpad(((TRY_CAST(cnpj_basico AS BIGINT) + k * 2999983) % 100000000)::VARCHAR, 8, '0') END AS b
        FROM one, range(24) t(k))
  ORDER BY month, cnpj, cnpj_basico, event, field, old, new""")
c.execute("CREATE TABLE change_months AS SELECT DISTINCT cnpj_basico, month FROM changes ORDER BY cnpj_basico, month")
c.execute("CHECKPOINT")
c.close()
print(f"24-month history file: {os.path.getsize(hist)/1e6:.0f} MB", flush=True)
prev = hist
for cycle in range(1, 4):
    new = f'/work/b11/hist-{cycle}.duckdb'
    t0 = time.time(); shutil.copyfile(prev, new); tcp = time.time() - t0
    c = duckdb.connect(new)
    c.execute("SET threads = 2; SET memory_limit = '846MB'")
    oldest, newest = c.execute("SELECT min(month), max(month) FROM changes").fetchone()
    y, m = int(newest[:4]), int(newest[5:]) + 1
    month = f"{y + (m > 12):04d}-{(m - 1) % 12 + 1:02d}"
    c.execute(f"ATTACH '{src}' AS src (READ_ONLY)")
    t1 = time.time(); c.execute(f"DELETE FROM changes WHERE month = '{oldest}'"); tdel = time.time() - t1
    t1 = time.time()
    c.execute(f"""INSERT INTO changes SELECT '{month}', CASE WHEN b IS NULL THEN cnpj ELSE b || substr(cnpj, 9) END, coalesce(b, cnpj_basico), event, field, old, new, uf, municipio, cnae
       FROM (SELECT *, lpad(((TRY_CAST(cnpj_basico AS BIGINT) + {cycle} * 7000003) % 100000000)::VARCHAR, 8, '0') AS b FROM src.changes)
       ORDER BY 2, 3, event, field, old, new""")
    tins = time.time() - t1
    t1 = time.time()
    c.execute("DROP TABLE change_months; CREATE TABLE change_months AS SELECT DISTINCT cnpj_basico, month FROM changes ORDER BY cnpj_basico, month")
    tcm = time.time() - t1
    t1 = time.time(); c.execute("CHECKPOINT"); tck = time.time() - t1
    n, ms = c.execute("SELECT count(*), count(DISTINCT month) FROM changes").fetchone()
    c.close()
    os.remove(prev) if prev != hist else None
    print(f"cycle {cycle} ({month}): copy {tcp:.1f} s, delete {oldest} {tdel:.1f} s, insert {tins:.1f} s, change_months {tcm:.1f} s, checkpoint {tck:.1f} s; {n} rows, {ms} months, file {os.path.getsize(new)/1e6:.0f} MB", flush=True)
    prev = new
