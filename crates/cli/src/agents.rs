//! The subagents the person defined, read from disk: the project's `.llembas/agents/` and
//! `.claude/agents/`, then the user's (`agents/` beside `config.toml`, and
//! `~/.claude/agents/`). What a definition holds, which wins and how a subagent of one runs is
//! `harness_agent::agents`'s.

use std::path::Path;

use harness_agent::agents::{AgentSource, Agents};

/// Files read per directory at most, and their largest size.
const MAX_FILES: usize = 200;
const MAX_BYTES: u64 = 256 * 1024;

/// The agents of a session working in `root`, for a person whose config file is `config_file`
/// (what reading them said is in their notices).
pub fn load(root: &Path, config_file: &Path) -> Agents {
    let mut agents = Agents::default();
    for (dir, project) in crate::custom::markdown_dirs(root, config_file, "agents") {
        let source = if project {
            AgentSource::Project
        } else {
            AgentSource::User
        };
        for (path, text) in files(&dir) {
            match text {
                Ok(text) => agents.add_file(&path, &text, source.clone()),
                Err(why) => agents.add_notice(format!("{path}: {why}; the agent is left out")),
            }
        }
    }
    agents
}

/// The `.md` files directly in `dir`, by name: path and text, or why it could not be read.
fn files(dir: &Path) -> Vec<(String, Result<String, String>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, Result<String, String>)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|k| k.is_file()))
        .filter(|e| e.file_name().to_string_lossy().ends_with(".md"))
        .take(MAX_FILES)
        .map(|e| {
            let path = e.path();
            let text = match e.metadata() {
                Ok(m) if m.len() > MAX_BYTES => {
                    Err(format!("larger than {} KiB", MAX_BYTES / 1024))
                }
                _ => std::fs::read_to_string(&path).map_err(|e| format!("cannot be read ({e})")),
            };
            (path.display().to_string(), text)
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}
