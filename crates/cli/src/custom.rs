//! The person's prompt commands read from disk: the project's `.llembas/commands/` and
//! `.claude/commands/`, then the user's (`commands/` beside `config.toml`, and
//! `~/.claude/commands/`), then the MCP servers' prompts. What they are and how they expand is
//! `harness_agent::custom`'s.

use std::path::{Path, PathBuf};

use harness_agent::custom::{Commands, PromptCommand, Source, command_name};

/// Files read per directory at most, and their largest size.
const MAX_FILES: usize = 500;
const MAX_BYTES: u64 = 256 * 1024;

/// The commands of a session working in `root`, for a person whose config file is
/// `config_file`, with the prompts of `mcp`.
pub fn load(root: &Path, config_file: &Path, mcp: Option<&harness_mcp::Mcp>) -> Commands {
    let mut commands = Commands::default();
    for (dir, project) in markdown_dirs(root, config_file, "commands") {
        let source = if project {
            Source::Project
        } else {
            Source::User
        };
        for (name, text) in files(&dir) {
            commands.add(PromptCommand::from_file(&name, &text, source.clone()));
        }
    }
    if let Some(mcp) = mcp {
        for c in mcp.commands() {
            commands.add(c);
        }
    }
    commands
}

/// Where the person's Markdown files of `kind` (`commands`, `agents`) are, in the order they
/// are read, each with whether it is the project's: the project's `.llembas/KIND/` and
/// `.claude/KIND/` (a project set up for Claude Code works unchanged), then the user's `KIND/`
/// beside `config.toml` and `~/.claude/KIND/`.
pub fn markdown_dirs(root: &Path, config_file: &Path, kind: &str) -> Vec<(PathBuf, bool)> {
    let mut dirs = vec![
        (root.join(".llembas").join(kind), true),
        (root.join(".claude").join(kind), true),
    ];
    if let Some(config) = config_file.parent() {
        dirs.push((config.join(kind), false));
    }
    if let Some(home) = dirs::home_dir() {
        dirs.push((home.join(".claude").join(kind), false));
    }
    dirs
}

/// The command files under `dir` (three levels deep at most): name and text. What cannot be
/// read, is too large or is not UTF-8 is passed over.
fn files(dir: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), String::new(), 0)];
    while let Some((at, prefix, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for e in entries.flatten() {
            if found.len() >= MAX_FILES {
                return found;
            }
            let Ok(kind) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            let relative = format!("{prefix}{name}");
            if kind.is_dir() && depth < 3 && !name.starts_with('.') {
                todo.push((e.path(), format!("{relative}/"), depth + 1));
            } else if kind.is_file()
                && let Some(command) = command_name(&relative)
                && e.metadata().is_ok_and(|m| m.len() <= MAX_BYTES)
                && let Ok(text) = std::fs::read_to_string(e.path())
            {
                found.push((command, text));
            }
        }
    }
    found.sort();
    found
}
