//! The file tools on a view over an in-memory tree: the same answers the CLI gives on its disk.

use std::sync::Arc;

use harness_agent::{FileTools, ViewPaths};
use harness_core::protocol::ToolCall;
use harness_fs::{Access, Level, MemoryBackend, VPath, View};
use serde_json::{Value, json};

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: format!("c-{name}"),
        name: name.into(),
        arguments,
    }
}

#[test]
fn reads_guard_edits_and_edits_carry_their_diff() {
    let tree = MemoryBackend::new();
    tree.add_dir(&VPath::parse("/src")).unwrap();
    tree.add_file(&VPath::parse("/src/main.rs"), b"fn main() {}\n".to_vec())
        .unwrap();
    let view = View::new(Arc::new(tree), Access::new().grant("/", Level::Commit));
    let tools = FileTools::new();
    let run = |c: ToolCall| tools.run(&view, &ViewPaths, &c).expect("a file tool");

    let edit = call(
        "edit",
        json!({"path": "/src/main.rs", "old_string": "fn main() {}", "new_string": "fn main() { run() }"}),
    );
    let refused = run(edit.clone());
    assert!(
        refused.is_error,
        "an edit before a read: {}",
        refused.output
    );

    let read = run(call("read", json!({"path": "/src/main.rs"})));
    assert!(!read.is_error, "{}", read.output);
    assert!(read.output.contains("fn main() {}"));
    assert_eq!(read.read.as_ref().unwrap().path, "/src/main.rs");

    let changed = run(edit);
    assert!(!changed.is_error, "{}", changed.output);
    assert_eq!(changed.output, "Changed /src/main.rs.");
    let e = changed.edit.unwrap();
    assert_eq!(
        (e.before.as_str(), e.after.as_str()),
        ("fn main() {}\n", "fn main() { run() }\n")
    );

    let missing = run(call("write", json!({"path": "/x"})));
    assert_eq!(missing.output, "write: the argument `content` is missing");
    assert!(
        tools
            .run(&view, &ViewPaths, &call("bash", json!({})))
            .is_none()
    );

    let shown = tools
        .read_for_show(&view, &ViewPaths, "/nowhere.md")
        .unwrap_err();
    assert!(shown.contains("No such file"), "{shown}");
}
