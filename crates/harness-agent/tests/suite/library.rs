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
    assert!(none.starts_with("No notes match."), "{none}");
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
    assert!(w.contains("25\tThe backoff doubles each time."), "{w}");
}

/// A library of two documents and two notes, none sharing a word with the queries below.
fn meaning_library(dir: &std::path::Path, embedder: Option<std::path::PathBuf>) -> Library {
    let k = dir.join("library/knowledge");
    std::fs::create_dir_all(&k).unwrap();
    std::fs::write(
        k.join("pets.md"),
        "# Our cat\n\nThe cat sleeps on the sofa all afternoon and purrs when stroked.\n",
    )
    .unwrap();
    std::fs::write(
        k.join("money.md"),
        "# Accounts\n\nQuarterly revenue rose while hosting costs stayed flat.\n",
    )
    .unwrap();
    let lib = Library::new(Arc::new(DirLibrary::new(&dir.join("library"))), "api")
        .with_search(Some(dir.join("data/search.json")), embedder);
    for (title, content) in [
        ("Dinner", "Pasta with tomato sauce and basil on Friday."),
        ("Deploys", "Ship the release after the tests pass on CI."),
    ] {
        let (t, e) = lib.run(
            "note_manage",
            &json!({"action": "create", "title": title, "content": content}),
            None,
        );
        assert!(!e, "{t}");
    }
    lib
}

#[test]
fn without_the_embedder_library_search_ranks_by_words_alone_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let lib = meaning_library(d.path(), Some(d.path().join("no-model-here")));
    let (hits, e) = lib.run("knowledge_search", &json!({"query": "revenue"}), None);
    assert!(!e, "{hits}");
    assert!(hits.starts_with("money — money (lines 1-3)"), "{hits}");
    assert!(hits.contains("ranked by words alone"), "{hits}");
    let (none, _) = lib.run("knowledge_search", &json!({"query": "kitten"}), None);
    assert!(none.starts_with("No passages match."), "{none}");
    assert!(none.contains("nothing was found by meaning"), "{none}");
    let (notes, _) = lib.run("notes_search", &json!({"query": "basil"}), None);
    assert!(
        notes.contains("— Dinner\n  Pasta with tomato sauce"),
        "{notes}"
    );
    assert!(notes.contains("ranked by words alone"), "{notes}");
    // The index is kept in the file given.
    assert!(d.path().join("data/search.json").is_file());
}

#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn library_search_finds_by_meaning_with_the_embedder() {
    let dir = std::path::PathBuf::from(
        std::env::var("LLEMBAS_EMBEDDER_DIR")
            .expect("LLEMBAS_EMBEDDER_DIR: run by cargo xtask test"),
    );
    let d = tempfile::tempdir().unwrap();
    let lib = meaning_library(d.path(), Some(dir.clone()));
    // No word in common with the document it should find.
    let (hits, e) = lib.run(
        "knowledge_search",
        &json!({"query": "a kitten napping", "limit": 1}),
        None,
    );
    assert!(!e, "{hits}");
    assert!(hits.starts_with("pets — pets (lines"), "{hits}");
    assert!(!hits.contains("words alone"), "{hits}");
    let (notes, _) = lib.run(
        "notes_search",
        &json!({"query": "what are we eating", "limit": 1}),
        None,
    );
    assert!(notes.contains("— Dinner"), "{notes}");
    // A second library over the same index file embeds nothing again and answers the same.
    let again = meaning_library(d.path(), Some(dir));
    let (same, _) = again.run(
        "knowledge_search",
        &json!({"query": "a kitten napping", "limit": 1}),
        None,
    );
    assert_eq!(same, hits);
}
