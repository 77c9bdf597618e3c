//! The database: SQLite or PostgreSQL through `sqlx`'s `Any` driver (runtime queries, one SQL
//! text for both with `$N` placeholders), the migrations of each, and small helpers.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{ConnectOptions, Executor, SqlSafeStr};

use crate::error::{Error, Result};

/// The server's database pool, SQLite or PostgreSQL: every handler and store takes this name,
/// and every query is one SQL text for both (`$N` placeholders, integers, text, bytes).
pub type Db = sqlx::AnyPool;

/// Which database a pool reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One SQLite file under the data directory: one server process.
    Sqlite,
    /// A PostgreSQL database: several server processes may share it.
    Postgres,
}

impl Backend {
    /// The backend of `pool`.
    pub fn of(pool: &Db) -> Backend {
        match pool.connect_options().database_url.scheme() {
            "postgres" | "postgresql" => Backend::Postgres,
            _ => Backend::Sqlite,
        }
    }
}

/// SQLite's pool: its connections (writes are funnelled through the event log's writer too).
const SQLITE_CONNECTIONS: u32 = 4;

/// PostgreSQL's pool: its connections (the server is the only client it has to share with).
const POSTGRES_CONNECTIONS: u32 = 8;

/// What every SQLite connection is set to: WAL (readers never wait for the writer), a wait of
/// five seconds for the write lock before failing, foreign keys enforced.
const SQLITE_PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
     PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;";

/// The migrations of `backend`, in order: one directory each (their DDL differs), the same
/// logical schema.
fn migrator(backend: Backend) -> Migrator {
    let steps: [(i64, &str, &'static str); 13] = match backend {
        Backend::Sqlite => [
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
            (
                4,
                "leases",
                include_str!("../migrations/sqlite/0004_leases.sql"),
            ),
            (
                5,
                "search",
                include_str!("../migrations/sqlite/0005_search.sql"),
            ),
            (
                6,
                "chat_grants",
                include_str!("../migrations/sqlite/0006_chat_grants.sql"),
            ),
            (
                7,
                "user_settings",
                include_str!("../migrations/sqlite/0007_user_settings.sql"),
            ),
            (
                8,
                "asks",
                include_str!("../migrations/sqlite/0008_asks.sql"),
            ),
            (
                9,
                "devices",
                include_str!("../migrations/sqlite/0009_devices.sql"),
            ),
            (
                10,
                "device_chats",
                include_str!("../migrations/sqlite/0010_device_chats.sql"),
            ),
            (
                11,
                "mount_work",
                include_str!("../migrations/sqlite/0011_mount_work.sql"),
            ),
            (
                12,
                "shares",
                include_str!("../migrations/sqlite/0012_shares.sql"),
            ),
            (
                13,
                "device_tokens",
                include_str!("../migrations/sqlite/0013_device_tokens.sql"),
            ),
        ],
        Backend::Postgres => [
            (
                1,
                "init",
                include_str!("../migrations/postgres/0001_init.sql"),
            ),
            (
                2,
                "admin",
                include_str!("../migrations/postgres/0002_admin.sql"),
            ),
            (
                3,
                "chat_tokens",
                include_str!("../migrations/postgres/0003_chat_tokens.sql"),
            ),
            (
                4,
                "leases",
                include_str!("../migrations/postgres/0004_leases.sql"),
            ),
            (
                5,
                "search",
                include_str!("../migrations/postgres/0005_search.sql"),
            ),
            (
                6,
                "chat_grants",
                include_str!("../migrations/postgres/0006_chat_grants.sql"),
            ),
            (
                7,
                "user_settings",
                include_str!("../migrations/postgres/0007_user_settings.sql"),
            ),
            (
                8,
                "asks",
                include_str!("../migrations/postgres/0008_asks.sql"),
            ),
            (
                9,
                "devices",
                include_str!("../migrations/postgres/0009_devices.sql"),
            ),
            (
                10,
                "device_chats",
                include_str!("../migrations/postgres/0010_device_chats.sql"),
            ),
            (
                11,
                "mount_work",
                include_str!("../migrations/postgres/0011_mount_work.sql"),
            ),
            (
                12,
                "shares",
                include_str!("../migrations/postgres/0012_shares.sql"),
            ),
            (
                13,
                "device_tokens",
                include_str!("../migrations/postgres/0013_device_tokens.sql"),
            ),
        ],
    };
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

/// The URL of the SQLite file `path` (created when missing).
pub fn sqlite_url(path: &Path) -> String {
    let mut url = String::from("sqlite://");
    for c in path.display().to_string().chars() {
        match c {
            '%' | '?' | '#' | ' ' => url.push_str(&format!("%{:02X}", c as u32)),
            c => url.push(c),
        }
    }
    url.push_str("?mode=rwc");
    url
}

/// Opens the database at `url` (`sqlite://…` or `postgres://…`) and runs its migrations. Two
/// processes starting on a fresh PostgreSQL database take turns (the migrator holds an advisory
/// lock), so the schema is made once.
pub async fn open(url: &str) -> Result<Db> {
    sqlx::any::install_default_drivers();
    let options: AnyConnectOptions = url
        .parse()
        .map_err(|e: sqlx::Error| Error::Database(format!("{}: {e}", shown_url(url))))?;
    let options = options.disable_statement_logging();
    let backend = match options.database_url.scheme() {
        "sqlite" => Backend::Sqlite,
        "postgres" | "postgresql" => Backend::Postgres,
        other => {
            return Err(Error::Database(format!(
                "{}: unknown database kind {other:?}: use sqlite://FILE or postgres://…",
                shown_url(url)
            )));
        }
    };
    let pool = match backend {
        Backend::Sqlite => {
            AnyPoolOptions::new()
                .max_connections(SQLITE_CONNECTIONS)
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        conn.execute(SQLITE_PRAGMAS).await?;
                        Ok(())
                    })
                })
                .connect_with(options)
                .await
        }
        Backend::Postgres => {
            AnyPoolOptions::new()
                .max_connections(POSTGRES_CONNECTIONS)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(options)
                .await
        }
    }
    .map_err(|e| Error::Database(format!("{}: {e}", shown_url(url))))?;
    migrator(backend).run(&pool).await?;
    Ok(pool)
}

/// A transaction that writes (see [`begin_write`]): used as the connection it runs on.
pub struct Write {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    /// SQLite's turn of this process's writers, held to the end of the transaction.
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Write {
    /// Commits the transaction.
    pub async fn commit(self) -> std::result::Result<(), sqlx::Error> {
        self.tx.commit().await
    }
}

impl std::ops::Deref for Write {
    type Target = sqlx::AnyConnection;
    fn deref(&self) -> &sqlx::AnyConnection {
        &self.tx
    }
}

impl std::ops::DerefMut for Write {
    fn deref_mut(&mut self) -> &mut sqlx::AnyConnection {
        &mut self.tx
    }
}

/// The writers of each SQLite database of this process, in line (by the database's URL).
fn sqlite_turns(pool: &Db) -> Arc<tokio::sync::Mutex<()>> {
    type Turns = std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>;
    static TURNS: std::sync::LazyLock<std::sync::Mutex<Turns>> =
        std::sync::LazyLock::new(Default::default);
    let key = pool.connect_options().database_url.to_string();
    TURNS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(key)
        .or_default()
        .clone()
}

/// A transaction that will write. On SQLite the process's writers wait in line here, in order,
/// instead of in SQLite's busy handler (whose sleeps grow to 100 ms, and had held events and
/// transcripts back under load), and it takes SQLite's write lock at once (`BEGIN IMMEDIATE`,
/// so it never fails half-way on a lock taken after its reads); on PostgreSQL an ordinary one.
pub async fn begin_write(pool: &Db) -> std::result::Result<Write, sqlx::Error> {
    match Backend::of(pool) {
        Backend::Sqlite => {
            let turn = sqlite_turns(pool).lock_owned().await;
            Ok(Write {
                tx: pool.begin_with("BEGIN IMMEDIATE").await?,
                _turn: Some(turn),
            })
        }
        Backend::Postgres => Ok(Write {
            tx: pool.begin().await?,
            _turn: None,
        }),
    }
}

/// The rows of one multi-row insert ([`Stmt::merged`]). Not more: SQLite's binding of a
/// statement's parameters grows with the square of their number (sqlx looks each one's name
/// up; with 200 events in one statement it was 60% of the server's time under load), and a few
/// sizes of statement are prepared once and kept.
pub const ROWS_PER_INSERT: usize = 16;

/// A value bound to a [`Stmt`].
#[derive(Debug, Clone)]
pub enum Arg {
    /// An integer.
    Int(i64),
    /// A text, or NULL.
    Text(Option<String>),
}

/// A statement that writes, with its values, owned: it can wait in a queue (the event log's
/// writer stores it in order with the events: `Hub::write_later` of the chats).
#[derive(Debug, Clone)]
pub struct Stmt {
    sql: std::borrow::Cow<'static, str>,
    args: Vec<Arg>,
}

impl Stmt {
    /// The statement `sql` (placeholders `$1`, `$2`, … bound in order).
    pub fn new(sql: &'static str) -> Stmt {
        Stmt {
            sql: sql.into(),
            args: Vec::new(),
        }
    }

    /// `stmts` as few statements: each run of inserts of one text (`INSERT … VALUES (…)`)
    /// becomes multi-row inserts of at most `rows` rows each (one statement for many rows, not
    /// one each); the others as they are, in order.
    pub fn merged(stmts: &[Stmt], rows: usize) -> Vec<Stmt> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < stmts.len() {
            let first = &stmts[i];
            let Some(at) = first.sql.find(" VALUES (") else {
                out.push(first.clone());
                i += 1;
                continue;
            };
            let tuple = &first.sql[at + " VALUES ".len()..];
            let mut merged = first.clone();
            let mut sql = first.sql.clone().into_owned();
            let mut n = 1;
            while n < rows.max(1) && i + n < stmts.len() && stmts[i + n].sql == first.sql {
                sql.push_str(", ");
                sql.push_str(&renumbered(tuple, merged.args.len()));
                merged.args.extend(stmts[i + n].args.iter().cloned());
                n += 1;
            }
            merged.sql = sql.into();
            out.push(merged);
            i += n;
        }
        out
    }

    /// Binds an integer next.
    pub fn int(mut self, v: i64) -> Stmt {
        self.args.push(Arg::Int(v));
        self
    }

    /// Binds a text (or NULL) next.
    pub fn text(mut self, v: Option<&str>) -> Stmt {
        self.args.push(Arg::Text(v.map(str::to_owned)));
        self
    }

    /// The query to run.
    pub fn query(&self) -> sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments> {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(self.sql.as_ref()));
        for a in &self.args {
            q = match a {
                Arg::Int(v) => q.bind(*v),
                Arg::Text(v) => q.bind(v.as_deref()),
            };
        }
        q
    }
}

/// `tuple` (`($1, $2, 'x', $3)`) with each placeholder `$N` as `$(N + offset)`.
fn renumbered(tuple: &str, offset: usize) -> String {
    let mut out = String::with_capacity(tuple.len() + 8);
    let mut chars = tuple.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        out.push(c);
        if c != '$' {
            continue;
        }
        let mut digits = String::new();
        while let Some((_, d)) = chars.peek().copied().filter(|(_, d)| d.is_ascii_digit()) {
            digits.push(d);
            chars.next();
        }
        match digits.parse::<usize>() {
            Ok(n) => out.push_str(&(n + offset).to_string()),
            Err(_) => out.push_str(&digits),
        }
    }
    out
}

/// Runs one statement that writes: on SQLite in the process's line of writers (see
/// [`begin_write`]), never in SQLite's busy handler; on PostgreSQL as it is.
pub async fn execute(
    pool: &Db,
    query: sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments>,
) -> std::result::Result<sqlx::any::AnyQueryResult, sqlx::Error> {
    match Backend::of(pool) {
        Backend::Sqlite => {
            let mut tx = begin_write(pool).await?;
            let done = query.execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(done)
        }
        Backend::Postgres => query.execute(pool).await,
    }
}

/// A database URL as logs may show it: without its password.
pub fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "the database URL".into(),
    }
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
