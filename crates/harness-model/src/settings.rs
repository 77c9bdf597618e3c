//! Which model server and which model a front end talks to, by one rule for every product: the
//! named endpoints of a config file, the flags and the environment merged (flags over the
//! environment over the file), and the link opened — the server asked which model it serves
//! when none is named. The CLI and the web server both configure their models here, with the
//! same flags (`--endpoint`, `--model`, `--base-url`, `--api-key-env`), the same variables
//! (`OPENAI_BASE_URL`, `OPENAI_MODEL`, `OPENAI_API_KEY`, `LLEMBAS_SERVER`) and the same
//! `[endpoints.NAME]` tables.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{
    CancellationToken, Catalogue, Endpoint, Error, ModelClient, ModelInfo, ModelOverrides,
};

/// The environment a resolution reads: a seam, so that tests need not touch the process's.
pub trait Env {
    /// The value of a variable, when set and not empty.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process's environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

/// One named endpoint of a config file (`[endpoints.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// The base URL (…/v1).
    pub base_url: String,
    /// The model id on that server.
    #[serde(default)]
    pub model: Option<String>,
    /// The variable holding the key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The context window, overriding the catalogue.
    #[serde(default)]
    pub context: Option<u64>,
    /// The output limit, overriding the catalogue.
    #[serde(default)]
    pub output: Option<u64>,
    /// How many requests the server takes at once.
    #[serde(default)]
    pub capacity: Option<u32>,
    /// The kind of server (`llama.cpp`, `vllm`, `ollama`, ...: a name of the spec's
    /// `quirks.json`), for the quirks it is known to have.
    #[serde(default)]
    pub server: Option<String>,
    /// Whether the model calls tools, overriding the catalogue (`false`: none are offered).
    #[serde(default)]
    pub tools: Option<bool>,
    /// The longest one model call may take, retries included, in seconds (`Endpoint::deadline`).
    #[serde(default)]
    pub deadline: Option<u64>,
}

/// The endpoints a config file names.
#[derive(Debug, Clone, Copy)]
pub struct EndpointTable<'a> {
    /// `[endpoints.NAME]`.
    pub endpoints: &'a BTreeMap<String, EndpointConfig>,
    /// `default_endpoint`.
    pub default: Option<&'a str>,
    /// The file as errors name it.
    pub file: &'a str,
}

/// What the command line said of the model.
#[derive(Debug, Clone, Default)]
pub struct ModelFlags {
    /// `--endpoint NAME`.
    pub endpoint: Option<String>,
    /// `--model ID` (or the name of an endpoint).
    pub model: Option<String>,
    /// `--base-url URL`.
    pub base_url: Option<String>,
    /// `--api-key-env VAR`.
    pub api_key_env: Option<String>,
}

/// Which model server and model a session talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSettings {
    /// The base URL (…/v1), without a trailing slash.
    pub base_url: String,
    /// The model id; `None` means "ask the server which it serves".
    pub model: Option<String>,
    /// The API key, when one is set.
    pub api_key: Option<String>,
    /// The context window the person configured (over the catalogue's).
    pub context: Option<u64>,
    /// The output limit the person configured.
    pub output: Option<u64>,
    /// The server's capacity the person configured.
    pub capacity: Option<u32>,
    /// The kind of server, when configured.
    pub server: Option<String>,
    /// Whether the model calls tools, when configured.
    pub tools: Option<bool>,
    /// The longest one model call may take, in seconds, when configured.
    pub deadline: Option<u64>,
}

/// The start of the line said when no model server is configured; the front end ends it with
/// where its endpoints are configured.
pub const NO_MODEL: &str = "no model configured: set OPENAI_BASE_URL (and OPENAI_API_KEY if the server needs one), pass --base-url, or add an endpoint to";

fn setup(message: String) -> Error {
    Error::Setup(message)
}

/// The variables that may hold a model server's key: `OPENAI_API_KEY`, the one `--api-key-env`
/// names and every endpoint's `api_key_env`, each once. A front end keeps them out of the
/// environment of the commands it runs: the key is the harness's, not the model's.
pub fn key_variables(flags: &ModelFlags, table: &EndpointTable<'_>) -> Vec<String> {
    let mut vars = vec!["OPENAI_API_KEY".to_owned()];
    let named = flags.api_key_env.iter().chain(
        table
            .endpoints
            .values()
            .filter_map(|e| e.api_key_env.as_ref()),
    );
    for var in named {
        if !vars.contains(var) {
            vars.push(var.clone());
        }
    }
    vars
}

/// Merges flags, environment and the config file's endpoints. `Ok(None)`: no model server is
/// named anywhere (the front end says [`NO_MODEL`] when it needs one).
pub fn resolve(
    flags: &ModelFlags,
    env: &dyn Env,
    table: &EndpointTable<'_>,
) -> crate::Result<Option<ModelSettings>> {
    // An endpoint: named by --endpoint, or by --model when that names one, else the default.
    let named = flags.endpoint.clone().or_else(|| {
        flags
            .model
            .as_ref()
            .filter(|m| table.endpoints.contains_key(*m))
            .cloned()
    });
    let endpoint =
        match &named {
            Some(name) => {
                Some(table.endpoints.get(name).cloned().ok_or_else(|| {
                    setup(format!("no endpoint named {name:?} in {}", table.file))
                })?)
            }
            None => match table.default {
                Some(name) => Some(table.endpoints.get(name).cloned().ok_or_else(|| {
                    setup(format!(
                        "{}: default_endpoint {name:?} is not among its endpoints",
                        table.file
                    ))
                })?),
                None if table.endpoints.len() == 1 => table.endpoints.values().next().cloned(),
                None => None,
            },
        };
    let model_flag = flags
        .model
        .clone()
        .filter(|m| named.as_deref() != Some(m.as_str()));

    let base_url = flags
        .base_url
        .clone()
        .or_else(|| env.var("OPENAI_BASE_URL"))
        .or_else(|| endpoint.as_ref().map(|e| e.base_url.clone()));
    let Some(base_url) = base_url else {
        return Ok(None);
    };
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(setup(format!(
            "base URL {base_url:?} must start with http:// or https://"
        )));
    }
    let model = model_flag
        .or_else(|| env.var("OPENAI_MODEL"))
        .or_else(|| endpoint.as_ref().and_then(|e| e.model.clone()));
    let key_var = flags
        .api_key_env
        .clone()
        .or_else(|| endpoint.as_ref().and_then(|e| e.api_key_env.clone()));
    let api_key = match key_var {
        Some(var) => Some(
            env.var(&var)
                .ok_or_else(|| setup(format!("the API key variable {var} is not set")))?,
        ),
        None => env.var("OPENAI_API_KEY"),
    };
    let e = endpoint.unwrap_or_default();
    Ok(Some(ModelSettings {
        base_url: base_url.trim_end_matches('/').to_owned(),
        model,
        api_key,
        context: e.context,
        output: e.output,
        capacity: e.capacity,
        server: env.var("LLEMBAS_SERVER").or(e.server),
        tools: e.tools,
        deadline: e.deadline,
    }))
}

impl ModelSettings {
    /// The server at `base_url` (a trailing slash dropped), nothing else configured.
    pub fn new(base_url: &str) -> ModelSettings {
        ModelSettings {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: None,
            api_key: None,
            context: None,
            output: None,
            capacity: None,
            server: None,
            tools: None,
            deadline: None,
        }
    }

    /// What the person configured over the catalogue's metadata.
    pub fn overrides(&self) -> ModelOverrides {
        ModelOverrides {
            context: self.context,
            output: self.output,
            capacity: self.capacity,
            tools: self.tools,
            ..ModelOverrides::default()
        }
    }

    fn endpoint(&self) -> Endpoint {
        let mut endpoint = Endpoint::new(self.base_url.clone());
        endpoint.api_key = self.api_key.clone();
        if let Some(server) = &self.server {
            endpoint.server = server.clone();
        }
        if let Some(secs) = self.deadline {
            endpoint.deadline = std::time::Duration::from_secs(secs);
        }
        endpoint
    }

    /// The link to model `name` on this endpoint, with the catalogue's metadata for it and the
    /// person's overrides (no I/O).
    pub fn link(&self, name: &str) -> crate::Result<ModelClient> {
        let info = ModelInfo::resolve(Catalogue::embedded()?, name, &self.overrides());
        ModelClient::new(self.endpoint(), info)
    }

    /// The link, and the model's id: the one configured, else the one model the server lists.
    pub async fn connect(
        &self,
        cancel: &CancellationToken,
    ) -> crate::Result<(ModelClient, String)> {
        let name = self.model_id(cancel).await?;
        Ok((self.link(&name)?, name))
    }

    /// The model's id: the one configured, else the one model the server lists. A failure
    /// says what to do about it, fitted to why it failed.
    pub async fn model_id(&self, cancel: &CancellationToken) -> crate::Result<String> {
        if let Some(name) = &self.model {
            return Ok(name.clone());
        }
        let listed = self.link("")?.list_models(cancel).await.map_err(|e| {
            // Naming a model does not help a server that is down or refuses the key.
            let hint = match &e {
                Error::Transport { .. } => {
                    "is the server running? (OPENAI_BASE_URL or --base-url names it)"
                }
                Error::Server(me) if matches!(me.status, Some(401 | 403)) => {
                    "the API key was refused: check OPENAI_API_KEY (or the variable --api-key-env names)"
                }
                _ => "pass --model or set OPENAI_MODEL",
            };
            setup(format!(
                "cannot ask {} which model it serves ({e}): {hint}",
                self.base_url
            ))
        })?;
        match listed.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(setup(format!(
                "{} lists no model: pass --model or set OPENAI_MODEL",
                self.base_url
            ))),
            many => Err(setup(format!(
                "{} serves {} models: pass --model with one of {}",
                self.base_url,
                many.len(),
                many.join(", ")
            ))),
        }
    }
}

impl ModelClient {
    /// Whether the server lists `name` among its models; `None` when it does not say (the list
    /// cannot be read, or is empty): a front end then takes the person at their word.
    pub async fn serves(&self, name: &str, cancel: &CancellationToken) -> Option<bool> {
        let list = self.list_models(cancel).await.ok()?;
        (!list.is_empty()).then(|| list.iter().any(|m| m == name))
    }
}

/// Whether model `wanted` is the model `running` (its id, or an alias of the same catalogue
/// entry).
pub fn same_model(wanted: &str, running: &str) -> bool {
    if wanted == running {
        return true;
    }
    let Ok(cat) = Catalogue::embedded() else {
        return false;
    };
    match (cat.find(wanted), cat.find(running)) {
        (Some(a), Some(b)) => a.id == b.id,
        _ => false,
    }
}
