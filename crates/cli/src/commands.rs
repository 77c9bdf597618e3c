//! The subcommands that are not a session: `spec`, `permission check`, `sessions`.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::process::ExitCode;

use anyhow::{Context as _, Result, anyhow, bail};
use harness_core::offer::{self, OfferContext};
use harness_core::protocol::{Mode, SessionKind};
use harness_spec::{Project, Spec};

use crate::args::{Args, McpCommand, PermissionCommand, SpecCommand};
use crate::oneshot::{self, Answers};
use crate::session;
use crate::settings::Settings;
use crate::store::{Store, format_time};

/// `llembas mcp …`.
pub fn mcp(command: &McpCommand, settings: &Settings) -> Result<ExitCode> {
    let mut o = std::io::stdout().lock();
    let path = &settings.dirs.config_file;
    let read = || match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(anyhow!("cannot read {}: {e}", path.display())),
    };
    let write = |text: &str| -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
        }
        // Checked before it replaces the file: what is written must still load.
        toml::from_str::<crate::settings::ConfigFile>(text)
            .map_err(|e| anyhow!("the edited config file would not load: {e}"))?;
        std::fs::write(path, text).map_err(|e| anyhow!("cannot write {}: {e}", path.display()))
    };
    match command {
        McpCommand::List => {
            for line in crate::mcp::list_lines(&settings.mcp) {
                writeln!(o, "{line}")?;
            }
        }
        McpCommand::Add {
            name,
            url,
            bearer_token_env,
            env,
            command,
        } => {
            let mut entry = crate::mcp::McpEntry {
                url: url.clone(),
                bearer_token_env: bearer_token_env.clone(),
                ..Default::default()
            };
            if let Some((program, rest)) = command.split_first() {
                entry.command = Some(program.clone());
                entry.args = rest.to_vec();
            }
            for kv in env {
                let Some((k, v)) = kv.split_once('=') else {
                    bail!("--env {kv:?}: write KEY=VALUE");
                };
                entry.env.insert(k.to_owned(), v.to_owned());
            }
            entry.server(name, "llembas mcp add")?;
            write(&crate::mcp::add_block(&read()?, name, &entry)?)?;
            writeln!(o, "added the MCP server {name} to {}", path.display())?;
        }
        McpCommand::Remove { name } => {
            write(&crate::mcp::remove_block(&read()?, name)?)?;
            writeln!(o, "removed the MCP server {name} from {}", path.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `llembas spec …`.
#[allow(clippy::print_stderr, reason = "the subcommand's own output")]
pub fn spec(command: &SpecCommand, mode: Option<Mode>) -> Result<ExitCode> {
    let spec = Spec::embedded();
    // Written with errors seen, so a closed pipe (`… | head`) ends the run quietly.
    let mut o = std::io::stdout().lock();
    match command {
        SpecCommand::Hash { check: None } => {
            writeln!(o, "{} {}", spec.version(), spec.sha256())?;
            Ok(ExitCode::SUCCESS)
        }
        SpecCommand::Hash { check: Some(dir) } => {
            let other = Spec::from_dir(dir)?;
            if other.sha256() == spec.sha256() {
                writeln!(
                    o,
                    "{}: {} {} (matches)",
                    dir.display(),
                    other.version(),
                    other.sha256()
                )?;
                Ok(ExitCode::SUCCESS)
            } else {
                writeln!(
                    o,
                    "{}: {} {} differs from the embedded {} {}",
                    dir.display(),
                    other.version(),
                    other.sha256(),
                    spec.version(),
                    spec.sha256()
                )?;
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
            cx.values = harness_agent::runtime_values();
            if !offer::is_offered(tool, &cx) {
                eprintln!(
                    "note: {} is not offered to a {} session of {} in mode {}",
                    tool.name,
                    kind,
                    project.as_str(),
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
            writeln!(o, "{}", serde_json::to_string_pretty(&wire)?)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `llembas permission check`.
pub fn permission(command: &PermissionCommand, settings: &Settings) -> Result<ExitCode> {
    let PermissionCommand::Check { command } = command;
    let line = command.join(" ");
    let root = settings.cwd.display().to_string();
    let perms = harness_agent::SessionPermissions::new(
        harness_agent::perm::engine()?,
        settings.mode,
        &root,
        &crate::settings::home_dir(),
        settings.rules.clone(),
    );
    let args = serde_json::json!({ "command": line });
    let decision = perms.decide_raw("bash", &args);
    write!(
        std::io::stdout().lock(),
        "{}",
        harness_permission::render_check(&decision)
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `llembas sessions`.
pub fn sessions(settings: &Settings, all: bool) -> Result<ExitCode> {
    let mut o = std::io::stdout().lock();
    let store = Store::new(settings.dirs.sessions());
    let list = store.list((!all).then_some(settings.cwd.as_path()))?;
    if list.is_empty() {
        if all {
            writeln!(o, "no saved sessions")?;
        } else {
            writeln!(
                o,
                "no saved sessions in {} (llembas sessions --all lists every directory's)",
                settings.cwd.display()
            )?;
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
            writeln!(
                o,
                "{}  {}  {}  {}",
                m.id,
                format_time(m.updated),
                m.cwd.display(),
                title
            )?;
        } else {
            writeln!(o, "{}  {}  {}", m.id, format_time(m.updated), title)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `llembas acp`.
pub fn acp(settings: Settings) -> Result<ExitCode> {
    crate::acp::run(settings)
}

/// A session: one-shot with `-p` or piped stdin, else the interactive terminal.
pub fn session(args: &Args, settings: Settings) -> Result<ExitCode> {
    if let Err(line) = &settings.model {
        bail!("{line}");
    }
    let stdin_tty = std::io::stdin().is_terminal();
    let (prompt, answers) = match args.prompt.as_deref() {
        Some("-") => (Some(read_stdin()?), Answers::Nobody),
        Some(p) => (Some(p.to_owned()), Answers::Stdin),
        None if !stdin_tty => (Some(read_stdin()?), Answers::Nobody),
        None => (None, Answers::Nobody),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    if prompt.is_none() && !args.image.is_empty() {
        bail!(
            "--image goes with a one-shot prompt (-p); in the terminal, name an image with @path"
        );
    }
    match prompt {
        Some(prompt) => {
            if prompt.trim().is_empty() {
                bail!("the prompt is empty");
            }
            let images = args
                .image
                .iter()
                .map(|p| image(p))
                .collect::<Result<Vec<_>>>()?;
            runtime.block_on(crate::process::ending_on_signals(async {
                let parts = session::build(&settings, args.resume.as_deref()).await?;
                let price = settings.price(&parts.model_name);
                let prompt = oneshot::Prompt {
                    text: prompt,
                    images,
                };
                oneshot::run(
                    price,
                    parts,
                    prompt,
                    settings.output,
                    answers,
                    args.job_wait,
                )
                .await
            }))
        }
        None => runtime.block_on(crate::process::ending_on_signals(async {
            // The terminal asks about the project's hooks before its session starts.
            if !settings.trust_project_hooks
                && let Ok(root) = std::fs::canonicalize(&settings.cwd)
            {
                crate::hooks::ask_trust(&settings.dirs.data, &root)?;
            }
            let parts = session::build(&settings, args.resume.as_deref()).await?;
            crate::interactive::run(settings.clone(), parts).await
        })),
    }
}

/// An `--image` file as the `data:` URL the prompt carries.
fn image(path: &std::path::Path) -> Result<String> {
    let name = path.to_string_lossy();
    if harness_agent::person::image_type(&name).is_none() {
        bail!("--image {name}: not an image by its name (png, jpg, jpeg, gif or webp)");
    }
    let bytes = std::fs::read(path).with_context(|| format!("--image {name}"))?;
    harness_agent::person::image_url(&name, &bytes)
        .with_context(|| format!("--image {name}: not an image"))
}

fn read_stdin() -> Result<String> {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s)?;
    Ok(s)
}
