//! `llembas link` against the real `llembas-server` on loopback, with real processes: pairing
//! through the page's API, the link coming up with the device's limits, the server driving the
//! device's agent over it (a write landing on the device's disk), a second dial replacing the
//! first, roots `[]` refusing every session, revocation ending the link for good, and a redial
//! after the server came back.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    ContentBlock, Meta, NewSessionRequest, PromptRequest, TextContent,
};
use harness_test_support::ScriptedServer;
use llembas_server::App;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use super::*;

/// A `llembas-server` on a loopback port, on a runtime of its own (dropping it is a crash).
struct Server {
    base: String,
    app: Arc<App>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(data: &Path, model: &str, addr: &str) -> Server {
        let config = llembas_server::Config {
            data: data.to_path_buf(),
            database_url: None,
            run_lease: Duration::from_secs(30),
            model: Some(harness_model::settings::ModelSettings {
                model: Some("scripted".into()),
                ..harness_model::settings::ModelSettings::new(model)
            }),
            secure_cookie: false,
            allow_signups: false,
            idle_session: llembas_server::IDLE_SESSION,
        };
        let addr = addr.to_owned();
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = llembas_server::open(&config).await.unwrap();
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket.set_reuseaddr(true).unwrap();
                socket.bind(addr.parse().unwrap()).unwrap();
                let listener = socket.listen(64).unwrap();
                tx.send((listener.local_addr().unwrap(), app.clone())).unwrap();
                tokio::select! {
                    r = llembas_server::serve(app, listener, std::future::pending()) => r.unwrap(),
                    _ = stop_rx => {}
                }
            });
            rt.shutdown_timeout(Duration::from_secs(5));
        });
        let (addr, app) = rx.recv().unwrap();
        Server {
            base: format!("http://{addr}"),
            app,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// A signed-in client of a new account `name`.
    async fn user(&self, name: &str) -> reqwest::Client {
        let password = format!("{name}-password");
        llembas_server::auth::create_user(
            &self.app.pool,
            name,
            &password,
            llembas_server::auth::Role::User,
        )
        .await
        .unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let r = reqwest::Client::new()
            .post(format!("{}/api/auth/login", self.base))
            .json(&json!({"username": name, "password": password}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let cookie = r.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("cookie", cookie.parse().unwrap());
        reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap()
    }

    /// Waits (a minute at most) until `ready` holds of the device's live link or its absence.
    async fn until_link(
        &self,
        id: &str,
        ready: impl Fn(Option<&llembas_server::link::Live>) -> bool,
    ) -> Option<llembas_server::link::Live> {
        let mut watch = self.app.device_links.watch();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let live = self.app.device_links.live(id);
            if ready(live.as_ref()) {
                return live;
            }
            assert!(Instant::now() < deadline, "the link of {id} never got there");
            let _ = tokio::time::timeout(Duration::from_secs(1), watch.changed()).await;
        }
    }

    fn crash(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// `llembas link` of `sb` to `base` with `args`, stdout and stderr read line by line.
struct Device {
    child: tokio::process::Child,
    out: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Device {
    fn start(sb: &Sandbox, model: &str, base: &str, args: &[&str]) -> Device {
        let mut all = vec!["link", base];
        all.extend_from_slice(args);
        let mut child = sb.command(model, &all).spawn().unwrap();
        let (tx, out) = tokio::sync::mpsc::unbounded_channel();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let t = tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                let _ = t.send(l);
            }
        });
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                let _ = tx.send(l);
            }
        });
        Device { child, out }
    }

    /// The next line that contains `text` (a minute at most).
    async fn line(&mut self, text: &str) -> String {
        loop {
            let l = tokio::time::timeout(Duration::from_secs(60), self.out.recv())
                .await
                .unwrap_or_else(|_| panic!("no line with {text:?} within 60 s"))
                .unwrap_or_else(|| panic!("the device ended before saying {text:?}"));
            if l.contains(text) {
                return l;
            }
        }
    }

    async fn ends(&mut self) -> i32 {
        tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the device did not end within 60 s")
            .unwrap()
            .code()
            .unwrap_or(-1)
    }
}

/// Pairs `sb`'s device through `person`'s page: its code confirmed as `name`; the device id.
async fn pair(server: &Server, person: &reqwest::Client, device: &mut Device, name: &str) -> String {
    let line = device.line("confirm the code").await;
    let code = line
        .split("confirm the code ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    let r = person
        .post(format!("{}/api/devices/confirm", server.base))
        .json(&json!({"user_code": code, "name": name}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let l = device.line("paired as").await;
    l.split("(device ")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap()
        .to_owned()
}

fn lembas(v: Value) -> Meta {
    let mut m = Meta::new();
    m.insert("lembas".into(), v);
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_device_runs_the_servers_sessions_on_its_own_disk() {
    let model = ScriptedServer::start(vec![
        tool_call(
            "w1",
            "write",
            json!({"path": "linked.txt", "content": "written over the link\n"}),
        ),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let alice = server.user("alice").await;
    let bob = server.user("bob").await;
    let sb = Sandbox::new();
    let root = sb.root();
    let root_text = root.display().to_string();

    let mut device = Device::start(
        &sb,
        &model.base_url(),
        &server.base,
        &["--root", &root_text, "--name", "laptop"],
    );
    let id = pair(&server, &alice, &mut device, "Ana's laptop").await;
    device.line("linked to").await;
    // The token is kept for its owner only.
    let kept = sb.home.path().join("link.json");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let live = server.until_link(&id, |l| l.is_some()).await.unwrap();
    assert_eq!(live.limits["roots"], json!([root_text]));
    assert_eq!(live.limits["models"], json!(["scripted"]));

    // The page's list shows it online with its limits, to alice only.
    let list: Value = alice
        .get(format!("{}/api/devices", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["online"], true, "{list}");
    assert_eq!(list[0]["limits"]["roots"], json!([root_text]));
    let list: Value = bob
        .get(format!("{}/api/devices", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list, json!([]));
    let r = bob
        .delete(format!("{}/api/devices/{id}", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // The server drives the device's agent: a write in edit mode lands on the device's disk.
    let agent = live.agent.clone();
    let meta = lembas(json!({"chat": "c1", "model": {"id": "scripted"}, "mode": "edit"}));
    let s = agent
        .send_request(NewSessionRequest::new(root.clone()).meta(meta.clone()))
        .block_task()
        .await
        .unwrap();
    let answer = agent
        .send_request(PromptRequest::new(
            s.session_id.clone(),
            vec![ContentBlock::Text(TextContent::new("write linked.txt"))],
        ))
        .block_task()
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(answer.stop_reason).unwrap(),
        json!("end_turn")
    );
    assert_eq!(sb.read("linked.txt"), "written over the link\n");
    // Outside the roots: refused by the device.
    let e = agent
        .send_request(NewSessionRequest::new("/").meta(meta.clone()))
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(e.code), -32041, "{e:?}");

    // The server goes down and comes back on the same port: the device redials.
    let addr = server.base.trim_start_matches("http://").to_owned();
    server.crash();
    device.line("dialing again").await;
    let dropped = Instant::now();
    let server = Server::start(data.path(), &model.base_url(), &addr);
    server.until_link(&id, |l| l.is_some()).await;
    eprintln!(
        "figure: reconnect after the server came back: {:.2} s",
        dropped.elapsed().as_secs_f64()
    );

    // A second process of the same device replaces the first, which stops for good.
    let mut second = Device::start(&sb, &model.base_url(), &server.base, &["--root", &root_text]);
    second.line("linked to").await;
    device.line("took the link over").await;
    assert_ne!(device.ends().await, 0);

    // Revoked in the page: the live link closes at once and the device stops, told to pair.
    // (The restarted server kept alice's account and sign-in.)
    let r = alice
        .delete(format!("{}/api/devices/{id}", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    second.line("pair it again").await;
    assert_ne!(second.ends().await, 0);
    server.until_link(&id, |l| l.is_none()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_with_remote_work_off_links_and_refuses_every_session() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let alice = server.user("alice").await;
    let sb = Sandbox::new();
    let mut device = Device::start(&sb, &model.base_url(), &server.base, &["--no-remote-work"]);
    let id = pair(&server, &alice, &mut device, "kiosk").await;
    let live = server.until_link(&id, |l| l.is_some()).await.unwrap();
    assert_eq!(live.limits["roots"], json!([]));
    let e = live
        .agent
        .send_request(
            NewSessionRequest::new(sb.root())
                .meta(lembas(json!({"model": {"id": "scripted"}, "mode": "edit"}))),
        )
        .block_task()
        .await
        .unwrap_err();
    assert_eq!(i32::from(e.code), -32040, "{e:?}");
    assert_eq!(e.message, "Remote work is off on this device.");

    // A token the server does not know is final: 401, told to pair again.
    std::fs::write(
        sb.home.path().join("link.json"),
        json!({"server": server.base, "device_id": id, "name": "kiosk", "token": "lld_0000"})
            .to_string(),
    )
    .unwrap();
    let mut other = Device::start(&sb, &model.base_url(), &server.base, &["--no-remote-work"]);
    let l = other.line("refused this device").await;
    assert!(l.contains("401"), "{l}");
    assert_ne!(other.ends().await, 0);
}
