//! Against a real model server: SmolLM2-135M served by llama.cpp (the prebuilt llama-server, or
//! llama-cpp-python's server), which `cargo xtask test` starts and names in
//! `LLEMBAS_REAL_MODEL_URL`, `LLEMBAS_REAL_MODEL_SERVER` (its kind) and
//! `LLEMBAS_REAL_MODEL_CONTEXT` (its window). Plain `cargo test` leaves it out (ignored).
//! Only structural assertions: a tiny model's words mean nothing.

use harness_model::{
    Catalogue, ChatRequest, Endpoint, Error, FinishReason, Message, ModelClient, ModelInfo,
    ModelOverrides, StreamEvent, ToolChoice, ToolSpec,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn kind() -> String {
    std::env::var("LLEMBAS_REAL_MODEL_SERVER").unwrap_or_else(|_| "llama.cpp".into())
}

fn client() -> ModelClient {
    let url = std::env::var("LLEMBAS_REAL_MODEL_URL")
        .expect("LLEMBAS_REAL_MODEL_URL names the real server (cargo xtask test sets it)");
    let context: u64 = std::env::var("LLEMBAS_REAL_MODEL_CONTEXT")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(4096);
    let mut endpoint = Endpoint::new(url);
    endpoint.server = kind();
    let model = ModelInfo::resolve(
        Catalogue::embedded().unwrap(),
        "smollm2",
        &ModelOverrides {
            context: Some(context),
            // The catalogue says it calls no tools (it never does by itself); here the requests
            // carry them, to see what a server makes of them and to force a named call.
            tools: Some(true),
            output: Some(64),
            ..ModelOverrides::default()
        },
    );
    ModelClient::new(endpoint, model).unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user(text)],
        temperature: Some(0.0),
        max_tokens: Some(24),
        ..ChatRequest::default()
    }
}

#[tokio::test]
#[ignore = "needs a real model server: cargo xtask test starts one and runs it"]
async fn real_model_streams_and_completes() {
    let client = client();
    let cancel = CancellationToken::new();
    assert!(!client.list_models(&cancel).await.unwrap().is_empty());

    let mut texts = 0;
    let answer = client
        .stream(
            &ask("What is the capital of France? Answer in one sentence."),
            &cancel,
            &mut |e| {
                if matches!(e, StreamEvent::Text(_)) {
                    texts += 1;
                }
            },
        )
        .await
        .unwrap();
    assert!(texts > 1, "text arrives in pieces");
    assert!(!answer.text.trim().is_empty());
    assert!(matches!(
        answer.finish.reason,
        FinishReason::Stop | FinishReason::Length
    ));
    // llama-server reports usage when asked; llama-cpp-python never does (quirk
    // usage-final-chunk), and then there is none rather than a made-up one.
    match (kind().as_str(), answer.usage) {
        ("llama-cpp-python", None) => {}
        (_, Some(usage)) => assert!(usage.prompt_tokens > 0 && usage.completion_tokens > 0),
        (kind, None) => panic!("{kind} reports usage when asked"),
    }

    // Tools in the request do not break it, whatever the model makes of them.
    let with_tools = ChatRequest {
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }]
        .into(),
        tool_choice: Some(ToolChoice::Auto),
        ..ask("Show me src/main.rs")
    };
    let whole = client.complete(&with_tools, &cancel).await.unwrap();
    assert!(matches!(
        whole.finish.reason,
        FinishReason::Stop | FinishReason::Length | FinishReason::ToolCalls
    ));

    // A named tool: llama-cpp-python forces it with a grammar and streams the call (its name
    // repeated on every fragment, quirk tool-fragments-repeat-id-and-name); llama-server takes
    // no named choice (quirk tool-choice-object) and the tiny model answers in words.
    let named = ChatRequest {
        tool_choice: Some(ToolChoice::Named("read".into())),
        max_tokens: Some(48),
        ..with_tools.clone()
    };
    let called = client.stream(&named, &cancel, &mut |_| {}).await.unwrap();
    if kind() == "llama-cpp-python" {
        assert_eq!(called.finish.reason, FinishReason::ToolCalls, "{called:?}");
        assert_eq!(called.tool_calls.len(), 1, "{called:?}");
        assert_eq!(called.tool_calls[0].name, "read");
        assert!(
            called.tool_calls[0].arguments["path"].is_string(),
            "{called:?}"
        );
    } else {
        assert!(matches!(
            called.finish.reason,
            FinishReason::Stop | FinishReason::Length | FinishReason::ToolCalls
        ));
    }

    // The call goes back with its result: an assistant message with calls carries
    // `content: ""` (llama-cpp-python answers 500 to a null), the result its `tool` message.
    let call = if called.tool_calls.is_empty() {
        harness_core::protocol::ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: json!({"path": "src/main.rs"}),
        }
    } else {
        called.tool_calls[0].clone()
    };
    let mut history = named.clone();
    history.tool_choice = Some(ToolChoice::Auto);
    history.messages.push(Message::Assistant {
        text: String::new(),
        reasoning: String::new(),
        tool_calls: vec![call.clone()],
    });
    history.messages.push(Message::Tool {
        call_id: call.id.clone(),
        text: "1: fn main() {}".into(),
    });
    let followed = client.stream(&history, &cancel, &mut |_| {}).await.unwrap();
    assert!(matches!(
        followed.finish.reason,
        FinishReason::Stop | FinishReason::Length | FinishReason::ToolCalls
    ));

    // A prompt over the server's window (but not over our catalogue's guess) is its overflow.
    let window = client.model().context.unwrap_or(4096);
    let mut big = client.model().clone();
    big.context = Some(window * 20);
    let roomy = ModelClient::new(client.endpoint().clone(), big).unwrap();
    let err = roomy
        .complete(&ask(&"word ".repeat(window as usize * 2)), &cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ContextOverflow(_)), "{err:?}");
    harness_test_support::report_real_model_ran(&format!("harness-model {}", kind())).unwrap();
}
