//! The server answered over real HTTP on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use harness_spec::Spec;

/// A plain HTTP/1.1 GET over a TCP stream: status and body.
async fn get(base: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

async fn get_json(base: &str, path: &str) -> serde_json::Value {
    let (status, body) = get(base, path).await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

async fn start() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, llembas_server::router())
            .await
            .unwrap()
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_and_tools_as_a_chat_sees_them() {
    let base = start().await;
    let spec = get_json(&base, "/api/spec").await;
    assert_eq!(spec["version"], "3.1.0-draft");
    assert_eq!(spec["sha256"], Spec::embedded().sha256());

    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let plain = get_json(&base, "/api/tools?mode=manual").await;
    let plain = names(&plain);
    assert!(plain.contains(&"read".to_string()), "{plain:?}");
    assert!(plain.contains(&"mkdir".to_string()), "{plain:?}");
    assert!(
        !plain.contains(&"bash".to_string()),
        "bash is never in a chat: {plain:?}"
    );
    assert!(
        !plain.contains(&"python".to_string()),
        "python needs a page: {plain:?}"
    );
    assert!(
        !plain.contains(&"plan_submit".to_string()),
        "plan_submit only in plan mode"
    );

    let full = get_json(
        &base,
        "/api/tools?mode=plan&page=true&display=true&forge=true",
    )
    .await;
    let full = names(&full);
    for name in ["show", "commit", "merge", "plan_submit"] {
        assert!(
            full.contains(&name.to_string()),
            "{name} missing from {full:?}"
        );
    }
    assert!(
        !full.contains(&"python".to_string()),
        "no Pyodide is served, so no page runs Python"
    );

    let (status, _) = get(&base, "/api/tools?mode=reckless").await;
    assert_eq!(status, 400);

    let (status, page) = get(&base, "/").await;
    assert_eq!(status, 200);
    assert!(page.contains("3.1.0-draft"), "{page}");
    assert!(page.contains("plan mode"), "{page}");
}
