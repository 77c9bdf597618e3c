//! `llembas acp` driven by the official `agent-client-protocol` crate as the client.

use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, InitializeRequest, Meta, NewSessionRequest, PromptRequest,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::{ByteStreams, Client, JsonRpcRequest, JsonRpcResponse};
use harness_test_support::ScriptedServer;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/status", response = Raw)]
struct Status {}

#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcResponse)]
#[serde(transparent)]
struct Raw(Value);

#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/rewind", response = Raw)]
struct Rewind {
    #[serde(rename = "sessionId")]
    session_id: String,
    turns: u32,
}

fn lembas(v: Value) -> Meta {
    let mut m = Meta::new();
    m.insert("lembas".into(), v);
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_with_a_tool_call_and_a_question() {
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": "echo from-acp > acp.txt"})),
        tool_call("c2", "note_manage", json!({"action": "create", "title": "ACP", "content": "kept for the chat", "scope": "global"})),
        text(&["Wrote ", "acp.txt."]),
    ])
    .await
    .unwrap();
    let home = root.parent().unwrap().to_path_buf();
    let mut child = sb
        .command(&server.base_url(), &["acp"])
        .env("HOME", &home)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());

    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let asked: Arc<Mutex<Vec<RequestPermissionRequest>>> = Arc::default();
    let (u, a) = (updates.clone(), asked.clone());
    let root2 = root.clone();
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        Client
            .v1()
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    u.lock().unwrap().push(n);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |r: RequestPermissionRequest, responder, _cx| {
                    a.lock().unwrap().push(r);
                    responder.respond(RequestPermissionResponse::new(
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new("once")),
                    ))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx| {
                let init = cx
                    .send_request(
                        InitializeRequest::new(ProtocolVersion::V1)
                            .client_capabilities(ClientCapabilities::new().meta(lembas(json!({
                            "protocol": 2, "spec": "3.0.0", "capabilities": ["plan_state", "rewind", "context"]})))),
                    )
                    .block_task()
                    .await?;
                let m = init.agent_capabilities.meta.clone().unwrap();
                assert_eq!(m["lembas"]["protocol"], 2);
                assert_eq!(init.agent_info.as_ref().unwrap().name, "llembas");

                // Outside the roots: refused with the spec's code and text.
                let err = cx
                    .send_request(NewSessionRequest::new("/"))
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(i32::from(err.code), -32041, "{err:?}");

                let s = cx
                    .send_request(
                        NewSessionRequest::new(root2.clone())
                            .meta(lembas(json!({"chat": "c_1", "mode": "manual",
                                "context": "The person is Ana; she prefers small commits.",
                                "scope": {"chat": "c_1", "project": "api"}}))),
                    )
                    .block_task()
                    .await?;
                assert_eq!(
                    s.modes.as_ref().unwrap().current_mode_id.to_string(),
                    "manual"
                );
                let r = cx
                    .send_request(PromptRequest::new(
                        s.session_id.clone(),
                        vec![ContentBlock::Text(TextContent::new("write a file"))],
                    ))
                    .block_task()
                    .await?;
                assert_eq!(r.stop_reason, StopReason::EndTurn);
                let st = cx.send_request(Status {}).block_task().await?;
                assert_eq!(st.0["sessions"][0]["state"], "idle", "{:?}", st.0);
                assert_eq!(st.0["sessions"][0]["chat"], "c_1");
                // No `jobs` without the capability.
                assert_eq!(st.0["sessions"][0].get("jobs"), None, "{:?}", st.0);
                // Rewind: more turns than the session has is refused; keeping none is done.
                let sid = s.session_id.to_string();
                let err = cx
                    .send_request(Rewind {
                        session_id: sid.clone(),
                        turns: 5,
                    })
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(i32::from(err.code), -32602, "{err:?}");
                let kept = cx
                    .send_request(Rewind {
                        session_id: sid,
                        turns: 0,
                    })
                    .block_task()
                    .await?;
                assert_eq!(kept.0, json!({"turns": 0}));
                Ok(())
            }),
    )
    .await
    .expect("the ACP run took over 60 s");
    result.unwrap();
    drop(child);

    assert_eq!(sb.read("acp.txt"), "from-acp\n");
    let system = messages(&server.bodies()[0])[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("The person is Ana; she prefers small commits."),
        "{system}"
    );
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 2);
    let q = &asked[0];
    // The call's own title and input (issue 15, item 13); the exact command in the meta.
    assert_eq!(
        q.tool_call.fields.title.as_deref(),
        Some("$ echo from-acp > acp.txt")
    );
    assert_eq!(
        q.tool_call.fields.raw_input,
        Some(json!({"command": "echo from-acp > acp.txt"}))
    );
    let qm = &q.meta.as_ref().unwrap()["lembas"];
    assert_eq!(qm["subject"], "echo from-acp > acp.txt");
    assert_eq!(qm["tool"], "bash");
    assert_eq!(qm["mode"], "manual");
    assert!(qm["always"].is_string(), "{qm}");
    assert!(
        q.options
            .iter()
            .any(|o| o.option_id.to_string() == "always")
    );

    let updates = updates.lock().unwrap();
    let call = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .expect("a tool_call update");
    let cm = &call.meta.as_ref().unwrap()["lembas"];
    assert_eq!(cm["tool"], "bash");
    assert_eq!(cm["block"], "shell");
    assert_eq!(cm["risk"], "execute");
    let done = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) if u.meta.is_some() => Some(u.clone()),
            _ => None,
        })
        .expect("a tool_call_update with its result");
    assert!(
        done.meta.as_ref().unwrap()["lembas"]["result"]
            .as_str()
            .unwrap()
            .starts_with('#')
    );
    let said: String = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::AgentMessageChunk(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(said, "Wrote acp.txt.");
    // The library call was scoped to the chat and reported so; the note landed in its part.
    let note_call = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCall(c)
                if c.meta.as_ref().unwrap()["lembas"]["tool"] == "note_manage" =>
            {
                Some(c.clone())
            }
            _ => None,
        })
        .expect("the note_manage call");
    assert_eq!(
        note_call.meta.as_ref().unwrap()["lembas"]["scope"],
        json!({"chat": "c_1", "project": "api"})
    );
    let notes = sb.home.path().join("data/library/notes");
    let meta: Vec<Value> = std::fs::read_dir(&notes)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap())
        .collect();
    assert_eq!(meta.len(), 1);
    assert_eq!(meta[0]["chat"], "c_1");
    assert_eq!(
        meta[0]["project"], "api",
        "the model's scope: global was dropped"
    );
    // The client-facing session id is the saved session's; the rewind is in its transcript.
    assert_eq!(sb.sessions().len(), 1);
    let t = sb.transcript();
    assert_eq!(t.last().unwrap(), &json!({"type": "rewound", "turn": 1}));
}

/// Runs `llembas acp` in the sandbox and drives it with `body`; returns the updates seen.
async fn with_agent<F>(sb: &Sandbox, url: &str, body: F) -> Vec<SessionNotification>
where
    F: AsyncFnOnce(
            agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>,
        ) -> agent_client_protocol::Result<()>
        + Send
        + 'static,
{
    with_agent_caps(sb, url, &[], body).await
}

/// [`with_agent`] with the `_lembas` capability strings the client declares.
async fn with_agent_caps<F>(
    sb: &Sandbox,
    url: &str,
    caps: &[&str],
    body: F,
) -> Vec<SessionNotification>
where
    F: AsyncFnOnce(
            agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>,
        ) -> agent_client_protocol::Result<()>
        + Send
        + 'static,
{
    with_agent_spec(sb, url, "3.0.0", caps, body).await
}

/// The `_lembas/job_note` notifications an agent run sent, in order.
type Notes = Arc<Mutex<Vec<Value>>>;

tokio::task_local! {
    /// Where [`with_agent_spec`] keeps the `_lembas/job_note`s of the run (when set).
    static NOTES: Notes;
}

/// [`with_agent_caps`] for a client at spec version `spec`.
async fn with_agent_spec<F>(
    sb: &Sandbox,
    url: &str,
    spec: &str,
    caps: &[&str],
    body: F,
) -> Vec<SessionNotification>
where
    F: AsyncFnOnce(
            agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>,
        ) -> agent_client_protocol::Result<()>
        + Send
        + 'static,
{
    let init = InitializeRequest::new(ProtocolVersion::V1).client_capabilities(
        ClientCapabilities::new().meta(lembas(
            json!({"protocol": 2, "spec": spec, "capabilities": caps}),
        )),
    );
    let home = sb.root().parent().unwrap().to_path_buf();
    let mut child = sb
        .command(url, &["acp"])
        .env("HOME", &home)
        .spawn()
        .unwrap();
    let transport = ByteStreams::new(
        child.stdin.take().unwrap().compat_write(),
        child.stdout.take().unwrap().compat(),
    );
    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let u = updates.clone();
    let notes: Notes = NOTES.try_with(Arc::clone).unwrap_or_default();
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        Client
            .v1()
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    u.lock().unwrap().push(n);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_notification(
                async move |n: JobNote, _cx| {
                    notes.lock().unwrap().push(n.0);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(transport, async move |cx| {
                cx.send_request(init).block_task().await?;
                body(cx).await
            }),
    )
    .await
    .expect("the ACP run took over 60 s")
    .unwrap();
    drop(child);
    updates.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_load_replays_and_continues() {
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![
        tool_call("c1", "read", json!({"path": "a.txt"})),
        text(&["It says alpha."]),
        text(&["Still alpha."]),
    ])
    .await
    .unwrap();
    sb.write("a.txt", "alpha\n");
    let url = server.base_url();
    let id: Arc<Mutex<String>> = Arc::default();
    let (r1, i1) = (root.clone(), id.clone());
    with_agent(&sb, &url, async move |cx| {
        let s = cx
            .send_request(NewSessionRequest::new(r1))
            .block_task()
            .await?;
        *i1.lock().unwrap() = s.session_id.to_string();
        cx.send_request(PromptRequest::new(
            s.session_id,
            vec![ContentBlock::Text(TextContent::new("what is in a.txt?"))],
        ))
        .block_task()
        .await?;
        Ok(())
    })
    .await;
    let id = id.lock().unwrap().clone();

    // A new agent process reopens the session: the conversation comes back as updates first.
    let (r2, i2) = (root.clone(), id.clone());
    let replayed = with_agent(&sb, &url, async move |cx| {
        cx.send_request(agent_client_protocol::v1::schema::LoadSessionRequest::new(
            i2.clone(),
            r2,
        ))
        .block_task()
        .await?;
        let r = cx
            .send_request(PromptRequest::new(
                i2,
                vec![ContentBlock::Text(TextContent::new("and now?"))],
            ))
            .block_task()
            .await?;
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    let kinds: Vec<&str> = replayed
        .iter()
        .map(|n| match &n.update {
            SessionUpdate::UserMessageChunk(_) => "user",
            SessionUpdate::AgentMessageChunk(_) => "agent",
            SessionUpdate::ToolCall(_) => "tool_call",
            SessionUpdate::ToolCallUpdate(_) => "tool_call_update",
            _ => "other",
        })
        .collect();
    assert_eq!(
        &kinds[..4],
        ["user", "tool_call", "tool_call_update", "agent"],
        "{kinds:?}"
    );
    // The model got the whole conversation with the new prompt.
    let m = messages(&server.bodies()[2]);
    assert_eq!(m[1]["content"], "what is in a.txt?");
    assert_eq!(m.last().unwrap()["content"], "and now?");
    assert_eq!(sb.sessions().len(), 1);
}

#[derive(Debug, Clone, Serialize, Deserialize, agent_client_protocol::JsonRpcNotification)]
#[notification(method = "_lembas/job")]
struct JobEvent(Value);

#[derive(Debug, Clone, Serialize, Deserialize, agent_client_protocol::JsonRpcNotification)]
#[notification(method = "_lembas/job_note")]
struct JobNote(Value);

#[derive(Debug, Clone, Serialize, Deserialize, agent_client_protocol::JsonRpcNotification)]
#[notification(method = "_lembas/prompt")]
struct MachinePrompt(Value);

#[derive(Debug, Clone, Serialize, Deserialize, agent_client_protocol::JsonRpcNotification)]
#[notification(method = "_lembas/prompt_end")]
struct MachineEnd(Value);

#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/jobs", response = Raw)]
struct Jobs {
    #[serde(rename = "sessionId")]
    session_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/output", response = Raw)]
struct JobOutput {
    #[serde(rename = "sessionId")]
    session_id: String,
    #[serde(rename = "jobId")]
    job_id: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_machine_turns_reach_the_client() {
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "sleep 0.5; echo done-bg", "background": true}),
        ),
        text(&["Started."]),
        text(&["The job finished."]),
    ])
    .await
    .unwrap();
    let home = root.parent().unwrap().to_path_buf();
    let mut child = sb
        .command(&server.base_url(), &["acp"])
        .env("HOME", &home)
        .spawn()
        .unwrap();
    let transport = ByteStreams::new(
        child.stdin.take().unwrap().compat_write(),
        child.stdout.take().unwrap().compat(),
    );
    let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let (a, b, c) = (seen.clone(), seen.clone(), seen.clone());
    let waiter = seen.clone();
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        Client
            .v1()
            .on_receive_notification(
                async move |n: JobEvent, _cx| {
                    a.lock().unwrap().push(("job".into(), n.0));
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_notification(
                async move |n: MachinePrompt, _cx| {
                    b.lock().unwrap().push(("prompt".into(), n.0));
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_notification(
                async move |n: MachineEnd, _cx| {
                    c.lock().unwrap().push(("prompt_end".into(), n.0));
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_notification(
                async move |_n: SessionNotification, _cx| Ok(()),
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(transport, async move |cx| {
                cx.send_request(
                    InitializeRequest::new(ProtocolVersion::V1)
                        .client_capabilities(ClientCapabilities::new().meta(lembas(json!({
                        "protocol": 2, "spec": "3.0.0", "capabilities": ["jobs"]})))),
                )
                .block_task()
                .await?;
                let s = cx
                    .send_request(
                        NewSessionRequest::new(root).meta(lembas(json!({"mode": "auto"}))),
                    )
                    .block_task()
                    .await?;
                let sid = s.session_id.to_string();
                cx.send_request(PromptRequest::new(
                    s.session_id.clone(),
                    vec![ContentBlock::Text(TextContent::new(
                        "build in the background",
                    ))],
                ))
                .block_task()
                .await?;
                // The job's end starts a machine turn; wait for its end.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                while !waiter
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|(k, _)| k == "prompt_end")
                {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "no machine turn ended"
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                let jobs = cx
                    .send_request(Jobs {
                        session_id: sid.clone(),
                    })
                    .block_task()
                    .await?;
                assert_eq!(jobs.0["jobs"][0]["state"], "done", "{}", jobs.0);
                assert_eq!(jobs.0["jobs"][0]["exit_code"], 0);
                // `_lembas/status` lists the same jobs under the session.
                let status = cx.send_request(Status {}).block_task().await?;
                assert_eq!(
                    status.0["sessions"][0]["jobs"], jobs.0["jobs"],
                    "{}",
                    status.0
                );
                let out = cx
                    .send_request(JobOutput {
                        session_id: sid,
                        job_id: "1".into(),
                    })
                    .block_task()
                    .await?;
                assert_eq!(out.0["text"], "done-bg\n", "{}", out.0);
                Ok(())
            }),
    )
    .await
    .expect("the ACP run took over 60 s")
    .unwrap();
    drop(child);
    let seen = seen.lock().unwrap();
    let kinds: Vec<String> = seen
        .iter()
        .map(|(k, v)| match k.as_str() {
            "job" => format!("job:{}", v["job"]["state"].as_str().unwrap()),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(
        kinds,
        ["job:running", "job:done", "prompt", "prompt_end"],
        "{seen:?}"
    );
    let prompt = &seen[2].1;
    assert_eq!(prompt["machine"], true);
    assert!(
        prompt["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("<job id=\"1\"")
    );
    assert_eq!(seen[3].1["stopReason"], "end_turn");
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/send", response = Raw)]
struct JobSend {
    #[serde(rename = "sessionId")]
    session_id: String,
    #[serde(rename = "jobId")]
    job_id: String,
    text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/transcript", response = Raw)]
struct JobTranscript {
    #[serde(rename = "sessionId")]
    session_id: String,
    #[serde(rename = "jobId")]
    job_id: String,
}

/// Asks `_lembas/jobs` until job `id` is in `state` (20 s at most).
async fn wait_job(
    cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>,
    sid: &str,
    id: &str,
    state: &str,
) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let jobs = cx
            .send_request(Jobs {
                session_id: sid.to_owned(),
            })
            .block_task()
            .await
            .unwrap();
        let job = jobs.0["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .cloned();
        if let Some(j) = job
            && j["state"] == state
        {
            return j;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "job {id} never {state}: {}",
            jobs.0
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_send_and_transcript_reach_the_jobs() {
    let sb = Sandbox::new();
    let root = sb.root();
    // The main session and the subagent ask the model side by side: every later answer is
    // the same text, so the order they come in does not matter.
    let mut replies = vec![calls(&[
        (
            "c1",
            "bash",
            json!({"command": "echo cmd-out", "background": true}),
        ),
        (
            "c2",
            "task",
            json!({"agent": "explore", "prompt": "look around", "background": true}),
        ),
    ])];
    replies.extend((0..12).map(|_| text(&["ok."])));
    let server = ScriptedServer::start(replies).await.unwrap();
    let url = server.base_url();
    let notes: Notes = Arc::default();
    let run = with_agent_caps(&sb, &url, &["jobs"], async move |cx| {
        let s = cx
            .send_request(NewSessionRequest::new(root).meta(lembas(json!({"mode": "auto"}))))
            .block_task()
            .await?;
        let sid = s.session_id.to_string();
        cx.send_request(PromptRequest::new(
            s.session_id.clone(),
            vec![ContentBlock::Text(TextContent::new("start both"))],
        ))
        .block_task()
        .await?;
        wait_job(&cx, &sid, "1", "done").await;
        wait_job(&cx, &sid, "2", "done").await;

        // A command takes no messages: refused with the tool's own text.
        let err = cx
            .send_request(JobSend {
                session_id: sid.clone(),
                job_id: "1".into(),
                text: "hello".into(),
            })
            .block_task()
            .await
            .unwrap_err();
        assert_eq!(i32::from(err.code), -32602, "{err:?}");
        assert_eq!(
            err.message,
            "Job 1 is a command: job_send messages subagents only."
        );
        let err = cx
            .send_request(JobSend {
                session_id: sid.clone(),
                job_id: "9".into(),
                text: "hello".into(),
            })
            .block_task()
            .await
            .unwrap_err();
        assert_eq!(i32::from(err.code), -32045, "{err:?}");

        // A command's transcript is its output as one agent_message_chunk.
        let t = cx
            .send_request(JobTranscript {
                session_id: sid.clone(),
                job_id: "1".into(),
            })
            .block_task()
            .await?;
        assert_eq!(t.0["job"]["kind"], "command", "{}", t.0);
        assert_eq!(
            t.0["updates"],
            json!([{"sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "cmd-out\n"}}])
        );

        // A subagent's transcript is its conversation, in order.
        let t = cx
            .send_request(JobTranscript {
                session_id: sid.clone(),
                job_id: "2".into(),
            })
            .block_task()
            .await?;
        let u = t.0["updates"].as_array().unwrap();
        assert_eq!(u[0]["sessionUpdate"], "user_message_chunk", "{}", t.0);
        assert_eq!(u[0]["content"]["text"], "look around");
        assert_eq!(u[1]["sessionUpdate"], "agent_message_chunk");
        assert_eq!(u[1]["content"]["text"], "ok.");

        // An ended subagent starts again with the message.
        let sent = cx
            .send_request(JobSend {
                session_id: sid.clone(),
                job_id: "2".into(),
                text: "look again".into(),
            })
            .block_task()
            .await?;
        assert_eq!(sent.0["delivered"], "restarted", "{}", sent.0);
        assert_eq!(sent.0["job"]["state"], "running");
        wait_job(&cx, &sid, "2", "done").await;
        let t = cx
            .send_request(JobTranscript {
                session_id: sid,
                job_id: "2".into(),
            })
            .block_task()
            .await?;
        let texts: Vec<&str> = t.0["updates"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["sessionUpdate"] == "user_message_chunk")
            .map(|u| u["content"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts.first(), Some(&"look around"), "{}", t.0);
        assert!(texts.iter().any(|t| t.contains("look again")), "{texts:?}");
        Ok(())
    });
    NOTES.scope(notes.clone(), run).await;
    // The restart is told as the session's own `job_note`, once.
    let notes = notes.lock().unwrap();
    let told: Vec<(&str, &str)> = notes
        .iter()
        .filter(|n| n["note"] != "report")
        .map(|n| (n["note"].as_str().unwrap(), n["text"].as_str().unwrap()))
        .collect();
    assert_eq!(told, [("restarted", "look again")], "{notes:?}");
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/show", response = Raw)]
struct Show(Value);

/// The tools a body offers: those sent whole, and those the loader (`load_tools`) lists.
fn tool_names(body: &Value) -> Vec<String> {
    let sent: Vec<&Value> = body["tools"]
        .as_array()
        .map(|t| t.iter().collect())
        .unwrap_or_default();
    let mut names: Vec<String> = sent
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    for t in &sent {
        if t["function"]["name"] == "load_tools" {
            let d = t["function"]["description"].as_str().unwrap_or_default();
            names.extend(d.lines().filter_map(|l| {
                l.strip_prefix("- ")
                    .and_then(|l| l.split_once(':'))
                    .map(|(n, _)| n.to_owned())
            }));
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_goes_to_the_client_viewer() {
    let sb = Sandbox::new();
    let root = sb.root();
    sb.write("page.html", "<!doctype html><p>hi</p>\n");
    sb.write("notes.md", "# Notes\n");
    // A path of the machine outside the working directory, which is not there: `show` answers
    // as `read` answers it, naming the real path.
    let outside = root.parent().unwrap().join("llembas-no-such-file.txt");
    let server = ScriptedServer::start(vec![
        tool_call("s1", "show", json!({"path": "page.html"})),
        text(&["Shown."]),
        tool_call("s2", "show", json!({"path": "notes.md"})),
        text(&["Gone."]),
        tool_call("s3", "show", json!({"path": outside.display().to_string()})),
        text(&["Refused."]),
        text(&["Plain."]),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    let home = root.parent().unwrap().to_path_buf();
    let mut child = sb
        .command(&url, &["acp"])
        .env("HOME", &home)
        .spawn()
        .unwrap();
    let transport = ByteStreams::new(
        child.stdin.take().unwrap().compat_write(),
        child.stdout.take().unwrap().compat(),
    );
    let shown: Arc<Mutex<Vec<Value>>> = Arc::default();
    let s = shown.clone();
    let r = root.clone();
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        Client
            .v1()
            .on_receive_request(
                async move |req: Show, responder, _cx| {
                    let mut seen = s.lock().unwrap();
                    seen.push(req.0);
                    // The first file opens; then the viewer has gone away.
                    responder.respond(Raw(json!({"shown": seen.len() == 1})))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                async move |_n: SessionNotification, _cx| Ok(()),
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(transport, async move |cx| {
                let init = cx
                    .send_request(
                        InitializeRequest::new(ProtocolVersion::V1)
                            .client_capabilities(ClientCapabilities::new().meta(lembas(json!({
                                "protocol": 2, "spec": "3.0.0", "capabilities": ["show"]})))),
                    )
                    .block_task()
                    .await?;
                let caps =
                    &init.agent_capabilities.meta.as_ref().unwrap()["lembas"]["capabilities"];
                assert!(caps.as_array().unwrap().contains(&json!("show")), "{caps}");
                let s = cx
                    .send_request(NewSessionRequest::new(r).meta(lembas(json!({"mode": "auto"}))))
                    .block_task()
                    .await?;
                for prompt in ["show me the page", "and the notes", "and the missing one"] {
                    let done = cx
                        .send_request(PromptRequest::new(
                            s.session_id.clone(),
                            vec![ContentBlock::Text(TextContent::new(prompt))],
                        ))
                        .block_task()
                        .await?;
                    assert_eq!(done.stop_reason, StopReason::EndTurn);
                }
                Ok(())
            }),
    )
    .await
    .expect("the ACP run took over 60 s")
    .unwrap();
    drop(child);

    let shown = shown.lock().unwrap().clone();
    assert_eq!(shown.len(), 2, "{shown:?}");
    let page = root.join("page.html").display().to_string();
    assert_eq!(shown[0]["path"], page.as_str());
    assert_eq!(shown[0]["kind"], "html");
    assert_eq!(shown[0]["title"], "page.html");
    assert_eq!(shown[0]["content"], "<!doctype html><p>hi</p>\n");
    assert!(shown[0]["sessionId"].is_string());
    assert_eq!(shown[1]["kind"], "markdown");

    let bodies = server.bodies();
    assert!(tool_names(&bodies[0]).contains(&"show".to_owned()));
    let last_line = |body: &Value| {
        tool_results(body)
            .last()
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        last_line(&bodies[1]),
        format!("{page} is open for the person to see.")
    );
    // The viewer went away between the offer and the call: the tool's `unavailable` text.
    let unavailable = harness_spec::Spec::embedded()
        .tool("show")
        .unwrap()
        .unavailable
        .clone()
        .unwrap();
    assert_eq!(last_line(&bodies[3]), unavailable);
    // A path outside the working directory answers as `read` answers it, by its real path.
    let refused = tool_results(&bodies[5]).last().unwrap().clone();
    assert!(
        refused.ends_with(&format!("No such file or directory: {}", outside.display())),
        "{refused}"
    );

    // A client without the capability is not offered `show`.
    let r = root.clone();
    with_agent(&sb, &url, async move |cx| {
        let s = cx
            .send_request(NewSessionRequest::new(r))
            .block_task()
            .await?;
        cx.send_request(PromptRequest::new(
            s.session_id,
            vec![ContentBlock::Text(TextContent::new("hello"))],
        ))
        .block_task()
        .await?;
        Ok(())
    })
    .await;
    let bodies = server.bodies();
    assert!(!tool_names(&bodies[6]).is_empty());
    assert!(!tool_names(&bodies[6]).contains(&"show".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_session_ends_its_lost_jobs() {
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "sleep 30", "background": true}),
        ),
        text(&["Started."]),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    let id: Arc<Mutex<String>> = Arc::default();
    let (r1, i1) = (root.clone(), id.clone());
    // The first agent process is killed while its job runs.
    with_agent_caps(&sb, &url, &["jobs"], async move |cx| {
        let s = cx
            .send_request(NewSessionRequest::new(r1).meta(lembas(json!({"mode": "auto"}))))
            .block_task()
            .await?;
        let sid = s.session_id.to_string();
        *i1.lock().unwrap() = sid.clone();
        cx.send_request(PromptRequest::new(
            s.session_id,
            vec![ContentBlock::Text(TextContent::new("wait a while"))],
        ))
        .block_task()
        .await?;
        wait_job(&cx, &sid, "1", "running").await;
        Ok(())
    })
    .await;
    let id = id.lock().unwrap().clone();
    let (r2, i2) = (root.clone(), id.clone());
    with_agent_caps(&sb, &url, &["jobs"], async move |cx| {
        cx.send_request(agent_client_protocol::v1::schema::LoadSessionRequest::new(
            i2.clone(),
            r2,
        ))
        .block_task()
        .await?;
        let job = wait_job(&cx, &i2, "1", "failed").await;
        assert_eq!(job["kind"], "command", "{job}");
        assert_eq!(job["title"], "sleep 30");
        Ok(())
    })
    .await;
}

/// What the stand-in instance API saw: method, path, `Authorization`, body.
type Seen = Arc<Mutex<Vec<(String, String, String, String)>>>;

/// A small stand-in for a LLeMbas instance's memory API on 127.0.0.1: one store, ids `m{n}`,
/// a 4,000-character limit, token `lsk_test` (any other answers 401). Returns its base URL.
async fn instance_api(seen: Seen) -> String {
    use axum::extract::State;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    use axum::response::IntoResponse;

    type Store = Arc<Mutex<(Vec<(String, String)>, u32)>>;
    let store: Store = Arc::new(Mutex::new((
        vec![("m1".into(), "Works on the api crate.".into())],
        2,
    )));
    let state_of = |s: &(Vec<(String, String)>, u32)| {
        let chars: usize = s.0.iter().map(|(_, t)| t.chars().count()).sum();
        json!({"target": "user", "limit": 4000, "chars": chars,
            "entries": s.0.iter().map(|(id, text)| json!({"id": id, "text": text})).collect::<Vec<_>>()})
    };
    let handler = move |State((seen, store)): State<(Seen, Store)>,
                        method: Method,
                        uri: Uri,
                        headers: HeaderMap,
                        body: String| async move {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        seen.lock().unwrap().push((
            method.to_string(),
            uri.path().to_owned(),
            auth.clone(),
            body.clone(),
        ));
        if auth != "Bearer lsk_test" {
            return (StatusCode::UNAUTHORIZED, "{}").into_response();
        }
        let mut s = store.lock().unwrap();
        if method == Method::POST {
            let b: Value = serde_json::from_str(&body).unwrap();
            let mut next = s.clone();
            for c in b["changes"].as_array().unwrap() {
                let id = c["id"].as_str().unwrap_or_default();
                match c["action"].as_str().unwrap() {
                    "add" => {
                        next.0
                            .push((format!("m{}", next.1), c["text"].as_str().unwrap().into()));
                        next.1 += 1;
                    }
                    action => {
                        let Some(at) = next.0.iter().position(|(i, _)| i == id) else {
                            let error =
                                format!("Memory: there is no entry {id:?}; view shows the ids.");
                            return (StatusCode::CONFLICT, json!({"error": error}).to_string())
                                .into_response();
                        };
                        if action == "remove" {
                            next.0.remove(at);
                        } else {
                            next.0[at].1 = c["text"].as_str().unwrap().into();
                        }
                    }
                }
            }
            *s = next;
        }
        (StatusCode::OK, state_of(&s).to_string()).into_response()
    };
    let app = axum::Router::new()
        .route(
            "/api/lembas/v1/memory",
            axum::routing::get(handler).post(handler),
        )
        .with_state((seen, store));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}/api/lembas/v1")
}

/// Every file named `memory.json` under `dir`.
fn memory_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(memory_files(&p));
        } else if p.file_name().is_some_and(|n| n == "memory.json") {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_goes_to_the_instance_api() {
    let sb = Sandbox::new();
    let root = sb.root();
    let seen: Seen = Arc::default();
    let api = instance_api(seen.clone()).await;
    let server = ScriptedServer::start(vec![
        tool_call(
            "k1",
            "memory",
            json!({"action": "add", "text": "Ana prefers tabs.", "target": "user"}),
        ),
        tool_call("k2", "memory", json!({"action": "view"})),
        tool_call("k3", "memory", json!({"action": "remove", "id": "m9"})),
        text(&["Noted."]),
        tool_call("k4", "memory", json!({"action": "view"})),
        text(&["Sorry."]),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    for token in ["lsk_test", "lsk_expired"] {
        let (r, api) = (root.clone(), api.clone());
        with_agent_caps(&sb, &url, &["memory"], async move |cx| {
            let s = cx
                .send_request(NewSessionRequest::new(r).meta(lembas(
                    json!({"mode": "auto", "api": {"url": api, "token": token}}),
                )))
                .block_task()
                .await?;
            let done = cx
                .send_request(PromptRequest::new(
                    s.session_id,
                    vec![ContentBlock::Text(TextContent::new("remember tabs"))],
                ))
                .block_task()
                .await?;
            assert_eq!(done.stop_reason, StopReason::EndTurn);
            Ok(())
        })
        .await;
    }

    let seen = seen.lock().unwrap().clone();
    let path = "/api/lembas/v1/memory";
    let bearer = "Bearer lsk_test";
    let expired = "Bearer lsk_expired";
    assert_eq!(
        seen,
        vec![
            // The prompt's entries, when the session opens.
            ("GET".into(), path.into(), bearer.into(), String::new()),
            (
                "POST".into(),
                path.into(),
                bearer.into(),
                json!({"changes": [{"action": "add", "text": "Ana prefers tabs."}]}).to_string()
            ),
            ("GET".into(), path.into(), bearer.into(), String::new()),
            (
                "POST".into(),
                path.into(),
                bearer.into(),
                json!({"changes": [{"action": "remove", "id": "m9"}]}).to_string()
            ),
            ("GET".into(), path.into(), expired.into(), String::new()),
            ("GET".into(), path.into(), expired.into(), String::new()),
        ]
    );

    let bodies = server.bodies();
    let system = messages(&bodies[0])[0]["content"].to_string();
    assert!(system.contains("Works on the api crate."), "{system}");
    // What the model read, after the result id line (`[#a3f2]`).
    let last = |body: &Value| {
        let t = tool_results(body).last().unwrap().clone();
        let (id, rest) = t.split_once('\n').unwrap();
        assert!(id.starts_with("[#") && id.ends_with(']'), "{t}");
        rest.to_owned()
    };
    let state = "user: 2 entries, 40 of 4000 characters used\n\
                 - [m1] Works on the api crate.\n\
                 - [m2] Ana prefers tabs.";
    assert_eq!(last(&bodies[1]), format!("Added m2.\n\n{state}"));
    assert_eq!(last(&bodies[2]), state);
    // A 409 answers the instance's error text.
    assert_eq!(
        last(&bodies[3]),
        "Memory: there is no entry \"m9\"; view shows the ids."
    );
    assert_eq!(tool_results(&bodies[3]).len(), 3);
    // The expired token: no entries in the prompt, and the tool says memory is unavailable.
    let system = messages(&bodies[4])[0]["content"].to_string();
    assert!(!system.contains("Works on the api crate."), "{system}");
    assert_eq!(
        last(&bodies[5]),
        "Memory is unavailable in this session: the LLeMbas instance no longer accepts its token."
    );
    // Nothing was kept on this device.
    assert_eq!(
        memory_files(sb.home.path()),
        Vec::<std::path::PathBuf>::new()
    );
    assert_eq!(memory_files(&root), Vec::<std::path::PathBuf>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_instance_hands_over_library_and_prototypes() {
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![text(&["One."]), text(&["Two."]), text(&["Three."])])
        .await
        .unwrap();
    let url = server.base_url();
    let handed = json!({
        "mode": "auto",
        "library": {"summary": "12 notes, 3 documents"},
        "prototypes": [
            {"title": "Pricing page", "path": "/home/ana/src/site/proto/pricing.html",
             "description": "three   tiers"},
            {"title": "", "path": "/nowhere.html"}
        ]
    });
    // An instance at 2.0.0 (its prototypes shown), one at 3.0.0 (any it sends are ignored), and
    // a 2.0.0 one that did not agree on the capabilities.
    let runs: [(&str, &[&str]); 3] = [
        ("2.0.0", &["library", "prototypes", "show"]),
        ("3.0.0", &["library", "prototypes", "show"]),
        ("2.0.0", &["show"]),
    ];
    for (spec, caps) in runs {
        let (r, meta) = (root.clone(), handed.clone());
        with_agent_spec(&sb, &url, spec, caps, async move |cx| {
            let s = cx
                .send_request(NewSessionRequest::new(r).meta(lembas(meta)))
                .block_task()
                .await?;
            cx.send_request(PromptRequest::new(
                s.session_id,
                vec![ContentBlock::Text(TextContent::new("hello"))],
            ))
            .block_task()
            .await?;
            Ok(())
        })
        .await;
    }
    let bodies = server.bodies();
    let system = |i: usize| {
        messages(&bodies[i])[0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let line = "- Pricing page — /home/ana/src/site/proto/pricing.html — three tiers";
    let (old, new, none) = (system(0), system(1), system(2));
    assert!(old.contains("# Prototypes"), "{old}");
    assert!(old.contains(&format!("\n{line}\n")), "{old}");
    assert!(!old.contains("/nowhere.html"), "{old}");
    assert!(old.contains("12 notes, 3 documents"), "{old}");
    assert!(!new.contains("# Prototypes"), "{new}");
    assert!(!new.contains("Pricing page"), "{new}");
    assert!(!none.contains("Pricing page"), "{none}");
    assert!(!none.contains("12 notes, 3 documents"), "{none}");
}

/// Bad bytes on stdin: a blank line gets no answer; a line that is not UTF-8, one that is not
/// JSON and one over the line cap each get a parse error (`-32700`, `id: null`) holding only a
/// short head of the line and its length; the connection goes on and answers `initialize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lines_on_stdin_are_answered_and_the_connection_goes_on() {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let sb = Sandbox::new();
    let mut child = sb.command("http://127.0.0.1:9", &["acp"]).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    // 20 MiB, over the 16 MiB cap: once answered whole, a reply as long as the line.
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"x\":\"{}\"}}\n",
        "y".repeat(20 << 20)
    );
    let not_json = format!("{{not json {}\n", "z".repeat(100_000));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let lens = [
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\xff\xfe\"}".len(),
        not_json.len() - 1,
        huge.len() - 1,
    ];
    let writer = tokio::spawn(async move {
        let mut bytes: Vec<u8> = Vec::new();
        bytes.extend_from_slice(b"\n   \r\n");
        bytes.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\xff\xfe\"}\n");
        bytes.extend_from_slice(not_json.as_bytes());
        bytes.extend_from_slice(huge.as_bytes());
        bytes.extend_from_slice(b"\n");
        bytes.extend_from_slice(format!("{init}\n").as_bytes());
        stdin.write_all(&bytes).await.unwrap();
        stdin
    });
    let mut replies: Vec<(usize, Value)> = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            let mut line = String::new();
            assert_ne!(stdout.read_line(&mut line).await.unwrap(), 0, "{replies:?}");
            let v: Value = serde_json::from_str(&line).unwrap();
            let done = v["id"] == json!(1);
            replies.push((line.len(), v));
            if done {
                break;
            }
        }
    })
    .await;
    read.expect("no answer to initialize within 60 s");
    drop(writer.await.unwrap());
    let status = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(replies.len(), 4, "{replies:#?}");
    let whys = ["not UTF-8", "not JSON", "over the limit of 16777216 bytes"];
    for (((size, v), why), len) in replies.iter().zip(whys).zip(lens) {
        assert_eq!(v["error"]["code"], json!(-32700), "{v}");
        assert_eq!(v["id"], Value::Null, "{v}");
        let data = v["error"]["data"]["line"].as_str().unwrap();
        assert!(data.contains(why), "{data}");
        assert!(data.contains(&format!("a line of {len} bytes")), "{data}");
        assert!(*size < 600, "a reply of {size} bytes: {data}");
    }
    assert!(replies[3].1["result"].is_object(), "{:?}", replies[3]);
}

/// A plain ACP client (no `_meta.lembas`) on stdio, run by `f`, its updates and permission
/// requests (answered "once") kept; HOME is elsewhere than the project.
pub(super) async fn plain_client<F>(
    sb: &Sandbox,
    url: &str,
    f: F,
) -> (Vec<SessionNotification>, Vec<RequestPermissionRequest>)
where
    F: AsyncFnOnce(
            agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>,
        ) -> agent_client_protocol::Result<()>
        + Send
        + 'static,
{
    let mut child = sb
        .command(url, &["acp"])
        .env("HOME", sb.home.path())
        .spawn()
        .unwrap();
    let transport = ByteStreams::new(
        child.stdin.take().unwrap().compat_write(),
        child.stdout.take().unwrap().compat(),
    );
    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let asked: Arc<Mutex<Vec<RequestPermissionRequest>>> = Arc::default();
    let (u, a) = (updates.clone(), asked.clone());
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        Client
            .v1()
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    u.lock().unwrap().push(n);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |r: RequestPermissionRequest, responder, _cx| {
                    a.lock().unwrap().push(r);
                    responder.respond(RequestPermissionResponse::new(
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new("once")),
                    ))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx| {
                cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                    .block_task()
                    .await?;
                f(cx).await
            }),
    )
    .await
    .expect("the ACP run took over 60 s")
    .unwrap();
    drop(child);
    let u = updates.lock().unwrap().clone();
    let a = asked.lock().unwrap().clone();
    (u, a)
}

/// What an editor expects (issue 15, items 12–15): any absolute directory for a local client
/// (a relative one is -32602), MCP servers said to be ignored, the slash commands advertised
/// and done, `locations` on a call with a path, a running command `in_progress` with its output
/// streamed, the permission request with the call's title and input, an edit's diff kept on its
/// final update and in `session/load`'s replay, the mode restored, an unknown session -32002.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_gets_what_it_expects() {
    use agent_client_protocol::v1::schema::{
        LoadSessionRequest, McpServer, McpServerStdio, SetSessionModeRequest, ToolCallContent,
        ToolCallStatus,
    };
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "write",
            json!({"path": "new.txt", "content": "one\ntwo\n"}),
        ),
        tool_call(
            "c2",
            "bash",
            json!({"command": "echo streamed-out; sleep 0.3"}),
        ),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    let r = root.clone();
    let sid: Arc<Mutex<String>> = Arc::default();
    let sid2 = sid.clone();
    let (updates, asked) =
        plain_client(&sb, &url, async move |cx| {
            let err = cx
                .send_request(NewSessionRequest::new("relative/dir"))
                .block_task()
                .await
                .unwrap_err();
            assert_eq!(i32::from(err.code), -32602, "{err:?}");
            let err = cx
                .send_request(LoadSessionRequest::new("20200101-0000-dead", r.clone()))
                .block_task()
                .await
                .unwrap_err();
            assert_eq!(i32::from(err.code), -32002, "{err:?}");
            // The project is outside HOME: a local client opens it all the same.
            let s = cx
                .send_request(NewSessionRequest::new(r.clone()).mcp_servers(vec![
                    McpServer::Stdio(McpServerStdio::new("files", "/usr/bin/mcp-files")),
                ]))
                .block_task()
                .await?;
            let m = &s.meta.as_ref().unwrap()["lembas"];
            assert_eq!(m["mcp_servers"]["given"], 1, "{m}");
            assert_eq!(
                m["mcp_servers"]["notices"],
                json!(["the MCP server `files` did not start: cannot run `/usr/bin/mcp-files`: No such file or directory (os error 2)"]),
                "{m}"
            );
            *sid2.lock().unwrap() = s.session_id.to_string();
            cx.send_request(SetSessionModeRequest::new(s.session_id.clone(), "manual"))
                .block_task()
                .await?;
            let done = cx
                .send_request(PromptRequest::new(
                    s.session_id.clone(),
                    vec![ContentBlock::Text(TextContent::new("write and run"))],
                ))
                .block_task()
                .await?;
            assert_eq!(done.stop_reason, StopReason::EndTurn);
            // A slash command is done, not sent to the model.
            let done = cx
                .send_request(PromptRequest::new(
                    s.session_id.clone(),
                    vec![ContentBlock::Text(TextContent::new("/mode plan"))],
                ))
                .block_task()
                .await?;
            assert_eq!(done.stop_reason, StopReason::EndTurn);
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            Ok(())
        })
        .await;
    assert_eq!(server.bodies().len(), 3, "/mode plan went to the model");
    let id = sid.lock().unwrap().clone();
    let commands = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::AvailableCommandsUpdate(c) => Some(c.available_commands.clone()),
            _ => None,
        })
        .expect("available_commands_update");
    let names: Vec<&str> = commands.iter().map(|c| c.name.as_str()).collect();
    assert!(
        names.contains(&"mode") && names.contains(&"compact"),
        "{names:?}"
    );
    assert!(updates.iter().any(|n| matches!(&n.update,
        SessionUpdate::CurrentModeUpdate(m) if m.current_mode_id.to_string() == "plan")));
    // The write: its location, and its diff kept on the final update.
    if std::env::var_os("LLEMBAS_DUMP_ACP").is_some() {
        for n in &updates {
            eprintln!("{}", serde_json::to_string(&n.update).unwrap());
        }
    }
    // The calls' ids are the agent's own.
    let id_of = |title: &str| {
        updates
            .iter()
            .find_map(|n| match &n.update {
                SessionUpdate::ToolCall(c) if c.title == title => Some(c.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no call {title}"))
    };
    let call = id_of("write new.txt");
    let c1 = call.tool_call_id.to_string();
    let c2 = id_of("$ echo streamed-out; sleep 0.3")
        .tool_call_id
        .to_string();
    assert_eq!(call.locations.len(), 1, "{call:?}");
    assert_eq!(call.locations[0].path, root.join("new.txt"));
    let last_c1 = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) if u.tool_call_id.to_string() == c1 => Some(u.clone()),
            _ => None,
        })
        .next_back()
        .unwrap();
    assert_eq!(last_c1.fields.status, Some(ToolCallStatus::Completed));
    let content = last_c1.fields.content.clone().unwrap();
    assert!(
        matches!(&content[..], [ToolCallContent::Diff(d)] if d.new_text == "one\ntwo\n"),
        "{content:?}"
    );
    // The write was asked with the call's title and input; the command (only reads: not
    // asked) is in progress with its output as it comes.
    let q = asked
        .iter()
        .find(|q| q.tool_call.tool_call_id.to_string() == c1)
        .expect("the write was asked");
    assert_eq!(q.tool_call.fields.title.as_deref(), Some("write new.txt"));
    assert_eq!(
        q.tool_call.fields.raw_input,
        Some(json!({"path": "new.txt", "content": "one\ntwo\n"}))
    );
    assert_eq!(
        q.tool_call.fields.locations.as_deref().map(<[_]>::len),
        Some(1)
    );
    // The change to review is ACP's own diff content on the question's call (a plain client
    // shows no `_meta`), a new file with no old text, and on an update of the call before it.
    let asked_diff = q.tool_call.fields.content.clone().unwrap_or_default();
    assert!(
        matches!(&asked_diff[..], [ToolCallContent::Diff(d)]
            if d.path == root.join("new.txt") && d.new_text == "one\ntwo\n" && d.old_text.is_none()),
        "{asked_diff:?}"
    );
    assert!(
        updates.iter().any(|n| matches!(&n.update,
            SessionUpdate::ToolCallUpdate(u) if u.tool_call_id.to_string() == c1
                && u.fields.status.is_none()
                && u.fields.content.as_deref() == Some(&asked_diff[..]))),
        "no update with the diff before the question"
    );
    let running: Vec<_> = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u)
                if u.tool_call_id.to_string() == c2
                    && u.fields.status == Some(ToolCallStatus::InProgress) =>
            {
                Some(u.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        running
            .iter()
            .any(|u| format!("{:?}", u.fields.content).contains("streamed-out")),
        "{running:?}"
    );
    // Its final text is the result without the stored result's id.
    let last_c2 = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) if u.tool_call_id.to_string() == c2 => Some(u.clone()),
            _ => None,
        })
        .next_back()
        .unwrap();
    let text = serde_json::to_value(&last_c2.fields.content).unwrap();
    assert_eq!(text[0]["content"]["text"], "streamed-out\nexit code 0");

    // Loaded again: the mode it had, and the edit replayed with its diff.
    let r = root.clone();
    let id2 = id.clone();
    let (replayed, _) = plain_client(&sb, &url, async move |cx| {
        let s = cx
            .send_request(LoadSessionRequest::new(id2, r))
            .block_task()
            .await?;
        assert_eq!(
            s.modes.as_ref().unwrap().current_mode_id.to_string(),
            "plan"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        Ok(())
    })
    .await;
    let diff = replayed
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) if u.tool_call_id.to_string() == c1 => {
                u.fields.content.clone()
            }
            _ => None,
        })
        .unwrap();
    assert!(
        matches!(&diff[..], [ToolCallContent::Diff(d)]
            if d.path == root.join("new.txt") && d.new_text == "one\ntwo\n"),
        "{diff:?}"
    );
}

/// The model is a session config option (category `model`, the models the server serves):
/// `session/set_config_option` switches it, the next request goes to the new one; a model the
/// server does not serve is refused with -32042 and the session keeps its model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_is_a_config_option() {
    use agent_client_protocol::v1::schema::{
        SessionConfigKind, SessionConfigOptionCategory, SessionConfigSelectOptions,
        SetSessionConfigOptionRequest,
    };
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![text(&["Hi from the other."])])
        .await
        .unwrap();
    server.set_models(&["scripted", "other"]);
    let url = server.base_url();
    let (_updates, _asked) = plain_client(&sb, &url, async move |cx| {
        let s = cx
            .send_request(NewSessionRequest::new(root.clone()))
            .block_task()
            .await?;
        let options = s.config_options.clone().unwrap_or_default();
        let model = options
            .iter()
            .find(|o| o.id.to_string() == "model")
            .unwrap();
        assert_eq!(model.category, Some(SessionConfigOptionCategory::Model));
        let SessionConfigKind::Select(select) = &model.kind else {
            panic!("{model:?}")
        };
        assert_eq!(select.current_value.to_string(), "scripted");
        let SessionConfigSelectOptions::Ungrouped(choices) = &select.options else {
            panic!("{select:?}")
        };
        let ids: Vec<String> = choices.iter().map(|c| c.value.to_string()).collect();
        assert_eq!(ids, ["scripted", "other"]);
        let err = cx
            .send_request(SetSessionConfigOptionRequest::new(
                s.session_id.clone(),
                "model",
                "gpt-nonexistent",
            ))
            .block_task()
            .await
            .unwrap_err();
        assert_eq!(i32::from(err.code), -32042, "{err:?}");
        let set = cx
            .send_request(SetSessionConfigOptionRequest::new(
                s.session_id.clone(),
                "model",
                "other",
            ))
            .block_task()
            .await?;
        let SessionConfigKind::Select(select) = &set.config_options[0].kind else {
            panic!("{set:?}")
        };
        assert_eq!(select.current_value.to_string(), "other");
        let done = cx
            .send_request(PromptRequest::new(
                s.session_id.clone(),
                vec![ContentBlock::Text(TextContent::new("hello"))],
            ))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    let bodies = server.bodies();
    assert_eq!(bodies.last().unwrap()["model"], "other", "{bodies:?}");
}

/// `session/load` of a session another llembas is running is refused with the text naming it,
/// and leaves that run alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_a_session_another_process_runs_is_refused() {
    use agent_client_protocol::v1::schema::LoadSessionRequest;
    let sb = Sandbox::new();
    let (_server, mut first, _fg) = super::oneshot::long_command(&sb, "fg.pid", 44).await;
    let id = sb.sessions()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let holder = first.id().unwrap();
    let server = ScriptedServer::start(vec![]).await.unwrap();
    let root = sb.root();
    plain_client(&sb, &server.base_url(), async move |cx| {
        let err = cx
            .send_request(LoadSessionRequest::new(id.clone(), root))
            .block_task()
            .await
            .unwrap_err();
        let text = format!("{err:?}");
        assert!(
            text.contains(&format!(
                "session {id} is open in another llembas (process {holder})"
            )),
            "{text}"
        );
        Ok(())
    })
    .await;
    let status = super::oneshot::terminated(&mut first).await;
    assert_eq!(status.code(), Some(143), "{status:?}");
}

/// Issue 27: over ACP a write outside the working directory names one path everywhere — the
/// call's `locations`, the question's subject and change, the diff of its final update — and
/// the file lands at that path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_outside_names_one_path_to_the_client() {
    use agent_client_protocol::v1::schema::{SetSessionModeRequest, ToolCallContent};
    let sb = Sandbox::new();
    let root = sb.root();
    let out = tempfile::tempdir().unwrap();
    let target = std::fs::canonicalize(out.path()).unwrap().join("OUT.txt");
    let t = target.display().to_string();
    let server = ScriptedServer::start(vec![
        tool_call("c1", "write", json!({"path": t, "content": "made\n"})),
        text(&["Written."]),
    ])
    .await
    .unwrap();
    let r = root.clone();
    let (updates, asked) = plain_client(&sb, &server.base_url(), async move |cx| {
        let s = cx
            .send_request(NewSessionRequest::new(r))
            .block_task()
            .await?;
        cx.send_request(SetSessionModeRequest::new(s.session_id.clone(), "edit"))
            .block_task()
            .await?;
        let done = cx
            .send_request(PromptRequest::new(
                s.session_id.clone(),
                vec![ContentBlock::Text(TextContent::new("write it"))],
            ))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    assert_eq!(asked.len(), 1, "{asked:?}");
    let q = &asked[0];
    let locations = q.tool_call.fields.locations.clone().unwrap_or_default();
    assert_eq!(locations.len(), 1, "{q:?}");
    assert_eq!(locations[0].path, target);
    let lembas = &q.meta.as_ref().unwrap()["lembas"];
    assert_eq!(lembas["subject"], t.as_str(), "{lembas}");
    assert!(
        lembas["change"]
            .as_str()
            .unwrap()
            .contains(&format!("+++ {t}")),
        "{lembas}"
    );
    let diffs: Vec<PathBuf> = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) => u.fields.content.clone(),
            _ => None,
        })
        .flatten()
        .filter_map(|c| match c {
            ToolCallContent::Diff(d) => Some(d.path),
            _ => None,
        })
        .collect();
    assert!(
        !diffs.is_empty() && diffs.iter().all(|p| *p == target),
        "{diffs:?}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "made\n");
    let rerooted = root.join(target.strip_prefix("/").unwrap());
    assert!(!rerooted.exists(), "{} was made", rerooted.display());
}

/// `session/list`: the saved sessions of a directory, newest first, advertised in
/// `initialize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_sessions_are_listed() {
    use agent_client_protocol::v1::schema::ListSessionsRequest;
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![text(&["One."]), text(&["Two."])])
        .await
        .unwrap();
    with_agent(&sb, &server.base_url(), async move |cx| {
        let mut opened = Vec::new();
        for words in ["first", "second"] {
            let s = cx
                .send_request(NewSessionRequest::new(root.clone()))
                .block_task()
                .await?;
            cx.send_request(PromptRequest::new(
                s.session_id.clone(),
                vec![ContentBlock::Text(TextContent::new(words))],
            ))
            .block_task()
            .await?;
            opened.push(s.session_id.to_string());
        }
        let listed = cx
            .send_request(ListSessionsRequest::new().cwd(root.clone()))
            .block_task()
            .await?;
        let mut ids: Vec<String> = listed
            .sessions
            .iter()
            .map(|s| s.session_id.to_string())
            .collect();
        assert!(listed.sessions.iter().all(|s| s.cwd == root), "{listed:?}");
        let times: Vec<&str> = listed
            .sessions
            .iter()
            .map(|s| s.updated_at.as_deref().unwrap())
            .collect();
        let mut newest_first = times.clone();
        newest_first.sort_by(|a, b| b.cmp(a));
        assert_eq!(times, newest_first);
        ids.sort();
        opened.sort();
        assert_eq!(ids, opened);
        // Another directory has none.
        let none = cx
            .send_request(ListSessionsRequest::new().cwd(root.join("sub")))
            .block_task()
            .await?;
        assert!(none.sessions.is_empty(), "{none:?}");
        Ok(())
    })
    .await;
}

/// The project's prompt commands over ACP: `.llembas/commands/review.md` is advertised to the
/// editor and `/review ARGS` reaches the model expanded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_projects_prompt_commands_reach_an_editor() {
    let sb = Sandbox::new();
    let root = sb.root();
    std::fs::create_dir_all(root.join(".llembas/commands")).unwrap();
    std::fs::write(
        root.join(".llembas/commands/review.md"),
        "---\ndescription: Review for bugs\n---\nReview $ARGUMENTS for bugs.\n",
    )
    .unwrap();
    let server = ScriptedServer::start(vec![text(&["Looks fine."])])
        .await
        .unwrap();
    let url = server.base_url();
    let r = root.clone();
    let (updates, _) = plain_client(&sb, &url, async move |cx| {
        let s = cx
            .send_request(NewSessionRequest::new(r))
            .block_task()
            .await?;
        cx.send_request(PromptRequest::new(
            s.session_id,
            vec![ContentBlock::Text(TextContent::new("/review src/lib.rs"))],
        ))
        .block_task()
        .await?;
        Ok(())
    })
    .await;
    let advertised: Vec<(String, String)> = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::AvailableCommandsUpdate(c) => Some(
                c.available_commands
                    .iter()
                    .map(|c| (c.name.clone(), c.description.clone()))
                    .collect(),
            ),
            _ => None,
        })
        .expect("the commands advertised");
    assert!(
        advertised.contains(&("review".into(), "Review for bugs".into())),
        "{advertised:?}"
    );
    let bodies = server.bodies();
    let sent = bodies[0]["messages"].to_string();
    assert!(sent.contains("Review src/lib.rs for bugs."), "{sent}");
}

/// An editor's `mcpServers` (issue 33): the real everything server given in `session/new` is
/// started for the session, and the model's call of its tool is answered by the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editors_mcp_server_is_started_and_its_tool_called() {
    use agent_client_protocol::v1::schema::{McpServer, McpServerStdio};
    let Some(bin) = harness_test_support::mcp_everything() else {
        return;
    };
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![
        tool_call(
            "m1",
            "mcp__everything__echo",
            json!({"message": "hi from the editor"}),
        ),
        text(&["It echoed."]),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    let (updates, asked) = plain_client(&sb, &url, async move |cx| {
        let s = cx
            .send_request(
                NewSessionRequest::new(root).mcp_servers(vec![McpServer::Stdio(
                    McpServerStdio::new("everything", bin).args(vec!["stdio".into()]),
                )]),
            )
            .block_task()
            .await?;
        let m = &s.meta.as_ref().unwrap()["lembas"];
        assert_eq!(m["mcp_servers"]["given"], 1, "{m}");
        let done = cx
            .send_request(PromptRequest::new(
                s.session_id,
                vec![ContentBlock::Text(TextContent::new("echo through MCP"))],
            ))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    // Asked (or not: the everything server marks echo read-only) with the tool's own name.
    for a in &asked {
        assert_eq!(
            a.meta.as_ref().unwrap()["lembas"]["tool"],
            "mcp__everything__echo"
        );
    }
    let bodies = server.bodies();
    let result = bodies[1]["messages"].to_string();
    assert!(result.contains("Echo: hi from the editor"), "{result}");
    assert!(
        updates
            .iter()
            .any(|n| matches!(&n.update, SessionUpdate::ToolCall(c) if c.title.contains("echo"))),
        "no tool call of echo: {updates:?}"
    );
}
