//! The event log: every event of every chat stored, with its chat's next number, and sent to
//! its user's open streams, in one order.
//!
//! One writer task stores them: an event waits in its queue, and the writer takes every event
//! waiting at once and stores them in one transaction (one multi-row insert), so a busy server
//! pays one commit for many events, not one each. The events of one user go to that user's own
//! channel, so a stream wakes for its own events only.
//!
//! On SQLite this process is the log's only writer: an event gets its id and its chat's number
//! here, at once, and goes to the streams *before* it is stored — a streamed answer never waits
//! for a commit (the commit of 200 chats' pieces, or a WAL checkpoint, used to hold every piece
//! back by up to a third of a second). What reads stored events waits first for those queued
//! before it ([`Hub::flush`]), so a stream's replay misses none. Ids are reserved in the
//! database a block at a time ([`ID_BLOCK`], in `sqlite_sequence`) before they are given, so an
//! id a stream saw is never given again after a crash lost its event. On PostgreSQL, where other
//! processes write too, ids come from the database's sequence and an event goes to the streams
//! once it is committed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::db::{Backend, Db, Stmt};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::{BROADCAST_CAPACITY, Stored};
use crate::error::{Error, Result};

/// The most events one writer's transaction stores.
const MAX_BATCH: usize = 4_096;

/// Ids reserved at a time on SQLite: one write of `sqlite_sequence` per this many events.
const ID_BLOCK: i64 = 10_000;

/// The writers' queues of this process's SQLite logs, by database URL (see [`flush`]).
fn logs() -> &'static Mutex<HashMap<String, mpsc::UnboundedSender<Job>>> {
    static LOGS: std::sync::LazyLock<Mutex<HashMap<String, mpsc::UnboundedSender<Job>>>> =
        std::sync::LazyLock::new(Default::default);
    &LOGS
}

/// Waits until the event log of `pool` (SQLite) has stored what it was given so far — its
/// events and the runs' rows queued with them ([`Hub::write_later`]): for readers that have the
/// database and not the log.
pub async fn flush(pool: &Db) {
    let queue = logs()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&pool.connect_options().database_url.to_string())
        .cloned();
    if let Some(queue) = queue {
        let (done, stored) = oneshot::channel();
        if queue.send(Job::Flush(done)).is_ok() {
            let _ = stored.await;
        }
    }
}

/// What the writer is given.
enum Job {
    /// An event to number in the database, then store and send (PostgreSQL).
    Pending(Pending),
    /// An event numbered and sent already, to store (SQLite).
    Numbered(Arc<Stored>),
    /// A statement to run in order with the events (SQLite).
    Write(Stmt),
    /// Answered once every event queued before it is stored (or refused).
    Flush(oneshot::Sender<()>),
}

/// An event waiting to be stored.
struct Pending {
    user_id: i64,
    chat: String,
    run: Option<String>,
    event: Value,
    done: oneshot::Sender<Result<Arc<Stored>>>,
}

type Streams = Arc<Mutex<HashMap<i64, broadcast::Sender<Arc<Stored>>>>>;

/// The event log.
pub struct Hub {
    queue: mpsc::UnboundedSender<Job>,
    streams: Streams,
    shared: bool,
    pool: Db,
    /// The ids and numbers given so far (SQLite).
    counters: Mutex<Counters>,
    /// Held while ids are read at the start or reserved (SQLite).
    reserving: tokio::sync::Mutex<()>,
}

impl Hub {
    /// The log on `pool` (its writer runs on the current runtime). On PostgreSQL the log is
    /// shared with the other server processes on the database: `instance` names this one in the
    /// notices it sends them.
    pub fn new(pool: Db, instance: &str) -> Hub {
        let (queue, rx) = mpsc::unbounded_channel();
        let streams: Streams = Arc::default();
        let shared = Backend::of(&pool) == Backend::Postgres;
        if !shared {
            logs()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(
                    pool.connect_options().database_url.to_string(),
                    queue.clone(),
                );
        }
        tokio::spawn(writer(
            pool.clone(),
            rx,
            streams.clone(),
            instance.to_owned(),
        ));
        Hub {
            queue,
            streams,
            shared,
            pool,
            counters: Mutex::default(),
            reserving: tokio::sync::Mutex::default(),
        }
    }

    /// On SQLite: runs `stmt` a moment later, in order with the events and in their
    /// transaction (a run's row before its events, its end after them), without waiting for it
    /// (what reads it calls [`Hub::flush`] first). A statement the database refuses is said in
    /// the log. Not for PostgreSQL, whose writes other processes must see at once.
    pub fn write_later(&self, stmt: Stmt) -> Result<()> {
        self.queue
            .send(Job::Write(stmt))
            .map_err(|_| Error::Stored("the event log has stopped".into()))
    }

    /// Waits until every event given before this call is stored (or refused): called before
    /// reading stored events.
    pub async fn flush(&self) {
        let (done, stored) = oneshot::channel();
        if self.queue.send(Job::Flush(done)).is_ok() {
            let _ = stored.await;
        }
    }

    /// Whether other processes write to this log too (PostgreSQL): a stream then reads what it
    /// sends from the database, in the order of the ids, whenever it is woken.
    pub fn shared(&self) -> bool {
        self.shared
    }

    /// Sends events another process stored to this process's streams of their user.
    pub fn deliver(&self, events: Vec<Stored>) {
        for e in events {
            send(&self.streams, &Arc::new(e));
        }
    }

    /// Whether a stream of `user_id` is open here.
    pub fn follows(&self, user_id: i64) -> bool {
        self.streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&user_id)
            .is_some_and(|tx| tx.receiver_count() > 0)
    }

    /// Follows every event of `user_id` stored from now on.
    pub fn subscribe(&self, user_id: i64) -> broadcast::Receiver<Arc<Stored>> {
        let mut streams = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        streams
            .entry(user_id)
            .or_insert_with(|| broadcast::channel(BROADCAST_CAPACITY).0)
            .subscribe()
    }

    /// Gives an event of `chat` its id and the chat's next number, sends it and stores it (on
    /// SQLite it is sent at once and stored a moment later; on PostgreSQL sent once stored).
    pub async fn append(
        &self,
        user_id: i64,
        chat: &str,
        run: Option<&str>,
        mut event: Value,
    ) -> Result<Arc<Stored>> {
        // A machine turn's job marks as fields, for the page.
        crate::marks::add_job_marks(&mut event);
        let stopped = || Error::Stored("the event log has stopped".into());
        if !self.shared {
            return self.append_here(user_id, chat, run, event).await;
        }
        let (done, answer) = oneshot::channel();
        self.queue
            .send(Job::Pending(Pending {
                user_id,
                chat: chat.to_owned(),
                run: run.map(str::to_owned),
                event,
                done,
            }))
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

impl Hub {
    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Forgets the numbers of a deleted chat.
    pub fn forget_chat(&self, chat: &str) {
        self.counters().seqs.remove(chat);
    }

    /// Says that `chat` is new: its events are numbered from 1 without a read.
    pub fn new_chat(&self, chat: &str) {
        self.counters().seqs.entry(chat.to_owned()).or_insert(0);
    }

    /// [`Hub::append`] on SQLite: the event numbered here, sent at once, stored a moment later.
    /// The lock of the numbers is a plain one, held for no query: what needs the database (the
    /// last id at the start, a new block of ids, a chat met for the first time) is read before.
    async fn append_here(
        &self,
        user_id: i64,
        chat: &str,
        run: Option<&str>,
        event: Value,
    ) -> Result<Arc<Stored>> {
        if !self.counters().seqs.contains_key(chat) {
            let stored: i64 =
                sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM events WHERE chat_id = $1")
                    .bind(chat)
                    .fetch_one(&self.pool)
                    .await?;
            // No event of the chat was given here before the read: what is stored is its
            // last number, unless another event of it got one since.
            let mut c = self.counters();
            let seq = c.seqs.entry(chat.to_owned()).or_insert(stored);
            *seq = (*seq).max(stored);
        }
        loop {
            {
                let mut c = self.counters();
                if let Some(last_id) = c.last_id.filter(|id| *id < c.reserved) {
                    let id = last_id + 1;
                    let seq = c.seqs.get(chat).copied().unwrap_or(0) + 1;
                    c.last_id = Some(id);
                    c.seqs.insert(chat.to_owned(), seq);
                    let s = Arc::new(Stored {
                        id,
                        user_id,
                        chat: chat.to_owned(),
                        run: run.map(str::to_owned),
                        seq,
                        event,
                    });
                    // Under the lock: every stream gets its user's events in the order of
                    // their ids, and the writer gets them in that order too.
                    send(&self.streams, &s);
                    self.queue
                        .send(Job::Numbered(s.clone()))
                        .map_err(|_| Error::Stored("the event log has stopped".into()))?;
                    return Ok(s);
                }
            }
            self.reserve_more().await?;
        }
    }

    /// Makes the log ready to number events (on SQLite, reads the last id given and reserves
    /// the first block of ids): at the start, so that the first events do not wait for it (200
    /// messages sent at once to a server just started all waited for the one reservation, in
    /// the line of the database's writers).
    pub async fn ready(&self) -> Result<()> {
        if self.shared {
            return Ok(());
        }
        self.reserve_more().await
    }

    /// Reads the last id given (at the start) and reserves the next block of ids.
    async fn reserve_more(&self) -> Result<()> {
        let _one = self.reserving.lock().await;
        let (last_id, reserved) = {
            let c = self.counters();
            (c.last_id, c.reserved)
        };
        let last_id = match last_id {
            Some(id) if id < reserved => return Ok(()),
            Some(id) => id,
            None => sqlx::query_scalar(
                "SELECT MAX(COALESCE((SELECT MAX(id) FROM events), 0), COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))",
            )
            .fetch_one(&self.pool)
            .await?,
        };
        reserve(&self.pool, last_id + ID_BLOCK).await?;
        let mut c = self.counters();
        c.last_id = Some(c.last_id.unwrap_or(last_id));
        c.reserved = last_id + ID_BLOCK;
        Ok(())
    }
}

/// The ids and numbers given on SQLite: the last id given (`None` until read), the last
/// reserved, and each chat's last number.
#[derive(Default)]
struct Counters {
    last_id: Option<i64>,
    reserved: i64,
    seqs: HashMap<String, i64>,
}

/// Reserves the events' ids up to `upto` (SQLite's AUTOINCREMENT never gives one at or below
/// its sequence, and neither does [`Hub::append`] after a restart).
async fn reserve(pool: &Db, upto: i64) -> Result<()> {
    let mut tx = crate::db::begin_write(pool).await?;
    let row: Option<i64> =
        sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
            .fetch_optional(&mut *tx)
            .await?;
    let sql = if row.is_some() {
        "UPDATE sqlite_sequence SET seq = $1 WHERE name = 'events'"
    } else {
        "INSERT INTO sqlite_sequence (name, seq) VALUES ('events', $1)"
    };
    sqlx::query(sql).bind(upto).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

async fn writer(
    pool: Db,
    mut rx: mpsc::UnboundedReceiver<Job>,
    streams: Streams,
    instance: String,
) {
    let mut jobs = Vec::new();
    while rx.recv_many(&mut jobs, MAX_BATCH).await > 0 {
        let mut batch = Vec::new();
        let mut local = Vec::new();
        let mut flushes = Vec::new();
        for job in jobs.drain(..) {
            match job {
                Job::Pending(p) => batch.push(p),
                Job::Numbered(s) => local.push(Local::Event(s)),
                Job::Write(w) => local.push(Local::Write(w)),
                Job::Flush(done) => flushes.push(done),
            }
        }
        if !local.is_empty() {
            store_local(&pool, &local).await;
        }
        if !batch.is_empty() {
            store_pending(&pool, &instance, &streams, batch).await;
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

/// What SQLite's writer stores, in order.
enum Local {
    Event(Arc<Stored>),
    Write(Stmt),
}

/// Stores events numbered and sent already and the statements queued with them, in one
/// transaction; when the database refuses one (an event whose chat is gone), each alone: that
/// one is said in the log, and the others are stored all the same.
async fn store_local(pool: &Db, local: &[Local]) {
    if store(pool, local).await.is_ok() {
        return;
    }
    for item in local {
        if let Err(e) = store(pool, std::slice::from_ref(item)).await {
            match item {
                Local::Event(s) => {
                    tracing::error!("event {} of chat {} was not stored: {e}", s.id, s.chat)
                }
                Local::Write(w) => tracing::error!("{w:?} was refused: {e}"),
            }
        }
    }
}

/// Stores `local` in one transaction: the events in multi-row inserts, the statements in
/// their order, a run of inserts of one kind (the runs begun) as multi-row inserts too (no
/// event refers to a run's row, so the two orders are apart).
async fn store(pool: &Db, local: &[Local]) -> Result<()> {
    let mut events = Vec::new();
    let mut writes = Vec::new();
    for item in local {
        match item {
            Local::Event(s) => events.push(s.clone()),
            Local::Write(w) => writes.push(w.clone()),
        }
    }
    let mut tx = crate::db::begin_write(pool).await?;
    for w in Stmt::merged(&writes, crate::db::ROWS_PER_INSERT) {
        w.query().execute(&mut *tx).await?;
    }
    insert(&mut tx, &events).await?;
    tx.commit().await?;
    Ok(())
}

/// Numbers events in the database, stores them and sends them (PostgreSQL).
async fn store_pending(pool: &Db, instance: &str, streams: &Streams, batch: Vec<Pending>) {
    {
        let stored = store_shared(pool, instance, &batch).await;
        match stored {
            Ok(stored) => {
                for (p, s) in batch.into_iter().zip(stored) {
                    send(streams, &s);
                    let _ = p.done.send(Ok(s));
                }
            }
            Err(_) if batch.len() > 1 => {
                // One event at fault (its chat gone) must not fail the others: each alone.
                for p in batch {
                    let one = std::slice::from_ref(&p);
                    let result = store_shared(pool, instance, one)
                        .await
                        .map(|mut v| v.remove(0));
                    if let Ok(s) = &result {
                        send(streams, s);
                    }
                    let _ = p.done.send(result);
                }
            }
            Err(e) => {
                for p in batch {
                    let _ = p.done.send(Err(Error::Stored(e.to_string())));
                }
            }
        }
    }
}

fn send(streams: &Streams, s: &Arc<Stored>) {
    let mut streams = streams
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(tx) = streams.get(&s.user_id) {
        if tx.receiver_count() == 0 {
            streams.remove(&s.user_id);
        } else {
            let _ = tx.send(s.clone());
        }
    }
}

/// The name of the PostgreSQL channel on which a process tells the others of the events it
/// stored: `INSTANCE USER FIRST LAST` (the ids of one user's events in one commit).
pub const EVENTS_CHANNEL: &str = "llembas_events";

/// A key of PostgreSQL's advisory locks for a user's events (apart from the migrator's keys).
fn user_lock(user_id: i64) -> i64 {
    (0x6c6c_656d_i64 << 32) | (user_id & 0xffff_ffff)
}

/// Stores a batch on PostgreSQL, where other processes store events too: the ids come from the
/// database's sequence and each chat's number from what is stored, while this transaction holds
/// each user's lock, so a user's events commit in the order of their ids (a stream that read id
/// N has seen every one before it); the other processes are told at the commit.
async fn store_shared(pool: &Db, instance: &str, batch: &[Pending]) -> Result<Vec<Arc<Stored>>> {
    let mut tx = pool.begin().await?;
    let mut users: Vec<i64> = batch.iter().map(|p| p.user_id).collect();
    users.sort_unstable();
    users.dedup();
    for u in &users {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(user_lock(*u))
            .execute(&mut *tx)
            .await?;
    }
    let count = i64::try_from(batch.len()).unwrap_or(i64::MAX);
    let mut ids: Vec<i64> =
        sqlx::query_scalar("SELECT nextval('events_id_seq') FROM generate_series(1, $1)")
            .bind(count)
            .fetch_all(&mut *tx)
            .await?;
    ids.sort_unstable();
    let mut seqs: HashMap<&str, i64> = HashMap::new();
    let mut stored = Vec::with_capacity(batch.len());
    for (p, id) in batch.iter().zip(ids) {
        let seq = match seqs.get(p.chat.as_str()) {
            Some(s) => *s,
            None => {
                sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM events WHERE chat_id = $1")
                    .bind(&p.chat)
                    .fetch_one(&mut *tx)
                    .await?
            }
        } + 1;
        seqs.insert(&p.chat, seq);
        stored.push(Arc::new(Stored {
            id,
            user_id: p.user_id,
            chat: p.chat.clone(),
            run: p.run.clone(),
            seq,
            event: p.event.clone(),
        }));
    }
    insert(&mut tx, &stored).await?;
    for u in &users {
        let mine = stored.iter().filter(|s| s.user_id == *u);
        let first = mine.clone().map(|s| s.id).min().unwrap_or(0);
        let last = mine.map(|s| s.id).max().unwrap_or(0);
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(EVENTS_CHANNEL)
            .bind(format!("{instance} {u} {first} {last}"))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(stored)
}

/// Inserts `stored` in multi-row inserts ([`crate::db::ROWS_PER_INSERT`] rows a statement).
async fn insert(conn: &mut sqlx::AnyConnection, stored: &[Arc<Stored>]) -> Result<()> {
    let rows: Vec<Stmt> = stored
        .iter()
        .map(|s| {
            Stmt::new(
                "INSERT INTO events (id, user_id, chat_id, run_id, seq, data) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .int(s.id)
            .int(s.user_id)
            .text(Some(&s.chat))
            .text(s.run.as_deref())
            .int(s.seq)
            .text(Some(&s.event.to_string()))
        })
        .collect();
    for r in Stmt::merged(&rows, crate::db::ROWS_PER_INSERT) {
        r.query().execute(&mut *conn).await?;
    }
    Ok(())
}
