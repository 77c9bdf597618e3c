//! Prompt commands a person adds: Markdown files in the project's `.llembas/commands/` and the
//! user's config directory (and `.claude/commands/` in both places, so a project set up for
//! Claude Code works unchanged), and the prompts of MCP servers (`/mcp__server__prompt`).
//!
//! `/name ARGS` becomes the file's text with `$ARGUMENTS` (all of ARGS) and `$1` … `$9` (its
//! words) filled in; a file that names neither gets ARGS after it. Spans ``!`command` `` are run
//! by the front end under the session's permission rules and replaced by the command's output;
//! `@path` mentions are then attached as in any prompt. A file's front matter may give
//! `description` and `argument-hint`; without a description its first line stands for one.
//! A file in a subdirectory is named with `:` (`frontend/review.md` is `/frontend:review`).
//! The first command added under a name wins (a front end adds the project's before the
//! user's), and the built-in commands win over all of them.

use std::collections::BTreeMap;

/// Where a prompt command comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The project's commands directory.
    Project,
    /// The person's own, for every project.
    User,
    /// A prompt of an MCP server: `prompt` is its own name there, `arguments` its arguments in
    /// order (the words of ARGS fill them one by one; the last takes the rest).
    Mcp {
        /// The server's name.
        server: String,
        /// The prompt's name on the server.
        prompt: String,
        /// Its arguments: name, and whether it must be given.
        arguments: Vec<(String, bool)>,
    },
}

/// One prompt command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptCommand {
    /// What `/` is followed by.
    pub name: String,
    /// One line for `/help` and an editor's command list.
    pub description: String,
    /// What ARGS should be, when the file says (`argument-hint`).
    pub argument_hint: Option<String>,
    /// The text (without front matter); empty for an MCP prompt (its server gives it).
    pub body: String,
    /// Where it comes from.
    pub source: Source,
}

/// Longest description shown.
const DESCRIPTION_CHARS: usize = 100;

/// The name of the command file at `relative` (inside a commands directory, `/`-separated):
/// without `.md`, subdirectories joined by `:`. `None` for what is not a command file or names
/// what cannot be typed (a space, a control character, an empty part).
pub fn command_name(relative: &str) -> Option<String> {
    let stem = relative.strip_suffix(".md")?;
    let parts: Vec<&str> = stem.split('/').collect();
    let typable = |p: &&str| {
        !p.is_empty()
            && !p.starts_with('.')
            && p.chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    parts.iter().all(typable).then(|| parts.join(":"))
}

impl PromptCommand {
    /// The command of a file named `name` with text `text`.
    pub fn from_file(name: &str, text: &str, source: Source) -> PromptCommand {
        let (fields, body) = front_matter(text);
        let description = fields
            .get("description")
            .cloned()
            .filter(|d| !d.is_empty())
            .or_else(|| {
                body.lines()
                    .map(|l| l.trim().trim_start_matches('#').trim())
                    .find(|l| !l.is_empty())
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        PromptCommand {
            name: name.to_owned(),
            description: cut(&description),
            argument_hint: fields
                .get("argument-hint")
                .cloned()
                .filter(|h| !h.is_empty()),
            body: body.to_owned(),
            source,
        }
    }

    /// The command's text with `args` filled in (see the module's doc).
    pub fn expand(&self, args: &str) -> String {
        let args = args.trim();
        let words: Vec<&str> = args.split_whitespace().collect();
        let mut out = String::with_capacity(self.body.len() + args.len());
        let mut used = false;
        let mut rest = self.body.as_str();
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            if let Some(tail) = after.strip_prefix("ARGUMENTS") {
                out.push_str(args);
                used = true;
                rest = tail;
            } else if let Some(d) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
                let n = d as usize - '1' as usize;
                out.push_str(words.get(n).copied().unwrap_or(""));
                used = true;
                rest = &after[1..];
            } else {
                out.push('$');
                rest = after;
            }
        }
        out.push_str(rest);
        let mut out = out.trim().to_owned();
        if !used && !args.is_empty() {
            out.push_str(&format!("\n\nARGUMENTS: {args}"));
        }
        out
    }

    /// For an MCP prompt: its arguments from `args`, in order, the last one taking the rest;
    /// or the text saying which required one is missing.
    pub fn mcp_arguments(&self, args: &str) -> Result<BTreeMap<String, String>, String> {
        let Source::Mcp { arguments, .. } = &self.source else {
            return Ok(BTreeMap::new());
        };
        let mut filled = BTreeMap::new();
        let mut rest = args.trim();
        for (i, (name, required)) in arguments.iter().enumerate() {
            let value = if i + 1 == arguments.len() {
                std::mem::take(&mut rest)
            } else {
                let (word, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                rest = tail.trim_start();
                word
            };
            if value.is_empty() {
                if *required {
                    let names: Vec<&str> = arguments.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(format!(
                        "/{} needs {name}: give its arguments in order ({})",
                        self.name,
                        names.join(" ")
                    ));
                }
                continue;
            }
            filled.insert(name.clone(), value.to_owned());
        }
        Ok(filled)
    }
}

/// The commands of a session, by name.
#[derive(Debug, Clone, Default)]
pub struct Commands {
    by_name: BTreeMap<String, PromptCommand>,
}

impl Commands {
    /// Adds `command` unless a built-in command or an earlier one has its name.
    pub fn add(&mut self, command: PromptCommand) {
        if crate::slash::COMMANDS.contains(&command.name.as_str()) {
            return;
        }
        self.by_name.entry(command.name.clone()).or_insert(command);
    }

    /// The command named `name`.
    pub fn get(&self, name: &str) -> Option<&PromptCommand> {
        self.by_name.get(name)
    }

    /// Every command, by name.
    pub fn iter(&self) -> impl Iterator<Item = &PromptCommand> {
        self.by_name.values()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Their lines for `/help`, after the built-in ones.
    pub fn help(&self) -> String {
        let mut out = String::new();
        for c in self.iter() {
            let head = match &c.argument_hint {
                Some(h) => format!("/{} {h}", c.name),
                None => format!("/{}", c.name),
            };
            let from = match &c.source {
                Source::Project => "project",
                Source::User => "user",
                Source::Mcp { server, .. } => server.as_str(),
            };
            out.push_str(&format!("{head:<31} {} ({from})\n", c.description));
        }
        out
    }
}

impl crate::slash::CommandNames for Commands {
    fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

/// The commands of ``!`command` `` spans in `text`, in order.
pub fn inline_commands(text: &str) -> Vec<String> {
    spans(text).into_iter().map(|(_, c)| c.to_owned()).collect()
}

/// `text` with each ``!`command` `` span replaced by the matching entry of `outputs`.
pub fn replace_inline(text: &str, outputs: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for ((range, _), output) in spans(text).into_iter().zip(outputs) {
        out.push_str(&text[at..range.start]);
        out.push_str(output.trim_end());
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

fn spans(text: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("!`") {
        let start = from + i;
        let inner = start + 2;
        let Some(len) = text[inner..].find('`') else {
            break;
        };
        let command = text[inner..inner + len].trim();
        if !command.is_empty() && !command.contains('\n') {
            found.push((start..inner + len + 1, command));
        }
        from = inner + len + 1;
    }
    found
}

/// A file's front matter fields (`key: value` lines between `---` lines) and the text after.
/// A key with the items of a YAML list under it (`tools:` then `  - Read` lines) has them
/// joined by `, `. Commands and subagent definitions (the `agents` module) both read it here.
pub(crate) fn front_matter(text: &str) -> (BTreeMap<String, String>, &str) {
    let mut fields = BTreeMap::new();
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (fields, text);
    };
    let Some(end) = rest.find("\n---") else {
        return (fields, text);
    };
    let mut last: Option<String> = None;
    for line in rest[..end].lines() {
        let item = line.trim_start().strip_prefix('-').map(str::trim);
        if let (Some(item), Some(key)) = (item, &last)
            && !item.is_empty()
        {
            let value = fields.entry(key.clone()).or_default();
            if !value.is_empty() {
                value.push_str(", ");
            }
            value.push_str(item.trim_matches('"').trim_matches('\''));
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim().trim_matches('"').trim_matches('\'');
            fields.insert(k.trim().to_owned(), v.to_owned());
            last = Some(k.trim().to_owned());
        }
    }
    let after = &rest[end + 4..];
    let body = after.split_once('\n').map_or("", |(_, b)| b);
    (fields, body)
}

fn cut(s: &str) -> String {
    let line = s.lines().next().unwrap_or_default();
    if line.chars().count() <= DESCRIPTION_CHARS {
        return line.to_owned();
    }
    let mut out: String = line.chars().take(DESCRIPTION_CHARS - 1).collect();
    out.push('…');
    out
}
