//! MCP servers for users' chats: an admin adds the real everything server (over stdio, run by
//! the server) for alice only; her chat's model is offered its tools and calls one, the answer is
//! the server's; bob's chat is not offered them; the admin list shows variables by name only; a
//! user who is not an admin cannot list or add servers; bad configurations are refused.

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::{Server, run_end, text, tool_call};

fn tool_names(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admins_mcp_server_serves_the_chats_of_its_users() {
    let Some(bin) = harness_test_support::mcp_everything() else {
        return;
    };
    let model = ScriptedServer::start(vec![
        tool_call(
            "m1",
            "mcp__everything__echo",
            json!({"message": "hi from the chat"}),
        ),
        text(&["It said hi."]),
        text(&["Nothing to call."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut admin = server.admin().await;
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;

    // Only an admin lists or adds servers.
    let (status, _) = alice.get("/api/admin/mcp").await;
    assert_eq!(status, 403);
    let (status, _) = alice
        .put_json("/api/admin/mcp/everything", json!({"command": "/bin/true"}))
        .await;
    assert_eq!(status, 403);
    // Bad configurations are refused with what is wrong.
    for (name, body, want) in [
        ("a__b", json!({"command": "x"}), "no `__`"),
        ("web", json!({}), "needs `command` (a program) or `url`"),
        (
            "web",
            json!({"command": "x", "url": "https://mcp.example/"}),
            "has both",
        ),
        (
            "web",
            json!({"url": "file:///etc/passwd"}),
            "http or https URL",
        ),
        (
            "web",
            json!({"url": "https://mcp.example/", "bearer_token_env": "ghp_abc-123"}),
            "names a variable",
        ),
        (
            "web",
            json!({"command": "x", "users": ["nobody"]}),
            "no user \"nobody\"",
        ),
    ] {
        let (status, v) = admin
            .put_json(&format!("/api/admin/mcp/{name}"), body)
            .await;
        assert_eq!(status, 400, "{name}: {v}");
        assert!(v["error"].as_str().unwrap().contains(want), "{name}: {v}");
    }

    let (status, v) = admin
        .put_json(
            "/api/admin/mcp/everything",
            json!({
                "command": bin.to_str().unwrap(),
                "args": ["stdio"],
                "env": {"EVERYTHING_SECRET": "s3cret-value"},
                "defer": false,
                "users": ["alice"]
            }),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = admin
        .put_json(
            "/api/admin/mcp/tracker",
            json!({"url": "https://mcp.example/", "bearer_token_env": "TRACKER_TOKEN_{user}", "enabled": false}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, listed) = admin.get("/api/admin/mcp").await;
    assert_eq!(status, 200, "{listed}");
    let text_of_list = listed.to_string();
    assert!(!text_of_list.contains("s3cret-value"), "{listed}");
    assert_eq!(listed["servers"][0]["env"], json!(["EVERYTHING_SECRET"]));
    assert_eq!(listed["servers"][0]["users"], json!(["alice"]));
    assert_eq!(
        listed["servers"][1]["bearer_token_env"],
        "TRACKER_TOKEN_{user}"
    );
    assert_eq!(listed["servers"][1]["users"], json!(null));

    // What each user's chats get: the disabled one is nobody's.
    let (_, mine) = alice.get("/api/mcp").await;
    assert_eq!(
        mine["servers"],
        json!([{"name": "everything", "transport": "stdio"}])
    );
    let (_, theirs) = bob.get("/api/mcp").await;
    assert_eq!(theirs["servers"], json!([]));

    // Alice's chat: the tool is offered and its answer is the server's.
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "say hi through the server").await;
    let mut seen = Vec::new();
    loop {
        let batch = stream
            .until(|e| e.kind() == "tool_call_asked" || run_end(&run)(e))
            .await;
        let last = batch.last().unwrap().clone();
        seen.extend(batch);
        if last.kind() != "tool_call_asked" {
            break;
        }
        let approval = last.data["event"]["approval"].as_str().unwrap().to_owned();
        let (status, v) = alice
            .post(
                &format!("/api/approvals/{approval}"),
                json!({"answer": "yes"}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
    }
    assert_eq!(
        seen.last().unwrap().data["event"]["status"],
        "finished",
        "{seen:?}"
    );
    let bodies = model.bodies();
    assert!(
        tool_names(&bodies[0]).contains(&"mcp__everything__echo".to_owned()),
        "{:?}",
        tool_names(&bodies[0])
    );
    let result = super::last_tool_result(&bodies[1]);
    assert!(result.contains("Echo: hi from the chat"), "{result}");

    // Bob's chat is not offered them.
    let mut stream = bob.events(None).await;
    let chat = bob.chat().await;
    let run = bob.say(&chat, "anything to call?").await;
    stream.until(run_end(&run)).await;
    let bodies = model.bodies();
    let names = tool_names(bodies.last().unwrap());
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");

    // Removed, it is gone; removing it again is 404.
    let (status, _) = admin.delete("/api/admin/mcp/everything").await;
    assert_eq!(status, 200);
    let (status, _) = admin.delete("/api/admin/mcp/everything").await;
    assert_eq!(status, 404);
    let (_, mine) = alice.get("/api/mcp").await;
    assert_eq!(mine["servers"], json!([]));
}
