//! What the person runs from the prompt: `!command` and the prompt commands they added
//! (`/name ARGS`), whose ``!`command` `` spans run the same way. The session runs each command
//! ([`harness_agent::Op::Shell`]) under its rules; here its question is asked at the prompt and
//! its end said.

use harness_agent::ShellEnd;
use harness_agent::custom::{Commands, Source};
use harness_core::protocol::{Answer, PermissionQuestion};

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

/// The session's question about the person's command, asked at the prompt (once: nothing is
/// remembered): the answer to send, or `None` when the person left.
pub(super) async fn ask(
    q: &PermissionQuestion,
    reader: &mut Reader,
    color: bool,
) -> Option<Answer> {
    print!("{}", render::question(q, color));
    let answer = match reader
        .read(&paint("allow? [y/n] ", Style::Yellow, color), "")
        .await
    {
        Read::Line(l) => harness_agent::typed::parse_answer(&l, false),
        Read::Eof => return None,
        _ => None,
    };
    Some(match answer {
        Some(Answer::Once) => Answer::Once,
        _ => Answer::Deny { feedback: None },
    })
}

/// How the person's command ended, as they are told (an output is theirs to show).
pub(super) fn ended(end: ShellEnd, color: bool) -> Ran {
    match end {
        ShellEnd::Ran { code, output } => return Ran::Output(code, output),
        ShellEnd::Refused { reason } => {
            println!("{} not run: {reason}", paint("!", Style::Yellow, color));
        }
        ShellEnd::Declined => println!("  not run"),
        ShellEnd::Stopped => println!("{}", paint("  stopped", Style::Yellow, color)),
    }
    Ran::NotRun
}

/// The text of the person's command `name` with `args` (an MCP prompt's from its server),
/// before its ``!`command` `` spans run; `None` when there is nothing to send (what went wrong
/// was said).
pub(super) async fn expand(
    commands: &Commands,
    mcp: Option<&harness_mcp::Mcp>,
    name: &str,
    args: &str,
    color: bool,
) -> Option<String> {
    let command = commands.get(name)?;
    let text = match (&command.source, mcp) {
        (Source::Mcp { .. }, Some(mcp)) => mcp.expand(command, args).await,
        _ => Ok(command.expand(args)),
    };
    match text {
        Ok(t) => Some(t),
        Err(e) => {
            println!("{} {e}", paint("!", Style::Yellow, color));
            None
        }
    }
}
