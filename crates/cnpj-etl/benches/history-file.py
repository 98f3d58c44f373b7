# Experiment for the next step of issue 18: the history in a file of its own, copied whole by each
# build, the oldest month deleted and the new month appended. Measures the time of one such month
# and the file's size over a few cycles. Run (Python's duckdb 1.5.6): python3 history-file.py
# DATASET.duckdb DIR, DATASET a 1.0 dataset built with --previous (one month of changes); the
# history files are written in DIR (≈ 3.5 GB at 1.0).
import duckdb, sys, time, os, shutil
from history24 import LIMITS, CHANGE_MONTHS, history_24, next_month

src, out = sys.argv[1], sys.argv[2]
hist = os.path.join(out, 'hist-0.duckdb')
if os.path.exists(hist):
    os.remove(hist)
c = duckdb.connect(hist)
c.execute(LIMITS)
c.execute(f"ATTACH '{src}' AS src (READ_ONLY)")
c.execute("CREATE TEMP TABLE one AS SELECT * FROM src.changes")
c.execute(history_24("one"))
c.execute(CHANGE_MONTHS)
c.execute("CHECKPOINT")
c.close()
print(f"24-month history file: {os.path.getsize(hist)/1e6:.0f} MB", flush=True)
prev = hist
for cycle in range(1, 4):
    new = os.path.join(out, f'hist-{cycle}.duckdb')
    t0 = time.time(); shutil.copyfile(prev, new); tcp = time.time() - t0
    c = duckdb.connect(new)
    c.execute(LIMITS)
    oldest, newest = c.execute("SELECT min(month), max(month) FROM changes").fetchone()
    month = next_month(newest)
    c.execute(f"ATTACH '{src}' AS src (READ_ONLY)")
    t1 = time.time(); c.execute(f"DELETE FROM changes WHERE month = '{oldest}'"); tdel = time.time() - t1
    t1 = time.time()
    c.execute(f"""INSERT INTO changes SELECT '{month}', CASE WHEN b IS NULL THEN cnpj ELSE b || substr(cnpj, 9) END, coalesce(b, cnpj_basico), event, field, old, new, uf, municipio, cnae
       FROM (SELECT *, lpad(((TRY_CAST(cnpj_basico AS BIGINT) + {cycle} * 7000003) % 100000000)::VARCHAR, 8, '0') AS b FROM src.changes)
       ORDER BY 2, 3, event, field, old, new""")
    tins = time.time() - t1
    t1 = time.time()
    c.execute("DROP TABLE change_months")
    c.execute(CHANGE_MONTHS)
    tcm = time.time() - t1
    t1 = time.time(); c.execute("CHECKPOINT"); tck = time.time() - t1
    n, ms = c.execute("SELECT count(*), count(DISTINCT month) FROM changes").fetchone()
    c.close()
    if prev != hist:
        os.remove(prev)
    print(f"cycle {cycle} ({month}): copy {tcp:.1f} s, delete {oldest} {tdel:.1f} s, insert {tins:.1f} s, change_months {tcm:.1f} s, checkpoint {tck:.1f} s; {n} rows, {ms} months, file {os.path.getsize(new)/1e6:.0f} MB", flush=True)
    prev = new
