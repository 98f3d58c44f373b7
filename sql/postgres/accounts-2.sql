-- Accounts store, version 2 (Postgres): watchlists (each user's lists of followed CNPJs; an entry is
-- a normalized key: 14 characters, an establishment and its company, or 8, a whole company) and
-- their webhook deliveries. Applied once to a store of version 1 (the one row of `version`), in one
-- transaction. IF NOT EXISTS: a store of version 1 may have these tables already (earlier builds
-- created them whenever a store was opened), the very same.

CREATE TABLE IF NOT EXISTS watchlists (
    id bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id),
    name text NOT NULL,
    -- Event names, comma-separated; empty: every event.
    events text NOT NULL,
    webhook_url text,
    -- Kept in clear: deliveries are signed with it.
    webhook_secret text,
    -- The number of rows of watchlist_entries (a user's sum is checked against their cap).
    entries bigint NOT NULL DEFAULT 0,
    -- Grows with every change of the list (a reader may keep its entries while it stays).
    revision bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS watchlists_user ON watchlists (user_id);

CREATE TABLE IF NOT EXISTS watchlist_entries (
    watchlist_id bigint NOT NULL REFERENCES watchlists (id) ON DELETE CASCADE,
    entry text NOT NULL,
    PRIMARY KEY (watchlist_id, entry)
);

-- Webhook deliveries: one row per page of a month's events of a list (its id stable:
-- wl<list>-<month>-<page>), the body posted at every attempt, its state and the lease of the
-- replica sending it.
CREATE TABLE IF NOT EXISTS deliveries (
    id text PRIMARY KEY,
    watchlist_id bigint NOT NULL REFERENCES watchlists (id) ON DELETE CASCADE,
    user_id bigint NOT NULL,
    month text NOT NULL,
    page bigint NOT NULL,
    pages bigint NOT NULL,
    body text NOT NULL,
    -- pending, waiting_credits, delivered, failed
    status text NOT NULL,
    attempts bigint NOT NULL DEFAULT 0,
    next_attempt_at bigint NOT NULL,
    last_error text,
    -- A replica holds the row until then (a crashed one's lease runs out).
    lease_until bigint NOT NULL DEFAULT 0,
    -- Retries run for 24 hours from here (a user's retry starts them again).
    created_at bigint NOT NULL,
    delivered_at bigint
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS deliveries_list ON deliveries (watchlist_id, month, page);
