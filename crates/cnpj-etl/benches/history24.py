# The 24-month history at 1.0 in a file of its own, `DATASET.history` (cnpj_index::history): the
# one month of changes of a 1.0 build, repeated over the 24 months up to DATASET's source_month
# (month relabelled; each earlier month's companies shifted to others, so that a company's changes
# are not in every month), stored as the build stores it: `changes` in the served order,
# `change_companies` (a month's companies as roaring-rs's RoaringTreemap bytes), `metadata` (the
# dataset's build_id and source_month); then its rows, months and sizes.
# Run (Python's duckdb 1.5.6, pyroaring): python3 history24.py DATASET.duckdb ONE_MONTH.duckdb,
# ONE_MONTH a file with the table `changes` of one month; DATASET.history is replaced.
import duckdb, sys, os, struct
from pyroaring import BitMap

# The build's DuckDB limits at its default --memory-limit 2GB (cnpj_build::Budget).
LIMITS = "SET threads = 2; SET memory_limit = '846MB'"
# The history file's tables (cnpj_index::history::HISTORY_DDL) and the served order of `changes`.
HISTORY_DDL = """CREATE TABLE changes (month VARCHAR, cnpj VARCHAR, cnpj_basico VARCHAR, event VARCHAR, field VARCHAR,
    old VARCHAR, new VARCHAR, uf VARCHAR, municipio VARCHAR, cnae VARCHAR);
  CREATE TABLE change_companies (month VARCHAR, companies BLOB);
  CREATE TABLE metadata (key VARCHAR PRIMARY KEY, value VARCHAR)"""
SERVED = "month, cnpj, cnpj_basico, event, field, old, new"
MONTH_COMPANIES = "SELECT DISTINCT cnpj_basico FROM changes WHERE month = ?"


def history_24(one, newest):
    """The rows of `changes` from the one month of changes in table `one`, over the 24 months up to `newest`."""
    return f"""INSERT INTO changes
  SELECT strftime(DATE '{newest}-01' - to_months(k::INT), '%Y-%m') AS month,
         CASE WHEN k = 0 OR b IS NULL THEN cnpj ELSE b || substr(cnpj, 9) END AS cnpj,
         coalesce(b, cnpj_basico) AS cnpj_basico, event, field, old, new, uf, municipio, cnae
  FROM (SELECT *, CASE WHEN k > 0 THEN lpad(((TRY_CAST(cnpj_basico AS BIGINT) + k * 2999983) % 100000000)::VARCHAR, 8, '0') END AS b
        FROM {one}, range(24) t(k))
  ORDER BY {SERVED}"""


def next_month(month):
    y, m = int(month[:4]), int(month[5:]) + 1
    return f"{y + (m > 12):04d}-{(m - 1) % 12 + 1:02d}"


def companies_blob(basicos):
    """A month's companies as RoaringTreemap::serialize_into writes them: u64 LE count of 32-bit
    bitmaps, then per high key (ascending) u32 LE high key and the portable 32-bit bitmap. A base's
    key: its value if numeric, else 100_000_000 + its base-36 value (cnpj_index::history::key)."""
    highs = {}
    for b in basicos:
        k = int(b) if b.isdigit() else 100_000_000 + int(b, 36)
        highs.setdefault(k >> 32, []).append(k & 0xFFFFFFFF)
    return struct.pack('<Q', len(highs)) + b''.join(
        struct.pack('<I', h) + BitMap(lows).serialize() for h, lows in sorted(highs.items()))


def _keys_of(blob):
    """The keys in a companies blob (to check companies_blob)."""
    (n,), at, keys = struct.unpack_from('<Q', blob), 8, []
    for _ in range(n):
        (high,) = struct.unpack_from('<I', blob, at)
        bm = BitMap.deserialize(blob[at + 4:])
        at += 4 + len(bm.serialize())
        keys += [(high << 32) | low for low in bm]
    assert at == len(blob)
    return keys


assert companies_blob([]) == bytes(8)
assert _keys_of(companies_blob(["ZZZZZZZZ", "11222333", "0000000A", "00000001"])) == \
    [1, 11_222_333, 100_000_010, 100_000_000 + 36 ** 8 - 1]


def main(db, one_month):
    hist = db + ".history"
    if os.path.exists(hist):
        os.remove(hist)
    con = duckdb.connect(hist)
    con.execute(LIMITS)
    con.execute(HISTORY_DDL)
    con.execute(f"ATTACH '{db}' AS ds (READ_ONLY); ATTACH '{one_month}' AS one (READ_ONLY)")
    con.execute("INSERT INTO metadata SELECT key, value FROM ds.metadata WHERE key IN ('build_id', 'source_month')")
    newest = con.execute("SELECT value FROM metadata WHERE key = 'source_month'").fetchone()[0]
    con.execute(history_24("one.changes", newest))
    con.execute("DETACH ds; DETACH one")
    for (month,) in con.execute("SELECT DISTINCT month FROM changes ORDER BY month").fetchall():
        blob = companies_blob(b for (b,) in con.execute(MONTH_COMPANIES, [month]).fetchall())
        con.execute("INSERT INTO change_companies VALUES (?, ?)", [month, blob])
    con.execute("CHECKPOINT")
    bs = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
    def size(t):
        return con.execute(f"SELECT count(DISTINCT block_id) FROM pragma_storage_info('{t}') WHERE block_id >= 0").fetchone()[0] * bs
    n, ms, first, last = con.execute("SELECT count(*), count(DISTINCT month), min(month), max(month) FROM changes").fetchone()
    blobs = con.execute("SELECT count(*), sum(octet_length(companies)) FROM change_companies").fetchone()
    cb, kb = size('changes'), size('change_companies')
    con.close()
    print(f"{hist}: {n} rows, {ms} months ({first} to {last}), file {os.path.getsize(hist)/1e6:.0f} MB; "
          f"changes {cb/1e6:.1f} MB ({cb/n:.1f} B/row), change_companies {kb/1e6:.1f} MB "
          f"({blobs[0]} rows, blobs {blobs[1]/1e6:.1f} MB)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
