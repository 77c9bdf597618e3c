//! The file tools on a view over an in-memory tree: the same answers the CLI gives on its disk.

use std::sync::Arc;

use harness_agent::{FileTools, SeamError, ViewPaths};
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

    // The seam's error names the file at fault; its text is what the model reads.
    let shown = tools
        .read_for_show(&view, &ViewPaths, "/nowhere.md")
        .unwrap_err();
    assert!(
        matches!(&shown, SeamError::File { path, .. } if path == "/nowhere.md"),
        "{shown:?}"
    );
    assert!(shown.to_string().contains("No such file"), "{shown}");
}

#[test]
fn a_file_that_cannot_be_shown_is_named_as_the_person_knows_it() {
    let tree = MemoryBackend::new();
    tree.add_file(&VPath::parse("/bin.dat"), vec![0xff, 0xfe, 0x00])
        .unwrap();
    let view = View::new(Arc::new(tree), Access::new().grant("/", Level::Commit));
    let shown = FileTools::new()
        .read_for_show(&view, &Under, "/home/p/proj/bin.dat")
        .unwrap_err();
    assert_eq!(
        shown,
        SeamError::File {
            path: "/home/p/proj/bin.dat".into(),
            message: "/home/p/proj/bin.dat is not UTF-8 text: it cannot be shown".into(),
        }
    );
}

/// The person's paths under `/home/p/proj`, the view's under `/`.
struct Under;

impl harness_agent::PathMap for Under {
    fn to_view(&self, input: &str) -> String {
        match input.strip_prefix("/home/p/proj") {
            Some("") => "/".into(),
            Some(rest) => rest.into(),
            None => input.into(),
        }
    }

    fn shown(&self, p: &VPath) -> String {
        if p.as_str() == "/" {
            "/home/p/proj".into()
        } else {
            format!("/home/p/proj{}", p.as_str())
        }
    }
}

#[test]
fn a_wrong_type_is_named_and_errors_name_paths_as_successes_do() {
    let tree = MemoryBackend::new();
    tree.add_file(&VPath::parse("/a.txt"), b"one\n".to_vec())
        .unwrap();
    let view = View::new(Arc::new(tree), Access::new().grant("/", Level::Commit));
    let tools = FileTools::new();
    let run = |c: ToolCall| tools.run(&view, &Under, &c).expect("a file tool");
    for (name, args, text) in [
        (
            "read",
            json!({"path": 123}),
            "read: `path` must be a string",
        ),
        (
            "read",
            json!({"path": "/home/p/proj/a.txt", "offset": "2"}),
            "read: `offset` must be a whole number, 0 or more",
        ),
        (
            "read",
            json!({"path": "/home/p/proj/a.txt", "offset": 1e20}),
            "read: `offset` 1e+20 is past the largest offset there can be (18446744073709551615)",
        ),
        (
            "write",
            json!({"path": "/home/p/proj/b.txt", "content": ["x"]}),
            "write: `content` must be a string",
        ),
        (
            "edit",
            json!({"path": "/home/p/proj/a.txt", "old_string": "one", "new_string": "two", "replace_all": "yes"}),
            "edit: `replace_all` must be true or false",
        ),
        (
            "grep",
            json!({"pattern": "one", "ignore_case": 1}),
            "grep: `ignore_case` must be true or false",
        ),
        (
            "list",
            json!({"path": false}),
            "list: `path` must be a string",
        ),
        ("read", json!({}), "read: the argument `path` is missing"),
    ] {
        let out = run(call(name, args.clone()));
        assert!(out.is_error, "{name} {args}");
        assert_eq!(out.output, text, "{name} {args}");
    }
    // A success and a refusal name the file the same way.
    let ok = run(call("read", json!({"path": "/home/p/proj/a.txt"})));
    assert!(
        ok.output.starts_with("/home/p/proj/a.txt (hash "),
        "{}",
        ok.output
    );
    let gone = run(call("read", json!({"path": "/home/p/proj/gone.txt"})));
    assert_eq!(
        gone.output,
        "No such file or directory: /home/p/proj/gone.txt"
    );
    let stale = run(call(
        "edit",
        json!({"path": "/home/p/proj/a.txt", "old_string": "zzz", "new_string": "y"}),
    ));
    assert!(
        stale.output.contains("not found in /home/p/proj/a.txt;"),
        "{}",
        stale.output
    );
}

#[test]
fn grep_mode_and_context_and_list_depth_are_taken_from_the_arguments() {
    let tree = Arc::new(MemoryBackend::new());
    tree.add_file(
        &VPath::parse("/src/a.rs"),
        b"use x;\nfn a() {}\nfn b() {}\n// end\n".to_vec(),
    )
    .unwrap();
    tree.add_file(&VPath::parse("/src/deep/c.rs"), b"fn c() {}\n".to_vec())
        .unwrap();
    tree.add_file(&VPath::parse("/notes.md"), b"none\n".to_vec())
        .unwrap();
    let view = View::new(tree.clone(), Access::new().grant("/", Level::Commit));
    let tools = FileTools::new();
    let run = |c: ToolCall| tools.run(&view, &Under, &c).expect("a file tool");
    let ok = |name: &str, args: Value| {
        let out = run(call(name, args.clone()));
        assert!(!out.is_error, "{name} {args}: {}", out.output);
        out.output
    };
    assert_eq!(
        ok("grep", json!({"pattern": "^fn", "mode": "files"})),
        "/home/p/proj/src/a.rs\n/home/p/proj/src/deep/c.rs\n"
    );
    assert_eq!(
        ok("grep", json!({"pattern": "^fn", "mode": "count"})),
        "/home/p/proj/src/a.rs:2\n/home/p/proj/src/deep/c.rs:1\n"
    );
    assert_eq!(
        ok(
            "grep",
            json!({"pattern": "^fn", "mode": "lines", "context": 1, "path": "/home/p/proj/src/a.rs"})
        ),
        "/home/p/proj/src/a.rs\n1- use x;\n2: fn a() {}\n3: fn b() {}\n4- // end\n"
    );
    assert_eq!(
        ok("list", json!({"path": "/home/p/proj", "depth": 3})),
        "src/\n  deep/\n    c.rs\n  a.rs\nnotes.md"
    );
    assert_eq!(ok("list", json!({})), "src/\nnotes.md");
    // A note on the listed directory names it as the entries' paths are named.
    tree.add_dir(&VPath::parse("/empty")).unwrap();
    assert_eq!(
        ok("list", json!({"path": "/home/p/proj/empty"})),
        "(/home/p/proj/empty is empty)"
    );
    for (name, args, text) in [
        (
            "grep",
            json!({"pattern": "fn", "mode": "paths"}),
            "grep: `mode` must be one of `lines`, `files`, `count`",
        ),
        (
            "grep",
            json!({"pattern": "fn", "context": -1}),
            "grep: `context` must be a whole number, 0 or more",
        ),
        (
            "list",
            json!({"depth": "2"}),
            "list: `depth` must be a whole number, 0 or more",
        ),
    ] {
        let out = run(call(name, args.clone()));
        assert!(out.is_error, "{name} {args}");
        assert_eq!(out.output, text, "{name} {args}");
    }
}

#[test]
fn a_chats_tree_tools_make_move_and_trash_by_the_views_rules() {
    let tree = MemoryBackend::new();
    tree.add_dir(&VPath::parse("/home")).unwrap();
    tree.add_dir(&VPath::parse("/shared")).unwrap();
    tree.add_file(&VPath::parse("/shared/a.txt"), b"a\n".to_vec())
        .unwrap();
    let view = View::new(
        Arc::new(tree),
        Access::new()
            .grant("/home", Level::Stage)
            .grant("/shared", Level::Ro),
    );
    let tools = FileTools::new();
    let run = |name: &str, args: Value| {
        tools
            .run(&view, &ViewPaths, &call(name, args))
            .expect("a tree tool")
    };

    let made = run("mkdir", json!({"path": "/home/notes"}));
    assert_eq!(
        (made.output.as_str(), made.is_error),
        ("Created /home/notes", false)
    );
    run(
        "write",
        json!({"path": "/home/notes/n.md", "content": "n\n"}),
    );
    let moved = run(
        "mv",
        json!({"from": "/home/notes/n.md", "to": "/home/n.md"}),
    );
    assert_eq!(moved.output, "Moved /home/notes/n.md to /home/n.md");

    // A directory with something in it goes to the trash only when asked for all of it.
    run(
        "write",
        json!({"path": "/home/notes/m.md", "content": "m\n"}),
    );
    let full = run("rm", json!({"path": "/home/notes"}));
    assert!(full.is_error);
    assert_eq!(
        full.output,
        "Not empty: /home/notes holds entries; pass recursive: true to delete it with everything in it."
    );
    let gone = run("rm", json!({"path": "/home/notes", "recursive": true}));
    assert!(!gone.is_error, "{}", gone.output);
    assert!(
        gone.output
            .starts_with("Moved /home/notes to the trash (restore id "),
        "{}",
        gone.output
    );

    // A read-only place refuses with the view's own text; a missing argument is named.
    let refused = run("rm", json!({"path": "/shared/a.txt"}));
    assert!(refused.is_error, "{}", refused.output);
    assert_eq!(
        run("mv", json!({"from": "/home/n.md"})).output,
        "mv: the argument `to` is missing"
    );
    for name in FileTools::TREE {
        assert!(
            !FileTools::NAMES.contains(name),
            "{name} is a chat's, not the agent's"
        );
    }
}
