//! One run against a real model server: llama.cpp's llama-server with SmolLM2-135M, installed
//! by `.ci/install-llama-server.sh` into a scratch virtual environment, started on 127.0.0.1
//! with `-t 1 -tb 2` and stopped by its PID. The tiny model cannot do agent work, so the checks
//! are structural. It cannot call tools either (llama-server ignores tools with its template), so
//! a small proxy in front of it answers the first step with a forced `read` call and passes
//! every other request through: the call's result then round-trips to the real server.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// Why this machine cannot run the prebuilt server (its CPU code uses AVX-512), if it cannot.
fn cannot_run() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if info.split_whitespace().any(|w| w == "avx512f") {
        None
    } else {
        Some("this CPU has no AVX-512 (no avx512f in /proc/cpuinfo), which the prebuilt llama-server needs".into())
    }
}

struct Server {
    pid: u32,
    child: std::process::Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    buf.starts_with(b"HTTP/1.1 200") || buf.starts_with(b"HTTP/1.0 200")
}

fn start_server(venv: &Path, log: &Path, port: u16) -> Server {
    let gguf = std::fs::read_to_string(venv.join("gguf-path")).unwrap();
    let child = std::process::Command::new(venv.join("bin/llama-server-vulkan"))
        .args([
            "-m",
            gguf.trim(),
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args(["-t", "1", "-tb", "2", "-c", "8192", "--alias", "smollm2"])
        .stdout(Stdio::from(std::fs::File::create(log).unwrap()))
        .stderr(Stdio::from(
            std::fs::File::create(log.with_extension("err")).unwrap(),
        ))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Server {
        pid: child.id(),
        child,
    }
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_llama_server_answers_and_a_tool_call_round_trips() {
    if let Some(why) = cannot_run() {
        println!("skipped: {why}");
        eprintln!("skipped real_llama_server_answers_and_a_tool_call_round_trips: {why}");
        return;
    }
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("llama-venv");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/install-llama-server.sh");
    let status = std::process::Command::new("bash")
        .arg(&script)
        .arg(&venv)
        .status()
        .unwrap();
    assert!(status.success(), "{} failed", script.display());

    let sb = Sandbox::new();
    sb.write("notes.txt", "The capital of France is Paris.\n");
    let port = free_port();
    let log = sb.home.path().join("llama-server.log");
    let _server = start_server(&venv, &log, port);
    let started = Instant::now();
    while !healthy(port).await {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "llama-server did not come up: {}",
            std::fs::read_to_string(log.with_extension("err")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

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
            "[endpoints.local]\nbase_url = \"http://127.0.0.1:{front}/v1\"\ncontext = 8192\noutput = 48\nserver = \"llama.cpp\"\ntools = false\n"
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
        .expect("llembas against llama-server took over 4 minutes")
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
            .contains("1: The capital of France is Paris."),
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
    assert_eq!(kinds.last(), Some(&"turn_ended"));
    assert_eq!(events.last().unwrap()["reason"]["kind"], "finished");

    // The transcript has the whole turn: the call, its result, the real answer.
    let t = sb.transcript();
    let types: Vec<&str> = t.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "turn_started",
            "assistant",
            "tool_result",
            "assistant",
            "turn_ended"
        ],
        "{t:?}"
    );
    assert_eq!(t[1]["tool_calls"][0]["name"], "read");
    assert_eq!(t[3]["text"].as_str().unwrap(), text);
}
