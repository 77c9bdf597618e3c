//! A server's resources through `mcp__SERVER__read_resource`: the real everything server's
//! listed and read by the scripted model in a session (what the model sees, snapshotted), a blob
//! as a notice, an unknown URI as an error; and how listings and contents read.

use std::sync::Arc;

use harness_agent::{MemoryStore, Reply, ScriptedModel, SessionBuilder, Spawned};
use harness_core::protocol::Mode;
use harness_mcp::resources::{LISTED, contents, listing};
use harness_mcp::{Limits, WithMcp};
use harness_model::{CancellationToken, Message};
use serde_json::{Value, json};

use super::*;

#[test]
fn a_listing_names_each_resource_once_and_cuts_long_lists() {
    let resources = vec![
        json!({"uri": "demo://a/readme.md", "name": "readme.md", "mimeType": "text/markdown", "description": "The readme\nsecond line"}),
        json!({"uri": "demo://b", "name": "B"}),
    ];
    let templates = vec![json!({"uriTemplate": "demo://t/{id}", "name": "T"})];
    assert_eq!(
        listing("s", &resources, &templates),
        "Resources of the MCP server `s` (2):\ndemo://a/readme.md (text/markdown): The readme\ndemo://b B\nURI templates (1; fill the {braces}):\ndemo://t/{id} T"
    );
    assert_eq!(
        listing("s", &[], &[]),
        "The MCP server `s` lists no resources."
    );
    let many: Vec<Value> = (0..LISTED + 3)
        .map(|i| json!({"uri": format!("x://{i}")}))
        .collect();
    let long = listing("s", &many, &[]);
    assert!(long.ends_with("x://199\n… and 3 more"), "{long}");
}

#[test]
fn contents_read_as_text_or_a_notice_for_a_blob() {
    let text = json!({"contents": [{"uri": "x://a", "text": "hello"}]});
    assert_eq!(contents("x://a", &text), "hello");
    let two = json!({"contents": [
        {"uri": "x://a", "text": "hello"},
        {"uri": "x://b", "mimeType": "image/png", "blob": "AAAA"}
    ]});
    assert_eq!(
        contents("x://a", &two),
        "[resource x://a]\nhello\n[a binary resource x://b (image/png, about 3 bytes): not shown to the model]"
    );
    assert_eq!(
        contents("x://a", &json!({"contents": []})),
        "(the resource x://a is empty)"
    );
}

#[tokio::test]
async fn the_model_lists_and_reads_resources_of_the_everything_server() {
    let Some(mcp) = start_everything(Limits::default()).await else {
        return;
    };
    let model = ScriptedModel::new([
        Reply::call("mcp__everything__read_resource", json!({})),
        Reply::call(
            "mcp__everything__read_resource",
            json!({"uri": "demo://resource/static/document/structure.md"}),
        ),
        Reply::text("Read."),
    ]);
    let world = Arc::new(WithMcp::new(bare(), Arc::new(mcp)));
    // Plan mode: a read is allowed where nothing that changes anything is.
    let builder = SessionBuilder::new(Arc::new(model.clone()), world)
        .store(Arc::new(MemoryStore::default()))
        .mode(Mode::Plan)
        .prompt("What does the server document?");
    let Spawned {
        mut events, run, ..
    } = builder.one_shot(None).spawn().unwrap();
    while events.recv().await.is_some() {}
    run.finished().await.unwrap().result.unwrap();
    let requests = model.requests();
    let first = &requests[0];
    assert!(
        !first.tools.iter().any(|t| t.name.starts_with("mcp__")),
        "deferred"
    );
    let loader = first.tools.iter().find(|t| t.name == "load_tools").unwrap();
    let line = loader
        .description
        .lines()
        .find(|l| l.contains("mcp__everything__read_resource"))
        .unwrap();
    let sent = requests[1]
        .tools
        .iter()
        .find(|t| t.name == "mcp__everything__read_resource")
        .unwrap();
    let results: Vec<&str> = requests[2]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    // Each result opens with its id (`[#hex]`), the same for every tool.
    let results: Vec<String> = results
        .iter()
        .map(|r| {
            let (id, rest) = r.split_once('\n').unwrap();
            assert!(id.starts_with("[#") && id.ends_with(']'), "{r}");
            format!("[#ID]\n{rest}")
        })
        .collect();
    assert!(
        results[1].starts_with("[#ID]\n# Everything Server - Project Structure"),
        "{}",
        results[1]
    );
    let seen = format!(
        "--- load_tools line\n{line}\n--- the tool once loaded\n{}\n{}\n--- its listing\n{}\n--- a read (its first lines)\n{}",
        sent.description,
        serde_json::to_string_pretty(&sent.parameters).unwrap(),
        results[0],
        results[1].lines().take(2).collect::<Vec<_>>().join("\n"),
    );
    insta::assert_snapshot!(seen);
}

#[tokio::test]
async fn a_blob_is_a_notice_and_an_unknown_uri_an_error() {
    let Some(mcp) = start_everything(Limits::default()).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let read = |uri: Value| {
        let mcp = &mcp;
        let cancel = &cancel;
        async move {
            mcp.call(
                "mcp__everything__read_resource",
                &json!({ "uri": uri }),
                cancel,
            )
            .await
        }
    };
    let (text, error) = read(json!("demo://resource/dynamic/text/7")).await;
    assert!(!error, "{text}");
    assert!(
        text.starts_with("Resource 7: This is a plaintext resource"),
        "{text}"
    );
    let (text, error) = read(json!("demo://resource/dynamic/blob/7")).await;
    assert!(!error, "{text}");
    assert!(
        text.starts_with("[a binary resource demo://resource/dynamic/blob/7 (text/plain, about ")
            && text.ends_with(" bytes): not shown to the model]"),
        "{text}"
    );
    let (text, error) = read(json!("demo://nothing/here")).await;
    assert!(error);
    assert!(
        text.starts_with("the MCP server `everything` could not read demo://nothing/here: "),
        "{text}"
    );
    let (text, error) = read(json!(7)).await;
    assert_eq!((text.as_str(), error), ("`uri` is a string, not 7", true));
}
