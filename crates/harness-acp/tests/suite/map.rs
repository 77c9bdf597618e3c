//! The mapping's rules on their own.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{Meta, StopReason, ToolKind};
use harness_acp::map::{acp_stop, call_locations, diffs_in, inside_roots, kind_of};
use harness_core::protocol::{Block, Risk};
use serde_json::{Value, json};

/// `{"lembas": v}` as a `_meta`.
pub fn lembas(v: Value) -> Meta {
    let mut m = Meta::new();
    m.insert("lembas".into(), v);
    m
}

#[test]
fn roots_are_lexical() {
    let roots = vec![PathBuf::from("/home/ana/src")];
    assert!(inside_roots(Path::new("/home/ana/src/api"), &roots));
    assert!(inside_roots(Path::new("/home/ana/src"), &roots));
    assert!(!inside_roots(Path::new("/home/ana/src/../notes"), &roots));
    assert!(!inside_roots(Path::new("/home/ana/srcx"), &roots));
}

#[test]
fn calls_read_as_acp_kinds_and_locations() {
    assert_eq!(kind_of(Block::Shell, None), ToolKind::Execute);
    assert_eq!(kind_of(Block::Tool, Some(Risk::Write)), ToolKind::Edit);
    assert_eq!(kind_of(Block::Tool, None), ToolKind::Other);
    let at = call_locations(&json!({"path": "src/../lib.rs"}), Path::new("/work")).unwrap();
    assert_eq!(at[0].path, PathBuf::from("/work/lib.rs"));
    assert!(call_locations(&json!({"path": ""}), Path::new("/work")).is_none());
}

#[test]
fn stop_reasons_and_saved_diffs() {
    assert_eq!(acp_stop("max_tokens"), StopReason::MaxTokens);
    assert_eq!(acp_stop("end_turn"), StopReason::EndTurn);
    let diffs = diffs_in(
        "--- a/work/f.txt\n+++ b/work/f.txt\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n",
        Path::new("/work"),
    );
    assert_eq!(diffs.len(), 1);
    assert_eq!(diffs[0].path, PathBuf::from("/work/f.txt"));
    assert_eq!(diffs[0].old_text.as_deref(), Some("keep\nold\n"));
    assert_eq!(diffs[0].new_text, "keep\nnew\n");
}
