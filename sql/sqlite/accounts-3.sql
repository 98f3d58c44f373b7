-- Accounts store, version 3 (SQLite): a watchlist's id is never handed out again. An
-- `INTEGER PRIMARY KEY` alone takes the largest id + 1, so the id of the newest list, once deleted,
-- went to the next list made, by any user; whatever was known by that id (the API's kept entries,
-- a delivery's id `wl<list>-…`) could then answer for another user's list. AUTOINCREMENT keeps the
-- largest id ever used (in `sqlite_sequence`). SQLite cannot alter a key, so the table is made
-- anew and its rows copied (their ids kept, which also sets the sequence to the largest);
-- `watchlist_entries` and `deliveries` name it by name.
-- Users, debits and audit rows are never deleted (an account's deletion keeps its row, emptied),
-- tokens, sessions and links are known by random values: none of them needs it.

-- Run with foreign keys not enforced (the store checks them all before it commits): dropping the
-- old table while `watchlist_entries` names it is then allowed, and the copy keeps every id.

CREATE TABLE watchlists_3 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL REFERENCES users (id),
    name TEXT NOT NULL,
    -- Event names, comma-separated; empty: every event.
    events TEXT NOT NULL,
    webhook_url TEXT,
    -- Kept in clear: deliveries are signed with it.
    webhook_secret TEXT,
    -- The number of rows of watchlist_entries (a user's sum is checked against their cap).
    entries INTEGER NOT NULL DEFAULT 0,
    -- Grows with every change of the list (a reader may keep its entries while it stays).
    revision INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
INSERT INTO watchlists_3 (id, user_id, name, events, webhook_url, webhook_secret, entries, revision, created_at, updated_at)
    SELECT id, user_id, name, events, webhook_url, webhook_secret, entries, revision, created_at, updated_at
    FROM watchlists;
DROP TABLE watchlists;
ALTER TABLE watchlists_3 RENAME TO watchlists;
CREATE INDEX watchlists_user ON watchlists (user_id);
