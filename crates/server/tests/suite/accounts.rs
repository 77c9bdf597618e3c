//! Accounts: the command line that makes them, sign-in, the cookie, tokens, the origin check,
//! the rate limit, body limits.

use std::io::Write as _;
use std::process::{Command, Stdio};

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::{Client, Server, run_end, text};

fn add(args: &[&str], password: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_llembas-server"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_and_user_made_on_the_command_line_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    // --data after the subcommand, and before it.
    let out = add(
        &["admin", "create", "--username", "root", "--data", data],
        "admin-secret",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = add(
        &["--data", data, "user", "add", "--username", "ann"],
        "ann-secret",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = add(
        &["--data", data, "user", "add", "--username", "ann"],
        "other-secret",
    );
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists already"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(dir.path().join("files/home/ann").is_dir());

    let model = ScriptedServer::start(vec![]).await.unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut admin = server.login("root", "admin-secret").await;
    assert_eq!(admin.get("/api/auth/me").await.1["role"], "admin");
    let mut ann = server.login("ann", "ann-secret").await;
    assert_eq!(ann.get("/api/auth/me").await.1["role"], "user");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_sessions_tokens_and_their_refusals() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut anon = Client::anonymous(&server.base);
    assert_eq!(anon.get("/healthz").await, (200, json!({"status": "ok"})));
    let (status, body) = anon.get("/api/chats").await;
    assert_eq!(status, 401);
    assert_eq!(body, json!({"error": "not signed in"}));

    let mut alice = server.user("alice").await;
    let set = alice.set_cookie.clone().unwrap();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Lax"),
        "{set}"
    );
    // Only the token's hash is stored.
    let first = alice.cookie.clone().unwrap();
    let stored: Vec<String> = sqlx::query_scalar("SELECT token_hash FROM sessions")
        .fetch_all(&server.app.pool)
        .await
        .unwrap();
    assert!(!stored.contains(&first));
    assert!(stored.contains(&llembas_server::db::token_hash(&first)));

    // Wrong password: 401 and JSON.
    let (status, body) = anon
        .post(
            "/api/auth/login",
            json!({"username": "alice", "password": "nope"}),
        )
        .await;
    assert_eq!(
        (status, body),
        (401, json!({"error": "wrong username or password"}))
    );

    // A sign-in from a browser that held a session rotates it: the old token stops working.
    let mut again = alice.clone();
    let (status, _) = again
        .post(
            "/api/auth/login",
            json!({"username": "alice", "password": "alice-password"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_ne!(again.cookie, alice.cookie);
    assert_eq!(alice.get("/api/auth/me").await.0, 401);
    assert_eq!(again.get("/api/auth/me").await.0, 200);

    // A token for scripts, as a bearer.
    let (status, t) = again.post("/api/tokens", json!({"label": "ci"})).await;
    assert_eq!(status, 200, "{t}");
    let mut script = Client::anonymous(&server.base);
    script.bearer = Some(t["token"].as_str().unwrap().to_owned());
    assert_eq!(script.get("/api/auth/me").await.1["username"], "alice");
    let mut forged = Client::anonymous(&server.base);
    forged.bearer = Some("llb_0000".into());
    assert_eq!(forged.get("/api/auth/me").await.0, 401);

    // Tokens are listed (never shown again) and revoked by their owner only.
    let (status, list) = again.get("/api/tokens").await;
    assert_eq!(status, 200, "{list}");
    let listed = list.as_array().unwrap();
    assert_eq!(listed.len(), 1, "{list}");
    assert_eq!(listed[0]["label"], "ci");
    assert!(
        !list.to_string().contains(t["token"].as_str().unwrap()),
        "{list}"
    );
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    let mut bob = server.user("bob").await;
    assert_eq!(bob.get("/api/tokens").await.1, json!([]));
    assert_eq!(bob.delete(&format!("/api/tokens/{id}")).await.0, 404);
    assert_eq!(
        script.get("/api/auth/me").await.0,
        200,
        "bob's try changed nothing"
    );
    let (status, body) = again.delete(&format!("/api/tokens/{id}")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        script.get("/api/auth/me").await.0,
        401,
        "a revoked token is refused"
    );
    let (status, t) = again.post("/api/tokens", json!({"label": "ci"})).await;
    assert_eq!(status, 200, "{t}");
    script.bearer = Some(t["token"].as_str().unwrap().to_owned());

    // Cross-site requests with the cookie are refused; same-site ones pass.
    let host = server.base.trim_start_matches("http://").to_owned();
    let (status, body) = again
        .post_with(
            "/api/chats",
            json!({}),
            &[("origin", "https://evil.example")],
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("cross-site request refused")
    );
    let (status, _) = again
        .post_with(
            "/api/tokens",
            json!({}),
            &[("sec-fetch-site", "cross-site")],
        )
        .await;
    assert_eq!(status, 403);
    let own = format!("http://{host}");
    let (status, body) = again
        .post_with("/api/tokens", json!({}), &[("origin", own.as_str())])
        .await;
    assert_eq!(status, 200, "{body}");

    // Bodies are bounded, and the refusal is JSON.
    let big = "x".repeat(llembas_server::api::MAX_JSON_BODY + 1);
    let (status, body) = again.post("/api/tokens", json!({"label": big})).await;
    assert_eq!(status, 413, "{body}");
    assert!(body["error"].is_string(), "{body}");

    // Logout ends the session: its token no longer signs in.
    let before = again.clone();
    let (status, _) = again.post("/api/auth/logout", json!({})).await;
    assert_eq!(status, 200);
    assert!(again.set_cookie.as_deref().unwrap().contains("Max-Age=0"));
    let mut before = before;
    assert_eq!(before.get("/api/auth/me").await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_ends_when_what_opened_it_no_longer_signs_in() {
    let model = ScriptedServer::start(vec![text(&["still ", "here"])])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut admin = server.admin().await;
    let mut alice = server.user("alice").await;
    // This stream's session is never revoked: it goes on until the account is disabled.
    let mut kept = alice.events(None).await;

    // Sign-out.
    let mut other = server.login("alice", "alice-password").await;
    let mut stream = other.events(None).await;
    let (status, _) = other.post("/api/auth/logout", json!({})).await;
    assert_eq!(status, 200);
    let said = stream.ends().await;
    assert!(said.contains("event: closed"), "{said}");

    // A session revoked from another.
    let other = server.login("alice", "alice-password").await;
    let mut stream = other.events(None).await;
    let (_, sessions) = alice.get("/api/auth/sessions").await;
    for s in sessions.as_array().unwrap() {
        if s["current"] == false {
            let id = s["id"].as_str().unwrap();
            assert_eq!(
                alice.delete(&format!("/api/auth/sessions/{id}")).await.0,
                200
            );
        }
    }
    stream.ends().await;

    // An API token revoked.
    let (_, t) = alice.post("/api/tokens", json!({})).await;
    let mut script = Client::anonymous(&server.base);
    script.bearer = Some(t["token"].as_str().unwrap().to_owned());
    let mut stream = script.events(None).await;
    let (_, list) = alice.get("/api/tokens").await;
    let id = list[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(alice.delete(&format!("/api/tokens/{id}")).await.0, 200);
    stream.ends().await;

    // The stream of the session still signed in goes on.
    let chat = alice.chat().await;
    let run = alice.say(&chat, "are you there").await;
    let got = kept.until(run_end(&run)).await;
    assert_eq!(got.last().unwrap().data["event"]["status"], "finished");

    // The account disabled.
    let (_, me) = alice.get("/api/auth/me").await;
    let id = me["id"].as_i64().unwrap();
    let (status, body) = admin
        .patch(&format!("/api/admin/users/{id}"), json!({"disabled": true}))
        .await;
    assert_eq!(status, 200, "{body}");
    kept.ends().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_attempts_are_rate_limited() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    server.user("carol").await;
    let mut anon = Client::anonymous(&server.base);
    for _ in 0..llembas_server::auth::LOGIN_FAILURES {
        let (status, _) = anon
            .post(
                "/api/auth/login",
                json!({"username": "carol", "password": "guess"}),
            )
            .await;
        assert_eq!(status, 401);
    }
    let (status, body) = anon
        .post(
            "/api/auth/login",
            json!({"username": "carol", "password": "carol-password"}),
        )
        .await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("too many failed sign-ins")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_sign_ins_hashes_no_more_at_once_than_there_are_cores() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let names: Vec<String> = (0..12).map(|i| format!("burst{i}")).collect();
    for n in &names {
        server.user(n).await;
    }
    let mut all = Vec::new();
    for n in &names {
        let base = server.base.clone();
        let n = n.clone();
        all.push(tokio::spawn(async move {
            let mut c = Client::anonymous(&base);
            c.post(
                "/api/auth/login",
                json!({"username": n, "password": format!("{n}-password")}),
            )
            .await
            .0
        }));
    }
    for t in all {
        assert_eq!(t.await.unwrap(), 200);
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let peak = llembas_server::auth::hashing_peak();
    assert!(
        (1..=cores).contains(&peak),
        "{peak} hashes at once on {cores} cores"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_moves_the_session_on_only_when_it_was_last_seen_long_ago() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let hash = llembas_server::db::token_hash(alice.cookie.as_ref().unwrap());
    let now = llembas_server::db::now();
    let seen = |hash: String| {
        let pool = server.app.pool.clone();
        async move {
            sqlx::query_as::<_, (i64, i64)>(
                "SELECT last_seen, expires FROM sessions WHERE token_hash = $1",
            )
            .bind(hash)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let set = |last: i64| {
        let (pool, hash) = (server.app.pool.clone(), hash.clone());
        async move {
            sqlx::query("UPDATE sessions SET last_seen = $1 WHERE token_hash = $2")
                .bind(last)
                .bind(hash)
                .execute(&pool)
                .await
                .unwrap();
        }
    };
    // Seen a minute ago: a request writes nothing (not a write to the database a request).
    set(now - 60).await;
    let before = seen(hash.clone()).await;
    assert_eq!(alice.get("/api/auth/me").await.0, 200);
    assert_eq!(seen(hash.clone()).await, before);
    // Seen longer ago than SESSION_TOUCH: the request moves it and its idle end on.
    let long_ago = now - llembas_server::auth::SESSION_TOUCH.as_secs() as i64 - 1;
    set(long_ago).await;
    assert_eq!(alice.get("/api/auth/me").await.0, 200);
    let (last, expires) = seen(hash.clone()).await;
    assert!(last >= now, "last_seen {last} not moved on from {long_ago}");
    assert!(
        expires >= last + llembas_server::auth::SESSION_IDLE.as_secs() as i64,
        "{expires}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_goes_on_only_to_a_path_of_this_server() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    server.user("dora").await;
    // `next` as the sign-in page reads it from its address (decoded once), and the spellings
    // that are still encoded, which a browser decodes again.
    let refused = [
        "//evil.example",
        "/\\evil.example",
        "/%5Cevil.example",
        "/%09/evil.example",
        "/\t/evil.example",
        "/\r\n/evil.example",
        "/%2F/evil.example",
        "/%2f%2fevil.example",
        "https://evil.example/",
        "http:evil.example",
        "javascript:alert(1)",
        "evil.example",
        "\\\\evil.example",
        "",
    ];
    for next in refused {
        let mut c = Client::anonymous(&server.base);
        let (status, body) = c
            .post(
                "/api/auth/login",
                json!({"username": "dora", "password": "dora-password", "next": next}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["next"], "/chats", "{next:?}");
    }
    for next in ["/chats/abc", "/files?path=%2Fshared", "/settings#theme"] {
        let mut c = Client::anonymous(&server.base);
        let (_, body) = c
            .post(
                "/api/auth/login",
                json!({"username": "dora", "password": "dora-password", "next": next}),
            )
            .await;
        assert_eq!(body["next"], next);
    }
    let mut c = Client::anonymous(&server.base);
    let (_, body) = c
        .post(
            "/api/auth/login",
            json!({"username": "dora", "password": "dora-password"}),
        )
        .await;
    assert_eq!(body["next"], "/chats");
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
async fn a_strangers_failed_sign_ins_make_only_the_stranger_wait() {
    use llembas_server::auth::{ADDRESS_FAILURES, LOGIN_FAILURES};
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    server.user("carol").await;
    server.admin().await;
    // A stranger at another address guesses carol's and the admin's passwords.
    let mut stranger = client_from(&server.base, "127.0.0.2");
    for name in ["carol", "root"] {
        for _ in 0..LOGIN_FAILURES {
            let (status, _) = stranger
                .post(
                    "/api/auth/login",
                    json!({"username": name, "password": "guess"}),
                )
                .await;
            assert_eq!(status, 401);
        }
        let resp = stranger
            .http
            .post(format!("{}/api/auth/login", server.base))
            .json(&json!({"username": name, "password": "guess"}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 429);
        let wait: u64 = resp.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=15).contains(&wait), "Retry-After: {wait}");
    }
    // The real users, from their own address, sign in all the same.
    let mut carol = client_from(&server.base, "127.0.0.1");
    let (status, body) = carol
        .post(
            "/api/auth/login",
            json!({"username": "carol", "password": "carol-password"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    server.login("root", "root-password").await;
    // Past its free failures for every account together, an address waits for any account.
    let mut sprayer = client_from(&server.base, "127.0.0.3");
    for i in 0..ADDRESS_FAILURES {
        let (status, _) = sprayer
            .post(
                "/api/auth/login",
                json!({"username": format!("user{i}"), "password": "guess"}),
            )
            .await;
        assert_eq!(status, 401);
    }
    let (status, body) = sprayer
        .post(
            "/api/auth/login",
            json!({"username": "carol", "password": "carol-password"}),
        )
        .await;
    assert_eq!(status, 429, "{body}");
    let (status, _) = carol
        .post(
            "/api/auth/login",
            json!({"username": "carol", "password": "carol-password"}),
        )
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_changes_their_password_and_their_other_sign_ins_end() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut here = server.user("gail").await;
    let mut there = server.login("gail", "gail-password").await;
    let (_, t) = there.post("/api/tokens", json!({})).await;
    let mut script = Client::anonymous(&server.base);
    script.bearer = Some(t["token"].as_str().unwrap().to_owned());
    let mut theirs = there.events(None).await;

    let (status, body) = here
        .post(
            "/api/auth/password",
            json!({"current": "wrong-password", "new": "gail-new-password"}),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = here
        .post(
            "/api/auth/password",
            json!({"current": "gail-password", "new": "short"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = here
        .post(
            "/api/auth/password",
            json!({"current": "gail-password", "new": "gail-new-password"}),
        )
        .await;
    assert_eq!(
        (status, body),
        (200, json!({"changed": true, "sessions_ended": 1}))
    );
    // The stream the other sign-in opened ends with it.
    let said = theirs.ends().await;
    assert!(said.contains("event: closed"), "{said}");
    assert_eq!(here.get("/api/auth/me").await.0, 200, "this sign-in stays");
    assert_eq!(there.get("/api/auth/me").await.0, 401, "the other ended");
    assert_eq!(script.get("/api/auth/me").await.0, 200, "tokens stay");
    let mut anon = Client::anonymous(&server.base);
    let (status, _) = anon
        .post(
            "/api/auth/login",
            json!({"username": "gail", "password": "gail-password"}),
        )
        .await;
    assert_eq!(status, 401);
    server.login("gail", "gail-new-password").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_or_the_command_line_sets_a_password_and_ends_every_sign_in() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut hank = server.user("hank").await;
    let hank_id = hank.get("/api/auth/me").await.1["id"].as_i64().unwrap();
    let (_, t) = hank.post("/api/tokens", json!({})).await;
    let mut script = Client::anonymous(&server.base);
    script.bearer = Some(t["token"].as_str().unwrap().to_owned());
    let mut root = server.admin().await;
    let root_id = root.get("/api/auth/me").await.1["id"].as_i64().unwrap();

    let url = format!("/api/admin/users/{hank_id}/password");
    let (status, _) = hank
        .post(&url, json!({"password": "hank-own-choice"}))
        .await;
    assert_eq!(status, 403, "only an admin");
    let (status, _) = root
        .post(
            &format!("/api/admin/users/{root_id}/password"),
            json!({"password": "root-new-password"}),
        )
        .await;
    assert_eq!(status, 409, "not one's own");
    let (status, body) = root
        .post(&url, json!({"password": "hank-reset-password"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(hank.get("/api/auth/me").await.0, 401);
    assert_eq!(script.get("/api/auth/me").await.0, 401);
    let mut again = server.login("hank", "hank-reset-password").await;

    // The command line, on the same data directory.
    let out = add(
        &[
            "user",
            "password",
            "--username",
            "hank",
            "--data",
            dir.path().to_str().unwrap(),
        ],
        "hank-cli-password",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(again.get("/api/auth/me").await.0, 401);
    server.login("hank", "hank-cli-password").await;
    let out = add(
        &[
            "user",
            "password",
            "--username",
            "nobody",
            "--data",
            dir.path().to_str().unwrap(),
        ],
        "whatever-password",
    );
    assert!(!out.status.success());
}
