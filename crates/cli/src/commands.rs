//! The subcommands that are not a session: `spec`, `permission check`, `sessions`.

use std::process::ExitCode;

use anyhow::{Result, bail};
use harness_spec::Spec;

use crate::args::{Args, PermissionCommand, SpecCommand};
use crate::settings::Settings;

/// `llembas spec …`.
pub fn spec(command: &SpecCommand) -> Result<ExitCode> {
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
        SpecCommand::Tool { .. } => bail!("spec tool: not available in this build yet"),
    }
}

/// `llembas permission check`.
pub fn permission(_command: &PermissionCommand, _settings: &Settings) -> Result<ExitCode> {
    bail!("permission check: not available in this build yet")
}

/// `llembas sessions`.
pub fn sessions(_settings: &Settings, _all: bool) -> Result<ExitCode> {
    bail!("sessions: not available in this build yet")
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
