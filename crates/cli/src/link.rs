//! `llembas link URL`: this machine as a device of a LLeMbas server (`spec/acp.md` §1).
//!
//! The first time (or with `--pair`), the device pairs: it asks the server for a code, prints
//! the code and the page to confirm it on, and polls until the person approves it there (RFC
//! 8628's shape); the device token it receives is kept in `link.json` beside the config file,
//! readable by its owner only (0600). Then it dials the server's WebSocket (`wss://`; `ws://`
//! only to a loopback address), bearer token in the handshake, and serves ACP on it as the agent
//! — the same handlers as `llembas acp`, over this socket instead of stdio. It redials with
//! backoff (1 s doubling to 60 s, full jitter, reset once a link stayed up 30 s); a 401 or 403
//! (revoked, or another process of this device took the link over) is final.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the pairing code and the link's notices are for the person at the device"
)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest as _};

use crate::acp::CliHost;
use crate::settings::Settings;

/// The largest frame either side takes (`spec/acp.md` §1).
const MAX_FRAME_BYTES: usize = harness_acp::wire::MAX_LINE_BYTES;
/// A link that heard nothing this long is dead (the server pings every 20 s).
const SILENCE: Duration = Duration::from_secs(60);
/// The first wait before a redial.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
/// The longest wait before a redial.
const BACKOFF_CAP: Duration = Duration::from_secs(60);
/// How long a link must have stayed up for the backoff to start again from the first wait.
const STABLE: Duration = Duration::from_secs(30);
/// The close codes the server ends a link with for good (`llembas-server`'s link module).
const CLOSE_REPLACED: u16 = 4001;
const CLOSE_REVOKED: u16 = 4003;

/// What `llembas link` is told.
#[derive(Debug, Clone)]
pub struct LinkOptions {
    /// The server's base URL.
    pub server: String,
    /// The directories sessions may work in (`limits.roots`); empty: remote work off.
    pub roots: Vec<PathBuf>,
    /// The device's name as the person's list shows it (suggested; the person may change it).
    pub name: Option<String>,
    /// Pair again even when a token is kept.
    pub pair: bool,
    /// Pair, then end without dialing.
    pub pair_only: bool,
    /// `limits.max_sessions`.
    pub max_sessions: Option<usize>,
}

/// The kept pairing (`link.json`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Paired {
    server: String,
    device_id: String,
    name: String,
    token: String,
}

/// Runs `llembas link` until it is stopped or the server refuses the device for good.
pub fn run(settings: Settings, options: LinkOptions) -> Result<ExitCode> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let base = base_url(&options.server)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let file = link_file(&settings);
    runtime.block_on(crate::process::ending_on_signals(async move {
        let paired = match read_paired(&file)? {
            Some(p) if p.server == base && !options.pair => p,
            _ => {
                let p = pair(&base, options.name.as_deref()).await?;
                write_paired(&file, &p)?;
                eprintln!(
                    "llembas link: paired as {:?} (device {}); the token is kept in {}",
                    p.name,
                    p.device_id,
                    file.display()
                );
                p
            }
        };
        if options.pair_only {
            return Ok(());
        }
        let host = Arc::new(CliHost::for_link(
            settings,
            options.roots.clone(),
            options.max_sessions,
        ));
        dial_forever(&base, &paired, host).await
    }))?;
    Ok(ExitCode::SUCCESS)
}

/// `link.json` beside the config file.
fn link_file(settings: &Settings) -> PathBuf {
    settings
        .dirs
        .config_file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
        .join("link.json")
}

fn read_paired(file: &Path) -> Result<Option<Paired>> {
    match std::fs::read_to_string(file) {
        Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a pairing llembas wrote: remove it, or pass --pair",
                file.display()
            )
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
    }
}

/// Keeps the pairing, readable by its owner only: the file is made 0600 before the token is
/// written into it.
fn write_paired(file: &Path, paired: &Paired) -> Result<()> {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(file)
        .with_context(|| format!("cannot create {}", file.display()))?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", file.display()))?;
    let text = serde_json::to_string_pretty(paired)?;
    harness_fs::write_atomic(file, text.as_bytes())?;
    Ok(())
}

/// The server's base URL (`http(s)://host[:port][/prefix]`, no trailing slash). Plain `http`
/// only to a loopback address: the token would cross the network in the clear.
fn base_url(given: &str) -> Result<String> {
    let url = reqwest::Url::parse(given)
        .with_context(|| format!("{given} is not a URL: give the server's, as https://host"))?;
    match url.scheme() {
        "https" => {}
        "http" if loopback(&url) => {}
        "http" => bail!(
            "{given}: a device links over https only (plain http only to this machine's loopback address)"
        ),
        other => bail!("{given}: the scheme {other} is not http or https"),
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

fn loopback(url: &reqwest::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    }
}

fn http() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("llembas/", env!("CARGO_PKG_VERSION")))
        .build()?)
}

/// This machine's name, as a suggestion for the device's.
fn host_name() -> Option<String> {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Pairs with the server: the code printed, the server polled until the person approves.
async fn pair(base: &str, name: Option<&str>) -> Result<Paired> {
    let client = http()?;
    let name = name.map(str::to_owned).or_else(host_name);
    let resp = client
        .post(format!("{base}/api/device/code"))
        .json(&json!({"name": name}))
        .send()
        .await
        .with_context(|| format!("cannot reach {base}"))?;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("{base} refused to pair ({status}): {}", error_text(&body));
    }
    let field = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let device_code = field("device_code");
    println!(
        "To link this device, open {}\nand confirm the code {} (signed in to {base}).",
        field("verification_uri_complete"),
        field("user_code")
    );
    let mut every = body.get("interval").and_then(Value::as_u64).unwrap_or(5);
    loop {
        tokio::time::sleep(Duration::from_secs(every)).await;
        let resp = client
            .post(format!("{base}/api/device/token"))
            .json(&json!({"device_code": device_code}))
            .send()
            .await
            .with_context(|| format!("cannot reach {base}"))?;
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            let field = |k: &str| {
                body.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            return Ok(Paired {
                server: base.to_owned(),
                device_id: field("device_id"),
                name: field("name"),
                token: field("access_token"),
            });
        }
        match body.get("error").and_then(Value::as_str) {
            Some("authorization_pending") => {}
            Some("slow_down") => {
                every = body
                    .get("interval")
                    .and_then(Value::as_u64)
                    .unwrap_or(every + 5);
            }
            Some("expired_token") => {
                bail!("the code expired before it was confirmed: run `llembas link {base}` again")
            }
            Some("access_denied") => bail!("the pairing was refused in the page"),
            _ => bail!("{base} refused to pair ({status}): {}", error_text(&body)),
        }
    }
}

fn error_text(body: &Value) -> String {
    body.get("error_description")
        .or_else(|| body.get("error"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| body.to_string())
}

/// How a link ended.
enum Ended {
    /// The server refused the device for good: say why and stop.
    Final(String),
    /// The link dropped or could not be made: dial again (after `up`, how long it stayed up).
    Again { up: Duration, why: String },
}

/// Dials, serves, and dials again with backoff, until the device is refused for good.
async fn dial_forever(base: &str, paired: &Paired, host: Arc<CliHost>) -> Result<()> {
    let url = format!(
        "{}/api/device/link",
        base.replacen("https://", "wss://", 1)
            .replacen("http://", "ws://", 1)
    );
    let mut failures = 0u32;
    loop {
        match link_once(&url, paired, host.clone()).await {
            Ended::Final(why) => bail!("{why}"),
            Ended::Again { up, why } => {
                if up >= STABLE {
                    failures = 0;
                }
                let wait = backoff(failures);
                failures = failures.saturating_add(1);
                eprintln!(
                    "llembas link: {why}; dialing again in {:.1} s",
                    wait.as_secs_f64()
                );
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// The wait before redial number `n` (0 first): full jitter over 1 s doubling to 60 s.
pub fn backoff(n: u32) -> Duration {
    use std::hash::BuildHasher as _;
    let ceiling = BACKOFF_FIRST
        .saturating_mul(2u32.saturating_pow(n.min(16)))
        .min(BACKOFF_CAP);
    let r = std::collections::hash_map::RandomState::new().hash_one((n, Instant::now()));
    let fraction = (r % 10_001) as f64 / 10_000.0;
    ceiling.mul_f64(fraction)
}

/// One dial and the link it makes, served until it ends.
async fn link_once(url: &str, paired: &Paired, host: Arc<CliHost>) -> Ended {
    let started = Instant::now();
    let again = |why: String| Ended::Again {
        up: started.elapsed(),
        why,
    };
    let mut request = match url.into_client_request() {
        Ok(r) => r,
        Err(e) => return Ended::Final(format!("{url}: {e}")),
    };
    match format!("Bearer {}", paired.token).parse() {
        Ok(v) => {
            request.headers_mut().insert("authorization", v);
        }
        Err(e) => return Ended::Final(format!("the kept token is not valid: {e}")),
    }
    let config = tungstenite::protocol::WebSocketConfig::default()
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .max_message_size(Some(MAX_FRAME_BYTES));
    let connector = match tls_connector(url) {
        Ok(c) => c,
        Err(e) => return Ended::Final(format!("{e:#}")),
    };
    let socket = match tokio_tungstenite::connect_async_tls_with_config(
        request,
        Some(config),
        false,
        connector,
    )
    .await
    {
        Ok((socket, _)) => socket,
        Err(tungstenite::Error::Http(resp)) => {
            let status = resp.status().as_u16();
            let text = resp
                .body()
                .as_ref()
                .and_then(|b| serde_json::from_slice::<Value>(b).ok())
                .map(|v| error_text(&v))
                .unwrap_or_default();
            return match status {
                401 | 403 => Ended::Final(format!(
                    "the server refused this device ({status}): {text} — pair it again with `llembas link --pair {}`",
                    paired.server
                )),
                _ => again(format!("the server answered {status} {text}")),
            };
        }
        Err(e) => return again(format!("cannot reach {url}: {e}")),
    };
    eprintln!(
        "llembas link: linked to {} as {:?}",
        paired.server, paired.name
    );
    let (sink, stream) = socket.split();
    let closed: Arc<Mutex<Option<(u16, String)>>> = Arc::default();
    let c = closed.clone();
    let incoming = futures_util::stream::unfold(stream, move |mut stream| {
        let c = c.clone();
        async move {
            loop {
                let next = match tokio::time::timeout(SILENCE, stream.next()).await {
                    Err(_) => {
                        return Some((
                            Err(std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                "the server was silent for 60 s",
                            )),
                            stream,
                        ));
                    }
                    Ok(None) => return None,
                    Ok(Some(m)) => m,
                };
                match next {
                    Ok(Message::Text(t)) => return Some((Ok(t.to_string()), stream)),
                    Ok(Message::Close(frame)) => {
                        if let (Ok(mut c), Some(f)) = (c.lock(), frame) {
                            *c = Some((u16::from(f.code), f.reason.to_string()));
                        }
                        return None;
                    }
                    Ok(_) => continue,
                    Err(e) => return Some((Err(std::io::Error::other(e)), stream)),
                }
            }
        }
    });
    let outgoing = sink
        .with(async |line: String| Ok::<_, tungstenite::Error>(Message::Text(line.into())))
        .sink_map_err(std::io::Error::other);
    let transport = agent_client_protocol::Lines::new(Box::pin(outgoing), Box::pin(incoming));
    let info = crate::acp::agent_info();
    let served = harness_acp::serve(host, info, transport).await;
    let closed = closed.lock().ok().and_then(|c| c.clone());
    match closed {
        Some((CLOSE_REPLACED, why)) => Ended::Final(format!(
            "{why}: another `llembas link` of this device took the link over"
        )),
        Some((CLOSE_REVOKED, why)) => Ended::Final(format!(
            "{why}: pair it again with `llembas link --pair {}`",
            paired.server
        )),
        Some((code, why)) => again(format!("the server closed the link ({code} {why})")),
        None => again(match served {
            Ok(()) => "the link dropped".into(),
            Err(e) => format!("the link dropped: {e}"),
        }),
    }
}

/// The TLS connector of a `wss://` dial (the platform's trust store); none for `ws://`.
fn tls_connector(url: &str) -> Result<Option<tokio_tungstenite::Connector>> {
    if !url.starts_with("wss://") {
        return Ok(None);
    }
    use rustls_platform_verifier::ConfigVerifierExt as _;
    let config = rustls::ClientConfig::with_platform_verifier()
        .map_err(|e| anyhow!("cannot set up TLS with this machine's certificates: {e}"))?;
    Ok(Some(tokio_tungstenite::Connector::Rustls(Arc::new(config))))
}
