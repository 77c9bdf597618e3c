//! Tool calls: dispatched to the world (at once where the loop allows) or answered by the
//! runtime's own handlers (`registry`: `question`, `show`, `task`, `session_search`, the plan
//! tools, the loader), and the person asked before a call runs.

use super::*;

/// Puts the plan back as the saved plan calls left it (the plan is not in the transcript; its
/// calls and their answers are).
pub(super) fn replay_plan(plan: &Mutex<PlanState>, entries: &[Entry]) {
    let mut calls: HashMap<String, ToolCall> = HashMap::new();
    let Ok(mut plan) = plan.lock() else {
        return;
    };
    for e in entries {
        match e {
            Entry::Assistant { tool_calls, .. } => {
                for c in tool_calls {
                    calls.insert(c.id.clone(), c.clone());
                }
            }
            Entry::ToolResult { call_id, kind, .. }
                if *kind != harness_loop::context::InsertKind::Error =>
            {
                if let Some(c) = calls.get(call_id)
                    && c.name.starts_with("plan_")
                {
                    let _ = plan.apply(&c.name, &c.arguments, true);
                }
            }
            _ => {}
        }
    }
}

/// The titles of the plan's open tasks (none without a plan).
pub(super) fn open_tasks(plan: Option<&harness_core::plan::Plan>) -> Vec<String> {
    plan.map(harness_core::plan::Plan::open_tasks)
        .unwrap_or_default()
}

/// Where a call's output goes as it comes: each piece to the front end as [`Event::ToolOutput`],
/// in order, before the call's result.
pub(super) fn forward_output(
    out: &mpsc::UnboundedSender<Event>,
    call_id: &str,
) -> crate::seams::OutputSink {
    let out = out.clone();
    let call_id = call_id.to_owned();
    Arc::new(move |text: String| {
        let _ = out.send(Event::ToolOutput {
            call_id: call_id.clone(),
            text,
        });
    })
}

impl Driver {
    pub(super) async fn ask(
        &mut self,
        call_id: String,
        question: PermissionQuestion,
    ) -> Result<Input> {
        loop {
            tokio::select! {
                op = self.ops.recv() => match op {
                    None => {
                        return Ok(Input::Answer {
                            call_id,
                            answer: Answer::Deny { feedback: None },
                        });
                    }
                    Some(op) => {
                        if let Some((id, answer)) = self.op_while_busy(op)
                            && id == call_id
                        {
                            if answer == Answer::Always {
                                self.perms.approve_always(&question);
                            }
                            if matches!(answer, Answer::Once | Answer::Always) {
                                self.approved.insert(call_id.clone());
                            }
                            return Ok(Input::Answer { call_id, answer });
                        }
                        if self.cancelled {
                            return Ok(Input::Cancel);
                        }
                    }
                },
                Some(msg) = self.job_rx.recv() => {
                    let _ = self.job_while_waiting(msg)?;
                }
            }
        }
    }

    pub(super) async fn run_tools(
        &mut self,
        calls: Vec<ToolCall>,
        parallel: bool,
    ) -> Result<Input> {
        // The loop said which batches may run at once (by the spec's `exclusive`); calls the
        // runtime answers itself wait on the front end or the session, so they run one by one.
        let parallel = parallel && calls.iter().all(|c| !self.answers(&c.name));
        let asked = calls.clone();
        let mut results = Vec::new();
        if parallel {
            let world = self.world.clone();
            let approved = self.approved.clone();
            let cancel = self.cancel.clone();
            let out = self.out.clone();
            let batch = calls.clone();
            let task = tokio::spawn(async move {
                let runs = batch.iter().map(|c| {
                    let cx = CallContext {
                        cancel: cancel.clone(),
                        output: forward_output(&out, &c.id),
                        approved: approved.contains(&c.id),
                    };
                    world.call(c, cx)
                });
                futures_util::future::join_all(runs).await
            });
            let ran = self.wait(task).await?;
            for (call, ran) in calls.iter().zip(ran) {
                let outcome = self.finish(call, ran).await;
                results.push(outcome);
            }
        } else {
            for call in calls {
                if self.cancelled {
                    break;
                }
                let outcome = self.run_one(call).await?;
                results.push(outcome);
            }
        }
        if self.cancelled {
            // What ran stays as it ran; the rest is answered `cancelled`.
            return Ok(Input::Stopped {
                shown: String::new(),
                results,
            });
        }
        self.post_tool_hooks(&asked, &mut results).await;
        Ok(Input::ToolResults(results))
    }

    pub(super) async fn run_one(&mut self, call: ToolCall) -> Result<ToolOutcome> {
        if let Some(handler) = super::registry::RUNTIME_TOOLS.get(&call.name) {
            return handler(self, &call).await;
        }
        let world = self.world.clone();
        let cx = CallContext {
            cancel: self.cancel.clone(),
            output: forward_output(&self.out, &call.id),
            approved: self.approved.contains(&call.id),
        };
        let c = call.clone();
        let task = tokio::spawn(async move { world.call(&c, cx).await });
        let ran = self.wait(task).await?;
        Ok(self.finish(&call, ran).await)
    }

    /// `session_search`: the store's saved sessions' words (this one left out).
    pub(super) async fn session_search(&mut self, call: &ToolCall) -> Result<ToolOutcome> {
        let q = call
            .arguments
            .get("query")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let limit = call
            .arguments
            .get("limit")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(5) as usize;
        let store = self.store.clone();
        let me = self.meta.id.clone();
        let task = tokio::task::spawn_blocking(move || store.search(&q, limit, &me));
        let text = self.wait(task).await?.unwrap_or_default();
        Ok(ToolOutcome::ok(&call.id, text))
    }

    /// A call of the loader: the deferred tools it names are sent whole from the next request on.
    pub(super) fn load_tools(&mut self, call: &ToolCall) -> ToolOutcome {
        let (names, load) = self.offering.load(call);
        if !names.is_empty() {
            self.offering.context.loaded.extend(names);
            self.offer_again();
        }
        let (text, error) = load.answer();
        ToolOutcome::answer(&call.id, text, error)
    }

    /// A plan tool's call on the session's plan (harness-core's rules).
    pub(super) fn plan_call(&mut self, call: &ToolCall) -> ToolOutcome {
        let plan_mode = self.perms.mode() == Mode::Plan;
        let applied = self
            .plan
            .lock()
            .map_err(|_| "the plan is not available".to_owned())
            .and_then(|mut p| {
                p.apply(&call.name, &call.arguments, plan_mode)
                    .map_err(|e| e.to_string())
            });
        match applied {
            Ok(text) => {
                let (plan, open) = match self.plan.lock() {
                    Ok(p) => (p.plan.clone(), open_tasks(p.plan.as_ref())),
                    Err(_) => (None, Vec::new()),
                };
                self.session.set_open_tasks(open);
                self.emit(CoreEvent::PlanChanged { plan });
                ToolOutcome::ok(&call.id, text)
            }
            Err(text) => ToolOutcome::error(&call.id, text),
        }
    }

    /// What a world's run of a call becomes: its outcome (an edit shown to the front end), or,
    /// for a command that outlived its timeout, a job as the loop decides.
    pub(super) async fn finish(&mut self, call: &ToolCall, ran: Ran) -> ToolOutcome {
        match ran {
            Ran::Done(outcome) => {
                if let Some(e) = &outcome.edit
                    && !outcome.is_error
                {
                    let _ = self.out.send(Event::Edit {
                        call_id: call.id.clone(),
                        path: e.path.clone(),
                        before: e.before.clone(),
                        after: e.after.clone(),
                    });
                }
                outcome
            }
            Ran::Overran {
                call_id,
                title,
                seconds,
                running,
            } => {
                let (seen, so_far) = running.output_since(0);
                match self.session.jobs_mut().overrun(&title, seconds, &so_far) {
                    harness_loop::jobs::Overrun::Continue { id, text } => {
                        self.emit(CoreEvent::JobStarted {
                            job_id: id.to_string(),
                            kind: JobKind::Command,
                            title,
                        });
                        self.watch_job(id, running, seen);
                        let body = so_far.trim_end_matches('\n');
                        let output = if body.is_empty() {
                            text
                        } else {
                            format!("{body}\n\n{text}")
                        };
                        ToolOutcome::ok(call_id, output)
                    }
                    harness_loop::jobs::Overrun::Kill { text } => {
                        running.stop().await;
                        ToolOutcome::error(call_id, text)
                    }
                }
            }
        }
    }

    /// A `task` call in the foreground: a subagent runs to its end and its reply answers.
    pub(super) async fn task(&mut self, call: &ToolCall) -> Result<ToolOutcome> {
        Ok(match self.spawn_subagent(call, None, self.cancel.clone()) {
            Ok((_ctl, handle, _)) => match self.wait(handle).await? {
                Ok(text) => ToolOutcome::ok(&call.id, text),
                Err(message) => ToolOutcome::error(&call.id, message),
            },
            Err(message) => ToolOutcome::error(&call.id, message),
        })
    }

    /// Puts a `question` call to the person and waits for the reply (or a cancel).
    pub(super) async fn question(&mut self, call: &ToolCall) -> Result<ToolOutcome> {
        let a = &call.arguments;
        let question = a
            .get("question")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let options: Vec<String> = a
            .get("options")
            .and_then(serde_json::Value::as_array)
            .map(|o| {
                o.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        self.reply = None;
        let _ = self.out.send(Event::Question {
            call_id: call.id.clone(),
            question,
            options,
        });
        Ok(match self.wait_reply(&call.id).await? {
            Some(Some(t)) => ToolOutcome::ok(&call.id, t),
            Some(None) => ToolOutcome::error(&call.id, "Nobody answered the question."),
            None => ToolOutcome::error(&call.id, ""),
        })
    }

    /// Waits for the front end's [`Ctl::Reply`] to `call_id` while ops and job messages keep
    /// coming; `None` when the turn was cancelled first.
    pub(super) async fn wait_reply(&mut self, call_id: &str) -> Result<Option<Option<String>>> {
        loop {
            if let Some((id, text)) = self.reply.take()
                && id == call_id
            {
                return Ok(Some(text));
            }
            if self.cancelled {
                return Ok(None);
            }
            tokio::select! {
                op = self.ops.recv() => match op {
                    Some(op) => { let _ = self.op_while_busy(op); }
                    None => self.reply = Some((call_id.to_owned(), None)),
                },
                Some(msg) = self.job_rx.recv() => {
                    let _ = self.job_while_waiting(msg)?;
                }
            }
        }
    }

    /// Sends a `show` call's file to the front end's viewer (it holds `display`) and waits
    /// for it to say whether the file opened; when the viewer is gone, the tool's
    /// `unavailable` text answers, word for word.
    pub(super) async fn show(&mut self, call: &ToolCall) -> Result<ToolOutcome> {
        let unavailable = || {
            let holds = harness_core::offer::Holds::default();
            Spec::embedded()
                .tool("show")
                .and_then(|t| harness_core::offer::unavailable(t, &holds))
                .unwrap_or_default()
                .to_owned()
        };
        if !self.display {
            return Ok(ToolOutcome::error(&call.id, unavailable()));
        }
        let Some(rel) = call
            .arguments
            .get("path")
            .and_then(serde_json::Value::as_str)
        else {
            return Ok(crate::args::missing(call, "path"));
        };
        // Through the session's view, as `read` would see the path.
        let world = self.world.clone();
        let rel = rel.to_owned();
        let task = tokio::task::spawn_blocking(move || world.read_for_show(&rel));
        let file = match self.wait(task).await? {
            Ok(f) => f,
            Err(e) => return Ok(ToolOutcome::error(&call.id, e.to_string())),
        };
        let path = std::path::Path::new(&file.path);
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let (kind, language) = match ext.as_str() {
            "md" | "markdown" => ("markdown", None),
            "html" | "htm" => ("html", None),
            "" | "txt" | "log" | "text" => ("text", None),
            other => ("code", Some(other.to_owned())),
        };
        self.reply = None;
        let _ = self.out.send(Event::Show {
            call_id: call.id.clone(),
            path: file.path.clone(),
            title: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kind: kind.to_owned(),
            language,
            line: call
                .arguments
                .get("line")
                .and_then(serde_json::Value::as_u64),
            content: file.content,
        });
        Ok(match self.wait_reply(&call.id).await? {
            Some(Some(_)) => ToolOutcome::ok(
                &call.id,
                format!("{} is open for the person to see.", file.path),
            ),
            Some(None) => ToolOutcome::error(&call.id, unavailable()),
            None => ToolOutcome::error(&call.id, ""),
        })
    }
}
