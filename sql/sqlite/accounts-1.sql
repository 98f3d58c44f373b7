-- Accounts store, version 1 (SQLite): people (email, password, plan, role, status, the monthly
-- allowance), named tokens, sessions, one-time links, login failures, usage counts and the admin
-- audit log. Applied once to a store of version 0 (`PRAGMA user_version`), in one transaction.

ALTER TABLE users ADD COLUMN email TEXT;
ALTER TABLE users ADD COLUMN password_hash TEXT;
ALTER TABLE users ADD COLUMN display_name TEXT;
ALTER TABLE users ADD COLUMN locale TEXT;
-- NULL: the default plan of the plans file.
ALTER TABLE users ADD COLUMN plan TEXT;
ALTER TABLE users ADD COLUMN role TEXT NOT NULL DEFAULT 'user';
ALTER TABLE users ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
-- What is left of the month's allowance, and its month (`YYYY-MM`, UTC; NULL: never set).
ALTER TABLE users ADD COLUMN allowance INTEGER NOT NULL DEFAULT 0 CHECK (allowance >= 0);
ALTER TABLE users ADD COLUMN allowance_month TEXT;
-- Emails are stored lower-cased: unique case-insensitively.
CREATE UNIQUE INDEX users_email ON users (email);

ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN last_used_at INTEGER;
CREATE INDEX tokens_user ON tokens (user_id);
CREATE INDEX debits_user_at ON debits (user_id, at);

-- A session is known by the SHA-256 of its cookie's value.
CREATE TABLE sessions (
    hash TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users (id),
    created_at INTEGER NOT NULL,
    seen_at INTEGER NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

-- One-time links (invite, verify, reset), known by the SHA-256 of their token.
CREATE TABLE links (
    hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    email TEXT NOT NULL,
    user_id INTEGER REFERENCES users (id),
    plan TEXT,
    credits INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
);

-- Failed logins by key (`account:<email>` or `address:<ip>`), for throttling.
CREATE TABLE login_failures (
    key TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX login_failures_key_at ON login_failures (key, at);

-- Requests and credits per user, UTC day, endpoint and status class (2xx, 4xx, 5xx).
CREATE TABLE usage (
    user_id INTEGER NOT NULL,
    day TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    status_class TEXT NOT NULL,
    requests INTEGER NOT NULL,
    credits INTEGER NOT NULL,
    PRIMARY KEY (user_id, day, endpoint, status_class)
);

-- Every admin action.
CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL,
    admin_id INTEGER NOT NULL,
    action TEXT NOT NULL,
    target_id INTEGER,
    detail TEXT NOT NULL
);
