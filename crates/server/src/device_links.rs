//! The linked devices' live links as the rest of the server sees them (the link itself, the
//! WebSocket a device dials, is the `link` module): one per device, by device id, a newer dial
//! replacing the older.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_client_protocol::Agent;
use serde_json::Value;

/// The close code of a link a newer dial of the same device replaced.
pub const CLOSE_REPLACED: u16 = 4001;
/// The close code of a link whose device was revoked.
pub const CLOSE_REVOKED: u16 = 4003;

/// A live link as the rest of the server sees it.
#[derive(Clone)]
pub struct Live {
    /// Which dial of the device this is (a newer one replaces it).
    pub generation: u64,
    /// The device's owner.
    pub user_id: i64,
    /// `limits` of the device's `initialize` (`roots`, `models`, `max_sessions`).
    pub limits: Value,
    /// `instance` of the device's `initialize`.
    pub instance: Value,
    /// The ACP connection to the device's agent.
    pub agent: agent_client_protocol::v1::ConnectionTo<Agent>,
    /// The memory API's URL as the device reached this server (`api.url`).
    pub api_url: String,
}

struct Entry {
    generation: u64,
    stop: tokio::sync::watch::Sender<Option<u16>>,
    live: Option<Live>,
}

/// The live links, by device id.
#[derive(Default)]
pub struct Links {
    inner: Mutex<HashMap<String, Entry>>,
    next: AtomicU64,
    /// Ticks at every link that comes up or goes down (tests and pages wait on it).
    changed: tokio::sync::watch::Sender<u64>,
}

impl Links {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the device's link for a new dial: the older one, if any, is told to close.
    pub(crate) fn register(&self, id: &str) -> (u64, tokio::sync::watch::Receiver<Option<u16>>) {
        let generation = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let (stop, rx) = tokio::sync::watch::channel(None);
        let old = self.lock().insert(
            id.to_owned(),
            Entry {
                generation,
                stop,
                live: None,
            },
        );
        if let Some(old) = old {
            old.stop.send_replace(Some(CLOSE_REPLACED));
        }
        (generation, rx)
    }

    pub(crate) fn ready(&self, id: &str, live: Live) -> bool {
        let mut links = self.lock();
        let done = match links.get_mut(id) {
            Some(e) if e.generation == live.generation => {
                e.live = Some(live);
                true
            }
            _ => false,
        };
        drop(links);
        self.changed.send_modify(|n| *n += 1);
        done
    }

    pub(crate) fn remove(&self, id: &str, generation: u64) {
        let mut links = self.lock();
        if links.get(id).is_some_and(|e| e.generation == generation) {
            links.remove(id);
        }
        drop(links);
        self.changed.send_modify(|n| *n += 1);
    }

    /// The device's live link, once its `initialize` is answered.
    pub fn live(&self, id: &str) -> Option<Live> {
        self.lock().get(id).and_then(|e| e.live.clone())
    }

    /// Closes the device's live link at once (it was revoked).
    pub fn close(&self, id: &str) {
        if let Some(e) = self.lock().remove(id) {
            e.stop.send_replace(Some(CLOSE_REVOKED));
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// A receiver that sees every link come up or go down.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}
