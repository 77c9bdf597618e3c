//! `harness-loop`: how one prompt runs, as pure logic driven by events.
//!
//! It owns, with no network and no process I/O:
//!
//! - [`session`]: a session's state machine. Fed with [`session::Input`]s (a prompt, the
//!   model's answer, tool results, the person's answers, jobs that end, cancel), it answers with
//!   [`session::Action`]s (call the model with this request, run these calls — reads side by
//!   side, `exclusive` tools alone, results in call order —, ask the person, start or stop a
//!   job, end the turn with a reason). The step backstop, the budgets per project, the wrap-up
//!   step, the nudges of `loop.json` live here.
//! - [`context`]: context hygiene (`spec/context.md`): result ids, read records, stubs, the
//!   output cap, recall, edit diffs, the compaction table, rewind awareness.
//! - [`jobs`]: background work: one id sequence per session, the job tools as decisions, the
//!   marked wake-up messages.
//! - [`capacity`]: how many requests a model server takes at once, running subagents counted.
//! - [`transcript`]: a session's events as an append-only JSON-lines log, read back up to the
//!   last complete event after a crash, and rewound.
//! - [`conformance`]: the runners of the `context` and `jobs` areas.
//!
//! Numbers and texts come from `spec/loop.json` ([`config::LoopConfig`]).
//!
//! ```
//! use harness_loop::config::LoopConfig;
//! use harness_loop::context::{Context, Insert};
//!
//! let cfg = LoopConfig::embedded().unwrap();
//! let mut ctx = Context::new(cfg.context, "session-1");
//! let long: String = (1..=1000).map(|n| format!("line {n}\n")).collect();
//! let shown = ctx.insert(Insert::new("bash", serde_json::json!({"command": "seq 1000"}), long));
//! // A command's output whose middle repeats the shapes of its head keeps its head and tail.
//! assert!(shown.body.contains("945 lines elided: the same shapes as the lines above, again"));
//! ```

// A library says nothing on stdout or stderr of its own: it returns what happened.

pub mod capacity;
pub mod config;
pub mod conformance;
pub mod context;
pub mod error;
pub mod jobs;
pub mod message;
pub mod session;
pub mod trajectory;
pub mod transcript;

pub use error::{Error, Result};
