//! Going back to an earlier message (the page's edit-and-send and regenerate): the conversation
//! goes back to before it, the files the chat changed since are put back (one the person
//! changed by hand is left and said), and its run and those after it leave the history.

use harness_test_support::ScriptedServer;
use serde_json::{Value, json};

use super::{Server, run_end, text, tool_call};

/// The person's messages a model request carried, in order.
fn persons(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_again_takes_the_chat_and_its_files_back_to_before_it() {
    let model = ScriptedServer::start(vec![
        // Turn 1.
        tool_call("c1", "write", json!({"path": "a.md", "content": "one\n"})),
        text(&["Wrote one."]),
        // Turn 2: a.md changed, b.md and c.md made.
        tool_call("c2", "write", json!({"path": "a.md", "content": "two\n"})),
        tool_call("c3", "write", json!({"path": "b.md", "content": "new\n"})),
        tool_call("c4", "write", json!({"path": "c.md", "content": "agent\n"})),
        text(&["Wrote two."]),
        // Turn 2 again, edited.
        text(&["Edited answer."]),
        // Turn 2 once more, the files kept.
        text(&["Regenerated."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let (status, body) = alice.post("/api/chats", json!({"mode": "auto"})).await;
    assert_eq!(status, 201, "{body}");
    let chat = body["id"].as_str().unwrap().to_owned();
    let url = format!("/api/chats/{chat}/messages");
    let mut stream = alice.events(None).await;
    let home = server.tree().join("home/alice");

    let first = alice.say(&chat, "first: write one").await;
    stream.until(run_end(&first)).await;
    let second = alice.say(&chat, "second: write two").await;
    stream.until(run_end(&second)).await;
    assert_eq!(std::fs::read_to_string(home.join("a.md")).unwrap(), "two\n");
    assert!(home.join("b.md").exists());
    // The person changes c.md by hand after the turn.
    std::fs::write(home.join("c.md"), "mine\n").unwrap();

    // Refused before anything changes: another user's chat, a run with no message of the
    // person, a device's chat is not this one.
    let (status, v) = bob.post(&url, json!({"text": "x", "from": second})).await;
    assert_eq!(status, 404, "{v}");
    let (status, v) = alice
        .post(&url, json!({"text": "x", "from": "no-such-run"}))
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(v.to_string().contains("no message of the person"), "{v}");
    assert_eq!(std::fs::read_to_string(home.join("a.md")).unwrap(), "two\n");

    // Edit and send: back to before the second message, files too.
    let (status, v) = alice
        .post(&url, json!({"text": "second, edited", "from": second}))
        .await;
    assert_eq!(status, 202, "{v}");
    let edited = v["run"].as_str().unwrap().to_owned();
    let seen = stream.until(run_end(&edited)).await;
    assert_eq!(std::fs::read_to_string(home.join("a.md")).unwrap(), "one\n");
    assert!(
        !home.join("b.md").exists(),
        "the file the turn made is gone"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("c.md")).unwrap(),
        "mine\n",
        "the person's own change is left"
    );
    let rewound = seen
        .iter()
        .find(|e| e.kind() == "rewound")
        .expect("a rewound event");
    assert_eq!(rewound.data["event"]["run"], second);
    assert_eq!(rewound.data["event"]["turn"], 2);
    let said = rewound.data["event"]["said"].as_str().unwrap();
    assert!(said.contains("a.md") && said.contains("b.md"), "{said}");
    assert!(said.contains("c.md: changed since"), "{said}");
    // The model saw the first message and the edited one, not the second.
    let bodies = model.bodies();
    let sent = persons(bodies.last().unwrap());
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent[0].contains("first: write one"), "{sent:?}");
    assert!(sent[1].contains("second, edited"), "{sent:?}");
    // The history: the first run and the edited one; the second is gone.
    let (_, c) = alice.get(&format!("/api/chats/{chat}")).await;
    let inputs: Vec<String> = c["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["type"] == "user_input")
        .map(|e| e["event"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(inputs, ["first: write one", "second, edited"]);
    // A share is of the chat as it stands: the replaced message is not in it.
    let (status, v) = alice
        .post(&format!("/api/chats/{chat}/share"), json!({}))
        .await;
    assert_eq!(status, 201, "{v}");
    let token = v["url"].as_str().unwrap().trim_start_matches("/shared/");
    let (_, shared) = alice.get(&format!("/api/shared/{token}")).await;
    let shared = shared["markdown"].as_str().unwrap();
    assert!(shared.contains("second, edited"), "{shared}");
    assert!(!shared.contains("second: write two"), "{shared}");

    // Regenerate, the files kept: the edited run is replaced, a.md stays.
    std::fs::write(home.join("a.md"), "by hand\n").unwrap();
    let (status, v) = alice
        .post(
            &url,
            json!({"text": "second, edited", "from": edited, "code": false}),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    let again = v["run"].as_str().unwrap().to_owned();
    let seen = stream.until(run_end(&again)).await;
    let said = seen
        .iter()
        .find(|e| e.kind() == "rewound")
        .map(|e| e.data["event"]["said"].to_string())
        .unwrap();
    assert!(said.contains("kept as they are"), "{said}");
    assert_eq!(
        std::fs::read_to_string(home.join("a.md")).unwrap(),
        "by hand\n"
    );
    let sent = persons(model.bodies().last().unwrap());
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(model.replies_left(), 0);
}
