//! Several sessions at once in one process: each runs in a task of its own, reached by its id.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::mpsc;

use crate::Built;
use crate::error::{Error, Result};
use crate::protocol::{Ctl, Out};

/// A running session as its front end holds it.
struct Running {
    ctl: mpsc::UnboundedSender<Ctl>,
    task: tokio::task::JoinHandle<Result<()>>,
}

/// The sessions of a process (a server's chats, an editor's sessions), each driven in its own
/// task until it is closed or its front end goes away.
#[derive(Default)]
pub struct SessionManager {
    sessions: Mutex<HashMap<String, Running>>,
}

impl SessionManager {
    /// No sessions yet.
    pub fn new() -> SessionManager {
        SessionManager::default()
    }

    /// Starts driving a built session; its events come on the returned receiver.
    pub fn start(&self, built: Built) -> Result<(String, mpsc::UnboundedReceiver<Out>)> {
        let Built {
            mut driver,
            ctl,
            out,
        } = built;
        let id = driver.id().to_owned();
        let task = tokio::spawn(async move {
            let r = driver.run(false).await;
            driver.shutdown().await;
            r
        });
        let mut sessions = self
            .sessions
            .lock()
            .map_err(|_| Error::Task("the session table is poisoned".into()))?;
        sessions.insert(id.clone(), Running { ctl, task });
        Ok((id, out))
    }

    /// Sends a session an op or a question; `false` when there is no such session running.
    pub fn send(&self, id: &str, ctl: Ctl) -> bool {
        self.sessions
            .lock()
            .ok()
            .and_then(|s| s.get(id).map(|r| r.ctl.send(ctl).is_ok()))
            .unwrap_or(false)
    }

    /// The ids of the sessions running, in no order.
    pub fn ids(&self) -> Vec<String> {
        self.sessions
            .lock()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Closes a session: its front end's channel is dropped, its jobs are stopped, and this
    /// waits for it to end. `None` when there is no such session.
    pub async fn close(&self, id: &str) -> Option<Result<()>> {
        let running = self.sessions.lock().ok()?.remove(id)?;
        drop(running.ctl);
        Some(match running.task.await {
            Ok(r) => r,
            Err(e) => Err(Error::Task(e.to_string())),
        })
    }
}
