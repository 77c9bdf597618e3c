//! Chats' transcripts in the database: harness-agent's [`SessionStore`] over SQL rows, one row
//! per transcript entry, appended as the loop writes them.
//!
//! One writer task per server stores them ([`Transcripts`]): the seam is synchronous, and a
//! session's `append` or `save` only puts its rows in the writer's queue, in order, and goes on
//! (the loop never waits on the database between a model's answer and its next request); the
//! writer takes every row waiting at once and stores them in one transaction, so 200 chats
//! starting at one instant pay a few commits, not 200 in line. Whatever reads transcripts
//! ([`load_entries`], [`find_meta`], a session's `load`) waits first for the rows queued before
//! it ([`Transcripts::flush`]). A row the database refuses is said in the log, and the session's
//! next call answers the error.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::db::Db;
use harness_agent::{Meta, SeamError, SessionStore};
use harness_loop::transcript::Entry;
use tokio::sync::{mpsc, oneshot};

use crate::db::{now, random_id};

/// The most queued writes one transaction stores.
const MAX_BATCH: usize = 512;

/// One write waiting in the queue.
enum Job {
    /// A new session's row.
    Create {
        id: String,
        user_id: i64,
        place: String,
        at: i64,
        model: String,
        done: oneshot::Sender<Result<(), String>>,
    },
    /// A session's metadata.
    Save {
        id: String,
        user_id: i64,
        updated: i64,
        title: String,
        model: String,
        failed: Failed,
    },
    /// Entries at the end of a session's transcript.
    Append {
        id: String,
        user_id: i64,
        texts: Vec<String>,
        failed: Failed,
    },
    /// Answered once every write queued before it is stored.
    Flush(oneshot::Sender<()>),
}

/// The first write of a session the database refused, said by the session's next call.
type Failed = Arc<Mutex<Option<String>>>;

/// The transcripts' writer (a handle: clones share it).
#[derive(Clone)]
pub struct Transcripts {
    queue: mpsc::UnboundedSender<Job>,
}

impl Transcripts {
    /// The writer of `pool`'s transcripts, on the current runtime.
    pub fn new(pool: Db) -> Transcripts {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(writer(pool, rx));
        Transcripts { queue }
    }

    /// Waits until every write queued before this call is stored (or refused).
    pub async fn flush(&self) {
        let (done, stored) = oneshot::channel();
        if self.queue.send(Job::Flush(done)).is_ok() {
            let _ = stored.await;
        }
    }

    fn queue(&self, job: Job) -> Result<(), String> {
        self.queue
            .send(job)
            .map_err(|_| "the transcripts' writer has stopped".to_owned())
    }
}

/// Each session's last entry number, as this writer stored it (read once a session), by the
/// session and its owner.
type Lasts = std::collections::HashMap<(String, i64), i64>;

/// Stores what is queued, a batch at a time, until every handle is gone.
async fn writer(pool: Db, mut rx: mpsc::UnboundedReceiver<Job>) {
    let mut batch = Vec::new();
    let mut lasts = Lasts::new();
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let mut writes = Vec::with_capacity(batch.len());
        let mut flushes = Vec::new();
        for job in batch.drain(..) {
            match job {
                Job::Flush(done) => flushes.push(done),
                job => writes.push(job),
            }
        }
        let mut errors: Vec<Option<String>> = vec![None; writes.len()];
        let refs: Vec<&Job> = writes.iter().collect();
        if !writes.is_empty() && store_batch(&pool, &refs, &mut lasts).await.is_err() {
            // One write spoilt the batch: each alone, so only its own session hears of it,
            // with the numbers read again.
            for (job, error) in writes.iter().zip(&mut errors) {
                lasts.clear();
                if let Err(e) = store_batch(&pool, &[job], &mut lasts).await {
                    refused(job, &e.to_string());
                    *error = Some(format!("database error: {e}"));
                }
            }
        }
        for (job, error) in writes.into_iter().zip(errors) {
            if let Job::Create { done, .. } = job {
                let _ = done.send(error.map_or(Ok(()), Err));
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

/// Says a refused write to the log and to its session.
fn refused(job: &Job, error: &str) {
    let (id, failed) = match job {
        Job::Save { id, failed, .. } | Job::Append { id, failed, .. } => (id, Some(failed)),
        Job::Create { id, .. } => (id, None),
        Job::Flush(_) => return,
    };
    tracing::error!("session {id}: a transcript write was refused: {error}");
    if let Some(failed) = failed {
        failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert_with(|| format!("database error: {error}"));
    }
}

/// Stores `jobs` in one transaction: the new sessions, then each session's last metadata, then
/// the entries, numbered on from `lasts` (which change only when it committed), in multi-row
/// inserts.
async fn store_batch(pool: &Db, jobs: &[&Job], lasts: &mut Lasts) -> Result<(), sqlx::Error> {
    use crate::db::Stmt;
    let mut creates = Vec::new();
    // A session made here has no entry yet: its first entries need no read of its last number.
    let mut next = Lasts::new();
    let mut saves: Vec<(&str, Stmt)> = Vec::new();
    let mut appends = Vec::new();
    for job in jobs {
        match job {
            Job::Create {
                id,
                user_id,
                place,
                at,
                model,
                ..
            } => {
                next.insert((id.clone(), *user_id), 0);
                creates.push(
                    Stmt::new(
                        "INSERT INTO agent_sessions (id, user_id, cwd, created, updated, title, model) VALUES ($1, $2, $3, $4, $4, '', $5)",
                    )
                    .text(Some(id))
                    .int(*user_id)
                    .text(Some(place))
                    .int(*at)
                    .text(Some(model)),
                );
            }
            Job::Save {
                id,
                user_id,
                updated,
                title,
                model,
                ..
            } => {
                // A session's metadata is written whole: its last save stands for the others.
                saves.retain(|(s, _)| *s != id.as_str());
                saves.push((
                    id,
                    Stmt::new(
                        // A title once stored (the first message's, or one the person gave) is kept.
                        "UPDATE agent_sessions SET updated = $1, title = CASE WHEN title = '' THEN $2 ELSE title END, model = $3 WHERE id = $4 AND user_id = $5",
                    )
                    .int(*updated)
                    .text(Some(title))
                    .text(Some(model))
                    .text(Some(id))
                    .int(*user_id),
                ));
            }
            Job::Append {
                id, user_id, texts, ..
            } => appends.push((id, *user_id, texts)),
            Job::Flush(_) => {}
        }
    }
    let mut tx = crate::db::begin_write(pool).await?;
    for c in Stmt::merged(&creates, crate::db::ROWS_PER_INSERT) {
        c.query().execute(&mut *tx).await?;
    }
    for (_, s) in &saves {
        s.query().execute(&mut *tx).await?;
    }
    let mut rows = Vec::new();
    for (id, user_id, texts) in appends {
        let key = (id.clone(), user_id);
        let last = match next.get(&key).or_else(|| lasts.get(&key)) {
            Some(n) => *n,
            None => {
                let row: Option<(i64, Option<i64>)> = sqlx::query_as(
                    "SELECT s.user_id, (SELECT MAX(n) FROM transcript WHERE session_id = $1) FROM agent_sessions s WHERE s.id = $1",
                )
                .bind(id.as_str())
                .fetch_optional(&mut *tx)
                .await?;
                match row {
                    Some((owner, last)) if owner == user_id => last.unwrap_or(0),
                    _ => return Err(sqlx::Error::RowNotFound),
                }
            }
        };
        let mut n = last;
        for text in texts {
            n += 1;
            rows.push(
                Stmt::new("INSERT INTO transcript (session_id, n, entry) VALUES ($1, $2, $3)")
                    .text(Some(id))
                    .int(n)
                    .text(Some(text)),
            );
        }
        next.insert(key, n);
    }
    for r in Stmt::merged(&rows, crate::db::ROWS_PER_INSERT) {
        r.query().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    lasts.extend(next);
    Ok(())
}

/// One user's sessions in the database.
pub struct SqlStore {
    pool: Db,
    writer: Transcripts,
    user_id: i64,
    /// The first write of this store the database refused.
    failed: Failed,
    handle: tokio::runtime::Handle,
}

impl SqlStore {
    /// The store of `user_id`'s sessions, writing through `writer` (called on the server's
    /// runtime).
    pub fn new(pool: Db, writer: Transcripts, user_id: i64) -> SqlStore {
        SqlStore {
            pool,
            writer,
            user_id,
            failed: Failed::default(),
            handle: tokio::runtime::Handle::current(),
        }
    }

    /// Answers a write refused earlier, once.
    fn refused_before(&self) -> Result<(), String> {
        match self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits on the runtime for `fut` (the seam is synchronous; the server runs multi-threaded).
    fn wait<T>(&self, fut: impl std::future::Future<Output = T>) -> T {
        tokio::task::block_in_place(|| self.handle.block_on(fut))
    }
}

/// A session's transcript, entry by entry, as stored.
pub async fn load_entries(
    pool: &Db,
    writer: &Transcripts,
    user_id: i64,
    id: &str,
) -> crate::Result<Vec<Entry>> {
    writer.flush().await;
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
pub async fn find_meta(
    pool: &Db,
    writer: &Transcripts,
    user_id: i64,
    id: &str,
) -> crate::Result<Option<Meta>> {
    writer.flush().await;
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

/// The most earlier chats `session_search` reads for one query (those whose transcripts hold
/// one of its words, the most recently updated first).
const SEARCHED_CHATS: i64 = 200;

/// `user_id`'s chats but `skip` whose transcripts hold one of `query`'s words (case folded),
/// each with its transcript, for `session_search` to rank.
async fn chats_holding(
    pool: &Db,
    writer: &Transcripts,
    user_id: i64,
    query: &str,
    skip: &str,
) -> crate::Result<Vec<(Meta, Vec<Entry>)>> {
    writer.flush().await;
    let mut ids: Vec<String> = Vec::new();
    for word in harness_agent::session_search::words(query) {
        let found: Vec<(String,)> = sqlx::query_as(
            "SELECT s.id FROM agent_sessions s WHERE s.user_id = $1 AND s.id != $2 AND EXISTS \
             (SELECT 1 FROM transcript t WHERE t.session_id = s.id AND LOWER(t.entry) LIKE $3) \
             ORDER BY s.updated DESC LIMIT $4",
        )
        .bind(user_id)
        .bind(skip)
        .bind(format!("%{word}%"))
        .bind(SEARCHED_CHATS)
        .fetch_all(pool)
        .await?;
        for (id,) in found {
            if !ids.contains(&id) && ids.len() < SEARCHED_CHATS as usize {
                ids.push(id);
            }
        }
    }
    let mut chats = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(meta) = find_meta(pool, writer, user_id, &id).await? {
            chats.push((meta, load_entries(pool, writer, user_id, &id).await?));
        }
    }
    Ok(chats)
}

impl SessionStore for SqlStore {
    fn searches(&self) -> bool {
        true
    }

    fn search(&self, query: &str, limit: usize, skip: &str) -> Option<String> {
        let found = self.wait(chats_holding(
            &self.pool,
            &self.writer,
            self.user_id,
            query,
            skip,
        ));
        Some(match found {
            Ok(chats) => harness_agent::session_search::search(query, chats, limit, skip),
            Err(e) => format!("session_search: the chats could not be read: {e}"),
        })
    }

    fn create(&self, place: &str, model: &str) -> Result<Meta, SeamError> {
        let t = now();
        let stamp: String = harness_agent::time::format_time(u64::try_from(t).unwrap_or(0))
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        let tag = random_id().map_err(|e| SeamError::store("", e))?;
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
        // Waited for: the chat's own row refers to it.
        let (done, stored) = oneshot::channel();
        self.writer
            .queue(Job::Create {
                id,
                user_id: self.user_id,
                place: place.to_owned(),
                at: t,
                model: model.to_owned(),
                done,
            })
            .map_err(|e| SeamError::store(&meta.id, e))?;
        self.wait(stored)
            .map_err(|_| "the transcripts' writer has stopped".to_owned())
            .and_then(|stored| stored)
            .map_err(|e| SeamError::store(&meta.id, e))?;
        Ok(meta)
    }

    fn save(&self, meta: &Meta) -> Result<(), SeamError> {
        let failed = |e| SeamError::store(&meta.id, e);
        self.refused_before().map_err(failed)?;
        self.writer
            .queue(Job::Save {
                id: meta.id.clone(),
                user_id: self.user_id,
                updated: i64::try_from(meta.updated).unwrap_or(i64::MAX),
                title: meta.title.clone(),
                model: meta.model.clone(),
                failed: self.failed.clone(),
            })
            .map_err(failed)
    }

    fn append(&self, id: &str, entries: &[Entry]) -> Result<(), SeamError> {
        let failed = |e| SeamError::store(id, e);
        self.refused_before().map_err(failed)?;
        let mut texts = Vec::with_capacity(entries.len());
        for e in entries {
            texts.push(serde_json::to_string(e).map_err(|e| SeamError::store(id, e))?);
        }
        self.writer
            .queue(Job::Append {
                id: id.to_owned(),
                user_id: self.user_id,
                texts,
                failed: self.failed.clone(),
            })
            .map_err(failed)
    }

    fn load(&self, id: &str) -> Result<Vec<Entry>, SeamError> {
        self.wait(load_entries(&self.pool, &self.writer, self.user_id, id))
            .map_err(|e| SeamError::store(id, e))
    }

    fn find(&self, id: &str) -> Result<Meta, SeamError> {
        self.wait(find_meta(&self.pool, &self.writer, self.user_id, id))
            .map_err(|e| SeamError::store(id, e))?
            .ok_or_else(|| SeamError::NoSession { id: id.to_owned() })
    }
}
