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

/// A change asked about shows as ACP diffs whatever its form: a new file's (`--- /dev/null`)
/// has no old text; an `apply_patch` patch gives one diff per added or updated file, a moved
/// file under its new path, and its markers are no part of the text.
#[test]
fn asked_changes_as_diffs() {
    let work = Path::new("/work");
    let created = diffs_in(
        "--- /dev/null\n+++ /work/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n",
        work,
    );
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].path, PathBuf::from("/work/n.txt"));
    assert_eq!(created[0].old_text, None);
    assert_eq!(created[0].new_text, "a\nb\n");
    let patch = "*** Begin Patch\n*** Add File: docs/u.md\n+one\n+two\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def handle(request):\n     user = load(request)\n-    return render(user)\n+    return render(user, 1)\n*** End of File\n*** Delete File: old.py\n*** End Patch\n";
    let diffs = diffs_in(patch, work);
    assert_eq!(diffs.len(), 2, "{diffs:?}");
    assert_eq!(diffs[0].path, PathBuf::from("/work/docs/u.md"));
    assert_eq!(diffs[0].old_text, None);
    assert_eq!(diffs[0].new_text, "one\ntwo\n");
    assert_eq!(diffs[1].path, PathBuf::from("/work/src/main.py"));
    assert_eq!(
        diffs[1].old_text.as_deref(),
        Some("    user = load(request)\n    return render(user)\n")
    );
    assert_eq!(
        diffs[1].new_text,
        "    user = load(request)\n    return render(user, 1)\n"
    );
}

#[test]
fn plan_calls_are_titled_in_words_not_json() {
    let cases = [
        (
            "plan_write",
            json!({"title": "Retry failed uploads", "summary": "Wrap it.", "phases": []}),
            "Plan: Retry failed uploads",
        ),
        ("plan_write", json!({"summary": "No title."}), "Plan"),
        (
            "plan_update",
            json!({"tasks": [{"id": "t1", "status": "done"}, {"id": "t2", "title": "Use it"}],
                   "add": [{"phase": "p1", "title": "Test it"}]}),
            "Plan update: t1 done, t2 renamed, 1 task added",
        ),
        ("plan_update", json!({}), "Plan update"),
        (
            "plan_submit",
            json!({"message": "Ready."}),
            "Plan submitted for approval",
        ),
    ];
    for (name, args, title) in cases {
        assert_eq!(
            harness_agent::title::call_title(name, Block::Plan, &args),
            title,
            "{name} {args}"
        );
    }
}
