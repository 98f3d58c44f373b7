-- The API's accounts store (SQLite): users, hashed tokens, credit balances and the debit ledger.
-- Separate from the monthly registry dataset, so it survives rebuilds.
PRAGMA journal_mode = WAL;

CREATE TABLE IF NOT EXISTS users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    credits INTEGER NOT NULL CHECK (credits >= 0),
    created_at INTEGER NOT NULL
);

-- Only a SHA-256 of each token is kept; `prefix` (the token's first 12 characters) names it.
CREATE TABLE IF NOT EXISTS tokens (
    prefix TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    user_id INTEGER NOT NULL REFERENCES users (id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
);

-- Every charge: the sum of a user's debits is the credits they used.
CREATE TABLE IF NOT EXISTS debits (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users (id),
    amount INTEGER NOT NULL CHECK (amount > 0),
    at INTEGER NOT NULL,
    what TEXT NOT NULL
);
