//! The scripted server over real HTTP: replies in order, requests recorded, models listed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use harness_test_support::{Reply, ScriptedServer, chunk};
use serde_json::{Value, json};

fn http() -> reqwest::Client {
    // reqwest is built without a crypto provider of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

#[tokio::test]
async fn replies_in_order_and_records_every_request() {
    let server = ScriptedServer::start(vec![
        Reply::sse_lines(&[": keep-alive", "data:{\"a\":1}", "data: [DONE]"]),
        Reply::error(503, "Loading model").with_header("Retry-After", "2"),
        Reply::text_json("whole"),
    ])
    .await
    .unwrap();
    let http = http();
    let url = format!("{}/chat/completions", server.base_url());

    let first = http
        .post(&url)
        .bearer_auth("k1")
        .body(r#"{"model":"m","stream":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status().as_u16(), 200);
    assert_eq!(first.headers()["content-type"], "text/event-stream");
    assert_eq!(
        first.text().await.unwrap(),
        ": keep-alive\ndata:{\"a\":1}\ndata: [DONE]\n"
    );

    let second = http.post(&url).body("not json").send().await.unwrap();
    assert_eq!(second.status().as_u16(), 503);
    assert_eq!(second.headers()["retry-after"], "2");
    let body: Value = serde_json::from_str(&second.text().await.unwrap()).unwrap();
    assert_eq!(body["error"]["message"], "Loading model");

    let third: Value = http
        .post(&url)
        .body("{}")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(third["choices"][0]["message"]["content"], "whole");

    let fourth = http.post(&url).body("{}").send().await.unwrap();
    assert_eq!(fourth.status().as_u16(), 500, "no reply left in the script");

    let recorded = server.requests();
    assert_eq!(recorded.len(), 4);
    assert_eq!(recorded[0].body, json!({"model": "m", "stream": true}));
    assert_eq!(recorded[0].authorization.as_deref(), Some("Bearer k1"));
    assert_eq!(recorded[1].body, Value::Null);
    assert_eq!(recorded[1].path, "/v1/chat/completions");
    assert_eq!(server.replies_left(), 0);
}

#[tokio::test]
async fn chunks_and_models() {
    let server = ScriptedServer::start(vec![Reply::sse_chunks(&[chunk(
        json!({"content": "hi"}),
        Some("stop"),
    )])])
    .await
    .unwrap();
    server.set_models(&["a", "b"]);
    let http = http();
    let models: Value = http
        .get(format!("{}/models", server.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][1]["id"], "b");
    let text = http
        .post(format!("{}/chat/completions", server.base_url()))
        .body("{}")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines: Vec<&str> = text.split("\n\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("data: {") && lines[0].contains("\"content\":\"hi\""));
    assert_eq!(lines[1], "data: [DONE]");
}
