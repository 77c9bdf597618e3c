//! `spec/quirks.json` as typed data: the quirks, the per-server request settings, the texts by
//! which errors are classified, the retry policy and the numbers of request shaping.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use harness_spec::Spec;
use serde::Deserialize;

use crate::error::{Error, Result};

/// The whole of `quirks.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Quirks {
    /// Each quirk: id, servers, symptom, coping.
    pub quirks: Vec<Quirk>,
    /// Request settings per server name (`other` for any server not named).
    pub servers: BTreeMap<String, ServerProfile>,
    /// How error answers are classified.
    pub errors: ErrorTexts,
    /// How capacity answers are retried.
    pub retry: RetryPolicy,
    /// The numbers of request shaping.
    pub request: RequestRules,
}

/// One quirk of real servers.
#[derive(Debug, Clone, Deserialize)]
pub struct Quirk {
    /// Its stable id, e.g. `finish-stop-with-tool-calls`.
    pub id: String,
    /// Servers seen doing it.
    pub servers: Vec<String>,
    /// What happens.
    pub symptom: String,
    /// What the harness does about it.
    pub coping: String,
    /// Issues and pull requests that show it.
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// What a server takes in a request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerProfile {
    /// The field reasoning is sent back in (`reasoning` or `reasoning_content`).
    pub reasoning_field: String,
    /// Whether `stream_options.include_usage` is sent.
    pub stream_usage: bool,
    /// Whether the `tool` role is taken (else results go as user messages).
    pub tool_role: bool,
    /// Whether a tool_choice object naming one tool is taken.
    pub named_tool_choice: bool,
    /// Where the reasoning effort goes: `reasoning_effort` or `reasoning.effort`.
    pub effort_field: String,
}

/// The two classes of errors that are not plain failures.
#[derive(Debug, Clone, Deserialize)]
pub struct ErrorTexts {
    /// The prompt did not fit.
    pub context_overflow: ErrorClassTexts,
    /// The server is busy, rate limited or loading.
    pub capacity: ErrorClassTexts,
}

/// How one class of error is recognised.
#[derive(Debug, Clone, Deserialize)]
pub struct ErrorClassTexts {
    /// HTTP statuses (or error codes that are numbers) of the class.
    pub statuses: Vec<u16>,
    /// Error `code` or `type` values of the class.
    pub codes: Vec<String>,
    /// Lowercase texts, any of which in the answer puts it in the class.
    pub texts: Vec<String>,
    /// Lowercase texts that keep an answer out of the class even when a text matched.
    #[serde(default)]
    pub not_texts: Vec<String>,
    /// Texts that say a model is being loaded (a longer retry budget).
    #[serde(default)]
    pub loading_texts: Vec<String>,
}

/// Backoff for capacity answers, requests that got no answer, and streams that went silent.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct RetryPolicy {
    /// Requests sent at most for one call (the first included).
    pub max_attempts: u32,
    /// The same while the server says it is loading a model.
    pub loading_max_attempts: u32,
    /// The same when no attempt got a byte back (refused, reset, closed while sending).
    pub unsent_max_attempts: u32,
    /// The first wait; it doubles with each attempt.
    pub base_delay_ms: u64,
    /// The longest wait, `Retry-After` included.
    pub max_delay_ms: u64,
    /// The part of each wait that is random (0 to 1).
    pub jitter: f64,
    /// The longest silence of a streamed answer (before its headers or between two pieces of
    /// its body) before the attempt counts as failed: sent again while nothing was given out.
    pub stream_idle_timeout_ms: u64,
}

/// The numbers of request shaping.
#[derive(Debug, Clone, Deserialize)]
pub struct RequestRules {
    /// Characters per token in our estimate of a prompt's size.
    pub chars_per_token: u64,
    /// Tokens kept free between the estimated prompt plus `max_tokens` and the window.
    pub margin_tokens: u64,
    /// Below this many free tokens the request is not sent: it is a context overflow.
    pub min_output_tokens: u64,
    /// A reported prompt below this share of our estimate is a silent truncation.
    pub silent_truncation_ratio: f64,
    /// Estimates below this are never taken for a silent truncation.
    pub silent_truncation_min_tokens: u64,
    /// A prompt at this share of the window that stopped with `length` and no output overflowed.
    pub edge_of_window_ratio: f64,
    /// The result given to a call that has none.
    pub missing_result: String,
    /// What the model is told of a call that was not run (`{name}`, `{reason}`).
    pub invalid_call: String,
    /// A call replayed as text to a model that calls no tools (`{id}`, `{name}`,
    /// `{arguments}`).
    pub call_as_text: String,
    /// A result sent as a user message (`{id}`, `{name}`, `{content}`): to servers without the
    /// `tool` role and to models that call no tools.
    pub result_as_text: String,
    /// The JSON Schema keys tool parameters keep.
    pub schema_keys: Vec<String>,
}

impl Quirks {
    /// Reads `quirks.json` of a spec.
    pub fn from_spec(spec: &Spec) -> Result<Quirks> {
        spec.parse::<Quirks>("quirks.json")
            .map_err(|e| Error::Spec {
                file: "quirks.json".into(),
                message: e.to_string(),
            })
    }

    /// The quirks of the embedded spec, read once.
    pub fn embedded() -> Result<&'static Quirks> {
        static QUIRKS: OnceLock<std::result::Result<Quirks, String>> = OnceLock::new();
        QUIRKS
            .get_or_init(|| Quirks::from_spec(Spec::embedded()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|message| Error::Spec {
                file: "quirks.json".into(),
                message: message.clone(),
            })
    }

    /// The request settings of a server by name; an unknown name gets `other`'s.
    pub fn server(&self, name: &str) -> ServerProfile {
        self.servers
            .get(&name.to_ascii_lowercase())
            .or_else(|| self.servers.get("other"))
            .cloned()
            .unwrap_or(ServerProfile {
                reasoning_field: "reasoning_content".into(),
                stream_usage: true,
                tool_role: true,
                named_tool_choice: true,
                effort_field: "reasoning_effort".into(),
            })
    }

    /// A quirk by id.
    pub fn quirk(&self, id: &str) -> Option<&Quirk> {
        self.quirks.iter().find(|q| q.id == id)
    }

    /// Whether the quirk `id` applies to an endpoint of server kind `server`: its `servers` list
    /// names the kind (case aside) or holds `any`. An unknown quirk applies to no server, and
    /// `other` (any server not named) only to quirks of `any`.
    pub fn applies(&self, id: &str, server: &str) -> bool {
        self.quirk(id).is_some_and(|q| {
            q.servers
                .iter()
                .any(|s| s == "any" || s.eq_ignore_ascii_case(server.trim()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quirk_applies_to_the_servers_it_lists() {
        let q = Quirks::embedded().unwrap();
        assert!(q.applies("context-overflow-silent", "ollama"));
        assert!(q.applies("context-overflow-silent", "Ollama"));
        assert!(!q.applies("context-overflow-silent", "llama.cpp"));
        assert!(!q.applies("context-overflow-silent", "other"));
        assert!(!q.applies("context-overflow-silent", ""));
        // `any` takes every kind, an unknown one included.
        assert!(q.applies("context-overflow-window-edge", "other"));
        assert!(q.applies("context-overflow-window-edge", "llama.cpp"));
        assert!(!q.applies("no-such-quirk", "ollama"));
    }
}
