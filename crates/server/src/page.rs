//! The chat pages open in browsers, and what a run waits for from one.
//!
//! A chat page says which chat it shows when it opens its event stream (`GET
//! /api/events?chat=ID`); while at least one such stream of the chat is open, the chat holds the
//! spec requirements `display` and `page` (its session is built with the `show` viewer and the
//! `python` tool; see the `chats` module). When the last one closes, what a run waits for from a
//! page (`show` opening, `python` running) is answered at once: the viewer is gone.
//!
//! A run asks a page for three things, each given an id the page answers with:
//!
//! - a `question` (the `question` tool): `POST /api/questions/{id}` `{"answer": "…"}`;
//! - a `show`: `POST /api/shows/{id}` `{"opened": true|false}`;
//! - a `python` run: `POST /api/python/{id}` with the run's result (the `python` module).
//!
//! The asks live in memory: a run does not outlive its process, and a restart marks it
//! interrupted. On a database several processes share, each ask also has a row in its `asks`
//! table, so that a page connected to another process can answer it: the row decides which
//! answer counts, and the answer goes to the process whose run waits
//! (`chats::answer_ask`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use harness_agent::{Op, Session};
use tokio::sync::{mpsc, oneshot};

use crate::db::random_id;
use crate::error::{Error, Result};

/// What a run waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskKind {
    /// The person's answer to a `question` call.
    Question,
    /// Whether the viewer opened a `show` call's file.
    Show,
    /// A `python` call's result.
    Python,
}

impl AskKind {
    /// Its name in the `asks` table of a shared database.
    pub fn name(self) -> &'static str {
        match self {
            AskKind::Question => "question",
            AskKind::Show => "show",
            AskKind::Python => "python",
        }
    }

    /// The kind named `name` ([`AskKind::name`]).
    pub fn named(name: &str) -> Option<AskKind> {
        [AskKind::Question, AskKind::Show, AskKind::Python]
            .into_iter()
            .find(|k| k.name() == name)
    }

    fn noun(self) -> &'static str {
        match self {
            AskKind::Question => "question",
            AskKind::Show => "show",
            AskKind::Python => "python run",
        }
    }
}

/// Where an ask's answer goes.
pub enum Answerer {
    /// To the chat's session, as [`Op::Reply`] for the call (`None`: nobody answered).
    Session(Session),
    /// To the tool waiting for it (`None`: the page went).
    Tool(oneshot::Sender<Option<serde_json::Value>>),
}

/// One ask waiting for a page.
struct Ask {
    user_id: i64,
    chat: String,
    call_id: String,
    kind: AskKind,
    answerer: Answerer,
}

#[derive(Default)]
struct Inner {
    /// Open pages per chat.
    open: HashMap<String, usize>,
    asks: HashMap<String, Ask>,
}

/// The pages open and the asks waiting.
#[derive(Default)]
pub struct Pages {
    inner: Mutex<Inner>,
    /// Where the asks answered for want of a page go (on a shared database, to be marked
    /// answered in its `asks` table before their run hears: see [`Pages::on_settle`]).
    settled: OnceLock<mpsc::UnboundedSender<Settled>>,
    /// Told the chats whose last page closed ([`Pages::on_last_close`]).
    unseen: OnceLock<mpsc::UnboundedSender<String>>,
}

/// An ask answered for want of a page: nobody is left to open a `show`'s file or run `python`.
pub struct Settled {
    /// The ask's id.
    pub id: String,
    answerer: Answerer,
    call_id: String,
}

impl Settled {
    /// Tells the run that nobody answered.
    pub fn answer(self) {
        answer(self.answerer, self.call_id, None);
    }
}

/// The error for an answer that finds nothing waiting.
pub fn not_waiting(kind: AskKind, id: &str) -> Error {
    Error::NotFound(format!(
        "no {} {id} waits for an answer (answered already, or its run ended)",
        kind.noun()
    ))
}

/// A page of a chat, open while this lives (an event stream holds it).
pub struct Attached {
    pages: Arc<Pages>,
    chat: String,
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.pages.detach(&self.chat);
    }
}

fn answer(answerer: Answerer, call_id: String, text: Option<serde_json::Value>) {
    match answerer {
        Answerer::Session(ctl) => {
            let text = text.map(|v| match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            });
            ctl.submit(Op::Reply { call_id, text });
        }
        Answerer::Tool(tx) => {
            let _ = tx.send(text);
        }
    }
}

impl Pages {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A page of `chat` opens.
    pub fn attach(self: &Arc<Self>, chat: &str) -> Attached {
        *self.lock().open.entry(chat.to_owned()).or_default() += 1;
        Attached {
            pages: self.clone(),
            chat: chat.to_owned(),
        }
    }

    /// Whether a page of `chat` is open.
    pub fn attached(&self, chat: &str) -> bool {
        self.lock().open.get(chat).is_some_and(|n| *n > 0)
    }

    fn detach(&self, chat: &str) {
        let gone = {
            let mut inner = self.lock();
            let left = match inner.open.get_mut(chat) {
                Some(n) => {
                    *n = n.saturating_sub(1);
                    *n
                }
                None => 0,
            };
            if left > 0 {
                return;
            }
            inner.open.remove(chat);
            if let Some(tx) = self.unseen.get() {
                let _ = tx.send(chat.to_owned());
            }
            // The viewer is gone: what waits for it is answered now.
            let ids: Vec<String> = inner
                .asks
                .iter()
                .filter(|(_, a)| a.chat == chat && a.kind != AskKind::Question)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| inner.asks.remove(&id).map(|a| (id, a)))
                .collect::<Vec<_>>()
        };
        for (id, a) in gone {
            let settled = Settled {
                id,
                answerer: a.answerer,
                call_id: a.call_id,
            };
            match self.settled.get() {
                Some(tx) => {
                    if let Err(unsent) = tx.send(settled) {
                        unsent.0.answer();
                    }
                }
                None => settled.answer(),
            }
        }
    }

    /// Sends to `tx`, from now on, each chat whose last open page closed.
    pub fn on_last_close(&self, tx: mpsc::UnboundedSender<String>) {
        let _ = self.unseen.set(tx);
    }

    /// Sends to `tx`, from now on, every ask to be answered because no page of its chat is left
    /// open, instead of answering it: the receiver marks it answered where an answer reaching
    /// another process is refused as well, then answers it ([`Settled::answer`]).
    pub fn on_settle(&self, tx: mpsc::UnboundedSender<Settled>) {
        let _ = self.settled.set(tx);
    }

    /// Whether the ask `id` waits here.
    pub fn waits(&self, id: &str) -> bool {
        self.lock().asks.contains_key(id)
    }

    /// Waits for a page's answer: the ask's id.
    pub fn ask(
        &self,
        user_id: i64,
        chat: &str,
        call_id: &str,
        kind: AskKind,
        answerer: Answerer,
    ) -> Result<String> {
        let id = random_id()?;
        self.lock().asks.insert(
            id.clone(),
            Ask {
                user_id,
                chat: chat.to_owned(),
                call_id: call_id.to_owned(),
                kind,
                answerer,
            },
        );
        Ok(id)
    }

    /// Answers the user's ask `id` of `kind` (another user's is "no such").
    pub fn answer(
        &self,
        user_id: i64,
        id: &str,
        kind: AskKind,
        value: Option<serde_json::Value>,
    ) -> Result<()> {
        let ask = {
            let mut inner = self.lock();
            match inner.asks.get(id) {
                Some(a) if a.user_id == user_id && a.kind == kind => inner.asks.remove(id),
                _ => None,
            }
        };
        let Some(a) = ask else {
            return Err(not_waiting(kind, id));
        };
        answer(a.answerer, a.call_id, value);
        Ok(())
    }

    /// A run of `chat` ended: nothing of it waits any more.
    pub fn forget(&self, chat: &str) {
        let gone: Vec<Ask> = {
            let mut inner = self.lock();
            let ids: Vec<String> = inner
                .asks
                .iter()
                .filter(|(_, a)| a.chat == chat)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| inner.asks.remove(&id))
                .collect()
        };
        for a in gone {
            if let Answerer::Tool(tx) = a.answerer {
                let _ = tx.send(None);
            }
        }
    }
}

/// Records the ask `id` of a run of `chat` in the `asks` table of a shared database (before the
/// page hears of it), so that a page connected to any process can answer it. On SQLite the
/// process's own [`Pages`] is all there is.
pub async fn record_ask(
    app: &crate::App,
    id: &str,
    user_id: i64,
    chat: &str,
    run: Option<&str>,
    kind: AskKind,
) -> Result<()> {
    if !app.hub.shared() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO asks (id, user_id, chat_id, run_id, kind) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(id)
    .bind(user_id)
    .bind(chat)
    .bind(run)
    .bind(kind.name())
    .execute(&app.pool)
    .await?;
    Ok(())
}
