//! The model link of the harness: OpenAI-compatible chat completions over HTTP, streamed or
//! not, with tools, tool choice, reasoning effort, usage and cancellation — and every quirk of
//! real servers (`spec/quirks.json`) coped with in one place.
//!
//! - [`parse`]: the one parser of answers. SSE bytes, lines or data payloads (or a whole JSON
//!   answer) in; [`StreamEvent`]s (text, reasoning, complete tool calls, usage, finish) and a
//!   [`Completion`] out. The products use it through [`ModelClient`]; the `quirks` conformance
//!   area feeds it recorded server streams.
//! - [`shape`]: our conversation to a request body (results paired with calls, roles merged,
//!   schemas in the plain subset, ids remapped, `max_tokens` clamped).
//! - [`classify`]: error answers as context overflow, capacity (with `Retry-After`) or other.
//! - [`metadata`]: the spec's model catalogue with per-endpoint overrides.
//! - [`client`]: the HTTP client ([`ModelClient`]) with backoff, capacity and cancellation.
//!
//! ```no_run
//! # async fn demo() -> harness_model::Result<()> {
//! use harness_model::{Catalogue, ChatRequest, Endpoint, Message, ModelClient, ModelInfo, ModelOverrides};
//! use tokio_util::sync::CancellationToken;
//! let model = ModelInfo::resolve(Catalogue::embedded()?, "qwen3-coder", &ModelOverrides::default());
//! let client = ModelClient::new(Endpoint::new("http://127.0.0.1:8080/v1"), model)?;
//! let request = ChatRequest {
//!     messages: vec![Message::user("hi")],
//!     ..ChatRequest::default()
//! };
//! let answer = client.stream(&request, &CancellationToken::new(), &mut |_event| {}).await?;
//! println!("{}", answer.text);
//! # Ok(()) }
//! ```

// A library says nothing on stdout or stderr of its own: it returns what happened.

pub mod classify;
pub mod client;
pub mod conformance;
pub mod error;
pub mod metadata;
pub mod parse;
pub mod quirks;
pub mod settings;
pub mod shape;
pub mod sse;
pub mod think;

pub use classify::{ErrorClass, ModelError, classify_http};
pub use client::{DEFAULT_DEADLINE, Endpoint, ModelClient};
pub use error::{Error, Result};
pub use metadata::{Catalogue, CatalogueModel, ModelInfo, ModelOverrides};
pub use parse::{
    Completion, Finish, FinishReason, InvalidToolCall, RequestContext, Retry, StreamEvent,
    StreamParser, Usage, parse_response,
};
pub use quirks::{Quirks, RetryPolicy, ServerProfile};
pub use shape::{ChatRequest, Message, ShapedRequest, ToolChoice, ToolSpec, shape_request};
pub use tokio_util::sync::CancellationToken;
