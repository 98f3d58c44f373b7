# A month of changes at 1.0 without a 1.0 month-over-month build (that needs ≈ 40 GB of disk beside
# the zips): a real month of changes at 0.05 (`synth --evolve-from` a 0.05 month, both built, the
# second with --previous), its rows repeated 20 times, tile t's companies moved to other companies
# of the 1.0 synthetic month (synth's basico(i) = (i*7919 + 12345) mod 1e8; tile t takes
# i + t*3,500,000), its CNPJs given the check digits of their new base. At 0.05: 88,793 rows of
# 79,546 companies; tiled: 1,775,860 rows of 1,590,920 companies (a 1.0 build's month: 1,776,422
# rows, 1.59 M companies). Output: ONE.duckdb, table `changes`, for history24.py.
# Run (Python's duckdb 1.5.6): python3 month20.py M2.duckdb.history ONE.duckdb
import duckdb, os, sys
INV = pow(7919, -1, 10**8)
if os.path.exists(sys.argv[2]): os.remove(sys.argv[2])
c = duckdb.connect(sys.argv[2])
c.execute("SET threads = 2")
c.execute(f"ATTACH '{sys.argv[1]}' AS h (READ_ONLY)")
c.execute(f"""CREATE MACRO moved(b, t) AS lpad(((((((b::BIGINT - 12345 + 100000000) * {INV}) % 100000000) + t * 3500000) * 7919 + 12345) % 100000000)::VARCHAR, 8, '0');
CREATE MACRO dv(s, w) AS (11 - list_sum(list_transform(range(length(s)), i -> (ascii(substr(s, i + 1, 1)) - 48) * w[i + 1])) % 11) % 11 % 10;
CREATE MACRO cnpj_of(b12) AS b12 || dv(b12, [5,4,3,2,9,8,7,6,5,4,3,2])::VARCHAR
   || dv(b12 || dv(b12, [5,4,3,2,9,8,7,6,5,4,3,2])::VARCHAR, [6,5,4,3,2,9,8,7,6,5,4,3,2])::VARCHAR""")
# check the check digits on the untiled rows
bad = c.execute("SELECT count(*) FROM h.changes WHERE cnpj IS NOT NULL AND cnpj_of(substr(cnpj, 1, 12)) <> cnpj").fetchone()[0]
assert bad == 0, bad
assert c.execute("SELECT moved('00012345', 0)").fetchone()[0] == '00012345'
c.execute("""CREATE TABLE changes AS SELECT month,
  CASE WHEN cnpj IS NULL THEN NULL ELSE cnpj_of(moved(cnpj_basico, t) || substr(cnpj, 9, 4)) END AS cnpj,
  moved(cnpj_basico, t) AS cnpj_basico, event, field, old, new, uf, municipio, cnae
  FROM h.changes, range(20) r(t)""")
print(c.execute("SELECT count(*), count(DISTINCT cnpj_basico), count(DISTINCT cnpj) FROM changes").fetchone())
