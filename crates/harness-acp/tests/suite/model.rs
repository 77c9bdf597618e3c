//! The model link as the client sees it: retries as progress, a link that fails as -32042.

use agent_client_protocol::v1::schema::{ContentBlock, SessionUpdate, StopReason, TextContent};
use harness_agent::Reply;
use serde_json::json;

use super::{TestHost, prompt_once};

fn go() -> Vec<ContentBlock> {
    vec![ContentBlock::Text(TextContent::new("go"))]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_request_is_told_to_the_client_as_it_happens() {
    let host = TestHost::new(vec![
        Reply::Retry("429: rate limited".into()),
        Reply::text("Done."),
    ]);
    let (answer, updates) = prompt_once(host, go()).await;
    assert_eq!(answer.unwrap().stop_reason, StopReason::EndTurn);
    let thoughts: Vec<(String, serde_json::Value)> = updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentThoughtChunk(c) => match &c.content {
                ContentBlock::Text(t) => Some((
                    t.text.clone(),
                    c.meta
                        .as_ref()
                        .map(|m| m["lembas"].clone())
                        .unwrap_or_default(),
                )),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        thoughts,
        [(
            "model request failed (attempt 1 of 5): 429: rate limited; trying again in 0.0 s\n"
                .to_owned(),
            json!({"notice": "info"})
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_link_that_fails_answers_the_prompt_32042() {
    let host = TestHost::new(vec![Reply::Fail("the server is gone".into())]);
    let (answer, _) = prompt_once(host, go()).await;
    let (code, message, data) = answer.unwrap_err();
    assert_eq!(code, -32042);
    assert!(message.starts_with("Model unavailable: "), "{message}");
    assert!(message.contains("the server is gone"), "{message}");
    assert_eq!(data, json!({"lembas": "model_unavailable"}));
}
