//! Pairing a device (RFC 8628's shape) and the device list, against the real server and
//! database: a code asked for, polled (pending, slow_down), confirmed in the page with a name,
//! the token given once; denied and expired pairings; the link's refusals before any JSON-RPC.
//! The link itself, with a real `llembas link`, is in llembas-cli's suite.

use serde_json::{Value, json};

use super::{Client, Server};

/// Asks for a device code as the CLI does.
async fn ask_code(base: &str) -> Value {
    let mut cli = Client::anonymous(base);
    let (status, body) = cli
        .post("/api/device/code", json!({"name": "laptop"}))
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// One poll of the token endpoint, the pacing reset first (the test does not wait out the
/// interval: it moves the last poll back in the database instead).
async fn poll(server: &Server, device_code: &str) -> (u16, Value) {
    sqlx::query("UPDATE device_codes SET last_poll = 0")
        .execute(&server.app.pool)
        .await
        .unwrap();
    Client::anonymous(&server.base)
        .post("/api/device/token", json!({"device_code": device_code}))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_pairs_through_a_code_confirmed_in_the_page() {
    let model = harness_test_support::ScriptedServer::start(vec![])
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;

    let code = ask_code(&server.base).await;
    let user_code = code["user_code"].as_str().unwrap().to_owned();
    let device_code = code["device_code"].as_str().unwrap().to_owned();
    assert_eq!(user_code.len(), 9, "{code}");
    assert_eq!(device_code.len(), 64, "256 bits as hex: {code}");
    assert_eq!(code["interval"], 5);
    assert_eq!(code["expires_in"], 600);
    assert_eq!(
        code["verification_uri_complete"],
        format!("{}/devices?code={user_code}", server.base)
    );
    // Only the hash of the device code is stored.
    let stored: Vec<String> = sqlx::query_scalar("SELECT code_hash FROM device_codes")
        .fetch_all(&server.app.pool)
        .await
        .unwrap();
    assert_eq!(stored, vec![llembas_server::db::token_hash(&device_code)]);

    // Pending, then too fast.
    let (status, body) = poll(&server, &device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending"))
    );
    let (status, body) = Client::anonymous(&server.base)
        .post("/api/device/token", json!({"device_code": device_code}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("slow_down")),
        "{body}"
    );
    assert_eq!(body["interval"], 10);

    // A browser page cannot ask for codes.
    let (status, _) = Client::anonymous(&server.base)
        .post_with(
            "/api/device/code",
            json!({}),
            &[("origin", server.base.as_str())],
        )
        .await;
    assert_eq!(status, 403);

    // The person confirms it in the page (typed loosely), naming it.
    let typed = user_code.to_lowercase().replace('-', " ");
    let (status, body) = alice
        .post(
            "/api/devices/confirm",
            json!({"user_code": typed, "name": "Ana's laptop"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // Confirmed once: a second confirmation finds no pending code.
    let (status, body) = bob
        .post("/api/devices/confirm", json!({"user_code": user_code}))
        .await;
    assert_eq!(status, 404, "{body}");

    let (status, body) = poll(&server, &device_code).await;
    assert_eq!(status, 200, "{body}");
    let token = body["access_token"].as_str().unwrap().to_owned();
    assert!(
        token.starts_with("lld_") && token.len() == 4 + 64,
        "{token}"
    );
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["name"], "Ana's laptop");
    let id = body["device_id"].as_str().unwrap().to_owned();
    // The code is spent; the token's hash alone is kept.
    let (status, body) = poll(&server, &device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let hashes: Vec<String> = sqlx::query_scalar("SELECT token_hash FROM devices")
        .fetch_all(&server.app.pool)
        .await
        .unwrap();
    assert_eq!(hashes, vec![llembas_server::db::token_hash(&token)]);

    // Alice's list has it, offline; bob's is empty and he cannot revoke it.
    let (_, list) = alice.get("/api/devices").await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["name"], "Ana's laptop");
    assert_eq!(list[0]["online"], false);
    let (_, list) = bob.get("/api/devices").await;
    assert_eq!(list, json!([]));
    let (status, _) = bob.delete(&format!("/api/devices/{id}")).await;
    assert_eq!(status, 404);

    // The link: an Origin is 403 and a bad token 401, both before any upgrade.
    let ws = |token: &str| {
        reqwest::Client::new()
            .get(format!("{}/api/device/link", server.base))
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .bearer_auth(token)
    };
    let r = ws("lld_nonsense").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = ws(&token)
        .header("origin", server.base.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Revoked: gone from the list, its token refused.
    let (status, _) = alice.delete(&format!("/api/devices/{id}")).await;
    assert_eq!(status, 204);
    let (_, list) = alice.get("/api/devices").await;
    assert_eq!(list, json!([]));
    let r = ws(&token).send().await.unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_and_expired_pairings_say_so() {
    let model = harness_test_support::ScriptedServer::start(vec![])
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url());
    let mut alice = server.user("alice").await;

    let code = ask_code(&server.base).await;
    let (status, _) = alice
        .post("/api/devices/deny", json!({"user_code": code["user_code"]}))
        .await;
    assert_eq!(status, 200);
    let (status, body) = poll(&server, code["device_code"].as_str().unwrap()).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("access_denied"))
    );

    let code = ask_code(&server.base).await;
    sqlx::query("UPDATE device_codes SET expires = 0")
        .execute(&server.app.pool)
        .await
        .unwrap();
    let (status, body) = alice
        .post(
            "/api/devices/confirm",
            json!({"user_code": code["user_code"], "name": "x"}),
        )
        .await;
    assert_eq!(status, 404);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("run `llembas link` again"),
        "{body}"
    );
    let (status, body) = poll(&server, code["device_code"].as_str().unwrap()).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("expired_token"))
    );

    // Signed out, nobody confirms anything.
    let code = ask_code(&server.base).await;
    let (status, _) = Client::anonymous(&server.base)
        .post(
            "/api/devices/confirm",
            json!({"user_code": code["user_code"], "name": "x"}),
        )
        .await;
    assert_eq!(status, 401);
}
