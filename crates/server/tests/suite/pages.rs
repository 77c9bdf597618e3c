//! The pages over plain HTTP: their security headers and caching, and the chat list's routes
//! (rename, delete) with two users.

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::{Client, Server, run_end, text, tool_call};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_are_served_with_a_strict_csp_nosniff_and_cached_assets() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "http://127.0.0.1:9/v1");
    let c = Client::anonymous(&server.base);
    let mut assets = Vec::new();
    for path in ["/login", "/chats", "/chats/some-id"] {
        let r = c
            .http
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let h = r.headers().clone();
        let csp = h["content-security-policy"].to_str().unwrap().to_owned();
        assert!(csp.starts_with("default-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["cache-control"], "no-cache");
        let etag = h["etag"].to_str().unwrap().to_owned();
        let body = r.text().await.unwrap();
        assert!(body.contains("<div id=\"app\">"), "{body}");
        // The shell names its assets by a tag; nothing is loaded from elsewhere.
        for piece in body.split('"') {
            if piece.starts_with("/ui/") {
                assets.push(piece.to_owned());
            }
            assert!(!piece.starts_with("http"), "{piece}");
        }
        // A warm reload revalidates the shell: 304, no body.
        let again = c
            .http
            .get(format!("{}{path}", server.base))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status().as_u16(), 304);
        assert_eq!(again.headers()["x-content-type-options"], "nosniff");
    }
    assets.sort();
    assets.dedup();
    assert_eq!(assets.len(), 2, "{assets:?}");
    for asset in &assets {
        let r = c
            .http
            .get(format!("{}{asset}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{asset}");
        let h = r.headers();
        assert_eq!(h["cache-control"], "public, max-age=31536000, immutable");
        assert_eq!(h["x-content-type-options"], "nosniff");
        let kind = h["content-type"].to_str().unwrap();
        if asset.ends_with(".js") {
            assert!(kind.starts_with("text/javascript"), "{kind}");
        } else {
            assert!(kind.starts_with("text/css"), "{kind}");
        }
    }
    // An old tag points to the current one; an unknown file is a JSON 404.
    let old = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/ui/0000/app.js", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(old.status().as_u16(), 301);
    assert!(assets.contains(&old.headers()["location"].to_str().unwrap().to_owned()));
    let mut c = c;
    let (status, body) = c.get("/ui/0000/secret.txt").await;
    assert_eq!(status, 404, "{body}");
    // The server's front page leads to the chats.
    let (status, front) = c.get("/").await;
    assert_eq!(status, 200);
    assert!(
        front.as_str().unwrap().contains("<a href=\"/chats\">"),
        "{front}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_is_renamed_and_deleted_by_its_owner_only_and_the_name_stays() {
    let model = ScriptedServer::start(vec![
        text(&["First ", "answer."]),
        text(&["Second ", "answer."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "plan the garden\nwith details").await;
    stream.until(run_end(&run)).await;
    let (_, got) = alice.get(&format!("/api/chats/{chat}")).await;
    assert_eq!(got["title"], "plan the garden");

    let path = format!("/api/chats/{chat}");
    let rename = |title: &str| {
        let r = alice
            .http
            .patch(format!("{}{path}", alice.base))
            .header(
                "cookie",
                format!("llembas_session={}", alice.cookie.clone().unwrap()),
            )
            .json(&json!({"title": title}));
        (r, alice.clone())
    };
    // Bob can neither rename nor delete it: to him it does not exist.
    let (status, body) = bob
        .send(
            bob.http
                .patch(format!("{}{path}", bob.base))
                .header(
                    "cookie",
                    format!("llembas_session={}", bob.cookie.clone().unwrap()),
                )
                .json(&json!({"title": "mine now"})),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"], format!("no chat {chat}"));
    let (status, _) = bob
        .send(bob.http.delete(format!("{}{path}", bob.base)).header(
            "cookie",
            format!("llembas_session={}", bob.cookie.clone().unwrap()),
        ))
        .await;
    assert_eq!(status, 404);

    let (r, mut a) = rename("   ");
    assert_eq!(a.send(r).await.0, 400, "an empty title");
    let (r, mut a) = rename(&"x".repeat(81));
    assert_eq!(a.send(r).await.0, 400, "a title too long");
    // Another site's page cannot rename it through alice's cookie.
    let (r, mut a) = rename("from elsewhere");
    let (status, _) = a.send(r.header("origin", "http://evil.example")).await;
    assert_eq!(status, 403);
    let (r, mut a) = rename("Garden plan");
    let (status, body) = a.send(r).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["title"], "Garden plan");

    // The name the person gave stays when the chat goes on (the session saves its meta again).
    let run2 = alice.say(&chat, "and the roses?").await;
    stream.until(run_end(&run2)).await;
    let (_, list) = alice.get("/api/chats").await;
    assert_eq!(list[0]["title"], "Garden plan");
    let (_, list) = bob.get("/api/chats").await;
    assert_eq!(list, json!([]));

    let (status, body) = alice
        .send(alice.http.delete(format!("{}{path}", alice.base)).header(
            "cookie",
            format!("llembas_session={}", alice.cookie.clone().unwrap()),
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(alice.get(&path).await.0, 404);
    assert_eq!(alice.get("/api/chats").await.1, json!([]));
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE chat_id = $1")
        .bind(&chat)
        .fetch_one(&server.app.pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "its events went with it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_whose_run_goes_on_is_neither_renamed_nor_deleted() {
    let model = ScriptedServer::start(vec![text(&["Thinking ", "a lot"]).stalling()])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "think").await;
    stream.until(|e| e.kind() == "text_delta").await;
    let cookie = format!("llembas_session={}", alice.cookie.clone().unwrap());
    let path = format!("{}/api/chats/{chat}", alice.base);
    let (status, body) = alice
        .send(
            alice
                .http
                .patch(&path)
                .header("cookie", &cookie)
                .json(&json!({"title": "t"})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = alice
        .send(alice.http.delete(&path).header("cookie", &cookie))
        .await;
    assert_eq!(status, 409, "{body}");
    let (status, _) = alice
        .post(&format!("/api/runs/{run}/stop"), json!({}))
        .await;
    assert_eq!(status, 202);
    stream.until(run_end(&run)).await;
    let (status, _) = alice
        .send(alice.http.delete(&path).header("cookie", &cookie))
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chats_mode_is_changed_by_its_owner_and_a_live_session_switches_at_once() {
    let model = ScriptedServer::start(vec![
        text(&["Hello."]),
        tool_call("c1", "write", json!({"path": "a.txt", "content": "a\n"})),
        text(&["Wrote a.txt."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    // The session runs in this process from now on (manual mode: a write would ask).
    let run = alice.say(&chat, "hi").await;
    stream.until(run_end(&run)).await;

    let path = format!("/api/chats/{chat}/mode");
    let (status, body) = bob.post(&path, json!({"mode": "auto"})).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = alice.post(&path, json!({"mode": "reckless"})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = alice.post(&path, json!({"mode": "edit"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mode"], "edit");
    // (A guard against a hang: the stream's keep-alives would keep it waiting for ever.)
    let changed = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        stream.until(|e| e.kind() == "mode_changed"),
    )
    .await
    .expect("no mode_changed event: the running session did not switch");
    assert_eq!(changed.last().unwrap().data["event"]["mode"], "edit");
    let (_, got) = alice.get(&format!("/api/chats/{chat}")).await;
    assert_eq!(got["mode"], "edit");

    // Edit mode writes in the user's home without asking.
    let run = alice.say(&chat, "write a.txt").await;
    let events = stream.until(run_end(&run)).await;
    assert!(
        !events.iter().any(|e| e.kind() == "tool_call_asked"),
        "{events:?}"
    );
    assert_eq!(
        std::fs::read_to_string(server.tree().join("home/alice/a.txt")).unwrap(),
        "a\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_route_gives_levels_of_the_users_own_view_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "http://127.0.0.1:9/v1");
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    std::fs::write(server.tree().join("home/alice/notes.txt"), "mine\n").unwrap();

    let (status, v) = alice.get("/api/view").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["path"], "/home/alice");
    assert_eq!(v["home"], "/home/alice");
    assert_eq!(v["level"], "stage");
    assert_eq!(
        v["roots"],
        json!([
            {"path": "/home/alice", "level": "stage", "mount": false, "read_only": false},
            {"path": "/shared", "level": "ro", "mount": false, "read_only": true},
        ])
    );
    assert_eq!(
        v["entries"],
        json!([{"name": "notes.txt", "kind": "file", "mount": false, "read_only": false,
            "level": "stage", "passage": false}])
    );
    let (status, v) = alice.get("/api/view?path=/shared").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["level"], "ro");

    // Bob's view does not hold alice's home: the view's own refusal.
    let (status, v) = bob.get("/api/view?path=/home/alice").await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["error"].as_str().unwrap().starts_with("Access denied"),
        "{v}"
    );
    let (_, v) = bob.get("/api/view").await;
    assert_eq!(v["home"], "/home/bob");
    assert_eq!(v["entries"], json!([]));
    // Not signed in: 401.
    let (status, _) = Client::anonymous(&server.base).get("/api/view").await;
    assert_eq!(status, 401);
}
