-- The API's accounts store in Postgres (`cnpj-api --accounts-postgres URL`), shared by every API
-- replica: users, hashed tokens, credit balances, the debit ledger and the rate-limit counters.
-- Lives in its own schema, so dataset swaps never touch it. Same columns as sql/sqlite/accounts.sql.

CREATE SCHEMA IF NOT EXISTS cnpj_accounts;

CREATE TABLE IF NOT EXISTS cnpj_accounts.users (
    id bigserial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    credits bigint NOT NULL CHECK (credits >= 0),
    created_at bigint NOT NULL
);

-- Only a SHA-256 of each token is kept; `prefix` (the token's first 12 characters) names it.
CREATE TABLE IF NOT EXISTS cnpj_accounts.tokens (
    prefix text PRIMARY KEY,
    hash text NOT NULL UNIQUE,
    user_id bigint NOT NULL REFERENCES cnpj_accounts.users (id),
    created_at bigint NOT NULL,
    expires_at bigint,
    revoked_at bigint
);

-- Every charge: the sum of a user's debits is the credits they used.
CREATE TABLE IF NOT EXISTS cnpj_accounts.debits (
    id bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES cnpj_accounts.users (id),
    amount bigint NOT NULL CHECK (amount > 0),
    at bigint NOT NULL,
    what text NOT NULL
);

-- One row per counted request, for the rolling-window rate limit across replicas.
CREATE TABLE IF NOT EXISTS cnpj_accounts.rate_hits (
    user_id bigint NOT NULL,
    at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS rate_hits_user_at ON cnpj_accounts.rate_hits (user_id, at);
