# Experiment for issue 18: the history in a file of its own (`DATASET.history`, as history24.py
# writes it). Each build copies the previous dataset's history whole, deletes the month that drops
# out (24 kept), appends its own month in the served order and that month's companies, and updates
# source_month; this does it CYCLES times in a row (the build's DuckDB limits), each cycle from the
# previous cycle's output, and prints each step's time and the file's size, to see it settle.
# Run (Python's duckdb 1.5.6, pyroaring): python3 history-file.py HISTORY_FILE ONE_MONTH.duckdb DIR
# [CYCLES=6]; HISTORY_FILE is only read; the copies (≈ 1.4 GB each at 1.0, two at a time) are
# written in DIR and deleted at the end.
import duckdb, sys, time, os, shutil
from history24 import LIMITS, SERVED, MONTH_COMPANIES, companies_blob, next_month

src, one, out = sys.argv[1:4]
cycles = int(sys.argv[4]) if len(sys.argv) > 4 else 6
os.makedirs(out, exist_ok=True)
prev = src
for cycle in range(1, cycles + 1):
    new = os.path.join(out, f'hist-{cycle}.duckdb')
    t0 = time.time(); shutil.copyfile(prev, new); tcp = time.time() - t0
    if prev != src:
        os.remove(prev)
    c = duckdb.connect(new)
    c.execute(LIMITS)
    c.execute(f"ATTACH '{one}' AS one (READ_ONLY)")
    newest = c.execute("SELECT value FROM metadata WHERE key = 'source_month'").fetchone()[0]
    month = next_month(newest)
    first_kept = c.execute(f"SELECT strftime(DATE '{month}-01' - to_months(23), '%Y-%m')").fetchone()[0]
    t1 = time.time()
    c.execute("DELETE FROM changes WHERE month < ?", [first_kept])
    c.execute("DELETE FROM change_companies WHERE month < ?", [first_kept])
    tdel = time.time() - t1
    # The one month relabelled to the new month, its companies shifted to others by the cycle.
    t1 = time.time()
    c.execute(f"""INSERT INTO changes SELECT '{month}' AS month, CASE WHEN b IS NULL THEN cnpj ELSE b || substr(cnpj, 9) END AS cnpj,
         coalesce(b, cnpj_basico) AS cnpj_basico, event, field, old, new, uf, municipio, cnae
       FROM (SELECT *, lpad(((TRY_CAST(cnpj_basico AS BIGINT) + {cycle} * 7000003) % 100000000)::VARCHAR, 8, '0') AS b FROM one.changes)
       ORDER BY {SERVED}""")
    tins = time.time() - t1
    t1 = time.time()
    blob = companies_blob(b for (b,) in c.execute(MONTH_COMPANIES, [month]).fetchall())
    c.execute("INSERT INTO change_companies VALUES (?, ?)", [month, blob])
    tcomp = time.time() - t1
    c.execute("UPDATE metadata SET value = ? WHERE key = 'source_month'", [month])
    c.execute("DETACH one")
    t1 = time.time(); c.execute("CHECKPOINT"); tck = time.time() - t1
    c.close()
    total = time.time() - t0
    c = duckdb.connect(new, read_only=True)
    n, ms = c.execute("SELECT count(*), count(DISTINCT month) FROM changes").fetchone()
    c.close()
    print(f"cycle {cycle} ({month}, kept from {first_kept}): copy {tcp:.1f} s, delete {tdel:.1f} s, insert {tins:.1f} s, "
          f"companies {tcomp:.1f} s, checkpoint {tck:.1f} s, total {total:.1f} s; {n} rows, {ms} months, "
          f"file {os.path.getsize(new)/1e6:.0f} MB", flush=True)
    prev = new
if prev != src:
    os.remove(prev)
