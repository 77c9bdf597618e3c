//! The slash commands a prompt may be over ACP: advertised in `available_commands_update`,
//! run by the agent rather than sent to the model. Read as every front end reads them
//! ([`harness_agent::slash`]).

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, UnstructuredCommandInput,
};
use harness_agent::slash::{HELP, Line, parse_line};
use harness_core::protocol::Mode;

/// A prompt that is one of [`ACP_COMMANDS`]: a mode to set, a query to answer, or the line
/// to say (a bad argument); `None` for anything else (it goes to the model).
#[allow(clippy::type_complexity)]
pub fn slash_command(
    text: &str,
    mode: Mode,
) -> Option<Result<Result<Mode, harness_agent::Query>, String>> {
    let name = text.trim().strip_prefix('/')?.split_whitespace().next()?;
    if !ACP_COMMANDS.contains(&name) {
        return None;
    }
    Some(match parse_line(text) {
        Line::Mode(Some(m)) => Ok(Ok(m)),
        Line::Mode(None) => Err(format!("mode: {mode}")),
        Line::Plan => Ok(Err(harness_agent::Query::Plan)),
        Line::Jobs => Ok(Err(harness_agent::Query::Jobs)),
        Line::Compact => Ok(Err(harness_agent::Query::Compact)),
        Line::Recall(id) => Ok(Err(harness_agent::Query::Recall(id))),
        Line::Unknown(line) => Err(line),
        _ => return None,
    })
}

/// The slash commands a prompt may be (`/mode plan`), as `available_commands_update` says them.
pub fn available_commands() -> Vec<AvailableCommand> {
    ACP_COMMANDS
        .iter()
        .filter_map(|name| {
            let line = HELP.lines().find(|l| {
                l.strip_prefix('/')
                    .and_then(|l| l.split_whitespace().next())
                    == Some(name)
            })?;
            let (usage, description) = line.split_once("  ")?;
            let mut c = AvailableCommand::new(*name, description.trim());
            if let Some((_, arg)) = usage.trim().split_once(' ') {
                c = c.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(arg.trim()),
                ));
            }
            Some(c)
        })
        .collect()
}

/// The slash commands (`harness_agent::slash`) that mean something over ACP.
pub const ACP_COMMANDS: &[&str] = &["mode", "plan", "jobs", "compact", "recall"];
