//! The plan walked as its type: the open tasks the loop's nudges name, and a flat list of
//! entries (an ACP client's) as a plan.

use harness_core::plan::{Plan, TaskStatus};
use serde_json::json;

#[test]
fn the_open_tasks_are_the_todo_and_doing_ones_in_order() {
    let mut plan = Plan::write(&json!({
        "title": "Ship",
        "phases": [
            {"title": "Build", "tasks": [
                {"title": "parser", "status": "done"},
                {"title": "lexer", "status": "doing"},
            ]},
            {"title": "Check", "tasks": [
                {"title": "tests"},
                {"title": "docs", "status": "dropped"},
            ]},
        ],
    }))
    .unwrap();
    assert_eq!(plan.open_tasks(), ["lexer", "tests"]);
    plan.update(&json!({"tasks": [{"id": "t3", "status": "done"}]}))
        .unwrap();
    assert_eq!(plan.open_tasks(), ["lexer"]);
}

#[test]
fn entries_become_one_phase_of_numbered_tasks() {
    let plan = Plan::of_entries([
        ("read".to_owned(), TaskStatus::Done),
        ("write".to_owned(), TaskStatus::Doing),
    ]);
    assert_eq!(
        serde_json::to_value(&plan).unwrap(),
        json!({"title": "Plan", "summary": "", "findings": [], "objectives": [],
        "submitted": false, "phases": [{"id": "p1", "title": "Work", "tasks": [
            {"id": "t1", "title": "read", "status": "done"},
            {"id": "t2", "title": "write", "status": "doing"},
        ]}]})
    );
}
