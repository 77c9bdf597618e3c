//! The CLI's facts that fill tool descriptions, and (growing) the execution of tool calls on the
//! local disk.

use std::collections::BTreeMap;

/// Run-time values of the tool variables the spec leaves to the project's settings.
pub fn runtime_values() -> BTreeMap<String, String> {
    use harness_fs::memory::{DEFAULT_LIMIT, Target, USER_LIMIT, limit_words};
    let limit = limit_words(&[(Target::Memory, DEFAULT_LIMIT), (Target::User, USER_LIMIT)]);
    BTreeMap::from([("memory_limit".to_owned(), limit)])
}

/// The memory file's place and its entries, for the prompt.
pub fn memory_entries(path: &std::path::Path) -> String {
    use harness_fs::memory::{Memory, Target};
    let Ok(data) = std::fs::read(path) else {
        return String::new();
    };
    let Ok(m) = Memory::from_json(&path.display().to_string(), &data) else {
        return String::new();
    };
    let mut all = m.entries(Target::Memory);
    all.extend(m.entries(Target::User));
    harness_core::prompt::memory_entries(all)
}

/// Runs a `memory` call on the file at `path` (created on the first change), written whole
/// through a temporary file so a crash leaves the old state or the new one.
pub fn memory(path: &std::path::Path, args: &serde_json::Value) -> (String, bool) {
    use harness_fs::memory::Memory;
    let name = path.display().to_string();
    let mut m = match std::fs::read(path) {
        Ok(data) => match Memory::from_json(&name, &data) {
            Ok(m) => m,
            Err(e) => return (e.to_string(), true),
        },
        Err(_) => Memory::new(),
    };
    let text = match m.apply(args) {
        Ok(t) => t,
        Err(e) => return (e.to_string(), true),
    };
    let tmp = path.with_extension("json.tmp");
    let written = path
        .parent()
        .map(std::fs::create_dir_all)
        .transpose()
        .and_then(|_| std::fs::write(&tmp, m.to_json()))
        .and_then(|()| std::fs::rename(&tmp, path));
    match written {
        Ok(()) => (text, false),
        Err(e) => (format!("cannot save memory to {name}: {e}"), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_keeps_entries_in_its_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("memory.json");
        let (t, e) = memory(
            &p,
            &serde_json::json!({"action": "add", "text": "Prefers tabs."}),
        );
        assert!(!e, "{t}");
        assert!(memory_entries(&p).contains("Prefers tabs."));
        assert_eq!(
            runtime_values()["memory_limit"],
            "2,200 characters for `memory`, 1,375 for `user`"
        );
    }
}
