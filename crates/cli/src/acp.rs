//! `llembas acp`: the agent over stdio. The ACP side — the mapping of the runtime's events and
//! ops, the `_lembas` extensions — is `harness-acp`; this module hands it stdin and stdout and
//! is its [`Host`]: sessions built from the settings on this machine's disk and processes, the
//! person's home as the one root, the instance's memory API over HTTP, notices on stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use harness_acp::{AgentInfo, DirEntry, Error, Host, ModelChoice, OpenRequest, Opened};
use harness_agent::BoxFuture;

use crate::settings::Settings;

/// Who the agent is: the same for `llembas acp` and `llembas link` (the instance id is stable
/// for this machine's person across runs and re-dials).
pub fn agent_info() -> AgentInfo {
    AgentInfo {
        name: "llembas".into(),
        title: "LLeMbas CLI".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        instance: format!(
            "llembas-{}",
            dirs::home_dir()
                .map(|h| crate::store::short_hash(&h.display().to_string()))
                .unwrap_or_default()
        ),
    }
}

/// Runs the agent on stdin/stdout until the client closes it.
pub fn run(settings: Settings) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let host = Arc::new(CliHost {
        settings,
        roots: None,
        max_sessions: None,
    });
    runtime.block_on(crate::process::ending_on_signals(async {
        harness_acp::serve_stream(host, agent_info(), tokio::io::stdin(), tokio::io::stdout()).await
    }))?;
    Ok(ExitCode::SUCCESS)
}

/// The terminal agent as ACP's front end: over stdio (`llembas acp`) or the device link
/// (`llembas link`), the same host either way.
pub struct CliHost {
    settings: Settings,
    /// The shared directories (`None`: the person's home, as for an editor over stdio).
    roots: Option<Vec<PathBuf>>,
    max_sessions: Option<usize>,
}

impl CliHost {
    /// The host of a device link: sessions only under `roots` (none: remote work is off), at
    /// most `max_sessions` at once.
    pub fn for_link(settings: Settings, roots: Vec<PathBuf>, max_sessions: Option<usize>) -> Self {
        CliHost {
            settings,
            roots: Some(roots),
            max_sessions,
        }
    }
}

impl Host for CliHost {
    fn roots(&self) -> Vec<PathBuf> {
        match &self.roots {
            Some(r) => r.clone(),
            None => dirs::home_dir().into_iter().collect(),
        }
    }

    fn max_sessions(&self) -> Option<usize> {
        self.max_sessions
    }

    fn models(&self) -> Vec<String> {
        match &self.settings.model {
            Ok(m) => m.model.iter().cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    fn open(&self, request: OpenRequest) -> BoxFuture<'_, Result<Opened, Error>> {
        Box::pin(self.open_session(request))
    }

    fn dir(&self, path: &Path) -> Result<Vec<DirEntry>, Error> {
        Ok(std::fs::read_dir(path)
            .map_err(|e| Error::Dir {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let git = e.path().join(".git").exists();
                Some(DirEntry { name, git })
            })
            .collect())
    }

    #[allow(
        clippy::print_stderr,
        reason = "stdout is the protocol: notices go to stderr"
    )]
    fn notice(&self, text: &str) {
        eprintln!("llembas: {text}");
    }

    fn sessions(&self, cwd: Option<&Path>) -> Result<Vec<harness_agent::Meta>, Error> {
        let dir = self.settings.dirs.sessions();
        crate::store::Store::new(dir.clone())
            .list(cwd)
            .map_err(|e| Error::Sessions {
                dir,
                message: format!("{e:#}"),
            })
    }
}

impl CliHost {
    async fn open_session(&self, req: OpenRequest) -> Result<Opened, Error> {
        let mut settings = self.settings.clone();
        settings.cwd = req.cwd.clone();
        let store = crate::store::Store::new(settings.dirs.sessions());
        if let Some(id) = &req.resume {
            if !store.dir(id).join("meta.json").exists() {
                return Err(Error::NoSavedSession(id.clone()));
            }
            // The mode the session last had (kept in its metadata by the runtime).
            if let Some(m) = store.find(id, &settings.cwd).ok().and_then(|m| m.mode) {
                settings.mode = m;
            }
        }
        if let Some(m) = req.mode {
            settings.mode = m;
        }
        if let Some(p) = req.personality {
            settings.personality = Some(p);
        }
        // The client's MCP servers beside the configured ones (its own win a name both give).
        settings
            .mcp
            .retain(|l| !req.mcp_servers.iter().any(|s| s.name == l.server.name));
        settings
            .mcp
            .extend(req.mcp_servers.iter().map(|s| crate::mcp::Listed {
                server: s.clone(),
                from: "acp",
                enabled: true,
            }));
        let mut parts = crate::session::build(&settings, req.resume.as_deref())
            .await
            .map_err(|e| Error::Open(format!("{e:#}")))?;
        let memory_api = req.memory_api.clone();
        parts.exec.personal.scope = req.scope;
        if let Some(api) = &memory_api {
            parts.exec.personal.memory = None;
            parts.exec.memory_api = Some(api.clone());
        }
        // Said by the ACP side (on stderr and in the session's `_meta`).
        let mcp_notices = std::mem::take(&mut parts.mcp_notices);
        let models: Arc<dyn ModelChoice> = Arc::new(parts.client.clone());
        let memory_entries = match &memory_api {
            Some(api) => {
                Some(harness_agent::memory_api::entries(&crate::memory_api::Http, api).await)
            }
            None => None,
        };
        // The person's prompt commands of the session's directory (those of MCP servers
        // are expanded at the terminal only).
        let commands = crate::custom::load(&req.cwd, &settings.dirs.config_file, None);
        Ok(Opened {
            session: parts.into_builder(),
            mode: settings.mode,
            models: Some(models),
            memory_entries,
            mcp_notices,
            commands,
        })
    }
}
