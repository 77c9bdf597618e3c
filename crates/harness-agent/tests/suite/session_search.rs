//! `session_search`'s ranking and answer over a store's sessions.

use harness_agent::Meta;
use harness_agent::session_search::{NONE_FOUND, PASSAGE_CHARS, search};
use harness_core::protocol::Origin;
use harness_loop::transcript::Entry;
use pretty_assertions::assert_eq;

fn meta(id: &str, title: &str) -> Meta {
    Meta {
        id: id.into(),
        cwd: "/p".into(),
        created: 0,
        updated: 1_795_900_000,
        title: title.into(),
        model: "m".into(),
        mode: None,
    }
}

fn said(person: &str, model: &str) -> Vec<Entry> {
    vec![
        Entry::TurnStarted {
            turn: 1,
            text: person.into(),
            origin: Origin::Person,
            images: Vec::new(),
        },
        Entry::Assistant {
            text: model.into(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
        },
    ]
}

#[test]
fn the_best_passages_come_first_with_their_session() {
    let sessions = vec![
        (
            meta("a", "ship it"),
            said("how do we deploy", "Deploy with make deploy; deploy twice."),
        ),
        (meta("b", ""), said("deploy?", "no idea")),
        (
            meta("me", "this one"),
            said("deploy deploy deploy deploy", ""),
        ),
    ];
    let answer = search("Deploy", sessions.clone(), 2, "me");
    assert_eq!(
        answer,
        "ship it — /p (2026-11-28 21:06, session a)\n  model: Deploy with make deploy; deploy twice.\n\n\
         ship it — /p (2026-11-28 21:06, session a)\n  person: how do we deploy"
    );
    // The asking session is left out; an untitled one is said so.
    let all = search("deploy", sessions.clone(), 20, "me");
    assert_eq!(all.matches("session ").count(), 3, "{all}");
    assert!(all.contains("(untitled) — /p"), "{all}");
    assert!(!all.contains("session me"), "{all}");
    assert_eq!(search("kubernetes", sessions, 5, "me"), NONE_FOUND);
}

#[test]
fn limits_and_passages_are_bounded() {
    let long = format!("deploy {}", "x".repeat(1000));
    let sessions: Vec<_> = (0..30)
        .map(|i| (meta(&format!("s{i}"), "t"), said(&long, "")))
        .collect();
    let answer = search("deploy", sessions.clone(), 500, "");
    // At most the spec's maximum of `limit`.
    assert_eq!(answer.split("\n\n").count(), 20);
    let first = answer.split("\n\n").next().unwrap();
    let passage = first.split_once("person: ").unwrap().1;
    assert_eq!(passage.chars().count(), PASSAGE_CHARS);
    // A limit of 0 still answers one.
    assert_eq!(search("deploy", sessions, 0, "").split("\n\n").count(), 1);
}
