//! The "always" pattern: the command's known prefix from `arity.json` plus ` *`.

use crate::data::Data;

/// The pattern an "always" answer saves for these plain words, or `None` when none is offered.
pub(crate) fn pattern(data: &Data, words: &[&str]) -> Option<String> {
    let first = *words.first()?;
    if first.is_empty() || first.starts_with('-') {
        return None;
    }
    // Longest listed prefix of the leading non-flag words.
    let lead: Vec<&str> = words
        .iter()
        .take_while(|w| !w.starts_with('-'))
        .copied()
        .collect();
    let mut arity = data.default_arity;
    for len in (1..=lead.len().min(4)).rev() {
        if let Some(a) = data.arity.get(&lead[..len].join(" ")) {
            arity = *a;
            break;
        }
    }
    let base = data.arity.get(first).copied().unwrap_or(data.default_arity);
    let take = arity.min(lead.len());
    if take < base.min(arity) && lead.len() < words.len() {
        // a flag came before the command's own words were complete
        return None;
    }
    let prefix = lead[..take].join(" ");
    if data.never.contains(&prefix) {
        return None;
    }
    Some(format!("{prefix} *"))
}
