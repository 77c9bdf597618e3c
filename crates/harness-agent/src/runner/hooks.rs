//! The session's hooks at work ([`crate::hooks`]): `SessionStart` as the session starts (its
//! context goes with the first prompt), `UserPromptSubmit` before a prompt starts its turn,
//! `PreToolUse` between the model's step and the loop's decisions (their verdicts read by
//! [`crate::hooks::Gated`]), `PostToolUse` on each result, `Stop` as a turn finishes. A
//! subagent runs only the tool hooks. What a hook could not do is said to the person.

use super::*;
use crate::hooks::{HookAnswer, HookEvent, MAX_STOP_CONTINUATIONS, payload, strongest};

impl Driver {
    fn hook_payload(&self, event: HookEvent) -> serde_json::Value {
        payload(event, &self.meta.id, &self.world.place(), self.perms.mode())
    }

    /// The hooks of `event`, when this session runs any (the person-facing events only in the
    /// main session).
    fn hooks_of(&self, event: HookEvent) -> Option<Arc<crate::hooks::Hooks>> {
        let hooks = self.hooks.clone()?;
        let main_only = !event.has_tool();
        (hooks.on(event) && !(main_only && self.agent.is_some())).then_some(hooks)
    }

    /// Says what the hooks could not do.
    fn hook_problems(&self, answers: &[HookAnswer]) {
        for a in answers {
            if let Some(p) = &a.problem {
                self.notice(Level::Warning, p.clone());
            }
        }
    }

    /// `SessionStart`: what the hooks add is kept to go with the first prompt.
    pub(super) async fn session_start_hooks(&mut self) {
        let Some(hooks) = self.hooks_of(HookEvent::SessionStart) else {
            return;
        };
        let mut p = self.hook_payload(HookEvent::SessionStart);
        p["source"] = if self.session.history().is_empty() {
            "startup"
        } else {
            "resume"
        }
        .into();
        let answers = hooks.fire(HookEvent::SessionStart, None, &p).await;
        self.hook_problems(&answers);
        self.hook_context
            .extend(answers.into_iter().filter_map(|a| a.context));
    }

    /// `UserPromptSubmit`: the prompt as it goes to the model (with what the hooks and the
    /// session's start add), or `None` when a hook blocked it (said to the person).
    pub(super) async fn prompt_hooks(&mut self, text: String) -> Option<String> {
        self.stop_continuations = 0;
        let mut added = Vec::new();
        if let Some(hooks) = self.hooks_of(HookEvent::UserPromptSubmit) {
            let mut p = self.hook_payload(HookEvent::UserPromptSubmit);
            p["prompt"] = text.clone().into();
            let answers = hooks.fire(HookEvent::UserPromptSubmit, None, &p).await;
            self.hook_problems(&answers);
            if let Some(reason) = answers.iter().find_map(|a| a.block.clone()) {
                // No turn starts; the front end waiting for one hears it ended, and why.
                let end = TurnEnd::Error {
                    message: format!("{}: {reason}", crate::hooks::PROMPT_BLOCKED),
                };
                self.last_end = Some(end.clone());
                self.emit(CoreEvent::UserInput {
                    text,
                    origin: harness_core::protocol::Origin::Person,
                });
                self.emit(CoreEvent::TurnEnded { reason: end });
                return None;
            }
            added.extend(answers.into_iter().filter_map(|a| a.context));
        }
        let mut context = std::mem::take(&mut self.hook_context);
        context.extend(added);
        Some(if context.is_empty() {
            text
        } else {
            format!("{text}\n\n{}", context.join("\n\n"))
        })
    }

    /// `PreToolUse`: each call of the model's step put to the hooks that match its tool; the
    /// strongest verdict is kept for the loop's decision.
    pub(super) async fn pre_tool_hooks(&mut self, input: &Input) {
        if let Ok(mut v) = self.verdicts.lock() {
            v.clear();
        }
        let Input::Model(out) = input else {
            return;
        };
        let Some(hooks) = self.hooks_of(HookEvent::PreToolUse) else {
            return;
        };
        for call in &out.tool_calls {
            let mut p = self.hook_payload(HookEvent::PreToolUse);
            p["tool_name"] = call.name.clone().into();
            p["tool_input"] = call.arguments.clone();
            let answers = hooks
                .fire(HookEvent::PreToolUse, Some(&call.name), &p)
                .await;
            self.hook_problems(&answers);
            if let Some(v) = strongest(&answers)
                && let Ok(mut verdicts) = self.verdicts.lock()
            {
                verdicts.insert(call.id.clone(), v);
            }
        }
    }

    /// `PostToolUse`: what the hooks say of a call's result (a block's reason, added context)
    /// is added to the result the model reads.
    pub(super) async fn post_tool_hooks(
        &mut self,
        calls: &[ToolCall],
        results: &mut [ToolOutcome],
    ) {
        let Some(hooks) = self.hooks_of(HookEvent::PostToolUse) else {
            return;
        };
        for r in results.iter_mut() {
            let Some(call) = calls.iter().find(|c| c.id == r.call_id) else {
                continue;
            };
            let mut p = self.hook_payload(HookEvent::PostToolUse);
            p["tool_name"] = call.name.clone().into();
            p["tool_input"] = call.arguments.clone();
            p["tool_response"] = r.output.clone().into();
            let answers = hooks
                .fire(HookEvent::PostToolUse, Some(&call.name), &p)
                .await;
            self.hook_problems(&answers);
            let said: Vec<String> = answers
                .into_iter()
                .flat_map(|a| a.block.into_iter().chain(a.context))
                .collect();
            if said.is_empty() {
                continue;
            }
            // The model reads the output then, not the edit's diff alone.
            r.edit = None;
            r.output = format!(
                "{}\n\nPostToolUse hook feedback: {}",
                r.output.trim_end(),
                said.join("\n")
            );
        }
    }

    /// `Stop`, as a turn finished: the prompt that sends the model on when a hook blocks the
    /// stop (at most [`MAX_STOP_CONTINUATIONS`] times after a prompt of the person).
    pub(super) async fn stop_hooks(&mut self) -> Option<String> {
        let hooks = self.hooks_of(HookEvent::Stop)?;
        let mut p = self.hook_payload(HookEvent::Stop);
        p["stop_hook_active"] = (self.stop_continuations > 0).into();
        let answers = hooks.fire(HookEvent::Stop, None, &p).await;
        self.hook_problems(&answers);
        let reason = answers.into_iter().find_map(|a| a.block)?;
        if self.stop_continuations >= MAX_STOP_CONTINUATIONS {
            self.notice(
                Level::Warning,
                format!(
                    "a Stop hook asked the model to go on again ({reason}); it already did \
                     {MAX_STOP_CONTINUATIONS} times after this prompt, so the turn ends here"
                ),
            );
            return None;
        }
        self.stop_continuations += 1;
        self.notice(
            Level::Info,
            format!("a Stop hook sends the model on: {reason}"),
        );
        Some(format!("Stop hook feedback: {reason}"))
    }
}
