-- What a run waits for from a page of its chat (a question's answer, a show, a python run), on a
-- database several processes share: a page connected to any of them may answer, the row takes
-- the first answer (answered, and the answer as JSON), and the process whose run waits reads it
-- from here. Deleted when the run ends. The twin of migrations/sqlite/0008_asks.sql.
CREATE TABLE asks (
    id TEXT PRIMARY KEY,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    run_id TEXT,
    kind TEXT NOT NULL,
    answered BIGINT NOT NULL DEFAULT 0,
    answer TEXT
);
CREATE INDEX asks_run ON asks (run_id);
