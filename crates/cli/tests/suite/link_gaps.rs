//! A device chat's approvals and run ends as a local chat's (`llembas link`, a real process,
//! against the real server's library): a "no" with a note reaches the device's model, and a run
//! the server no longer has — taken over by another process, or interrupted by the server's
//! shutdown — is cancelled on the device (`session/cancel`), so no turn runs there unseen; an
//! image sent with a message reaches the device's agent, which decides by its own model.

use std::time::{Duration, Instant};

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::link::{Device, Person, Server, pair};
use super::{Sandbox, text, tool_call};

/// A device paired to alice and linked, and a chat on it in `mode`: (device, its id, chat).
async fn chat_on_device(
    alice: &Person<'_>,
    sb: &Sandbox,
    model: &str,
    mode: &str,
) -> (Device, String, String) {
    let root_text = sb.root().display().to_string();
    let mut device = Device::start(sb, model, &alice.server.base, &["--root", &root_text]);
    let id = pair(alice.server, &alice.http, &mut device, "laptop").await;
    alice.server.until_link(&id, |l| l.is_some()).await;
    let (status, v) = alice
        .post(
            "/api/chats",
            json!({"device": id, "dir": root_text, "mode": mode}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    (device, id, v["id"].as_str().unwrap().to_owned())
}

/// The state of the device's sessions as it says (`_lembas/status`): `running` or `idle` each.
async fn device_states(server: &Server, id: &str) -> Vec<String> {
    let live = server.app.device_links.live(id).unwrap();
    let status = live
        .agent
        .send_request(harness_acp::ext::StatusRequest {})
        .block_task()
        .await
        .unwrap();
    status.0["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["state"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Waits (a minute at most) until no session of the device runs a turn.
async fn until_idle(server: &Server, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let states = device_states(server, id).await;
        if !states.is_empty() && states.iter().all(|s| s == "idle") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the device's turn was never cancelled: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_with_a_note_answered_in_the_page_reaches_the_devices_model() {
    let model = ScriptedServer::start(vec![
        tool_call(
            "w1",
            "write",
            json!({"path": "secret.txt", "content": "x\n"}),
        ),
        text(&["Understood, no file."]),
    ])
    .await
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let alice = Person {
        server: &server,
        http: server.user("alice").await,
    };
    let sb = Sandbox::new();
    let (_device, _id, chat) = chat_on_device(&alice, &sb, &model.base_url(), "manual").await;
    let run = alice.send(&chat, "write secret.txt").await;
    let asked = alice
        .until(&chat, "the approval", |e| e["type"] == "tool_call_asked")
        .await;
    let approval = asked["approval"].as_str().unwrap();
    let (status, v) = alice
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "no", "note": "not in this repository, please"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(alice.ended(&chat, &run).await, "finished");
    assert!(!sb.root().join("secret.txt").exists());
    // The model read the person's note in the refused call's result.
    let second = model.bodies()[1].to_string();
    assert!(
        second.contains("not in this repository, please"),
        "{second}"
    );
    let answered = alice
        .until(&chat, "the answer", |e| e["type"] == "tool_call_answered")
        .await;
    assert_eq!(answered["answer"]["answer"], "deny", "{answered}");
    assert_eq!(
        answered["answer"]["feedback"], "not in this repository, please",
        "{answered}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_run_taken_over_by_another_process_is_cancelled_on_the_device() {
    let model = ScriptedServer::start(vec![text(&["Working"]).stalling(), text(&["Again."])])
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    // A short lease: its renewal, which finds a run taken over, comes every third of it.
    let server = Server::start_with_lease(
        data.path(),
        &model.base_url(),
        "127.0.0.1:0",
        Duration::from_secs(1),
    );
    let alice = Person {
        server: &server,
        http: server.user("alice").await,
    };
    let sb = Sandbox::new();
    let (_device, id, chat) = chat_on_device(&alice, &sb, &model.base_url(), "auto").await;
    let run = alice.send(&chat, "work a while").await;
    alice
        .until(&chat, "the stalled answer", |e| {
            e["type"] == "text_delta" && e["text"] == "Working"
        })
        .await;
    assert_eq!(device_states(&server, &id).await, ["running"]);
    // Another process of a shared database took the run over (as its recovery does when this
    // one stopped renewing): the device's turn must not go on here unseen.
    sqlx::query("UPDATE runs SET status = 'interrupted', owner = 'another-process' WHERE id = $1")
        .bind(&run)
        .execute(&server.app.pool)
        .await
        .unwrap();
    until_idle(&server, &id).await;
    // The chat is free again: a message is a new run on the device.
    let again = alice.send(&chat, "go on").await;
    assert_eq!(alice.ended(&chat, &again).await, "finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_shutdown_interrupts_a_device_run_and_cancels_it_on_the_device() {
    let model = ScriptedServer::start(vec![text(&["Working"]).stalling()])
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let alice = Person {
        server: &server,
        http: server.user("alice").await,
    };
    let sb = Sandbox::new();
    let (_device, id, chat) = chat_on_device(&alice, &sb, &model.base_url(), "auto").await;
    let run = alice.send(&chat, "work a while").await;
    alice
        .until(&chat, "the stalled answer", |e| {
            e["type"] == "text_delta" && e["text"] == "Working"
        })
        .await;
    // The shutdown's work (what `serve` does once asked to stop), the link still up: the run
    // is interrupted and the device's turn cancelled.
    let interrupted = server.app.stop().await.unwrap();
    assert_eq!(interrupted, 1);
    let status: String = sqlx::query_scalar("SELECT status FROM runs WHERE id = $1")
        .bind(&run)
        .fetch_one(&server.app.pool)
        .await
        .unwrap();
    assert_eq!(status, "interrupted");
    until_idle(&server, &id).await;
    let events = alice.events(&chat).await;
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "run_ended" && e["status"] == "interrupted"),
        "{events:#?}"
    );
}

/// A PNG of one pixel.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_sent_to_a_device_chat_reaches_the_devices_agent_which_decides_by_its_model() {
    let model = ScriptedServer::start(vec![text(&["No image here."])])
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let alice = Person {
        server: &server,
        http: server.user("alice").await,
    };
    // Alice's home on the server, where the composer uploads what she attaches.
    let (_, me) = alice.get("/api/auth/me").await;
    llembas_server::world::give_default_grants(
        &server.app.pool,
        &server.app.tree,
        me["id"].as_i64().unwrap(),
        "alice",
    )
    .await
    .unwrap();
    std::fs::write(server.app.tree.join("home/alice/dot.png"), PNG).unwrap();
    let sb = Sandbox::new();
    let (_device, _id, chat) = chat_on_device(&alice, &sb, &model.base_url(), "auto").await;
    let (status, v) = alice
        .post(
            &format!("/api/chats/{chat}/messages"),
            json!({"text": "look", "images": ["/home/alice/dot.png"]}),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    let run = v["run"].as_str().unwrap().to_owned();
    assert_eq!(alice.ended(&chat, &run).await, "finished");
    let started = alice
        .until(&chat, "the run's start", |e| e["type"] == "run_started")
        .await;
    assert_eq!(started["images"], json!(["/home/alice/dot.png"]));
    // The device's model (`scripted`) reads no images: its agent left it out and said so.
    let notice = alice
        .until(&chat, "the device's notice", |e| e["type"] == "notice")
        .await;
    assert_eq!(
        notice["text"], "scripted does not read images (its metadata says so): 1 image left out",
        "{notice}"
    );
    assert!(!model.bodies()[0].to_string().contains("data:image/png"));
}

/// The memory tokens the server handed to sessions of the device `id`.
async fn device_tokens(server: &Server, id: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM chat_tokens WHERE device_id = $1")
        .bind(id)
        .fetch_one(&server.app.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_devices_memory_tokens_do_not_outlive_a_crash_of_the_server() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let alice = Person {
        server: &server,
        http: server.user("alice").await,
    };
    let sb = Sandbox::new();
    let (_device, id, _chat) = chat_on_device(&alice, &sb, &model.base_url(), "auto").await;
    // The chat's session on the device holds a token for the person's memory.
    assert_eq!(device_tokens(&server, &id).await, 1);
    // The server crashes with the link up: nothing ended the session's token.
    drop(alice);
    server.crash();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    assert_eq!(
        device_tokens(&server, &id).await,
        0,
        "a token of a link from before the start still opens the person's memory"
    );
}
