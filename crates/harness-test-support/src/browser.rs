//! One real browser for a test binary's page tests: Debian's headless Chromium driven through
//! chromedriver with fantoccini (llembas-server's and llembas-cli's browser suites share it).
//! Its tests take turns ([`run`]) on the runtime the browser lives on ([`runtime`]).
//!
//! Without chromedriver or chromium [`shared`] says how to install them.

use std::future::Future;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use serde_json::{Value, json};

use crate::{Error, Result};

/// How long chromedriver may take to say its port.
const START: Duration = Duration::from_secs(20);

/// What to install when the browser is missing.
pub const INSTALL: &str = "install Debian's headless browser and its driver: \
                           `apt-get install -y chromium chromium-driver` (.ci/run does)";

/// The browser the tests share, and what keeps it alive.
pub struct Browser {
    /// The WebDriver session.
    pub client: Client,
    /// The chromedriver wrapper: chromedriver's process group ends when this process's end
    /// closes the wrapper's stdin.
    _driver: Child,
    /// chromedriver's port on 127.0.0.1 (for its DevTools route).
    pub driver_port: u16,
    /// The WebDriver session's id.
    pub session: String,
}

/// The runtime the browser and its tests run on (two workers).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => panic!("no runtime for the browser tests: {e}"),
        }
    })
}

/// Runs a browser test: one at a time, on [`runtime`], with a guard of two minutes against a
/// hang.
pub fn run<F: Future<Output = ()>>(test: F) {
    static TURN: Mutex<()> = Mutex::new(());
    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    runtime().block_on(async {
        if tokio::time::timeout(Duration::from_secs(120), test)
            .await
            .is_err()
        {
            panic!("the browser test did not end within two minutes");
        }
    });
}

/// The browser of this test binary, opened by the first test that asks.
pub async fn shared() -> Result<&'static Browser> {
    static BROWSER: tokio::sync::OnceCell<std::result::Result<Browser, String>> =
        tokio::sync::OnceCell::const_new();
    match BROWSER.get_or_init(open).await {
        Ok(b) => Ok(b),
        Err(e) => Err(Error::Browser(e.clone())),
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

/// The browser binary itself (Debian's `chromium` command is a launcher script adding flags).
fn chromium_binary() -> Option<PathBuf> {
    let real = PathBuf::from("/usr/lib/chromium/chromium");
    if real.is_file() {
        return Some(real);
    }
    on_path("chromium").or_else(|| on_path("chromium-browser"))
}

/// Starts chromedriver on a free port; its port.
fn start_driver(profile: &Path) -> std::result::Result<(Child, u16), String> {
    let driver =
        on_path("chromedriver").ok_or_else(|| format!("chromedriver is not on PATH: {INSTALL}"))?;
    // `setsid` makes chromedriver the leader of a process group its browsers join; the shell
    // kills that group when its stdin closes, which happens when this test process ends.
    // Then it removes the browser's profile (a static is never dropped, so no TempDir would).
    // A TERM, INT or HUP sent to the test's process group does the same.
    let script = r#"setsid "$0" --port=0 </dev/null & d=$!
        end() { kill -TERM -"$d" 2>/dev/null; wait; rm -rf "$1"; exit 0; }
        trap end TERM INT HUP
        read _; end"#;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(&driver)
        .arg(profile)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", driver.display()))?;
    let stdout = child.stdout.take().ok_or("chromedriver gave no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(port) = line
                .split("started successfully on port ")
                .nth(1)
                .and_then(|rest| rest.trim().trim_end_matches('.').parse::<u16>().ok())
                && let Some(t) = tx.take()
            {
                let _ = t.send(port);
            }
        }
    });
    let port = rx
        .recv_timeout(START)
        .map_err(|_| format!("{} did not say its port within {START:?}", driver.display()))?;
    Ok((child, port))
}

async fn open() -> std::result::Result<Browser, String> {
    let binary =
        chromium_binary().ok_or_else(|| format!("chromium is not installed: {INSTALL}"))?;
    let profile = tempfile::tempdir().map_err(|e| e.to_string())?.keep();
    let (driver, port) = start_driver(&profile)?;
    let args = [
        "--headless".to_owned(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-quic".into(),
        "--no-first-run".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--disable-dev-shm-usage".into(),
        "--disable-default-apps".into(),
        "--mute-audio".into(),
        // Nothing but loopback: every host name but localhost resolves to nothing.
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1".into(),
        "--disable-breakpad".into(),
        "--disable-crash-reporter".into(),
        "--window-size=1280,900".into(),
        format!("--user-data-dir={}", profile.display()),
    ];
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {"binary": binary, "args": args},
    });
    let Value::Object(caps) = caps else {
        return Err("the capabilities are not an object".into());
    };
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .map_err(|e| format!("chromedriver on port {port} opened no browser: {e}"))?;
    let session = client
        .session_id()
        .await
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    Ok(Browser {
        client,
        _driver: driver,
        driver_port: port,
        session,
    })
}
