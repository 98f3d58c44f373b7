-- Accounts store, version 1 (Postgres): people (email, password, plan, role, status, the monthly
-- allowance), named tokens, sessions, one-time links, login failures, usage counts and the admin
-- audit log. Applied once to a store of version 0 (the one row of `version`), in one transaction.

ALTER TABLE users ADD COLUMN email text;
ALTER TABLE users ADD COLUMN password_hash text;
ALTER TABLE users ADD COLUMN display_name text;
ALTER TABLE users ADD COLUMN locale text;
-- NULL: the default plan of the plans file.
ALTER TABLE users ADD COLUMN plan text;
ALTER TABLE users ADD COLUMN role text NOT NULL DEFAULT 'user';
ALTER TABLE users ADD COLUMN status text NOT NULL DEFAULT 'active';
-- What is left of the month's allowance, and its month (`YYYY-MM`, UTC; NULL: never set).
ALTER TABLE users ADD COLUMN allowance bigint NOT NULL DEFAULT 0 CHECK (allowance >= 0);
ALTER TABLE users ADD COLUMN allowance_month text;
-- Emails are stored lower-cased: unique case-insensitively.
CREATE UNIQUE INDEX users_email ON users (email);

ALTER TABLE tokens ADD COLUMN name text NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN last_used_at bigint;
CREATE INDEX tokens_user ON tokens (user_id);
CREATE INDEX debits_user_at ON debits (user_id, at);

-- A session is known by the SHA-256 of its cookie's value.
CREATE TABLE sessions (
    hash text PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id),
    created_at bigint NOT NULL,
    seen_at bigint NOT NULL
);
CREATE INDEX sessions_user ON sessions (user_id);

-- One-time links (invite, verify, reset), known by the SHA-256 of their token.
CREATE TABLE links (
    hash text PRIMARY KEY,
    kind text NOT NULL,
    email text NOT NULL,
    user_id bigint REFERENCES users (id),
    plan text,
    credits bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    expires_at bigint NOT NULL,
    used_at bigint
);

-- Failed logins by key (`account:<email>` or `address:<ip>`), for throttling.
CREATE TABLE login_failures (
    key text NOT NULL,
    at bigint NOT NULL
);
CREATE INDEX login_failures_key_at ON login_failures (key, at);

-- Requests and credits per user, UTC day, endpoint and status class (2xx, 4xx, 5xx).
CREATE TABLE usage (
    user_id bigint NOT NULL,
    day text NOT NULL,
    endpoint text NOT NULL,
    status_class text NOT NULL,
    requests bigint NOT NULL,
    credits bigint NOT NULL,
    PRIMARY KEY (user_id, day, endpoint, status_class)
);

-- Every admin action.
CREATE TABLE audit (
    id bigserial PRIMARY KEY,
    at bigint NOT NULL,
    admin_id bigint NOT NULL,
    action text NOT NULL,
    target_id bigint,
    detail text NOT NULL
);
