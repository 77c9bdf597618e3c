//! `llembas-cli`: the terminal coding agent as a library, an I/O adapter around the harness.
//!
//! It owns argument parsing ([`args`]) and their resolution into settings ([`settings`]), the
//! one-shot run, the interactive terminal, tool execution on the local disk, `bash` and jobs as
//! processes, sessions on disk and ACP over stdio. Every rule (permission, context, loop, model
//! quirks) comes from the core crates; this crate only moves bytes between them and the world.

pub mod acp;
pub mod agents;
pub mod args;
pub mod commands;
pub mod custom;
pub mod exec;
pub mod hooks;
pub mod interactive;
pub mod link;
pub mod mcp;
pub mod memory_api;
pub mod oneshot;
pub mod process;
pub mod render;
pub mod sandbox;
pub mod session;
pub mod settings;
pub mod shadow;
pub mod store;
pub mod world;

use std::process::ExitCode;

use anyhow::Result;

use crate::args::{Args, Command};
use crate::settings::ProcessEnv;

/// Runs the command line: the exit code on a normal end, an error for [`report`] otherwise.
pub fn run(args: Args) -> Result<ExitCode> {
    let code = run_command(&args);
    // No process a session started outlives the run, whichever way it ends.
    process::end_all();
    code
}

fn run_command(args: &Args) -> Result<ExitCode> {
    match &args.command {
        Some(Command::Spec { command }) => {
            let mode = args.mode.as_deref().map(settings::parse_mode).transpose()?;
            commands::spec(command, mode)
        }
        Some(Command::Permission { command }) => {
            let settings = resolve(args)?;
            commands::permission(command, &settings)
        }
        Some(Command::Sessions { all }) => {
            let settings = resolve(args)?;
            commands::sessions(&settings, *all)
        }
        Some(Command::Mcp { command }) => {
            let settings = resolve(args)?;
            commands::mcp(command, &settings)
        }
        Some(Command::Acp) => {
            let settings = resolve(args)?;
            commands::acp(settings)
        }
        Some(Command::Link {
            server,
            roots,
            no_remote_work,
            max_sessions,
            name,
            pair,
            pair_only,
        }) => {
            let settings = resolve(args)?;
            let roots = if *no_remote_work {
                Vec::new()
            } else if roots.is_empty() {
                vec![settings.cwd.clone()]
            } else {
                roots
                    .iter()
                    .map(|r| {
                        std::path::absolute(r).map_err(|e| {
                            anyhow::anyhow!("the root {} cannot be made absolute: {e}", r.display())
                        })
                    })
                    .collect::<Result<_>>()?
            };
            link::run(
                settings,
                link::LinkOptions {
                    server: server.clone(),
                    roots,
                    name: name.clone(),
                    pair: *pair,
                    pair_only: *pair_only,
                    max_sessions: *max_sessions,
                },
            )
        }
        None => {
            let settings = resolve(args)?;
            commands::session(args, settings)
        }
    }
}

/// The settings, with the rules `--allow` gives this run after the config file's.
fn resolve(args: &Args) -> Result<settings::Settings> {
    let mut settings = settings::resolve(args, &ProcessEnv)?;
    settings.rules.extend(args::allow_rules(&args.allow)?);
    Ok(settings)
}

/// Prints an error once, as one line with its causes, and gives the exit code. A closed pipe
/// (`llembas … | head`) is a normal end.
#[allow(clippy::print_stderr, reason = "why the command failed, said once")]
pub fn report(e: &anyhow::Error) -> ExitCode {
    let broken_pipe = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("llembas: {e:#}");
    ExitCode::from(2)
}
