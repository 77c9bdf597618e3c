//! A whole session driven through the crate over an in-memory duplex stream, with
//! `agent-client-protocol`'s own client on the other end.

use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, InitializeRequest, LoadSessionRequest, NewSessionRequest,
    PromptRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, StopReason, TextContent,
    ToolCallStatus, ToolKind,
};
use agent_client_protocol::{ByteStreams, Client};
use harness_agent::Reply;
use serde_json::json;
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use super::{COUNTDOWN_PIECES, TestHost, info, prompt_once};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_runs_a_session_over_a_duplex_stream() {
    let host = TestHost::new(vec![
        Reply::call("launch", json!({})),
        Reply::text("The rocket is up."),
    ]);
    // The agent's end and the client's end of one in-memory pipe.
    let (agent_end, client_end) = tokio::io::duplex(64 * 1024);
    let (agent_in, agent_out) = tokio::io::split(agent_end);
    let agent = tokio::spawn(harness_acp::serve_stream(
        host.clone(),
        info(),
        agent_in,
        agent_out,
    ));
    let (client_in, client_out) = tokio::io::split(client_end);
    let transport = ByteStreams::new(client_out.compat_write(), client_in.compat());

    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let asked: Arc<Mutex<Vec<RequestPermissionRequest>>> = Arc::default();
    let (u, a) = (updates.clone(), asked.clone());
    let seen = updates.clone();
    let run = Client
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
                    InitializeRequest::new(ProtocolVersion::V1).client_capabilities(
                        ClientCapabilities::new().meta(super::map::lembas(json!({
                            "protocol": 2, "spec": "3.1.0", "capabilities": ["jobs"]
                        }))),
                    ),
                )
                .block_task()
                .await?;
            let agent_info = init.agent_info.clone().unwrap();
            assert_eq!(agent_info.name, "test-agent");
            assert_eq!(agent_info.version, "9.9.9");
            let m = init.agent_capabilities.meta.clone().unwrap();
            assert_eq!(m["lembas"]["instance"]["id"], "test-1");
            assert_eq!(m["lembas"]["limits"]["roots"], json!(["/work"]));
            assert_eq!(m["lembas"]["limits"]["models"], json!(["scripted"]));
            assert!(init.agent_capabilities.load_session);
            // Images and embedded files are taken; audio is not.
            let prompt = &init.agent_capabilities.prompt_capabilities;
            assert!(prompt.image && prompt.embedded_context && !prompt.audio);
            // Past sessions are listed (`session/list`).
            let sessions = &init.agent_capabilities.session_capabilities;
            assert!(sessions.list.is_some());

            // A LLeMbas client keeps to the host's roots.
            let err = cx
                .send_request(NewSessionRequest::new("/elsewhere"))
                .block_task()
                .await
                .unwrap_err();
            assert_eq!(i32::from(err.code), -32041, "{err:?}");
            // A session the host never saved.
            let err = cx
                .send_request(LoadSessionRequest::new("s_gone", "/work"))
                .block_task()
                .await
                .unwrap_err();
            assert_eq!(i32::from(err.code), -32002, "{err:?}");

            let s = cx
                .send_request(NewSessionRequest::new("/work"))
                .block_task()
                .await?;
            assert_eq!(
                s.modes.as_ref().unwrap().current_mode_id.to_string(),
                "manual"
            );
            let r = cx
                .send_request(PromptRequest::new(
                    s.session_id.clone(),
                    vec![ContentBlock::Text(TextContent::new("launch the rocket"))],
                ))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            // A slash command is the agent's, not the model's.
            let r = cx
                .send_request(PromptRequest::new(
                    s.session_id.clone(),
                    vec![ContentBlock::Text(TextContent::new("/mode"))],
                ))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            // `/mode plan` as a prompt sets the mode and says so.
            let r = cx
                .send_request(PromptRequest::new(
                    s.session_id.clone(),
                    vec![ContentBlock::Text(TextContent::new("/mode plan"))],
                ))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            // Told before the prompt was answered.
            assert!(
                seen.lock().unwrap().iter().any(|n| matches!(&n.update,
                    SessionUpdate::CurrentModeUpdate(m) if m.current_mode_id.to_string() == "plan")),
                "no current_mode_update before `/mode plan` was answered"
            );
            Ok(())
        });
    tokio::time::timeout(std::time::Duration::from_secs(60), run)
        .await
        .expect("the ACP run took over 60 s")
        .unwrap();
    // The client is gone: the agent ends.
    tokio::time::timeout(std::time::Duration::from_secs(60), agent)
        .await
        .expect("the agent did not end when the client closed")
        .unwrap()
        .unwrap();

    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let lembas = &asked[0].meta.as_ref().unwrap()["lembas"];
    assert_eq!(lembas["tool"], "launch");
    assert_eq!(lembas["mode"], "manual");

    let updates = updates.lock().unwrap().clone();
    let call = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .expect("a tool_call update");
    assert_eq!(call.title, "launch");
    // A tool the spec does not name (the world registered it) is of kind `other`.
    assert_eq!(call.kind, ToolKind::Other);
    assert_eq!(call.status, ToolCallStatus::Pending);
    let statuses: Vec<ToolCallStatus> = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::ToolCallUpdate(u) if u.tool_call_id == call.tool_call_id => {
                u.fields.status
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses,
        [ToolCallStatus::InProgress, ToolCallStatus::Completed],
        "{updates:?}"
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
    assert_eq!(said, "The rocket is up.mode: manual");
    let commands = updates
        .iter()
        .find_map(|n| match &n.update {
            SessionUpdate::AvailableCommandsUpdate(c) => Some(c.available_commands.clone()),
            _ => None,
        })
        .expect("the slash commands advertised");
    let names: Vec<String> = commands.iter().map(|c| c.name.clone()).collect();
    assert_eq!(names, ["mode", "plan", "jobs", "compact", "recall"]);
    let modes: Vec<String> = updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        modes,
        ["plan"],
        "`/mode plan` is told as current_mode_update"
    );
}

/// Capability `memory`: a session's `_meta.lembas.api` reaches the host read as the memory
/// API (a malformed one as none), and only where the capability was agreed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_api_reaches_the_host_read() {
    for (capabilities, api, want) in [
        (
            json!(["memory"]),
            json!({"url": "https://chat.example/api/lembas/v1/", "token": "lsk_s_1"}),
            Some("https://chat.example/api/lembas/v1"),
        ),
        (
            json!(["memory"]),
            json!({"url": "ftp://x", "token": "t"}),
            None,
        ),
        (
            json!([]),
            json!({"url": "https://chat.example/api/lembas/v1", "token": "lsk_s_1"}),
            None,
        ),
    ] {
        let host = TestHost::new(vec![Reply::text("ok")]);
        let (agent_end, client_end) = tokio::io::duplex(64 * 1024);
        let (agent_in, agent_out) = tokio::io::split(agent_end);
        let agent = tokio::spawn(harness_acp::serve_stream(
            host.clone(),
            info(),
            agent_in,
            agent_out,
        ));
        let (client_in, client_out) = tokio::io::split(client_end);
        let transport = ByteStreams::new(client_out.compat_write(), client_in.compat());
        Client
            .v1()
            .connect_with(transport, async move |cx| {
                cx.send_request(
                    InitializeRequest::new(ProtocolVersion::V1).client_capabilities(
                        ClientCapabilities::new().meta(super::map::lembas(json!({
                            "protocol": 2, "spec": "3.1.0", "capabilities": capabilities
                        }))),
                    ),
                )
                .block_task()
                .await?;
                cx.send_request(
                    NewSessionRequest::new("/work").meta(super::map::lembas(json!({"api": api}))),
                )
                .block_task()
                .await?;
                Ok(())
            })
            .await
            .unwrap();
        let got: Vec<Option<String>> = host
            .memory_apis
            .lock()
            .unwrap()
            .iter()
            .map(|a| a.as_ref().map(|a| a.url.clone()))
            .collect();
        assert_eq!(got, vec![want.map(str::to_owned)]);
        agent.abort();
    }
}

/// A command's streamed output reaches the client once: each `tool_call_update` carries the
/// piece new since the last, so the bytes on the wire stay proportional to the output (resent
/// whole, 100 pieces of 1,000 bytes were 5 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_output_is_sent_once_not_whole_each_time() {
    let host = TestHost::new(vec![
        Reply::call("countdown", json!({})),
        Reply::text("Done."),
    ]);
    let (agent_end, client_end) = tokio::io::duplex(64 * 1024);
    let (agent_in, agent_out) = tokio::io::split(agent_end);
    let agent = tokio::spawn(harness_acp::serve_stream(
        host.clone(),
        info(),
        agent_in,
        agent_out,
    ));
    let (client_in, client_out) = tokio::io::split(client_end);
    let transport = ByteStreams::new(client_out.compat_write(), client_in.compat());
    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let u = updates.clone();
    let run = Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                u.lock().unwrap().push(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |_r: RequestPermissionRequest, responder, _cx| {
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
            let s = cx
                .send_request(NewSessionRequest::new("/work"))
                .block_task()
                .await?;
            let r = cx
                .send_request(PromptRequest::new(
                    s.session_id.clone(),
                    vec![ContentBlock::Text(TextContent::new("count down"))],
                ))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            Ok(())
        });
    tokio::time::timeout(std::time::Duration::from_secs(60), run)
        .await
        .expect("the ACP run took over 60 s")
        .unwrap();
    agent.abort();

    let updates = updates.lock().unwrap().clone();
    let running: Vec<&SessionNotification> = updates
        .iter()
        .filter(|n| {
            matches!(&n.update, SessionUpdate::ToolCallUpdate(u)
                if u.fields.status == Some(ToolCallStatus::InProgress) && u.fields.content.is_some())
        })
        .collect();
    assert_eq!(running.len(), COUNTDOWN_PIECES, "one update per piece");
    let output = COUNTDOWN_PIECES * 1000;
    let wire: usize = running
        .iter()
        .map(|n| serde_json::to_string(n).unwrap().len())
        .sum();
    assert!(
        wire < 2 * output,
        "{wire} bytes on the wire for {output} bytes of output"
    );
    // The last update shows the last piece, not the whole.
    let SessionUpdate::ToolCallUpdate(last) = &running[running.len() - 1].update else {
        unreachable!()
    };
    let shown = serde_json::to_value(last.fields.content.as_ref().unwrap()).unwrap();
    assert_eq!(shown[0]["content"]["text"], format!("{:>999}\n", 0));
}

/// A subagent's own calls reach the editor as tool calls of their own, named under the `task`
/// call that runs them (`task id/call id`, `_meta.lembas.parent`), in progress then completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_calls_are_sent_under_its_task() {
    let host = TestHost::new(vec![
        Reply::call("task", json!({"agent": "general", "prompt": "Count down."})),
        Reply::call("countdown", json!({})),
        Reply::text("Counted."),
        Reply::text("Done."),
    ]);
    let (answer, updates) = prompt_once(
        host,
        vec![ContentBlock::Text(TextContent::new("have it counted"))],
    )
    .await;
    assert_eq!(answer.unwrap().stop_reason, StopReason::EndTurn);
    let task = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(c) if c.title.starts_with("task") => {
                Some(c.tool_call_id.to_string())
            }
            _ => None,
        })
        .expect("the task call was sent");
    let child = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(c)
                if c.tool_call_id.to_string().starts_with(&format!("{task}/")) =>
            {
                Some(c.clone())
            }
            _ => None,
        })
        .expect("the subagent's call was sent");
    assert_eq!(child.status, ToolCallStatus::InProgress);
    let lembas = &child.meta.as_ref().unwrap()["lembas"];
    assert_eq!(lembas["parent"], json!(task));
    assert_eq!(lembas["tool"], json!("countdown"));
    let ended = updates.iter().any(|u| {
        matches!(u, SessionUpdate::ToolCallUpdate(c)
            if c.tool_call_id == child.tool_call_id
                && c.fields.status == Some(ToolCallStatus::Completed))
    });
    assert!(ended, "{updates:?}");
}
