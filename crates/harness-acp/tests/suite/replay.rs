//! `session/load`: a saved session replayed as resuming left it.

use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    ContentBlock, LoadSessionRequest, SessionNotification, SessionUpdate, ToolCallContent,
    ToolCallStatus,
};
use agent_client_protocol::{ByteStreams, Client};
use harness_agent::SessionStore as _;
use harness_core::protocol::{Origin, ToolCall};
use harness_loop::transcript::Entry;
use serde_json::json;
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use super::{TestHost, ended, info, initialize};

/// Loads session `id` of `host` as a client with the `_lembas` capabilities `caps`; the
/// updates replayed.
async fn load(host: Arc<TestHost>, id: &str, caps: &[&str]) -> Vec<SessionUpdate> {
    let (agent_end, client_end) = tokio::io::duplex(64 * 1024);
    let (agent_in, agent_out) = tokio::io::split(agent_end);
    let agent = tokio::spawn(harness_acp::serve_stream(host, info(), agent_in, agent_out));
    let (client_in, client_out) = tokio::io::split(client_end);
    let transport = ByteStreams::new(client_out.compat_write(), client_in.compat());
    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let u = updates.clone();
    let id = id.to_owned();
    let caps: Vec<String> = caps.iter().map(|c| (*c).to_owned()).collect();
    let run = Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                u.lock().unwrap().push(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx| {
            cx.send_request(initialize(&caps)).block_task().await?;
            cx.send_request(LoadSessionRequest::new(id, "/work"))
                .block_task()
                .await?;
            Ok(())
        });
    ended(run, agent).await;
    let updates = updates.lock().unwrap();
    updates.iter().map(|n| n.update.clone()).collect()
}

/// A host holding one saved session of `entries`; its id.
fn saved(entries: &[Entry]) -> (Arc<TestHost>, String) {
    let host = TestHost::new(Vec::new());
    let meta = host.store.create("/work", "scripted").unwrap();
    host.store.append(&meta.id, entries).unwrap();
    (host, meta.id)
}

fn turn(text: &str, origin: Origin) -> Entry {
    Entry::TurnStarted {
        turn: 1,
        text: text.into(),
        origin,
        images: Vec::new(),
    }
}

fn text_of(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        other => format!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_a_kill_is_replayed_with_its_result() {
    // The process was killed while `launch` ran: a call started, no result saved.
    let (host, id) = saved(&[
        turn("launch the rocket", Origin::Person),
        Entry::Assistant {
            text: String::new(),
            reasoning: String::new(),
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "launch".into(),
                arguments: json!({}),
            }],
        },
        Entry::CallsStarted {
            call_ids: vec!["call_1".into()],
        },
    ]);
    let updates = load(host, &id, &[]).await;
    let result = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCallUpdate(c) if c.tool_call_id.to_string() == "call_1" => {
                Some(c.fields.clone())
            }
            _ => None,
        })
        .expect("the cut call replayed with a result");
    assert_eq!(result.status, Some(ToolCallStatus::Failed));
    let text = match &result.content.unwrap()[0] {
        ToolCallContent::Content(c) => text_of(&c.content),
        other => format!("{other:?}"),
    };
    assert!(
        text.contains("Interrupted: this call was running"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_messages_never_replay_as_the_persons() {
    let entries = [
        turn("build it in the background", Origin::Person),
        Entry::Assistant {
            text: "Started.".into(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
        },
        Entry::TurnEnded {
            reason: harness_core::protocol::TurnEnd::Finished,
        },
        turn(
            "<job id=\"1\" kind=\"command\" state=\"done\">",
            Origin::Machine,
        ),
        Entry::User {
            text: "a note from the harness".into(),
            origin: Origin::Machine,
        },
        Entry::Assistant {
            text: "The job finished.".into(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
        },
    ];
    // (capabilities, the user messages replayed: text and whether marked machine)
    type Case<'a> = (&'a [&'a str], Vec<(&'a str, bool)>);
    let cases: [Case; 2] = [
        // A plain editor: the person's own only.
        (&[], vec![("build it in the background", false)]),
        // A client that knows jobs: the machine's marked as such.
        (
            &["jobs"],
            vec![
                ("build it in the background", false),
                ("<job id=\"1\" kind=\"command\" state=\"done\">", true),
                ("a note from the harness", true),
            ],
        ),
    ];
    for (caps, want) in cases {
        let (host, id) = saved(&entries);
        let updates = load(host, &id, caps).await;
        let users: Vec<(String, bool)> = updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::UserMessageChunk(c) => Some((
                    text_of(&c.content),
                    c.meta
                        .as_ref()
                        .is_some_and(|m| m["lembas"]["machine"] == true),
                )),
                _ => None,
            })
            .collect();
        let want: Vec<(String, bool)> = want.into_iter().map(|(t, m)| (t.into(), m)).collect();
        assert_eq!(users, want, "{caps:?}");
    }
}
