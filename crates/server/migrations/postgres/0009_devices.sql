-- Linked devices (a `llembas link` on a person's machine, spec/acp.md §1) and the pairings under
-- way (RFC 8628's shape: a secret device code the CLI polls with, a short user code the person
-- confirms in the page). Only hashes of the device codes and of the device tokens are kept. The
-- twin of migrations/sqlite/0009_devices.sql.
CREATE TABLE devices (
    id TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created BIGINT NOT NULL,
    last_seen BIGINT,
    limits TEXT
);
CREATE INDEX devices_user ON devices (user_id);
CREATE TABLE device_codes (
    code_hash TEXT PRIMARY KEY,
    user_code TEXT NOT NULL UNIQUE,
    created BIGINT NOT NULL,
    expires BIGINT NOT NULL,
    poll_every BIGINT NOT NULL,
    last_poll BIGINT NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'pending',
    user_id BIGINT REFERENCES users(id) ON DELETE CASCADE,
    name TEXT
);
