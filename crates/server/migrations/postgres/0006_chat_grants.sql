-- A chat made narrower than its user's view: these paths at most at these levels (floors over
-- the user's grants), nothing else.
CREATE TABLE chat_grants (
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    level TEXT NOT NULL,
    PRIMARY KEY (chat_id, path)
);
