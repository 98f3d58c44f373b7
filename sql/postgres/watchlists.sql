-- Watchlists in the accounts store (Postgres, schema cnpj_accounts, shared by replicas): each
-- user's lists of followed CNPJs. Same columns as sql/sqlite/watchlists.sql.

CREATE TABLE IF NOT EXISTS cnpj_accounts.watchlists (
    id bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES cnpj_accounts.users (id),
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
CREATE INDEX IF NOT EXISTS watchlists_user ON cnpj_accounts.watchlists (user_id);

CREATE TABLE IF NOT EXISTS cnpj_accounts.watchlist_entries (
    watchlist_id bigint NOT NULL REFERENCES cnpj_accounts.watchlists (id) ON DELETE CASCADE,
    entry text NOT NULL,
    PRIMARY KEY (watchlist_id, entry)
);

-- Webhook deliveries: one row per page of a month's events of a list (its id stable:
-- wl<list>-<month>-<page>), the body posted at every attempt, its state and the lease of the
-- replica sending it.
CREATE TABLE IF NOT EXISTS cnpj_accounts.deliveries (
    id text PRIMARY KEY,
    watchlist_id bigint NOT NULL REFERENCES cnpj_accounts.watchlists (id) ON DELETE CASCADE,
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
CREATE INDEX IF NOT EXISTS deliveries_due ON cnpj_accounts.deliveries (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS deliveries_list ON cnpj_accounts.deliveries (watchlist_id, month, page);
