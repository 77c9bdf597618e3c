//! What the front end sends while the session runs: its ops, its answers and its questions
//! (the job verbs, a rewind, the terminal's queries, a mode change).

use super::*;

impl Driver {
    /// What the front end sent while the driver waits on something (or is idle and it is not a
    /// prompt): an answer to a permission question comes back, the rest is done here.
    pub(super) fn op_while_busy(&mut self, ctl: Ctl) -> Option<(String, Answer)> {
        match ctl {
            Ctl::Op(op) => self.op(op),
            asked => {
                self.answer_ctl(asked);
                None
            }
        }
    }

    /// An op: a permission answer comes back, the rest is done.
    fn op(&mut self, op: Op) -> Option<(String, Answer)> {
        match op {
            Op::Answer { call_id, answer } => return Some((call_id, answer)),
            Op::Reply { call_id, text } => self.reply = Some((call_id, text)),
            Op::Message { text } => {
                match self.session.handle(Input::Message { text }) {
                    Ok(actions) => {
                        for a in actions {
                            if let Action::Emit(e) = a {
                                self.emit(e);
                            }
                        }
                    }
                    Err(e) => self.notice(Level::Warning, e.to_string()),
                }
                let _ = self.flush_log();
            }
            Op::Prompt { text, images, .. } => self.queued_prompts.push_back((text, images)),
            Op::Cancel => {
                if self.session.busy() || self.compacting {
                    self.cancelled = true;
                    self.cancel.cancel();
                }
            }
            Op::SetMode { mode } => self.set_mode(mode),
            // Only an idle session runs the person's command.
            Op::Shell { command } => {
                let _ = self.out.send(Event::ShellEnded {
                    call_id: String::new(),
                    command,
                    end: crate::protocol::ShellEnd::Refused {
                        reason: "a prompt is running: run it after".into(),
                    },
                });
            }
        }
        None
    }

    /// A question of the front end, answered on its channel.
    fn answer_ctl(&mut self, ctl: Ctl) {
        match ctl {
            Ctl::Op(op) => {
                let _ = self.op(op);
            }
            Ctl::JobOutput(id, offset, reply) => {
                let r = self.session.jobs().get(id).map(|j| {
                    let text: String = j
                        .output
                        .chars()
                        .skip(offset.saturating_sub(j.dropped_chars))
                        .collect();
                    (j.clone(), text)
                });
                let _ = reply.send(r);
            }
            Ctl::SendJob(id, message, reply) => {
                let _ = reply.send(self.send_job(id, message));
            }
            Ctl::JobTranscript(id, reply) => {
                let r = self.session.jobs().get(id).cloned().map(|job| {
                    let entries = self
                        .subagent_sessions
                        .get(&id)
                        .and_then(|(_, session)| self.store.load(session).ok());
                    (job, entries)
                });
                let _ = reply.send(r);
            }
            Ctl::StopJob(id, reply) => {
                let args = serde_json::json!({"id": id});
                let r = match self.session.jobs_mut().tool("job_stop", &args) {
                    Some(harness_loop::jobs::JobDecision::Stop { .. }) => {
                        self.stop_job(id);
                        Ok(())
                    }
                    Some(d) => Err(d.text().to_owned()),
                    None => Err(format!("no job {id}")),
                };
                let _ = reply.send(r);
            }
            Ctl::Keep(turns, reply) => {
                let r = self.keep(turns);
                let _ = self.flush_log();
                let _ = reply.send(r);
            }
            Ctl::Query(q, reply) => {
                let text = self.query(q);
                let _ = self.flush_log();
                let _ = reply.send(text);
            }
            Ctl::SetMode(mode, reply) => {
                self.set_mode(mode);
                let _ = reply.send(self.perms.mode());
            }
            Ctl::Jobs(reply) => {
                let _ = reply.send(self.jobs());
            }
        }
    }

    /// The person's `job_send`, by the same rules as the model's call (`None`: no such job).
    fn send_job(&mut self, id: u32, message: String) -> Option<std::result::Result<bool, String>> {
        self.session.jobs().get(id)?;
        let args = serde_json::json!({"id": id, "message": message});
        Some(match self.session.jobs_mut().tool("job_send", &args) {
            Some(harness_loop::jobs::JobDecision::Deliver { id, message, .. }) => {
                match self.deliver_to_job(id, message, false) {
                    JobDelivery::Dropped => Err(format!(
                        "job {id}'s subagent is gone: the message was dropped"
                    )),
                    _ => Ok(true),
                }
            }
            Some(harness_loop::jobs::JobDecision::Restart { id, message, .. }) => {
                self.deliver_to_job(id, message, true);
                Ok(false)
            }
            Some(d) => Err(d.text().to_owned()),
            None => Err(format!("no job {id}")),
        })
    }

    /// Keeps `turns` turns and drops the rest from what the model sees.
    fn keep(&mut self, turns: u32) -> std::result::Result<u32, String> {
        let have = self.session.turns();
        if self.session.busy() {
            Err("a prompt is running: cancel it first".to_owned())
        } else if turns > have {
            Err(format!("the session has {have} turns, not {turns}"))
        } else if turns == have {
            Ok(turns)
        } else {
            self.session
                .rewind(turns + 1)
                .map(|()| turns)
                .map_err(|e| e.to_string())
        }
    }

    pub(super) fn query(&mut self, q: Query) -> String {
        match q {
            // Reached only while a prompt runs (an idle session compacts in `run`).
            Query::Compact => "a prompt is running: compact after it".into(),
            Query::Jobs => match self
                .session
                .jobs_mut()
                .tool("job_list", &serde_json::json!({}))
            {
                Some(d) => d.text().to_owned(),
                None => "no jobs".to_owned(),
            },
            Query::Plan => match self.plan.lock().ok().and_then(|p| p.plan.clone()) {
                Some(p) => p.render(),
                None => "no plan yet".to_owned(),
            },
            Query::Recall(id) => match self.session.context().stored(&id) {
                Some(s) => s.output.clone(),
                None => format!("no stored result {id}"),
            },
            Query::Rewind(0) => format!(
                "{} turns; /rewind N goes back to before turn N",
                self.session.turns()
            ),
            Query::Rewind(n) => match self.session.rewind(n) {
                Ok(()) => crate::checkpoint::chat_rewound(n),
                Err(e) => e.to_string(),
            },
            Query::Model(Some(name)) => {
                if self.session.busy() {
                    return "a prompt is running: switch the model after it".into();
                }
                match self.client.with_model(&name) {
                    Ok(c) => {
                        self.client = c;
                        self.model_name = name.clone();
                        self.values.insert("model".into(), name.clone());
                        format!("model: {name}")
                    }
                    Err(e) => e.to_string(),
                }
            }
            Query::Model(None) => self.client.describe(),
        }
    }

    /// Changes the permission mode (and what is offered with it).
    pub(crate) fn set_mode(&mut self, mode: Mode) {
        self.perms.set_mode(mode);
        self.offer_again();
        // Kept with the session, so that resuming it restores the mode.
        if self.meta.mode != Some(mode) {
            self.meta.mode = Some(mode);
            if let Err(e) = self.store.save(&self.meta) {
                self.notice(Level::Warning, format!("the mode was not saved: {e}"));
            }
        }
        self.emit(CoreEvent::ModeChanged { mode });
    }
}
