//! `harness-core`: what turns the spec's data into exactly what a model is sent, and what a
//! model's call means.
//!
//! It owns the shared vocabulary every other crate and both front ends use ([`protocol`]: modes,
//! risk, tool calls and results, the event stream of a run), and, as pure logic over
//! [`harness_spec`]: tool offering per project, session kind, mode and requirements, the filling
//! of `{{variables}}`, `narrow`, aliases and renamed arguments (`todo` → `plan_write`), the plan,
//! and the assembly of the system prompt. It does no I/O.
//!
//! ```
//! use harness_core::offer::{Holds, OfferContext, offer};
//! use harness_core::protocol::{Mode, Project, SessionKind};
//!
//! let spec = harness_spec::Spec::embedded();
//! let mut cx = OfferContext::new(Project::Llembas, SessionKind::Chat, Mode::Plan);
//! cx.holds = Holds { page: true, display: true, forge: false };
//! cx.values.insert("memory_limit".into(), "4,000 characters".into());
//! cx.values.insert("python_packages".into(), "numpy can be imported.".into());
//! let tools = offer(spec, &cx)?;
//! let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
//! assert!(names.contains(&"python") && names.contains(&"plan_submit"));
//! assert!(!names.contains(&"bash") && !names.contains(&"commit"));
//! # Ok::<(), harness_core::Error>(())
//! ```

// A library says nothing on stdout or stderr of its own: it returns what happened.

pub mod conformance;
pub mod error;
pub mod fill;
pub mod library;
pub mod message;
pub mod narrow;
pub mod offer;
pub mod path;
pub mod plan;
pub mod prompt;
pub mod protocol;
pub mod toolcall;

pub use error::{Error, Result};
