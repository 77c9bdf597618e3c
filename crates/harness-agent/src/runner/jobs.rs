//! The job supervisor: background commands and subagents started, watched, stopped and
//! started again, their news fed to the session.

use super::*;
use harness_core::protocol::{Block, SubagentCallStatus};

/// A running subagent: its final reply, or why it failed.
pub(super) type SubagentRun = tokio::task::JoinHandle<std::result::Result<String, String>>;

/// A subagent started: its control channel, its run, its session's id.
pub(super) type Launched = (mpsc::UnboundedSender<Ctl>, SubagentRun, String);

/// What a subagent runs for: a `task` call in the foreground (its id), or a background job.
#[derive(Debug, Clone)]
pub(super) enum Owner {
    /// The `task` call waiting for it.
    Task(String),
    /// The job it is.
    Job(u32),
}

/// What a job's watcher reports.
#[derive(Debug)]
pub(crate) enum JobMsg {
    /// New output of a command job.
    Output {
        /// The job.
        id: u32,
        /// The output.
        text: String,
    },
    /// A command job ended.
    Ended {
        /// The job.
        id: u32,
        /// How.
        exit: Exit,
    },
    /// A subagent job said something with `report`.
    Report {
        /// The job.
        id: u32,
        /// What.
        text: String,
    },
    /// A subagent job ended: its final reply, or why it failed.
    SubagentEnded {
        /// The job.
        id: u32,
        /// The reply or the failure.
        reply: std::result::Result<String, String>,
    },
}

impl Driver {
    /// Jobs still running.
    pub(crate) fn running_jobs(&self) -> usize {
        self.jobs.len() + self.subagents.len()
    }

    /// With [`Driver::run`] until idle, the jobs still running `wait` after a turn ended are
    /// stopped and the run ends (a one-shot run ends with its turn, not with its jobs; their
    /// ends wake the session in that time as usual).
    pub(crate) fn wait_for_jobs_at_most(&mut self, wait: std::time::Duration) {
        self.job_wait = Some(wait);
    }

    /// The jobs waited for long enough: each is stopped, recorded as stopped (its wake-up kept
    /// for a later turn), and the person told.
    pub(super) async fn stop_waited_jobs(&mut self) -> Result<()> {
        let seconds = self.job_wait.map_or(0, |w| w.as_secs());
        for id in self.session.jobs().running_ids() {
            let title = self
                .session
                .jobs()
                .get(id)
                .map(|j| j.title.clone())
                .unwrap_or_default();
            let text = harness_loop::config::fill(
                LoopConfig::embedded()?.job_text("oneshot_stopped"),
                &[
                    ("id", &id.to_string()),
                    ("title", &title),
                    ("seconds", &seconds.to_string()),
                ],
            );
            self.notice(Level::Warning, text);
        }
        for child in self.subagents.values() {
            let _ = child.send(Ctl::Op(Op::Cancel));
        }
        self.shutdown().await;
        for event in self.session.end_running_jobs() {
            self.emit(event);
        }
        self.flush_log()
    }

    /// Stops every job (the session is ending).
    pub(crate) async fn shutdown(&mut self) {
        for (_, r) in self.jobs.drain() {
            r.stop().await;
        }
    }

    pub(super) fn job_input(&mut self, msg: JobMsg) -> Input {
        match msg {
            JobMsg::Report { id, text } => Input::Report { id, text },
            JobMsg::SubagentEnded { id, reply } => {
                self.subagents.remove(&id);
                let stopped = self.stopping.remove(&id);
                let (end, final_reply) = match reply {
                    _ if stopped => (JobEnd::Stopped, None),
                    Ok(text) => (JobEnd::Done { exit_code: None }, Some(text)),
                    Err(message) => (JobEnd::Failed { message }, None),
                };
                Input::JobEnded {
                    id,
                    end,
                    final_reply,
                }
            }
            JobMsg::Output { id, text } => Input::JobOutput { id, text },
            JobMsg::Ended { id, exit } => {
                self.jobs.remove(&id);
                let end = if self.stopping.remove(&id) {
                    JobEnd::Stopped
                } else {
                    match exit {
                        Exit::Code(c) => JobEnd::Done { exit_code: Some(c) },
                        Exit::Signal(s) => JobEnd::Failed {
                            message: format!("killed by signal {s}"),
                        },
                    }
                };
                Input::JobEnded {
                    id,
                    end,
                    final_reply: None,
                }
            }
        }
    }

    /// A job's message that came while the session waits on something: fed to the session at
    /// once (it never needs an answer), its events shown; the other actions it gave back.
    pub(super) fn job_while_waiting(&mut self, msg: JobMsg) -> Result<Vec<Action>> {
        let input = self.job_input(msg);
        let actions = self.session.handle(input)?;
        self.flush_log()?;
        let mut rest = Vec::new();
        for a in actions {
            match a {
                Action::Emit(e) => self.emit(e),
                other => rest.push(other),
            }
        }
        Ok(rest)
    }

    pub(super) fn start_job(&mut self, id: u32, kind: JobKind, call: &ToolCall) {
        if kind != JobKind::Command {
            match self.spawn_subagent(call, Some(id), CancellationToken::new()) {
                Ok((ctl, handle, session)) => {
                    let agent = call
                        .arguments
                        .get("agent")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("general")
                        .to_owned();
                    self.subagent_sessions.insert(id, (agent, session));
                    self.watch_subagent(id, Ok((ctl, handle)));
                }
                Err(message) => self.watch_subagent(id, Err(message)),
            }
            return;
        }
        let command = call
            .arguments
            .get("command")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let started = if self.approved.contains(&call.id) {
            self.spawner.spawn_approved(command)
        } else {
            self.spawner.spawn(command)
        };
        match started {
            Ok(r) => self.watch_job(id, r, 0),
            Err(e) => {
                self.notice(Level::Warning, format!("job {id} did not start: {e}"));
                let _ = self.job_tx.send(JobMsg::Ended {
                    id,
                    exit: Exit::Code(127),
                });
            }
        }
    }

    /// Starts a subagent for a `task` call: a session of its own on the same disk, model and
    /// permissions, driven to the end of its prompt. `job`: it runs as that background job (its
    /// `report`s go to this session). A cancel of `cancel` cancels it. The handle gives its final
    /// reply.
    pub(super) fn spawn_subagent(
        &self,
        call: &ToolCall,
        job: Option<u32>,
        cancel: CancellationToken,
    ) -> std::result::Result<Launched, String> {
        if self.agent.is_some() {
            return Err("a subagent cannot start subagents of its own".into());
        }
        let a = &call.arguments;
        let agent = a
            .get("agent")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("general");
        if !self.agents.knows(agent) {
            return Err(format!(
                "there is no agent {agent:?}: use one of {}",
                self.agents.names().join(", ")
            ));
        }
        let Some(prompt) = a.get("prompt").and_then(serde_json::Value::as_str) else {
            return Err(crate::args::missing(call, "prompt").output);
        };
        let mut meta = self
            .store
            .create(&self.world.place(), &self.model_name)
            .map_err(|e| e.to_string())?;
        meta.title = format!("{agent}: {}", prompt.lines().next().unwrap_or_default());
        let owner = match job {
            Some(id) => Owner::Job(id),
            None => Owner::Task(call.id.clone()),
        };
        self.launch(agent, prompt, meta, None, owner, cancel)
    }

    /// Starts ended subagent job `id` again with its saved context and `message`.
    /// A message for job `id` (the model's `job_send` or the person's): handed to its running
    /// subagent, or with `restart` the ended subagent started again with it; told as
    /// [`CoreEvent::JobMessage`], `dropped` when the subagent is gone.
    pub(super) fn deliver_to_job(
        &mut self,
        id: u32,
        message: String,
        restart: bool,
    ) -> JobDelivery {
        let delivery = if restart {
            self.restart_subagent(id, message.clone());
            JobDelivery::Restarted
        } else {
            match self.subagents.get(&id) {
                Some(child)
                    if child
                        .send(Ctl::Op(Op::Message {
                            text: message.clone(),
                        }))
                        .is_ok() =>
                {
                    JobDelivery::Sent
                }
                _ => JobDelivery::Dropped,
            }
        };
        self.emit(CoreEvent::JobMessage {
            job_id: id.to_string(),
            text: message,
            delivery,
        });
        delivery
    }

    pub(super) fn restart_subagent(&mut self, id: u32, message: String) {
        let Some((agent, session)) = self.subagent_sessions.get(&id).cloned() else {
            let _ = self.job_tx.send(JobMsg::SubagentEnded {
                id,
                reply: Err("the subagent's session is not known here".into()),
            });
            return;
        };
        let started = self
            .store
            .find(&session)
            .map_err(|e| e.to_string())
            .and_then(|meta| {
                let entries = self.store.load(&meta.id).map_err(|e| e.to_string())?;
                self.launch(
                    &agent,
                    &message,
                    meta,
                    Some(entries),
                    Owner::Job(id),
                    CancellationToken::new(),
                )
            });
        self.watch_subagent(id, started.map(|(ctl, handle, _)| (ctl, handle)));
    }

    /// Keeps a background subagent's control channel and wakes the session when it ends (or at
    /// once, with the reason, when it could not start).
    pub(super) fn watch_subagent(
        &mut self,
        id: u32,
        started: std::result::Result<(mpsc::UnboundedSender<Ctl>, SubagentRun), String>,
    ) {
        match started {
            Ok((ctl, handle)) => {
                self.subagents.insert(id, ctl);
                let tx = self.job_tx.clone();
                tokio::spawn(async move {
                    let reply = handle
                        .await
                        .unwrap_or_else(|e| Err(format!("the subagent failed: {e}")));
                    let _ = tx.send(JobMsg::SubagentEnded { id, reply });
                });
            }
            Err(message) => {
                let _ = self.job_tx.send(JobMsg::SubagentEnded {
                    id,
                    reply: Err(message),
                });
            }
        }
    }

    pub(super) fn launch(
        &self,
        agent: &str,
        prompt: &str,
        meta: Meta,
        resume: Option<Vec<Entry>>,
        owner: Owner,
        cancel: CancellationToken,
    ) -> std::result::Result<Launched, String> {
        let (model, model_name) = self.agent_model(agent);
        let setup = DriverSetup {
            model,
            model_name,
            perms: self.perms.clone(),
            world: self.world.clone(),
            jobs: self.spawner.clone(),
            plan: self.plan.clone(),
            capacity: self.capacity.clone(),
            personality: self.personality.clone(),
            store: self.store.clone(),
            meta,
            agent: Some(agent.to_owned()),
            agents: self.agents.clone(),
            project: self.project,
            kind: self.kind,
            product_version: self.product_version.clone(),
            hooks: self.hooks.clone(),
        };
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
        let mut child =
            Driver::new(setup, resume.as_deref(), out_tx, ctl_rx).map_err(|e| format!("{e:#}"))?;
        let session_id = child.id().to_owned();
        if let Owner::Job(id) = owner {
            child.report_to = Some((self.job_tx.clone(), id));
        }
        child.queue_prompt(prompt.to_owned());
        let relayed = tokio::spawn(relay(out_rx, self.out.clone(), owner, agent.to_owned()));
        let cancel_tx = ctl_tx.clone();
        // A running subagent holds a slot of its server (it is admitted at once, and the main
        // agent's requests wait while the slots are full); its own requests go in it.
        let gate = self.capacity.clone();
        let server = child.client.server();
        let slot =
            harness_loop::capacity::Holder::Subagent(format!("{}/{session_id}", self.meta.id));
        let handle = tokio::spawn(async move {
            gate.acquire(&server, &slot, &CancellationToken::new(), &mut |_| {})
                .await;
            let watch = tokio::spawn(async move {
                cancel.cancelled().await;
                let _ = cancel_tx.send(Ctl::Op(Op::Cancel));
            });
            let r = child.run(true).await;
            gate.release(&server, &slot);
            watch.abort();
            child.shutdown().await;
            // What it told reaches the person before its reply does (bounded: a process it
            // left may still hold its output a moment).
            let ended = child.last_end().cloned();
            let reply = child.history().iter().rev().find_map(|m| match m {
                Message::Assistant { text, .. } if !text.trim().is_empty() => Some(text.clone()),
                _ => None,
            });
            drop(child);
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), relayed).await;
            if let Err(e) = r {
                return Err(format!("the subagent failed: {e:#}"));
            }
            match ended {
                Some(TurnEnd::Finished) => Ok(reply.unwrap_or_default()),
                Some(end) => Err(format!(
                    "the subagent stopped: {}",
                    crate::protocol::turn_end_text(&end)
                )),
                None => Err("the subagent did not run".into()),
            }
        });
        Ok((ctl_tx, handle, session_id))
    }

    /// The model a subagent of `agent` runs on: the one its definition names on the same
    /// endpoint, else this session's (said when the named one cannot be had).
    fn agent_model(&self, agent: &str) -> (Arc<dyn ModelLink>, String) {
        let named = self
            .agents
            .get(agent)
            .filter(|_| !AGENTS.contains(&agent))
            .and_then(|d| d.model.as_deref())
            .filter(|m| *m != self.model_name);
        if let Some(name) = named {
            match self.client.with_model(name) {
                Ok(link) => return (link, name.to_owned()),
                Err(e) => self.notice(
                    Level::Warning,
                    format!("agent {agent} runs on {}: {e}", self.model_name),
                ),
            }
        }
        (self.client.clone(), self.model_name.clone())
    }

    /// Stops a running job: a subagent is cancelled, a command's process stopped; its end comes
    /// back as the job's usual end, marked stopped.
    pub(super) fn stop_job(&mut self, id: u32) {
        if let Some(child) = self.subagents.get(&id) {
            self.stopping.insert(id);
            let _ = child.send(Ctl::Op(Op::Cancel));
        } else if let Some(r) = self.jobs.get(&id).cloned() {
            self.stopping.insert(id);
            tokio::spawn(async move {
                r.stop().await;
            });
        }
    }

    /// Follows a running job: its new output and its end go to the session.
    pub(super) fn watch_job(&mut self, id: u32, running: Arc<dyn Process>, seen: u64) {
        self.jobs.insert(id, running.clone());
        let tx = self.job_tx.clone();
        tokio::spawn(async move {
            let mut seen = seen;
            loop {
                let done = running
                    .wait_for(std::time::Duration::from_millis(250))
                    .await;
                let (total, text) = running.output_since(seen);
                if total > seen {
                    let _ = tx.send(JobMsg::Output { id, text });
                    seen = total;
                }
                if let Some(exit) = done {
                    let _ = tx.send(JobMsg::Ended { id, exit });
                    return;
                }
            }
        });
    }
}

/// What a subagent has to tell the person reaches the parent's front end: its notices (such
/// as a declined call), named by the job or task, and its calls as they start and end.
async fn relay(
    mut child: mpsc::UnboundedReceiver<Event>,
    parent: mpsc::UnboundedSender<Event>,
    owner: Owner,
    agent: String,
) {
    let (task_call_id, job_id, label) = match owner {
        Owner::Task(call_id) => (Some(call_id), None, format!("task {agent}")),
        Owner::Job(id) => (None, Some(id.to_string()), format!("job {id}")),
    };
    let mut calls: HashMap<String, (ToolCall, Block)> = HashMap::new();
    while let Some(out) = child.recv().await {
        let told = match out {
            Event::Core(CoreEvent::Notice {
                level: Level::Warning,
                text,
            }) => CoreEvent::Notice {
                level: Level::Warning,
                text: format!("{label}: {text}"),
            },
            Event::Core(CoreEvent::ToolCallStarted { call, block, .. }) => {
                calls.insert(call.id.clone(), (call.clone(), block));
                CoreEvent::SubagentCall {
                    task_call_id: task_call_id.clone(),
                    job_id: job_id.clone(),
                    call,
                    block,
                    status: SubagentCallStatus::Started,
                }
            }
            Event::Core(CoreEvent::ToolCallFinished { result }) => {
                let Some((call, block)) = calls.remove(&result.call_id) else {
                    continue;
                };
                let status = if result.is_error {
                    let line = result.body().lines().find(|l| !l.trim().is_empty());
                    SubagentCallStatus::Failed {
                        reason: line.unwrap_or("failed").chars().take(200).collect(),
                    }
                } else {
                    SubagentCallStatus::Done
                };
                CoreEvent::SubagentCall {
                    task_call_id: task_call_id.clone(),
                    job_id: job_id.clone(),
                    call,
                    block,
                    status,
                }
            }
            _ => continue,
        };
        if parent.send(Event::Core(told)).is_err() {
            return;
        }
    }
}
