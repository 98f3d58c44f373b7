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
