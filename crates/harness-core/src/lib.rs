//! `harness-core`: what turns the spec's data into exactly what a model is sent, and what a
//! model's call means.
//!
//! It owns the shared vocabulary every other crate and both front ends use ([`protocol`]: modes,
//! risk, tool calls and results, the event stream of a run), and, as pure logic over
//! [`harness_spec`]: tool offering per project, session kind, mode and requirements, the filling
//! of `{{variables}}`, `narrow`, aliases and renamed arguments (`todo` → `plan_write`), the plan,
//! and the assembly of the system prompt. It does no I/O.

pub mod conformance;
pub mod error;
pub mod fill;
pub mod library;
pub mod narrow;
pub mod offer;
pub mod plan;
pub mod prompt;
pub mod protocol;
pub mod toolcall;

pub use error::{Error, Result};
