//! What a person types at a text front end (a terminal, a pipe) in answer to the session: a
//! permission question (`y`, `a`/`always`, `n: what to do instead`) and the `question` tool
//! (an option's number, or their own words). One reading for every text front end.

use harness_core::protocol::{Answer, PermissionQuestion};

/// Reads an answer line: yes, always (only where `always` is offered: else `None`, to ask
/// again), or no with an optional note after `:` or a blank.
pub fn parse_answer(line: &str, always: bool) -> Option<Answer> {
    let t = line.trim();
    let (word, rest) = match t.find([':', ' ']) {
        Some(i) => (&t[..i], t[i + 1..].trim()),
        None => (t, ""),
    };
    Some(match word.to_ascii_lowercase().as_str() {
        "y" | "yes" | "once" => Answer::Once,
        "a" | "always" if always => Answer::Always,
        "a" | "always" => return None,
        _ => Answer::Deny {
            feedback: (!rest.is_empty()).then(|| rest.to_owned()),
        },
    })
}

/// The short form of the answers a question offers: `[y/a/n]`, or `[y/n]` without "always".
pub fn answer_keys(question: &PermissionQuestion) -> &'static str {
    if question.pattern.is_some() {
        "[y/a/n]"
    } else {
        "[y/n]"
    }
}

/// Said when `a` is typed where "always" is not offered.
pub const NO_ALWAYS: &str = "\"always\" is not offered for this call: y or n";

/// The reply to a `question` from what the person typed: an option's number picks it (several
/// numbers, comma-separated, pick several), anything else is their own words.
pub fn question_reply(line: &str, options: &[String]) -> String {
    let t = line.trim();
    let picked: Option<Vec<&String>> = t
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|i| options.get(i))
        })
        .collect();
    match picked {
        Some(p) if !p.is_empty() && !t.is_empty() => {
            p.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        }
        _ => t.to_owned(),
    }
}
