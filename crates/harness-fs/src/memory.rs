//! Memory records (`spec/filesystem.md`, *Memory*): a list of entries the model keeps across
//! sessions, changed by one change or a batch applied together, against a size limit.

use crate::error::{Error, Result};

/// The separator between entries when they are stored and counted.
pub const SEPARATOR: &str = "\n§\n";
/// The default limit, in characters of all entries joined by the separator.
pub const DEFAULT_LIMIT: usize = 2200;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum MemoryChange {
    /// Adds an entry (adding one already there changes nothing).
    Add {
        /// The entry.
        content: String,
    },
    /// Replaces the one entry containing `old_text` with `content`.
    Replace {
        /// Text that identifies the entry.
        old_text: String,
        /// The new entry.
        content: String,
    },
    /// Removes the one entry containing `old_text`.
    Remove {
        /// Text that identifies the entry.
        old_text: String,
    },
}

/// How many characters the entries take, counted as stored.
pub fn usage(entries: &[String]) -> usize {
    entries.join(SEPARATOR).chars().count()
}

fn find(entries: &[String], old_text: &str) -> Result<usize> {
    let old = old_text.trim();
    if old.is_empty() {
        return Err(Error::Memory(
            "Memory: old_text is empty; quote part of the entry to change.".to_string(),
        ));
    }
    let hits: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.contains(old))
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [] => Err(Error::Memory(format!("Memory: no entry contains {old:?}."))),
        [one] => Ok(*one),
        many if many.iter().all(|&i| entries[i] == entries[many[0]]) => Ok(many[0]),
        many => Err(Error::Memory(format!(
            "Memory: {} entries contain {old:?}; quote more of the one to change.",
            many.len()
        ))),
    }
}

fn content_of(content: &str) -> Result<String> {
    let c = content.trim();
    if c.is_empty() {
        return Err(Error::Memory("Memory: content is empty.".to_string()));
    }
    if c.contains(SEPARATOR.trim()) && c.lines().any(|l| l.trim() == "§") {
        return Err(Error::Memory(
            "Memory: content may not hold a line that is only §.".to_string(),
        ));
    }
    Ok(c.to_string())
}

/// Applies `changes` in order to `entries`, all or none: the first change refused refuses the
/// batch, and the result must fit `limit` characters (the limit applies to the result, so a
/// batch may remove to make room for what it adds).
pub fn apply(entries: &[String], changes: &[MemoryChange], limit: usize) -> Result<Vec<String>> {
    if changes.is_empty() {
        return Err(Error::Memory("Memory: no change given.".to_string()));
    }
    let mut out = entries.to_vec();
    for (i, change) in changes.iter().enumerate() {
        let step = (|| -> Result<()> {
            match change {
                MemoryChange::Add { content } => {
                    let c = content_of(content)?;
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
                MemoryChange::Replace { old_text, content } => {
                    let c = content_of(content)?;
                    let at = find(&out, old_text)?;
                    out[at] = c;
                }
                MemoryChange::Remove { old_text } => {
                    let at = find(&out, old_text)?;
                    out.remove(at);
                }
            }
            Ok(())
        })();
        if let Err(Error::Memory(msg)) = step {
            return Err(Error::Memory(if changes.len() > 1 {
                format!(
                    "{msg} (change {} of {}; nothing was changed)",
                    i + 1,
                    changes.len()
                )
            } else {
                msg
            }));
        }
        step?;
    }
    let used = usage(&out);
    if used > limit {
        return Err(Error::Memory(format!(
            "Memory full: the result would take {used} of {limit} characters; replace or remove entries in the same call to make room."
        )));
    }
    Ok(out)
}
