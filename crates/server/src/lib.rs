//! `llembas-server`, the self-hosted web chat UI, as a library the binary calls.
//!
//! One process, one SQLite file and one file tree under the data directory: accounts and
//! sign-in ([`auth`]), chats on the shared runtime (`harness-agent`, [`chats`]) stored row by
//! row ([`store`]), each working in the server's tree through the user's view ([`world`]), an
//! HTTP API ([`api`]) whose run events stream over one resumable SSE stream per page, and the
//! harness as a chat sees it ([`catalog`]). It holds no harness logic.

pub mod admin;
pub mod api;
pub mod auth;
pub mod catalog;
pub mod chats;
pub mod db;
pub mod device_chats;
pub mod device_ext;
pub mod device_links;
pub mod devices;
mod error;
pub mod events;
pub mod forge;
pub mod git;
pub mod history;
pub mod images;
pub mod link;
pub mod marks;
pub mod mcp;
pub mod memory;
pub mod mounts;
pub mod page;
pub mod pages;
pub mod password;
pub mod paths;
pub mod python;
pub mod redirect;
pub mod removal;
pub mod search;
pub mod settings;
pub mod shares;
pub mod slots;
pub mod store;
pub mod streams;
pub mod throttle;
pub mod verbs;
pub mod world;

use std::io::BufRead as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::db::Db;
use anyhow::Context as _;
use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use harness_fs::{Backend, HostBackend, HostOptions};

pub use error::{Error, Result};

/// The server's command line; options work before or after a subcommand.
#[derive(Debug, clap::Parser)]
#[command(name = "llembas-server", version, about = "The LLeMbas web chat UI")]
pub struct Args {
    /// Address to listen on.
    #[arg(long, global = true, alias = "bind", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The data directory: the database, the users' file tree, memory and skills (default: the
    /// XDG data directory's `llembas-server`).
    #[arg(long, global = true)]
    pub data: Option<PathBuf>,
    /// The database: `postgres://USER@HOST/DB` for PostgreSQL (several server processes may share
    /// it), else the SQLite file `DATA/llembas.db`. Overrides DATABASE_URL.
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// How long a run stays this process's without a renewal, in seconds: a run whose process
    /// died is taken over as interrupted this long after its last renewal (PostgreSQL).
    #[arg(long, global = true, default_value_t = 30)]
    pub run_lease: u64,
    /// The OpenAI-compatible model server's base URL (…/v1). Overrides OPENAI_BASE_URL.
    #[arg(long, global = true)]
    pub base_url: Option<String>,
    /// The model chats use, or an endpoint's name (default: the one the server lists).
    /// Overrides OPENAI_MODEL.
    #[arg(long, global = true)]
    pub model: Option<String>,
    /// The configured endpoint to use (`[endpoints.NAME]` of the `--config` file).
    #[arg(long, global = true)]
    pub endpoint: Option<String>,
    /// The variable holding the API key (default: OPENAI_API_KEY).
    #[arg(long, global = true)]
    pub api_key_env: Option<String>,
    /// A TOML file of model endpoints, shaped as the CLI's config: `default_endpoint` and
    /// `[endpoints.NAME]` tables (`base_url`, `model`, `api_key_env`, `server`, `context`, ...).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Mark the sign-in cookie `Secure` (set this when the server is reached over https).
    #[arg(long, global = true)]
    pub secure_cookie: bool,
    /// Let anyone sign up (`POST /api/auth/signup`); such an account waits, `pending`, for an
    /// admin to approve it. Off by default.
    #[arg(long, global = true)]
    pub allow_signups: bool,
    /// What a forge mount's `token_env` must start with: the server sends that variable's value
    /// to the mount's remote, so an admin of the web UI reaches no other variable of its
    /// environment (its model keys, its database URL).
    #[arg(long, global = true, default_value = FORGE_TOKEN_PREFIX)]
    pub forge_token_prefix: String,
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Manage admins.
    Admin {
        /// What to do.
        #[command(subcommand)]
        what: AdminCommand,
    },
    /// Manage users.
    User {
        /// What to do.
        #[command(subcommand)]
        what: UserCommand,
    },
}

/// `admin …`.
#[derive(Debug, clap::Subcommand)]
pub enum AdminCommand {
    /// Create an admin account; the password is read from the terminal (not echoed) or stdin.
    Create {
        /// The account's name.
        #[arg(long)]
        username: String,
    },
}

/// `user …`.
#[derive(Debug, clap::Subcommand)]
pub enum UserCommand {
    /// Add a user account; the password is read from the terminal (not echoed) or stdin.
    Add {
        /// The account's name.
        #[arg(long)]
        username: String,
    },
    /// Set an account's password anew (read as `add` reads it); its sign-in sessions and tokens
    /// end.
    Password {
        /// The account's name.
        #[arg(long)]
        username: String,
    },
}

/// What a server is started with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The data directory.
    pub data: PathBuf,
    /// The database URL (`None`: the SQLite file `DATA/llembas.db`).
    pub database_url: Option<String>,
    /// How long a run is this process's without a renewal (see [`Args::run_lease`]).
    pub run_lease: std::time::Duration,
    /// The model endpoint (`None`: none is configured; chats say so).
    pub model: Option<harness_model::settings::ModelSettings>,
    /// Whether the cookie is `Secure`.
    pub secure_cookie: bool,
    /// Whether anyone may sign up (as `pending`).
    pub allow_signups: bool,
    /// How long a chat's session stays in memory idle, with no page of the chat open, before
    /// it is dropped (it is built again from the database when it is needed).
    pub idle_session: std::time::Duration,
    /// What a forge mount's `token_env` must start with ([`Args::forge_token_prefix`]).
    pub forge_token_prefix: String,
}

/// [`Config::forge_token_prefix`] by default.
pub const FORGE_TOKEN_PREFIX: &str = "LLEMBAS_FORGE_";

/// [`Config::idle_session`] by default: a client that sends its next message within it (a
/// script over the API) finds the session still built.
pub const IDLE_SESSION: std::time::Duration = std::time::Duration::from_secs(30);

/// The `--config` file: the model endpoints, in the CLI config's shape.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    default_endpoint: Option<String>,
    #[serde(default)]
    endpoints: std::collections::BTreeMap<String, harness_model::settings::EndpointConfig>,
}

impl Config {
    /// The configuration the arguments and the environment give.
    pub fn from_args(args: &Args) -> anyhow::Result<Config> {
        let data = match &args.data {
            Some(d) => d.clone(),
            None => dirs::data_dir()
                .context("no XDG data directory is known here: pass --data DIR")?
                .join("llembas-server"),
        };
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                toml::from_str::<ConfigFile>(&text)
                    .with_context(|| format!("{} is not valid", path.display()))?
            }
            None => ConfigFile::default(),
        };
        let flags = harness_model::settings::ModelFlags {
            endpoint: args.endpoint.clone(),
            model: args.model.clone(),
            base_url: args.base_url.clone(),
            api_key_env: args.api_key_env.clone(),
        };
        let shown = args
            .config
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "--config".into());
        let table = harness_model::settings::EndpointTable {
            endpoints: &file.endpoints,
            default: file.default_endpoint.as_deref(),
            file: &shown,
        };
        let model =
            harness_model::settings::resolve(&flags, &harness_model::settings::ProcessEnv, &table)?;
        Ok(Config {
            data,
            database_url: args.database_url.clone().filter(|u| !u.is_empty()),
            run_lease: std::time::Duration::from_secs(args.run_lease.max(1)),
            model,
            secure_cookie: args.secure_cookie,
            allow_signups: args.allow_signups,
            idle_session: IDLE_SESSION,
            forge_token_prefix: args.forge_token_prefix.clone(),
        })
    }
}

/// The running server's state, shared by its handlers.
pub struct App {
    /// The database.
    pub pool: Db,
    /// The data directory.
    pub data: PathBuf,
    /// The users' file tree (`DATA/files`), seen as `/`.
    pub tree: PathBuf,
    /// The host backend over the tree (every view shares it).
    pub backend: Arc<dyn Backend>,
    /// The model endpoint.
    pub model: Option<harness_model::settings::ModelSettings>,
    /// The model links made so far, by model name (every chat of a model shares one).
    pub links: std::sync::Mutex<std::collections::HashMap<String, Arc<harness_model::ModelClient>>>,
    /// The event log.
    pub hub: chats::Hub,
    /// The chats' transcripts' writer.
    pub transcripts: store::Transcripts,
    /// This process's name among those sharing the database (random, new at each start).
    pub instance: String,
    /// How long a run is this process's without a renewal.
    pub run_lease: std::time::Duration,
    /// How long an idle chat session no page shows stays built ([`Config::idle_session`]).
    pub idle_session: std::time::Duration,
    /// The chats running here.
    pub chats: chats::Chats,
    /// The chat pages open, and what runs wait for from them.
    pub pages: Arc<page::Pages>,
    /// The sign-in rate limit.
    pub limiter: auth::Limiter,
    /// Whether the cookie is `Secure`.
    pub secure_cookie: bool,
    /// Whether anyone may sign up (as `pending`).
    pub allow_signups: bool,
    /// What a forge mount's `token_env` must start with.
    pub forge_token_prefix: String,
    /// The model servers' slots, shared by every chat.
    pub capacity: Arc<harness_agent::CapacityGate>,
    /// The model requests at once of each model server ([`slots`]).
    pub slots: std::sync::atomic::AtomicU32,
    /// The tree's search index (the chats' `search`), kept in the database.
    pub search: Arc<search::ServerSearch>,
    /// The largest file the API reads or writes.
    pub max_file_bytes: usize,
    /// Set when the shutdown begins: no new chat or run, and a cancelled run is interrupted.
    pub stopping: std::sync::atomic::AtomicBool,
    /// Set when the runs have ended at shutdown: the event streams close.
    pub closed: tokio::sync::watch::Sender<bool>,
    /// The event streams open here, by user.
    pub streams: streams::Streams,
    /// The linked devices' live links.
    pub device_links: link::Links,
    /// The agent chats running on linked devices.
    pub device_chats: device_chats::DeviceChats,
}

impl App {
    /// Whether the shutdown has begun.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Refuses new work once the shutdown has begun (503).
    pub fn refuse_when_stopping(&self) -> Result<()> {
        if self.is_stopping() {
            return Err(Error::Unavailable(
                "the server is shutting down: try again when it is back".into(),
            ));
        }
        Ok(())
    }

    /// The shutdown's work: new runs are refused, the runs going on are cancelled and marked
    /// interrupted once their transcripts are closed, then the event streams end.
    pub async fn stop(self: &Arc<Self>) -> Result<usize> {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let ended = chats::interrupt_all(self).await;
        // A device chat's run too: its turn is cancelled on the device.
        let on_devices = device_chats::interrupt_all(self).await;
        // The closed transcripts' last rows and the last events are stored before the process
        // may end.
        self.transcripts.flush().await;
        self.hub.flush().await;
        self.closed.send_replace(true);
        Ok(ended?.len() + on_devices)
    }
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Fs(harness_fs::Error::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// The database file of a data directory (created with the directory).
pub async fn open_db(data: &Path) -> Result<Db> {
    std::fs::create_dir_all(data).map_err(|e| io_error(data, e))?;
    db::open(&db::sqlite_url(&data.join("llembas.db"))).await
}

/// The database a configuration names: its `database_url`, else the data directory's file.
pub async fn open_database(config: &Config) -> Result<Db> {
    match &config.database_url {
        Some(url) => db::open(url).await,
        None => open_db(&config.data).await,
    }
}

/// Opens the data directory (creating what is missing), runs the migrations, and recovers the
/// runs a dead process left: the server's state, ready to serve.
pub async fn open(config: &Config) -> Result<Arc<App>> {
    let pool = open_database(config).await?;
    let tree = config.data.join("files");
    for dir in [
        tree.join("home"),
        tree.join("shared"),
        config.data.join("locks"),
    ] {
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
    }
    let instance = db::random_id()?;
    // One writer per root (spec/filesystem.md): on SQLite a second server on this data directory
    // is refused by the tree's lock. Processes sharing a PostgreSQL database share the tree on
    // purpose and take their own locks: the database gives each chat one running run at a
    // time, and each write stays atomic and refuses a file changed since it was read.
    let lock_dir = match config.database_url {
        Some(_) => config.data.join("locks").join(&instance),
        None => config.data.join("locks"),
    };
    let options = HostOptions {
        lock_dir: Some(lock_dir),
        ..HostOptions::default()
    };
    let max_file_bytes = usize::try_from(options.max_file_bytes).unwrap_or(usize::MAX);
    let backend: Arc<dyn Backend> = Arc::new(HostBackend::open(&tree, options)?);
    let search = Arc::new(
        search::ServerSearch::open(
            pool.clone(),
            search::TREE_ROOT,
            search::embedder_dir().as_deref(),
        )
        .await?,
    );
    let app = Arc::new(App {
        hub: chats::Hub::new(pool.clone(), &instance),
        transcripts: store::Transcripts::new(pool.clone()),
        instance,
        run_lease: config.run_lease,
        idle_session: config.idle_session,
        pool,
        data: config.data.clone(),
        tree,
        backend,
        model: config.model.clone(),
        links: std::sync::Mutex::default(),
        chats: chats::Chats::default(),
        pages: Arc::default(),
        limiter: auth::Limiter::default(),
        secure_cookie: config.secure_cookie,
        allow_signups: config.allow_signups,
        forge_token_prefix: config.forge_token_prefix.clone(),
        capacity: chats::capacity()?,
        slots: std::sync::atomic::AtomicU32::new(slots::DEFAULT_SLOTS),
        search,
        max_file_bytes,
        stopping: std::sync::atomic::AtomicBool::new(false),
        closed: tokio::sync::watch::Sender::new(false),
        streams: streams::Streams::default(),
        device_links: link::Links::default(),
        device_chats: device_chats::DeviceChats::default(),
    });
    if let (Some(url), true) = (&config.database_url, app.hub.shared()) {
        chats::listen(app.clone(), url.clone()).await?;
    }
    app.hub.ready().await?;
    slots::refresh(&app).await?;
    let recovered = chats::recover(&app).await?;
    // The only process of its database: no device link of before can still be up, so the
    // memory tokens handed to its sessions end (a crash left them valid).
    if !app.hub.shared() {
        let ended = memory::end_device_tokens(&app, None).await?;
        if ended > 0 {
            tracing::info!(
                "{ended} memory token(s) of device sessions from before the start ended"
            );
        }
    }
    if recovered > 0 {
        tracing::info!(
            "{recovered} run{} left running by an earlier process marked interrupted",
            if recovered == 1 { "" } else { "s" }
        );
    }
    chats::keep_leases(
        app.clone(),
        Arc::new(|app, held| Box::pin(async move { device_chats::lease_lost(&app, &held).await })),
    );
    chats::drop_when_unseen(&app);
    // What changed in the tree while the server was down is indexed in the background.
    app.search.catch_up(app.backend.clone());
    Ok(app)
}

/// How many tasks a worker of the server's runtime runs between two looks at the network.
const EVENT_INTERVAL: u32 = 7;

/// One line per request in the log (`info`, on stderr): method, path (no query, no header:
/// never a password, a token or a cookie) and status.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    tracing::info!("{method} {path} {}", response.status().as_u16());
    response
}

/// Every route, on `app`.
pub fn router(app: Arc<App>) -> Router {
    catalog::routes()
        .merge(api::routes(app.max_file_bytes))
        .merge(pages::routes(app.max_file_bytes))
        .merge(devices::routes())
        .merge(link::routes())
        .merge(device_ext::routes())
        .merge(mcp::routes())
        .merge(mounts::routes())
        .merge(shares::routes())
        .with_state(app)
        .layer(pages::compression())
        .layer(axum::middleware::from_fn(log_request))
}

/// Connections the kernel holds for the server before it accepts them. The standard library's
/// (and tokio's) 128 is too few for a page of many users opening at once: a connection past it
/// is dropped and its client tries again only a second later.
const BACKLOG: u32 = 1024;

/// A listener on `addr` with a [`BACKLOG`] of waiting connections.
fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Serves `app` on `listener` until `shutdown` resolves; then stops accepting, interrupts the
/// runs going on ([`App::stop`]), ends the event streams and waits for the open requests.
pub async fn serve(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (accepting_tx, accepting_rx) = tokio::sync::oneshot::channel::<()>();
    // Events go out as they happen, a few hundred bytes each: with Nagle's algorithm a piece
    // written while the one before is unacknowledged waits for the page's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY on a connection: {e}");
        }
    });
    let server = axum::serve(
        listener,
        router(app.clone()).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        let _ = accepting_rx.await;
    });
    let mut server = tokio::spawn(server.into_future());
    tokio::select! {
        done = &mut server => return done.map_err(std::io::Error::other)?,
        () = shutdown => {}
    }
    let _ = accepting_tx.send(());
    match app.stop().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            "{n} run{} interrupted by the shutdown",
            if n == 1 { "" } else { "s" }
        ),
        Err(e) => tracing::error!("while interrupting the runs: {e}"),
    }
    server.await.map_err(std::io::Error::other)?
}

/// The first SIGTERM or Ctrl-C (SIGINT).
pub async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Reads a password: from the terminal without echo, or the first line of stdin.
#[allow(
    clippy::print_stderr,
    reason = "the prompt for a password typed in the terminal, and the line it was typed on ended"
)]
fn read_password() -> anyhow::Result<String> {
    use rustix::termios::{LocalModes, OptionalActions, isatty, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let mut line = String::new();
    if isatty(&stdin) {
        eprint!("Password: ");
        let saved = tcgetattr(&stdin).context("cannot read the terminal's settings")?;
        let mut quiet = saved.clone();
        quiet.local_modes.remove(LocalModes::ECHO);
        tcsetattr(&stdin, OptionalActions::Now, &quiet)
            .context("cannot turn the terminal's echo off")?;
        let read = stdin.lock().read_line(&mut line);
        let _ = tcsetattr(&stdin, OptionalActions::Now, &saved);
        eprintln!();
        read.context("cannot read the password")?;
    } else {
        stdin
            .lock()
            .read_line(&mut line)
            .context("cannot read the password from stdin")?;
    }
    let password = line.trim_end_matches(['\n', '\r']).to_owned();
    if password.is_empty() {
        anyhow::bail!("no password given: type it, or pipe it on stdin");
    }
    Ok(password)
}

async fn add_account(config: &Config, username: &str, role: auth::Role) -> anyhow::Result<()> {
    let password = read_password()?;
    let pool = open_database(config).await?;
    let tree = config.data.join("files");
    let id = auth::create_user(&pool, username, &password, role).await?;
    world::give_default_grants(&pool, &tree, id, username).await?;
    say(&format!(
        "llembas-server: {} {username} created (home /home/{username}) in {}",
        role.as_str(),
        config.data.display()
    ));
    Ok(())
}

async fn reset_password(config: &Config, username: &str) -> anyhow::Result<()> {
    let password = read_password()?;
    let pool = open_database(config).await?;
    let id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = $1")
        .bind(username)
        .fetch_optional(&pool)
        .await?
        .with_context(|| format!("no account {username} in {}", config.data.display()))?;
    auth::reset_password(&pool, id, &password).await?;
    say(&format!(
        "llembas-server: the password of {username} is set; its sessions and tokens ended"
    ));
    Ok(())
}

/// Whether any admin exists.
async fn has_admin(pool: &Db) -> Result<bool> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE role = 'admin'")
        .fetch_one(pool)
        .await?;
    Ok(n > 0)
}

/// A line of the command line's own output (what an account command did, where the server
/// listens), on stdout: what a person running it reads, not the log.
#[allow(clippy::print_stdout, reason = "the command line's output")]
fn say(line: &str) {
    println!("{line}");
}

/// Runs the command line on a runtime of its own (serving until Ctrl-C).
pub fn main_blocking(args: Args) -> anyhow::Result<()> {
    let config = Config::from_args(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // The network is looked at every 7 tasks run, not tokio's 61: under a burst (200
        // messages sent at once) a model's streamed piece waited behind a long line of other
        // requests' work before its socket was even polled (`cargo xtask bench server`: per
        // event p99 6–10 ms → 3–5 ms, first token p99 13–28 → 13–16 ms).
        .event_interval(EVENT_INTERVAL)
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        match &args.command {
            Some(Command::Admin {
                what: AdminCommand::Create { username },
            }) => return add_account(&config, username, auth::Role::Admin).await,
            Some(Command::User {
                what: UserCommand::Add { username },
            }) => return add_account(&config, username, auth::Role::User).await,
            Some(Command::User {
                what: UserCommand::Password { username },
            }) => return reset_password(&config, username).await,
            None => {}
        }
        let app = open(&config).await?;
        let listener = bind(args.listen).with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener
            .local_addr()
            .context("cannot read the bound address")?;
        say(&format!(
            "llembas-server {} listening on http://{addr}/ (data in {})",
            env!("CARGO_PKG_VERSION"),
            config.data.display()
        ));
        if !has_admin(&app.pool).await? {
            say(&format!(
                "no admin yet: create one with `llembas-server admin create --username NAME --data {}`",
                config.data.display()
            ));
        }
        if config.model.is_none() {
            say(&format!(
                "{} a file passed with --config",
                harness_model::settings::NO_MODEL
            ));
        }
        let served = serve(app, listener, async {
            signal().await;
            tracing::info!("shutting down (a second signal ends it at once)");
            tokio::spawn(async {
                signal().await;
                std::process::exit(1);
            });
        });
        served.await.context("the server stopped with an error")
    })
}
