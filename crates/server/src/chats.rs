//! Chats on the shared runtime: one `harness-agent` session per chat (project `llembas`, kind
//! `chat`), driven in a task of the server; a run is one prompt, started by a request and going
//! on without it. Every event is stored with the chat's next sequence number and sent to the
//! user's open streams (the event log's lock keeps the stored order and the sent order one).

use std::sync::Arc;

use harness_agent::CapacityGate;

use crate::error::Result;

/// How many events a slow stream may fall behind before it reads the rest from the database.
const BROADCAST_CAPACITY: usize = 4096;

mod build;
mod cut;
mod halt;
mod hub;
mod live;
mod pump;
mod recover;
mod replay;
mod rewind;
mod rows;
mod runs;
mod shared;
pub use crate::events::{Stored, chat_events, events_after};
pub use crate::page::record_ask;
pub use build::{chat_world, create, set_model};
pub use halt::halt_user;
pub use hub::{Hub, flush};
pub use live::{Chats, Live, drop_idle_later, drop_when_unseen};
pub use pump::record_approval;
pub(crate) use pump::{end_run, write};
pub use recover::recover;
pub use replay::start as stream_start;
pub use replay::{REPLAY_MAX, Start, newest_event};
pub use rows::{ChatRow, chat_row, list};
pub use runs::{Back, approve, carry_out, interrupt_all, run_started, send, set_mode, stop};
pub use shared::{Act, OnHeld, answer_ask, keep_leases, lease_end, listen};

/// The shared capacity gate of the process's chats.
pub fn capacity() -> Result<Arc<CapacityGate>> {
    Ok(Arc::new(CapacityGate::new()?))
}
