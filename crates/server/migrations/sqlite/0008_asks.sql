-- What a run waits for from a page of its chat, on a database several processes share (so on
-- PostgreSQL only: one SQLite server keeps its asks in memory). The twin of
-- migrations/postgres/0008_asks.sql, for one schema on both.
CREATE TABLE asks (
    id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    run_id TEXT,
    kind TEXT NOT NULL,
    answered INTEGER NOT NULL DEFAULT 0,
    answer TEXT
);
CREATE INDEX asks_run ON asks (run_id);
