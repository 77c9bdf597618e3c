//! The command line as typed: raw flags only, no defaults merged and nothing validated beyond
//! what clap checks. The `settings` module turns these into the settings a run uses.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// `llembas`: a coding agent in the terminal, working on the disk of this machine.
#[derive(Debug, Parser)]
#[command(name = "llembas", version, about, long_about = None)]
pub struct Args {
    /// The model to use (an id the server knows, or the name of an endpoint in the config file).
    #[arg(long, short = 'm', global = true)]
    pub model: Option<String>,

    /// The OpenAI-compatible server's base URL (…/v1). Overrides OPENAI_BASE_URL.
    #[arg(long, global = true)]
    pub base_url: Option<String>,

    /// The environment variable holding the API key (default: OPENAI_API_KEY).
    #[arg(long, global = true)]
    pub api_key_env: Option<String>,

    /// A named endpoint of the config file.
    #[arg(long, global = true)]
    pub endpoint: Option<String>,

    /// The permission mode: manual, edit, auto or plan.
    #[arg(long, global = true)]
    pub mode: Option<String>,

    /// Run one prompt without the terminal UI and exit (`-p -` or no value reads stdin).
    ///
    /// Background jobs still running when the answer ends are waited for (their ends wake the
    /// session, as in a terminal session) up to --job-wait seconds; then they are stopped, said
    /// on stderr, and llembas exits. Every process a run started ends with it.
    #[arg(short = 'p', long, num_args = 0..=1, default_missing_value = "-")]
    pub prompt: Option<String>,

    /// With -p: an image to go with the prompt (png, jpeg, gif or webp; repeatable). It reaches
    /// the model where its metadata says it reads images; otherwise it is left out, said on
    /// stderr.
    #[arg(long, value_name = "FILE")]
    pub image: Vec<PathBuf>,

    /// With -p: seconds to wait for background jobs after the answer ended [default: the
    /// spec's `jobs.limits.oneshot_wait_seconds`, 120].
    #[arg(long, value_name = "SECONDS")]
    pub job_wait: Option<u64>,

    /// How a one-shot run writes its output.
    #[arg(long, value_enum)]
    pub output: Option<OutputFormat>,

    /// Continue a saved session: the newest one here, or the one with this id.
    #[arg(long, num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,

    /// Allow a tool's calls for this run only, as a config rule would: `TOOL:PATTERN`
    /// (`--allow 'bash:cargo test *'`), or `TOOL` for all its calls. Repeatable. Questions
    /// asked in every mode (the floor, protected paths) are still asked.
    #[arg(long, global = true, value_name = "TOOL:PATTERN")]
    pub allow: Vec<String>,

    /// Trust this project's hooks (`.llembas/hooks.toml`, `.claude/settings.json`) as they are
    /// now, and remember it, instead of being asked in the terminal.
    #[arg(long, global = true)]
    pub trust_project_hooks: bool,

    /// Work in this directory instead of the current one.
    #[arg(long, short = 'C', global = true)]
    pub cwd: Option<PathBuf>,

    /// What to do instead of a session.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The rules `--allow` gives for one run.
pub fn allow_rules(allow: &[String]) -> anyhow::Result<Vec<harness_permission::Rule>> {
    allow
        .iter()
        .map(|a| {
            let (tool, pattern) = a.split_once(':').unwrap_or((a.as_str(), "*"));
            let (tool, pattern) = (tool.trim(), pattern.trim());
            if tool.is_empty() || pattern.is_empty() {
                anyhow::bail!("--allow {a:?}: write TOOL:PATTERN, such as 'bash:cargo test *'");
            }
            Ok(harness_permission::Rule::new(
                tool,
                pattern,
                harness_permission::Action::Allow,
            ))
        })
        .collect()
}

/// How a one-shot run writes what happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The answer as text (tool activity on stderr).
    Text,
    /// The event stream, one JSON object per line.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the saved sessions of this directory (all with --all).
    Sessions {
        /// Every directory's sessions.
        #[arg(long)]
        all: bool,
    },
    /// Run as an ACP agent over stdin/stdout (for an editor or the web UI).
    Acp,
    /// Link this machine to a LLeMbas server: pair it (a code to confirm in the server's page),
    /// then serve its agent chats over one WebSocket this machine dials out, redialing when it
    /// drops.
    Link {
        /// The server's URL (https://…; plain http only to this machine's loopback address).
        server: String,
        /// A directory the server's chats may work in (repeatable; default: the current
        /// directory).
        #[arg(long = "root", value_name = "DIR")]
        roots: Vec<std::path::PathBuf>,
        /// Share no directory: the device shows online and refuses every session.
        #[arg(long, conflicts_with = "roots")]
        no_remote_work: bool,
        /// How many sessions the server may hold open on this device at once.
        #[arg(long)]
        max_sessions: Option<usize>,
        /// The device's name as suggested to the page (default: this machine's host name).
        #[arg(long)]
        name: Option<String>,
        /// Pair again even when this machine is paired with the server already.
        #[arg(long)]
        pair: bool,
        /// Pair, then end without linking.
        #[arg(long)]
        pair_only: bool,
    },
    /// Ask the permission engine about a command.
    Permission {
        /// What to ask.
        #[command(subcommand)]
        command: PermissionCommand,
    },
    /// List, add or remove MCP servers (the config file's `[mcp.NAME]` blocks).
    Mcp {
        /// What to do.
        #[command(subcommand)]
        command: McpCommand,
    },
    /// Show what the embedded spec says.
    Spec {
        /// What to show.
        #[command(subcommand)]
        command: SpecCommand,
    },
}

/// `llembas permission …`.
#[derive(Debug, Subcommand)]
pub enum PermissionCommand {
    /// Print the decision, the reason and the "always" pattern for a command.
    Check {
        /// The command, after `--`.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

/// `llembas mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// List the configured MCP servers (the config file's and the project's `.mcp.json`).
    List,
    /// Add a server: `llembas mcp add NAME -- COMMAND [ARGS...]` (a program speaking MCP on
    /// stdio) or `llembas mcp add NAME --url URL [--bearer-token-env VAR]`.
    Add {
        /// Its name: its tools are offered as `mcp__NAME__TOOL`.
        name: String,
        /// A streamable HTTP server's URL.
        #[arg(long)]
        url: Option<String>,
        /// The variable holding the HTTP server's bearer token.
        #[arg(long, value_name = "VAR")]
        bearer_token_env: Option<String>,
        /// A variable for the program, `KEY=VALUE`. Repeatable.
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// The program and its arguments, after `--`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Remove a server from the config file.
    Remove {
        /// Its name.
        name: String,
    },
}

/// `llembas spec …`.
#[derive(Debug, Subcommand)]
pub enum SpecCommand {
    /// Print a tool exactly as a model receives it.
    Tool {
        /// The tool's name (or a former name).
        name: String,
        /// The project whose offer to show: cli or llembas.
        #[arg(long, default_value = "cli")]
        project: String,
        /// The kind of session: chat or agent.
        #[arg(long, default_value = "agent")]
        session: String,
    },
    /// Print the embedded spec's version and SHA-256, or check a copy against it.
    Hash {
        /// A spec directory whose hash must equal the embedded one.
        #[arg(long)]
        check: Option<PathBuf>,
    },
}
