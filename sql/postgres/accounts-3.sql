-- Accounts store, version 3 (Postgres): nothing to change. SQLite's version 3 gives watchlists ids
-- that are never handed out again; here `bigserial` always did (a sequence never goes back, even
-- when the row with the largest id is deleted). Kept so that both stores count the same versions.
SELECT 1;
