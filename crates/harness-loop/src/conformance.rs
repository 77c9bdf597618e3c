//! The runners of the `context`, `jobs` and `loop` conformance areas (formats in each file's `about`).
//!
//! Each case's `expect` is a list with one object per step. A step's actual result is reported
//! with the keys its expected object names (and always its `kind` or `decision`), so a case
//! states only what it is about, and a recorder can write the actual list back as `expect`.

use harness_core::protocol::{Answer, JobEnd, JobKind, Risk, ToolCall};
use harness_spec::Spec;
use harness_spec::conformance::{AreaRunner, Outcome};
use serde_json::{Map, Value, json};

use crate::config::LoopConfig;
use crate::context::{Context, Insert, InsertKind, ReadInfo};
use crate::jobs::Jobs;
use crate::session::{
    Action, Input, Message, ModelOutput, Session, SessionSetup, ToolCatalog, ToolOutcome,
    ToolTraits,
};

/// The runners this crate provides.
pub fn conformance_runners() -> Vec<Box<dyn AreaRunner>> {
    vec![
        Box::new(ContextRunner),
        Box::new(JobsRunner),
        Box::new(LoopRunner),
    ]
}

/// Area `context`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ContextRunner;

/// Area `jobs`.
#[derive(Debug, Clone, Copy, Default)]
pub struct JobsRunner;

fn config() -> Result<LoopConfig, Outcome> {
    LoopConfig::embedded().map_err(|e| Outcome::malformed(format!("loop.json: {e}")))
}

/// Keeps only the keys `expected` names (and `always`), so actual and expected compare.
fn shape(actual: Map<String, Value>, expected: &Value, always: &[&str]) -> Value {
    let mut out = Map::new();
    for (k, v) in actual {
        let named = expected.get(&k).is_some() || always.contains(&k.as_str());
        if named {
            out.insert(k, v);
        }
    }
    Value::Object(out)
}

fn generated_output(step: &Value) -> Option<String> {
    if let Some(s) = step.get("output").and_then(Value::as_str) {
        return Some(s.to_string());
    }
    if let Some(g) = step.get("output_lines") {
        let count = g.get("count")?.as_u64()?;
        let text = g.get("text").and_then(Value::as_str).unwrap_or("line {n}");
        let lines: Vec<String> = (1..=count)
            .map(|n| text.replace("{n}", &n.to_string()))
            .collect();
        return Some(lines.join("\n"));
    }
    if let Some(g) = step.get("output_repeat") {
        let text = g.get("text")?.as_str()?;
        let times = g.get("times")?.as_u64()? as usize;
        return Some(text.repeat(times));
    }
    None
}

/// Replaces result ids in `text` by `{#k}` (k: the step that made the result).
fn symbolic(text: &str, ids: &[(String, usize)]) -> String {
    let mut out = text.to_string();
    for (id, k) in ids {
        out = out.replace(id.as_str(), &format!("{{#{k}}}"));
    }
    out
}

/// Replaces `{#k}` in `text` by the id step k made.
fn concrete(text: &str, ids: &[(String, usize)]) -> String {
    let mut out = text.to_string();
    for (id, k) in ids {
        out = out.replace(&format!("{{#{k}}}"), id);
    }
    out
}

impl AreaRunner for ContextRunner {
    fn area(&self) -> &'static str {
        "context"
    }

    fn run(&self, case: &Value) -> Outcome {
        let cfg = match config() {
            Ok(c) => c,
            Err(o) => return o,
        };
        let Some(steps) = case.get("steps").and_then(Value::as_array) else {
            return Outcome::malformed("a context case needs `steps`");
        };
        let Some(expect) = case.get("expect").and_then(Value::as_array) else {
            return Outcome::malformed("a context case needs `expect`, one object per step");
        };
        if expect.len() != steps.len() {
            return Outcome::malformed("`expect` needs one object per step");
        }
        let percent = cfg.context.compaction.near_full_percent;
        let mut ctx = Context::new(cfg.context, "conformance");
        ctx.begin_turn(1);
        let mut ids: Vec<(String, usize)> = Vec::new();
        let mut actual = Vec::new();
        for (k, (step, exp)) in steps.iter().zip(expect).enumerate() {
            let mut got = Map::new();
            if let Some(turn) = step.get("turn").and_then(Value::as_u64) {
                ctx.begin_turn(turn as u32);
                got.insert("kind".into(), json!("turn"));
            } else if let Some(turn) = step.get("rewind").and_then(Value::as_u64) {
                ctx.rewind(turn as u32);
                got.insert("kind".into(), json!("rewind"));
            } else if let Some(nf) = step.get("near_full") {
                let compact = crate::context::near_full(
                    percent,
                    nf.get("window").and_then(Value::as_u64),
                    nf.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
                    nf.get("messages").and_then(Value::as_u64).unwrap_or(0) as usize,
                );
                got.insert("kind".into(), json!("near_full"));
                got.insert("compact".into(), json!(compact));
            } else if let Some(ov) = step.get("overflow") {
                let flag = |k: &str| ov.get(k).and_then(Value::as_bool).unwrap_or(false);
                let compact =
                    crate::context::compact_after_overflow(flag("compacted"), flag("cancelled"));
                got.insert("kind".into(), json!("overflow"));
                got.insert("compact".into(), json!(compact));
            } else if step.get("compact").is_some() {
                let table = ctx.compact();
                got.insert("kind".into(), json!("compact"));
                got.insert("table".into(), json!(symbolic(&table, &ids)));
            } else if let Some(edit) = step.get("edit") {
                let path = edit.get("path").and_then(Value::as_str).unwrap_or_default();
                let before = edit
                    .get("before")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let after = edit
                    .get("after")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let diff = ctx.edit_diff(path, before, after);
                let ins = ctx.insert(Insert::new("edit", json!({"path": path}), diff));
                ids.push((ins.id.to_string(), k));
                describe(&mut got, &ins, &ids);
            } else if let Some(args) = step.get("recall") {
                let mut args = args.clone();
                if let Some(id) = args.get("id").and_then(Value::as_str) {
                    let real = concrete(id, &ids);
                    args["id"] = json!(real);
                }
                let ins = ctx.recall(args);
                ids.push((ins.id.to_string(), k));
                describe(&mut got, &ins, &ids);
            } else if let Some(tool) = step.get("tool").and_then(Value::as_str) {
                let Some(output) = generated_output(step) else {
                    return Outcome::malformed(format!("step {k}: a tool step needs an output"));
                };
                let read = match step.get("read") {
                    None => None,
                    Some(r) => match serde_json::from_value::<ReadInfo>(r.clone()) {
                        Ok(r) => Some(r),
                        Err(e) => return Outcome::malformed(format!("step {k}: read: {e}")),
                    },
                };
                let ins = ctx.insert(Insert {
                    tool: tool.to_string(),
                    args: step.get("args").cloned().unwrap_or_else(|| json!({})),
                    output,
                    is_error: step.get("error").and_then(Value::as_bool).unwrap_or(false),
                    read,
                });
                ids.push((ins.id.to_string(), k));
                describe(&mut got, &ins, &ids);
            } else {
                return Outcome::malformed(format!("step {k}: unknown step"));
            }
            if let Some(subs) = exp.get("contains").and_then(Value::as_array) {
                let body = got
                    .get("text")
                    .or_else(|| got.get("table"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let found: Vec<Value> = subs
                    .iter()
                    .filter(|s| s.as_str().is_some_and(|s| body.contains(s)))
                    .cloned()
                    .collect();
                got.insert("contains".into(), Value::Array(found));
            }
            if exp.get("reachable").is_some() {
                let ok = ids
                    .iter()
                    .find(|(_, s)| *s == k)
                    .and_then(|(id, _)| {
                        let stored = ctx.stored(id)?.output.clone();
                        let rid = harness_core::protocol::ResultId::new(id.clone()).ok()?;
                        let back = crate::context::recall_all(&mut ctx, &rid)?;
                        Some(back == stored.lines().collect::<Vec<_>>().join("\n"))
                    })
                    .unwrap_or(false);
                got.insert("reachable".into(), json!(ok));
            }
            actual.push(shape(got, exp, &["kind"]));
        }
        Outcome::compare(case, Value::Array(actual))
    }
}

fn describe(got: &mut Map<String, Value>, ins: &crate::context::Inserted, ids: &[(String, usize)]) {
    let (kind, extra): (&str, Vec<(&str, Value)>) = match &ins.kind {
        InsertKind::Full => ("full", vec![]),
        InsertKind::Capped { elided } => ("capped", vec![("elided", json!(elided))]),
        InsertKind::Stub { of, why } => (
            "stub",
            vec![
                (
                    "of",
                    ids.iter()
                        .find(|(id, _)| id == of.as_str())
                        .map_or(Value::Null, |(_, k)| json!(k)),
                ),
                ("why", serde_json::to_value(why).unwrap_or(Value::Null)),
            ],
        ),
        InsertKind::Recall { of } => (
            "recall",
            vec![(
                "of",
                ids.iter()
                    .find(|(id, _)| id == of.as_str())
                    .map_or(Value::Null, |(_, k)| json!(k)),
            )],
        ),
        InsertKind::Error => ("error", vec![]),
    };
    got.insert("kind".into(), json!(kind));
    for (k, v) in extra {
        got.insert(k.into(), v);
    }
    got.insert("text".into(), json!(symbolic(&ins.body, ids)));
    got.insert("lines".into(), json!(ins.body.lines().count()));
    got.insert(
        "label".into(),
        json!(symbolic(&ins.text, ids).lines().next().unwrap_or_default()),
    );
}

/// The tools a jobs case may call, with their traits: the spec's when it has the tool, else
/// the README's risk classes.
struct CaseCatalog;

impl ToolCatalog for CaseCatalog {
    fn traits(&self, name: &str) -> Option<ToolTraits> {
        if let Some(t) = Spec::embedded().tool(name) {
            return Some(ToolTraits {
                risk: t.risk,
                exclusive: t.exclusive,
            });
        }
        let risk = match name {
            "read" | "glob" | "grep" | "list" | "recall" | "job_list" | "job_output" => Risk::Read,
            "bash" | "task" | "job_stop" | "job_send" | "report" => Risk::Execute,
            "write" | "edit" => Risk::Write,
            _ => return None,
        };
        Some(ToolTraits {
            risk,
            exclusive: false,
        })
    }
}

impl AreaRunner for JobsRunner {
    fn area(&self) -> &'static str {
        "jobs"
    }

    fn run(&self, case: &Value) -> Outcome {
        let cfg = match config() {
            Ok(c) => c,
            Err(o) => return o,
        };
        let Some(expect) = case.get("expect").and_then(Value::as_array) else {
            return Outcome::malformed("a jobs case needs `expect`, one object per step");
        };
        if let Some(steps) = case.get("steps").and_then(Value::as_array) {
            if steps.len() != expect.len() {
                return Outcome::malformed("`expect` needs one object per step");
            }
            return run_job_steps(cfg, steps, expect, case);
        }
        if let Some(steps) = case.get("session").and_then(Value::as_array) {
            if steps.len() != expect.len() {
                return Outcome::malformed("`expect` needs one object per session input");
            }
            return run_session_steps(cfg, steps, expect, case);
        }
        Outcome::malformed("a jobs case needs `steps` or `session`")
    }
}

fn parse_kind(v: Option<&Value>) -> Option<JobKind> {
    match v.and_then(Value::as_str)? {
        "command" => Some(JobKind::Command),
        "subagent" => Some(JobKind::Subagent),
        _ => None,
    }
}

fn run_job_steps(cfg: LoopConfig, steps: &[Value], expect: &[Value], case: &Value) -> Outcome {
    let mut jobs = Jobs::new(cfg);
    let mut actual = Vec::new();
    for (k, (step, exp)) in steps.iter().zip(expect).enumerate() {
        let op = step.get("op").and_then(Value::as_str).unwrap_or_default();
        let got: Value = match op {
            "start" => {
                let Some(kind) = parse_kind(step.get("kind")) else {
                    return Outcome::malformed(format!("step {k}: kind is command or subagent"));
                };
                let title = step.get("title").and_then(Value::as_str).unwrap_or("job");
                serde_json::to_value(jobs.start(kind, title)).unwrap_or(Value::Null)
            }
            "overrun" => {
                let title = step
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                let seconds = step.get("seconds").and_then(Value::as_u64).unwrap_or(0);
                let out = step.get("output").and_then(Value::as_str).unwrap_or("");
                serde_json::to_value(jobs.overrun(title, seconds, out)).unwrap_or(Value::Null)
            }
            "output" => {
                let id = step.get("id").and_then(Value::as_u64).unwrap_or(0) as u32;
                let text = generated_output(step)
                    .or_else(|| step.get("text").and_then(Value::as_str).map(String::from))
                    .unwrap_or_default();
                jobs.output(id, &text);
                json!({"decision": "none"})
            }
            "end" => {
                let id = step.get("id").and_then(Value::as_u64).unwrap_or(0) as u32;
                let end: JobEnd = match step.get("end").cloned().map(serde_json::from_value) {
                    Some(Ok(e)) => e,
                    _ => return Outcome::malformed(format!("step {k}: `end` is a JobEnd")),
                };
                let reply = step.get("final_reply").and_then(Value::as_str);
                let wake = jobs.end(id, &end, reply);
                json!({"decision": "wake", "wake": wake})
            }
            "report" => {
                let id = step.get("id").and_then(Value::as_u64).unwrap_or(0) as u32;
                let text = step.get("text").and_then(Value::as_str).unwrap_or("");
                let answer = jobs.report(id, text);
                json!({"decision": "report", "text": answer})
            }
            "wakes" => json!({"decision": "wakes", "wakes": jobs.take_wakes()}),
            "lost" => {
                let ended: Vec<u32> = jobs.end_lost().into_iter().map(|(id, _)| id).collect();
                json!({"decision": "lost", "ended": ended})
            }
            "tool" => {
                let name = step.get("name").and_then(Value::as_str).unwrap_or("");
                let args = step.get("args").cloned().unwrap_or_else(|| json!({}));
                match jobs.tool(name, &args) {
                    Some(d) => serde_json::to_value(d).unwrap_or(Value::Null),
                    None => json!({"decision": "not_a_job_tool"}),
                }
            }
            other => return Outcome::malformed(format!("step {k}: unknown op `{other}`")),
        };
        let map = got.as_object().cloned().unwrap_or_default();
        actual.push(shape(map, exp, &["decision"]));
    }
    Outcome::compare(case, Value::Array(actual))
}

fn action_name(a: &Action) -> Option<&'static str> {
    Some(match a {
        Action::CallModel(_) => "call_model",
        Action::RunTools { .. } => "run_tools",
        Action::Ask { .. } => "ask",
        Action::StartJob { .. } => "start_job",
        Action::StopJob { .. } => "stop_job",
        Action::DeliverToJob { .. } => "deliver_to_job",
        Action::RestartJob { .. } => "restart_job",
        Action::ReportToParent { .. } => "report_to_parent",
        Action::EndTurn(_) => "end_turn",
        Action::Emit(_) => return None,
    })
}

fn run_session_steps(cfg: LoopConfig, steps: &[Value], expect: &[Value], case: &Value) -> Outcome {
    let mut session = steps_session(cfg, case);
    let mut actual = Vec::new();
    let mut call_no = 0usize;
    let mut last_calls: Vec<ToolCall> = Vec::new();
    for (k, (step, exp)) in steps.iter().zip(expect).enumerate() {
        let input = match step_input(k, step, &mut call_no, &last_calls) {
            Ok(input) => input,
            Err(malformed) => return malformed,
        };
        let actions = match session.handle(input) {
            Ok(a) => a,
            Err(e) => {
                actual.push(json!({"error": e.to_string()}));
                continue;
            }
        };
        let got = seen_in(&actions, &mut last_calls);
        actual.push(shape(got, exp, &["actions"]));
    }
    Outcome::compare(case, Value::Array(actual))
}

/// The session a steps case runs: a subagent's when it says `subagent`, asking about the
/// tools its `ask` names.
fn steps_session(cfg: LoopConfig, case: &Value) -> Session {
    let subagent = case
        .get("subagent")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Session::new(SessionSetup {
        config: cfg,
        project: harness_spec::Project::Cli,
        budget: None,
        id: "conformance".into(),
        catalog: Box::new(CaseCatalog),
        permissions: Box::new(AskFor(
            case.get("ask")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        )),
        subagent,
        hygiene: true,
    })
}

/// A step's string field, empty when absent.
fn step_text(step: &Value, key: &str) -> String {
    step.get(key).and_then(Value::as_str).unwrap_or("").into()
}

/// A step's job id, 0 when absent.
fn step_job(step: &Value) -> u32 {
    step.get("id").and_then(Value::as_u64).unwrap_or(0) as u32
}

/// Step `k`'s input: a model step's calls numbered on from `call_no`, a results step's
/// outputs paired with the calls last run; a malformed step's outcome as the error.
fn step_input(
    k: usize,
    step: &Value,
    call_no: &mut usize,
    last_calls: &[ToolCall],
) -> Result<Input, Outcome> {
    Ok(
        match step
            .get("input")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "prompt" => Input::Prompt {
                text: step_text(step, "text"),
            },
            "model" => {
                let mut calls = Vec::new();
                for c in step
                    .get("calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    *call_no += 1;
                    calls.push(ToolCall {
                        id: format!("call_{call_no}"),
                        name: c.get("name").and_then(Value::as_str).unwrap_or("").into(),
                        arguments: c.get("arguments").cloned().unwrap_or_else(|| json!({})),
                    });
                }
                Input::Model(ModelOutput {
                    text: step_text(step, "text"),
                    tool_calls: calls,
                    ..ModelOutput::default()
                })
            }
            "results" => {
                let outputs: Vec<&str> = step
                    .get("outputs")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                Input::ToolResults(
                    last_calls
                        .iter()
                        .zip(outputs)
                        .map(|(c, o)| ToolOutcome::ok(c.id.clone(), o))
                        .collect(),
                )
            }
            "job_output" => Input::JobOutput {
                id: step_job(step),
                text: step_text(step, "text"),
            },
            "job_ended" => Input::JobEnded {
                id: step_job(step),
                end: match step.get("end").cloned().map(serde_json::from_value) {
                    Some(Ok(e)) => e,
                    _ => return Err(Outcome::malformed(format!("step {k}: `end` is a JobEnd"))),
                },
                final_reply: step
                    .get("final_reply")
                    .and_then(Value::as_str)
                    .map(String::from),
            },
            "report" => Input::Report {
                id: step_job(step),
                text: step_text(step, "text"),
            },
            "answer" => Input::Answer {
                call_id: step_text(step, "call_id"),
                answer: Answer::Once,
            },
            "message" => Input::Message {
                text: step_text(step, "text"),
            },
            "cancel" => Input::Cancel,
            other => {
                return Err(Outcome::malformed(format!(
                    "step {k}: unknown input `{other}`"
                )));
            }
        },
    )
}

/// What a step's actions showed, as a case's `expect` says it: the actions' names, a model
/// request's last user text and results, a started job, the turn's end and origin; the calls
/// run are kept for the next results step.
fn seen_in(actions: &[Action], last_calls: &mut Vec<ToolCall>) -> Map<String, Value> {
    let mut got = Map::new();
    let names: Vec<&str> = actions.iter().filter_map(action_name).collect();
    got.insert("actions".into(), json!(names));
    for a in actions {
        match a {
            Action::CallModel(req) => {
                let last_user = req.messages.iter().rev().find_map(|m| match m {
                    Message::User { text, .. } => Some(text.clone()),
                    _ => None,
                });
                got.insert("last_user".into(), json!(last_user));
                let tools: Vec<Value> = req
                    .messages
                    .iter()
                    .filter_map(|m| match m {
                        Message::Tool { text, .. } => {
                            Some(json!(text.lines().skip(1).collect::<Vec<_>>().join("\n")))
                        }
                        _ => None,
                    })
                    .collect();
                got.insert("tool_results".into(), Value::Array(tools));
            }
            Action::RunTools { calls, .. } => *last_calls = calls.clone(),
            Action::StartJob { id, .. } => {
                got.insert("job".into(), json!(id));
            }
            Action::EndTurn(reason) => {
                got.insert(
                    "end".into(),
                    serde_json::to_value(reason).unwrap_or(Value::Null),
                );
            }
            Action::Emit(harness_core::protocol::Event::UserInput { origin, .. }) => {
                got.insert("turn_origin".into(), json!(origin));
            }
            _ => {}
        }
    }
    got
}

/// Allows every call but those of the tools named, which it asks about (a case's `ask`).
struct AskFor(Vec<String>);

impl crate::session::Permissions for AskFor {
    fn decide(&self, call: &ToolCall) -> crate::session::Decision {
        if !self.0.contains(&call.name) {
            return crate::session::Decision::Allow;
        }
        let subject = call
            .arguments
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or(&call.name)
            .to_owned();
        crate::session::Decision::Ask(harness_core::protocol::PermissionQuestion {
            tool: call.name.clone(),
            risk: harness_spec::Risk::Execute,
            subject,
            pattern: None,
            reason: Some("asked by the case".into()),
            change: None,
        })
    }
}

/// Area `loop`: the rules of one session's run that the other areas do not hold — which calls
/// of a model's batch run side by side (`parallel`), the servers' slots (`capacity`), and the
/// compaction's request and what replaces the history (`context.compaction`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopRunner;

impl AreaRunner for LoopRunner {
    fn area(&self) -> &'static str {
        "loop"
    }

    fn run(&self, case: &Value) -> Outcome {
        let mut cfg = match config() {
            Ok(c) => c,
            Err(o) => return o,
        };
        if let Some(calls) = case.get("calls").and_then(Value::as_array) {
            return run_batches(cfg, calls, case);
        }
        if let Some(setup) = case.get("capacity") {
            if let Some(n) = setup.get("default").and_then(Value::as_u64) {
                cfg.capacity.default_concurrent_requests = n as u32;
            }
            if let Some(b) = setup.get("subagents_count").and_then(Value::as_bool) {
                cfg.capacity.subagents_count = b;
            }
            return run_capacity(cfg, setup, case);
        }
        if let Some(setup) = case.get("compaction") {
            return run_compaction(cfg, setup, case);
        }
        Outcome::malformed("a loop case needs `calls`, `capacity` or `compaction`")
    }
}

/// A session of the CLI whose permissions allow every call but those of `ask`.
fn case_session(cfg: LoopConfig, ask: Vec<String>) -> Session {
    Session::new(SessionSetup {
        config: cfg,
        project: harness_spec::Project::Cli,
        budget: None,
        id: "conformance".into(),
        catalog: Box::new(CaseCatalog),
        permissions: Box::new(AskFor(ask)),
        subagent: false,
        hygiene: true,
    })
}

/// The case's calls as a model's answer, ids `call_1`, `call_2`, ...
fn model_calls(calls: &[Value]) -> ModelOutput {
    let tool_calls = calls
        .iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            id: format!("call_{}", i + 1),
            name: c.get("name").and_then(Value::as_str).unwrap_or("").into(),
            arguments: c.get("arguments").cloned().unwrap_or_else(|| json!({})),
        })
        .collect();
    ModelOutput {
        tool_calls,
        ..ModelOutput::default()
    }
}

/// `calls`: a model's answer of these calls in a session that allows them all; `expect`
/// `{runs: [{calls: [names in order], parallel}]}`, every run of tools until the next request.
fn run_batches(cfg: LoopConfig, calls: &[Value], case: &Value) -> Outcome {
    let mut session = case_session(cfg, Vec::new());
    let mut runs = Vec::new();
    let mut next = session.handle(Input::Prompt { text: "go".into() });
    next = next.and_then(|_| session.handle(Input::Model(model_calls(calls))));
    loop {
        let actions = match next {
            Ok(a) => a,
            Err(e) => return Outcome::compare(case, json!({"error": e.to_string()})),
        };
        let Some((calls, parallel)) = actions.into_iter().find_map(|a| match a {
            Action::RunTools { calls, parallel } => Some((calls, parallel)),
            _ => None,
        }) else {
            break;
        };
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        runs.push(json!({"calls": names, "parallel": parallel}));
        let results = calls
            .iter()
            .map(|c| ToolOutcome::ok(c.id.clone(), "ok"))
            .collect();
        next = session.handle(Input::ToolResults(results));
    }
    Outcome::compare(case, json!({"runs": runs}))
}

/// A holder written `request:ID` or `subagent:ID`.
fn holder(text: &str) -> Option<crate::capacity::Holder> {
    use crate::capacity::Holder;
    match text.split_once(':')? {
        ("request", id) => Some(Holder::Request(id.into())),
        ("subagent", id) => Some(Holder::Subagent(id.into())),
        _ => None,
    }
}

fn holder_text(h: &crate::capacity::Holder) -> String {
    use crate::capacity::Holder;
    match h {
        Holder::Request(id) => format!("request:{id}"),
        Holder::Subagent(id) => format!("subagent:{id}"),
    }
}

/// `capacity` {slots?: {server: n}, default?, subagents_count?}: `steps` of `{acquire: {server,
/// who}}`, `{release: {server, who}}` or `{available: server}`; expected per step `{admit: now}`,
/// `{admit: queued, position}`, `{admitted: [who, in order]}` or `{available: n}`.
fn run_capacity(cfg: LoopConfig, setup: &Value, case: &Value) -> Outcome {
    use crate::capacity::{Admit, Capacity};
    let mut cap = Capacity::new(cfg.capacity);
    for (server, n) in setup
        .get("slots")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        cap.set_slots(server, n.as_u64().unwrap_or(1) as u32);
    }
    let Some(steps) = case.get("steps").and_then(Value::as_array) else {
        return Outcome::malformed("a capacity case needs `steps`");
    };
    let mut actual = Vec::new();
    for (k, step) in steps.iter().enumerate() {
        let who = |op: &Value| -> Option<(String, crate::capacity::Holder)> {
            let server = op.get("server")?.as_str()?.to_owned();
            Some((server, holder(op.get("who")?.as_str()?)?))
        };
        let got = if let Some(op) = step.get("acquire") {
            let Some((server, h)) = who(op) else {
                return Outcome::malformed(format!("step {k}: acquire needs server and who"));
            };
            match cap.acquire(&server, h) {
                Admit::Now => json!({"admit": "now"}),
                Admit::Queued { position } => json!({"admit": "queued", "position": position}),
            }
        } else if let Some(op) = step.get("release") {
            let Some((server, h)) = who(op) else {
                return Outcome::malformed(format!("step {k}: release needs server and who"));
            };
            let admitted: Vec<String> = cap.release(&server, &h).iter().map(holder_text).collect();
            json!({"admitted": admitted})
        } else if let Some(server) = step.get("available").and_then(Value::as_str) {
            json!({"available": cap.available(server)})
        } else {
            return Outcome::malformed(format!("step {k}: acquire, release or available"));
        };
        actual.push(got);
    }
    Outcome::compare(case, Value::Array(actual))
}

/// `compaction` {turns: [{prompt, answer}], open_call?: {name, arguments}, answer}: the turns are
/// held (each prompt answered in text), then, with `open_call`, one more prompt whose answer is
/// that call, left asked about; then the compaction's request is taken and `answer` given to it.
/// Expect `{request: {messages, last, tools} | null, history?: [texts], error?}`.
fn run_compaction(cfg: LoopConfig, setup: &Value, case: &Value) -> Outcome {
    let mut session = case_session(cfg, vec!["bash".into()]);
    let said = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    for turn in setup
        .get("turns")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = said(turn, "prompt");
        let answer = ModelOutput {
            text: said(turn, "answer"),
            ..ModelOutput::default()
        };
        if let Err(e) = session
            .handle(Input::Prompt { text })
            .and_then(|_| session.handle(Input::Model(answer)))
        {
            return Outcome::malformed(format!("a turn was refused: {e}"));
        }
    }
    if let Some(call) = setup.get("open_call")
        && let Err(e) = session
            .handle(Input::Prompt { text: "go".into() })
            .and_then(|_| session.handle(Input::Model(model_calls(std::slice::from_ref(call)))))
    {
        return Outcome::malformed(format!("the open call was refused: {e}"));
    }
    let text_of = |m: &Message| match m {
        Message::User { text, .. } | Message::Assistant { text, .. } => text.clone(),
        Message::Tool { text, .. } | Message::System { text } => text.clone(),
    };
    let mut got = Map::new();
    let request = session.summary_request().map(|r| {
        json!({
            "messages": r.messages.len(),
            "last": r.messages.last().map(text_of),
            "tools": r.tools,
        })
    });
    got.insert("request".into(), request.clone().unwrap_or(Value::Null));
    if request.is_some() {
        match session.compact_with_answer(&said(setup, "answer")) {
            Ok(_) => {
                let history: Vec<String> = session.history().iter().map(text_of).collect();
                got.insert("history".into(), json!(history));
            }
            Err(e) => {
                got.insert("error".into(), json!(e.to_string()));
            }
        }
    }
    Outcome::compare(case, Value::Object(got))
}
