//! The event log: every event of every chat stored, with its chat's next number, and then sent
//! to its user's open streams, in one order.
//!
//! One writer task stores them: an event waits in its queue, and the writer takes every event
//! waiting at once and stores them in one transaction (one multi-row insert), so a busy server
//! pays one commit for many events, not one each; an idle one stores each at once. Ids and
//! numbers are given by the writer (it is the only one), from what the database holds when it
//! starts. The events of one user go to that user's own channel, so a stream wakes for its own
//! events only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::db::{Backend, Db};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::{BROADCAST_CAPACITY, Stored};
use crate::error::{Error, Result};

/// Bound parameters of one stored event.
const BINDS_PER_EVENT: usize = 6;

/// The most events one insert stores: SQLite's bound-parameter limit (32,766) over
/// [`BINDS_PER_EVENT`].
const MAX_BATCH: usize = 32_766 / BINDS_PER_EVENT;

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
    queue: mpsc::UnboundedSender<Pending>,
    streams: Streams,
    shared: bool,
}

impl Hub {
    /// The log on `pool` (its writer runs on the current runtime). On PostgreSQL the log is
    /// shared with the other server processes on the database: `instance` names this one in the
    /// notices it sends them.
    pub fn new(pool: Db, instance: &str) -> Hub {
        let (queue, rx) = mpsc::unbounded_channel();
        let streams: Streams = Arc::default();
        let shared = Backend::of(&pool) == Backend::Postgres;
        tokio::spawn(writer(pool, rx, streams.clone(), instance.to_owned()));
        Hub {
            queue,
            streams,
            shared,
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

    /// Stores an event of `chat` with the chat's next number and sends it.
    pub async fn append(
        &self,
        user_id: i64,
        chat: &str,
        run: Option<&str>,
        event: Value,
    ) -> Result<Arc<Stored>> {
        let (done, answer) = oneshot::channel();
        self.queue
            .send(Pending {
                user_id,
                chat: chat.to_owned(),
                run: run.map(str::to_owned),
                event,
                done,
            })
            .map_err(|_| Error::Stored("the event log has stopped".into()))?;
        answer
            .await
            .map_err(|_| Error::Stored("the event log has stopped".into()))?
    }
}

/// What the writer knows: the last id given, and each chat's last number.
#[derive(Default)]
struct Counters {
    last_id: Option<i64>,
    seqs: HashMap<String, i64>,
}

async fn writer(
    pool: Db,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    streams: Streams,
    instance: String,
) {
    let shared = Backend::of(&pool) == Backend::Postgres;
    let mut counters = Counters::default();
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let stored = if shared {
            store_shared(&pool, &instance, &batch).await
        } else {
            store(&pool, &mut counters, &batch).await
        };
        match stored {
            Ok(stored) => {
                for (p, s) in batch.into_iter().zip(stored) {
                    send(&streams, &s);
                    let _ = p.done.send(Ok(s));
                }
            }
            Err(_) if batch.len() > 1 => {
                // One event at fault (its chat gone) must not fail the others: each alone.
                for p in batch {
                    let one = std::slice::from_ref(&p);
                    let result = if shared {
                        store_shared(&pool, &instance, one).await
                    } else {
                        store(&pool, &mut counters, one).await
                    };
                    let result = result.map(|mut v| v.remove(0));
                    if let Ok(s) = &result {
                        send(&streams, s);
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

/// Stores a batch in one transaction: the stored events, in order. The counters change only
/// when it committed.
async fn store(pool: &Db, counters: &mut Counters, batch: &[Pending]) -> Result<Vec<Arc<Stored>>> {
    let mut tx = crate::db::begin_write(pool).await?;
    let mut last_id = match counters.last_id {
        Some(id) => id,
        None => {
            sqlx::query_scalar(
                "SELECT MAX(COALESCE((SELECT MAX(id) FROM events), 0), COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))",
            )
            .fetch_one(&mut *tx)
            .await?
        }
    };
    let mut seqs: HashMap<&str, i64> = HashMap::new();
    let mut stored = Vec::with_capacity(batch.len());
    for p in batch {
        let seq = match seqs.get(p.chat.as_str()) {
            Some(s) => *s,
            None => match counters.seqs.get(&p.chat) {
                Some(s) => *s,
                None => {
                    sqlx::query_scalar(
                        "SELECT COALESCE(MAX(seq), 0) FROM events WHERE chat_id = $1",
                    )
                    .bind(&p.chat)
                    .fetch_one(&mut *tx)
                    .await?
                }
            },
        } + 1;
        seqs.insert(&p.chat, seq);
        last_id += 1;
        stored.push(Arc::new(Stored {
            id: last_id,
            user_id: p.user_id,
            chat: p.chat.clone(),
            run: p.run.clone(),
            seq,
            event: p.event.clone(),
        }));
    }
    insert(&mut tx, &stored).await?;
    tx.commit().await?;
    counters.last_id = Some(last_id);
    for (chat, seq) in seqs {
        counters.seqs.insert(chat.to_owned(), seq);
    }
    Ok(stored)
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

/// One multi-row insert of `stored`.
async fn insert(conn: &mut sqlx::AnyConnection, stored: &[Arc<Stored>]) -> Result<()> {
    let mut sql =
        String::from("INSERT INTO events (id, user_id, chat_id, run_id, seq, data) VALUES ");
    for i in 0..stored.len() {
        let b = i * BINDS_PER_EVENT;
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!(
            "(${}, ${}, ${}, ${}, ${}, ${})",
            b + 1,
            b + 2,
            b + 3,
            b + 4,
            b + 5,
            b + 6
        ));
    }
    let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
    for s in stored {
        insert = insert
            .bind(s.id)
            .bind(s.user_id)
            .bind(&s.chat)
            .bind(&s.run)
            .bind(s.seq)
            .bind(s.event.to_string());
    }
    insert.execute(&mut *conn).await?;
    Ok(())
}
