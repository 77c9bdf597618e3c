//! The line wire: a request too long to take is answered on its id, with the limit.

use harness_acp::wire::{MAX_LINE_BYTES, request_id};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

use super::{TestHost, info};

#[test]
fn a_request_id_is_read_from_the_start_of_its_text() {
    let cases: &[(&str, Option<Value>)] = &[
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"#,
            Some(json!(7)),
        ),
        (r#"{ "id" : "a\"b", "method""#, Some(json!("a\"b"))),
        (r#"{"jsonrpc":"2.0","id":-12,"#, Some(json!(-12))),
        // An `id` inside the params is not the request's.
        (r#"{"method":"x","params":{"id":3,"text":"#, None),
        (r#"{"method":"x","params":{"text":"\"id\":4"#, None),
        (r#"{"method":"x","params":"#, None),
        // Cut inside the id: not taken.
        (r#"{"id":"abc"#, None),
        (r#"{"id":null,"#, None),
    ];
    for (text, id) in cases {
        assert_eq!(request_id(text.as_bytes()), *id, "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_limit_is_answered_on_its_id() {
    let (agent_end, client_end) = tokio::io::duplex(1 << 20);
    let (agent_in, agent_out) = tokio::io::split(agent_end);
    let agent = tokio::spawn(harness_acp::serve_stream(
        TestHost::new(Vec::new()),
        info(),
        agent_in,
        agent_out,
    ));
    let (client_in, mut client_out) = tokio::io::split(client_end);
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"s\",\"prompt\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}}}\n",
        "y".repeat(MAX_LINE_BYTES)
    );
    let init = json!({"jsonrpc": "2.0", "id": 42, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let writer = tokio::spawn(async move {
        client_out.write_all(huge.as_bytes()).await.unwrap();
        client_out
            .write_all(format!("{init}\n").as_bytes())
            .await
            .unwrap();
        client_out
    });
    let mut lines = tokio::io::BufReader::new(client_in).lines();
    let first: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    let second: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(first["id"], json!(41), "{first}");
    assert_eq!(first["error"]["code"], json!(-32600), "{first}");
    assert_eq!(first["error"]["data"]["limit"], json!(MAX_LINE_BYTES));
    assert_eq!(
        first["error"]["message"],
        json!("Invalid request: a message may be at most 16777216 bytes (16 MiB)")
    );
    assert!(
        first["error"]["data"]["line"]
            .as_str()
            .unwrap()
            .contains("over the limit of 16777216 bytes"),
        "{first}"
    );
    assert_eq!(second["id"], json!(42), "{second}");
    assert!(second["result"].is_object(), "{second}");
    // Both halves of the client's end gone: the agent reads the end of its input.
    drop(writer.await.unwrap());
    drop(lines);
    agent.await.unwrap().unwrap();
}
