//! The one way into a running session: [`crate::SessionBuilder::spawn`] gives a [`Session`]
//! handle (ops in, typed queries), its [`Events`] (the one stream of [`Event`]s out) and its
//! [`Run`] (the session's end).

use std::sync::Arc;

use harness_core::protocol::{Mode, TurnEnd};
use harness_loop::jobs::Job;
use harness_loop::session::Message;
use harness_loop::transcript::Entry;
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::protocol::{Ctl, Event, Op, Query};
use crate::seams::SessionStore;

/// A running session as its front end holds it: cheap to clone; the session ends (its jobs
/// stopped) when the last handle is dropped, or, for a one-shot session, when it is idle.
#[derive(Clone)]
pub struct Session {
    ops: mpsc::UnboundedSender<Ctl>,
    id: Arc<str>,
    model: Arc<str>,
    store: Arc<dyn SessionStore>,
}

/// A handle that does not keep the session alive ([`Session::downgrade`]).
#[derive(Clone)]
pub struct WeakSession {
    ops: mpsc::WeakUnboundedSender<Ctl>,
    id: Arc<str>,
    model: Arc<str>,
    store: Arc<dyn SessionStore>,
}

/// What a session says, in order.
pub struct Events {
    rx: mpsc::UnboundedReceiver<Event>,
}

/// The session's run: awaited with [`Run::finished`].
pub struct Run {
    task: tokio::task::JoinHandle<Ended>,
}

/// How a session's run ended.
#[derive(Debug)]
pub struct Ended {
    /// The session's id.
    pub id: String,
    /// `Err` when the run failed (a store that refused a write, a broken spec).
    pub result: Result<()>,
    /// How its last turn ended.
    pub last_end: Option<TurnEnd>,
    /// The history the model saw last.
    pub history: Vec<Message>,
    /// The jobs still running when it ended (stopped since).
    pub running_jobs: usize,
}

/// What [`crate::SessionBuilder::spawn`] gives.
pub struct Spawned {
    /// The handle.
    pub session: Session,
    /// What it says.
    pub events: Events,
    /// Its run.
    pub run: Run,
}

impl Session {
    pub(crate) fn new(
        ops: mpsc::UnboundedSender<Ctl>,
        id: &str,
        model: &str,
        store: Arc<dyn SessionStore>,
    ) -> Session {
        Session {
            ops,
            id: id.into(),
            model: model.into(),
            store,
        }
    }

    /// The session's transcript as its store holds it now: for a resumed session, with what
    /// resuming added (the results of calls cut off mid-run, the cut turn's end).
    pub fn saved(&self) -> Result<Vec<Entry>> {
        self.store.load(&self.id).map_err(Error::Store)
    }

    /// The session's id (its transcript's in the store).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The model's name as the session started.
    pub fn model_name(&self) -> &str {
        &self.model
    }

    /// Sends the session an op; `false` when it has ended.
    pub fn submit(&self, op: Op) -> bool {
        self.ops.send(Ctl::Op(op)).is_ok()
    }

    /// A handle that does not keep the session alive.
    pub fn downgrade(&self) -> WeakSession {
        WeakSession {
            ops: self.ops.downgrade(),
            id: self.id.clone(),
            model: self.model.clone(),
            store: self.store.clone(),
        }
    }

    async fn ask<T>(&self, ctl: impl FnOnce(oneshot::Sender<T>) -> Ctl) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        self.ops
            .send(ctl(tx))
            .map_err(|_| Error::Task(format!("session {} has ended", self.id)))?;
        rx.await
            .map_err(|_| Error::Task(format!("session {} ended before it answered", self.id)))
    }

    /// Changes the permission mode; answers the mode the session is in after it (its
    /// [`crate::protocol::CoreEvent::ModeChanged`] came before the answer).
    pub async fn set_mode(&self, mode: Mode) -> Result<Mode> {
        self.ask(|tx| Ctl::SetMode(mode, tx)).await
    }

    /// A terminal's question (`/jobs`, `/plan`, `/model`, `/rewind`, `/compact`...), answered with
    /// a text to show.
    pub async fn query(&self, q: Query) -> Result<String> {
        self.ask(|tx| Ctl::Query(q, tx)).await
    }

    /// Compacts the conversation (idle only): the text says what was done or why not.
    pub async fn compact(&self) -> Result<String> {
        self.query(Query::Compact).await
    }

    /// The session's jobs as the loop keeps them, running or ended, in id order.
    pub async fn jobs(&self) -> Result<Vec<Job>> {
        self.ask(Ctl::Jobs).await
    }

    /// Job `id` and its output from `offset` (characters); `None` for an unknown job.
    pub async fn job_output(&self, id: u32, offset: usize) -> Result<Option<(Job, String)>> {
        self.ask(|tx| Ctl::JobOutput(id, offset, tx)).await
    }

    /// Stops job `id` as `job_stop` would (its end comes as the usual events); `Err` with the
    /// tool's text when it cannot be.
    pub async fn stop_job(&self, id: u32) -> Result<std::result::Result<(), String>> {
        self.ask(|tx| Ctl::StopJob(id, tx)).await
    }

    /// The person's `job_send`: `Ok(true)` when the message was queued for a running subagent,
    /// `Ok(false)` when an ended one starts again, `Err` with the tool's error text otherwise;
    /// `None` for an unknown job.
    pub async fn send_job(
        &self,
        id: u32,
        message: String,
    ) -> Result<Option<std::result::Result<bool, String>>> {
        self.ask(|tx| Ctl::SendJob(id, message, tx)).await
    }

    /// Job `id` and, for a subagent, the saved conversation it ran.
    pub async fn job_transcript(&self, id: u32) -> Result<Option<(Job, Option<Vec<Entry>>)>> {
        self.ask(|tx| Ctl::JobTranscript(id, tx)).await
    }

    /// Keeps `turns` turns and drops the rest from what the model sees; refused while a prompt
    /// runs or for more turns than the session has.
    pub async fn keep(&self, turns: u32) -> Result<std::result::Result<u32, String>> {
        self.ask(|tx| Ctl::Keep(turns, tx)).await
    }
}

impl WeakSession {
    /// The session, while it runs and something still holds it.
    pub fn upgrade(&self) -> Option<Session> {
        Some(Session {
            ops: self.ops.upgrade()?,
            id: self.id.clone(),
            model: self.model.clone(),
            store: self.store.clone(),
        })
    }
}

impl Events {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Event>) -> Events {
        Events { rx }
    }

    /// The next event; `None` once the session has ended and everything it said was read.
    pub async fn recv(&mut self) -> Option<Event> {
        self.rx.recv().await
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.rx.try_recv().ok()
    }

    /// Every event waiting now.
    pub fn drain(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.try_recv()).collect()
    }
}

impl Run {
    pub(crate) fn new(task: tokio::task::JoinHandle<Ended>) -> Run {
        Run { task }
    }

    /// Waits for the session to end.
    pub async fn finished(self) -> Result<Ended> {
        self.task.await.map_err(|e| Error::Task(e.to_string()))
    }

    /// Whether it has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the session's task where it is, as a crash would: its jobs are not stopped and
    /// its transcript is left as it was written (a resumed session closes what was left open).
    pub fn abort(&self) {
        self.task.abort();
    }
}

impl std::future::Future for Run {
    type Output = Result<Ended>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.task)
            .poll(cx)
            .map(|r| r.map_err(|e| Error::Task(e.to_string())))
    }
}
