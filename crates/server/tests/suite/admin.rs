//! Accounts past sign-in: sign-in sessions listed and revoked per user, sign-ups (off by default,
//! pending when on, approved by an admin), and the admin's routes — users, roles, disabling,
//! grants, the models users may use, the model's slots (4 by default, shared fairly by users)
//! — none of which reads another user's chats; a disabled account's run ends at once.

use harness_test_support::ScriptedServer;
use serde_json::{Value, json};

use super::postgres::Postgres;
use super::{Client, Server, text, tool_call};

async fn user_id(c: &mut Client) -> i64 {
    c.get("/api/auth/me").await.1["id"].as_i64().unwrap()
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_sessions_are_listed_per_user_and_revocable() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut laptop = server.login("alice", "alice-password").await;
    let mut bob = server.user("bob").await;

    let (status, mine) = alice.get("/api/auth/sessions").await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(mine.as_array().unwrap().len(), 2, "{mine}");
    let current: Vec<&Value> = mine
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["current"] == true)
        .collect();
    assert_eq!(current.len(), 1, "{mine}");
    let here = current[0]["id"].as_str().unwrap().to_owned();
    let other = ids(&mine).into_iter().find(|i| *i != here).unwrap();
    // No token or hash is shown.
    assert!(!mine.to_string().contains(alice.cookie.as_deref().unwrap()));

    let (_, bobs) = bob.get("/api/auth/sessions").await;
    assert_eq!(bobs.as_array().unwrap().len(), 1);
    assert!(!ids(&bobs).contains(&here) && !ids(&bobs).contains(&other));

    // Bob cannot revoke alice's session; alice revokes her laptop's.
    let (status, body) = bob.delete(&format!("/api/auth/sessions/{other}")).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(laptop.get("/api/auth/me").await.0, 200);
    let (status, body) = alice.delete(&format!("/api/auth/sessions/{other}")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(laptop.get("/api/auth/me").await.0, 401);
    assert_eq!(alice.get("/api/auth/me").await.0, 200);
    assert_eq!(ids(&alice.get("/api/auth/sessions").await.1), vec![here]);
    let mut anon = Client::anonymous(&server.base);
    assert_eq!(anon.get("/api/auth/sessions").await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_ups_are_off_by_default_and_pending_until_an_admin_approves() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut anon = Client::anonymous(&server.base);
    let (status, body) = anon
        .post(
            "/api/auth/signup",
            json!({"username": "eve", "password": "eve-password"}),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["error"],
        "sign-ups are off on this server: ask an admin for an account"
    );
    drop(server);

    let server = Server::start_with(dir.path(), &model.base_url(), |c| c.allow_signups = true);
    let mut anon = Client::anonymous(&server.base);
    let (status, body) = anon
        .post(
            "/api/auth/signup",
            json!({"username": "eve", "password": "eve-password", "role": "admin"}),
        )
        .await;
    assert_eq!(status, 400, "a sign-up cannot choose its role: {body}");
    let (status, body) = anon
        .post(
            "/api/auth/signup",
            json!({"username": "eve", "password": "eve-password"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["role"], "pending");
    let (status, body) = anon
        .post(
            "/api/auth/login",
            json!({"username": "eve", "password": "eve-password"}),
        )
        .await;
    assert_eq!(
        (status, body),
        (
            403,
            json!({"error": "this account waits for an admin's approval"})
        )
    );

    // A user cannot approve; an admin can.
    let mut alice = server.user("alice").await;
    let mut root = server.admin().await;
    let eve_id = root
        .get("/api/admin/users")
        .await
        .1
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "eve")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let (status, _) = alice
        .patch(
            &format!("/api/admin/users/{eve_id}"),
            json!({"role": "user"}),
        )
        .await;
    assert_eq!(status, 403);
    let (_, users) = root.get("/api/admin/users").await;
    let listed = users
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "eve")
        .unwrap()
        .clone();
    assert_eq!(listed["role"], "pending");
    let eve = listed["id"].as_i64().unwrap();
    let (status, body) = root
        .patch(&format!("/api/admin/users/{eve}"), json!({"role": "user"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["role"], "user");
    let mut eve = server.login("eve", "eve-password").await;
    assert_eq!(eve.get("/api/auth/me").await.1["role"], "user");
    assert!(server.tree().join("home/eve").is_dir());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_manages_accounts_grants_and_models_and_reads_no_ones_chats() {
    let model = ScriptedServer::start(vec![text(&["Hi ", "alice."])])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut root = server.admin().await;
    let root_id = user_id(&mut root).await;

    // Users: a user may not list or add them; an admin may.
    assert_eq!(alice.get("/api/admin/users").await.0, 403);
    let (status, body) = alice
        .post(
            "/api/admin/users",
            json!({"username": "mallory", "password": "mallory-password"}),
        )
        .await;
    assert_eq!(
        (status, body),
        (403, json!({"error": "only an admin may do this"}))
    );
    let (status, body) = root
        .post(
            "/api/admin/users",
            json!({"username": "bob", "password": "bob-password"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["role"], "user");
    let bob_id = body["id"].as_i64().unwrap();
    let (status, _) = root
        .post(
            "/api/admin/users",
            json!({"username": "bob", "password": "bob-password"}),
        )
        .await;
    assert_eq!(status, 409);
    let (status, _) = root
        .post(
            "/api/admin/users",
            json!({"username": "x", "password": "x-password", "role": "god"}),
        )
        .await;
    assert_eq!(status, 400);
    let mut bob = server.login("bob", "bob-password").await;
    let (_, t) = bob.post("/api/tokens", json!({})).await;
    let mut bobs_script = Client::anonymous(&server.base);
    bobs_script.bearer = Some(t["token"].as_str().unwrap().to_owned());
    assert_eq!(bobs_script.get("/api/auth/me").await.0, 200);
    let (status, _) = root
        .patch(
            &format!("/api/admin/users/{root_id}"),
            json!({"role": "user"}),
        )
        .await;
    assert_eq!(status, 409, "not on oneself");
    assert_eq!(
        root.patch("/api/admin/users/999999", json!({"disabled": true}))
            .await
            .0,
        404
    );

    // Grants: the admin narrows bob's view; bob sees the spec's refusal; a user may not.
    let (status, g) = root.get(&format!("/api/admin/users/{bob_id}/grants")).await;
    assert_eq!(status, 200, "{g}");
    assert_eq!(
        g["grants"],
        json!([{"path": "/home/bob", "level": "stage"}, {"path": "/shared", "level": "ro"}])
    );
    assert_eq!(
        alice
            .get(&format!("/api/admin/users/{bob_id}/grants"))
            .await
            .0,
        403
    );
    let (status, _) = alice
        .put_json(
            &format!("/api/admin/users/{bob_id}/grants"),
            json!({"grants": [{"path": "/", "level": "commit"}]}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, body) = root
        .put_json(
            &format!("/api/admin/users/{bob_id}/grants"),
            json!({"grants": [{"path": "/home/bob", "level": "sudo"}]}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = root
        .put_json(
            &format!("/api/admin/users/{bob_id}/grants"),
            json!({"grants": [{"path": "/home/bob", "level": "ro"}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(bob.get("/api/files?path=/home/bob").await.0, 200);
    let (status, body) = bob
        .put("/api/files/content?path=/home/bob/a.txt", "x")
        .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = bob.get("/api/files?path=/shared").await;
    assert_eq!(
        (status, body),
        (
            403,
            json!({"error": "Access denied: /shared is not open to this session."})
        )
    );
    // Alice's grants are untouched.
    let (status, _) = alice
        .put("/api/files/content?path=/home/alice/a.txt", "x")
        .await;
    assert_eq!(status, 200);

    // Models: only those the admin allows; a user may not change the list.
    assert_eq!(
        root.get("/api/admin/models").await.1,
        json!({"allowed": null})
    );
    let (status, _) = alice
        .put_json("/api/admin/models", json!({"allowed": ["big"]}))
        .await;
    assert_eq!(status, 403);
    let (status, body) = alice.post("/api/chats", json!({"model": "other"})).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["error"],
        "the model other is not one this server lets you use: use scripted"
    );
    let (status, _) = root
        .put_json("/api/admin/models", json!({"allowed": []}))
        .await;
    assert_eq!(status, 400);
    let (status, _) = root
        .put_json(
            "/api/admin/models",
            json!({"allowed": ["scripted", "other"]}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, body) = alice.post("/api/chats", json!({"model": "other"})).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = alice.post("/api/chats", json!({"model": "nope"})).await;
    assert_eq!(status, 403, "{body}");

    // The admin reads none of alice's chats.
    let chat = alice.chat().await;
    let mut stream = alice.events(None).await;
    let run = alice.say(&chat, "hello").await;
    stream.until(super::run_end(&run)).await;
    assert_eq!(root.get(&format!("/api/chats/{chat}")).await.0, 404);
    assert_eq!(root.get("/api/chats").await.1, json!([]));
    let (status, _) = root
        .post(
            &format!("/api/chats/{chat}/messages"),
            json!({"text": "hi"}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(
        root.post(&format!("/api/runs/{run}/stop"), json!({}))
            .await
            .0,
        404
    );

    // Disabled: signed out, its token refused, no sign-in; enabled again, it signs in.
    let (status, body) = root
        .patch(
            &format!("/api/admin/users/{bob_id}"),
            json!({"disabled": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["disabled"], true);
    assert_eq!(bob.get("/api/auth/me").await.0, 401);
    let (status, body) = bobs_script.get("/api/auth/me").await;
    assert_eq!(
        (status, body),
        (
            403,
            json!({"error": "this account is disabled: ask an admin"})
        )
    );
    let mut anon = Client::anonymous(&server.base);
    let (status, _) = anon
        .post(
            "/api/auth/login",
            json!({"username": "bob", "password": "bob-password"}),
        )
        .await;
    assert_eq!(status, 403);
    root.patch(
        &format!("/api/admin/users/{bob_id}"),
        json!({"disabled": false}),
    )
    .await;
    server.login("bob", "bob-password").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_grant_opens_another_users_home_not_even_to_an_admin() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let (status, _) = alice
        .put("/api/files/content?path=/home/alice/diary.md", "secret")
        .await;
    assert_eq!(status, 200);
    let mut root = server.admin().await;
    let root_id = user_id(&mut root).await;
    let mut bob = server.user("bob").await;
    let bob_id = user_id(&mut bob).await;

    // The admin cannot grant themselves, nor anyone else, a path in alice's home.
    for (to, path) in [
        (root_id, "/home/alice"),
        (root_id, "/home/alice/diary.md"),
        (root_id, "/home/./alice/../alice"),
        (bob_id, "/home/alice"),
    ] {
        let (status, body) = root
            .put_json(
                &format!("/api/admin/users/{to}/grants"),
                json!({"grants": [{"path": path, "level": "ro"}]}),
            )
            .await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains("alice's home"),
            "{body}"
        );
    }
    let (status, body) = root
        .get("/api/files/content?path=/home/alice/diary.md")
        .await;
    assert_eq!(status, 403, "{body}");

    // A grant of all `/home`, or of `/`, opens shared areas but stops at every other home.
    let (status, body) = root
        .put_json(
            &format!("/api/admin/users/{root_id}/grants"),
            json!({"grants": [{"path": "/", "level": "ro"}, {"path": "/home/root", "level": "stage"}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // Hidden below a visible `/home`: read as missing (the spec's answer).
    let (status, body) = root
        .get("/api/files/content?path=/home/alice/diary.md")
        .await;
    assert_eq!(
        (status, body),
        (
            404,
            json!({"error": "No such file or directory: /home/alice/diary.md"})
        )
    );
    let (_, listing) = root.get("/api/files?path=/home").await;
    assert_eq!(listing["path"], "/home", "{listing}");
    assert!(
        !listing.to_string().contains("alice") && !listing.to_string().contains("bob"),
        "{listing}"
    );
    assert_eq!(root.get("/api/files?path=/shared").await.0, 200);

    // A grant row put in the database some other way opens nothing either.
    sqlx::query("INSERT INTO grants (user_id, path, level) VALUES ($1, '/home/alice', 'ro')")
        .bind(bob_id)
        .execute(&server.app.pool)
        .await
        .unwrap();
    let (status, body) = bob
        .get("/api/files/content?path=/home/alice/diary.md")
        .await;
    assert_eq!(status, 403, "{body}");
    let (_, g) = root.get(&format!("/api/admin/users/{bob_id}/grants")).await;
    assert_eq!(
        g["grants"],
        json!([{"path": "/home/bob", "level": "stage"}, {"path": "/shared", "level": "ro"}])
    );

    // Her own home stays hers.
    let (status, body) = alice
        .get("/api/files/content?path=/home/alice/diary.md")
        .await;
    assert_eq!((status, body["content"].as_str()), (200, Some("secret")));
}

/// A client whose requests come from `ip` (an address of the loopback network).
fn client_from(base: &str, ip: &str) -> Client {
    Client {
        http: reqwest::Client::builder()
            .local_address(ip.parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap(),
        ..Client::anonymous(base)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_ups_are_throttled_per_address_and_tell_no_one_which_names_exist() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &model.base_url(), |c| c.allow_signups = true);
    server.user("alice").await;
    let mut anon = client_from(&server.base, "127.0.0.4");

    // A taken name is answered as a free one is, and the account is left as it was.
    let (taken_status, taken) = anon
        .post(
            "/api/auth/signup",
            json!({"username": "alice", "password": "mallory-password"}),
        )
        .await;
    let (free_status, free) = anon
        .post(
            "/api/auth/signup",
            json!({"username": "zoe", "password": "zoe-password"}),
        )
        .await;
    assert_eq!((taken_status, free_status), (201, 201), "{taken} {free}");
    assert_eq!(taken["role"], free["role"]);
    assert_eq!(taken["message"], free["message"]);
    assert_eq!(
        taken.as_object().unwrap().keys().collect::<Vec<_>>(),
        free.as_object().unwrap().keys().collect::<Vec<_>>()
    );
    let mut alice = server.login("alice", "alice-password").await;
    assert_eq!(alice.get("/api/auth/me").await.1["role"], "user");

    // Past its free sign-ups an address waits; another address does not.
    for i in 2..llembas_server::auth::SIGNUPS {
        let (status, body) = anon
            .post(
                "/api/auth/signup",
                json!({"username": format!("bot{i}"), "password": "bot-password"}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let resp = anon
        .http
        .post(format!("{}/api/auth/signup", server.base))
        .json(&json!({"username": "bot-last", "password": "bot-password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert!(resp.headers().contains_key("retry-after"));
    let mut other = client_from(&server.base, "127.0.0.5");
    let (status, _) = other
        .post(
            "/api/auth/signup",
            json!({"username": "yan", "password": "yan-password"}),
        )
        .await;
    assert_eq!(status, 201);
    let mut root = server.admin().await;
    let (_, users) = root.get("/api/admin/users").await;
    assert!(!users.to_string().contains("bot-last"), "{users}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_deletes_a_user_whose_runs_stop_and_whose_home_goes_to_the_trash() {
    delete_user(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_an_admin_deletes_a_user_whose_runs_stop() {
    delete_user(Some(Postgres::get().database("delete_user").await)).await;
}

async fn delete_user(db: Option<String>) {
    let model = ScriptedServer::start(vec![text(&["Still ", "going"]).stalling()])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_on(dir.path(), &model.base_url(), db.as_deref());
    let mut bob = server.user("bob").await;
    let bob_id = user_id(&mut bob).await;
    let (status, _) = bob.put("/api/files/content?path=notes.md", "bob's").await;
    assert_eq!(status, 200);
    bob.put("/api/files/content?path=diary.md", "bob's own")
        .await;
    let (status, _) = bob.delete("/api/files?path=diary.md").await;
    assert_eq!(status, 200);
    let (_, t) = bob.post("/api/tokens", json!({})).await;
    let mut script = Client::anonymous(&server.base);
    script.bearer = Some(t["token"].as_str().unwrap().to_owned());
    let chat = bob.chat().await;
    let mut stream = bob.events(None).await;
    let run = bob.say(&chat, "go on").await;
    stream.until(|e| e.kind() == "text_delta").await;
    let mut alice = server.user("alice").await;
    let mut root = server.admin().await;
    let root_id = user_id(&mut root).await;

    assert_eq!(
        alice.delete(&format!("/api/admin/users/{bob_id}")).await.0,
        403
    );
    assert_eq!(
        root.delete(&format!("/api/admin/users/{root_id}")).await.0,
        409
    );
    assert_eq!(root.delete("/api/admin/users/999999").await.0, 404);
    let (status, body) = root.delete(&format!("/api/admin/users/{bob_id}")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["username"], "bob");
    assert!(body["trash"].is_string(), "{body}");

    // Bob's stream was closed as he was signed out, and his run stopped before the account
    // went; nothing of bob answers any more.
    let said = stream.closes().await;
    assert!(said.contains("event: closed"), "{said}");
    let _ = &run;
    assert!(server.app.chats.running().is_empty());
    assert_eq!(bob.get("/api/auth/me").await.0, 401);
    assert_eq!(script.get("/api/auth/me").await.0, 401);
    let mut anon = Client::anonymous(&server.base);
    let (status, _) = anon
        .post(
            "/api/auth/login",
            json!({"username": "bob", "password": "bob-password"}),
        )
        .await;
    assert_eq!(status, 401);
    let (_, users) = root.get("/api/admin/users").await;
    assert!(!users.to_string().contains("\"bob\""), "{users}");
    for table in [
        "chats",
        "runs",
        "events",
        "grants",
        "sessions",
        "api_tokens",
    ] {
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM {table} WHERE user_id = $1"
        )))
        .bind(bob_id)
        .fetch_one(&server.app.pool)
        .await
        .unwrap();
        assert_eq!(n, 0, "{table}");
    }
    // The home is in the trash, not in the tree; the name can be given again.
    assert!(!server.tree().join("home/bob").exists());
    let (status, body) = root
        .post(
            "/api/admin/users",
            json!({"username": "bob", "password": "new-bob-password"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let mut new_bob = server.login("bob", "new-bob-password").await;
    let (status, _) = new_bob.get("/api/files/content?path=notes.md").await;
    assert_eq!(status, 404, "the new bob does not get the old one's files");
    // Nor their trash: not the old home, not what the old bob trashed from it.
    let (_, v) = new_bob.get("/api/trash").await;
    assert_eq!(v, json!({"items": []}));
    assert_eq!(alice.get("/api/auth/me").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_users_run_ends_at_once_and_calls_no_more_tools() {
    // The model calls a tool, is busy with its next answer when the account is disabled, and
    // would call another after it.
    let model = ScriptedServer::start(vec![
        tool_call("c1", "write", json!({"path": "one.md", "content": "one\n"})),
        text(&["and ", "now"]).stalling(),
        tool_call(
            "c3",
            "write",
            json!({"path": "three.md", "content": "three\n"}),
        ),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut root = server.admin().await;
    let mut alice = server.user("alice").await;
    let alice_id = user_id(&mut alice).await;
    let (status, body) = alice.post("/api/chats", json!({"mode": "auto"})).await;
    assert_eq!(status, 201, "{body}");
    let chat = body["id"].as_str().unwrap().to_owned();
    let mut stream = alice.events(None).await;
    let run = alice.say(&chat, "write one.md, then three.md").await;
    stream
        .until(|e| e.kind() == "text_delta" && e.data["run"] == run)
        .await;
    assert!(server.tree().join("home/alice/one.md").exists());

    let (status, body) = root
        .patch(
            &format!("/api/admin/users/{alice_id}"),
            json!({"disabled": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // The run ends (a guard of a minute against a hang), recorded as interrupted.
    let mut status = String::from("running");
    for _ in 0..600 {
        llembas_server::chats::flush(&server.app.pool).await;
        status = sqlx::query_scalar("SELECT status FROM runs WHERE id = $1")
            .bind(&run)
            .fetch_one(&server.app.pool)
            .await
            .unwrap();
        if status != "running" && server.app.chats.running().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, "interrupted");
    assert!(server.app.chats.running().is_empty());
    assert_eq!(
        model.requests().len(),
        2,
        "no model request after the disable"
    );
    assert_eq!(model.replies_left(), 2);
    assert!(!server.tree().join("home/alice/three.md").exists());
    let (status, _) = alice
        .post(
            &format!("/api/chats/{chat}/messages"),
            json!({"text": "go on"}),
        )
        .await;
    assert_eq!(status, 401, "signed out; no new run");
}

/// What the user last said in a model request's body.
fn asked(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// Waits until the model has had `n` requests (a guard of a minute against a hang).
async fn requests_reach(model: &ScriptedServer, n: usize) {
    for _ in 0..600 {
        if model.requests().len() >= n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!(
        "the model had {} requests, not {n}, within a minute",
        model.requests().len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_four_users_questions_reach_the_model_at_once() {
    let model = ScriptedServer::start(
        (0..4)
            .map(|_| text(&["thinking"]).stalling())
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut root = server.admin().await;
    let (status, body) = root.get("/api/admin/capacity").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"slots": 4, "set": null, "default": 4}));
    for name in ["ann", "bea", "cid", "dot"] {
        let mut user = server.user(name).await;
        let chat = user.chat().await;
        user.say(&chat, &format!("{name} asks")).await;
    }
    // Each answer goes on (stalls): all four are at the model together.
    requests_reach(&model, 4).await;
    assert_eq!(server.app.chats.running().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_burst_does_not_keep_another_users_one_question_waiting() {
    let model = ScriptedServer::start(vec![text(&["long ", "answer"]).stalling()])
        .await
        .unwrap();
    for _ in 0..4 {
        model.push(text(&["Done."]));
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut root = server.admin().await;
    let mut ann = server.user("ann").await;
    let mut bob = server.user("bob").await;
    let (status, body) = root
        .put_json("/api/admin/capacity", json!({"slots": 0}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(ann.get("/api/admin/capacity").await.0, 403);
    let (status, body) = root
        .put_json("/api/admin/capacity", json!({"slots": 1}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["slots"], 1);

    // Ann's first question holds the one slot; three more of hers wait, then bob's one.
    let mut anns = ann.events(None).await;
    let mut bobs = bob.events(None).await;
    let mut runs = Vec::new();
    let first_chat = ann.chat().await;
    let first = ann.say(&first_chat, "ann 0").await;
    anns.until(|e| e.kind() == "text_delta").await;
    for i in 1..4 {
        let chat = ann.chat().await;
        let run = ann.say(&chat, &format!("ann {i}")).await;
        anns.until(|e| e.kind() == "notice" && e.data["run"] == run)
            .await;
        runs.push(run);
    }
    let bobs_chat = bob.chat().await;
    let bobs_run = bob.say(&bobs_chat, "bob's one question").await;
    bobs.until(|e| e.kind() == "notice" && e.data["run"] == bobs_run)
        .await;

    // The slot freed goes to bob, who holds none, before ann's next.
    let (status, _) = ann
        .post(&format!("/api/runs/{first}/stop"), json!({}))
        .await;
    assert_eq!(status, 202);
    bobs.until(super::run_end(&bobs_run)).await;
    for run in &runs {
        anns.until(super::run_end(run)).await;
    }
    let order: Vec<String> = model.bodies().iter().map(asked).collect();
    assert_eq!(order.len(), 5, "{order:?}");
    assert!(order[1].contains("bob's one question"), "{order:?}");
}
