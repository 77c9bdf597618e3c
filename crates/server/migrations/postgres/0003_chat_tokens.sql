-- Bearer tokens scoped to one chat (its person's memory API, spec/acp.md §12); only hashes kept.
CREATE TABLE chat_tokens (
    token_hash TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created BIGINT NOT NULL
);
CREATE INDEX chat_tokens_chat ON chat_tokens(chat_id);
