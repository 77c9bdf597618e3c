//! A chat exported by its owner (Markdown, JSON) and shared as a read-only link the owner ends.

use serde_json::json;

use super::{Client, Server, run_end, text, tool_call};
use harness_test_support::ScriptedServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_is_exported_and_shared_read_only_without_tool_results_until_its_owner_ends_it() {
    let model = ScriptedServer::start(vec![
        tool_call("r1", "read", json!({"path": "/home/alice/secret.txt"})),
        text(&["The plan is ready."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    std::fs::write(
        server.tree().join("home/alice/secret.txt"),
        "launch code 4711\n",
    )
    .unwrap();
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "Make the plan").await;
    stream.until(run_end(&run)).await;

    // Export: the conversation with each call's result folded, as a download; JSON whole.
    let r = alice
        .get_raw(&format!("/api/chats/{chat}/export?format=markdown"))
        .await;
    assert_eq!(r.status(), 200);
    let disposition = r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        disposition.starts_with("attachment; filename=\"Make-the-plan.md\""),
        "{disposition}"
    );
    let md = r.text().await.unwrap();
    for said in [
        "## You\n\nMake the plan",
        "The plan is ready.",
        "launch code 4711",
    ] {
        assert!(md.contains(said), "{said}: {md}");
    }
    let (status, v) = alice
        .get(&format!("/api/chats/{chat}/export?format=json"))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["session"]["id"], chat.as_str());
    assert!(v["entries"].as_array().unwrap().len() >= 4, "{v}");
    let (status, _) = alice
        .get(&format!("/api/chats/{chat}/export?format=pdf"))
        .await;
    assert_eq!(status, 400);
    // Another user's chat is no chat of theirs.
    assert_eq!(bob.get(&format!("/api/chats/{chat}/export")).await.0, 404);
    assert_eq!(
        bob.post(&format!("/api/chats/{chat}/share"), json!({}))
            .await
            .0,
        404
    );
    assert_eq!(
        alice.get(&format!("/api/chats/{chat}/share")).await.1,
        json!({"shared": null})
    );

    // Share: a link anyone may open, with no sign-in; the tools' results are left out.
    let (status, v) = alice
        .post(&format!("/api/chats/{chat}/share"), json!({}))
        .await;
    assert_eq!(status, 201, "{v}");
    let first = v["url"].as_str().unwrap().to_owned();
    let token = first.trim_start_matches("/shared/").to_owned();
    assert_eq!(token.len(), 64, "{first}");
    let mut anyone = Client::anonymous(&server.base);
    let (status, shared) = anyone.get(&format!("/api/shared/{token}")).await;
    assert_eq!(status, 200, "{shared}");
    assert_eq!(shared["by"], "alice");
    assert_eq!(shared["title"], "Make the plan");
    let text = shared["markdown"].as_str().unwrap();
    assert!(
        text.contains("Make the plan") && text.contains("The plan is ready."),
        "{text}"
    );
    assert!(text.contains("secret.txt"), "the call is named: {text}");
    assert!(
        !text.contains("4711"),
        "a tool's result is never shared: {text}"
    );
    let page = anyone.get_raw(&first).await;
    assert_eq!(page.status(), 200);
    assert_eq!(
        alice.get(&format!("/api/chats/{chat}/share")).await.1["shared"],
        v["created"]
    );
    // Shared again: a new link, and the old one ends.
    let (status, v) = alice
        .post(&format!("/api/chats/{chat}/share"), json!({}))
        .await;
    assert_eq!(status, 201, "{v}");
    let second = v["url"]
        .as_str()
        .unwrap()
        .trim_start_matches("/shared/")
        .to_owned();
    assert_ne!(second, token);
    assert_eq!(anyone.get(&format!("/api/shared/{token}")).await.0, 404);
    assert_eq!(anyone.get(&format!("/api/shared/{second}")).await.0, 200);
    // Bob cannot end it; alice can, and the link answers 404 from then on.
    assert_eq!(bob.delete(&format!("/api/chats/{chat}/share")).await.0, 404);
    let (status, v) = alice.delete(&format!("/api/chats/{chat}/share")).await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = anyone.get(&format!("/api/shared/{second}")).await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(
        alice.delete(&format!("/api/chats/{chat}/share")).await.0,
        404
    );
    // A chat deleted takes its link with it.
    let (status, v) = alice
        .post(&format!("/api/chats/{chat}/share"), json!({}))
        .await;
    assert_eq!(status, 201, "{v}");
    let third = v["url"]
        .as_str()
        .unwrap()
        .trim_start_matches("/shared/")
        .to_owned();
    assert_eq!(alice.delete(&format!("/api/chats/{chat}")).await.0, 200);
    assert_eq!(anyone.get(&format!("/api/shared/{third}")).await.0, 404);
}
