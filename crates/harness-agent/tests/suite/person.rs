//! What the model is told of what the person did themselves (`harness_agent::person`).

use harness_agent::person::{mention, mentioned_paths, shell};

#[test]
fn mentions_are_the_at_words_once_each_without_trailing_punctuation() {
    assert_eq!(
        mentioned_paths("look at @src/a.rs, then @b.md. and @src/a.rs again @c.txt) @ x@y"),
        ["src/a.rs", "b.md", "c.txt"]
    );
    assert!(mentioned_paths("no mention here").is_empty());
}

#[test]
fn what_the_person_did_is_told_with_its_content_capped_as_a_result_is() {
    assert_eq!(
        mention("a.txt", "one\ntwo\n"),
        "[the person attached the file a.txt]\none\ntwo"
    );
    assert_eq!(
        shell("ls", 0, "a\nb\n"),
        "[the person ran `ls` in the shell themselves: exit code 0]\na\nb"
    );
    // Past 400 lines: the first 250 and the last 100, the rest counted.
    let long: String = (1..=1000).map(|n| format!("line {n}\n")).collect();
    let told = shell("seq", 0, &long);
    assert!(
        told.contains("line 250\n[650 lines elided]\nline 901\n"),
        "{told}"
    );
    assert!(!told.contains("line 251\n"));
    assert!(told.ends_with("line 1000"));
}
