//! Sessions of the runtime against the scripted model: multi-step turns, a permission asked and
//! answered, a background job waking the session, a subagent, compaction, resume after a crash,
//! cancellation, and the catalogue.

use std::sync::Arc;
use std::time::Duration;

use harness_agent::{
    CoreEvent, Ended, Event, MemoryStore, Op, Reply, ScriptedModel, SessionBuilder,
    SessionStore as _, Spawned,
};
use harness_core::protocol::{Answer, JobEnd, Mode, TurnEnd};
use harness_loop::transcript::Entry;
use serde_json::json;

use super::*;

fn session(model: &ScriptedModel, store: &Arc<MemoryStore>, mode: Mode) -> SessionBuilder {
    SessionBuilder::new(Arc::new(model.clone()), TestWorld::new())
        .store(store.clone())
        .jobs(Arc::new(QuickJobs))
        .mode(mode)
}

/// Runs the session until it is idle, answering with `answer` what it asks.
async fn run_answering(builder: SessionBuilder, answer: Option<Answer>) -> (Ended, Vec<Event>) {
    let Spawned {
        session,
        mut events,
        mut run,
    } = builder.one_shot(None).spawn().unwrap();
    let mut outs = Vec::new();
    let collect = async {
        while let Some(o) = events.recv().await {
            if let (Event::Core(CoreEvent::ToolCallAsked { call_id, .. }), Some(a)) = (&o, &answer)
            {
                assert!(session.submit(Op::Answer {
                    call_id: call_id.clone(),
                    answer: a.clone(),
                }));
            }
            outs.push(o);
        }
        std::future::pending::<()>().await;
    };
    let ended = tokio::select! {
        e = &mut run => e.unwrap(),
        () = collect => unreachable!("the collection waits for ever"),
    };
    ended.result.as_ref().unwrap();
    outs.extend(events.drain());
    (ended, outs)
}

/// The tools a request offers: those sent whole, and those the loader (`load_tools`) lists by
/// one line each (`- NAME: SUMMARY`).
fn tool_names(request: &harness_model::ChatRequest) -> Vec<String> {
    let mut names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
    if let Some(loader) = request.tools.iter().find(|t| t.name == "load_tools") {
        names.extend(loader.description.lines().filter_map(|l| {
            l.strip_prefix("- ")
                .and_then(|l| l.split_once(':'))
                .map(|(n, _)| n.to_owned())
        }));
    }
    names
}

#[tokio::test]
async fn a_deferred_tool_runs_when_called_and_is_sent_whole_once_loaded() {
    let model = ScriptedModel::new([
        Reply::call("job_list", json!({})),
        Reply::call("load_tools", json!({"names": ["job_list"]})),
        Reply::text("done"),
    ]);
    let store = Arc::new(MemoryStore::default());
    let built = session(&model, &store, Mode::Auto).prompt("jobs?");
    let (_d, outs) = run_answering(built, None).await;
    let requests = model.requests();
    let sent =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert!(!sent(0).contains(&"job_list".to_owned()), "{:?}", sent(0));
    assert!(tool_names(&requests[0]).contains(&"job_list".to_owned()));
    let first = first_result(&outs);
    assert!(!first.is_error, "{}", first.content);
    assert!(sent(2).contains(&"job_list".to_owned()), "{:?}", sent(2));
}

fn ended(outs: &[Event]) -> Vec<TurnEnd> {
    events(outs)
        .into_iter()
        .filter_map(|e| match e {
            CoreEvent::TurnEnded { reason } => Some(reason),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_turn_of_several_steps_runs_the_worlds_tools_and_is_stored() {
    let model = ScriptedModel::new([
        Reply::call("clock", json!({})),
        Reply::call("bash", json!({"command": "echo hi"})),
        Reply::text("It is noon and hi."),
    ]);
    let store = Arc::new(MemoryStore::default());
    let built = session(&model, &store, Mode::Auto).prompt("What time is it?");
    let (ended_as, outs) = run_answering(built, None).await;
    let id = ended_as.id;
    assert_eq!(text(&outs), "It is noon and hi.");
    assert_eq!(ended(&outs), [TurnEnd::Finished]);
    // The command's output came as it ran, before its result.
    let streamed = outs
        .iter()
        .position(|o| matches!(o, Event::ToolOutput { text, .. } if text == "echo hi\n"))
        .expect("the output came as it ran");
    let finished = outs
        .iter()
        .position(|o| {
            matches!(o, Event::Core(CoreEvent::ToolCallFinished { result }) if result.content.contains("echo hi\nexit code 0"))
        })
        .expect("the call finished");
    assert!(streamed < finished);
    // Three requests; the second carries the clock's answer.
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let sent = serde_json::to_string(&requests[1].messages).unwrap();
    assert!(sent.contains("12:00"), "{sent}");
    // The transcript has the turn, step by step.
    let kinds: Vec<&str> = store
        .transcript(&id)
        .iter()
        .map(|e| match e {
            Entry::TurnStarted { .. } => "turn_started",
            Entry::Assistant { .. } => "assistant",
            Entry::ToolResult { .. } => "tool_result",
            Entry::TurnEnded { .. } => "turn_ended",
            Entry::CallsStarted { .. } => "calls_started",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "turn_started",
            "assistant",
            "calls_started",
            "tool_result",
            "assistant",
            "calls_started",
            "tool_result",
            "assistant",
            "turn_ended"
        ]
    );
    assert_eq!(store.find(&id).unwrap().title, "What time is it?");
}

#[tokio::test]
async fn a_risky_call_is_asked_and_runs_only_when_allowed() {
    for (answer, ran) in [
        (Answer::Once, true),
        (Answer::Deny { feedback: None }, false),
    ] {
        let model = ScriptedModel::new([Reply::call("launch", json!({})), Reply::text("ok")]);
        let store = Arc::new(MemoryStore::default());
        let world = TestWorld::new();
        let built = SessionBuilder::new(Arc::new(model.clone()), world.clone())
            .store(store)
            .mode(Mode::Manual)
            .prompt("Launch it.");
        let (_d, outs) = run_answering(built, Some(answer.clone())).await;
        let asked = events(&outs)
            .into_iter()
            .find_map(|e| match e {
                CoreEvent::ToolCallAsked { question, .. } => Some(question),
                _ => None,
            })
            .expect("manual mode asks before an execute");
        assert_eq!(asked.tool, "launch");
        assert_eq!(
            world.calls.lock().unwrap().contains(&"launch".to_owned()),
            ran,
            "{answer:?}"
        );
        assert_eq!(ended(&outs), [TurnEnd::Finished]);
    }
}

#[tokio::test]
async fn a_background_job_wakes_the_session_when_it_ends() {
    let model = ScriptedModel::new([
        Reply::call("bash", json!({"command": "make", "background": true})),
        Reply::text("Started it."),
        Reply::text("The build is done."),
    ]);
    let store = Arc::new(MemoryStore::default());
    let built = session(&model, &store, Mode::Auto).prompt("Build in the background.");
    let (driver, outs) = run_answering(built, None).await;
    let evs = events(&outs);
    assert!(
        evs.iter()
            .any(|e| matches!(e, CoreEvent::JobStarted { .. })),
        "{evs:?}"
    );
    assert!(evs.iter().any(|e| matches!(
        e,
        CoreEvent::JobEnded {
            end: JobEnd::Done { exit_code: Some(0) },
            ..
        }
    )));
    assert_eq!(model.requests().len(), 3, "the job's end woke the model");
    assert!(text(&outs).ends_with("The build is done."));
    assert_eq!(driver.running_jobs, 0);
}

#[tokio::test]
async fn a_subagent_runs_as_a_child_session_and_its_reply_answers_the_task() {
    let model = ScriptedModel::new([
        Reply::call(
            "task",
            json!({"agent": "explore", "prompt": "Find the notes."}),
        ),
        Reply::text("The notes are in notes.md."),
        Reply::text("The explorer found them."),
    ]);
    let store = Arc::new(MemoryStore::default());
    let built = session(&model, &store, Mode::Auto).prompt("Where are the notes?");
    let (_d, outs) = run_answering(built, None).await;
    let result = first_result(&outs);
    // The result as the model reads it: its id, then the subagent's reply.
    assert!(
        result.content.ends_with("\nThe notes are in notes.md."),
        "{}",
        result.content
    );
    let requests = model.requests();
    let parent = tool_names(&requests[0]);
    let child = tool_names(&requests[1]);
    assert!(parent.contains(&"task".to_owned()) && !parent.contains(&"report".to_owned()));
    assert!(child.contains(&"report".to_owned()) && !child.contains(&"task".to_owned()));
    // The explore agent is read-only: no bash.
    assert!(!child.contains(&"bash".to_owned()), "{child:?}");
}

#[tokio::test]
async fn the_catalogue_offers_what_something_answers() {
    let model = ScriptedModel::new([Reply::text("hi")]);
    let store = Arc::new(MemoryStore::default());
    let built = session(&model, &store, Mode::Auto).prompt("hi");
    let _ = run_answering(built, None).await;
    let names = tool_names(&model.requests()[0]);
    for offered in [
        "bash",
        "clock",
        "launch",
        "job_send",
        "job_list",
        "recall",
        "plan_write",
    ] {
        assert!(names.contains(&offered.to_owned()), "{offered}: {names:?}");
    }
    // Not run by this world, and nobody to answer a question or search sessions.
    for absent in [
        "read",
        "write",
        "question",
        "session_search",
        "web_fetch",
        "report",
    ] {
        assert!(!names.contains(&absent.to_owned()), "{absent}: {names:?}");
    }
}

#[tokio::test]
async fn job_send_reaches_a_running_command_as_the_spec_answers() {
    let model = ScriptedModel::new([
        Reply::call("job_send", json!({"id": 7, "message": "hello"})),
        Reply::text("done"),
    ]);
    let store = Arc::new(MemoryStore::default());
    let built = session(&model, &store, Mode::Auto).prompt("send");
    let (_d, outs) = run_answering(built, None).await;
    let result = first_result(&outs);
    // Answered by the loop's job rules, not "Unknown tool".
    assert!(result.is_error, "{result:?}");
    assert!(
        !result.content.contains("Unknown tool"),
        "{}",
        result.content
    );
    assert!(result.content.contains('7'), "{}", result.content);
}

#[tokio::test]
async fn compaction_replaces_the_history_with_the_summary() {
    let model = ScriptedModel::new([
        Reply::text("First answer."),
        Reply::text("SUMMARY: we said hello."),
        Reply::text("Second answer."),
    ]);
    let store = Arc::new(MemoryStore::default());
    let Spawned {
        session: ctl,
        events: mut out,
        run,
    } = session(&model, &store, Mode::Auto)
        .prompt("Hello.")
        .spawn()
        .unwrap();
    let id = ctl.id().to_owned();
    let mut outs = Vec::new();
    while let Some(o) = out.recv().await {
        let done = matches!(o, Event::Core(CoreEvent::TurnEnded { .. }));
        outs.push(o);
        if done {
            break;
        }
    }
    let said = ctl.compact().await.unwrap();
    assert!(said.starts_with("compacted"), "{said}");
    assert!(ctl.submit(Op::Prompt {
        text: "Again.".into(),
        origin: Default::default(),
        images: Vec::new(),
    }));
    loop {
        let o = out.recv().await.unwrap();
        let done = matches!(o, Event::Core(CoreEvent::TurnEnded { .. }));
        outs.push(o);
        if done {
            break;
        }
    }
    drop(ctl);
    run.finished().await.unwrap().result.unwrap();
    assert!(
        events(&outs)
            .iter()
            .any(|e| matches!(e, CoreEvent::Compacted { .. })),
        "the core's Compacted event"
    );
    let last = model.requests().pop().unwrap();
    let sent = serde_json::to_string(&last.messages).unwrap();
    assert!(sent.contains("we said hello"), "{sent}");
    assert!(!sent.contains("First answer."), "{sent}");
    assert!(
        store
            .transcript(&id)
            .iter()
            .any(|e| matches!(e, Entry::Compacted { .. }))
    );
}

#[tokio::test]
async fn a_resumed_session_goes_on_and_ends_what_a_crash_left_running() {
    let model = ScriptedModel::new([
        Reply::call("bash", json!({"command": "serve", "background": true})),
        Reply::text("Serving."),
    ]);
    let store = Arc::new(MemoryStore::default());
    let Spawned {
        session: ctl,
        events: mut out,
        run,
    } = SessionBuilder::new(Arc::new(model.clone()), TestWorld::new())
        .store(store.clone())
        .jobs(Arc::new(NeverEnds))
        .mode(Mode::Auto)
        .prompt("Start the server.")
        .spawn()
        .unwrap();
    let id = ctl.id().to_owned();
    loop {
        if let Some(Event::Core(CoreEvent::TurnEnded { .. })) = out.recv().await {
            break;
        }
    }
    // The process dies with its job running.
    run.abort();
    assert!(run.finished().await.is_err(), "the task was aborted");
    drop(ctl);

    let entries = store.load(&id).unwrap();
    let model2 = ScriptedModel::new([Reply::text("Back again.")]);
    let built = SessionBuilder::new(Arc::new(model2.clone()), TestWorld::new())
        .store(store.clone())
        .mode(Mode::Auto)
        .resume(store.find(&id).unwrap(), entries)
        .prompt("Are you there?");
    let (_d, outs) = run_answering(built, None).await;
    // What the crash left running ended before the prompt ran.
    let lost: Vec<Event> = outs
        .iter()
        .take_while(|o| !matches!(o, Event::Core(CoreEvent::UserInput { .. })))
        .cloned()
        .collect();
    assert!(
        events(&lost).iter().any(|e| matches!(
            e,
            CoreEvent::JobEnded {
                end: JobEnd::Failed { .. },
                ..
            }
        )),
        "{lost:?}"
    );
    assert_eq!(text(&outs), "Back again.");
    let sent = serde_json::to_string(&model2.requests()[0].messages).unwrap();
    assert!(
        sent.contains("Start the server.") && sent.contains("Serving."),
        "{sent}"
    );
}

#[tokio::test]
async fn a_cancel_stops_the_running_call_and_ends_the_turn() {
    let model = ScriptedModel::new([Reply::call("bash", json!({"command": "sleep 100"}))]);
    let store = Arc::new(MemoryStore::default());
    let Spawned {
        session: ctl,
        events: mut out,
        run,
    } = session(&model, &store, Mode::Auto)
        .prompt("Wait.")
        .one_shot(None)
        .spawn()
        .unwrap();
    let mut outs = Vec::new();
    while let Some(o) = out.recv().await {
        if matches!(o, Event::Core(CoreEvent::ToolCallStarted { .. })) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(ctl.submit(Op::Cancel));
        }
        let done = matches!(o, Event::Core(CoreEvent::TurnEnded { .. }));
        outs.push(o);
        if done {
            break;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the driver went idle after the cancel");
    assert_eq!(ended(&outs), [TurnEnd::Cancelled]);
}

#[tokio::test]
async fn show_reads_through_the_world_and_refuses_what_it_cannot_see() {
    let model = ScriptedModel::new([
        Reply::call("show", json!({"path": "/etc/passwd"})),
        Reply::call("show", json!({"path": "notes.md"})),
        Reply::text("shown"),
    ]);
    let store = Arc::new(MemoryStore::default());
    let Spawned {
        session: ctl,
        events: mut out,
        run,
    } = session(&model, &store, Mode::Auto)
        .holds_display(true)
        .prompt("Show me.")
        .one_shot(None)
        .spawn()
        .unwrap();
    let mut results = Vec::new();
    let mut shown = Vec::new();
    while let Some(o) = out.recv().await {
        match o {
            Event::Show {
                call_id, content, ..
            } => {
                shown.push(content);
                assert!(ctl.submit(Op::Reply {
                    call_id,
                    text: Some("opened".into())
                }));
            }
            Event::Core(CoreEvent::ToolCallFinished { result }) => results.push(result),
            Event::Core(CoreEvent::TurnEnded { .. }) => break,
            _ => {}
        }
    }
    let _ = run.await;
    assert_eq!(shown, ["# Notes\n"]);
    assert!(results[0].is_error);
    assert!(
        results[0].content.contains("No such file"),
        "{}",
        results[0].content
    );
    assert!(
        results[1]
            .content
            .ends_with("\n/work/notes.md is open for the person to see."),
        "{}",
        results[1].content
    );
}

/// Jobs that never end by themselves.
struct NeverEnds;

struct Forever;

impl harness_agent::Process for Forever {
    fn output(&self) -> String {
        String::new()
    }

    fn wait_for(
        &self,
        timeout: Duration,
    ) -> harness_agent::BoxFuture<'_, Option<harness_agent::Exit>> {
        Box::pin(async move {
            tokio::time::sleep(timeout).await;
            None
        })
    }

    fn stop(&self) -> harness_agent::BoxFuture<'_, harness_agent::Exit> {
        Box::pin(async { harness_agent::Exit::Signal(9) })
    }
}

impl harness_agent::JobSpawner for NeverEnds {
    fn spawn(
        &self,
        _command: &str,
    ) -> Result<Arc<dyn harness_agent::Process>, harness_agent::SeamError> {
        Ok(Arc::new(Forever))
    }
}

#[test]
fn every_turn_end_has_one_acp_stop_reason() {
    let budget = |limit: &str| TurnEnd::Budget {
        limit: limit.into(),
    };
    for (end, stop) in [
        (TurnEnd::Finished, Ok("end_turn")),
        (TurnEnd::PlanSubmitted, Ok("end_turn")),
        (TurnEnd::Cancelled, Ok("cancelled")),
        (budget("tokens"), Ok("max_tokens")),
        (budget("steps"), Ok("max_turn_requests")),
        (TurnEnd::ContextOverflow, Ok("max_tokens")),
        (
            TurnEnd::Error {
                message: "the server is gone".into(),
            },
            Err("the server is gone".to_owned()),
        ),
        (
            TurnEnd::ModelUnavailable {
                message: "cannot reach the model server".into(),
            },
            Err("cannot reach the model server".to_owned()),
        ),
    ] {
        assert_eq!(harness_agent::stop_reason(&end), stop, "{end:?}");
    }
}

#[tokio::test]
async fn several_sessions_run_at_once_each_until_its_last_handle_goes() {
    let store = Arc::new(MemoryStore::default());
    let a = ScriptedModel::new([Reply::text("from a")]);
    let b = ScriptedModel::new([Reply::text("from b")]);
    let mut sa = session(&a, &store, Mode::Auto).spawn().unwrap();
    let mut sb = session(&b, &store, Mode::Auto).spawn().unwrap();
    assert_ne!(sa.session.id(), sb.session.id());
    for (s, prompt) in [(&sa.session, "hello a"), (&sb.session, "hello b")] {
        assert!(s.submit(Op::Prompt {
            text: prompt.into(),
            origin: Default::default(),
            images: Vec::new(),
        }));
    }
    let (got_a, got_b) = tokio::join!(until_end(&mut sa.events), until_end(&mut sb.events));
    assert_eq!(text(&got_a), "from a");
    assert_eq!(text(&got_b), "from b");
    // Sessions offered the same tools send one shared copy of them.
    let (sent_a, sent_b) = (a.requests(), b.requests());
    assert!(!sent_a[0].tools.is_empty());
    assert!(Arc::ptr_eq(&sent_a[0].tools, &sent_b[0].tools));
    // A weak handle does not keep a session alive; the last handle's drop ends it.
    let weak = sa.session.downgrade();
    assert!(weak.upgrade().is_some());
    drop(sa.session);
    sa.run.finished().await.unwrap().result.unwrap();
    assert!(weak.upgrade().is_none());
    drop(sb.session);
    sb.run.finished().await.unwrap().result.unwrap();
}

async fn until_end(out: &mut harness_agent::Events) -> Vec<Event> {
    let mut outs = Vec::new();
    while let Some(o) = out.recv().await {
        let done = matches!(o, Event::Core(CoreEvent::TurnEnded { .. }));
        outs.push(o);
        if done {
            break;
        }
    }
    outs
}

/// The first call's result among the outs.
fn first_result(outs: &[Event]) -> harness_core::protocol::ToolResult {
    events(outs)
        .into_iter()
        .find_map(|e| match e {
            CoreEvent::ToolCallFinished { result } => Some(result),
            _ => None,
        })
        .expect("a call finished")
}

#[tokio::test]
async fn a_subagent_cannot_ask_so_its_risky_call_is_declined_and_the_person_told() {
    let model = ScriptedModel::new([
        Reply::call("task", json!({"agent": "general", "prompt": "Launch it."})),
        Reply::call("launch", json!({})),
        Reply::text("I could not launch it."),
        Reply::text("The subagent could not launch."),
    ]);
    let store = Arc::new(MemoryStore::default());
    let world = TestWorld::new();
    let built = SessionBuilder::new(Arc::new(model.clone()), world.clone())
        .store(store)
        .mode(Mode::Manual)
        .prompt("Have a subagent launch it.");
    // The task itself asks (an execute in manual mode); the person allows it once.
    let (_d, outs) = run_answering(built, Some(Answer::Once)).await;
    assert!(!world.calls.lock().unwrap().contains(&"launch".to_owned()));
    let notices = notices(&outs);
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("task general: a subagent's call was declined")),
        "{notices:?}"
    );
    // The subagent's model read the spec's answer.
    let sent = serde_json::to_string(&model.requests()[2].messages).unwrap();
    assert!(sent.contains("a subagent cannot ask them"), "{sent}");
    assert_eq!(ended(&outs), [TurnEnd::Finished]);
    // The person saw the subagent's call start and fail, under the task, before its result.
    let all = events(&outs);
    let task = all
        .iter()
        .find_map(|e| match e {
            CoreEvent::ToolCallStarted { call, .. } if call.name == "task" => Some(call.id.clone()),
            _ => None,
        })
        .unwrap();
    let seen: Vec<(usize, String, String)> = all
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            CoreEvent::SubagentCall {
                task_call_id,
                job_id,
                call,
                status,
                ..
            } => {
                assert_eq!(task_call_id.as_deref(), Some(task.as_str()));
                assert_eq!(job_id, &None);
                Some((i, call.name.clone(), serde_json::to_string(status).unwrap()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].1, "launch");
    assert_eq!(seen[0].2, r#"{"status":"started"}"#);
    assert!(
        seen[1].2.starts_with(r#"{"status":"failed","reason":"#),
        "{seen:?}"
    );
    let task_result = all
        .iter()
        .position(|e| matches!(e, CoreEvent::ToolCallFinished { result } if result.call_id == task))
        .unwrap();
    assert!(seen[1].0 < task_result, "{seen:?} after {task_result}");
}

#[tokio::test]
async fn a_running_subagent_holds_a_slot_and_the_main_agent_waits_for_it() {
    // One slot (loop.json's default for a model that says none).
    let model = ScriptedModel::new([
        Reply::call(
            "task",
            json!({"agent": "general", "prompt": "Look around.", "background": true}),
        ),
        Reply::text("Looked around."),
        Reply::text("Going on."),
        Reply::text("All done."),
    ]);
    let store = Arc::new(MemoryStore::default());
    let built = session(&model, &store, Mode::Auto).prompt("Start a helper.");
    let (_d, outs) = run_answering(built, None).await;
    let notices = notices(&outs);
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("waiting for a free slot of scripted")),
        "{notices:?}"
    );
    // The subagent's request came before the main agent's next one.
    let requests = model.requests();
    assert!(tool_names(&requests[1]).contains(&"report".to_owned()));
    assert!(!tool_names(&requests[2]).contains(&"report".to_owned()));
}

#[tokio::test]
async fn a_request_waits_for_a_slot_and_a_cancel_leaves_the_line() {
    let gate = Arc::new(harness_agent::CapacityGate::new().unwrap());
    let first = harness_loop::capacity::Holder::Request("a".into());
    let second = harness_loop::capacity::Holder::Request("b".into());
    let never = harness_model::CancellationToken::new();
    assert!(gate.acquire("srv", &first, &never, &mut |_| {}).await);
    let g = gate.clone();
    let waiting = tokio::spawn(async move {
        let mut place = None;
        let got = g
            .acquire(
                "srv",
                &second,
                &harness_model::CancellationToken::new(),
                &mut |p| place = Some(p),
            )
            .await;
        (got, place)
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "one slot: the second request waits");
    gate.release("srv", &first);
    let (got, place) = waiting.await.unwrap();
    assert!(got);
    assert_eq!(place, Some(1));
    // A cancelled waiter gives its place back.
    let cancel = harness_model::CancellationToken::new();
    cancel.cancel();
    let third = harness_loop::capacity::Holder::Request("c".into());
    assert!(!gate.acquire("srv", &third, &cancel, &mut |_| {}).await);
    assert_eq!(gate.in_use("srv"), 1);
}

/// The notices' texts among the outs.
fn notices(outs: &[Event]) -> Vec<String> {
    events(outs)
        .into_iter()
        .filter_map(|e| match e {
            CoreEvent::Notice { text, .. } => Some(text),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_stopped_answer_keeps_what_was_shown_and_is_not_asked_again() {
    let model = ScriptedModel::new([
        Reply::Stall("Here is the start".into()),
        Reply::text("Fine."),
    ]);
    let store = Arc::new(MemoryStore::default());
    let Spawned {
        session: ctl,
        events: mut out,
        run,
    } = session(&model, &store, Mode::Auto)
        .prompt("slow answer please")
        .spawn()
        .unwrap();
    let mut ended = 0;
    let mut cancelled = false;
    while let Some(o) = out.recv().await {
        match o {
            Event::Core(CoreEvent::TextDelta { .. }) if !cancelled => {
                cancelled = true;
                assert!(ctl.submit(Op::Cancel));
            }
            Event::Core(CoreEvent::TurnEnded { .. }) => {
                ended += 1;
                if ended == 1 {
                    assert!(ctl.submit(Op::Prompt {
                        text: "danger".into(),
                        origin: harness_core::protocol::Origin::Person,
                        images: Vec::new(),
                    }));
                } else {
                    break;
                }
            }
            _ => {}
        }
    }
    drop(ctl);
    let _ = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the driver ended");
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let stopped = harness_loop::config::LoopConfig::embedded()
        .unwrap()
        .calls
        .stopped_turn
        .clone();
    let texts: Vec<(&str, &str)> = requests[1].messages[1..]
        .iter()
        .map(|m| match m {
            harness_loop::message::Message::User { text, .. } => ("user", text.as_str()),
            harness_loop::message::Message::Assistant { text, .. } => ("assistant", text.as_str()),
            other => ("other", other.text()),
        })
        .collect();
    assert_eq!(
        texts,
        [
            ("user", "slow answer please"),
            ("assistant", "Here is the start"),
            ("user", stopped.as_str()),
            ("user", "danger"),
        ]
    );
}

/// A world that runs `edit` and `write` over one file, `/work/notes.md`.
struct EditWorld;

impl harness_agent::ToolWorld for EditWorld {
    fn runs(&self, name: &str) -> bool {
        matches!(name, "edit" | "write")
    }

    fn call<'a>(
        &'a self,
        call: &'a harness_core::protocol::ToolCall,
        _cx: harness_agent::CallContext,
    ) -> harness_agent::BoxFuture<'a, harness_agent::Ran> {
        Box::pin(async move {
            harness_agent::Ran::Done(harness_loop::session::ToolOutcome::ok(&call.id, "done"))
        })
    }

    fn read_for_show(
        &self,
        path: &str,
    ) -> Result<harness_agent::ShownFile, harness_agent::SeamError> {
        TestWorld::new().read_for_show(path)
    }

    fn place(&self) -> String {
        "/work".into()
    }
}

#[tokio::test]
async fn a_change_is_asked_with_the_diff_it_would_make() {
    use harness_agent::ToolWorld as _;
    let cases = [
        (
            Reply::call(
                "edit",
                json!({"path": "notes.md", "old_string": "# Notes", "new_string": "# Notes, kept"}),
            ),
            Some("--- /work/notes.md\n+++ /work/notes.md\n@@ -1 +1 @@\n-# Notes\n+# Notes, kept\n"),
        ),
        (
            Reply::call("write", json!({"path": "new.md", "content": "hello\n"})),
            Some("--- /dev/null\n+++ /work/new.md\n@@ -0,0 +1 @@\n+hello\n"),
        ),
        // An edit whose old text is not in the file cannot be foreseen: no diff (the tool
        // refuses it when it runs).
        (
            Reply::call(
                "edit",
                json!({"path": "notes.md", "old_string": "absent", "new_string": "x"}),
            ),
            None,
        ),
    ];
    for (call, diff) in cases {
        let model = ScriptedModel::new([call, Reply::text("ok")]);
        let built = SessionBuilder::new(Arc::new(model.clone()), Arc::new(EditWorld))
            .store(Arc::new(MemoryStore::default()))
            .mode(Mode::Manual)
            .prompt("Change it.");
        let (_d, outs) = run_answering(built, Some(Answer::Deny { feedback: None })).await;
        let asked = events(&outs)
            .into_iter()
            .find_map(|e| match e {
                CoreEvent::ToolCallAsked { question, .. } => Some(question),
                _ => None,
            })
            .expect("manual mode asks before a change");
        assert_eq!(asked.change.as_deref(), diff, "{asked:?}");
    }
    // The world's reading of the file is what the diff starts from.
    assert_eq!(
        EditWorld.read_for_show("notes.md").unwrap().content,
        "# Notes\n"
    );
}

#[tokio::test]
async fn images_go_with_the_prompt_only_to_a_model_that_reads_them() {
    use harness_core::message::Message;
    let image = "data:image/png;base64,iVBORw0KGgo=".to_owned();
    for vision in [true, false] {
        let mut model = ScriptedModel::new([Reply::text("A cat.")]);
        if vision {
            model = model.with_vision();
        }
        let store = Arc::new(MemoryStore::default());
        let Spawned {
            session: ctl,
            events: mut out,
            run,
        } = session(&model, &store, Mode::Edit).spawn().unwrap();
        assert!(ctl.submit(Op::Prompt {
            text: "What is this?".into(),
            origin: Default::default(),
            images: vec![image.clone()],
        }));
        let id = ctl.id().to_owned();
        drop(ctl);
        // Until the front end's last handle is gone: the prompt sent before it runs first.
        run.finished().await.unwrap().result.unwrap();
        let mut notices = Vec::new();
        while let Some(o) = out.try_recv() {
            if let Event::Core(CoreEvent::Notice { text, .. }) = o {
                notices.push(text);
            }
        }
        let sent = model.requests();
        let user = sent[0]
            .messages
            .iter()
            .find_map(|m| match m {
                Message::User { text, images, .. } if text == "What is this?" => Some(images),
                _ => None,
            })
            .expect("the prompt is sent");
        if vision {
            assert_eq!(user, &vec![image.clone()]);
            assert!(notices.is_empty(), "{notices:?}");
            // Kept with the turn: a resumed session sends it again.
            let kept = store.load(&id).unwrap();
            assert!(
                kept.iter().any(|e| matches!(
                    e,
                    Entry::TurnStarted { images, .. } if images == &vec![image.clone()]
                )),
                "{kept:?}"
            );
        } else {
            assert!(user.is_empty());
            assert_eq!(
                notices,
                ["scripted does not read images (its metadata says so): 1 image left out"]
            );
        }
    }
}

#[tokio::test]
async fn the_process_has_one_gate_for_all_its_sessions() {
    let a = harness_agent::CapacityGate::process().unwrap();
    let b = harness_agent::CapacityGate::process().unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // A slot one session holds is taken for the other.
    let holder = harness_loop::capacity::Holder::Request("one-gate".into());
    let never = harness_model::CancellationToken::new();
    assert!(
        a.acquire("one-gate-srv", &holder, &never, &mut |_| {})
            .await
    );
    assert_eq!(b.in_use("one-gate-srv"), 1);
    a.release("one-gate-srv", &holder);
    assert_eq!(b.in_use("one-gate-srv"), 0);
}
