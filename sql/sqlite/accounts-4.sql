-- Accounts store, version 4 (SQLite): export jobs (contract §15). A job is a search's whole result
-- written to a file: its filters, format and locale; the rows counted when it was accepted and
-- their credits, held then (what came from the month's allowance and what from the credits, and
-- the month, so that a refund gives each back where it came from); its status (queued, running,
-- done, failed, expired), the rows written so far, its file; the lease of the process running it
-- (a process that dies leaves a lease that runs out, and the job runs again, never charged again).
-- A refund deletes the hold's row of the ledger (`debits` holds positive amounts only).

CREATE TABLE exports (
    -- 128 random bits, hex: unguessable.
    id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users (id),
    -- The search's parameters as a JSON object of strings (the query string's names and values).
    filters TEXT NOT NULL,
    -- csv, parquet, jsonl
    format TEXT NOT NULL,
    locale TEXT NOT NULL,
    -- The build that counted the rows: another one served by the time the job runs fails it.
    build_id TEXT NOT NULL,
    -- queued, running, done, failed, expired
    status TEXT NOT NULL,
    rows INTEGER NOT NULL,
    rows_written INTEGER NOT NULL DEFAULT 0,
    credits INTEGER NOT NULL,
    held_allowance INTEGER NOT NULL,
    held_credits INTEGER NOT NULL,
    held_month TEXT NOT NULL,
    -- 1 once the held credits went back (a failed job), at most once.
    refunded INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    -- The order jobs are claimed in: one more than the largest when inserted.
    seq INTEGER NOT NULL,
    -- The ledger's row of the hold (deleted when the hold is refunded).
    debit_id INTEGER,
    lease_owner TEXT,
    lease_until INTEGER NOT NULL DEFAULT 0,
    -- The file's name in the export folder, and its size, once done.
    file TEXT,
    bytes INTEGER,
    error TEXT,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    expires_at INTEGER
);
CREATE INDEX exports_user ON exports (user_id, created_at);
CREATE INDEX exports_status ON exports (status, created_at);
