//! The database: SQLite through `sqlx` (runtime queries, `$N` placeholders so the same SQL can
//! serve PostgreSQL later), its migrations, and the small queries the rest of the server uses.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{SqlSafeStr, SqlitePool};

/// The server's database pool (every handler and store takes this name, whatever the backend).
pub type Db = SqlitePool;

use crate::error::{Error, Result};

/// The pool's connections (writes are funnelled through the event log's lock as well).
const MAX_CONNECTIONS: u32 = 4;

/// How long a connection waits for SQLite's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The migrations of the SQLite schema, in order.
fn migrator() -> Migrator {
    let steps = [
        (
            1,
            "init",
            include_str!("../migrations/sqlite/0001_init.sql"),
        ),
        (
            2,
            "admin",
            include_str!("../migrations/sqlite/0002_admin.sql"),
        ),
        (
            3,
            "chat_tokens",
            include_str!("../migrations/sqlite/0003_chat_tokens.sql"),
        ),
    ];
    Migrator::with_migrations(
        steps
            .into_iter()
            .map(|(version, name, sql)| {
                Migration::new(
                    version,
                    name.into(),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

/// Opens (creating) the database file `path` in WAL mode and runs the migrations.
pub async fn open(path: &Path) -> Result<Db> {
    let url = format!("sqlite://{}", path.display());
    let options = SqliteConnectOptions::from_str(&url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        .busy_timeout(BUSY_TIMEOUT);
    let pool = SqlitePoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .connect_with(options)
        .await?;
    migrator().run(&pool).await?;
    Ok(pool)
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    i64::try_from(harness_agent::time::now()).unwrap_or(i64::MAX)
}

/// A random token: 32 bytes from the OS, as hex.
pub fn random_token() -> Result<String> {
    let mut buf = [0u8; 32];
    getrandom::fill(&mut buf).map_err(|e| Error::Random(e.to_string()))?;
    Ok(hex::encode(buf))
}

/// A short random id (chats' runs, approvals): 12 bytes as hex.
pub fn random_id() -> Result<String> {
    let mut buf = [0u8; 12];
    getrandom::fill(&mut buf).map_err(|e| Error::Random(e.to_string()))?;
    Ok(hex::encode(buf))
}

/// The SHA-256 of a token, as hex: all the database keeps of it.
pub fn token_hash(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}
