//! The library tools over files under a directory.

use std::sync::Arc;

use harness_agent::library::{DirLibrary, Library};
use serde_json::json;

#[test]
fn notes_round_trip_and_scope() {
    let d = tempfile::tempdir().unwrap();
    let lib = Library::new(Arc::new(DirLibrary::new(&d.path().join("library"))), "api");
    let (t, e) = lib.run(
        "note_manage",
        &json!({"action": "create", "title": "Retry policy", "content": "Retry 503 five times."}),
        None,
    );
    assert!(!e, "{t}");
    let id = t
        .split_whitespace()
        .nth(2)
        .unwrap()
        .trim_end_matches(':')
        .to_owned();
    let (found, _) = lib.run("notes_search", &json!({"query": "retry"}), None);
    assert!(
        found.starts_with(&format!("{id} — Retry policy")),
        "{found}"
    );
    // A chat's scope sees only its own notes.
    let scope = json!({"chat": "c_1"});
    let (none, _) = lib.run("notes_search", &json!({"query": "retry"}), Some(&scope));
    assert_eq!(none, "No notes match.");
    let (t, _) = lib.run(
        "note_manage",
        &json!({"action": "create", "title": "Chat note", "content": "retry in chat"}),
        Some(&scope),
    );
    assert!(t.starts_with("Created note"), "{t}");
    let (one, _) = lib.run("notes_search", &json!({"query": "retry"}), Some(&scope));
    assert!(
        one.contains("Chat note") && !one.contains("Retry policy"),
        "{one}"
    );
    let (v, e) = lib.run("note_view", &json!({"id": id}), Some(&scope));
    assert!(e, "outside the scope a note reads as not found: {v}");
    let (_, e) = lib.run(
        "note_manage",
        &json!({"action": "append", "id": id, "content": "Then fail."}),
        None,
    );
    assert!(!e);
    let (v, _) = lib.run("note_view", &json!({"id": id}), None);
    assert!(v.ends_with("Retry 503 five times.\nThen fail."), "{v}");
}

#[test]
fn knowledge_search_and_get() {
    let d = tempfile::tempdir().unwrap();
    let k = d.path().join("library/knowledge");
    std::fs::create_dir_all(&k).unwrap();
    let text: String = (1..=40)
        .map(|i| {
            if i == 25 {
                "The backoff doubles each time.\n".to_owned()
            } else {
                format!("line {i}\n")
            }
        })
        .collect();
    std::fs::write(k.join("manual.md"), &text).unwrap();
    let lib = Library::new(Arc::new(DirLibrary::new(&d.path().join("library"))), "api");
    assert_eq!(lib.summary(), "0 notes, 1 document");
    let (hits, _) = lib.run(
        "knowledge_search",
        &json!({"query": "how does the backoff grow"}),
        None,
    );
    assert!(hits.starts_with("manual — manual (lines"), "{hits}");
    let (w, e) = lib.run(
        "knowledge_get",
        &json!({"id": "manual", "offset": 25, "limit": 1}),
        None,
    );
    assert!(!e, "{w}");
    assert!(w.contains("25: The backoff doubles each time."), "{w}");
}
