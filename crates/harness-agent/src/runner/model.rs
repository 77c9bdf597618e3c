//! The model's steps: a request sent (in a slot of its server, streamed to the front end), its
//! answer made the loop's input, and compaction when the context fills.

use super::*;

/// A history's size in tokens, estimated as the loop estimates a prompt (four characters a
/// token).
pub(super) fn approx_tokens(history: &[Message]) -> u64 {
    (history.iter().map(Message::chars).sum::<usize>() / 4) as u64
}

impl Driver {
    /// One model step: compacted first when the request would fill the window past the spec's
    /// share, and compacted and sent once more when the answer says the context overflowed.
    pub(super) async fn step(&mut self, request: ModelRequest) -> Result<Input> {
        let mut request = request;
        let mut compacted = false;
        if self.near_full(&request)?
            && let Some(again) = self.compact_in_turn().await?
        {
            request = again;
            compacted = true;
        }
        self.overflowed = false;
        let input = self.call_model(request).await?;
        if std::mem::take(&mut self.overflowed)
            && harness_loop::context::compact_after_overflow(compacted, self.cancelled)
            && let Some(again) = self.compact_in_turn().await?
        {
            self.overflowed = false;
            return self.call_model(again).await;
        }
        Ok(input)
    }

    /// Whether `request` (with the system text) would fill more than the spec's share of the
    /// model's context window. A history that is one message (just compacted) is never full.
    pub(super) fn near_full(&self, request: &ModelRequest) -> Result<bool> {
        if self.client.model().context.is_none() {
            // No window known: the loop's rule compacts nothing; skip assembling the prompt.
            return Ok(false);
        }
        let percent = LoopConfig::embedded()?.context.compaction.near_full_percent;
        // The tools offered take room too (their schemas as sent, four characters a token).
        let tools: usize = if request.tools && self.client.model().tools {
            self.specs_and_size().1
        } else {
            0
        };
        let tokens = request.approx_tokens() + ((self.system_text()?.len() + tools) / 4) as u64;
        Ok(harness_loop::context::near_full(
            percent,
            self.client.model().context,
            tokens,
            request.messages.len(),
        ))
    }

    /// Compacts inside a turn (the session waits for the model): the request to send instead,
    /// or `None` when the compaction could not be done (said in a notice).
    pub(super) async fn compact_in_turn(&mut self) -> Result<Option<ModelRequest>> {
        match self.compact().await? {
            Ok(text) => {
                self.notice(Level::Info, text);
                Ok(self.session.request_again())
            }
            Err(why) => {
                self.notice(Level::Warning, format!("cannot compact: {why}"));
                Ok(None)
            }
        }
    }

    /// Compaction (`spec/context.md` §8): the model is asked, with no tools, for a summary of
    /// the conversation (`loop.json` `context.compaction.request`); the session's history then
    /// becomes that summary and the table of reads, and the dedupe table empties. `Ok(Err)`
    /// says why nothing was compacted.
    pub(crate) async fn compact(&mut self) -> Result<std::result::Result<String, String>> {
        let Some(request) = self.session.summary_request() else {
            return Ok(Err(if self.session.history().is_empty() {
                "nothing to compact yet".into()
            } else {
                "calls are being run".into()
            }));
        };
        let before = self.session.history().len();
        let before_tokens = approx_tokens(self.session.history());
        let mut messages = vec![Message::System {
            text: self.system_text()?,
        }];
        messages.extend(request.messages);
        let chat = ChatRequest {
            messages,
            // The tools stay listed (the prompt's cache holds) but none may be called.
            tools: self.tool_specs(),
            tool_choice: Some(ToolChoice::None),
            ..ChatRequest::default()
        };
        self.compacting = true;
        let task = self.model_task(chat, false);
        let result = self.wait(task).await;
        self.compacting = false;
        if self.cancelled || self.cancel.is_cancelled() {
            if !self.session.busy() {
                self.cancelled = false;
                self.cancel = CancellationToken::new();
            }
            return Ok(Err("cancelled".into()));
        }
        let completion = match result? {
            Ok(c) => c,
            Err(e) => return Ok(Err(format!("the model gave no summary: {e}"))),
        };
        if matches!(
            completion.finish.reason,
            FinishReason::Error | FinishReason::ContextOverflow | FinishReason::Capacity
        ) {
            let why = completion
                .finish
                .error
                .map(|e| e.to_string())
                .unwrap_or_else(|| completion.finish.reason.as_str().to_owned());
            return Ok(Err(format!("the model gave no summary: {why}")));
        }
        match self.session.compact_with_answer(&completion.text) {
            Ok(_) => {
                self.flush_log()?;
                self.emit(CoreEvent::Compacted {
                    before_tokens,
                    after_tokens: approx_tokens(self.session.history()),
                });
                Ok(Ok(format!(
                    "compacted: {before} messages became a summary of {} characters",
                    completion.text.trim().chars().count()
                )))
            }
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    pub(super) async fn call_model(&mut self, request: ModelRequest) -> Result<Input> {
        let mut messages = vec![Message::System {
            text: self.system_text()?,
        }];
        messages.extend(request.messages.iter().cloned());
        let chat = ChatRequest {
            messages,
            tools: if request.tools {
                self.tool_specs()
            } else {
                Arc::default()
            },
            tool_choice: if request.tools {
                None
            } else {
                Some(ToolChoice::None)
            },
            ..ChatRequest::default()
        };
        self.shown = Arc::new(std::sync::Mutex::new(String::new()));
        let task = self.model_task(chat, true);
        let result = self.wait(task).await?;
        let shown = |d: &Self| d.shown.lock().map(|s| s.clone()).unwrap_or_default();
        if self.cancelled {
            return Ok(Input::Stopped {
                shown: shown(self),
                results: Vec::new(),
            });
        }
        Ok(match result {
            Ok(c) => self.model_input(c),
            Err(harness_model::Error::Cancelled) => Input::Stopped {
                shown: shown(self),
                results: Vec::new(),
            },
            Err(e) => {
                self.overflowed = matches!(e, harness_model::Error::ContextOverflow(_));
                Input::ModelFailed {
                    message: e.to_string(),
                    overflow: self.overflowed,
                }
            }
        })
    }

    /// One model request as a task: it first waits for a slot of the model's server (a
    /// subagent's requests go in the slot it holds), streams the answer's pieces to the front end
    /// when `shown`, and gives the slot back.
    pub(super) fn model_task(
        &self,
        chat: ChatRequest,
        shown: bool,
    ) -> tokio::task::JoinHandle<std::result::Result<Completion, harness_model::Error>> {
        let client = self.client.clone();
        let cancel = self.cancel.clone();
        let out = self.out.clone();
        let gate = self.capacity.clone();
        let seen = self.shown.clone();
        let server = client.server();
        let holder = self
            .agent
            .is_none()
            .then(|| harness_loop::capacity::Holder::Request(self.meta.id.clone()));
        tokio::spawn(async move {
            if let Some(h) = &holder {
                let notices = out.clone();
                let mut queued = |position: usize| {
                    let _ = notices.send(Event::Core(CoreEvent::Notice {
                        level: Level::Info,
                        text: format!(
                            "waiting for a free slot of {server}: number {position} in line"
                        ),
                    }));
                };
                if !gate.acquire(&server, h, &cancel, &mut queued).await {
                    return Err(harness_model::Error::Cancelled);
                }
            }
            let mut on_event = |e: &StreamEvent| {
                // A retry is told even for a request whose answer is not shown (compaction).
                if let StreamEvent::Retry(r) = e {
                    let _ = out.send(Event::Core(CoreEvent::Notice {
                        level: Level::Info,
                        text: r.to_string(),
                    }));
                    return;
                }
                if !shown {
                    return;
                }
                let ev = match e {
                    StreamEvent::Text(t) => {
                        if let Ok(mut s) = seen.lock() {
                            s.push_str(t);
                        }
                        CoreEvent::TextDelta { text: t.clone() }
                    }
                    StreamEvent::Reasoning(t) => CoreEvent::ReasoningDelta { text: t.clone() },
                    _ => return,
                };
                let _ = out.send(Event::Core(ev));
            };
            let answer = client.stream(&chat, &cancel, &mut on_event).await;
            if let Some(h) = &holder {
                gate.release(&server, h);
            }
            answer
        })
    }

    pub(super) fn model_input(&mut self, c: Completion) -> Input {
        match c.finish.reason {
            FinishReason::Error | FinishReason::ContextOverflow | FinishReason::Capacity => {
                self.overflowed = c.finish.reason == FinishReason::ContextOverflow;
                let message = c.finish.error.map(|e| e.to_string()).unwrap_or_else(|| {
                    format!("the model's answer ended with {}", c.finish.reason.as_str())
                });
                return Input::ModelFailed {
                    message,
                    overflow: self.overflowed,
                };
            }
            FinishReason::Length if c.tool_calls.is_empty() => {
                self.notice(Level::Warning, "the answer was cut at the output limit");
            }
            _ => {}
        }
        for bad in &c.invalid_calls {
            self.notice(
                Level::Warning,
                format!("a call of {:?} was not run: {}", bad.name, bad.reason),
            );
        }
        let note = match harness_model::Quirks::embedded() {
            Ok(q) => c.invalid_calls_note(q),
            Err(e) => {
                self.notice(Level::Warning, format!("the quirks did not load: {e}"));
                None
            }
        };
        self.emit(CoreEvent::ModelAnswered {
            usage: c.usage.map(Into::into),
        });
        let spec = Spec::embedded();
        let (calls, purposes): (Vec<ToolCall>, Vec<Option<String>>) = c
            .tool_calls
            .into_iter()
            .map(|call| match self.offering.resolve(&call) {
                Ok(r) => (r.call, r.purpose),
                Err(_) => (call, None),
            })
            .unzip();
        // A deferred tool the model called directly is sent whole from the next request on.
        let called: Vec<String> = calls
            .iter()
            .filter(|c| self.offering.is_deferred(&c.name))
            .map(|c| c.name.clone())
            .collect();
        if !called.is_empty() {
            self.offering.context.loaded.extend(called);
            self.offer_again();
        }
        for (call, purpose) in calls.iter().zip(purposes) {
            let block = spec
                .tool(&call.name)
                .map(|t| t.block)
                .unwrap_or(harness_spec::Block::Tool);
            self.emit(CoreEvent::ToolCallStarted {
                call: call.clone(),
                block,
                purpose,
            });
        }
        Input::Model(ModelOutput {
            text: c.text,
            reasoning: c.reasoning,
            tool_calls: calls,
            usage: c.usage.map(Into::into),
            note,
        })
    }
}
