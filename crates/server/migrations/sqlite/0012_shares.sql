-- A chat shared read-only by its owner (issue 34): the link's token (only its hash is kept),
-- the chat, and the copy of the conversation the link shows (Markdown, tool results left out),
-- made when the owner shared it. One link per chat: sharing again makes a new one and ends the
-- old; the owner's "stop sharing" deletes the row, and the link answers 404 from then on. The
-- twin of migrations/postgres/0012_shares.sql.
CREATE TABLE shares (
    token_hash TEXT PRIMARY KEY,
    chat_id TEXT NOT NULL UNIQUE REFERENCES chats(id) ON DELETE CASCADE,
    user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created INTEGER NOT NULL,
    title TEXT NOT NULL,
    markdown TEXT NOT NULL
);
