//! `session_search`'s answer, the same for every store: the passages of saved sessions (what
//! the person and the model said) with the most of the query's words, best first, each with
//! its session's title, place, date and id. A store finds its sessions and their transcripts;
//! this ranks and draws them.

use harness_loop::transcript::Entry;

use crate::seams::Meta;

/// Characters of a passage answered.
pub const PASSAGE_CHARS: usize = 400;

/// What is answered when no passage matches.
pub const NONE_FOUND: &str = "No earlier session matches.";

/// The most passages answered: the `limit` parameter's `maximum` in the spec (20 if it says
/// none).
fn most() -> usize {
    harness_spec::Spec::embedded()
        .tool("session_search")
        .and_then(|t| t.parameters.pointer("/properties/limit/maximum"))
        .and_then(serde_json::Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(20)
}

/// Words of a text, case folded.
pub fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The answer to `query` over `sessions` (each with its transcript), at most `limit` passages
/// (1 to the spec's maximum); the session `skip` (the asking one) is left out.
pub fn search<I>(query: &str, sessions: I, limit: usize, skip: &str) -> String
where
    I: IntoIterator<Item = (Meta, Vec<Entry>)>,
{
    let q = words(query);
    let mut hits: Vec<(usize, String)> = Vec::new();
    for (meta, entries) in sessions {
        if meta.id == skip {
            continue;
        }
        for entry in &entries {
            let (who, said) = match entry {
                Entry::TurnStarted { text, .. } | Entry::User { text, .. } => ("person", text),
                Entry::Assistant { text, .. } => ("model", text),
                _ => continue,
            };
            if said.trim().is_empty() {
                continue;
            }
            let w = words(said);
            let score: usize = q.iter().map(|x| w.iter().filter(|y| *y == x).count()).sum();
            if score == 0 {
                continue;
            }
            let passage: String = said.chars().take(PASSAGE_CHARS).collect();
            let title = if meta.title.is_empty() {
                "(untitled)"
            } else {
                &meta.title
            };
            hits.push((
                score,
                format!(
                    "{title} — {} ({}, session {})\n  {who}: {}",
                    meta.cwd.display(),
                    crate::time::format_time(meta.updated),
                    meta.id,
                    passage.replace('\n', "\n  ")
                ),
            ));
        }
    }
    hits.sort_by_key(|h| std::cmp::Reverse(h.0));
    hits.truncate(limit.clamp(1, most()));
    if hits.is_empty() {
        return NONE_FOUND.into();
    }
    hits.into_iter()
        .map(|(_, h)| h)
        .collect::<Vec<_>>()
        .join("\n\n")
}
