//! The pump: one session's [`SessionEvent`]s carried to the client as `session/update` notifications,
//! `session/request_permission` requests, `_lembas/show` requests and the `_lembas` job and
//! plan notifications, and a prompt's stop reason.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentChunk, CurrentModeUpdate, Diff, PermissionOption, PermissionOptionKind, Plan as AcpPlan,
    PlanEntry, PlanEntryPriority, PlanEntryStatus, PromptResponse, RequestPermissionOutcome,
    RequestPermissionRequest, SessionNotification, SessionUpdate, ToolCall as AcpCall,
    ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use harness_agent::{Event as SessionEvent, Events, Op, Session};
use harness_core::plan::{Plan, TaskStatus};
use harness_core::protocol::{
    Answer, Block, Event, JobEnd, Mode, Origin, PermissionQuestion, SubagentCallStatus, ToolResult,
    TurnEnd,
};
use serde_json::{Value, json};

use crate::ext::{
    JobNoteNotification, JobNotification, MachinePrompt, MachinePromptEnd, PlanStateNotification,
    ShowRequest,
};
use crate::host::Host;
use crate::map::{acp_stop, call_locations, kind_of, meta, output_tail, text_block};

/// The end a prompt is answered on.
type Responder<T> = agent_client_protocol::v1::Responder<T>;

/// Carries one session's outputs to the client.
pub(crate) struct Pump {
    pub(crate) session: String,
    pub(crate) cx: ConnectionTo<Client>,
    pub(crate) ops: Session,
    pub(crate) pending: Arc<Mutex<Option<Responder<PromptResponse>>>>,
    pub(crate) mode: Arc<Mutex<Mode>>,
    pub(crate) running: Arc<Mutex<bool>>,
    pub(crate) plan_state: bool,
    pub(crate) jobs_cap: bool,
    pub(crate) jobs: Arc<Mutex<std::collections::BTreeMap<u32, Value>>>,
    pub(crate) machine: Arc<Mutex<Option<String>>>,
    pub(crate) scope: Option<Value>,
    /// The session's directory, for a call's relative path.
    pub(crate) cwd: PathBuf,
    /// Where the session's notices go.
    pub(crate) host: Arc<dyn Host>,
}

/// What the Pump keeps of a call while it runs.
struct CallSeen {
    name: String,
    block: Block,
    title: String,
    arguments: Value,
    /// The diffs of the files it changed.
    diffs: Vec<Diff>,
}

static MACHINE_TURNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Now as `2026-11-29T20:14:03Z`.
fn iso_now() -> String {
    iso(harness_agent::time::now())
}

/// A time in seconds since the epoch as `2026-11-29T20:14:03Z`.
pub(crate) fn iso(t: u64) -> String {
    let day = harness_agent::time::format_time(t);
    format!("{}T{}:{:02}Z", &day[..10], &day[11..], t % 60)
}

impl Pump {
    fn job_changed(&self, job_id: &str, object: Value) {
        if let (Ok(id), Ok(mut t)) = (job_id.parse::<u32>(), self.jobs.lock()) {
            t.insert(id, object.clone());
        }
        if self.jobs_cap {
            let _ = self.cx.send_notification(JobNotification(json!({
                "sessionId": self.session, "job": object,
            })));
        }
    }

    /// A subagent's call as a tool call of its own (the editor has no nesting): its id is the
    /// `task` call's (or `job-N`) with the subagent's call id after a `/`, and its meta names
    /// the parent; it starts in progress and ends completed or failed, with the failure's line.
    fn subagent_call(
        &self,
        task_call_id: Option<String>,
        job_id: Option<String>,
        call: harness_core::protocol::ToolCall,
        block: Block,
        status: SubagentCallStatus,
    ) {
        let parent = match (&task_call_id, &job_id) {
            (Some(t), _) => t.clone(),
            (None, Some(j)) => format!("job-{j}"),
            (None, None) => return,
        };
        let id = format!("{parent}/{}", call.id);
        let mut lembas = json!({"tool": call.name, "block": block, "subagent": true});
        if let Some(t) = task_call_id {
            lembas["parent"] = json!(t);
        }
        if let Some(j) = job_id {
            lembas["job"] = json!(j);
        }
        match status {
            SubagentCallStatus::Started => {
                let tool = harness_spec::Spec::embedded().tool(&call.name);
                let title = harness_agent::title::call_title(&call.name, block, &call.arguments);
                let mut c = AcpCall::new(id, title)
                    .kind(kind_of(block, tool.map(|t| t.risk)))
                    .status(ToolCallStatus::InProgress)
                    .raw_input(call.arguments.clone())
                    .meta(meta(lembas));
                if let Some(l) = call_locations(&call.arguments, &self.cwd) {
                    c = c.locations(l);
                }
                self.update(SessionUpdate::ToolCall(c));
            }
            SubagentCallStatus::Done => self.update(SessionUpdate::ToolCallUpdate(
                ToolCallUpdate::new(
                    id,
                    ToolCallUpdateFields::new().status(ToolCallStatus::Completed),
                )
                .meta(meta(lembas)),
            )),
            SubagentCallStatus::Failed { reason } => {
                let fields = ToolCallUpdateFields::new()
                    .status(ToolCallStatus::Failed)
                    .content(vec![ToolCallContent::from(text_block(&reason))]);
                self.update(SessionUpdate::ToolCallUpdate(
                    ToolCallUpdate::new(id, fields).meta(meta(lembas)),
                ));
            }
        }
    }

    fn update(&self, update: SessionUpdate) {
        let _ = self
            .cx
            .send_notification(SessionNotification::new(self.session.clone(), update));
    }

    pub(crate) async fn run(self, mut rx: Events) {
        let mut calls: HashMap<String, CallSeen> = HashMap::new();
        while let Some(out) = rx.recv().await {
            match out {
                SessionEvent::ToolOutput { call_id, text } => {
                    // A running command: in progress, the output new since the last update
                    // (its tail when long); the completed call carries the result.
                    if calls.contains_key(&call_id) {
                        let fields = ToolCallUpdateFields::new()
                            .status(ToolCallStatus::InProgress)
                            .content(vec![ToolCallContent::from(text_block(output_tail(&text)))]);
                        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                            call_id, fields,
                        )));
                    }
                }
                // The person's own commands are a terminal's; should one be asked about here,
                // nobody answers it, and its end is nothing to tell.
                SessionEvent::ShellAsked { call_id, .. } => {
                    self.ops.submit(Op::Answer {
                        call_id,
                        answer: Answer::Deny { feedback: None },
                    });
                }
                SessionEvent::ShellEnded { .. } => {}
                // Not offered over ACP; should one come, nobody answers it.
                SessionEvent::Question { call_id, .. } => {
                    self.ops.submit(Op::Reply {
                        call_id,
                        text: None,
                    });
                }
                SessionEvent::Show {
                    call_id,
                    path,
                    title,
                    kind,
                    language,
                    line,
                    content,
                } => {
                    let mut params = json!({
                        "sessionId": self.session, "path": path, "title": title,
                        "kind": kind, "content": content,
                    });
                    if let Some(l) = language {
                        params["language"] = json!(l);
                    }
                    if let Some(l) = line {
                        params["line"] = json!(l);
                    }
                    let cx = self.cx.clone();
                    let ops = self.ops.clone();
                    let _ = self.cx.spawn(async move {
                        // `{"shown": false}`, an error or a dropped link: the viewer is gone.
                        let shown = match cx.send_request(ShowRequest(params)).block_task().await {
                            Ok(r) => r.0.get("shown").and_then(Value::as_bool) == Some(true),
                            Err(_) => false,
                        };
                        ops.submit(Op::Reply {
                            call_id,
                            text: shown.then(String::new),
                        });
                        Ok(())
                    });
                }
                SessionEvent::Edit {
                    call_id,
                    path,
                    before,
                    after,
                } => {
                    let diff = Diff::new(PathBuf::from(path), after).old_text(before);
                    let seen = calls.entry(call_id.clone()).or_insert_with(|| CallSeen {
                        name: String::new(),
                        block: Block::Edit,
                        title: String::new(),
                        arguments: Value::Null,
                        diffs: Vec::new(),
                    });
                    seen.diffs.push(diff);
                    let content: Vec<ToolCallContent> = seen
                        .diffs
                        .iter()
                        .cloned()
                        .map(ToolCallContent::from)
                        .collect();
                    self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        call_id,
                        ToolCallUpdateFields::new().content(content),
                    )));
                }
                SessionEvent::Core(e) => self.event(e, &mut calls),
            }
        }
    }

    fn event(&self, e: Event, calls: &mut HashMap<String, CallSeen>) {
        match e {
            Event::UserInput { text, origin } => self.user_input(text, origin),
            Event::TextDelta { text } => self.update(SessionUpdate::AgentMessageChunk(
                ContentChunk::new(text_block(text)),
            )),
            Event::ReasoningDelta { text } => self.update(SessionUpdate::AgentThoughtChunk(
                ContentChunk::new(text_block(text)),
            )),
            Event::ToolCallStarted { call, block, .. } => self.call_started(call, block, calls),
            Event::SubagentCall {
                task_call_id,
                job_id,
                call,
                block,
                status,
            } => self.subagent_call(task_call_id, job_id, call, block, status),
            Event::ToolCallAsked { call_id, question } => {
                let seen = calls.get(&call_id);
                self.ask(call_id, &question, seen);
            }
            Event::ToolCallAnswered { call_id, answer } => {
                if matches!(answer, Answer::Once | Answer::Always) {
                    self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        call_id,
                        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
                    )));
                }
            }
            Event::ToolCallFinished { result } => {
                let seen = calls.remove(&result.call_id);
                self.call_finished(&result, seen);
            }
            Event::PlanChanged { plan } => self.plan_changed(plan),
            Event::ModeChanged { mode } => self.mode_changed(mode),
            Event::Notice { level, text } => {
                // While a prompt runs or waits to start (a model request retried after a 429, a
                // wait for the server's slot, the prompt's images left out for a model that reads
                // none), the client hears it as progress: a thought, marked a notice.
                let prompting = self.running.lock().map(|r| *r).unwrap_or(false)
                    || self.pending.lock().map(|p| p.is_some()).unwrap_or(false);
                if prompting {
                    let chunk = ContentChunk::new(text_block(format!("{text}\n")))
                        .meta(meta(json!({"notice": level})));
                    self.update(SessionUpdate::AgentThoughtChunk(chunk));
                }
                self.host.notice(&text);
            }
            Event::JobStarted {
                job_id,
                kind,
                title,
            } => {
                let object = json!({
                    "id": job_id, "kind": kind, "state": "running", "title": title,
                    "started": iso_now(),
                });
                self.job_changed(&job_id, object);
            }
            Event::JobEnded { job_id, end } => self.job_ended(&job_id, end),
            Event::JobNote { job_id, text } if self.jobs_cap => {
                let _ = self.cx.send_notification(JobNoteNotification(json!({
                    "sessionId": self.session, "jobId": job_id, "note": "report", "text": text,
                })));
            }
            // A message for a job, the model's or the person's: sent, restarted or dropped.
            Event::JobMessage {
                job_id,
                text,
                delivery,
            } if self.jobs_cap => {
                let _ = self.cx.send_notification(JobNoteNotification(json!({
                    "sessionId": self.session, "jobId": job_id, "note": delivery, "text": text,
                })));
            }
            Event::TurnEnded { reason } => self.turn_ended(reason),
            _ => {}
        }
    }

    /// A turn's input: the prompt runs; a machine turn the client did not prompt is announced
    /// (`_lembas/machine_prompt`, when the client takes jobs) or its text sent as the user's.
    fn user_input(&self, text: String, origin: Origin) {
        if let Ok(mut r) = self.running.lock() {
            *r = true;
        }
        let prompted = self.pending.lock().map(|p| p.is_some()).unwrap_or(false);
        if origin == Origin::Machine && !prompted {
            // A machine turn: announced, then streamed like any prompt.
            if self.jobs_cap {
                let n = MACHINE_TURNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                let pid = format!("m_{n}");
                if let Ok(mut m) = self.machine.lock() {
                    *m = Some(pid.clone());
                }
                let _ = self.cx.send_notification(MachinePrompt(json!({
                    "sessionId": self.session, "prompt": pid, "machine": true,
                    "content": [{"type": "text", "text": text}],
                })));
            }
        } else if origin == Origin::Machine {
            let chunk = ContentChunk::new(text_block(text)).meta(meta(json!({"machine": true})));
            self.update(SessionUpdate::UserMessageChunk(chunk));
        }
    }

    /// A call starts: kept while it runs, and sent pending with its title, kind, input,
    /// locations and (in its meta) tool, block, risk and library scope.
    fn call_started(
        &self,
        call: harness_core::protocol::ToolCall,
        block: Block,
        calls: &mut HashMap<String, CallSeen>,
    ) {
        let tool = harness_spec::Spec::embedded().tool(&call.name);
        let risk = tool.map(|t| t.risk);
        let title = harness_agent::title::call_title(&call.name, block, &call.arguments);
        calls.insert(
            call.id.clone(),
            CallSeen {
                name: call.name.clone(),
                block,
                title: title.clone(),
                arguments: call.arguments.clone(),
                diffs: Vec::new(),
            },
        );
        let mut lembas = json!({"tool": call.name, "block": block});
        if let Some(r) = risk {
            lembas["risk"] = json!(r);
        }
        let scoped =
            harness_core::library::scope_call(&call.name, &call.arguments, self.scope.as_ref());
        if let Some(s) = scoped.scope {
            lembas["scope"] = s;
        }
        let mut c = AcpCall::new(call.id.clone(), title)
            .kind(kind_of(block, risk))
            .status(ToolCallStatus::Pending)
            .raw_input(call.arguments.clone())
            .meta(meta(lembas));
        if let Some(l) = call_locations(&call.arguments, &self.cwd) {
            c = c.locations(l);
        }
        self.update(SessionUpdate::ToolCall(c));
    }

    /// A question about a call, as `session/request_permission` (the call as the client drew
    /// it, the change as diffs); the client's choice goes back as the answer, anything but
    /// "once" or "always" (an error, a dropped link) as a denial.
    fn ask(&self, call_id: String, question: &PermissionQuestion, seen: Option<&CallSeen>) {
        let block = seen.map(|c| c.block).unwrap_or(Block::Tool);
        // The call as the client drew it: its title and its input.
        let mut fields = ToolCallUpdateFields::new()
            .title(
                seen.map(|c| c.title.clone())
                    .unwrap_or_else(|| question.subject.clone()),
            )
            .kind(kind_of(block, Some(question.risk)))
            .status(ToolCallStatus::Pending);
        if let Some(c) = seen {
            fields = fields.raw_input(c.arguments.clone());
            if let Some(l) = call_locations(&c.arguments, &self.cwd) {
                fields = fields.locations(l);
            }
        }
        // The change to review as ACP's own diff content, as a plain client (Zed) draws
        // it: on the call before the question, and on the question's call.
        let diffs = question
            .change
            .as_deref()
            .map(|c| crate::map::diffs_in(c, &self.cwd))
            .unwrap_or_default();
        if !diffs.is_empty() {
            let content: Vec<ToolCallContent> =
                diffs.into_iter().map(ToolCallContent::from).collect();
            self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                call_id.clone(),
                ToolCallUpdateFields::new().content(content.clone()),
            )));
            fields = fields.content(content);
        }
        let request = RequestPermissionRequest::new(
            self.session.clone(),
            ToolCallUpdate::new(call_id.clone(), fields),
            permission_options(question),
        )
        .meta(meta(self.ask_meta(question)));
        let cx = self.cx.clone();
        let ops = self.ops.clone();
        let _ = self.cx.spawn(async move {
            let answer = match cx.send_request(request).block_task().await {
                Ok(r) => {
                    // A refusal may carry what the person said instead (`_meta.lembas.note`),
                    // which the model reads as a local refusal's note.
                    let note = r
                        .meta
                        .as_ref()
                        .and_then(|m| m.get("lembas"))
                        .and_then(|l| l.get("note"))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    match r.outcome {
                        RequestPermissionOutcome::Selected(s) => {
                            match s.option_id.to_string().as_str() {
                                "once" => Answer::Once,
                                "always" => Answer::Always,
                                _ => Answer::Deny { feedback: note },
                            }
                        }
                        _ => Answer::Deny { feedback: None },
                    }
                }
                Err(_) => Answer::Deny { feedback: None },
            };
            ops.submit(Op::Answer { call_id, answer });
            Ok(())
        });
    }

    /// A question's `_meta.lembas`: the tool, its risk, the mode, the "always" pattern (or
    /// that "always" is confirmed), the subject, the reason and the change.
    fn ask_meta(&self, question: &PermissionQuestion) -> Value {
        let mut lembas = json!({
            "tool": question.tool,
            "risk": question.risk,
            "mode": self.mode.lock().map(|m| m.as_str()).unwrap_or("manual"),
        });
        match &question.pattern {
            Some(p) => lembas["always"] = json!(p),
            None => lembas["confirm"] = json!("always"),
        }
        lembas["subject"] = json!(question.subject);
        if let Some(r) = &question.reason {
            lembas["reason"] = json!(r);
        }
        if let Some(c) = &question.change {
            lembas["change"] = json!(c);
        }
        lembas
    }

    /// A call ends: completed or failed, an edit with its diffs, anything else with its
    /// result's text (the result id, tool and block in the meta).
    fn call_finished(&self, result: &ToolResult, seen: Option<CallSeen>) {
        let status = if result.is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        // An edit keeps its diffs as its content; anything else shows its result.
        let content = match &seen {
            Some(c) if !c.diffs.is_empty() && !result.is_error => {
                c.diffs.iter().cloned().map(ToolCallContent::from).collect()
            }
            // The result id is in the meta; the text is the result's own.
            _ => vec![ToolCallContent::from(text_block(result.body()))],
        };
        let fields = ToolCallUpdateFields::new().status(status).content(content);
        let mut lembas = json!({"result": result.result_id});
        if let Some(c) = &seen {
            lembas["tool"] = json!(c.name);
            lembas["block"] = json!(c.block);
        }
        self.update(SessionUpdate::ToolCallUpdate(
            ToolCallUpdate::new(result.call_id.clone(), fields).meta(meta(lembas)),
        ));
    }

    /// The plan: whole as `_lembas/plan_state` to a client that takes it, else ACP's plan of
    /// its tasks (doing in progress, done or dropped completed).
    fn plan_changed(&self, plan: Option<Plan>) {
        if self.plan_state {
            let _ = self.cx.send_notification(PlanStateNotification {
                session_id: self.session.clone(),
                plan: serde_json::to_value(&plan).unwrap_or(Value::Null),
            });
            return;
        }
        let entries = plan
            .iter()
            .flat_map(|p| &p.phases)
            .flat_map(|ph| &ph.tasks)
            .map(|t| {
                let status = match t.status {
                    TaskStatus::Doing => PlanEntryStatus::InProgress,
                    TaskStatus::Done | TaskStatus::Dropped => PlanEntryStatus::Completed,
                    TaskStatus::Todo => PlanEntryStatus::Pending,
                };
                PlanEntry::new(t.title.as_str(), PlanEntryPriority::Medium, status)
            })
            .collect();
        self.update(SessionUpdate::Plan(AcpPlan::new(entries)));
    }

    /// The mode changed: told unless already told (a `/mode` prompt tells its own).
    fn mode_changed(&self, mode: Mode) {
        let known = self
            .mode
            .lock()
            .map(|mut m| std::mem::replace(&mut *m, mode) == mode)
            .unwrap_or(false);
        if known {
            return;
        }
        self.update(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
            mode.as_str(),
        )));
    }

    /// A job ended: its object done (exit code 0 or none), stopped or failed, with its end
    /// time and exit code.
    fn job_ended(&self, job_id: &str, end: JobEnd) {
        let mut object = self
            .jobs
            .lock()
            .ok()
            .and_then(|t| {
                job_id
                    .parse::<u32>()
                    .ok()
                    .and_then(|id| t.get(&id).cloned())
            })
            .unwrap_or_else(|| json!({"id": job_id}));
        let state = match &end {
            JobEnd::Done { exit_code } if exit_code.is_none_or(|c| c == 0) => "done",
            JobEnd::Stopped => "stopped",
            _ => "failed",
        };
        object["state"] = json!(state);
        object["ended"] = json!(iso_now());
        if let JobEnd::Done { exit_code: Some(c) } = end {
            object["exit_code"] = json!(c);
        }
        self.job_changed(job_id, object);
    }

    /// A turn ended: the prompt waiting on it is answered with its stop reason (an error for a
    /// failed model link or a failed turn), a machine turn's end is told.
    fn turn_ended(&self, reason: TurnEnd) {
        if let Ok(mut r) = self.running.lock() {
            *r = false;
        }
        let responder = self.pending.lock().ok().and_then(|mut p| p.take());
        if responder.is_none()
            && let Some(pid) = self.machine.lock().ok().and_then(|mut m| m.take())
        {
            let stop = harness_agent::stop_reason(&reason).unwrap_or("refusal");
            let _ = self.cx.send_notification(MachinePromptEnd(json!({
                "sessionId": self.session, "prompt": pid, "stopReason": stop,
            })));
        }
        let Some(responder) = responder else {
            return;
        };
        // The model link failed: `spec/acp.md` §5's -32042, by the end's kind.
        if let TurnEnd::ModelUnavailable { message } = &reason {
            let _ = responder.respond_with_error(model_unavailable(message));
            return;
        }
        let _ = match harness_agent::stop_reason(&reason) {
            Ok(stop) => responder.respond(PromptResponse::new(acp_stop(stop))),
            Err(message) => responder.respond_with_error(
                agent_client_protocol::Error::internal_error().data(json!(message)),
            ),
        };
    }
}

/// The options a question offers: once, always (with its pattern) when there is one, refuse.
fn permission_options(question: &PermissionQuestion) -> Vec<PermissionOption> {
    let mut options = vec![PermissionOption::new(
        "once",
        "Allow once",
        PermissionOptionKind::AllowOnce,
    )];
    if let Some(p) = &question.pattern {
        options.push(PermissionOption::new(
            "always",
            format!("Always allow {}", p.replace('\n', ", ")),
            PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(PermissionOption::new(
        "no",
        "Refuse",
        PermissionOptionKind::RejectOnce,
    ));
    options
}

/// The error a prompt answers when the model link failed mid-session (`spec/acp.md` §5:
/// `-32042`, never a fallback to another model).
fn model_unavailable(message: &str) -> agent_client_protocol::Error {
    crate::ext::lembas_error(
        -32042,
        format!("Model unavailable: {message}"),
        "model_unavailable",
    )
}
