-- Accounts store, version 2 (SQLite): watchlists (each user's lists of followed CNPJs; an entry is
-- a normalized key: 14 characters, an establishment and its company, or 8, a whole company) and
-- their webhook deliveries. Applied once to a store of version 1 (`PRAGMA user_version`), in one
-- transaction. IF NOT EXISTS: a store of version 1 may have these tables already (earlier builds
-- created them whenever a store was opened), the very same.

CREATE TABLE IF NOT EXISTS watchlists (
    id INTEGER PRIMARY KEY,
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
CREATE INDEX IF NOT EXISTS watchlists_user ON watchlists (user_id);

CREATE TABLE IF NOT EXISTS watchlist_entries (
    watchlist_id INTEGER NOT NULL REFERENCES watchlists (id),
    entry TEXT NOT NULL,
    PRIMARY KEY (watchlist_id, entry)
) WITHOUT ROWID;

-- Webhook deliveries: one row per page of a month's events of a list (its id stable:
-- wl<list>-<month>-<page>), the body posted at every attempt, its state and the lease of the
-- process sending it.
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY,
    watchlist_id INTEGER NOT NULL REFERENCES watchlists (id),
    user_id INTEGER NOT NULL,
    month TEXT NOT NULL,
    page INTEGER NOT NULL,
    pages INTEGER NOT NULL,
    body TEXT NOT NULL,
    -- pending, waiting_credits, delivered, failed
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error TEXT,
    -- A sender holds the row until then (a crashed one's lease runs out).
    lease_until INTEGER NOT NULL DEFAULT 0,
    -- Retries run for 24 hours from here (a user's retry starts them again).
    created_at INTEGER NOT NULL,
    delivered_at INTEGER
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS deliveries_list ON deliveries (watchlist_id, month, page);
