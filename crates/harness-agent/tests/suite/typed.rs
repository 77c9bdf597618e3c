//! What a person types at a text front end: answers to permission questions and to the
//! `question` tool.

use harness_agent::typed::{answer_keys, parse_answer, question_reply};
use harness_core::protocol::{Answer, PermissionQuestion};
use pretty_assertions::assert_eq;

#[test]
fn answers_read_as_written() {
    assert_eq!(parse_answer("y", true), Some(Answer::Once));
    assert_eq!(parse_answer(" yes\n", true), Some(Answer::Once));
    assert_eq!(parse_answer("always", true), Some(Answer::Always));
    assert_eq!(parse_answer("A", true), Some(Answer::Always));
    assert_eq!(parse_answer("a", false), None, "always not offered");
    assert_eq!(
        parse_answer("n", true),
        Some(Answer::Deny { feedback: None })
    );
    assert_eq!(
        parse_answer("n: use cargo test instead", false),
        Some(Answer::Deny {
            feedback: Some("use cargo test instead".into())
        })
    );
    assert_eq!(
        parse_answer("no run the linter", false),
        Some(Answer::Deny {
            feedback: Some("run the linter".into())
        })
    );
    assert_eq!(
        parse_answer("", true),
        Some(Answer::Deny { feedback: None })
    );
}

#[test]
fn the_keys_offered_follow_the_pattern() {
    let mut q: PermissionQuestion = serde_json::from_value(serde_json::json!({
        "tool": "bash", "risk": "execute", "subject": "rm -rf x", "pattern": "rm *"
    }))
    .unwrap();
    assert_eq!(answer_keys(&q), "[y/a/n]");
    q.pattern = None;
    assert_eq!(answer_keys(&q), "[y/n]");
}

#[test]
fn a_number_picks_an_option() {
    let options = vec!["tabs".to_owned(), "spaces".to_owned(), "both".to_owned()];
    assert_eq!(question_reply("2", &options), "spaces");
    assert_eq!(question_reply(" 1, 3 ", &options), "tabs, both");
    assert_eq!(
        question_reply("4", &options),
        "4",
        "no such option: their words"
    );
    assert_eq!(question_reply("tabs, please", &options), "tabs, please");
    assert_eq!(question_reply("", &options), "");
}
