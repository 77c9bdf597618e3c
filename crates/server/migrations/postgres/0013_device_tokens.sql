-- Which linked device a chat's memory token was handed to (NULL: a token the person made), so a
-- device's tokens end with it: when it is revoked, and, on a server that is the database's only
-- process, when the server starts (no link of before can still be up). The twin of
-- migrations/sqlite/0013_device_tokens.sql.
ALTER TABLE chat_tokens ADD COLUMN device_id TEXT;
CREATE INDEX chat_tokens_device ON chat_tokens (device_id);
