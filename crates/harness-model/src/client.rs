//! The HTTP client: one endpoint, one model. Sends shaped requests (streamed or not), parses the
//! answers with the one parser, retries with backoff what the spec retries (capacity answers, a
//! request that got no byte back, a stream cut short or silent for `retry.stream_idle_timeout_ms`
//! before anything was given out), tells each retry as a [`StreamEvent::Retry`], keeps the
//! endpoint's capacity (requests at once) on our side, and stops when cancelled.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::classify::{ErrorClass, ModelError, classify_http};
use crate::error::{Error, Result};
use crate::metadata::ModelInfo;
use crate::parse::{
    Completion, FinishReason, RequestContext, Retry, StreamEvent, StreamParser, parse_response,
};
use crate::quirks::{Quirks, RetryPolicy, ServerProfile};
use crate::shape::{ChatRequest, ShapedRequest, shape_request};

/// Where a model is served, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The base URL including `/v1` (e.g. `http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// The bearer key, if the server wants one.
    pub api_key: Option<String>,
    /// The server kind, a name of `quirks.json` `servers` (`vllm`, `llama.cpp`, `ollama`, ...;
    /// anything else is `other`). Rules meant for some servers only follow it: a reported prompt
    /// far below our estimate is a silent truncation only for the kinds the quirk
    /// `context-overflow-silent` lists (Ollama), never for `other`.
    pub server: String,
    /// The time allowed to connect.
    pub connect_timeout: Duration,
    /// The retry policy, the streams' idle limit included (None: `quirks.json` `retry`).
    pub retry: Option<RetryPolicy>,
    /// The longest one call may take as a whole: every attempt, its headers and its body, and
    /// the waits between attempts ([`DEFAULT_DEADLINE`] unless set). A call past it ends with
    /// [`Error::Deadline`], so a server that trickles bytes or never sends its headers cannot
    /// hold a prompt without end.
    pub deadline: Duration,
}

/// The default [`Endpoint::deadline`]: 10 minutes. OpenCode gives a request 5 minutes
/// (`timeout`, 300 000 ms) and Codex lets a stream be silent 5 minutes
/// (`stream_idle_timeout_ms`); ours also covers the retries and their waits, so it is twice that.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

impl Endpoint {
    /// An endpoint with the defaults: no key, server `other`, 30 s to connect, the spec's retry
    /// policy, [`DEFAULT_DEADLINE`] for a call.
    pub fn new(base_url: impl Into<String>) -> Endpoint {
        Endpoint {
            base_url: base_url.into(),
            api_key: None,
            server: "other".into(),
            connect_timeout: Duration::from_secs(30),
            retry: None,
            deadline: DEFAULT_DEADLINE,
        }
    }
}

/// A client for one model on one endpoint.
#[derive(Debug, Clone)]
pub struct ModelClient {
    http: reqwest::Client,
    endpoint: Endpoint,
    profile: ServerProfile,
    model: ModelInfo,
    quirks: &'static Quirks,
    retry: RetryPolicy,
    slots: Option<Arc<Semaphore>>,
}

impl ModelClient {
    /// A client for `model` (its metadata resolved) on `endpoint`.
    pub fn new(endpoint: Endpoint, model: ModelInfo) -> Result<ModelClient> {
        let quirks = Quirks::embedded()?;
        // reqwest is built without a crypto provider of its own: use ring's (an already
        // installed provider is kept).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = reqwest::Url::parse(&endpoint.base_url).map_err(|e| {
            Error::Config(format!(
                "base url {:?} is not a URL: {e}",
                endpoint.base_url
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "base url {:?} must start with http:// or https://",
                endpoint.base_url
            )));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(endpoint.connect_timeout)
            .build()
            .map_err(|e| Error::Config(format!("cannot build the HTTP client: {e}")))?;
        let profile = quirks.server(&endpoint.server);
        let retry = endpoint.retry.unwrap_or(quirks.retry);
        let slots = model
            .capacity
            .map(|n| Arc::new(Semaphore::new(n.max(1) as usize)));
        Ok(ModelClient {
            http,
            endpoint,
            profile,
            model,
            quirks,
            retry,
            slots,
        })
    }

    /// The model's metadata.
    pub fn model(&self) -> &ModelInfo {
        &self.model
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The body that would be sent for `request` (for tests and logs).
    pub fn shape(&self, request: &ChatRequest, stream: bool) -> Result<ShapedRequest> {
        shape_request(self.quirks, &self.profile, &self.model, request, stream)
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{}", self.endpoint.base_url.trim_end_matches('/'), path)
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut rb = self.http.post(self.url("chat/completions")).json(body);
        if let Some(key) = &self.endpoint.api_key {
            rb = rb.bearer_auth(key);
        }
        rb
    }

    /// The model ids the server lists at `/models`.
    pub async fn list_models(&self, cancel: &CancellationToken) -> Result<Vec<String>> {
        let url = self.url("models");
        let mut rb = self.http.get(&url);
        if let Some(key) = &self.endpoint.api_key {
            rb = rb.bearer_auth(key);
        }
        let response = tokio::select! {
            _ = cancel.cancelled() => return Err(Error::Cancelled),
            r = rb.send() => r.map_err(|e| transport(&url, &e))?,
        };
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| transport(&url, &e))?;
        if status >= 400 {
            return Err(Error::Server(classify_http(
                self.quirks,
                status,
                &text,
                None,
            )));
        }
        let v: Value =
            serde_json::from_str(&text).map_err(|e| Error::Decode(format!("{url}: {e}")))?;
        let list = v
            .get("data")
            .or_else(|| v.get("models"))
            .and_then(Value::as_array)
            .ok_or_else(|| Error::Decode(format!("{url}: no `data` list of models")))?;
        Ok(list
            .iter()
            .filter_map(|m| {
                m.get("id")
                    .or_else(|| m.get("name"))
                    .or_else(|| m.get("model"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect())
    }

    /// Sends `request` unstreamed and returns the whole answer.
    pub async fn complete(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<Completion> {
        self.run(request, false, cancel, &mut |_| {}).await
    }

    /// Sends `request` streamed, giving each event to `on_event` as it comes, and returns the
    /// whole answer. Capacity answers are retried only while nothing was given out yet.
    pub async fn stream(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) -> Result<Completion> {
        self.run(request, true, cancel, on_event).await
    }

    /// One call within the endpoint's deadline.
    async fn run(
        &self,
        request: &ChatRequest,
        stream: bool,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) -> Result<Completion> {
        let limit = self.endpoint.deadline;
        tokio::time::timeout(limit, self.run_attempts(request, stream, cancel, on_event))
            .await
            .unwrap_or_else(|_| {
                Err(Error::Deadline {
                    url: self.url("chat/completions"),
                    limit,
                })
            })
    }

    async fn run_attempts(
        &self,
        request: &ChatRequest,
        stream: bool,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) -> Result<Completion> {
        let shaped = self.shape(request, stream)?;
        let context = RequestContext {
            prompt_estimate: Some(shaped.prompt_estimate),
            window: self.model.context,
            server: self.endpoint.server.clone(),
        };
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let permit = match &self.slots {
                Some(slots) => Some(tokio::select! {
                    _ = cancel.cancelled() => return Err(Error::Cancelled),
                    p = slots.clone().acquire_owned() => p.map_err(|_| Error::Cancelled)?,
                }),
                None => None,
            };
            let outcome = self
                .attempt(&shaped.body, stream, &context, cancel, on_event)
                .await?;
            // The slot is free again before any wait for a retry.
            drop(permit);
            let (reason, retry_after, budget) = match outcome {
                Attempt::Done(completion) => return Ok(completion),
                // No byte came back (refused, reset, or closed while sending: a keep-alive
                // connection the server had dropped): sending again cannot do harm.
                Attempt::Unsent(error) if attempt < self.retry.unsent_max_attempts => {
                    (error.to_string(), None, self.retry.unsent_max_attempts)
                }
                Attempt::Unsent(error) => return Err(error),
                Attempt::Failed { error, gave_out } => {
                    let budget = if error.loading {
                        self.retry.loading_max_attempts
                    } else {
                        self.retry.max_attempts
                    };
                    match error.class {
                        ErrorClass::ContextOverflow => return Err(Error::ContextOverflow(error)),
                        ErrorClass::Capacity if !gave_out && attempt < budget => {
                            (error.to_string(), error.retry_after, budget)
                        }
                        ErrorClass::Capacity => {
                            return Err(Error::Capacity {
                                error,
                                attempts: attempt,
                            });
                        }
                        // A stream cut short or silent (no status: the body ended early, broke
                        // or sent nothing for the idle limit) is sent again while nothing was
                        // given out; any other error answer is final.
                        ErrorClass::Other
                            if error.retryable
                                && error.status.is_none()
                                && !gave_out
                                && attempt < budget =>
                        {
                            (error.to_string(), None, budget)
                        }
                        ErrorClass::Other => return Err(Error::Server(error)),
                    }
                }
            };
            let wait = self.backoff(attempt, retry_after);
            on_event(&StreamEvent::Retry(Retry {
                attempt,
                max_attempts: budget,
                reason,
                wait,
            }));
            tokio::select! {
                _ = cancel.cancelled() => return Err(Error::Cancelled),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// The longest silence of a streamed answer (`retry.stream_idle_timeout_ms`).
    fn idle_limit(&self) -> Duration {
        Duration::from_millis(self.retry.stream_idle_timeout_ms)
    }

    /// The error of a streamed answer that sent nothing for the idle limit: retryable, like a
    /// stream cut short.
    fn silent(&self, what: &str) -> ModelError {
        ModelError {
            class: ErrorClass::Other,
            status: None,
            message: format!(
                "the model server sent nothing for {} s {what} (quirks.json retry.stream_idle_timeout_ms)",
                self.idle_limit().as_secs_f64()
            ),
            retry_after: None,
            loading: false,
            retryable: true,
        }
    }

    /// The wait before attempt `attempt + 1`: exponential with jitter, at least what the server
    /// asked, at most `max_delay_ms`.
    fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let p = &self.retry;
        let exp = p
            .base_delay_ms
            .saturating_mul(1u64 << attempt.saturating_sub(1).min(20));
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let unit = f64::from(nanos % 1000) / 1000.0; // 0..1
        let jittered = (exp as f64) * (1.0 - p.jitter + 2.0 * p.jitter * unit);
        let mut ms = jittered.max(0.0) as u64;
        if let Some(asked) = retry_after {
            ms = ms.max(asked.as_millis() as u64);
        }
        Duration::from_millis(ms.min(p.max_delay_ms))
    }

    async fn attempt(
        &self,
        body: &Value,
        stream: bool,
        context: &RequestContext,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) -> Result<Attempt> {
        let url = self.url("chat/completions");
        // A streamed answer's headers come before its first token; a whole answer's come only
        // with it, so only a stream's wait is limited.
        let header_limit = stream.then(|| self.idle_limit());
        let response = tokio::select! {
            _ = cancel.cancelled() => return Err(Error::Cancelled),
            r = self.post(body).send() => match r {
                Ok(response) => response,
                Err(e) => return Ok(Attempt::Unsent(transport(&url, &e))),
            },
            _ = sleep_or_never(header_limit) => {
                return Ok(Attempt::Failed {
                    error: self.silent("after the request"),
                    gave_out: false,
                });
            }
        };
        let status = response.status().as_u16();
        if status >= 400 {
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let text = tokio::select! {
                _ = cancel.cancelled() => return Err(Error::Cancelled),
                t = response.text() => t.unwrap_or_default(),
            };
            let error = classify_http(self.quirks, status, &text, retry_after.as_deref());
            return Ok(Attempt::Failed {
                error,
                gave_out: false,
            });
        }
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("event-stream"));
        let completion = if stream || is_sse {
            let mut parser = StreamParser::new(self.quirks).with_context(context.clone());
            let mut body = response.bytes_stream();
            let mut gave_out = false;
            let mut went_silent = false;
            loop {
                let next = tokio::select! {
                    _ = cancel.cancelled() => return Err(Error::Cancelled),
                    n = body.next() => n,
                    _ = tokio::time::sleep(self.idle_limit()) => {
                        went_silent = true;
                        None
                    }
                };
                match next {
                    Some(Ok(bytes)) => {
                        for e in parser.push_bytes(&bytes) {
                            gave_out = true;
                            on_event(&e);
                        }
                    }
                    // A connection cut mid-body: the parser concludes the stream ended early.
                    Some(Err(_)) | None => break,
                }
            }
            let (events, completion) = parser.finish();
            if let Some(error) = completion.finish.error.clone() {
                // Cut by our idle limit: say so rather than that the stream ended early.
                let error = if went_silent && error.class == ErrorClass::Other {
                    self.silent("inside its streamed answer")
                } else {
                    error
                };
                return Ok(Attempt::Failed { error, gave_out });
            }
            for e in &events {
                on_event(e);
            }
            completion
        } else {
            let text = tokio::select! {
                _ = cancel.cancelled() => return Err(Error::Cancelled),
                t = response.text() => t.map_err(|e| transport(&url, &e))?,
            };
            let value: Value = serde_json::from_str(&text).map_err(|e| {
                Error::Decode(format!(
                    "{e}: {}",
                    text.chars().take(300).collect::<String>()
                ))
            })?;
            let completion = parse_response(self.quirks, &value, context.clone());
            if let Some(error) = completion.finish.error.clone() {
                return Ok(Attempt::Failed {
                    error,
                    gave_out: false,
                });
            }
            completion
        };
        debug_assert!(!matches!(
            completion.finish.reason,
            FinishReason::Error | FinishReason::Capacity | FinishReason::ContextOverflow
        ));
        Ok(Attempt::Done(completion))
    }
}

async fn sleep_or_never(limit: Option<Duration>) {
    match limit {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending::<()>().await,
    }
}

enum Attempt {
    Done(Completion),
    Failed {
        error: ModelError,
        gave_out: bool,
    },
    /// The request failed before any byte of an answer came back.
    Unsent(Error),
}

fn transport(url: &str, e: &reqwest::Error) -> Error {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    Error::Transport {
        url: url.to_string(),
        message,
    }
}
