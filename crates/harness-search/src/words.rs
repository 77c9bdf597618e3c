//! Words for the word scoring: lower-cased runs of letters and digits, identifiers split at
//! their case changes and underscores too (`read_to_string`, `ReadToString` give `read`, `to`,
//! `string`), a plural or `-ing` ending taken off, a short list of the commonest English words
//! left out.

const STOP: &[&str] = &[
    "the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "her", "was", "one",
    "our", "out", "has", "have", "this", "that", "with", "from", "they", "will", "what", "when",
    "which", "into", "its", "it", "is", "in", "of", "to", "a", "an", "on", "or", "by", "as", "at",
    "be", "do", "does", "how", "if", "so", "than", "then", "there", "these", "those", "use",
    "used", "using", "i", "we", "my", "me",
];

/// A word's stem: a plural `-ies`/`-s`, or an `-ing`, taken off.
fn stem(w: &str) -> String {
    if w.len() > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..w.len() - 3]);
    }
    if w.len() > 5 && w.ends_with("ing") {
        return w[..w.len() - 3].to_string();
    }
    if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") {
        return w[..w.len() - 1].to_string();
    }
    w.to_string()
}

fn push(out: &mut Vec<String>, w: &str) {
    let lower = w.to_lowercase();
    if lower.is_empty() || STOP.contains(&lower.as_str()) {
        return;
    }
    out.push(stem(&lower));
}

/// The words of `text`, in order.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        if run.is_empty() {
            continue;
        }
        // Split an identifier at lower→upper changes (camelCase) and keep the parts.
        let mut start = 0;
        let mut prev_lower = false;
        let mut parts = 0;
        for (i, c) in run.char_indices() {
            if c.is_uppercase() && prev_lower {
                push(&mut out, &run[start..i]);
                parts += 1;
                start = i;
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
        }
        push(&mut out, &run[start..]);
        if parts > 0 {
            push(&mut out, run);
        }
    }
    out
}
