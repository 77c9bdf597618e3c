//! Connected servers: starting one (a child in its own process group, or an HTTP endpoint),
//! listing its tools, calling one within a limit.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_agent::RegisteredTool;
use harness_model::CancellationToken;
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use tokio::io::AsyncReadExt as _;

use crate::{
    Error, Limits, MAX_NAME, Result, ServerConfig, Transport, resources, risk, schema, tool_name,
};

/// How much of a child's stderr is kept, to say why it failed.
const STDERR_TAIL: usize = 2000;

/// One tool of a server, as offered.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTool {
    /// Its name on the server.
    pub tool: String,
    /// As the session offers it.
    pub offered: RegisteredTool,
}

/// One prompt of a server (offered to the person as `/mcp__server__prompt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPrompt {
    /// Its name on the server.
    pub name: String,
    /// What it is for, as the server says.
    pub description: String,
    /// Its arguments in order: name, and whether it must be given.
    pub arguments: Vec<(String, bool)>,
}

/// A connected server and its tools.
pub struct Server {
    name: String,
    service: RunningService<RoleClient, ()>,
    tools: Vec<ServerTool>,
    prompts: Vec<ServerPrompt>,
    /// `mcp__SERVER__read_resource`, where the server offers resources.
    resources: Option<RegisteredTool>,
    stderr: Arc<Mutex<String>>,
    limits: Limits,
    // Declared last: kills the child's group after the service has let go of it.
    group: Option<GroupKill>,
}

/// Kills a child's whole process group when dropped (the server and anything it started).
struct GroupKill(i32);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.0) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Starts a server's process (its own process group) and shakes hands with it over stdio,
/// keeping the tail of what it writes to stderr in `stderr`.
async fn start(
    config: &ServerConfig,
    command: &str,
    cmd: tokio::process::Command,
    limits: Limits,
    stderr: &Arc<Mutex<String>>,
) -> Result<(RunningService<RoleClient, ()>, Option<GroupKill>)> {
    let (child, err) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Spawn {
            server: config.name.clone(),
            command: command.to_owned(),
            reason: e.to_string(),
        })?;
    let group = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .map(GroupKill);
    let reader = err.map(|err| tokio::spawn(keep_tail(err, stderr.clone())));
    let serving = timeout(config, "initialize", limits.start, ().serve(child)).await;
    match serving? {
        Ok(s) => Ok((s, group)),
        Err(e) => {
            // What it said before it went, read to its end.
            if let Some(r) = reader {
                let _ = tokio::time::timeout(Duration::from_secs(2), r).await;
            }
            Err(Error::Handshake {
                server: config.name.clone(),
                reason: with_stderr(&handshake_failure(&e), stderr),
            })
        }
    }
}

/// Reads a server's stderr to its end, keeping its last [`STDERR_TAIL`] bytes in `keep`.
async fn keep_tail(mut err: tokio::process::ChildStderr, keep: Arc<Mutex<String>>) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = err.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if let Ok(mut s) = keep.lock() {
            s.push_str(&String::from_utf8_lossy(&buf[..n]));
            let len = s.len();
            if len > STDERR_TAIL {
                let mut cut = len - STDERR_TAIL;
                while !s.is_char_boundary(cut) {
                    cut += 1;
                }
                s.drain(..cut);
            }
        }
    }
}

/// Reaches a server over streamable HTTP (its bearer token read from the environment now, its
/// extra headers) and shakes hands with it.
async fn reach(
    config: &ServerConfig,
    url: &str,
    bearer_token_env: Option<&str>,
    headers: &[(String, String)],
    limits: Limits,
) -> Result<RunningService<RoleClient, ()>> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(var) = bearer_token_env {
        let token = std::env::var(var).map_err(|_| Error::MissingVar {
            server: config.name.clone(),
            var: var.to_owned(),
        })?;
        cfg = cfg.auth_header(token);
    }
    let mut custom = std::collections::HashMap::new();
    for (k, v) in headers {
        let bad = |why: String| Error::Handshake {
            server: config.name.clone(),
            reason: format!("its header {k:?} cannot be sent: {why}"),
        };
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| bad(e.to_string()))?;
        let value = reqwest::header::HeaderValue::from_str(v).map_err(|e| bad(e.to_string()))?;
        custom.insert(name, value);
    }
    if !custom.is_empty() {
        cfg = cfg.custom_headers(custom);
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(limits.start)
        .build()
        .map_err(|e| Error::Handshake {
            server: config.name.clone(),
            reason: e.to_string(),
        })?;
    let transport = StreamableHttpClientTransport::with_client(client, cfg);
    let serving = timeout(config, "initialize", limits.start, ().serve(transport)).await;
    serving?.map_err(|e| Error::Handshake {
        server: config.name.clone(),
        reason: handshake_failure(&e),
    })
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.name)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Starts (or reaches) a server and lists its tools, within `limits.start`; the notices say
    /// which tools were dropped and why.
    pub async fn connect(config: &ServerConfig, limits: Limits) -> Result<(Server, Vec<String>)> {
        let stderr = Arc::new(Mutex::new(String::new()));
        let (service, group) = match &config.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env).kill_on_drop(true).process_group(0);
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                start(config, command, cmd, limits, &stderr).await?
            }
            Transport::Http {
                url,
                bearer_token_env,
                headers,
            } => (
                reach(config, url, bearer_token_env.as_deref(), headers, limits).await?,
                None,
            ),
        };
        let listed = timeout(
            config,
            "tools/list",
            limits.start,
            service.peer().list_all_tools(),
        )
        .await?
        .map_err(|e| Error::List {
            server: config.name.clone(),
            reason: with_stderr(&e.to_string(), &stderr),
        })?;
        let (tools, mut notices) = offer(config, &listed);
        let prompts = list_prompts(config, &service, limits.start)
            .await
            .unwrap_or_else(|e| {
                notices.push(e.to_string());
                Vec::new()
            });
        let resources = service
            .peer_info()
            .is_some_and(|i| i.capabilities.resources.is_some())
            .then(|| resources::offered(&config.name, config.defer))
            .filter(|r| {
                let taken = tools.iter().any(|t| t.offered.name == r.name);
                if taken {
                    notices.push(format!(
                        "the resources of the MCP server `{}` are not offered: its own tool is already offered as `{}`",
                        config.name, r.name
                    ));
                }
                !taken
            });
        Ok((
            Server {
                name: config.name.clone(),
                service,
                tools,
                prompts,
                resources,
                stderr,
                limits,
                group,
            },
            notices,
        ))
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id of its child (the leader of the child's process group), for a stdio
    /// server.
    pub fn pid(&self) -> Option<i32> {
        self.group.as_ref().map(|g| g.0)
    }

    /// Its tools, as offered.
    pub fn tools(&self) -> &[ServerTool] {
        &self.tools
    }

    /// Calls its tool `tool` (its own name) with `arguments`: the text the model reads and
    /// whether it is an error. A server that died, hangs past the limit, or answers what is not
    /// MCP is an error text saying so; `cancel` ends the wait (the server is told).
    pub async fn call(
        &self,
        tool: &str,
        arguments: &Value,
        cancel: &CancellationToken,
    ) -> (String, bool) {
        if self.service.is_transport_closed() {
            return (self.gone(), true);
        }
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = match arguments {
            Value::Object(m) => Some(m.clone()),
            Value::Null => None,
            other => {
                return (
                    format!("the arguments of an MCP tool are an object, not {other}"),
                    true,
                );
            }
        };
        let seconds = self.limits.call.as_secs();
        let call = self.service.peer().call_tool(params);
        tokio::select! {
            _ = cancel.cancelled() => ("cancelled".to_owned(), true),
            r = tokio::time::timeout(self.limits.call, call) => match r {
                Err(_) => (
                    format!(
                        "the MCP server `{}` did not answer within {seconds} s; the call was abandoned",
                        self.name
                    ),
                    true,
                ),
                Ok(Err(e)) if self.service.is_transport_closed() || connection_ended(&e) => {
                    (self.gone(), true)
                }
                Ok(Err(e)) => (
                    format!("the MCP server `{}` failed the call: {e}", self.name),
                    true,
                ),
                Ok(Ok(result)) => match serde_json::to_value(&result) {
                    Ok(v) => crate::map_result(&v),
                    Err(e) => (format!("the MCP server `{}` answered what cannot be read: {e}", self.name), true),
                },
            }
        }
    }

    /// Its prompts.
    pub fn prompts(&self) -> &[ServerPrompt] {
        &self.prompts
    }

    /// Its prompt `prompt` with `arguments`, as the text of a person's turn: its messages'
    /// texts (an embedded resource's text too) one after another; or what went wrong.
    pub async fn prompt(
        &self,
        prompt: &str,
        arguments: std::collections::BTreeMap<String, String>,
    ) -> std::result::Result<String, String> {
        if self.service.is_transport_closed() {
            return Err(self.gone());
        }
        let mut params = rmcp::model::GetPromptRequestParams::new(prompt.to_owned());
        if !arguments.is_empty() {
            params.arguments = Some(
                arguments
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect(),
            );
        }
        let got = tokio::time::timeout(self.limits.call, self.service.peer().get_prompt(params))
            .await
            .map_err(|_| {
                format!(
                    "the MCP server `{}` did not give its prompt in time",
                    self.name
                )
            })?
            .map_err(|e| {
                format!(
                    "the MCP server `{}` did not give its prompt {prompt}: {e}",
                    self.name
                )
            })?;
        let v = serde_json::to_value(&got).map_err(|e| e.to_string())?;
        let texts: Vec<String> = v["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| {
                let c = &m["content"];
                c["text"]
                    .as_str()
                    .or_else(|| c["resource"]["text"].as_str())
                    .map(str::to_owned)
            })
            .collect();
        if texts.is_empty() {
            return Err(format!(
                "the MCP server `{}` gave prompt {prompt} with no text",
                self.name
            ));
        }
        Ok(texts.join("\n\n"))
    }

    /// Its resource tool (`mcp__SERVER__read_resource`), where it offers resources.
    pub fn resource_tool(&self) -> Option<&RegisteredTool> {
        self.resources.as_ref()
    }

    /// The resource `uri` as the model reads it; without one, the listing of its resources and
    /// URI templates. An error text where the server fails, is gone, or takes past the call
    /// limit; `cancel` ends the wait.
    pub async fn read_resource(
        &self,
        uri: Option<&str>,
        cancel: &CancellationToken,
    ) -> (String, bool) {
        if self.service.is_transport_closed() {
            return (self.gone(), true);
        }
        let peer = self.service.peer();
        let work = async {
            match uri {
                None => {
                    let listed = peer.list_all_resources().await?;
                    // Templates are optional for a server: one that has none may refuse the list.
                    let templates = peer.list_all_resource_templates().await.unwrap_or_default();
                    let resources: Vec<Value> = listed
                        .iter()
                        .filter_map(|r| serde_json::to_value(r).ok())
                        .collect();
                    let templates: Vec<Value> = templates
                        .iter()
                        .filter_map(|t| serde_json::to_value(t).ok())
                        .collect();
                    Ok::<_, rmcp::ServiceError>(resources::listing(
                        &self.name, &resources, &templates,
                    ))
                }
                Some(uri) => {
                    let read = peer
                        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
                        .await?;
                    let v = serde_json::to_value(&read).unwrap_or(Value::Null);
                    Ok(resources::contents(uri, &v))
                }
            }
        };
        let seconds = self.limits.call.as_secs();
        tokio::select! {
            _ = cancel.cancelled() => ("cancelled".to_owned(), true),
            r = tokio::time::timeout(self.limits.call, work) => match r {
                Err(_) => (
                    format!("the MCP server `{}` did not answer within {seconds} s", self.name),
                    true,
                ),
                Ok(Err(e)) if self.service.is_transport_closed() || connection_ended(&e) => {
                    (self.gone(), true)
                }
                Ok(Err(e)) => (
                    match uri {
                        Some(uri) => format!("the MCP server `{}` could not read {uri}: {e}", self.name),
                        None => format!("the MCP server `{}` could not list its resources: {e}", self.name),
                    },
                    true,
                ),
                Ok(Ok(text)) => (text, false),
            }
        }
    }

    /// Whether its connection has ended (the child died, the endpoint went away).
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    fn gone(&self) -> String {
        with_stderr(
            &format!(
                "the MCP server `{}` is not running any more (it ended or closed its connection); its tools cannot be called in this session",
                self.name
            ),
            &self.stderr,
        )
    }
}

/// The prompts of a server that says it has some (none otherwise).
async fn list_prompts(
    config: &ServerConfig,
    service: &RunningService<RoleClient, ()>,
    limit: Duration,
) -> Result<Vec<ServerPrompt>> {
    let offers = service
        .peer_info()
        .is_some_and(|i| i.capabilities.prompts.is_some());
    if !offers {
        return Ok(Vec::new());
    }
    let listed = timeout(
        config,
        "prompts/list",
        limit,
        service.peer().list_all_prompts(),
    )
    .await?
    .map_err(|e| Error::List {
        server: config.name.clone(),
        reason: e.to_string(),
    })?;
    Ok(listed
        .into_iter()
        .map(|p| ServerPrompt {
            description: p.description.or(p.title).unwrap_or_default(),
            arguments: p
                .arguments
                .unwrap_or_default()
                .into_iter()
                .map(|a| (a.name, a.required.unwrap_or(false)))
                .collect(),
            name: p.name,
        })
        .collect())
}

/// Whether `e` says the connection itself ended: closed, or a write to a child that is gone
/// (the service may not have seen the close yet when the call's write fails).
fn connection_ended(e: &rmcp::ServiceError) -> bool {
    use std::error::Error as _;
    match e {
        rmcp::ServiceError::TransportClosed => true,
        rmcp::ServiceError::TransportSend(t) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = t.source();
            while let Some(err) = source {
                if let Some(io) = err.downcast_ref::<std::io::Error>() {
                    return matches!(
                        io.kind(),
                        std::io::ErrorKind::BrokenPipe
                            | std::io::ErrorKind::ConnectionReset
                            | std::io::ErrorKind::UnexpectedEof
                    );
                }
                source = err.source();
            }
            false
        }
        _ => false,
    }
}

/// Why the handshake failed, in words.
fn handshake_failure(e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::TransportError { .. } | E::ConnectionClosed(_) => {
            "it ended or closed its connection before answering `initialize`".to_owned()
        }
        other => format!("its answer to `initialize` is not MCP's: {other}"),
    }
}

/// `what`, with the end of the child's stderr where it wrote something.
fn with_stderr(what: &str, stderr: &Mutex<String>) -> String {
    let tail = stderr
        .lock()
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    if tail.is_empty() {
        what.to_owned()
    } else {
        let last: Vec<&str> = tail.lines().rev().take(5).collect();
        let last: Vec<&str> = last.into_iter().rev().collect();
        format!("{what}; its stderr ended with:\n{}", last.join("\n"))
    }
}

async fn timeout<T>(
    config: &ServerConfig,
    what: &str,
    limit: Duration,
    fut: impl std::future::Future<Output = T>,
) -> Result<T> {
    tokio::time::timeout(limit, fut)
        .await
        .map_err(|_| Error::Timeout {
            server: config.name.clone(),
            what: what.to_owned(),
            seconds: limit.as_secs(),
        })
}

/// The tools a server listed, as offered, and a notice for each one dropped.
fn offer(config: &ServerConfig, listed: &[Tool]) -> (Vec<ServerTool>, Vec<String>) {
    let mut tools = Vec::new();
    let mut notices = Vec::new();
    for t in listed {
        let name = tool_name(&config.name, &t.name);
        let drop = |why: String| {
            format!(
                "the MCP tool `{}` of the server `{}` is not offered: {why}",
                t.name, config.name
            )
        };
        if name.len() > MAX_NAME {
            notices.push(drop(format!(
                "its name `{name}` is longer than {MAX_NAME} characters"
            )));
            continue;
        }
        if tools.iter().any(|x: &ServerTool| x.offered.name == name) {
            notices.push(drop(format!("another tool is already offered as `{name}`")));
            continue;
        }
        let parameters = match schema::check(&Value::Object((*t.input_schema).clone())) {
            Ok(p) => p,
            Err(why) => {
                notices.push(drop(why));
                continue;
            }
        };
        let annotations = t.annotations.as_ref();
        let mut description = t
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .or(t.title.as_deref())
            .unwrap_or("(no description)")
            .to_owned();
        description.push_str(&format!(" (MCP server `{}`)", config.name));
        tools.push(ServerTool {
            tool: t.name.to_string(),
            offered: RegisteredTool {
                name,
                description,
                parameters,
                risk: risk(annotations.and_then(|a| a.read_only_hint)),
                exclusive: false,
                deferred: config.defer,
            },
        });
    }
    (tools, notices)
}

/// The configured servers of a session, connected.
#[derive(Debug, Default)]
pub struct Mcp {
    servers: Vec<Server>,
}

impl Mcp {
    /// Starts every server at once, each within `limits.start`: those that start, and a notice
    /// for each that does not and each tool dropped.
    pub async fn start(configs: &[ServerConfig], limits: Limits) -> (Mcp, Vec<String>) {
        let started =
            futures_util::future::join_all(configs.iter().map(|c| Server::connect(c, limits)))
                .await;
        let mut servers = Vec::new();
        let mut notices = Vec::new();
        for r in started {
            match r {
                Ok((s, n)) => {
                    notices.extend(n);
                    servers.push(s);
                }
                Err(e) => notices.push(e.to_string()),
            }
        }
        (Mcp { servers }, notices)
    }

    /// The connected servers.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// Every tool of every server, as offered, each server's resource tool after its own.
    pub fn tools(&self) -> Vec<RegisteredTool> {
        self.servers
            .iter()
            .flat_map(|s| {
                s.tools
                    .iter()
                    .map(|t| t.offered.clone())
                    .chain(s.resources.clone())
            })
            .collect()
    }

    /// Whether `name` is one of its tools.
    pub fn has(&self, name: &str) -> bool {
        self.find(name).is_some() || self.resource_server(name).is_some()
    }

    fn resource_server(&self, name: &str) -> Option<&Server> {
        self.servers
            .iter()
            .find(|s| s.resources.as_ref().is_some_and(|r| r.name == name))
    }

    fn find(&self, name: &str) -> Option<(&Server, &ServerTool)> {
        self.servers.iter().find_map(|s| {
            s.tools
                .iter()
                .find(|t| t.offered.name == name)
                .map(|t| (s, t))
        })
    }

    /// Every server's prompts as the person's commands (`mcp__server__prompt`).
    pub fn commands(&self) -> Vec<harness_agent::custom::PromptCommand> {
        use harness_agent::custom::{PromptCommand, Source};
        self.servers
            .iter()
            .flat_map(|s| {
                s.prompts.iter().map(|p| PromptCommand {
                    name: tool_name(&s.name, &p.name),
                    description: p.description.lines().next().unwrap_or_default().to_owned(),
                    argument_hint: (!p.arguments.is_empty()).then(|| {
                        p.arguments
                            .iter()
                            .map(|(n, req)| if *req { n.clone() } else { format!("[{n}]") })
                            .collect::<Vec<_>>()
                            .join(" ")
                    }),
                    body: String::new(),
                    source: Source::Mcp {
                        server: s.name.clone(),
                        prompt: p.name.clone(),
                        arguments: p.arguments.clone(),
                    },
                })
            })
            .collect()
    }

    /// The text of the MCP prompt command `command` with the person's `args`.
    pub async fn expand(
        &self,
        command: &harness_agent::custom::PromptCommand,
        args: &str,
    ) -> std::result::Result<String, String> {
        let harness_agent::custom::Source::Mcp { server, prompt, .. } = &command.source else {
            return Ok(command.expand(args));
        };
        let arguments = command.mcp_arguments(args)?;
        match self.servers.iter().find(|s| &s.name == server) {
            Some(s) => s.prompt(prompt, arguments).await,
            None => Err(format!("the MCP server `{server}` is not running")),
        }
    }

    /// Calls the tool offered as `name`.
    pub async fn call(
        &self,
        name: &str,
        arguments: &Value,
        cancel: &CancellationToken,
    ) -> (String, bool) {
        if let Some((server, tool)) = self.find(name) {
            return server.call(&tool.tool, arguments, cancel).await;
        }
        let Some(server) = self.resource_server(name) else {
            return (format!("there is no MCP tool `{name}`"), true);
        };
        match arguments.get("uri") {
            None | Some(Value::Null) => server.read_resource(None, cancel).await,
            Some(Value::String(uri)) if uri.trim().is_empty() => {
                server.read_resource(None, cancel).await
            }
            Some(Value::String(uri)) => server.read_resource(Some(uri.trim()), cancel).await,
            Some(other) => (format!("`uri` is a string, not {other}"), true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::connection_ended;
    use rmcp::transport::{DynamicTransportError, TokioChildProcess};
    use rmcp::{RoleClient, ServiceError};

    fn send_error(kind: std::io::ErrorKind) -> ServiceError {
        ServiceError::TransportSend(DynamicTransportError::new::<TokioChildProcess, RoleClient>(
            std::io::Error::from(kind),
        ))
    }

    /// A call whose write meets a dead child is "gone", even before the service has seen the
    /// close (the race CI met); other send failures stay the call's own failure.
    #[test]
    fn a_broken_pipe_is_the_connection_ending() {
        assert!(connection_ended(&send_error(
            std::io::ErrorKind::BrokenPipe
        )));
        assert!(connection_ended(&ServiceError::TransportClosed));
        assert!(!connection_ended(&send_error(
            std::io::ErrorKind::PermissionDenied
        )));
        assert!(!connection_ended(&ServiceError::UnexpectedResponse));
    }
}
