//! The second step of reading the command line: flags, the environment and the config file
//! merged into validated [`Settings`] (flags win over the environment, the environment over the
//! config file). Nothing here talks to a model or touches the project.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow, bail};
use harness_core::protocol::Mode;
use serde::Deserialize;

use crate::args::{Args, OutputFormat};

pub use harness_model::settings::{EndpointConfig, Env, ModelSettings, ProcessEnv};

/// `~/.config/llembas/config.toml`, as written by the person.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The endpoint used when none is named.
    #[serde(default)]
    pub default_endpoint: Option<String>,
    /// The mode a session starts in.
    #[serde(default)]
    pub mode: Option<String>,
    /// The personality preset (a file name under the spec's `prompts/personality/`, no `.md`).
    #[serde(default)]
    pub personality: Option<String>,
    /// Named endpoints.
    #[serde(default)]
    pub endpoints: BTreeMap<String, EndpointConfig>,
    /// Permission rules applied on top of the defaults.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// The OS sandbox of shell commands: `sandbox = false` turns it off; `[sandbox]` with
    /// `network = false` closes the network to sandboxed commands.
    #[serde(default)]
    pub sandbox: Option<SandboxConfig>,
    /// Prices by model name (`[prices."NAME"]` with `input` and `output`, US dollars per
    /// million tokens), over the catalogue's.
    #[serde(default)]
    pub prices: BTreeMap<String, harness_spec::Cost>,
    /// MCP servers, `[mcp.NAME]` ([`crate::mcp`]).
    #[serde(default)]
    pub mcp: BTreeMap<String, crate::mcp::McpEntry>,
    /// Whether the project's `.mcp.json` servers are started.
    #[serde(default)]
    pub project_mcp: Option<bool>,
    /// The person's hooks, `[[hooks]]` ([`crate::hooks`]).
    #[serde(default)]
    pub hooks: Vec<crate::hooks::HookConfig>,
}

/// `sandbox` in the config file: a switch, or a table.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
pub enum SandboxConfig {
    /// `sandbox = false` / `true`.
    Switch(bool),
    /// `[sandbox]`.
    Table {
        /// Whether commands run sandboxed.
        #[serde(default)]
        enabled: Option<bool>,
        /// Whether sandboxed commands may use the network.
        #[serde(default)]
        network: Option<bool>,
    },
}

/// A permission rule as configured: `{tool, pattern, action = "allow"|"ask"|"deny"}`.
pub type RuleConfig = harness_permission::Rule;

/// Where llembas keeps its files.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// The config file's path (it may not exist).
    pub config_file: PathBuf,
    /// The data directory: sessions, notes, knowledge.
    pub data: PathBuf,
}

/// The person's home directory (`/` when there is none).
pub fn home_dir() -> String {
    dirs::home_dir()
        .map(|h| h.display().to_string())
        .unwrap_or_else(|| "/".to_owned())
}

impl Dirs {
    /// The user's directories: `$XDG_CONFIG_HOME/llembas` and `$XDG_DATA_HOME/llembas` or the
    /// platform's equivalents; `LLEMBAS_HOME` puts both under one directory.
    pub fn from_env(env: &dyn Env) -> Result<Dirs> {
        if let Some(home) = env.var("LLEMBAS_HOME") {
            let home = PathBuf::from(home);
            return Ok(Dirs {
                config_file: home.join("config.toml"),
                data: home.join("data"),
            });
        }
        let config = dirs::config_dir()
            .ok_or_else(|| anyhow!("cannot find a config directory: set HOME or LLEMBAS_HOME"))?;
        let data = dirs::data_dir()
            .ok_or_else(|| anyhow!("cannot find a data directory: set HOME or LLEMBAS_HOME"))?;
        Ok(Dirs {
            config_file: config.join("llembas").join("config.toml"),
            data: data.join("llembas"),
        })
    }

    /// Where sessions are saved.
    pub fn sessions(&self) -> PathBuf {
        self.data.join("sessions")
    }
}

/// Reads the config file; a missing file is an empty config, a malformed one an error naming it.
pub fn load_config(path: &Path) -> Result<ConfigFile> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ConfigFile::default()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    toml::from_str(&text).with_context(|| format!("{} is not valid", path.display()))
}

/// Everything a session needs, resolved and checked.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The model; `Err` holds the one line saying what to set, reported only when a model is
    /// actually needed (listing sessions needs none).
    pub model: std::result::Result<ModelSettings, String>,
    /// The mode the session starts in.
    pub mode: Mode,
    /// The working directory (absolute).
    pub cwd: PathBuf,
    /// Where files are kept.
    pub dirs: Dirs,
    /// Configured permission rules.
    pub rules: Vec<RuleConfig>,
    /// The personality preset's name.
    pub personality: Option<String>,
    /// How one-shot output is written.
    pub output: OutputFormat,
    /// Whether shell commands run in the OS sandbox (`None`: the spec's default).
    pub sandbox: Option<bool>,
    /// Whether sandboxed commands may use the network (`None`: the spec's default).
    pub sandbox_network: Option<bool>,
    /// The variables that hold the model's key, kept from the commands' environment.
    pub key_variables: Vec<String>,
    /// Configured prices by model name.
    pub prices: BTreeMap<String, harness_spec::Cost>,
    /// The MCP servers configured, started or not ([`crate::mcp`]).
    pub mcp: Vec<crate::mcp::Listed>,
    /// The person's own hooks (the config file's `[[hooks]]`).
    pub hooks: Vec<harness_agent::hooks::HookDef>,
    /// `--trust-project-hooks`: the project's hooks, as they are now, are trusted.
    pub trust_project_hooks: bool,
}

impl Settings {
    /// What model `name` costs: the configured price, else the catalogue's (`None`: not
    /// known, as for open weights on a local server).
    pub fn price(&self, name: &str) -> Option<harness_spec::Cost> {
        self.prices
            .get(name)
            .copied()
            .or_else(|| harness_model::Catalogue::embedded().ok()?.find(name)?.cost)
    }
}

/// Reads a mode's name as the person typed it.
pub fn parse_mode(m: &str) -> Result<Mode> {
    m.parse::<Mode>()
        .map_err(|_| anyhow!("unknown mode {m:?}: use one of manual, edit, auto, plan"))
}

/// Merges flags, environment and config file.
pub fn resolve(args: &Args, env: &dyn Env) -> Result<Settings> {
    let dirs = Dirs::from_env(env)?;
    let config = load_config(&dirs.config_file)?;

    let mode_name = args
        .mode
        .clone()
        .or_else(|| env.var("LLEMBAS_MODE"))
        .or_else(|| config.mode.clone());
    let mode = match mode_name {
        Some(m) => parse_mode(&m)?,
        None => Mode::Edit,
    };

    let cwd = match &args.cwd {
        Some(p) => {
            std::path::absolute(p).with_context(|| format!("cannot resolve {}", p.display()))?
        }
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !cwd.is_dir() {
        bail!("{} is not a directory", cwd.display());
    }

    if let Some(p) = &config.personality
        && harness_spec::Spec::embedded()
            .prompt(&format!("personality/{p}.md"))
            .is_none()
    {
        bail!("{}: unknown personality {p:?}", dirs.config_file.display());
    }

    let model = resolve_model(args, env, &config, &dirs)?;
    let key_variables = harness_model::settings::key_variables(
        &model_flags(args),
        &harness_model::settings::EndpointTable {
            endpoints: &config.endpoints,
            default: config.default_endpoint.as_deref(),
            file: "",
        },
    );
    let (mut sandbox, sandbox_network) = match config.sandbox {
        None => (None, None),
        Some(SandboxConfig::Switch(on)) => (Some(on), None),
        Some(SandboxConfig::Table { enabled, network }) => (enabled, network),
    };
    match env.var("LLEMBAS_SANDBOX").as_deref() {
        None | Some("") => {}
        Some("off" | "0" | "false") => sandbox = Some(false),
        Some("on" | "1" | "true") => sandbox = Some(true),
        Some(other) => bail!("LLEMBAS_SANDBOX={other:?}: use on or off"),
    }
    let mcp = crate::mcp::configured(
        &config.mcp,
        &dirs.config_file,
        config.project_mcp.unwrap_or(false),
        &cwd,
    )?;
    let hooks = crate::hooks::defs(&config.hooks, &dirs.config_file)?;
    Ok(Settings {
        hooks,
        trust_project_hooks: args.trust_project_hooks,
        mcp,
        sandbox,
        sandbox_network,
        key_variables,
        model,
        mode,
        cwd,
        rules: config.rules.clone(),
        personality: config.personality.clone(),
        prices: config.prices.clone(),
        output: args.output.unwrap_or(OutputFormat::Text),
        dirs,
    })
}

fn model_flags(args: &Args) -> harness_model::settings::ModelFlags {
    harness_model::settings::ModelFlags {
        endpoint: args.endpoint.clone(),
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        api_key_env: args.api_key_env.clone(),
    }
}

fn resolve_model(
    args: &Args,
    env: &dyn Env,
    config: &ConfigFile,
    dirs: &Dirs,
) -> Result<std::result::Result<ModelSettings, String>> {
    let flags = model_flags(args);
    let file = dirs.config_file.display().to_string();
    let table = harness_model::settings::EndpointTable {
        endpoints: &config.endpoints,
        default: config.default_endpoint.as_deref(),
        file: &file,
    };
    Ok(harness_model::settings::resolve(&flags, env, &table)?
        .ok_or_else(|| format!("{} {file}", harness_model::settings::NO_MODEL)))
}
