-- Accounts, sign-in sessions and API tokens (only hashes of tokens are kept). The PostgreSQL
-- twin of migrations/sqlite/0001_init.sql: the same tables, columns and keys; integers are
-- BIGINT (the server reads them as i64), generated ids BIGSERIAL.
CREATE TABLE users (
    id BIGSERIAL PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('admin', 'user', 'pending')),
    created BIGINT NOT NULL
);

CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created BIGINT NOT NULL,
    last_seen BIGINT NOT NULL,
    expires BIGINT NOT NULL,
    user_agent TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE api_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created BIGINT NOT NULL,
    label TEXT NOT NULL DEFAULT ''
);

-- A user's view of the server's tree: path -> level (none, ro, stage, commit).
CREATE TABLE grants (
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    level TEXT NOT NULL,
    PRIMARY KEY (user_id, path)
);

-- harness-agent sessions (a chat's, its subagents'): metadata and transcript, entry by entry.
CREATE TABLE agent_sessions (
    id TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    cwd TEXT NOT NULL,
    created BIGINT NOT NULL,
    updated BIGINT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT ''
);

CREATE TABLE transcript (
    session_id TEXT NOT NULL REFERENCES agent_sessions(id) ON DELETE CASCADE,
    n BIGINT NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (session_id, n)
);

CREATE TABLE chats (
    id TEXT PRIMARY KEY REFERENCES agent_sessions(id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    mode TEXT NOT NULL,
    model TEXT NOT NULL,
    created BIGINT NOT NULL,
    next_seq BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX chats_user ON chats(user_id);

CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    created BIGINT NOT NULL,
    ended BIGINT
);
CREATE INDEX runs_status ON runs(status);

-- Every event of every chat: `id` orders a user's stream (the SSE id), `seq` counts per chat.
CREATE TABLE events (
    id BIGSERIAL PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    run_id TEXT,
    seq BIGINT NOT NULL,
    data TEXT NOT NULL,
    UNIQUE (chat_id, seq)
);
CREATE INDEX events_user ON events(user_id, id);

CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    run_id TEXT,
    call_id TEXT NOT NULL,
    answered BIGINT NOT NULL DEFAULT 0
);
