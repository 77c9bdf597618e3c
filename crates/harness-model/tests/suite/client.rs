//! The client end to end against the scripted model server: the exact JSON sent, the answers
//! parsed, retries, errors and cancellation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use harness_core::protocol::ToolCall;
use harness_model::quirks::RetryPolicy;
use harness_model::{
    Catalogue, ChatRequest, Endpoint, Error, FinishReason, Message, ModelClient, ModelInfo,
    ModelOverrides, Retry, StreamEvent, ToolChoice, ToolSpec,
};
use harness_test_support::{Recorded, Reply, ScriptedServer, chunk};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

fn model(overrides: ModelOverrides) -> ModelInfo {
    ModelInfo::resolve(Catalogue::embedded().unwrap(), "scripted", &overrides)
}

fn small_model() -> ModelInfo {
    model(ModelOverrides {
        context: Some(8192),
        output: Some(1024),
        ..ModelOverrides::default()
    })
}

fn fast_retry(max_attempts: u32) -> Option<RetryPolicy> {
    Some(RetryPolicy {
        max_attempts,
        loading_max_attempts: max_attempts,
        unsent_max_attempts: max_attempts,
        base_delay_ms: 1,
        max_delay_ms: 20,
        jitter: 0.0,
        stream_idle_timeout_ms: 10_000,
    })
}

/// The same, with a stream's idle limit of `idle_ms`.
fn fast_retry_idle(max_attempts: u32, idle_ms: u64) -> Option<RetryPolicy> {
    fast_retry(max_attempts).map(|p| RetryPolicy {
        stream_idle_timeout_ms: idle_ms,
        ..p
    })
}

/// The retries a client told while it worked.
fn retries(events: &[StreamEvent]) -> Vec<Retry> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// What a bare HTTP server does with one connection once it has read the request.
enum Conn {
    /// Closes the connection without a byte of answer (a keep-alive connection the server had
    /// dropped just as the request went out).
    Close,
    /// Keeps the connection open and sends nothing.
    Hang,
    /// Sends this whole response, then closes.
    Answer(String),
}

/// A bare HTTP server on a local port that treats its connections in turn as `script` says
/// (later connections are closed); the count is of requests read.
async fn bare_server(script: Vec<Conn>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        let mut script = script.into_iter();
        let mut hanging = Vec::new();
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            read_request(&mut socket).await;
            seen.fetch_add(1, Ordering::SeqCst);
            match script.next().unwrap_or(Conn::Close) {
                Conn::Close => drop(socket),
                Conn::Hang => hanging.push(socket),
                Conn::Answer(response) => {
                    let _ = socket.write_all(response.as_bytes()).await;
                    let _ = socket.shutdown().await;
                }
            }
        }
    });
    (url, count)
}

/// Reads one request: its head, then as many body bytes as its Content-Length says.
async fn read_request(socket: &mut TcpStream) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let Ok(n) = socket.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return;
            }
        }
    }
}

/// A whole streamed answer saying `text`, as raw HTTP.
fn sse_response(text: &str) -> String {
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(json!({"role": "assistant", "content": text}), None),
        chunk(json!({}), Some("stop"))
    );
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn client(server: &ScriptedServer, kind: &str, model: ModelInfo) -> ModelClient {
    let mut endpoint = Endpoint::new(server.base_url());
    endpoint.server = kind.into();
    endpoint.retry = fast_retry(4);
    ModelClient::new(endpoint, model).unwrap()
}

fn user(text: &str) -> Message {
    Message::user(text)
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::System {
                text: "You are terse.".into(),
            },
            user(text),
        ],
        ..ChatRequest::default()
    }
}

async fn stream_all(
    client: &ModelClient,
    request: &ChatRequest,
) -> (
    Vec<StreamEvent>,
    harness_model::Result<harness_model::Completion>,
) {
    let mut events = Vec::new();
    let result = client
        .stream(request, &CancellationToken::new(), &mut |e| {
            events.push(e.clone())
        })
        .await;
    (events, result)
}

#[tokio::test]
async fn streams_text_and_sends_the_exact_body() {
    let server = ScriptedServer::start(vec![Reply::text_stream(&["Hel", "lo", "!"])])
        .await
        .unwrap();
    let client = client(&server, "llama.cpp", small_model());
    let request = ask("Say hello");
    let (events, result) = stream_all(&client, &request).await;
    let answer = result.unwrap();
    assert_eq!(answer.text, "Hello!");
    assert_eq!(answer.finish.reason, FinishReason::Stop);
    assert_eq!(answer.usage.map(|u| u.prompt_tokens), Some(42));
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, vec!["Hel", "lo", "!"]);
    assert!(matches!(events.last(), Some(StreamEvent::Finish(_))));

    let shaped = client.shape(&request, true).unwrap();
    let max_tokens = shaped.max_tokens.unwrap();
    assert!(max_tokens <= 1024);
    assert_eq!(
        server.bodies(),
        vec![json!({
            "model": "scripted",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Say hello"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": max_tokens,
        })]
    );
}

#[tokio::test]
async fn a_conversation_is_shaped_for_strict_servers() {
    let server = ScriptedServer::start(vec![Reply::text_stream(&["ok"])])
        .await
        .unwrap();
    let client = client(&server, "mistral", small_model());
    let call = |id: &str, path: &str| ToolCall {
        id: id.into(),
        name: "read".into(),
        arguments: json!({"path": path}),
    };
    let request = ChatRequest {
        messages: vec![
            Message::System {
                text: "Base.".into(),
            },
            Message::System {
                text: "Extra.".into(),
            },
            user("Read two files."),
            user("Please."),
            Message::Assistant {
                text: String::new(),
                reasoning: "thinking".into(),
                tool_calls: vec![call("our-1", "a.txt"), call("our-2", "b.txt")],
            },
            Message::Tool {
                call_id: "our-1".into(),
                text: "A".into(),
            },
            Message::Tool {
                call_id: "stray".into(),
                text: "orphan".into(),
            },
            Message::System {
                text: "A late note.".into(),
            },
        ],
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                "additionalProperties": false, "properties": {"path": {"type": "string", "description": "Path", "default": "."}},
                "required": ["path"]}),
        }]
        .into(),
        tool_choice: Some(ToolChoice::Auto),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let (_, result) = stream_all(&client, &request).await;
    result.unwrap();
    let body = &server.bodies()[0];
    let messages = body["messages"].as_array().unwrap();
    let id1 = messages[2]["tool_calls"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let id2 = messages[2]["tool_calls"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for id in [&id1, &id2] {
        assert_eq!(id.len(), 9);
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric()));
    }
    assert_ne!(id1, id2);
    assert_eq!(
        Value::Array(messages.clone()),
        json!([
            {"role": "system", "content": "Base.\n\nExtra."},
            {"role": "user", "content": "Read two files.\n\nPlease."},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": id1, "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}},
                {"id": id2, "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"b.txt\"}"}},
            ]},
            {"role": "tool", "tool_call_id": id1, "content": "A"},
            {"role": "tool", "tool_call_id": id2, "content": "cancelled: this call was not run, so it has no result"},
            {"role": "user", "content": "A late note."},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "read", "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "Path"}}, "required": ["path"]}}}])
    );
    assert_eq!(body["tool_choice"], json!("auto"));
    assert_eq!(body["temperature"], json!(0.0));

    // The same call ids give the same wire ids in the next request (the prompt cache holds).
    server.push(Reply::text_stream(&["ok"]));
    stream_all(&client, &request).await.1.unwrap();
    assert_eq!(server.bodies()[1]["messages"], body["messages"]);
}

#[tokio::test]
async fn without_a_tool_role_results_go_as_user_messages() {
    let server = ScriptedServer::start(vec![Reply::text_json("fine")])
        .await
        .unwrap();
    let client = client(&server, "tgi", small_model());
    let request = ChatRequest {
        messages: vec![
            user("go"),
            Message::Assistant {
                text: "Reading.".into(),
                reasoning: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: json!({"path": "x"}),
                }],
            },
            Message::Tool {
                call_id: "c1".into(),
                text: "X".into(),
            },
            user("and now?"),
        ],
        ..ChatRequest::default()
    };
    let answer = client
        .complete(&request, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(answer.text, "fine");
    let body = &server.bodies()[0];
    let wire = body["messages"][1]["tool_calls"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": format!("[result of call {wire} (read)]\nX\n\nand now?")})
    );
    assert_eq!(body["stream"], json!(false));
    assert!(body.get("stream_options").is_none());
}

#[tokio::test]
async fn parallel_calls_at_index_zero_become_separate_calls() {
    let calls = [("call_a", "a.rs"), ("call_b", "b.rs")];
    let mut chunks: Vec<Value> = calls
        .iter()
        .map(|(id, path)| chunk(json!({"role": "assistant", "content": "", "tool_calls": [
            {"index": 0, "id": id, "type": "function", "function": {"name": "read", "arguments": format!("{{\"path\":\"{path}\"}}")}}]}), None))
        .collect();
    chunks.push(chunk(
        json!({"role": "assistant", "content": ""}),
        Some("stop"),
    ));
    let server = ScriptedServer::start(vec![Reply::sse_chunks(&chunks)])
        .await
        .unwrap();
    let client = client(&server, "ollama", small_model());
    let (events, result) = stream_all(&client, &ask("read both")).await;
    let answer = result.unwrap();
    assert_eq!(answer.finish.reason, FinishReason::ToolCalls);
    let got: Vec<(String, Value)> = answer
        .tool_calls
        .iter()
        .map(|c| (c.name.clone(), c.arguments.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("read".to_string(), json!({"path": "a.rs"})),
            ("read".to_string(), json!({"path": "b.rs"}))
        ]
    );
    assert_ne!(answer.tool_calls[0].id, "call_a", "ids are ours");
    assert_ne!(answer.tool_calls[0].id, answer.tool_calls[1].id);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ToolCall(_)))
            .count(),
        2
    );
}

#[tokio::test]
async fn capacity_answers_are_retried_until_one_succeeds() {
    let server = ScriptedServer::start(vec![
        Reply::Raw { status: 503, headers: vec![], body: json!({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}).to_string() },
        Reply::error(429, "Provider returned error").with_header("Retry-After", "0"),
        Reply::text_stream(&["at last"]),
    ])
    .await
    .unwrap();
    let client = client(&server, "llama.cpp", small_model());
    let (events, result) = stream_all(&client, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "at last");
    assert_eq!(server.requests().len(), 3);
    // Each retry is told as it happens: the attempt, the reason and the wait.
    let told = retries(&events);
    assert_eq!(
        told.iter()
            .map(|r| (r.attempt, r.max_attempts, r.reason.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (1, 4, "503: Loading model"),
            (2, 4, "429: Provider returned error")
        ]
    );
    assert!(told.iter().all(|r| r.wait <= Duration::from_millis(20)));
    assert_eq!(
        told[0].to_string(),
        format!(
            "model request failed (attempt 1 of 4): 503: Loading model; trying again in {:.1} s",
            told[0].wait.as_secs_f64()
        )
    );
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, StreamEvent::Finish(f) if f.error.is_some()))
    );
    let bodies = server.bodies();
    assert!(
        bodies.iter().all(|b| b == &bodies[0]),
        "every attempt sends the same body"
    );
}

#[tokio::test]
async fn capacity_gives_up_after_the_attempts_and_says_the_wait() {
    let server = ScriptedServer::start(vec![
        Reply::error(
            503,
            "server busy, please try again. maximum pending requests exceeded",
        )
        .with_header("Retry-After", "0"),
        Reply::error(
            503,
            "server busy, please try again. maximum pending requests exceeded",
        )
        .with_header("Retry-After", "0"),
    ])
    .await
    .unwrap();
    let mut endpoint = Endpoint::new(server.base_url());
    endpoint.server = "ollama".into();
    endpoint.retry = fast_retry(2);
    let client = ModelClient::new(endpoint, small_model()).unwrap();
    let err = client
        .complete(&ask("hi"), &CancellationToken::new())
        .await
        .unwrap_err();
    match &err {
        Error::Capacity { error, attempts } => {
            assert_eq!(*attempts, 2);
            assert_eq!(error.status, Some(503));
            assert_eq!(error.retry_after, Some(Duration::ZERO));
        }
        other => panic!("expected capacity, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.replies_left(), 0);
}

#[tokio::test]
async fn context_overflow_is_not_retried() {
    let server = ScriptedServer::start(vec![Reply::Raw {
        status: 400,
        headers: vec![],
        body: json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}).to_string(),
    }])
    .await
    .unwrap();
    let client = client(&server, "llama.cpp", small_model());
    let err = client
        .complete(&ask("hi"), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ContextOverflow(_)), "{err:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_error_inside_a_200_stream_after_text_is_an_error_not_retried() {
    let server = ScriptedServer::start(vec![Reply::sse_lines(&[
        ": OPENROUTER PROCESSING",
        "",
        &format!("data: {}", chunk(json!({"role": "assistant", "content": "Partial"}), None)),
        "",
        r#"data: {"error":{"code":429,"message":"Provider returned error"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#,
        "",
    ])])
    .await
    .unwrap();
    let client = client(&server, "openrouter", small_model());
    let (events, result) = stream_all(&client, &ask("hi")).await;
    let err = result.unwrap_err();
    assert!(
        matches!(err, Error::Capacity { attempts: 1, .. }),
        "{err:?}"
    );
    assert_eq!(events, vec![StreamEvent::Text("Partial".into())]);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_that_closes_early_is_sent_again_then_an_error() {
    let empty = || Reply::Sse {
        pieces: vec![],
        stall: false,
    };
    let server = ScriptedServer::start(vec![empty(), Reply::text_stream(&["second try"])])
        .await
        .unwrap();
    let client = client(&server, "llama-cpp-python", small_model());
    let answer = stream_all(&client, &ask("hi")).await.1.unwrap();
    assert_eq!(answer.text, "second try");
    assert_eq!(server.requests().len(), 2);

    for _ in 0..4 {
        server.push(empty());
    }
    let err = stream_all(&client, &ask("hi")).await.1.unwrap_err();
    match err {
        Error::Server(e) => assert!(
            e.retryable && e.message.contains("without sending anything"),
            "{e:?}"
        ),
        other => panic!("expected a server error, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 6, "four attempts in all");
}

#[tokio::test]
async fn cancellation_stops_a_stalled_stream() {
    // One chunk, then the connection stays open with nothing more.
    let stalled = ScriptedServer::start(vec![Reply::Sse {
        pieces: vec![format!(
            "data: {}\n\n",
            chunk(json!({"role": "assistant", "content": "first"}), None)
        )],
        stall: true,
    }])
    .await
    .unwrap();
    let client = client(&stalled, "vllm", small_model());
    let cancel = CancellationToken::new();
    let mut seen = Vec::new();
    let token = cancel.clone();
    let result = client
        .stream(&ask("hi"), &cancel, &mut |e| {
            seen.push(e.clone());
            token.cancel();
        })
        .await;
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert_eq!(seen, vec![StreamEvent::Text("first".into())]);
}

#[tokio::test]
async fn a_silent_stream_is_cut_by_the_idle_limit_and_sent_again() {
    let server = ScriptedServer::start(vec![
        Reply::Sse {
            pieces: vec![],
            stall: true,
        },
        Reply::text_stream(&["awake"]),
    ])
    .await
    .unwrap();
    let mut endpoint = Endpoint::new(server.base_url());
    endpoint.retry = fast_retry_idle(3, 200);
    let client = ModelClient::new(endpoint, small_model()).unwrap();
    let (events, result) = stream_all(&client, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "awake");
    assert_eq!(server.requests().len(), 2);
    let told = retries(&events);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        told[0].reason,
        "the model server sent nothing for 0.2 s inside its streamed answer (quirks.json retry.stream_idle_timeout_ms)"
    );
}

#[tokio::test]
async fn a_server_that_sends_nothing_hits_the_idle_limit_and_is_sent_again() {
    // The server takes the request and never answers, not even its headers.
    let (url, requests) = bare_server(vec![Conn::Hang, Conn::Answer(sse_response("awake"))]).await;
    let mut endpoint = Endpoint::new(url.clone());
    endpoint.retry = fast_retry_idle(3, 200);
    let client = ModelClient::new(endpoint, small_model()).unwrap();
    let (events, result) = stream_all(&client, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "awake");
    assert_eq!(requests.load(Ordering::SeqCst), 2);
    let told = retries(&events);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        told[0].reason,
        "the model server sent nothing for 0.2 s after the request (quirks.json retry.stream_idle_timeout_ms)"
    );

    // Silent every time: the error says how long nothing came, and it was worth retrying.
    let (url, requests) = bare_server(vec![Conn::Hang, Conn::Hang]).await;
    let mut endpoint = Endpoint::new(url);
    endpoint.retry = fast_retry_idle(2, 200);
    let client = ModelClient::new(endpoint, small_model()).unwrap();
    let (events, result) = stream_all(&client, &ask("hi")).await;
    match result.unwrap_err() {
        Error::Server(e) => {
            assert!(e.retryable && e.status.is_none(), "{e:?}");
            assert!(e.message.contains("sent nothing for 0.2 s"), "{e:?}");
        }
        other => panic!("expected a server error, got {other:?}"),
    }
    assert_eq!(requests.load(Ordering::SeqCst), 2);
    assert_eq!(retries(&events).len(), 1);
}

#[tokio::test]
async fn a_request_that_got_no_byte_back_is_sent_again() {
    // The connection is closed as the request arrives, before any byte of an answer (a server
    // dropping an idle keep-alive connection while the request went out).
    let (url, requests) =
        bare_server(vec![Conn::Close, Conn::Answer(sse_response("second try"))]).await;
    let mut endpoint = Endpoint::new(url.clone());
    endpoint.retry = fast_retry(3);
    let client = ModelClient::new(endpoint, small_model()).unwrap();
    let (events, result) = stream_all(&client, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "second try");
    assert_eq!(requests.load(Ordering::SeqCst), 2);
    let told = retries(&events);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!((told[0].attempt, told[0].max_attempts), (1, 3));
    assert!(
        told[0].reason.starts_with(&format!(
            "cannot reach the model server at {url}/chat/completions: "
        )),
        "{told:?}"
    );
}

#[tokio::test]
async fn a_refusal_is_not_retried_whatever_its_text_says() {
    for (status, message) in [
        (401, "Invalid or expired key, please try again"),
        (
            400,
            "Invalid request: the rate limit override is not allowed",
        ),
        (403, "Too many requests from this region are blocked"),
    ] {
        let server = ScriptedServer::start(vec![
            Reply::error(status, message),
            Reply::text_stream(&["never sent"]),
        ])
        .await
        .unwrap();
        let client = client(&server, "litellm", small_model());
        let (events, result) = stream_all(&client, &ask("hi")).await;
        match result.unwrap_err() {
            Error::Server(e) => {
                assert_eq!(e.status, Some(status));
                assert!(!e.retryable, "{e:?}");
            }
            other => panic!("{status}: expected a plain error, got {other:?}"),
        }
        assert_eq!(server.requests().len(), 1, "{status} was sent again");
        assert_eq!(retries(&events), vec![]);
    }
}

#[tokio::test]
async fn effort_tool_choice_and_key_follow_the_server() {
    let reasoning = model(ModelOverrides {
        context: Some(8192),
        output: Some(512),
        efforts: Some(vec!["low".into(), "high".into()]),
        ..ModelOverrides::default()
    });
    let tool = ToolSpec {
        name: "read".into(),
        description: "Read.".into(),
        parameters: json!({"type": "object", "properties": {}}),
    };
    let other = ToolSpec {
        name: "bash".into(),
        description: "Run.".into(),
        parameters: json!({"type": "object", "properties": {}}),
    };
    let request = ChatRequest {
        tools: vec![tool, other].into(),
        tool_choice: Some(ToolChoice::Named("read".into())),
        effort: Some("high".into()),
        ..ask("go")
    };

    let server = ScriptedServer::start(vec![Reply::text_json("a"), Reply::text_json("b")])
        .await
        .unwrap();
    let mut endpoint = Endpoint::new(server.base_url());
    endpoint.server = "llama.cpp".into();
    endpoint.api_key = Some("sk-local".into());
    let llama = ModelClient::new(endpoint, reasoning.clone()).unwrap();
    llama
        .complete(&request, &CancellationToken::new())
        .await
        .unwrap();
    let mut endpoint = Endpoint::new(server.base_url());
    endpoint.server = "openrouter".into();
    let openrouter = ModelClient::new(endpoint, reasoning.clone()).unwrap();
    openrouter
        .complete(&request, &CancellationToken::new())
        .await
        .unwrap();

    let requests: Vec<Recorded> = server.requests();
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some("Bearer sk-local")
    );
    assert_eq!(requests[1].authorization, None);
    let (a, b) = (&requests[0].body, &requests[1].body);
    assert_eq!(a["tool_choice"], json!("required"));
    assert_eq!(a["tools"].as_array().unwrap().len(), 1);
    assert_eq!(a["reasoning_effort"], json!("high"));
    assert_eq!(
        b["tool_choice"],
        json!({"type": "function", "function": {"name": "read"}})
    );
    assert_eq!(b["tools"].as_array().unwrap().len(), 2);
    assert_eq!(b["reasoning"], json!({"effort": "high"}));
    assert!(b.get("reasoning_effort").is_none());

    let wrong = ChatRequest {
        effort: Some("max".into()),
        ..ask("go")
    };
    let err = llama
        .complete(&wrong, &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "model configuration: model scripted takes the efforts low, high, not \"max\""
    );
    assert_eq!(server.requests().len(), 2, "a refused effort sends nothing");
}

#[tokio::test]
async fn max_tokens_is_clamped_and_a_prompt_too_big_is_refused_before_sending() {
    let server = ScriptedServer::start(vec![Reply::text_json("ok")])
        .await
        .unwrap();
    let tiny = model(ModelOverrides {
        context: Some(400),
        output: Some(4096),
        ..ModelOverrides::default()
    });
    let client = client(&server, "vllm", tiny);
    let request = ChatRequest {
        max_tokens: Some(10_000),
        ..ask("hi")
    };
    client
        .complete(&request, &CancellationToken::new())
        .await
        .unwrap();
    let sent = server.bodies()[0]["max_tokens"].as_u64().unwrap();
    let estimate = client.shape(&request, false).unwrap().prompt_estimate;
    assert_eq!(sent, 400 - estimate - 256);

    let long = ask(&"word ".repeat(400));
    let err = client
        .complete(&long, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ContextOverflow(_)), "{err:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn lists_models_and_reports_an_unreachable_server() {
    let server = ScriptedServer::start(vec![]).await.unwrap();
    server.set_models(&["qwen3-coder", "smollm2"]);
    let client = client(&server, "llama.cpp", small_model());
    assert_eq!(
        client.list_models(&CancellationToken::new()).await.unwrap(),
        vec!["qwen3-coder", "smollm2"]
    );

    let url = server.base_url();
    drop(server);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut endpoint = Endpoint::new(url.clone());
    // A server that is down fails within the unsent budget, not the whole one.
    endpoint.retry = fast_retry(10).map(|p| RetryPolicy {
        unsent_max_attempts: 3,
        ..p
    });
    let gone = ModelClient::new(endpoint, small_model()).unwrap();
    let (events, result) = stream_all(&gone, &ask("hi")).await;
    match result.unwrap_err() {
        Error::Transport { url: u, .. } => assert_eq!(u, format!("{url}/chat/completions")),
        other => panic!("expected a transport error, got {other:?}"),
    }
    // A refused connection got no byte back: it was tried three times, each retry told.
    assert_eq!(
        retries(&events)
            .iter()
            .map(|r| r.attempt)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    let bad = ModelClient::new(Endpoint::new("localhost:8080"), small_model()).unwrap_err();
    assert!(bad.to_string().contains("localhost:8080"), "{bad}");
}

#[tokio::test]
async fn the_endpoint_capacity_holds_a_second_request_back() {
    let server = ScriptedServer::start(vec![
        Reply::Sse {
            pieces: vec![format!(
                "data: {}\n\n",
                chunk(json!({"content": "busy"}), None)
            )],
            stall: true,
        },
        Reply::text_stream(&["second"]),
    ])
    .await
    .unwrap();
    let one_at_a_time = model(ModelOverrides {
        context: Some(8192),
        capacity: Some(1),
        ..ModelOverrides::default()
    });
    let client = client(&server, "llama.cpp", one_at_a_time);
    let cancel_first = CancellationToken::new();
    let (started, started_rx) = tokio::sync::oneshot::channel::<()>();
    let first = {
        let client = client.clone();
        let cancel = cancel_first.clone();
        tokio::spawn(async move {
            let mut started = Some(started);
            client
                .stream(&ask("one"), &cancel, &mut |_| {
                    if let Some(tx) = started.take() {
                        let _ = tx.send(());
                    }
                })
                .await
        })
    };
    started_rx.await.unwrap();
    let second = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .complete(&ask("two"), &CancellationToken::new())
                .await
        })
    };
    // While the first holds the endpoint's one slot, the second is not sent.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(server.requests().len(), 1);
    cancel_first.cancel();
    assert!(matches!(first.await.unwrap(), Err(Error::Cancelled)));
    let answer = second.await.unwrap().unwrap();
    assert_eq!(answer.text, "second");
    assert_eq!(server.requests().len(), 2);
}

/// A prompt of about 2,500 estimated tokens (above `silent_truncation_min_tokens`), answered by
/// the scripted server with a reported prompt of 42 tokens: far below half the estimate.
fn long_ask() -> ChatRequest {
    ask(&"word ".repeat(2000))
}

#[tokio::test]
async fn a_low_prompt_count_is_an_overflow_only_for_servers_that_cut_silently() {
    let server = ScriptedServer::start(vec![]).await.unwrap();
    for kind in ["llama.cpp", "other", "vllm", "some-new-server"] {
        server.push(Reply::text_stream(&["fine"]));
        let client = client(&server, kind, small_model());
        assert!(client.shape(&long_ask(), true).unwrap().prompt_estimate >= 2048);
        let answer = stream_all(&client, &long_ask()).await.1.unwrap();
        assert_eq!(answer.text, "fine", "{kind}");
        assert_eq!(answer.finish.reason, FinishReason::Stop, "{kind}");
        assert_eq!(answer.usage.map(|u| u.prompt_tokens), Some(42));
    }
    for kind in ["ollama", "Ollama"] {
        server.push(Reply::text_stream(&["I don't see any task."]));
        let client = client(&server, kind, small_model());
        let err = stream_all(&client, &long_ask()).await.1.unwrap_err();
        match err {
            Error::ContextOverflow(e) => assert!(e.message.contains("cut the prompt"), "{e:?}"),
            other => panic!("{kind}: expected a context overflow, got {other:?}"),
        }
    }
    assert_eq!(server.requests().len(), 6, "an overflow is never retried");
}

fn history_with_a_call() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::System {
                text: "Be brief.".into(),
            },
            user("What is in a.txt?"),
            Message::Assistant {
                text: "Reading it.".into(),
                reasoning: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "our-1".into(),
                        name: "read".into(),
                        arguments: json!({"path": "a.txt"}),
                    },
                    ToolCall {
                        id: "our-2".into(),
                        name: "read".into(),
                        arguments: json!({"path": "{content}"}),
                    },
                ],
            },
            Message::Tool {
                call_id: "our-1".into(),
                text: "alpha".into(),
            },
            user("Thanks. Summarize."),
        ],
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]
        .into(),
        tool_choice: Some(ToolChoice::Auto),
        ..ChatRequest::default()
    }
}

#[tokio::test]
async fn a_model_without_tools_gets_no_tools_and_its_history_as_text() {
    let server = ScriptedServer::start(vec![Reply::text_json("a"), Reply::text_json("b")])
        .await
        .unwrap();
    let no_tools = model(ModelOverrides {
        context: Some(8192),
        output: Some(1024),
        tools: Some(false),
        ..ModelOverrides::default()
    });
    assert!(!no_tools.tools);
    let client = client(&server, "llama.cpp", no_tools);
    let request = history_with_a_call();
    client
        .complete(&request, &CancellationToken::new())
        .await
        .unwrap();
    // A named choice is dropped too.
    let named = ChatRequest {
        tool_choice: Some(ToolChoice::Named("read".into())),
        ..history_with_a_call()
    };
    client
        .complete(&named, &CancellationToken::new())
        .await
        .unwrap();

    let shaped = client.shape(&request, false).unwrap();
    let (w1, w2) = (&shaped.wire_ids["our-1"], &shaped.wire_ids["our-2"]);
    let max_tokens = shaped.max_tokens.unwrap();
    let bodies = server.bodies();
    assert_eq!(
        bodies[0],
        json!({
            "model": "scripted",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is in a.txt?"},
                {"role": "assistant", "content": format!(
                    "Reading it.\n[call {w1}: read {{\"path\":\"a.txt\"}}]\n[call {w2}: read {{\"path\":\"{{content}}\"}}]")},
                {"role": "user", "content": format!(
                    "[result of call {w1} (read)]\nalpha\n\n[result of call {w2} (read)]\ncancelled: this call was not run, so it has no result\n\nThanks. Summarize.")},
            ],
            "stream": false,
            "max_tokens": max_tokens,
        })
    );
    assert_eq!(bodies[1], bodies[0]);
}

#[tokio::test]
async fn a_model_with_tools_keeps_tools_and_structured_history() {
    let server = ScriptedServer::start(vec![Reply::text_json("a")])
        .await
        .unwrap();
    let client = client(&server, "llama.cpp", small_model());
    assert!(client.model().tools);
    client
        .complete(&history_with_a_call(), &CancellationToken::new())
        .await
        .unwrap();
    let body = &server.bodies()[0];
    assert_eq!(body["tool_choice"], json!("auto"));
    assert_eq!(body["tools"].as_array().unwrap().len(), 1);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[2]["content"], json!("Reading it."));
    assert_eq!(messages[2]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(messages[3]["role"], json!("tool"));
    assert_eq!(messages[4]["role"], json!("tool"));
}

#[tokio::test]
async fn a_500_that_says_retry_after_is_retried_like_a_503() {
    let server = ScriptedServer::start(vec![
        Reply::error(500, "internal error").with_header("Retry-After", "0"),
        Reply::text_stream(&["back"]),
    ])
    .await
    .unwrap();
    let first = client(&server, "other", small_model());
    let (events, result) = stream_all(&first, &ask("hi")).await;
    assert_eq!(result.unwrap().text, "back");
    assert_eq!(server.requests().len(), 2);
    let told = retries(&events);
    assert_eq!(
        told.iter()
            .map(|r| (r.attempt, r.max_attempts, r.reason.as_str()))
            .collect::<Vec<_>>(),
        vec![(1, 4, "500: internal error")]
    );

    // Every attempt a 500 with Retry-After: the same budget and the same error as a 503's.
    let server = ScriptedServer::start(vec![
        Reply::error(500, "internal error").with_header("Retry-After", "0"),
        Reply::error(500, "internal error").with_header("Retry-After", "0"),
    ])
    .await
    .unwrap();
    let mut endpoint = Endpoint::new(server.base_url());
    endpoint.retry = fast_retry(2);
    let patient = ModelClient::new(endpoint, small_model()).unwrap();
    let err = patient
        .complete(&ask("hi"), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Capacity { attempts: 2, error } if error.status == Some(500)),
        "{err:?}"
    );

    // A plain 500 (no Retry-After) stays final.
    let server = ScriptedServer::start(vec![Reply::error(500, "boom")])
        .await
        .unwrap();
    let plain = client(&server, "other", small_model());
    let err = plain
        .complete(&ask("hi"), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Server(_)), "{err:?}");
    assert_eq!(server.requests().len(), 1);
}

/// A client whose calls have `deadline_ms` in all, with an idle limit far above it.
fn with_deadline(url: String, deadline_ms: u64) -> ModelClient {
    let mut endpoint = Endpoint::new(url);
    endpoint.retry = fast_retry_idle(10, 60_000);
    endpoint.deadline = Duration::from_millis(deadline_ms);
    ModelClient::new(endpoint, small_model()).unwrap()
}

fn assert_deadline(result: harness_model::Result<harness_model::Completion>, url: &str) {
    let err = result.unwrap_err();
    match &err {
        Error::Deadline { url: u, limit } => {
            assert_eq!(u, &format!("{url}/chat/completions"));
            assert_eq!(*limit, Duration::from_millis(300));
        }
        other => panic!("expected the deadline's error, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!(
            "the model request to {url}/chat/completions took longer than its deadline of 0.3 s (the endpoint's `deadline`)"
        )
    );
}

#[tokio::test]
async fn a_trickling_server_ends_with_the_deadlines_error() {
    // A byte every 20 ms never trips the idle limit: only the call's deadline ends it.
    let server = ScriptedServer::start(vec![Reply::Trickle {
        every: Duration::from_millis(20),
    }])
    .await
    .unwrap();
    let client = with_deadline(server.base_url(), 300);
    let (_, result) = stream_all(&client, &ask("hi")).await;
    assert_deadline(result, &server.base_url());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_server_that_never_sends_its_headers_ends_with_the_deadlines_error() {
    let (url, requests) = bare_server(vec![Conn::Hang, Conn::Hang]).await;
    let client = with_deadline(url.clone(), 300);
    let (_, result) = stream_all(&client, &ask("hi")).await;
    assert_deadline(result, &url);
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    // Unstreamed too.
    let (url, _) = bare_server(vec![Conn::Hang]).await;
    let client = with_deadline(url.clone(), 300);
    let result = client.complete(&ask("hi"), &CancellationToken::new()).await;
    assert_deadline(result, &url);
}
