//! Hooks on this machine ([`harness_agent::hooks`]): the person's own, `[[hooks]]` in the config
//! file, and a project's, `[[hooks]]` in `.llembas/hooks.toml` and the `hooks` of Claude Code's
//! `.claude/settings.json` and `.claude/settings.local.json`. A project's hooks run only once
//! the person trusted them: trust is remembered in the data directory by the project's path
//! and a fingerprint of its hooks, so a changed hook is asked about again. Commands run with
//! `sh -c` in the project's directory, in a process group of their own, killed whole at their
//! timeout.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use harness_agent::hooks::{HookDef, HookEvent, HookOutput, HookRunner, fingerprint};
use harness_agent::{BoxFuture, SeamError};
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

/// The most of a hook's stdout and of its stderr kept; the rest is read and dropped (a hook
/// that prints without end costs no memory, and is stopped at its timeout).
const OUTPUT_CAP: usize = 1 << 20;

/// All of `from` read, its first [`OUTPUT_CAP`] bytes kept.
async fn read_capped(mut from: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = OUTPUT_CAP.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}

/// A `[[hooks]]` table, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// `PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop` or `SessionStart`.
    pub event: String,
    /// A regular expression over the tool's name (empty or `*`: every tool).
    #[serde(default)]
    pub matcher: Option<String>,
    /// The command, run with `sh -c` in the project's directory.
    pub command: String,
    /// Seconds it may run (60 by default).
    #[serde(default)]
    pub timeout: Option<u64>,
}

/// `.llembas/hooks.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HooksFile {
    #[serde(default)]
    hooks: Vec<HookConfig>,
}

/// The definitions of `[[hooks]]` tables written in `file`.
pub fn defs(tables: &[HookConfig], file: &Path) -> Result<Vec<HookDef>> {
    tables
        .iter()
        .map(|h| {
            let event = HookEvent::parse(&h.event).ok_or_else(|| {
                anyhow!(
                    "{}: unknown hook event {:?} (PreToolUse, PostToolUse, UserPromptSubmit, \
                     Stop or SessionStart)",
                    file.display(),
                    h.event
                )
            })?;
            Ok(HookDef {
                event,
                matcher: h.matcher.clone().unwrap_or_default(),
                command: h.command.clone(),
                timeout: h.timeout,
            })
        })
        .collect()
}

/// A project's hooks, and what reading them said (events llembas has not).
#[derive(Debug, Clone, Default)]
pub struct ProjectHooks {
    /// The project's directory.
    pub root: PathBuf,
    /// Its hooks, from every file that has some.
    pub defs: Vec<HookDef>,
    /// Notes for the person (hooks of events llembas does not run).
    pub notes: Vec<String>,
}

/// The hooks of the project in `root`.
pub fn project(root: &Path) -> Result<ProjectHooks> {
    let mut found = ProjectHooks {
        root: root.to_owned(),
        ..ProjectHooks::default()
    };
    let toml_file = root.join(".llembas/hooks.toml");
    if let Some(text) = read(&toml_file)? {
        let file: HooksFile = toml::from_str(&text)
            .with_context(|| format!("{} is not valid", toml_file.display()))?;
        found.defs.extend(defs(&file.hooks, &toml_file)?);
    }
    for name in ["settings.json", "settings.local.json"] {
        let file = root.join(".claude").join(name);
        let Some(text) = read(&file)? else {
            continue;
        };
        let (list, unknown) = harness_agent::hooks::from_claude_settings(&text)
            .with_context(|| format!("{}", file.display()))?;
        if !unknown.is_empty() {
            found.notes.push(format!(
                "{}: hooks of {} are not run by llembas",
                file.display(),
                unknown.join(", ")
            ));
        }
        found.defs.extend(list);
    }
    Ok(found)
}

fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Where trusted projects' hooks are remembered.
fn trust_file(data: &Path) -> PathBuf {
    data.join("trusted-hooks.json")
}

fn trusted_list(data: &Path) -> serde_json::Map<String, serde_json::Value> {
    std::fs::read_to_string(trust_file(data))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Whether the person trusted these very hooks of this project.
pub fn is_trusted(data: &Path, hooks: &ProjectHooks) -> bool {
    trusted_list(data)
        .get(&hooks.root.display().to_string())
        .and_then(serde_json::Value::as_str)
        == Some(fingerprint(&hooks.defs).as_str())
}

/// Remembers that the person trusts these hooks of this project.
pub fn trust(data: &Path, hooks: &ProjectHooks) -> Result<()> {
    let mut list = trusted_list(data);
    list.insert(
        hooks.root.display().to_string(),
        fingerprint(&hooks.defs).into(),
    );
    let file = trust_file(data);
    std::fs::create_dir_all(data).with_context(|| format!("cannot create {}", data.display()))?;
    let tmp = file.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&list)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &file).with_context(|| format!("cannot write {}", file.display()))
}

/// The question the terminal puts before a project's hooks run for the first time (or
/// changed): each hook's event, matcher and command.
pub fn trust_question(hooks: &ProjectHooks) -> String {
    let mut s = format!(
        "This project ({}) has hooks: commands llembas would run on this machine, outside the \
         sandbox, on the session's events:\n",
        hooks.root.display()
    );
    for d in &hooks.defs {
        let matcher = if d.matcher.is_empty() {
            String::new()
        } else {
            format!(" [{}]", d.matcher)
        };
        s.push_str(&format!("  {}{matcher}: {}\n", d.event.as_str(), d.command));
    }
    s.push_str("Trust them and run them in this and later sessions? [y/N] ");
    s
}

/// What a front end that cannot ask says of untrusted project hooks.
pub fn untrusted_notice(hooks: &ProjectHooks) -> String {
    format!(
        "this project's {} hook{} not trusted yet, so {} not run: run `llembas` here once to \
         be asked, or pass --trust-project-hooks",
        hooks.defs.len(),
        if hooks.defs.len() == 1 {
            " is"
        } else {
            "s are"
        },
        if hooks.defs.len() == 1 {
            "it is"
        } else {
            "they are"
        },
    )
}

/// Asks on the terminal whether the project's hooks are trusted (when there are some the
/// person did not trust yet, as they are now), and remembers a yes.
#[allow(
    clippy::print_stderr,
    reason = "the question before the terminal session starts"
)]
pub fn ask_trust(data: &Path, root: &Path) -> Result<()> {
    let hooks = project(root)?;
    if hooks.defs.is_empty() || is_trusted(data, &hooks) {
        return Ok(());
    }
    eprint!("{}", trust_question(&hooks));
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    if matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        trust(data, &hooks)?;
        eprintln!("llembas: this project's hooks are trusted as they are now");
    } else {
        eprintln!("llembas: this project's hooks do not run in this session");
    }
    Ok(())
}

/// The hooks a session runs: the person's own, and the project's where trusted (with
/// `trust_now`, trusted here and remembered); the notices to say.
pub fn for_session(
    user: &[HookDef],
    data: &Path,
    root: &Path,
    trust_now: bool,
) -> Result<(Vec<HookDef>, Vec<String>)> {
    let mut all = user.to_vec();
    let hooks = project(root)?;
    let mut notices = hooks.notes.clone();
    if !hooks.defs.is_empty() {
        if trust_now && !is_trusted(data, &hooks) {
            trust(data, &hooks)?;
        }
        if is_trusted(data, &hooks) {
            all.extend(hooks.defs);
        } else {
            notices.push(untrusted_notice(&hooks));
        }
    }
    Ok((all, notices))
}

/// Runs hook commands with `sh -c` in the project's directory.
#[derive(Debug, Clone)]
pub struct HostHooks {
    dir: PathBuf,
    hidden: Vec<String>,
}

impl HostHooks {
    /// Commands run in `dir`, without the variables `hidden` (the model's key), with
    /// `CLAUDE_PROJECT_DIR` and `LLEMBAS_PROJECT_DIR` naming `dir` (as Claude Code's hooks
    /// expect).
    pub fn new(dir: &Path, hidden: Vec<String>) -> Arc<HostHooks> {
        Arc::new(HostHooks {
            dir: dir.to_owned(),
            hidden,
        })
    }

    async fn run_command(
        &self,
        command: &str,
        stdin: Vec<u8>,
        timeout: Duration,
    ) -> Result<HookOutput, SeamError> {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(command)
            .current_dir(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("CLAUDE_PROJECT_DIR", &self.dir)
            .env("LLEMBAS_PROJECT_DIR", &self.dir)
            .process_group(0)
            .kill_on_drop(true);
        for var in &self.hidden {
            cmd.env_remove(var);
        }
        crate::process::mark(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| SeamError::command(command, format!("cannot start sh: {e}")))?;
        let pid = child.id().unwrap_or(0);
        let (Some(mut input), Some(out), Some(err)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(SeamError::command(command, "its pipes did not open"));
        };
        let ran = async {
            // A hook that reads none of its input is not an error.
            let feed = async move {
                let _ = input.write_all(&stdin).await;
                drop(input);
            };
            let (_, o, e, status) =
                tokio::join!(feed, read_capped(out), read_capped(err), child.wait());
            (status, o, e)
        };
        match tokio::time::timeout(timeout, ran).await {
            Ok((status, o, e)) => {
                // What it left running in the background ends with it.
                crate::process::kill_group(pid);
                Ok(HookOutput {
                    code: status.ok().and_then(|s| s.code()),
                    stdout: String::from_utf8_lossy(&o).into_owned(),
                    stderr: String::from_utf8_lossy(&e).into_owned(),
                    timed_out: false,
                })
            }
            Err(_) => {
                crate::process::kill_group(pid);
                let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                Ok(HookOutput {
                    timed_out: true,
                    ..HookOutput::default()
                })
            }
        }
    }
}

impl HookRunner for HostHooks {
    fn run<'a>(
        &'a self,
        command: &'a str,
        stdin: Vec<u8>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<HookOutput, SeamError>> {
        Box::pin(self.run_command(command, stdin, timeout))
    }
}
