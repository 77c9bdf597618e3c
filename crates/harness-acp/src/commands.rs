//! The slash commands a prompt may be over ACP: advertised in `available_commands_update`,
//! run by the agent rather than sent to the model. Read as every front end reads them
//! ([`harness_agent::slash`]).

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, UnstructuredCommandInput,
};
use harness_agent::custom::{Commands, Source, inline_commands};
use harness_agent::slash::{HELP, Line, parse_line, parse_line_in};
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

/// The slash commands a prompt may be (`/mode plan`), as `available_commands_update` says them:
/// the built-in ones, then the person's `commands` that can run over ACP.
pub fn available_commands(commands: &Commands) -> Vec<AvailableCommand> {
    let person = commands.iter().filter(|c| runs_over_acp(c)).map(|c| {
        let hint = c.argument_hint.as_deref().unwrap_or("arguments");
        AvailableCommand::new(c.name.clone(), c.description.clone()).input(
            AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(hint)),
        )
    });
    built_in().into_iter().chain(person).collect()
}

/// A prompt that is `/NAME ARGS` for one of the person's `commands`: the prompt it expands
/// to, or the line to say when it cannot run here. `None` for anything else.
pub fn person_command(text: &str, commands: &Commands) -> Option<Result<String, String>> {
    let Line::Custom { name, args } = parse_line_in(text, commands) else {
        return None;
    };
    let command = commands.get(&name)?;
    Some(if matches!(command.source, Source::Mcp { .. }) {
        Err(format!(
            "/{name} is a prompt of an MCP server, expanded at the terminal only (llembas)"
        ))
    } else if !runs_over_acp(command) {
        Err(format!(
            "/{name} runs shell commands (!`…`) before its prompt is sent; they run at the terminal only (llembas), not from an editor"
        ))
    } else {
        Ok(command.expand(&args))
    })
}

/// Whether a prompt command can run over ACP: a file's, without shell commands in it.
fn runs_over_acp(command: &harness_agent::custom::PromptCommand) -> bool {
    !matches!(command.source, Source::Mcp { .. }) && inline_commands(&command.body).is_empty()
}

fn built_in() -> Vec<AvailableCommand> {
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
