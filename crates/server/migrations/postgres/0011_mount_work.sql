-- What a chat keeps of its work on each forge mount (issue 32, spec/filesystem.md *Forge
-- mounts*): the branch a `branch` call switched it to (NULL: the mount's working branch or
-- llembas/CHAT) and the paths its file tools staged and it has not committed yet (a JSON list,
-- relative to the mount), so a session built again (a page opened, a restart, another process)
-- commits what this chat staged and no one else's. The twin of
-- migrations/sqlite/0011_mount_work.sql.
CREATE TABLE mount_work (
    chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    mount TEXT NOT NULL,
    branch TEXT,
    staged TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (chat_id, mount)
);
