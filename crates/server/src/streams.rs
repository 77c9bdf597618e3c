//! The event streams of this process, by user.
//!
//! - Revocation: the signal that a user's sign-ins changed (a sign-out, a session or API token
//!   revoked, the account disabled or its role changed), on which each open stream of that user
//!   checks the credential it was opened with and ends when it no longer signs in. Across the
//!   processes of a PostgreSQL database the signal goes by a notice
//!   ([`publish_revoked`]); a stream also checks its credential every
//!   [`RECHECK`], so none outlives a revocation by more than that should a notice be lost.
//! - A cap: at most [`MAX_STREAMS`] open streams a user in a process. A new one past it closes
//!   the user's oldest, which is told why (its page stops reconnecting): the page the person
//!   opened last is the one they look at, and a refused stream (429) would be the new tab's.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::App;
use crate::error::Result;

/// The channel of the users whose sign-ins changed: `INSTANCE USER`.
pub const REVOKED_CHANNEL: &str = "llembas_revoked";

/// How often an open stream checks that its credential still signs in, whatever it heard.
pub const RECHECK: Duration = Duration::from_secs(30);

/// The most event streams a user holds open in a process.
pub const MAX_STREAMS: usize = 16;

/// A user's signal and open streams.
struct PerUser {
    revoked: watch::Sender<u64>,
    /// The open streams, oldest first: their numbers and how each is told to close.
    open: VecDeque<(u64, Arc<Notify>)>,
}

impl Default for PerUser {
    fn default() -> Self {
        PerUser {
            revoked: watch::Sender::new(0),
            open: VecDeque::new(),
        }
    }
}

type Users = Arc<Mutex<HashMap<i64, PerUser>>>;

/// The users' signals and open streams, made on first use.
#[derive(Default)]
pub struct Streams {
    users: Users,
    next: AtomicU64,
}

/// An open stream's place: it hears revocations and its eviction, and leaves when dropped.
pub struct Opened {
    /// Changes whenever the user's sign-ins change.
    pub revocations: watch::Receiver<u64>,
    /// Notified when a newer stream of the user takes this one's place.
    pub evicted: Arc<Notify>,
    users: Users,
    user_id: i64,
    number: u64,
}

impl Drop for Opened {
    fn drop(&mut self) {
        let mut users = self
            .users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(u) = users.get_mut(&self.user_id) {
            u.open.retain(|(n, _)| *n != self.number);
        }
    }
}

impl Streams {
    /// A new stream of `user_id`; past [`MAX_STREAMS`] the user's oldest is told to close.
    pub fn open(&self, user_id: i64) -> Opened {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let evicted = Arc::new(Notify::new());
        let mut users = self
            .users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let user = users.entry(user_id).or_default();
        user.open.push_back((number, evicted.clone()));
        while user.open.len() > MAX_STREAMS {
            if let Some((_, oldest)) = user.open.pop_front() {
                oldest.notify_one();
            }
        }
        Opened {
            revocations: user.revoked.subscribe(),
            evicted,
            users: self.users.clone(),
            user_id,
            number,
        }
    }

    /// Tells this process's streams of `user_id` that the user's sign-ins changed.
    pub fn pulse(&self, user_id: i64) {
        let users = self
            .users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(user) = users.get(&user_id) {
            user.revoked.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// The user's sign-ins changed (a session or token gone, the account disabled or its role
/// changed): every open stream of theirs, in every process of the database, checks its
/// credential again and ends if it no longer signs in.
pub async fn revoked(app: &App, user_id: i64) {
    app.streams.pulse(user_id);
    if let Err(e) = publish_revoked(app, user_id).await {
        tracing::error!("telling the other processes of user {user_id}'s sign-ins: {e}");
    }
}

/// Tells every other process of the database that the sign-ins of `user_id` changed (their
/// streams of the user check their credentials). On SQLite there is no other process.
pub async fn publish_revoked(app: &App, user_id: i64) -> Result<()> {
    if !app.hub.shared() {
        return Ok(());
    }
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(REVOKED_CHANNEL)
        .bind(format!("{} {user_id}", app.instance))
        .execute(&app.pool)
        .await?;
    Ok(())
}
