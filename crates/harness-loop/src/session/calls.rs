//! A step's tool calls: planned (checked, asked, batched), run side by side where safe, their
//! results put back in the order the model made them, or cancelled.

use harness_core::protocol::{Answer, Event, JobKind, Origin, ToolCall, ToolResult, TurnEnd};
use serde_json::Value;

use super::{Action, Decision, Message, Pending, Phase, Session, Slot, ToolOutcome};
use crate::config::fill;
use crate::context::{Insert, InsertKind, ReadInfo, canonical_args};
use crate::jobs::JobDecision;
use crate::transcript::Entry;

impl Session {
    pub(super) fn plan_calls(&mut self, calls: Vec<ToolCall>) -> Vec<Action> {
        let mut declined = Vec::new();
        let mut p = Pending {
            slots: vec![None; calls.len()],
            ..Pending::default()
        };
        for (i, call) in calls.iter().enumerate() {
            let key = format!("{}\0{}", call.name, canonical_args(&call.arguments));
            let count = match &self.last_call {
                Some((k, n, _)) if *k == key => n + 1,
                _ => 1,
            };
            let last_ref = match &self.last_call {
                Some((k, _, r)) if *k == key => r.clone(),
                _ => String::new(),
            };
            self.last_call = Some((key, count, last_ref.clone()));
            let rc = &self.cfg.nudges.repeated_call;
            if count >= rc.threshold {
                let text = fill(
                    &rc.text,
                    &[
                        ("count", &count.to_string()),
                        ("tool", &call.name),
                        ("ref", &last_ref),
                    ],
                );
                p.slots[i] = Some(Slot::Done(Insert::error(
                    call.name.clone(),
                    call.arguments.clone(),
                    text,
                )));
                if count >= rc.end_after {
                    p.end_after = Some(TurnEnd::Error {
                        message: fill(
                            &self.cfg.calls.repeated_turn_end,
                            &[("count", &count.to_string())],
                        ),
                    });
                }
                continue;
            }
            if self.catalog.traits(&call.name).is_none() {
                let text = fill(&self.cfg.calls.unknown_tool, &[("tool", &call.name)]);
                p.slots[i] = Some(Slot::Done(Insert::error(
                    call.name.clone(),
                    call.arguments.clone(),
                    text,
                )));
                continue;
            }
            let decision = match self.permissions.decide(call) {
                // Asked last: a call that cannot run is answered with why, the person not asked.
                Decision::Ask(question) => match self.permissions.check(call, &calls[..i]) {
                    Some(text) => {
                        p.slots[i] = Some(Slot::Done(Insert::error(
                            call.name.clone(),
                            call.arguments.clone(),
                            text,
                        )));
                        continue;
                    }
                    None => Decision::Ask(question),
                },
                other => other,
            };
            match decision {
                Decision::Allow => p.allowed.push(i),
                Decision::Deny { reason } => {
                    let text = fill(&self.cfg.calls.denied, &[("reason", &reason)]);
                    p.slots[i] = Some(Slot::Done(Insert::error(
                        call.name.clone(),
                        call.arguments.clone(),
                        text,
                    )));
                }
                // Nobody answers a subagent's questions: the call is declined with the
                // spec's text, and the person is told.
                Decision::Ask(question) if self.subagent => {
                    let subject = [("subject", question.subject.as_str())];
                    let text = fill(self.cfg.job_error("subagent_asks"), &subject);
                    declined.push(Action::Emit(Event::Notice {
                        level: harness_core::protocol::Level::Warning,
                        text: fill(self.cfg.job_text("subagent_declined"), &subject),
                    }));
                    p.slots[i] = Some(Slot::Done(Insert::error(
                        call.name.clone(),
                        call.arguments.clone(),
                        text,
                    )));
                }
                Decision::Ask(question) => {
                    p.slots[i] = Some(Slot::Waiting);
                    p.questions.push_back((i, question));
                }
            }
        }
        p.calls = calls;
        self.pending = p;
        declined.extend(self.ask_next());
        declined
    }

    pub(super) fn ask_next(&mut self) -> Vec<Action> {
        if let Some((i, question)) = self.pending.questions.pop_front() {
            self.pending.asking = Some(i);
            self.phase = Phase::Asking;
            let call_id = self.pending.calls[i].id.clone();
            return vec![
                Action::Emit(Event::ToolCallAsked {
                    call_id: call_id.clone(),
                    question: question.clone(),
                }),
                Action::Ask { call_id, question },
            ];
        }
        self.pending.asking = None;
        self.dispatch()
    }

    pub(super) fn on_answer(&mut self, call_id: &str, answer: Answer) -> Vec<Action> {
        let Some(i) = self.pending.asking else {
            return Vec::new();
        };
        let call = self.pending.calls[i].clone();
        if call.id != call_id {
            // An answer to another question: ignored, the question stands.
            return Vec::new();
        }
        let mut actions = vec![Action::Emit(Event::ToolCallAnswered {
            call_id: call_id.to_string(),
            answer: answer.clone(),
        })];
        match answer {
            Answer::Deny { feedback } => {
                let text = match feedback.filter(|f| !f.trim().is_empty()) {
                    Some(f) => fill(&self.cfg.calls.declined_feedback, &[("feedback", &f)]),
                    None => self.cfg.calls.declined.clone(),
                };
                self.pending.slots[i] =
                    Some(Slot::Done(Insert::error(call.name, call.arguments, text)));
            }
            _ => {
                self.pending.slots[i] = None;
                self.pending.allowed.push(i);
                self.pending.allowed.sort_unstable();
            }
        }
        actions.extend(self.ask_next());
        actions
    }

    /// Calls the loop answers itself (recall, the job tools, report, background starts), then
    /// the batches the front end runs.
    pub(super) fn dispatch(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        let allowed = std::mem::take(&mut self.pending.allowed);
        let mut front: Vec<usize> = Vec::new();
        for i in allowed {
            let call = self.pending.calls[i].clone();
            let background = call
                .arguments
                .get("background")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if call.name == "recall" {
                self.pending.slots[i] = Some(Slot::Recall(call.arguments.clone()));
            } else if call.name == "report" {
                let text = call
                    .arguments
                    .get("message")
                    .or_else(|| call.arguments.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let insert = if self.subagent {
                    actions.push(Action::ReportToParent { text });
                    Insert::new(
                        "report",
                        call.arguments.clone(),
                        self.cfg.job_text("report_delivered"),
                    )
                } else {
                    Insert::error(
                        "report",
                        call.arguments.clone(),
                        self.cfg.job_error("report_from_main"),
                    )
                };
                self.pending.slots[i] = Some(Slot::Done(insert));
            } else if background && (call.name == "bash" || call.name == "task") {
                let kind = if call.name == "bash" {
                    JobKind::Command
                } else {
                    JobKind::Subagent
                };
                let title = job_title(&call);
                let decision = self.jobs.start(kind, &title);
                if let JobDecision::Start { id, .. } = decision {
                    self.log.push(Entry::JobStarted {
                        id,
                        kind,
                        title: title.clone(),
                    });
                    actions.push(Action::Emit(Event::JobStarted {
                        job_id: id.to_string(),
                        kind,
                        title,
                    }));
                    actions.push(Action::StartJob {
                        id,
                        kind,
                        call: call.clone(),
                    });
                }
                self.pending.slots[i] = Some(Slot::Done(decision_insert(&call, &decision)));
            } else if let Some(decision) = self.jobs.tool(&call.name, &call.arguments) {
                match &decision {
                    JobDecision::Stop { id, .. } => actions.push(Action::StopJob { id: *id }),
                    JobDecision::Deliver { id, message, .. } => {
                        actions.push(Action::DeliverToJob {
                            id: *id,
                            message: message.clone(),
                        })
                    }
                    JobDecision::Restart { id, message, .. } => actions.push(Action::RestartJob {
                        id: *id,
                        message: message.clone(),
                    }),
                    _ => {}
                }
                self.pending.slots[i] = Some(Slot::Done(decision_insert(&call, &decision)));
            } else {
                front.push(i);
            }
        }
        self.pending.batches = self.batches(&front).into();
        actions.extend(self.run_next_batch());
        actions
    }

    pub(super) fn parallel_safe(&self, call: &ToolCall) -> bool {
        let par = &self.cfg.parallel;
        if !par.enabled {
            return false;
        }
        let Some(t) = self.catalog.traits(&call.name) else {
            return false;
        };
        if t.exclusive && par.exclusive_alone {
            return false;
        }
        par.risks.iter().any(|r| r == t.risk.as_str())
    }

    /// Groups calls in call order: consecutive parallel-safe calls (up to `max_batch`) run side
    /// by side; every other call runs alone.
    pub(super) fn batches(&self, indices: &[usize]) -> Vec<(Vec<usize>, bool)> {
        let mut out: Vec<(Vec<usize>, bool)> = Vec::new();
        for &i in indices {
            let safe = self.parallel_safe(&self.pending.calls[i]);
            match out.last_mut() {
                Some((group, true)) if safe && group.len() < self.cfg.parallel.max_batch => {
                    group.push(i)
                }
                _ => out.push((vec![i], safe)),
            }
        }
        out.into_iter()
            .map(|(g, safe)| {
                let parallel = safe && g.len() > 1;
                (g, parallel)
            })
            .collect()
    }

    pub(super) fn run_next_batch(&mut self) -> Vec<Action> {
        if let Some((group, parallel)) = self.pending.batches.pop_front() {
            for &i in &group {
                self.pending.slots[i] = Some(Slot::Waiting);
            }
            self.pending.running = group.clone();
            self.phase = Phase::Tools;
            let calls: Vec<ToolCall> = group
                .iter()
                .map(|&i| self.pending.calls[i].clone())
                .collect();
            self.log.push(Entry::CallsStarted {
                call_ids: calls.iter().map(|c| c.id.clone()).collect(),
            });
            return vec![Action::RunTools { calls, parallel }];
        }
        self.finish_calls()
    }

    pub(super) fn on_results(&mut self, results: Vec<ToolOutcome>) -> Vec<Action> {
        self.take_results(&results, false);
        self.run_next_batch()
    }

    /// Puts the running calls' results in their slots; a call without one gets `no_result`,
    /// or stays empty when `only_found` (a stop: it is answered `cancelled`).
    pub(super) fn take_results(&mut self, results: &[ToolOutcome], only_found: bool) {
        let running = std::mem::take(&mut self.pending.running);
        for i in running {
            let call = self.pending.calls[i].clone();
            let outcome = results.iter().find(|r| r.call_id == call.id);
            let insert = match outcome {
                None if only_found => continue,
                None => Insert::error(
                    call.name.clone(),
                    call.arguments.clone(),
                    self.cfg.calls.no_result.clone(),
                ),
                Some(o) => {
                    let output = match &o.edit {
                        Some(e) if !o.is_error => {
                            self.context.edit_diff(&e.path, &e.before, &e.after)
                        }
                        _ => o.output.clone(),
                    };
                    Insert {
                        tool: call.name.clone(),
                        args: self.cfg.context.kept.value(&call.arguments),
                        output,
                        is_error: o.is_error,
                        read: o.read.clone(),
                    }
                }
            };
            self.pending.slots[i] = Some(Slot::Done(insert));
        }
    }

    /// Every call has its result: insert them in call order, then the next step.
    pub(super) fn finish_calls(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        let calls = std::mem::take(&mut self.pending.calls);
        let slots = std::mem::take(&mut self.pending.slots);
        let missing = self.cfg.calls.no_result.clone();
        for (call, slot) in calls.iter().zip(slots) {
            let (inserted, read) = self.insert_slot(call, slot, &missing);
            actions.extend(self.record_result(call, inserted, read));
        }
        if let Some(reason) = self.pending.end_after.take() {
            actions.extend(self.end(reason));
            return actions;
        }
        if let Some(note) = self.turn.as_mut().and_then(|t| t.note.take()) {
            self.push_user(note, Origin::Machine);
        }
        actions.extend(self.next_call());
        actions
    }

    /// Inserts one call's result; a call with none gets `missing` as an error.
    pub(super) fn insert_slot(
        &mut self,
        call: &ToolCall,
        slot: Option<Slot>,
        missing: &str,
    ) -> (crate::context::Inserted, Option<ReadInfo>) {
        match slot {
            Some(Slot::Recall(args)) => (self.context.recall(args), None),
            Some(Slot::Done(insert)) => {
                let read = insert.read.clone();
                (self.context.insert(insert), read)
            }
            Some(Slot::Waiting) | None => (
                self.context.insert(Insert::error(
                    call.name.clone(),
                    call.arguments.clone(),
                    missing,
                )),
                None,
            ),
        }
    }

    pub(super) fn record_result(
        &mut self,
        call: &ToolCall,
        inserted: crate::context::Inserted,
        read: Option<ReadInfo>,
    ) -> Vec<Action> {
        // The repeated-call nudge names the last result a run of the same call produced (an
        // error too), never a nudge of its own.
        let this = format!("{}\0{}", call.name, canonical_args(&call.arguments));
        let threshold = self.cfg.nudges.repeated_call.threshold;
        if let Some((key, count, r)) = self.last_call.as_mut()
            && *key == this
            && *count < threshold
        {
            *r = inserted.id.to_string();
        }
        let stored = self.context.stored(inserted.id.as_str());
        self.log.push(Entry::ToolResult {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            result_id: inserted.id.clone(),
            output: stored.map(|s| s.output.clone()).unwrap_or_default(),
            text: inserted.text.clone(),
            kind: inserted.kind.clone(),
            args: self.cfg.context.kept.value(&call.arguments),
            read,
        });
        self.history.push(Message::Tool {
            call_id: call.id.clone(),
            text: inserted.text.clone(),
        });
        let label = inserted
            .text
            .strip_suffix(inserted.body.as_str())
            .map(|l| l.trim_end_matches('\n').to_owned())
            .unwrap_or_default();
        vec![Action::Emit(Event::ToolCallFinished {
            result: ToolResult {
                call_id: call.id.clone(),
                result_id: inserted.id,
                content: inserted.text,
                label,
                is_error: inserted.kind == InsertKind::Error,
            },
        })]
    }

    pub(super) fn cancel(&mut self, shown: String, results: Vec<ToolOutcome>) -> Vec<Action> {
        if self.phase == Phase::Idle {
            return Vec::new();
        }
        let mut actions = Vec::new();
        if self.phase == Phase::Model && !shown.trim().is_empty() {
            // What the person saw of the answer stays what the model said.
            self.push_assistant(shown, String::new(), Vec::new());
        }
        self.take_results(&results, true);
        if !self.pending.calls.is_empty() {
            let calls = std::mem::take(&mut self.pending.calls);
            let slots = std::mem::take(&mut self.pending.slots);
            let missing = self.cfg.calls.cancelled.clone();
            for (call, slot) in calls.iter().zip(slots) {
                let (inserted, read) = self.insert_slot(call, slot, &missing);
                actions.extend(self.record_result(call, inserted, read));
            }
        }
        // The model is told the turn was stopped, so it neither carries on with it nor takes
        // its request up again as a new one (the person's next prompt says what they want).
        self.push_user(self.cfg.calls.stopped_turn.clone(), Origin::Machine);
        actions.extend(self.end(TurnEnd::Cancelled));
        actions
    }
}

fn job_title(call: &ToolCall) -> String {
    let a = &call.arguments;
    let raw = a
        .get("description")
        .or_else(|| a.get("command"))
        .or_else(|| a.get("prompt"))
        .and_then(Value::as_str)
        .unwrap_or(&call.name);
    let line = raw.lines().next().unwrap_or_default();
    if line.chars().count() > 80 {
        let cut: String = line.chars().take(79).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

fn decision_insert(call: &ToolCall, d: &JobDecision) -> Insert {
    if d.is_error() {
        Insert::error(call.name.clone(), call.arguments.clone(), d.text())
    } else {
        Insert::new(call.name.clone(), call.arguments.clone(), d.text())
    }
}
