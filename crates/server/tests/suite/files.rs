//! The files API through the user's view: the spec's texts for paths outside it, no reach into
//! another user's home, the same refusals for a chat's tools.

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::{Server, run_end, text, tool_call};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_through_the_view_and_paths_outside_it() {
    let model = ScriptedServer::start(vec![
        tool_call("c1", "read", json!({"path": "/home/bob/secret.txt"})),
        text(&["Cannot."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;

    let (status, body) = bob
        .put("/api/files/content?path=secret.txt", "bob's\n")
        .await;
    assert_eq!(
        (status, &body["path"]),
        (200, &json!("/home/bob/secret.txt")),
        "{body}"
    );
    let (status, body) = bob.get("/api/files?path=/home/bob").await;
    assert_eq!(status, 200);
    assert_eq!(body["entries"][0]["line"], "secret.txt");

    let denied =
        |p: &str| json!({"error": format!("Access denied: {p} is not open to this session.")});
    // Another user's home, and the rest of the tree, are not open.
    let (status, body) = alice
        .get("/api/files/content?path=/home/bob/secret.txt")
        .await;
    assert_eq!((status, body), (403, denied("/home/bob/secret.txt")));
    let (status, body) = alice.get("/api/files?path=/home/bob").await;
    assert_eq!((status, body), (403, denied("/home/bob")));
    let (status, body) = alice
        .put("/api/files/content?path=/home/bob/x.txt", "x")
        .await;
    assert_eq!((status, body), (403, denied("/home/bob/x.txt")));
    let (status, body) = alice.get("/api/files/content?path=/etc/passwd").await;
    assert_eq!((status, body), (403, denied("/etc/passwd")));
    let (status, body) = alice.get("/api/files/content?path=../bob/secret.txt").await;
    assert_eq!((status, body), (403, denied("/home/bob/secret.txt")));
    // A passage is never listed: `/home` shows nothing of bob.
    let (status, body) = alice.get("/api/files?path=/home").await;
    assert_eq!((status, body), (403, denied("/home")));
    // Inside the view: missing is missing; /shared reads but does not change.
    let (status, body) = alice.get("/api/files/content?path=nope.md").await;
    assert_eq!(
        (status, body),
        (
            404,
            json!({"error": "No such file or directory: /home/alice/nope.md"})
        )
    );
    let (status, body) = alice.put("/api/files/content?path=/shared/x.md", "x").await;
    assert_eq!(
        (status, body),
        (
            403,
            json!({"error": "Read-only: /shared/x.md can be read in this session but not changed."})
        )
    );
    let (status, body) = alice.get("/api/files/content").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        std::fs::read_to_string(server.tree().join("home/bob/secret.txt")).unwrap(),
        "bob's\n"
    );
    assert!(!server.tree().join("home/bob/x.txt").exists());

    // A chat's read of bob's file is refused with the same text.
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "read bob's secret").await;
    // The view refuses it before anyone is asked about it (nobody approves what cannot run).
    let got = stream.until(run_end(&run)).await;
    assert!(
        !got.iter().any(|e| e.kind() == "tool_call_asked"),
        "{got:?}"
    );
    let result = got
        .iter()
        .find(|e| e.kind() == "tool_call_finished")
        .unwrap();
    let content = result.data["event"]["result"]["content"].as_str().unwrap();
    assert!(
        content.contains("Access denied: /home/bob/secret.txt is not open to this session."),
        "{content}"
    );
    assert!(!content.contains("bob's"), "{content}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_made_narrower_reaches_only_what_it_and_its_user_both_grant() {
    let model = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "write",
            json!({"path": "/home/alice/project/a.md", "content": "in the project\n"}),
        ),
        tool_call(
            "c2",
            "write",
            json!({"path": "/home/alice/notes.md", "content": "outside it\n"}),
        ),
        tool_call(
            "c3",
            "write",
            json!({"path": "/shared/x.md", "content": "more than alice may\n"}),
        ),
        tool_call("c4", "read", json!({"path": "/home/bob/secret.txt"})),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let (status, _) = bob
        .put("/api/files/content?path=secret.txt", "bob's\n")
        .await;
    assert_eq!(status, 200);

    let (status, body) = alice
        .post(
            "/api/chats",
            json!({"grants": [{"path": "home/alice", "level": "ro"}]}),
        )
        .await;
    assert_eq!(status, 400, "a relative path: {body}");
    // The chat asks for more than alice has at /shared (ro) and /home/bob (none): it gets no
    // more than she has.
    let (status, body) = alice
        .post(
            "/api/chats",
            json!({"mode": "auto", "grants": [
                {"path": "/home/alice/project", "level": "stage"},
                {"path": "/shared", "level": "commit"},
                {"path": "/home/bob", "level": "commit"},
            ]}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let chat = body["id"].as_str().unwrap().to_owned();
    let mut stream = alice.events(None).await;
    let run = alice.say(&chat, "write and read").await;
    let mut results = Vec::new();
    loop {
        let e = stream.next().await;
        if e.kind() == "tool_call_asked" {
            let approval = e.data["event"]["approval"].as_str().unwrap().to_owned();
            let (status, _) = alice
                .post(
                    &format!("/api/approvals/{approval}"),
                    json!({"answer": "yes"}),
                )
                .await;
            assert_eq!(status, 200);
        }
        if e.kind() == "tool_call_finished" {
            let r = &e.data["event"]["result"]["content"];
            results.push(r.as_str().unwrap_or_default().to_owned());
        }
        if run_end(&run)(&e) {
            break;
        }
    }
    // The calls' results, in the order they were made.
    let said = |n: usize| results.get(n).cloned().unwrap_or_default();
    assert_eq!(
        std::fs::read_to_string(server.tree().join("home/alice/project/a.md")).unwrap(),
        "in the project\n"
    );
    assert!(
        said(1).contains("Access denied: /home/alice/notes.md is not open to this session."),
        "{results:?}"
    );
    assert!(!server.tree().join("home/alice/notes.md").exists());
    assert!(
        said(2).contains("Read-only: /shared/x.md can be read in this session but not changed."),
        "{results:?}"
    );
    assert!(
        said(3).contains("Access denied: /home/bob/secret.txt is not open to this session."),
        "{results:?}"
    );
    assert!(!said(3).contains("bob's"));
    // Alice's own view is as it was: the chat's grants narrowed the chat only.
    let (status, _) = alice
        .put("/api/files/content?path=notes.md", "mine\n")
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_from_the_api_are_one_spelling_bounded_and_shown_as_they_are() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut ann = server.user("ann").await;

    // A name over 255 bytes: 400 naming it, not a server error.
    let long = format!("{}.txt", "x".repeat(300));
    let (status, body) = ann
        .put(&format!("/api/files/content?path=/home/ann/{long}"), "x")
        .await;
    assert_eq!(
        (status, body),
        (
            400,
            json!({"error": format!("Name too long: {long:?} is 304 bytes; a name holds at most 255.")})
        )
    );
    let (status, _) = ann.get(&format!("/api/files?path=/home/ann/{long}")).await;
    assert_eq!(status, 400);

    // A text-direction control would show `inv\u{202E}txt.exe` as "invexe.txt".
    for name in ["inv\u{202E}txt.exe", "a\u{2066}b", "\u{200F}x"] {
        let (status, body) = ann
            .put(&format!("/api/files/content?path={name}"), "x")
            .await;
        assert_eq!(status, 400, "{name:?}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(
            error.starts_with("Invalid name: ") && error.contains("text-direction control"),
            "{error}"
        );
        assert!(
            !error.contains(['\u{202E}', '\u{2066}', '\u{200F}']),
            "{error}"
        );
    }
    assert_eq!(ann.get("/show?path=inv\u{202E}txt.exe").await.0, 400);

    // A name refused for its characters says so, not "Access denied".
    let (status, body) = ann.put("/api/files/content?path=a:b.txt", "x").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid name: \"a:b.txt\" is not portable"),
        "{body}"
    );

    // NFD and NFC spell one name: one file.
    let (status, body) = ann
        .put("/api/files/content?path=cafe\u{301}.md", "one")
        .await;
    assert_eq!(
        (status, &body["path"]),
        (200, &json!("/home/ann/caf\u{e9}.md")),
        "{body}"
    );
    let (status, body) = ann.get("/api/files/content?path=caf\u{e9}.md").await;
    assert_eq!((status, &body["content"]), (200, &json!("one")), "{body}");
    let (status, _) = ann.put("/api/files/content?path=caf\u{e9}.md", "two").await;
    assert_eq!(status, 200);
    let (_, body) = ann.get("/api/files?path=/home/ann").await;
    assert_eq!(body["entries"].as_array().unwrap().len(), 1, "{body}");
    let (_, body) = ann.get("/api/view?path=/home/ann/cafe\u{301}.md").await;
    assert_eq!(body["error"], "Not a directory: /home/ann/caf\u{e9}.md");

    // A file put in the tree under a decomposed name by other means is still reached by it,
    // and written in place rather than doubled.
    std::fs::write(server.tree().join("home/ann/nai\u{308}ve.txt"), "old").unwrap();
    let (status, body) = ann.get("/api/files/content?path=nai\u{308}ve.txt").await;
    assert_eq!((status, &body["content"]), (200, &json!("old")), "{body}");
    let (status, _) = ann
        .put("/api/files/content?path=nai\u{308}ve.txt", "new")
        .await;
    assert_eq!(status, 200);
    let (_, body) = ann.get("/api/files?path=/home/ann").await;
    assert_eq!(body["entries"].as_array().unwrap().len(), 2, "{body}");
    assert_eq!(
        std::fs::read_to_string(server.tree().join("home/ann/nai\u{308}ve.txt")).unwrap(),
        "new"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_is_downloaded_raw_renamed_deleted_to_the_trash_restored_and_the_trash_emptied() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "http://127.0.0.1:9/v1");
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let png = [0x89, b'P', b'N', b'G', 0, 1, 2, 3];
    std::fs::write(server.tree().join("home/alice/pic.png"), png).unwrap();
    std::fs::write(
        server.tree().join("home/alice/page.html"),
        "<script>1</script>",
    )
    .unwrap();
    std::fs::write(server.tree().join("shared/s.txt"), "s").unwrap();

    // Raw bytes: a download, typed, never sniffed; inline only for a raster image.
    let raw = |c: &super::Client, q: &str| {
        let r = c.http.get(format!("{}/api/files/raw?{q}", c.base));
        r.header(
            "cookie",
            format!("llembas_session={}", c.cookie.clone().unwrap()),
        )
    };
    let r = raw(&alice, "path=pic.png").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    assert_eq!(h["content-type"], "image/png");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(
        h["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"pic.png\"")
    );
    assert_eq!(r.bytes().await.unwrap().as_ref(), png);
    let r = raw(&alice, "path=pic.png&inline=1").send().await.unwrap();
    assert!(
        r.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("inline;")
    );
    let r = raw(&alice, "path=page.html&inline=1").send().await.unwrap();
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    assert!(
        r.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment;")
    );
    let r = raw(&bob, "path=/home/alice/pic.png").send().await.unwrap();
    assert_eq!(r.status(), 403);
    let (_, v) = alice.get("/api/view").await;
    let entry = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "pic.png")
        .unwrap()
        .clone();
    assert_eq!(entry["size"], 8, "{v}");

    // Rename through the view; /shared is read-only; bob cannot touch alice's files.
    let (status, v) = alice
        .post(
            "/api/files/move",
            json!({"from": "pic.png", "to": "/home/alice/photo.png"}),
        )
        .await;
    assert_eq!(
        (status, v),
        (
            200,
            json!({"from": "/home/alice/pic.png", "to": "/home/alice/photo.png"})
        )
    );
    assert!(server.tree().join("home/alice/photo.png").exists());
    let (status, v) = alice
        .post(
            "/api/files/move",
            json!({"from": "/shared/s.txt", "to": "s.txt"}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    let (status, _) = bob
        .post(
            "/api/files/move",
            json!({"from": "/home/alice/photo.png", "to": "p.png"}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = bob.delete("/api/files?path=/home/alice/photo.png").await;
    assert_eq!(status, 403);

    // Delete: to the trash, each user's own.
    let (status, v) = alice.delete("/api/files?path=photo.png").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["path"], "/home/alice/photo.png");
    let id = v["trash"].as_str().unwrap().to_owned();
    assert!(!server.tree().join("home/alice/photo.png").exists());
    bob.put("/api/files/content?path=b.txt", "b").await;
    let (_, v) = bob.delete("/api/files?path=b.txt").await;
    let bobs = v["trash"].as_str().unwrap().to_owned();
    let (status, v) = alice.get("/api/trash").await;
    assert_eq!(
        (status, v),
        (
            200,
            json!({"items": [{"id": id, "path": "/home/alice/photo.png"}]})
        )
    );
    let (_, v) = bob.get("/api/trash").await;
    assert_eq!(
        v,
        json!({"items": [{"id": bobs, "path": "/home/bob/b.txt"}]})
    );
    let (status, v) = bob
        .post(&format!("/api/trash/{id}/restore"), json!({}))
        .await;
    assert_eq!(
        (status, v),
        (404, json!({"error": format!("Not in the trash: {id}")}))
    );

    // Restore; then trash again and empty: alice's entry is gone for good, bob's stays.
    let (status, v) = alice
        .post(&format!("/api/trash/{id}/restore"), json!({}))
        .await;
    assert_eq!((status, v), (200, json!({"path": "/home/alice/photo.png"})));
    assert_eq!(
        std::fs::read(server.tree().join("home/alice/photo.png")).unwrap(),
        png
    );
    alice.delete("/api/files?path=photo.png").await;
    let (status, v) = alice.delete("/api/trash").await;
    assert_eq!((status, v), (200, json!({"deleted": 1})));
    let (_, v) = alice.get("/api/trash").await;
    assert_eq!(v, json!({"items": []}));
    let (_, v) = bob.get("/api/trash").await;
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{v}");
    let (status, v) = bob
        .post(&format!("/api/trash/{bobs}/restore"), json!({}))
        .await;
    assert_eq!((status, v), (200, json!({"path": "/home/bob/b.txt"})));
}
