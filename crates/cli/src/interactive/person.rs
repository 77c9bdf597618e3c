//! What the person runs from the prompt: `!command` and the prompt commands they added
//! (`/name ARGS`), whose ``!`command` `` spans run the same way, under the session's rules.

use harness_agent::custom::{Commands, Source, inline_commands, replace_inline};
use harness_core::protocol::{Answer, PermissionQuestion, ToolCall};
use harness_loop::session::{Decision, Permissions as _};

use super::reader::{Read, Reader};
use crate::render::{self, Style, paint};

/// How a command the person asked for went.
pub(super) enum Ran {
    /// It ran: its exit code and output.
    Output(i32, String),
    /// It was refused, declined or stopped (the person was told).
    NotRun,
    /// The person left at its question.
    Quit,
}

/// Runs `command` as the person's own, under the rules a model's `bash` call meets: refused
/// by a deny, asked when a rule asks (once; nothing is remembered).
pub(super) async fn run_command(
    command: &str,
    perms: &harness_agent::SessionPermissions,
    reader: &mut Reader,
    root: &std::path::Path,
    sigint: &mut tokio::signal::unix::Signal,
    color: bool,
) -> Ran {
    let call = ToolCall {
        id: "person".into(),
        name: "bash".into(),
        arguments: serde_json::json!({ "command": command }),
    };
    match perms.decide(&call) {
        Decision::Allow => {}
        Decision::Deny { reason } => {
            println!("{} not run: {reason}", paint("!", Style::Yellow, color));
            return Ran::NotRun;
        }
        Decision::Ask(q) => {
            let q = PermissionQuestion { pattern: None, ..q };
            print!("{}", render::question(&q, color));
            let answer = match reader
                .read(&paint("allow? [y/n] ", Style::Yellow, color), "")
                .await
            {
                Read::Line(l) => harness_agent::typed::parse_answer(&l, false),
                Read::Eof => return Ran::Quit,
                _ => None,
            };
            if answer != Some(Answer::Once) {
                println!("  not run");
                return Ran::NotRun;
            }
        }
    }
    match super::run_shell(command, root, sigint).await {
        Some((code, output)) => Ran::Output(code, output),
        None => {
            println!("{}", paint("  stopped", Style::Yellow, color));
            Ran::NotRun
        }
    }
}

/// The prompt of the person's command `name` with `args`: its text (an MCP prompt's from its
/// server), its ``!`command` `` spans run and replaced by their output. `Err(false)`: nothing
/// to send (what went wrong was said); `Err(true)`: the person left.
#[allow(clippy::too_many_arguments)]
pub(super) async fn expand(
    commands: &Commands,
    mcp: Option<&harness_mcp::Mcp>,
    name: &str,
    args: &str,
    perms: &harness_agent::SessionPermissions,
    reader: &mut Reader,
    root: &std::path::Path,
    sigint: &mut tokio::signal::unix::Signal,
    color: bool,
) -> Result<String, bool> {
    let Some(command) = commands.get(name) else {
        return Err(false);
    };
    let text = match (&command.source, mcp) {
        (Source::Mcp { .. }, Some(mcp)) => mcp.expand(command, args).await,
        _ => Ok(command.expand(args)),
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            println!("{} {e}", paint("!", Style::Yellow, color));
            return Err(false);
        }
    };
    let mut outputs = Vec::new();
    for c in inline_commands(&text) {
        println!("{}", paint(&format!("! {c}"), Style::Dim, color));
        match run_command(&c, perms, reader, root, sigint, color).await {
            Ran::Output(_, output) => outputs.push(output),
            Ran::NotRun => return Err(false),
            Ran::Quit => return Err(true),
        }
    }
    Ok(replace_inline(&text, &outputs))
}
