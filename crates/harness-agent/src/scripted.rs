//! A model that answers from a script, in process: for tests and for embedders that want to
//! see a session run without a model server. Each request takes the next scripted reply; the
//! requests are kept for a test to look at.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use harness_core::protocol::ToolCall;
use harness_model::{
    CancellationToken, ChatRequest, Completion, Finish, FinishReason, ModelInfo, StreamEvent,
};
use serde_json::Value;

use crate::seams::{BoxFuture, ModelLink};

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Text, streamed word by word.
    Text(String),
    /// Tool calls (name and arguments), with optional text before them.
    Calls(String, Vec<(String, Value)>),
    /// The server fails with this message.
    Fail(String),
    /// Text streamed, then nothing more until the request is cancelled (a slow answer).
    Stall(String),
    /// The request fails for this reason and is retried at once, as the model link retries a
    /// 429: the retry is told, and the next reply answers the same request.
    Retry(String),
}

impl Reply {
    /// A text answer.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }

    /// One tool call.
    pub fn call(name: impl Into<String>, arguments: Value) -> Reply {
        Reply::Calls(String::new(), vec![(name.into(), arguments)])
    }
}

/// A model link that answers from a script.
#[derive(Clone)]
pub struct ScriptedModel {
    info: ModelInfo,
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<ChatRequest>>>,
    calls: Arc<Mutex<u64>>,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.info.name)
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// A model named `scripted` with a 32k window that calls tools, answering `replies` in
    /// order (and "[the script has ended]" after them).
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> ScriptedModel {
        let info = ModelInfo {
            name: "scripted".into(),
            catalogue_id: None,
            context: Some(32_768),
            input: None,
            output: Some(1_024),
            efforts: Vec::new(),
            default_effort: None,
            vision: false,
            tools: true,
            capacity: None,
        };
        ScriptedModel {
            info,
            replies: Arc::new(Mutex::new(replies.into_iter().collect())),
            requests: Arc::new(Mutex::new(Vec::new())),
            calls: Arc::new(Mutex::new(0)),
        }
    }

    /// The same script with another window (to see compaction).
    pub fn with_context(mut self, context: u64) -> ScriptedModel {
        self.info.context = Some(context);
        self
    }

    /// The same script for a model that reads images.
    pub fn with_vision(mut self) -> ScriptedModel {
        self.info.vision = true;
        self
    }

    /// Adds replies to the end of the script.
    pub fn push(&self, reply: Reply) {
        if let Ok(mut r) = self.replies.lock() {
            r.push_back(reply);
        }
    }

    /// The requests it was sent, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl ModelLink for ScriptedModel {
    fn model(&self) -> &ModelInfo {
        &self.info
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(&StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Completion, harness_model::Error>> {
        Box::pin(async move {
            if let Ok(mut r) = self.requests.lock() {
                r.push(request.clone());
            }
            let mut next = self.replies.lock().ok().and_then(|mut r| r.pop_front());
            let mut attempt = 0;
            while let Some(Reply::Retry(reason)) = &next {
                attempt += 1;
                on_event(&StreamEvent::Retry(harness_model::Retry {
                    attempt,
                    max_attempts: 5,
                    reason: reason.clone(),
                    wait: std::time::Duration::ZERO,
                }));
                next = self.replies.lock().ok().and_then(|mut r| r.pop_front());
            }
            let n = {
                let mut c = self.calls.lock().unwrap_or_else(|e| e.into_inner());
                *c += 1;
                *c
            };
            // Let a cancel that is already on its way land first.
            tokio::task::yield_now().await;
            if cancel.is_cancelled() {
                return Err(harness_model::Error::Cancelled);
            }
            let reply = next.unwrap_or_else(|| Reply::text("[the script has ended]"));
            let (text, calls) = match reply {
                Reply::Text(t) => (t, Vec::new()),
                Reply::Calls(t, c) => (t, c),
                Reply::Retry(_) => (String::new(), Vec::new()),
                Reply::Fail(message) => {
                    return Err(harness_model::Error::Decode(message));
                }
                Reply::Stall(text) => {
                    for piece in text.split_inclusive(' ') {
                        on_event(&StreamEvent::Text(piece.to_owned()));
                    }
                    cancel.cancelled().await;
                    return Err(harness_model::Error::Cancelled);
                }
            };
            for piece in text.split_inclusive(' ') {
                on_event(&StreamEvent::Text(piece.to_owned()));
            }
            let tool_calls: Vec<ToolCall> = calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCall {
                    id: format!("call_{n}_{i}"),
                    name,
                    arguments,
                })
                .collect();
            let reason = if tool_calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            };
            Ok(Completion {
                text,
                reasoning: String::new(),
                tool_calls,
                invalid_calls: Vec::new(),
                usage: None,
                finish: Finish {
                    reason,
                    server_reason: None,
                    error: None,
                },
            })
        })
    }

    fn with_model(&self, name: &str) -> Result<Arc<dyn ModelLink>, crate::SeamError> {
        let mut other = self.clone();
        other.info.name = name.to_owned();
        Ok(Arc::new(other))
    }
}
