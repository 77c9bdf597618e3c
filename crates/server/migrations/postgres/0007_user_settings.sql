-- A user's settings: the personality preset their chats' sessions are built with (a name of
-- spec/prompts/personality/), and the mode and model a new chat takes when it names none ('':
-- the server's default). The twin of migrations/sqlite/0007_user_settings.sql.
CREATE TABLE user_settings (
    user_id BIGINT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    personality TEXT NOT NULL DEFAULT 'default',
    mode TEXT NOT NULL DEFAULT 'manual',
    model TEXT NOT NULL DEFAULT ''
);
