//! The chats whose sessions are built in this process: a chat's session lives while it runs
//! or a page of it is open, and [`crate::App::idle_session`] after; then it is dropped and built
//! again from the database when it is needed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use harness_agent::Session;
use tokio::sync::mpsc;

use crate::App;

/// A chat whose session runs in this process.
pub struct Live {
    /// The session: dropping the last handle ends it.
    pub(super) ctl: Session,
    /// The run going on, if any.
    pub(super) run: Arc<Mutex<Option<String>>>,
    /// Whether it was built holding `display` and `page` (a page of the chat was open).
    pub(super) page: bool,
    /// When it was built (seconds): a run of the chat another process began since makes it stale.
    pub(super) built: i64,
    /// What it was built with (its model and personality preset): an idle session built with
    /// others than the chat's and its user's now is built again.
    pub(super) made: String,
    /// Runs begun in it: an idle session is dropped only if none began since it went idle.
    pub(super) begun: std::sync::atomic::AtomicU64,
}

/// What a chat's session is built with, as [`Live::made`] keeps it.
pub(super) fn made_of(model: &str, personality: Option<&str>) -> String {
    format!("{model}\n{}", personality.unwrap_or("default"))
}

/// The chats running in this process.
#[derive(Default)]
pub struct Chats {
    pub(super) live: Mutex<HashMap<String, Arc<Live>>>,
    /// Woken whenever a run here ends.
    pub(super) ended: tokio::sync::Notify,
    /// Runs cancelled because their account can no longer sign in: marked `interrupted`.
    pub(super) interrupted: Mutex<std::collections::HashSet<String>>,
}

impl Chats {
    pub(super) fn get(&self, id: &str) -> Option<Arc<Live>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    pub(super) fn insert(&self, id: &str, live: Arc<Live>) {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.to_owned(), live);
    }

    /// Removes the chat's session `live` (not another one built since in its place).
    pub(super) fn remove(&self, id: &str, live: &Arc<Live>) {
        let mut map = self
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.get(id).is_some_and(|l| Arc::ptr_eq(l, live)) {
            map.remove(id);
        }
    }

    /// Takes `live`'s run slot for `run`, if `live` is still the chat's session here (an idle
    /// session may be dropped between its lookup and its use: [`Chats::drop_idle`]).
    pub(super) fn claim(&self, id: &str, live: &Arc<Live>, run: &str) -> Claim {
        let map = self
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !map.get(id).is_some_and(|l| Arc::ptr_eq(l, live)) {
            return Claim::Gone;
        }
        let mut slot = live
            .run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = slot.as_ref() {
            return Claim::Busy(r.clone());
        }
        *slot = Some(run.to_owned());
        live.begun
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Claim::Taken
    }

    /// Drops the chat's session if it is idle and `held` (a page of it open) is false: a chat's
    /// session lives while it runs or a page shows it, and is built again from the database
    /// when it is needed (dropping the last handle of its channel ends it).
    pub fn drop_idle(&self, chat: &str, held: bool) {
        self.drop_idle_since(chat, None, held);
    }

    /// [`Chats::drop_idle`], only if no run began in it since `begun` runs (`None`: whatever
    /// began).
    pub(super) fn drop_idle_since(&self, chat: &str, begun: Option<u64>, held: bool) {
        if held {
            return;
        }
        let mut map = self
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let idle = map.get(chat).is_some_and(|l| {
            current(&l.run).is_none()
                && begun.is_none_or(|n| l.begun.load(std::sync::atomic::Ordering::Relaxed) == n)
        });
        if idle {
            map.remove(chat);
        }
    }

    /// How many chats have a session in this process.
    pub fn len(&self) -> usize {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Whether no chat has a session in this process.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks the run `run` to be recorded `interrupted` when its cancelled turn ends.
    pub(super) fn interrupt(&self, run: &str) {
        self.interrupted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(run.to_owned());
    }

    /// Whether the run `run` was marked to be recorded `interrupted` (forgotten now).
    pub(super) fn take_interrupted(&self, run: &str) -> bool {
        self.interrupted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(run)
    }

    /// The run going on in `chat` here, if any.
    pub fn run_of(&self, chat: &str) -> Option<String> {
        self.get(chat).and_then(|l| current(&l.run))
    }

    pub(super) fn all(&self) -> Vec<Arc<Live>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// The runs going on here: (chat, run).
    pub(super) fn runs(&self) -> Vec<(String, String)> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter_map(|(chat, l)| current(&l.run).map(|r| (chat.clone(), r)))
            .collect()
    }

    /// The ids of the runs going on.
    pub fn running(&self) -> Vec<String> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .filter_map(|l| l.run.lock().ok().and_then(|r| r.clone()))
            .collect()
    }
}

/// What [`Chats::claim`] found.
pub(super) enum Claim {
    Taken,
    Busy(String),
    Gone,
}

pub(super) fn current(run: &Mutex<Option<String>>) -> Option<String> {
    run.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// Drops a chat's idle session a while after its last page closes ([`drop_idle_later`]).
pub fn drop_when_unseen(app: &Arc<App>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    app.pages.on_last_close(tx);
    let app = Arc::downgrade(app);
    tokio::spawn(async move {
        while let Some(chat) = rx.recv().await {
            let Some(app) = app.upgrade() else { return };
            drop_idle_later(&app, &chat);
        }
    });
}

/// Drops the chat's session once it has stayed idle, no page of it open, for the server's
/// `idle_session` (at once when that is zero): a chat's session lives while it runs or a page
/// shows it, and a while after.
pub fn drop_idle_later(app: &Arc<App>, chat: &str) {
    let Some(live) = app.chats.get(chat) else {
        return;
    };
    let begun = live.begun.load(std::sync::atomic::Ordering::Relaxed);
    if app.idle_session.is_zero() {
        app.chats
            .drop_idle_since(chat, Some(begun), app.pages.attached(chat));
        return;
    }
    let (wait, weak, chat) = (app.idle_session, Arc::downgrade(app), chat.to_owned());
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        if let Some(app) = weak.upgrade() {
            app.chats
                .drop_idle_since(&chat, Some(begun), app.pages.attached(&chat));
        }
    });
}
