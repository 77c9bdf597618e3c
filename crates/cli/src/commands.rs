//! The subcommands that are not a session: `spec`, `permission check`, `sessions`.

use std::process::ExitCode;

use anyhow::{Result, anyhow, bail};
use harness_core::offer::{self, OfferContext};
use harness_core::protocol::{Mode, SessionKind};
use harness_spec::{Project, Spec};

use crate::args::{Args, PermissionCommand, SpecCommand};
use crate::settings::Settings;
use crate::store::{Store, format_time};

/// `llembas spec …`.
pub fn spec(command: &SpecCommand, mode: Option<Mode>) -> Result<ExitCode> {
    let spec = Spec::embedded();
    match command {
        SpecCommand::Hash { check: None } => {
            println!("{} {}", spec.version(), spec.sha256());
            Ok(ExitCode::SUCCESS)
        }
        SpecCommand::Hash { check: Some(dir) } => {
            let other = Spec::from_dir(dir)?;
            if other.sha256() == spec.sha256() {
                println!(
                    "{}: {} {} (matches)",
                    dir.display(),
                    other.version(),
                    other.sha256()
                );
                Ok(ExitCode::SUCCESS)
            } else {
                println!(
                    "{}: {} {} differs from the embedded {} {}",
                    dir.display(),
                    other.version(),
                    other.sha256(),
                    spec.version(),
                    spec.sha256()
                );
                Ok(ExitCode::FAILURE)
            }
        }
        SpecCommand::Tool {
            name,
            project,
            session,
        } => {
            let project = match project.as_str() {
                "cli" => Project::Cli,
                "llembas" => Project::Llembas,
                other => bail!("unknown project {other:?}: use cli or llembas"),
            };
            let kind: SessionKind = session
                .parse()
                .map_err(|_| anyhow!("unknown session kind {session:?}: use chat or agent"))?;
            let tool = spec
                .tool_by_any_name(project, name)
                .ok_or_else(|| anyhow!("no tool named {name:?} in spec {}", spec.version()))?;
            let mut cx = OfferContext::new(project, kind, mode.unwrap_or(Mode::Edit));
            cx.values = crate::tools::runtime_values();
            if !offer::is_offered(tool, &cx) {
                eprintln!(
                    "note: {} is not offered to a {} session of {} in mode {}",
                    tool.name,
                    kind,
                    project_name(project),
                    cx.mode
                );
            }
            let offered = offer::prepare(spec, tool, &cx)?;
            let wire = serde_json::json!({
                "type": "function",
                "function": {
                    "name": offered.name,
                    "description": offered.description,
                    "parameters": offered.parameters,
                }
            });
            println!("{}", serde_json::to_string_pretty(&wire)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `llembas permission check`.
pub fn permission(_command: &PermissionCommand, _settings: &Settings) -> Result<ExitCode> {
    bail!("permission check: not available in this build yet")
}

fn project_name(p: Project) -> &'static str {
    match p {
        Project::Cli => "cli",
        Project::Llembas => "llembas",
    }
}

/// `llembas sessions`.
pub fn sessions(settings: &Settings, all: bool) -> Result<ExitCode> {
    let store = Store::new(settings.dirs.sessions());
    let list = store.list((!all).then_some(settings.cwd.as_path()))?;
    if list.is_empty() {
        if all {
            println!("no saved sessions");
        } else {
            println!(
                "no saved sessions in {} (llembas sessions --all lists every directory's)",
                settings.cwd.display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    for m in list {
        let title = if m.title.is_empty() {
            "(no prompt)"
        } else {
            m.title.as_str()
        };
        if all {
            println!(
                "{}  {}  {}  {}",
                m.id,
                format_time(m.updated),
                m.cwd.display(),
                title
            );
        } else {
            println!("{}  {}  {}", m.id, format_time(m.updated), title);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `llembas acp`.
pub fn acp(_settings: Settings) -> Result<ExitCode> {
    bail!("acp: not available in this build yet")
}

/// A session: one-shot with `-p` or piped stdin, else the interactive terminal.
pub fn session(_args: &Args, settings: Settings) -> Result<ExitCode> {
    if let Err(line) = &settings.model {
        bail!("{line}");
    }
    bail!("sessions: not available in this build yet")
}
