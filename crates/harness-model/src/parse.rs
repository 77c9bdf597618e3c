//! The one parser of model answers: streamed chunks (SSE bytes, lines or data payloads) or a
//! whole JSON answer in, normalized [`StreamEvent`]s and a final [`Completion`] out. It is what
//! the client uses and what the `quirks` conformance area feeds; every quirk of the answer side
//! is coped with here. The pieces of tool calls are put together and their arguments read by
//! harness-core's [`harness_core::toolcall`] (the rule's one implementation); this parser feeds
//! it every `delta.tool_calls[]` entry and turns its calls into ours, with our ids.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use harness_core::protocol::ToolCall;
use harness_core::toolcall::{CallAssembler, CallDelta, CallEnd, Unusable};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::classify::{ErrorClass, ModelError, classify_value};
use crate::quirks::Quirks;
use crate::sse::SseDecoder;
use crate::think::{Piece, ThinkSplitter};

/// Token counts a server reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from the server's cache, when it says.
    pub cached_tokens: Option<u64>,
    /// Generated tokens that were reasoning, when it says.
    pub reasoning_tokens: Option<u64>,
}

impl From<Usage> for harness_core::protocol::Usage {
    fn from(u: Usage) -> Self {
        harness_core::protocol::Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
        }
    }
}

/// Why an answer ended: the harness's conclusion, not the server's `finish_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model answered and stopped.
    Stop,
    /// The model asked for tool calls (whatever `finish_reason` said).
    ToolCalls,
    /// The output limit cut the answer.
    Length,
    /// The server's content filter stopped it.
    ContentFilter,
    /// An error ended it (inside the stream, or the stream stopped early).
    Error,
    /// The prompt did not fit the window (said, or found silently truncated).
    ContextOverflow,
    /// The server had no capacity.
    Capacity,
}

impl FinishReason {
    /// The snake_case name (`tool_calls`, `context_overflow`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Error => "error",
            FinishReason::ContextOverflow => "context_overflow",
            FinishReason::Capacity => "capacity",
        }
    }
}

/// How an answer ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// The conclusion.
    pub reason: FinishReason,
    /// What the server said in `finish_reason`, if anything.
    pub server_reason: Option<String>,
    /// The error, when one ended the answer.
    pub error: Option<ModelError>,
}

/// A tool call whose arguments could not be used (cut off or not JSON): it is not run; the
/// model is told to send it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidToolCall {
    /// Our id for it.
    pub id: String,
    /// The tool name, as far as it came (may be empty).
    pub name: String,
    /// The raw arguments text.
    pub raw: String,
    /// Why it is not a call.
    pub reason: String,
}

/// One normalized event of an answer, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// Answer text.
    Text(String),
    /// Reasoning text.
    Reasoning(String),
    /// Answer text passed on earlier (this string, all of it) was reasoning after all (a lone
    /// `</think>`): move it.
    TextWasReasoning(String),
    /// A complete tool call (given when the answer ends, once its arguments are whole).
    ToolCall(ToolCall),
    /// A call that cannot be run.
    InvalidToolCall(InvalidToolCall),
    /// Token counts (the last one wins).
    Usage(Usage),
    /// The end; always the last event.
    Finish(Finish),
    /// The request failed before anything of its answer was given out and is sent again after
    /// a wait (given by the client between attempts, never by the parser; it changes no answer).
    Retry(Retry),
}

/// One retry of a model request, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    /// The attempt that failed (1 for the first request).
    pub attempt: u32,
    /// The requests sent at most for this call (the first included).
    pub max_attempts: u32,
    /// Why it failed: the server's answer, the transport failure, or the silence.
    pub reason: String,
    /// The wait before the next attempt.
    pub wait: std::time::Duration,
}

impl std::fmt::Display for Retry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "model request failed (attempt {} of {}): {}; trying again in {:.1} s",
            self.attempt,
            self.max_attempts,
            self.reason,
            self.wait.as_secs_f64()
        )
    }
}

/// A whole answer, as the loop takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The answer text.
    pub text: String,
    /// The reasoning text.
    pub reasoning: String,
    /// The calls to run, in order, with our ids.
    pub tool_calls: Vec<ToolCall>,
    /// Calls that cannot be run.
    pub invalid_calls: Vec<InvalidToolCall>,
    /// What the server reported, if it did.
    pub usage: Option<Usage>,
    /// How it ended.
    pub finish: Finish,
}

impl Completion {
    fn empty() -> Completion {
        Completion {
            text: String::new(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            invalid_calls: Vec::new(),
            usage: None,
            finish: Finish {
                reason: FinishReason::Error,
                server_reason: None,
                error: None,
            },
        }
    }

    /// Adds one event to the completion.
    pub fn apply(&mut self, e: &StreamEvent) {
        match e {
            StreamEvent::Text(t) => self.text.push_str(t),
            StreamEvent::Reasoning(r) => self.reasoning.push_str(r),
            StreamEvent::TextWasReasoning(moved) => {
                if self.text.ends_with(moved.as_str()) {
                    self.text.truncate(self.text.len() - moved.len());
                }
                self.reasoning.insert_str(0, moved);
            }
            StreamEvent::ToolCall(call) => self.tool_calls.push(call.clone()),
            StreamEvent::InvalidToolCall(call) => self.invalid_calls.push(call.clone()),
            StreamEvent::Usage(u) => self.usage = Some(*u),
            StreamEvent::Finish(f) => self.finish = f.clone(),
            StreamEvent::Retry(_) => {}
        }
    }

    /// The note that tells the model which of its calls were not run and why (`quirks.json`
    /// `request.invalid_call`), or None when every call was whole.
    pub fn invalid_calls_note(&self, quirks: &Quirks) -> Option<String> {
        if self.invalid_calls.is_empty() {
            return None;
        }
        let lines: Vec<String> = self
            .invalid_calls
            .iter()
            .map(|c| {
                let name = if c.name.is_empty() {
                    "(no name)"
                } else {
                    &c.name
                };
                quirks
                    .request
                    .invalid_call
                    .replace("{name}", name)
                    .replace("{reason}", &c.reason)
            })
            .collect();
        Some(lines.join("\n"))
    }

    /// Builds the completion from all of an answer's events (what a consumer of the stream
    /// ends up with).
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a StreamEvent>) -> Completion {
        let mut c = Completion::empty();
        for e in events {
            c.apply(e);
        }
        c
    }
}

/// What the parser knows of the request, to find a context overflow the server did not report
/// (quirks `context-overflow-silent` and `context-overflow-window-edge`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestContext {
    /// Our estimate of the prompt's tokens.
    pub prompt_estimate: Option<u64>,
    /// The model's context window.
    pub window: Option<u64>,
    /// The endpoint's server kind (a name of `quirks.json` `servers`, or any other name). A
    /// reported prompt far below the estimate is a silent truncation only for the kinds the
    /// quirk `context-overflow-silent` lists; empty or `other` is none of them.
    pub server: String,
}

/// The quirk whose servers cut a prompt silently (a low reported prompt is an overflow).
pub const SILENT_TRUNCATION: &str = "context-overflow-silent";
/// The quirk of answers that stop at the window's edge with no output.
pub const WINDOW_EDGE: &str = "context-overflow-window-edge";

/// Makes our tool-call ids: unique in the process, whatever the server sent.
fn next_call_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static EPOCH: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
            % 0x1_0000_0000
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("call_{epoch:08x}{n:04x}")
}

fn non_empty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The parser of one answer.
#[derive(Debug)]
pub struct StreamParser<'q> {
    quirks: &'q Quirks,
    context: RequestContext,
    sse: SseDecoder,
    think: ThinkSplitter,
    calls: CallAssembler,
    text_len: usize,
    usage: Option<Usage>,
    server_finish: Option<String>,
    done: bool,
    saw_chunk: bool,
    /// The body's first bytes, to say what came when it was not an event stream.
    body_start: Vec<u8>,
    error: Option<ModelError>,
    so_far: Completion,
}

impl<'q> StreamParser<'q> {
    /// A parser for one answer.
    pub fn new(quirks: &'q Quirks) -> StreamParser<'q> {
        StreamParser {
            quirks,
            context: RequestContext::default(),
            sse: SseDecoder::new(),
            think: ThinkSplitter::new(),
            calls: CallAssembler::new(),
            text_len: 0,
            usage: None,
            server_finish: None,
            done: false,
            saw_chunk: false,
            body_start: Vec::new(),
            error: None,
            so_far: Completion::empty(),
        }
    }

    /// Gives the parser what it needs to find a silent truncation.
    pub fn with_context(mut self, context: RequestContext) -> StreamParser<'q> {
        self.context = context;
        self
    }

    /// Feeds raw body bytes (split anywhere).
    pub fn push_bytes(&mut self, bytes: &[u8]) -> Vec<StreamEvent> {
        let room = BODY_START.saturating_sub(self.body_start.len());
        self.body_start
            .extend_from_slice(&bytes[..room.min(bytes.len())]);
        let payloads = self.sse.push_bytes(bytes);
        self.push_payloads(payloads)
    }

    /// Feeds one raw SSE line (as the conformance cases hold them).
    pub fn push_line(&mut self, line: &str) -> Vec<StreamEvent> {
        let payloads = self.sse.push_line(line);
        self.push_payloads(payloads)
    }

    fn push_payloads(&mut self, payloads: Vec<String>) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        for p in payloads {
            out.extend(self.push_data(&p));
        }
        out
    }

    /// Feeds one data payload (`[DONE]` or a JSON chunk).
    pub fn push_data(&mut self, data: &str) -> Vec<StreamEvent> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Vec::new();
        }
        match serde_json::from_str::<Value>(data) {
            Ok(chunk) => self.push_chunk(&chunk),
            Err(e) => {
                if self.error.is_none() {
                    self.error = Some(ModelError {
                        class: ErrorClass::Other,
                        status: None,
                        message: format!("a stream chunk is not JSON ({e}): {data}"),
                        retry_after: None,
                        loading: false,
                        retryable: true,
                    });
                }
                Vec::new()
            }
        }
    }

    /// Feeds one parsed chunk (or a whole non-streamed answer).
    pub fn push_chunk(&mut self, chunk: &Value) -> Vec<StreamEvent> {
        let out = self.read_chunk(chunk);
        for e in &out {
            self.so_far.apply(e);
        }
        out
    }

    fn read_chunk(&mut self, chunk: &Value) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        self.saw_chunk = true;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null())
            && self.error.is_none()
        {
            let raw = chunk.to_string();
            self.error = Some(classify_value(self.quirks, None, error, &raw, None));
        }
        if let Some(usage) = chunk.get("usage").and_then(read_usage) {
            self.usage = Some(usage);
            out.push(StreamEvent::Usage(usage));
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            if choice
                .get("index")
                .and_then(Value::as_u64)
                .is_some_and(|i| i != 0)
            {
                continue;
            }
            let delta = choice
                .get("delta")
                .filter(|d| d.is_object())
                .or_else(|| choice.get("message"));
            if let Some(delta) = delta {
                self.push_delta(delta, &mut out);
            }
            if let Some(reason) = non_empty_str(choice.get("finish_reason")) {
                self.server_finish = Some(reason.to_string());
                if reason == "error" && self.error.is_none() {
                    self.error = Some(ModelError {
                        class: ErrorClass::Other,
                        status: None,
                        message: "the server ended the answer with finish_reason `error`".into(),
                        retry_after: None,
                        loading: false,
                        retryable: true,
                    });
                }
            }
        }
        out
    }

    fn push_delta(&mut self, delta: &Value, out: &mut Vec<StreamEvent>) {
        let reasoning = non_empty_str(delta.get("reasoning"))
            .or_else(|| non_empty_str(delta.get("reasoning_content")))
            .map(str::to_string)
            .or_else(|| {
                let details = delta.get("reasoning_details")?.as_array()?;
                let joined: String = details
                    .iter()
                    .filter_map(|d| {
                        d.get("text")
                            .or_else(|| d.get("summary"))
                            .and_then(Value::as_str)
                    })
                    .collect();
                (!joined.is_empty()).then_some(joined)
            });
        if let Some(r) = reasoning {
            out.push(StreamEvent::Reasoning(r));
        }
        let content = match delta.get("content") {
            Some(Value::String(s)) => Some(s.clone()),
            // Content as parts (Mistral's Magistral): text parts are the answer, `thinking`
            // parts (a string or a list of text parts) are reasoning.
            Some(Value::Array(parts)) => {
                let mut text = String::new();
                for p in parts {
                    match p.get("type").and_then(Value::as_str) {
                        Some("thinking") => {
                            let thought: String = match p.get("thinking") {
                                Some(Value::String(t)) => t.clone(),
                                Some(Value::Array(inner)) => inner
                                    .iter()
                                    .filter_map(|i| i.get("text").and_then(Value::as_str))
                                    .collect(),
                                _ => String::new(),
                            };
                            if !thought.is_empty() {
                                out.push(StreamEvent::Reasoning(thought));
                            }
                        }
                        _ => {
                            if let Some(t) = p.get("text").and_then(Value::as_str) {
                                text.push_str(t);
                            }
                        }
                    }
                }
                Some(text)
            }
            _ => None,
        };
        if let Some(content) = content.filter(|c| !c.is_empty()) {
            let pieces = self.think.push(&content);
            self.pieces(pieces, out);
        }
        match delta.get("tool_calls") {
            Some(Value::Array(calls)) => {
                for call in calls {
                    self.calls.push(&CallDelta::from_wire(call));
                }
            }
            _ => {
                // The legacy single `function_call`, only when no `tool_calls` came with it.
                if let Some(f) = delta.get("function_call").filter(|f| f.is_object()) {
                    let call = serde_json::json!({ "function": f });
                    self.calls.push(&CallDelta::from_wire(&call));
                }
            }
        }
    }

    fn pieces(&mut self, pieces: Vec<Piece>, out: &mut Vec<StreamEvent>) {
        for p in pieces {
            match p {
                Piece::Text(t) => {
                    self.text_len += t.len();
                    out.push(StreamEvent::Text(t));
                }
                Piece::Reasoning(r) => out.push(StreamEvent::Reasoning(r)),
                Piece::TextWasReasoning(moved) => {
                    self.text_len -= moved.len().min(self.text_len);
                    out.push(StreamEvent::TextWasReasoning(moved));
                }
            }
        }
    }

    /// The end of the body: flushes what is held back, settles the tool calls and concludes.
    pub fn finish(mut self) -> (Vec<StreamEvent>, Completion) {
        let mut out = Vec::new();
        for p in self.sse.finish() {
            out.extend(self.push_data(&p));
        }
        let applied = out.len();
        let pieces = self.think.finish();
        self.pieces(pieces, &mut out);

        if self.error.is_none() && !self.done && self.server_finish.is_none() {
            self.error = Some(ModelError {
                class: ErrorClass::Other,
                status: None,
                message: if self.saw_chunk {
                    "the stream ended without a finish_reason or [DONE]".into()
                } else {
                    not_a_stream(&self.body_start)
                },
                retry_after: None,
                loading: false,
                retryable: true,
            });
        }
        let errored = self.error.is_some();
        let end = if errored {
            CallEnd::Error
        } else if self.server_finish.as_deref() == Some("length") {
            CallEnd::Length
        } else {
            CallEnd::Complete
        };
        let mut valid = 0;
        for call in std::mem::take(&mut self.calls).finish(end) {
            let (name, why) = match (call.name, call.arguments) {
                (Some(name), Ok(arguments)) => {
                    valid += 1;
                    out.push(StreamEvent::ToolCall(ToolCall {
                        id: next_call_id(),
                        name,
                        arguments,
                    }));
                    continue;
                }
                (None, _) => (String::new(), Unusable::NoName),
                (Some(name), Err(why)) => (name, why),
            };
            out.push(StreamEvent::InvalidToolCall(InvalidToolCall {
                id: next_call_id(),
                name,
                raw: call.raw,
                reason: why.reason().to_string(),
            }));
        }

        let reason = if let Some(e) = &self.error {
            match e.class {
                ErrorClass::ContextOverflow => FinishReason::ContextOverflow,
                ErrorClass::Capacity => FinishReason::Capacity,
                ErrorClass::Other => FinishReason::Error,
            }
        } else if valid > 0 {
            FinishReason::ToolCalls
        } else if self.silently_truncated() {
            self.error = Some(ModelError {
                class: ErrorClass::ContextOverflow,
                status: None,
                message: "the server cut the prompt to fit its window without saying so".into(),
                retry_after: None,
                loading: false,
                retryable: false,
            });
            FinishReason::ContextOverflow
        } else {
            match self.server_finish.as_deref() {
                Some("length") => FinishReason::Length,
                Some("content_filter") => FinishReason::ContentFilter,
                _ => FinishReason::Stop,
            }
        };
        out.push(StreamEvent::Finish(Finish {
            reason,
            server_reason: self.server_finish.clone(),
            error: self.error.clone(),
        }));
        let mut completion = std::mem::replace(&mut self.so_far, Completion::empty());
        for e in &out[applied..] {
            completion.apply(e);
        }
        (out, completion)
    }

    fn silently_truncated(&self) -> bool {
        let Some(usage) = self.usage else {
            return false;
        };
        let rules = &self.quirks.request;
        let server = self.context.server.as_str();
        if self.quirks.applies(SILENT_TRUNCATION, server)
            && let Some(estimate) = self.context.prompt_estimate
            && estimate >= rules.silent_truncation_min_tokens
            && (usage.prompt_tokens as f64) < rules.silent_truncation_ratio * estimate as f64
        {
            return true;
        }
        if let Some(window) = self.context.window
            && self.quirks.applies(WINDOW_EDGE, server)
        {
            let at_edge = usage.prompt_tokens as f64 >= rules.edge_of_window_ratio * window as f64;
            if self.server_finish.as_deref() == Some("length")
                && at_edge
                && usage.completion_tokens == 0
                && self.text_len == 0
            {
                return true;
            }
            if usage.prompt_tokens > window {
                return true;
            }
        }
        false
    }
}

fn read_usage(v: &Value) -> Option<Usage> {
    let obj = v.as_object()?;
    let num = |k: &str| obj.get(k).and_then(Value::as_u64);
    let prompt = num("prompt_tokens").or_else(|| num("input_tokens"))?;
    Some(Usage {
        prompt_tokens: prompt,
        completion_tokens: num("completion_tokens")
            .or_else(|| num("output_tokens"))
            .unwrap_or(0),
        cached_tokens: obj
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens"))
            .and_then(Value::as_u64),
        reasoning_tokens: obj
            .get("completion_tokens_details")
            .and_then(|d| d.get("reasoning_tokens"))
            .and_then(Value::as_u64),
    })
}

/// Parses a whole non-streamed answer (a chat.completion object, or a 200 body that is only an
/// error).
pub fn parse_response(quirks: &Quirks, body: &Value, context: RequestContext) -> Completion {
    let mut parser = StreamParser::new(quirks).with_context(context);
    parser.push_chunk(body);
    parser.done = true;
    if parser.server_finish.is_none() && parser.error.is_none() {
        let has_choices = body
            .get("choices")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty());
        if !has_choices {
            let raw = body.to_string();
            parser.error = Some(classify_value(quirks, None, body, &raw, None));
        }
    }
    parser.finish().1
}

/// The completion of an HTTP error answer.
pub fn error_completion(error: ModelError) -> Completion {
    let reason = match error.class {
        ErrorClass::ContextOverflow => FinishReason::ContextOverflow,
        ErrorClass::Capacity => FinishReason::Capacity,
        ErrorClass::Other => FinishReason::Error,
    };
    Completion {
        text: String::new(),
        reasoning: String::new(),
        tool_calls: Vec::new(),
        invalid_calls: Vec::new(),
        usage: None,
        finish: Finish {
            reason,
            server_reason: None,
            error: Some(error),
        },
    }
}

/// The body's first bytes kept to say what came instead of an event stream.
const BODY_START: usize = 80;

/// What a body that held no stream chunk was: nothing, HTML (a web page where the API was
/// expected: a base URL without its `/v1`, a proxy's or a login page), or something else, its
/// start quoted.
fn not_a_stream(start: &[u8]) -> String {
    let text = String::from_utf8_lossy(start);
    let text = text.trim_start();
    if text.is_empty() {
        return "the server closed the answer without sending anything".into();
    }
    let quoted: String = text
        .chars()
        .take(60)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let lower = text.to_ascii_lowercase();
    if lower.starts_with("<!doctype html") || lower.starts_with("<html") || lower.starts_with('<') {
        format!(
            "the server answered with an HTML page, not an event stream (it begins {quoted:?}): the base URL may be a web page's, not the API's (which usually ends in /v1)"
        )
    } else {
        format!(
            "the server answered with something other than an event stream (it begins {quoted:?})"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop answer reporting `prompt` tokens, parsed for a request of `estimate` tokens to a
    /// server of kind `server`.
    fn conclude(server: &str, estimate: u64, prompt: u64) -> FinishReason {
        let quirks = Quirks::embedded().unwrap();
        let body = serde_json::json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 1},
        });
        let context = RequestContext {
            prompt_estimate: Some(estimate),
            window: Some(32_768),
            server: server.into(),
        };
        parse_response(quirks, &body, context).finish.reason
    }

    #[test]
    fn silent_truncation_only_for_the_servers_of_its_quirk() {
        let quirks = Quirks::embedded().unwrap();
        let listed = &quirks.quirk(SILENT_TRUNCATION).unwrap().servers;
        assert!(listed.iter().any(|s| s == "ollama"));
        for server in listed {
            assert_eq!(
                conclude(server, 9000, 2048),
                FinishReason::ContextOverflow,
                "{server}"
            );
            assert_eq!(conclude(server, 9000, 6000), FinishReason::Stop, "{server}");
            // Below the smallest window nothing is ever cut.
            assert_eq!(conclude(server, 1000, 10), FinishReason::Stop, "{server}");
        }
        for server in ["llama.cpp", "vllm", "other", "", "ollama-proxy"] {
            assert_eq!(conclude(server, 9000, 2048), FinishReason::Stop, "{server}");
        }
    }

    #[test]
    fn the_window_edge_counts_for_every_server() {
        let quirks = Quirks::embedded().unwrap();
        let body = serde_json::json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 4090, "completion_tokens": 0},
        });
        for server in ["llama.cpp", "other", "ollama"] {
            let context = RequestContext {
                prompt_estimate: None,
                window: Some(4096),
                server: server.into(),
            };
            assert_eq!(
                parse_response(quirks, &body, context).finish.reason,
                FinishReason::ContextOverflow,
                "{server}"
            );
        }
    }
}
