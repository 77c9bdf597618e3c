//! Chats' transcripts in the database: harness-agent's [`SessionStore`] over SQL rows, one row
//! per transcript entry, appended as the loop writes them. The seam is synchronous; each call
//! waits for its query on the runtime (`block_in_place`: the server runs multi-threaded).

use std::path::PathBuf;

use crate::db::Db;
use harness_agent::{Meta, SessionStore};
use harness_loop::transcript::Entry;

use crate::db::{now, random_id};

/// One user's sessions in the database.
pub struct SqlStore {
    pool: Db,
    user_id: i64,
    handle: tokio::runtime::Handle,
}

impl SqlStore {
    /// The store of `user_id`'s sessions (called on the server's runtime).
    pub fn new(pool: Db, user_id: i64) -> SqlStore {
        SqlStore {
            pool,
            user_id,
            handle: tokio::runtime::Handle::current(),
        }
    }

    fn wait<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, String> {
        tokio::task::block_in_place(|| self.handle.block_on(fut))
            .map_err(|e| format!("database error: {e}"))
    }
}

/// A session's transcript, entry by entry, as stored.
pub async fn load_entries(pool: &Db, user_id: i64, id: &str) -> crate::Result<Vec<Entry>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT t.entry FROM transcript t JOIN agent_sessions s ON s.id = t.session_id WHERE t.session_id = $1 AND s.user_id = $2 ORDER BY t.n",
    )
    .bind(id)
    .bind(user_id)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|(text,)| {
            serde_json::from_str(&text)
                .map_err(|e| crate::Error::Stored(format!("transcript of {id}: {e}")))
        })
        .collect()
}

/// A session's metadata.
pub async fn find_meta(pool: &Db, user_id: i64, id: &str) -> crate::Result<Option<Meta>> {
    let row: Option<(String, String, i64, i64, String, String)> = sqlx::query_as(
        "SELECT id, cwd, created, updated, title, model FROM agent_sessions WHERE id = $1 AND user_id = $2",
    )
    .bind(id)
    .bind(user_id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(id, cwd, created, updated, title, model)| Meta {
        id,
        cwd: PathBuf::from(cwd),
        created: u64::try_from(created).unwrap_or(0),
        updated: u64::try_from(updated).unwrap_or(0),
        title,
        model,
        mode: None,
    }))
}

impl SessionStore for SqlStore {
    fn create(&self, place: &str, model: &str) -> Result<Meta, String> {
        let t = now();
        let stamp: String = harness_agent::time::format_time(u64::try_from(t).unwrap_or(0))
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        let tag = random_id().map_err(|e| e.to_string())?;
        let id = format!(
            "{}-{}-{}",
            &stamp[..8.min(stamp.len())],
            &stamp[8.min(stamp.len())..],
            &tag[..8]
        );
        let meta = Meta {
            id: id.clone(),
            cwd: PathBuf::from(place),
            created: u64::try_from(t).unwrap_or(0),
            updated: u64::try_from(t).unwrap_or(0),
            title: String::new(),
            model: model.to_owned(),
            mode: None,
        };
        self.wait(
            sqlx::query(
                "INSERT INTO agent_sessions (id, user_id, cwd, created, updated, title, model) VALUES ($1, $2, $3, $4, $4, '', $5)",
            )
            .bind(&id)
            .bind(self.user_id)
            .bind(place)
            .bind(t)
            .bind(model)
            .execute(&self.pool),
        )?;
        Ok(meta)
    }

    fn save(&self, meta: &Meta) -> Result<(), String> {
        self.wait(
            sqlx::query(
                // A title once stored (the first message's, or one the person gave) is kept.
                "UPDATE agent_sessions SET updated = $1, title = CASE WHEN title = '' THEN $2 ELSE title END, model = $3 WHERE id = $4 AND user_id = $5",
            )
            .bind(i64::try_from(meta.updated).unwrap_or(i64::MAX))
            .bind(&meta.title)
            .bind(&meta.model)
            .bind(&meta.id)
            .bind(self.user_id)
            .execute(&self.pool),
        )?;
        Ok(())
    }

    fn append(&self, id: &str, entries: &[Entry]) -> Result<(), String> {
        let mut texts = Vec::with_capacity(entries.len());
        for e in entries {
            texts.push(serde_json::to_string(e).map_err(|e| e.to_string())?);
        }
        let pool = self.pool.clone();
        let user_id = self.user_id;
        self.wait(async move {
            let mut tx = crate::db::begin_write(&pool).await?;
            let owner: Option<i64> =
                sqlx::query_scalar("SELECT user_id FROM agent_sessions WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
            if owner != Some(user_id) {
                return Err(sqlx::Error::RowNotFound);
            }
            let last: Option<i64> =
                sqlx::query_scalar("SELECT MAX(n) FROM transcript WHERE session_id = $1")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?;
            let mut n = last.unwrap_or(0);
            for text in &texts {
                n += 1;
                sqlx::query("INSERT INTO transcript (session_id, n, entry) VALUES ($1, $2, $3)")
                    .bind(id)
                    .bind(n)
                    .bind(text)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await
        })
    }

    fn load(&self, id: &str) -> Result<Vec<Entry>, String> {
        tokio::task::block_in_place(|| {
            self.handle
                .block_on(load_entries(&self.pool, self.user_id, id))
        })
        .map_err(|e| e.to_string())
    }

    fn find(&self, id: &str) -> Result<Meta, String> {
        tokio::task::block_in_place(|| {
            self.handle
                .block_on(find_meta(&self.pool, self.user_id, id))
        })
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no session {id} in the store"))
    }
}
