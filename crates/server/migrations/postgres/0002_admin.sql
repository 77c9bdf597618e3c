-- Accounts an admin disabled; sign-in sessions named by an id (listed and revoked by it); the
-- server's settings an admin sets (the models users may use).
ALTER TABLE users ADD COLUMN disabled BIGINT NOT NULL DEFAULT 0;

ALTER TABLE sessions ADD COLUMN id TEXT;
UPDATE sessions SET id = md5(random()::text || token_hash) WHERE id IS NULL;
CREATE UNIQUE INDEX sessions_id ON sessions(id);

CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
