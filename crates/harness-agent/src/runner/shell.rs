//! The person's own command ([`Op::Shell`], a terminal's `!command`): run by the session in its
//! directory through its job spawner, under the rules a model's `bash` call meets — refused by
//! a deny, asked once when a rule asks (nothing is remembered) — its end told as
//! [`Event::ShellEnded`].

use std::sync::atomic::{AtomicU64, Ordering};

use harness_loop::session::{Decision, Permissions as _};

use super::*;
use crate::protocol::ShellEnd;

/// How long one wait for the command lasts before it is waited for again (ops and job news
/// are handled meanwhile in any case).
const WAIT_SLICE: std::time::Duration = std::time::Duration::from_secs(3600);

/// The number of the person's next command in this process (their calls' ids).
static NEXT: AtomicU64 = AtomicU64::new(1);

impl Driver {
    /// Runs the person's `command` and tells its end (an idle session's op: one that comes
    /// while a prompt runs is refused).
    pub(super) async fn shell(&mut self, command: String) -> Result<()> {
        let call_id = format!("person-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let end = self.shell_end(&call_id, &command).await?;
        let _ = self.out.send(Event::ShellEnded {
            call_id,
            command,
            end,
        });
        Ok(())
    }

    async fn shell_end(&mut self, call_id: &str, command: &str) -> Result<ShellEnd> {
        let call = ToolCall {
            id: call_id.to_owned(),
            name: "bash".into(),
            arguments: serde_json::json!({ "command": command }),
        };
        match self.perms.decide(&call) {
            Decision::Allow => {}
            Decision::Deny { reason } => return Ok(ShellEnd::Refused { reason }),
            Decision::Ask(q) => {
                let question = PermissionQuestion { pattern: None, ..q };
                let _ = self.out.send(Event::ShellAsked {
                    call_id: call_id.to_owned(),
                    question,
                });
                if self.shell_answer(call_id).await? != Some(Answer::Once) {
                    return Ok(ShellEnd::Declined);
                }
            }
        }
        let running = match self.spawner.spawn_approved(command) {
            Ok(p) => p,
            Err(e) => {
                return Ok(ShellEnd::Ran {
                    code: 127,
                    output: e.to_string(),
                });
            }
        };
        loop {
            tokio::select! {
                exit = running.wait_for(WAIT_SLICE) => if let Some(exit) = exit {
                    return Ok(ShellEnd::Ran {
                        code: exit.code().unwrap_or(-1),
                        output: running.output(),
                    });
                },
                op = self.ops.recv() => match op {
                    None | Some(Ctl::Op(Op::Cancel)) => {
                        running.stop().await;
                        return Ok(ShellEnd::Stopped);
                    }
                    Some(ctl) => {
                        let _ = self.op_while_busy(ctl);
                    }
                },
                Some(msg) = self.job_rx.recv() => {
                    let _ = self.job_while_waiting(msg)?;
                }
            }
        }
    }

    /// The person's answer to the question about their command `call_id` (`None`: the front
    /// end is gone, or cancelled).
    async fn shell_answer(&mut self, call_id: &str) -> Result<Option<Answer>> {
        loop {
            tokio::select! {
                op = self.ops.recv() => match op {
                    None | Some(Ctl::Op(Op::Cancel)) => return Ok(None),
                    Some(Ctl::Op(Op::Answer { call_id: id, answer })) if id == call_id => {
                        return Ok(Some(answer));
                    }
                    Some(ctl) => {
                        let _ = self.op_while_busy(ctl);
                    }
                },
                Some(msg) = self.job_rx.recv() => {
                    let _ = self.job_while_waiting(msg)?;
                }
            }
        }
    }
}
