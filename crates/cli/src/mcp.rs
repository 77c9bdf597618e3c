//! MCP servers as the person configures them: `[mcp.NAME]` blocks of the config file (`command`,
//! `args`, `env`, or `url` with `bearer_token_env`; `enabled`, `defer`), and the project's
//! `.mcp.json` in the shape Claude Code and other agents read (`{"mcpServers": {NAME: {...}}}`),
//! used only where the config file says `project_mcp = true` (a repository's file would otherwise
//! start programs the person never chose). `llembas mcp list|add|remove` edits the config file's
//! blocks as text, keeping everything else in it as written.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use harness_mcp::{ServerConfig, Transport};
use serde::Deserialize;
use serde_json::Value;

/// The project file read (in the session's directory).
pub const PROJECT_FILE: &str = ".mcp.json";

/// `[mcp.NAME]` in the config file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct McpEntry {
    /// The program of a stdio server.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set for it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The URL of a streamable HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// The variable holding its bearer token.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// `false` keeps it configured but not started.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// `false` sends its tools whole on every request instead of behind `load_tools`.
    #[serde(default)]
    pub defer: Option<bool>,
}

impl McpEntry {
    /// The server it configures, or why it is not one.
    pub fn server(&self, name: &str, from: &str) -> Result<ServerConfig> {
        let transport = Transport::configured(
            name,
            self.command.clone(),
            self.args.clone(),
            self.env.clone(),
            self.url.clone(),
            self.bearer_token_env.clone(),
        )
        .map_err(|e| anyhow::anyhow!("{from}: {e}"))?;
        let mut s = ServerConfig::new(name, transport);
        s.defer = self.defer.unwrap_or(true);
        Ok(s)
    }
}

/// Where a configured server comes from, as `llembas mcp list` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The server.
    pub server: ServerConfig,
    /// `config` or `project`.
    pub from: &'static str,
    /// Whether a session starts it.
    pub enabled: bool,
}

/// The servers of the config file and the project file, the config file's winning a name both
/// give.
pub fn configured(
    entries: &BTreeMap<String, McpEntry>,
    config_file: &Path,
    project_mcp: bool,
    cwd: &Path,
) -> Result<Vec<Listed>> {
    let mut out = Vec::new();
    for (name, e) in entries {
        out.push(Listed {
            server: e.server(name, &config_file.display().to_string())?,
            from: "config",
            enabled: e.enabled.unwrap_or(true),
        });
    }
    let project = cwd.join(PROJECT_FILE);
    for (name, e) in project_servers(&project)? {
        if entries.contains_key(&name) {
            continue;
        }
        out.push(Listed {
            server: e.server(&name, &project.display().to_string())?,
            from: "project",
            enabled: project_mcp && e.enabled.unwrap_or(true),
        });
    }
    Ok(out)
}

/// The servers a session starts.
pub fn enabled(listed: Vec<Listed>) -> Vec<ServerConfig> {
    listed
        .into_iter()
        .filter(|l| l.enabled)
        .map(|l| l.server)
        .collect()
}

/// `.mcp.json`'s servers: `{"mcpServers": {NAME: {"command", "args", "env"} | {"type": "http",
/// "url"}}}`; a missing file has none.
pub fn project_servers(path: &Path) -> Result<Vec<(String, McpEntry)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let v: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let Some(servers) = v.get("mcpServers").and_then(Value::as_object) else {
        bail!("{} has no \"mcpServers\" object", path.display());
    };
    let mut out = Vec::new();
    for (name, s) in servers {
        let str_of = |k: &str| s.get(k).and_then(Value::as_str).map(str::to_owned);
        let entry = McpEntry {
            command: str_of("command"),
            args: s
                .get("args")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            env: s
                .get("env")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                        .collect()
                })
                .unwrap_or_default(),
            url: str_of("url"),
            bearer_token_env: None,
            enabled: s.get("disabled").and_then(Value::as_bool).map(|d| !d),
            defer: None,
        };
        out.push((name.clone(), entry));
    }
    Ok(out)
}

/// `llembas mcp list`'s lines.
pub fn list_lines(listed: &[Listed]) -> Vec<String> {
    if listed.is_empty() {
        return vec![
            "no MCP servers: add one with `llembas mcp add NAME -- COMMAND [ARGS...]` or `llembas mcp add NAME --url URL`".into(),
        ];
    }
    listed
        .iter()
        .map(|l| {
            let what = match &l.server.transport {
                Transport::Stdio { command, args, .. } => std::iter::once(command.as_str())
                    .chain(args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                Transport::Http {
                    url,
                    bearer_token_env,
                    ..
                } => match bearer_token_env {
                    Some(v) => format!("{url} (bearer token from ${v})"),
                    None => url.clone(),
                },
            };
            let state = match (l.enabled, l.from) {
                (true, _) => "",
                (false, "project") => " [not started: set project_mcp = true in the config file]",
                (false, _) => " [disabled]",
            };
            format!("{} ({}): {what}{state}", l.server.name, l.from)
        })
        .collect()
}

/// The config file's text with a `[mcp.NAME]` block for `entry` added at its end; an error if
/// the name is taken.
pub fn add_block(text: &str, name: &str, entry: &McpEntry) -> Result<String> {
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        || name.is_empty()
    {
        bail!("the MCP server's name {name:?} may hold only letters, digits, - and _");
    }
    if block_range(text, name).is_some() {
        bail!("an MCP server named {name:?} is already configured: remove it first");
    }
    let q = |s: &str| toml_string(s);
    let mut block = format!("[mcp.{name}]\n");
    if let Some(c) = &entry.command {
        block.push_str(&format!("command = {}\n", q(c)));
        let args: Vec<String> = entry.args.iter().map(|a| q(a)).collect();
        block.push_str(&format!("args = [{}]\n", args.join(", ")));
    }
    if let Some(u) = &entry.url {
        block.push_str(&format!("url = {}\n", q(u)));
    }
    if let Some(v) = &entry.bearer_token_env {
        block.push_str(&format!("bearer_token_env = {}\n", q(v)));
    }
    if !entry.env.is_empty() {
        let env: Vec<String> = entry
            .env
            .iter()
            .map(|(k, v)| format!("{} = {}", q(k), q(v)))
            .collect();
        block.push_str(&format!("env = {{ {} }}\n", env.join(", ")));
    }
    let mut out = text.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&block);
    Ok(out)
}

/// The config file's text without the `[mcp.NAME]` block (and its sub-tables); an error if there
/// is none.
pub fn remove_block(text: &str, name: &str) -> Result<String> {
    let Some((start, end)) = block_range(text, name) else {
        bail!("no MCP server named {name:?} in the config file");
    };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out: String = lines[..start].concat();
    out.push_str(&lines[end..].concat());
    while out.ends_with("\n\n") {
        out.pop();
    }
    Ok(out)
}

/// The lines of `[mcp.NAME]` (its header up to the next table that is not its own).
fn block_range(text: &str, name: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let header = |l: &str| {
        let t = l.trim();
        (t.starts_with('[') && !t.starts_with("[["))
            .then(|| t.trim_matches(['[', ']']).trim().to_owned())
    };
    let own = |h: &str| {
        let h = h.replace(['"', ' '], "");
        h == format!("mcp.{name}") || h.starts_with(&format!("mcp.{name}."))
    };
    let start = lines
        .iter()
        .position(|l| header(l).is_some_and(|h| own(&h)))?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| header(l).is_some_and(|h| !own(&h)))
        .map_or(lines.len(), |i| start + 1 + i);
    Some((start, end))
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
