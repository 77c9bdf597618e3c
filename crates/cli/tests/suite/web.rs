//! `web_fetch` end to end against a web server on 127.0.0.1: HTML as Markdown and as text, a
//! redirect, text as it is, and what is refused (not text, over the size limit, an HTTP error).

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use harness_test_support::ScriptedServer;
use serde_json::json;

use super::*;

const PAGE: &str = "<!doctype html><html><head><title>Docs</title><script>var x = 1;</script></head><body><h1>Install</h1><p>Run <code>make</code> with <strong>care</strong>; see <a href=\"https://example.invalid/more\">more</a>.</p></body></html>";

async fn web() -> String {
    let app = Router::new()
        .route(
            "/page",
            get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
        )
        .route("/moved", get(|| async { Redirect::temporary("/page") }))
        .route(
            "/notes.txt",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain")],
                    "line one\nline two\n",
                )
            }),
        )
        .route(
            "/logo.png",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "image/png")],
                    vec![0x89u8, b'P', b'N', b'G', 0],
                )
            }),
        )
        .route(
            "/huge",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain")],
                    "x".repeat(
                        harness_web::Limits::for_project(harness_spec::Project::Cli)
                            .unwrap()
                            .max_bytes
                            + 1,
                    ),
                )
            }),
        )
        .route(
            "/gone",
            get(|| async { (axum::http::StatusCode::NOT_FOUND, "no such page").into_response() }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_pages_and_refuses_what_is_not_text() {
    let base = web().await;
    let u = |p: &str| format!("{base}{p}");
    let server = ScriptedServer::start(vec![
        calls(&[
            ("w1", "web_fetch", json!({"url": u("/page")})),
            (
                "w2",
                "web_fetch",
                json!({"url": u("/moved"), "format": "text"}),
            ),
            ("w3", "web_fetch", json!({"url": u("/notes.txt")})),
            (
                "w4",
                "web_fetch",
                json!({"url": u("/page"), "format": "html"}),
            ),
        ]),
        calls(&[
            ("w5", "web_fetch", json!({"url": u("/logo.png")})),
            ("w6", "web_fetch", json!({"url": u("/huge")})),
            ("w7", "web_fetch", json!({"url": u("/gone")})),
            ("w8", "web_fetch", json!({"url": "file:///etc/passwd"})),
        ]),
        text(&["Fetched."]),
    ])
    .await
    .unwrap();
    let sb = Sandbox::new();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "read the docs"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3);
    // The tool is offered as the spec describes it, its note filled for this machine: deferred,
    // it was called directly, and is sent whole from the next request on.
    let tools = bodies[1]["tools"].as_array().unwrap();
    let tool = tools
        .iter()
        .find(|t| t["function"]["name"] == "web_fetch")
        .expect("web_fetch offered");
    let description = tool["function"]["description"].as_str().unwrap();
    assert!(description.contains("The request is made from this machine."));
    assert!(
        !tools.iter().any(|t| t["function"]["name"] == "web_search"),
        "no search backend: web_search is not offered"
    );
    let first = tool_results(&bodies[1]);
    assert_eq!(first.len(), 4);
    assert!(first[0].contains("# Install"), "{}", first[0]);
    assert!(first[0].contains("**care**"), "{}", first[0]);
    assert!(
        first[0].contains("https://example.invalid/more"),
        "{}",
        first[0]
    );
    assert!(!first[0].contains("var x"), "{}", first[0]);
    assert!(
        first[1].contains(&format!("(redirected to {base}/page)")),
        "{}",
        first[1]
    );
    assert!(first[1].contains("Run make with care"), "{}", first[1]);
    assert!(!first[1].contains("**"), "{}", first[1]);
    assert!(first[2].contains("line one\nline two"), "{}", first[2]);
    assert!(first[3].contains("<h1>Install</h1>"), "{}", first[3]);
    let all = tool_results(&bodies[2]);
    assert_eq!(all.len(), 8);
    let second = &all[4..];
    assert!(
        second[0].contains("is image/png, not text"),
        "{}",
        second[0]
    );
    assert!(second[1].contains("over the limit of"), "{}", second[1]);
    assert!(
        second[2].contains("answered HTTP 404: no such page"),
        "{}",
        second[2]
    );
    assert!(
        second[3].contains("not an http:// or https:// address"),
        "{}",
        second[3]
    );
}
