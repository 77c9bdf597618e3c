//! The memory HTTP API of `spec/acp.md` §12: a bearer token scoped to one chat of its person;
//! the chat's `memory` tool and the API read and change the same records, per user.

use harness_test_support::ScriptedServer;
use serde_json::{Value, json};

use super::{Client, Ev, Events, run_end, text, tool_call};

/// Runs one message to its end, answering any approval yes; the tool results it carried.
async fn run(c: &mut Client, stream: &mut Events, chat: &str, say: &str) -> Vec<Value> {
    let run = c.say(chat, say).await;
    let mut results = Vec::new();
    loop {
        let e: Ev = stream.next().await;
        if e.kind() == "tool_call_asked" {
            let id = e.data["event"]["approval"].as_str().unwrap().to_owned();
            let (status, _) = c
                .post(&format!("/api/approvals/{id}"), json!({"answer": "yes"}))
                .await;
            assert_eq!(status, 200);
        }
        if e.kind() == "tool_call_finished" {
            results.push(e.data["event"]["result"].clone());
        }
        if run_end(&run)(&e) {
            assert_eq!(e.data["event"]["status"], "finished", "{:?}", e.data);
            return results;
        }
    }
}

fn api(base: &str, token: &str) -> Client {
    let mut c = Client::anonymous(base);
    c.bearer = Some(token.to_owned());
    c
}

/// The path of `url` on the server (the API's base as handed out).
fn on(url: &str, path: &str) -> String {
    let rest = url.trim_start_matches("http://");
    let at = rest.find('/').unwrap();
    format!("{}{path}", &rest[at..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_api_and_the_chats_tool_see_the_same_records_per_user() {
    let model = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "memory",
            json!({"action": "add", "text": "Alice prefers tabs."}),
        ),
        text(&["Noted."]),
        tool_call("c2", "memory", json!({"action": "view"})),
        text(&["Seen."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = super::Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let chat = alice.chat().await;
    let bobs_chat = bob.chat().await;

    // A token for one's own chat only; a user's own API token is not one.
    let (status, _) = bob
        .post(&format!("/api/chats/{chat}/memory-token"), json!({}))
        .await;
    assert_eq!(status, 404);
    let (status, handed) = alice
        .post(&format!("/api/chats/{chat}/memory-token"), json!({}))
        .await;
    assert_eq!(status, 201, "{handed}");
    let url = handed["url"].as_str().unwrap().to_owned();
    assert!(url.ends_with("/api/lembas/v1"), "{url}");
    let memory = on(&url, "/memory");
    let mut by_api = api(&server.base, handed["token"].as_str().unwrap());
    let (status, empty) = by_api.get(&memory).await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(
        empty,
        json!({"target": "memory", "entries": [], "chars": 0, "limit": 2200})
    );

    // The chat's tool adds; the API sees it.
    let mut stream = alice.events(None).await;
    let results = run(&mut alice, &mut stream, &chat, "remember tabs").await;
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    let (_, state) = by_api.get(&memory).await;
    assert_eq!(
        state["entries"],
        json!([{"id": "m1", "text": "Alice prefers tabs."}])
    );

    // The API changes (a batch, all or nothing); the chat's tool sees it.
    let (status, state) = by_api
        .post(
            &memory,
            json!({"changes": [{"action": "add", "text": "Likes Rust."}, {"action": "replace", "id": "m1", "text": "Tabs, width 4."}]}),
        )
        .await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(
        state["entries"],
        json!([{"id": "m1", "text": "Tabs, width 4."}, {"id": "m2", "text": "Likes Rust."}])
    );
    assert_eq!(state["chars"], 25);
    let results = run(&mut alice, &mut stream, &chat, "what do you know").await;
    let seen = results[0]["content"].as_str().unwrap();
    assert!(
        seen.contains("- [m1] Tabs, width 4.") && seen.contains("- [m2] Likes Rust."),
        "{seen}"
    );

    // Refusals are the tool's own texts, with 409, and change nothing.
    let (status, body) = by_api
        .post(
            &memory,
            json!({"changes": [{"action": "remove", "id": "m9"}]}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body["error"],
        "Memory: there is no entry \"m9\" in memory; view shows the ids."
    );
    let (status, body) = by_api
        .post(
            &memory,
            json!({"changes": [{"action": "add", "text": "x".repeat(2200)}]}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("Memory full: memory would take 2225 of 2200 characters"),
        "{body}"
    );
    assert_eq!(by_api.get(&memory).await.1, state);
    let (status, _) = by_api.post(&memory, json!({"nope": 1})).await;
    assert_eq!(status, 400);

    // Bob's token reaches Bob's memory only.
    let (_, bobs) = bob
        .post(&format!("/api/chats/{bobs_chat}/memory-token"), json!({}))
        .await;
    let mut bobs_api = api(&server.base, bobs["token"].as_str().unwrap());
    assert_eq!(bobs_api.get(&memory).await.1["entries"], json!([]));
    let (status, _) = bobs_api
        .post(
            &memory,
            json!({"changes": [{"action": "add", "text": "Bob's."}]}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(by_api.get(&memory).await.1, state);

    // Anything but a chat's token is refused with 401.
    for bearer in [
        "lsk_s_0000".to_owned(),
        alice.post("/api/tokens", json!({})).await.1["token"]
            .as_str()
            .unwrap()
            .to_owned(),
    ] {
        let mut other = api(&server.base, &bearer);
        assert_eq!(other.get(&memory).await.0, 401);
    }
    let mut with_cookie = alice.clone();
    assert_eq!(with_cookie.get(&memory).await.0, 401);

    // A file the server cannot read is a 500 whose text names no host path nor its detail.
    for e in std::fs::read_dir(dir.path().join("memory")).unwrap() {
        std::fs::write(e.unwrap().path(), "not json").unwrap();
    }
    let (status, body) = by_api.get(&memory).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        body,
        json!({"error": "Internal error: the server could not do this; the detail is in its log."})
    );
}
