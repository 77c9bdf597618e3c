//! One run against a real model server: SmolLM2-135M served by llama.cpp (the prebuilt
//! llama-server, or llama-cpp-python's server where that cannot run), which `cargo xtask test`
//! installs, starts on 127.0.0.1 and names in `LLEMBAS_REAL_MODEL_URL` and
//! `LLEMBAS_REAL_MODEL_SERVER` (the server kind, for its quirks). Plain `cargo test` leaves it
//! out (it is ignored). The tiny model cannot do agent work, so the checks are structural. It
//! does not call tools by itself either, so a small proxy in front of it answers the first step
//! with a forced `read` call and passes every other request through: the call's result then
//! round-trips to the real server.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// Reads one HTTP request (headers and a Content-Length body).
async fn read_request(s: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return buf;
            }
        }
        let n = s.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return buf;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A proxy on 127.0.0.1 that answers the first chat request with `scripted` (and closes the
/// connection) and passes everything else to `upstream`. Returns its port.
async fn proxy(upstream: u16, scripted: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut scripted = Some(scripted);
        while let Ok((mut client, _)) = listener.accept().await {
            let request = read_request(&mut client).await;
            if request.starts_with(b"POST /v1/chat/completions")
                && let Some(body) = scripted.take()
            {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = client.write_all(head.as_bytes()).await;
                let _ = client.write_all(body.as_bytes()).await;
                let _ = client.shutdown().await;
                continue;
            }
            tokio::spawn(async move {
                let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                    return;
                };
                if up.write_all(&request).await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut up).await;
                }
            });
        }
    });
    port
}

fn sse(chunks: &[Value]) -> String {
    let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    s.push_str("data: [DONE]\n\n");
    s
}

/// The real server `cargo xtask test` started: its port on 127.0.0.1, its server kind and the
/// window it was started with.
fn real_server() -> (u16, String, String) {
    let url = std::env::var("LLEMBAS_REAL_MODEL_URL")
        .expect("LLEMBAS_REAL_MODEL_URL names the real server (cargo xtask test sets it)");
    let port = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix("/v1"))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("LLEMBAS_REAL_MODEL_URL is not http://127.0.0.1:PORT/v1: {url}"));
    let kind = std::env::var("LLEMBAS_REAL_MODEL_SERVER").unwrap_or_else(|_| "llama.cpp".into());
    let context = std::env::var("LLEMBAS_REAL_MODEL_CONTEXT").unwrap_or_else(|_| "8192".into());
    (port, kind, context)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real model server: cargo xtask test starts one and runs it"]
async fn real_model_answers_and_a_tool_call_round_trips() {
    let (port, kind, context) = real_server();
    let sb = Sandbox::new();
    sb.write("notes.txt", "The capital of France is Paris.\n");

    let forced = sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "forced", "type": "function",
            "function": {"name": "read", "arguments": "{\"path\": \"notes.txt\"}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    let front = proxy(port, forced).await;
    std::fs::write(
        sb.home.path().join("config.toml"),
        format!(
            "[endpoints.local]\nbase_url = \"http://127.0.0.1:{front}/v1\"\ncontext = {context}\noutput = 48\nserver = \"{kind}\"\ntools = false\n"
        ),
    )
    .unwrap();
    // No model named: the server is asked which it serves (its alias).
    let mut cmd = sb.command(
        "",
        &[
            "--output",
            "json",
            "-p",
            "What is the capital of France? Answer in one sentence.",
        ],
    );
    cmd.env_remove("OPENAI_BASE_URL").env_remove("OPENAI_MODEL");
    let out = tokio::time::timeout(Duration::from_secs(240), cmd.output())
        .await
        .expect("llembas against the real server took over 4 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );

    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    // The forced call ran and its result went in.
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_call_finished")
        .expect("the forced read ran");
    assert!(
        finished["result"]["content"]
            .as_str()
            .unwrap()
            .contains("1\tThe capital of France is Paris."),
        "{finished}"
    );
    // The real server streamed an answer after it, piece by piece.
    let after: Vec<&Value> = events
        .iter()
        .skip_while(|e| e["type"] != "tool_call_finished")
        .filter(|e| e["type"] == "text_delta")
        .collect();
    assert!(after.len() > 1, "a streamed answer: {kinds:?}");
    let text: String = after.iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert!(!text.trim().is_empty());
    // The turn finished; the stream closes with its result line.
    let ended = events
        .iter()
        .rfind(|e| e["type"] == "turn_ended")
        .expect("the turn ended");
    assert_eq!(ended["reason"]["kind"], "finished", "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"result"), "{kinds:?}");

    // The transcript has the whole turn: the call, its result, the real answer.
    let t = sb.transcript();
    let types: Vec<&str> = t.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "turn_started",
            "assistant",
            "calls_started",
            "tool_result",
            "assistant",
            "turn_ended"
        ],
        "{t:?}"
    );
    assert_eq!(t[1]["tool_calls"][0]["name"], "read");
    assert_eq!(t[4]["text"].as_str().unwrap(), text);
    harness_test_support::report_real_model_ran(&format!("llembas-cli {kind}")).unwrap();
}
