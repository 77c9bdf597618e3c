-- Agent chats on a linked device (spec/acp.md §5): the chat's rows are a chat's like any other
-- (chats, agent_sessions for its title, events, runs, approvals); this row says where it runs:
-- the device, the directory on its disk, and the device's session id once one was opened (for
-- `session/load` after a re-dial). No foreign key to devices: a revoked device's chats stay,
-- offline for good. The twin of migrations/sqlite/0010_device_chats.sql.
CREATE TABLE device_chats (
    chat_id TEXT PRIMARY KEY REFERENCES chats(id) ON DELETE CASCADE,
    device_id TEXT NOT NULL,
    cwd TEXT NOT NULL,
    session TEXT
);
CREATE INDEX device_chats_device ON device_chats (device_id);
