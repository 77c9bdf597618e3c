//! The real filesystem server over stdio, started on a temporary directory that is the
//! session's workspace: the scripted model lists it and reads a file through the server's tools
//! without a question (read-only by their annotations, paths inside the workspace); a read of a
//! path outside the workspace and its write (not read-only) are asked in edit mode and, allowed
//! once, done (the outside read refused by the server itself, which serves its directory only).

use std::sync::Arc;

use harness_agent::{Event as SessionEvent, MemoryStore, Reply, ScriptedModel, SessionBuilder};
use harness_core::protocol::{Answer, Event, Mode};
use harness_mcp::{Limits, Mcp, ServerConfig, Transport, WithMcp};
use harness_model::Message;
use serde_json::json;

use super::Bare;
use super::session::run;

#[tokio::test]
async fn the_model_lists_reads_and_is_asked_before_it_writes_through_the_filesystem_server() {
    let Some(bin) = harness_test_support::mcp_filesystem() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The server answers with the directory's real path.
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "first line\nsecond line\n").unwrap();
    let at = |name: &str| root.join(name).display().to_string();
    let other = tempfile::tempdir().unwrap();
    let elsewhere = other.path().canonicalize().unwrap().join("secret.txt");
    std::fs::write(&elsewhere, "not for the model\n").unwrap();
    let config = ServerConfig::new(
        "files",
        Transport::stdio(bin.to_str().unwrap(), [root.display().to_string()]),
    );
    let (mcp, notices) = Mcp::start(&[config], Limits::default()).await;
    assert_eq!(notices, Vec::<String>::new());
    let offered: Vec<String> = mcp
        .tools()
        .iter()
        .map(|t| format!("{} {:?}", t.name, t.risk))
        .collect();
    // No resources: no resource tool.
    assert!(
        !offered.iter().any(|t| t.contains("read_resource")),
        "{offered:?}"
    );
    for want in [
        "mcp__files__list_directory Read",
        "mcp__files__read_text_file Read",
        "mcp__files__write_file Execute",
        "mcp__files__move_file Execute",
    ] {
        assert!(offered.iter().any(|t| t == want), "{want}: {offered:?}");
    }
    let model = ScriptedModel::new([
        Reply::call(
            "mcp__files__list_directory",
            json!({"path": root.display().to_string()}),
        ),
        Reply::call(
            "mcp__files__read_text_file",
            json!({"path": at("notes.txt")}),
        ),
        Reply::call(
            "mcp__files__read_text_file",
            json!({"path": elsewhere.display().to_string()}),
        ),
        Reply::call(
            "mcp__files__write_file",
            json!({"path": at("new.txt"), "content": "written by the model\n"}),
        ),
        Reply::text("Done."),
    ]);
    let world = Arc::new(WithMcp::new(
        Arc::new(Bare(root.display().to_string())),
        Arc::new(mcp),
    ));
    let builder = SessionBuilder::new(Arc::new(model.clone()), world)
        .store(Arc::new(MemoryStore::default()))
        .mode(Mode::Edit)
        .prompt("Look at the notes and write one.");
    let outs = run(builder, Some(Answer::Once)).await;
    let asked: Vec<String> = outs
        .iter()
        .filter_map(|o| match o {
            SessionEvent::Core(Event::ToolCallAsked { question, .. }) => {
                Some(question.tool.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        asked,
        ["mcp__files__read_text_file", "mcp__files__write_file"]
    );
    let requests = model.requests();
    let results: Vec<&str> = requests[4]
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[0].contains("[FILE] notes.txt"), "{}", results[0]);
    assert!(
        results[1].contains("first line\nsecond line"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("Access denied") && !results[2].contains("not for the model"),
        "{}",
        results[2]
    );
    assert!(results[3].contains("Successfully wrote"), "{}", results[3]);
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).unwrap(),
        "written by the model\n"
    );
}
