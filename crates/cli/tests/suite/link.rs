//! `llembas link` (a real process) against the real `llembas-server` (its library on a loopback
//! port, on a runtime of its own), the scripted model behind both: pairing through the page's
//! API, the link coming up with the device's limits, the refusals before any JSON-RPC (401, 403),
//! an agent chat on the device driven through the server's HTTP API (a write approved in the
//! page landing on the device's disk, a stop, the device killed mid-prompt and the run marked
//! interrupted, its redial and the chat going on), a second dial replacing the first, roots `[]`
//! refusing every chat, revocation ending the link for good, and a redial after the server came
//! back. Another user sees and drives none of it (404).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{Meta, NewSessionRequest};
use harness_test_support::ScriptedServer;
use llembas_server::App;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use super::*;

/// A `llembas-server` on a loopback port, on a runtime of its own (dropping it is a crash).
pub(super) struct Server {
    pub(super) base: String,
    pub(super) app: Arc<App>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub(super) fn start(data: &Path, model: &str, addr: &str) -> Server {
        Server::start_with_lease(data, model, addr, Duration::from_secs(30))
    }

    pub(super) fn start_with_lease(
        data: &Path,
        model: &str,
        addr: &str,
        run_lease: Duration,
    ) -> Server {
        let config = llembas_server::Config {
            data: data.to_path_buf(),
            database_url: None,
            run_lease,
            model: Some(harness_model::settings::ModelSettings {
                model: Some("scripted".into()),
                ..harness_model::settings::ModelSettings::new(model)
            }),
            secure_cookie: false,
            allow_signups: false,
            idle_session: llembas_server::IDLE_SESSION,
            forge_token_prefix: llembas_server::FORGE_TOKEN_PREFIX.into(),
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
                tx.send((listener.local_addr().unwrap(), app.clone()))
                    .unwrap();
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
    pub(super) async fn user(&self, name: &str) -> reqwest::Client {
        let password = format!("{name}-password");
        llembas_server::auth::create_user(
            &self.app.pool,
            name,
            &password,
            llembas_server::auth::Role::User,
        )
        .await
        .unwrap();
        self.sign_in(name).await
    }

    /// A signed-in client of the account `name` (made by [`Server::user`]).
    pub(super) async fn sign_in(&self, name: &str) -> reqwest::Client {
        let password = format!("{name}-password");
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
    pub(super) async fn until_link(
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
            assert!(
                Instant::now() < deadline,
                "the link of {id} never got there"
            );
            let _ = tokio::time::timeout(Duration::from_secs(1), watch.changed()).await;
        }
    }

    pub(super) fn crash(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// `llembas link` of `sb` to `base` with `args`, stdout and stderr read line by line.
pub(super) struct Device {
    pub(super) child: tokio::process::Child,
    out: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Device {
    pub(super) fn start(sb: &Sandbox, model: &str, base: &str, args: &[&str]) -> Device {
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
    pub(super) async fn line(&mut self, text: &str) -> String {
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

    pub(super) async fn ends(&mut self) -> i32 {
        tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the device did not end within 60 s")
            .unwrap()
            .code()
            .unwrap_or(-1)
    }
}

/// Pairs `sb`'s device through `person`'s page: its code confirmed as `name`; the device id.
pub(super) async fn pair(
    server: &Server,
    person: &reqwest::Client,
    device: &mut Device,
    name: &str,
) -> String {
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

pub(super) fn lembas(v: Value) -> Meta {
    let mut m = Meta::new();
    m.insert("lembas".into(), v);
    m
}

/// A person's view of the server through its HTTP API.
pub(super) struct Person<'a> {
    pub(super) server: &'a Server,
    pub(super) http: reqwest::Client,
}

impl Person<'_> {
    pub(super) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.server.base));
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub(super) async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, None).await
    }

    pub(super) async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// The chat's stored events (`event` of each), in order.
    pub(super) async fn events(&self, chat: &str) -> Vec<Value> {
        let (status, v) = self.get(&format!("/api/chats/{chat}?messages=0")).await;
        assert_eq!(status, 200, "{v}");
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["event"].clone())
            .collect()
    }

    /// Waits (a minute at most) for an event of the chat that `pred` holds of; answers it.
    pub(super) async fn until(
        &self,
        chat: &str,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let events = self.events(chat).await;
            if let Some(e) = events.iter().find(|e| pred(e)) {
                return e.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {what} in the chat within 60 s: {events:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends a message to the chat: the run's id.
    pub(super) async fn send(&self, chat: &str, text: &str) -> String {
        let (status, v) = self
            .post(
                &format!("/api/chats/{chat}/messages"),
                json!({"text": text}),
            )
            .await;
        assert_eq!(status, 202, "{v}");
        v["run"].as_str().unwrap().to_owned()
    }

    /// Waits for the run's end: its status.
    pub(super) async fn ended(&self, chat: &str, run: &str) -> String {
        let e = self
            .until(chat, "the run's end", |e| {
                e["type"] == "run_ended" && e["run"] == run
            })
            .await;
        e["status"].as_str().unwrap().to_owned()
    }
}

/// The link's route asked plainly with these headers: its status (a refusal comes before any
/// upgrade, so before any JSON-RPC).
async fn dial_status(base: &str, headers: &[(&str, &str)]) -> u16 {
    let mut r = reqwest::Client::new()
        .get(format!("{base}/api/device/link"))
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_device_runs_the_servers_chats_on_its_own_disk() {
    let model = ScriptedServer::start(vec![
        tool_call(
            "w1",
            "write",
            json!({"path": "linked.txt", "content": "written over the link\n"}),
        ),
        text(&["Done."]),
        // Answers that stall mid-stream: a run still going on when it is stopped, or when the
        // device dies.
        text(&["Working"]).stalling(),
        text(&["Still working"]).stalling(),
        text(&["Back."]),
    ])
    .await
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let alice = Person {
        server: &server,
        http: server.user("alice").await,
    };
    let bob = Person {
        server: &server,
        http: server.user("bob").await,
    };
    let sb = Sandbox::new();
    let root = sb.root();
    let root_text = root.display().to_string();

    let mut device = Device::start(
        &sb,
        &model.base_url(),
        &server.base,
        &["--root", &root_text, "--name", "laptop"],
    );
    let id = pair(&server, &alice.http, &mut device, "Ana's laptop").await;
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
    let (_, list) = alice.get("/api/devices").await;
    assert_eq!(list[0]["online"], true, "{list}");
    assert_eq!(list[0]["name"], "Ana's laptop", "{list}");
    assert_eq!(list[0]["limits"]["roots"], json!([root_text]));
    let (_, list) = bob.get("/api/devices").await;
    assert_eq!(list, json!([]));
    let (status, _) = bob
        .call(reqwest::Method::DELETE, &format!("/api/devices/{id}"), None)
        .await;
    assert_eq!(status, 404);

    // The link's refusals come before the upgrade: no token or an unknown one 401, a browser's
    // request (an Origin) 403 even with the device's own token.
    let token: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    let bearer = format!("Bearer {}", token["token"].as_str().unwrap());
    assert_eq!(dial_status(&server.base, &[]).await, 401);
    assert_eq!(
        dial_status(&server.base, &[("authorization", "Bearer lld_0000")]).await,
        401
    );
    assert_eq!(
        dial_status(
            &server.base,
            &[
                ("authorization", &bearer),
                ("origin", "https://evil.example")
            ]
        )
        .await,
        403
    );
    // Refused dials did not touch the live link.
    assert_eq!(
        server.app.device_links.live(&id).unwrap().generation,
        live.generation
    );

    // An agent chat on the device, in a directory it shares; bob cannot open one there.
    let new_chat = json!({"device": id, "dir": root_text, "mode": "manual"});
    let (status, _) = bob.post("/api/chats", new_chat.clone()).await;
    assert_eq!(status, 404);
    let (status, v) = alice
        .post(
            "/api/chats",
            json!({"device": id, "dir": "/", "mode": "manual"}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("is not under a directory"),
        "{v}"
    );
    let (status, v) = alice.post("/api/chats", new_chat.clone()).await;
    assert_eq!(status, 201, "{v}");
    let chat = v["id"].as_str().unwrap().to_owned();
    let (_, v) = alice.get(&format!("/api/chats/{chat}?messages=0")).await;
    assert_eq!(v["device"]["online"], true, "{v}");
    assert_eq!(v["device"]["cwd"], json!(root_text), "{v}");
    assert_eq!(v["model"], "scripted", "{v}");
    assert_eq!(bob.get(&format!("/api/chats/{chat}")).await.0, 404);
    let (status, _) = bob
        .post(
            &format!("/api/chats/{chat}/messages"),
            json!({"text": "hi"}),
        )
        .await;
    assert_eq!(status, 404);

    // A write asked in manual mode: the approval is the page's, answered there; the file lands
    // on the device's disk.
    let run = alice.send(&chat, "write linked.txt").await;
    let asked = alice
        .until(&chat, "the approval", |e| e["type"] == "tool_call_asked")
        .await;
    assert_eq!(asked["question"]["tool"], "write", "{asked}");
    assert!(
        asked["question"]["change"]
            .as_str()
            .unwrap()
            .contains("+written over the link"),
        "{asked}"
    );
    let approval = asked["approval"].as_str().unwrap().to_owned();
    assert!(!root.join("linked.txt").exists());
    let (status, _) = bob
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "yes"}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, v) = alice
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "yes"}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(alice.ended(&chat, &run).await, "finished");
    assert_eq!(sb.read("linked.txt"), "written over the link\n");
    // The page's events are a local chat's: the call, its answer, its diff, its result, the text.
    let events = alice.events(&chat).await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    for k in [
        "run_started",
        "user_input",
        "tool_call_started",
        "tool_call_asked",
        "tool_call_answered",
        "edit",
        "tool_call_finished",
        "text_delta",
        "turn_ended",
        "run_ended",
    ] {
        assert!(kinds.contains(&k), "no {k}: {kinds:?}");
    }
    let started = events
        .iter()
        .find(|e| e["type"] == "tool_call_started")
        .unwrap();
    assert_eq!(started["call"]["name"], "write", "{started}");
    assert_eq!(started["block"], "edit", "{started}");
    let answered: String = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(answered, "Done.");
    let (_, v) = alice.get("/api/chats").await;
    assert_eq!(v[0]["title"], "write linked.txt", "{v}");

    // Stop: the device's turn is cancelled, the run stopped.
    let run = alice.send(&chat, "work a while").await;
    alice
        .until(&chat, "the stalled answer", |e| {
            e["type"] == "text_delta" && e["text"] == "Working"
        })
        .await;
    let (status, _) = bob.post(&format!("/api/runs/{run}/stop"), json!({})).await;
    assert_eq!(status, 404);
    let (status, v) = alice
        .post(&format!("/api/runs/{run}/stop"), json!({}))
        .await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(alice.ended(&chat, &run).await, "stopped");

    // The device dies mid-prompt: the run is interrupted, the chat says the device went
    // offline, and a message is refused (nothing queued).
    let run = alice.send(&chat, "work a while longer").await;
    alice
        .until(&chat, "the stalled answer", |e| {
            e["type"] == "text_delta" && e["text"] == "Still working"
        })
        .await;
    device.child.kill().await.unwrap();
    assert_eq!(alice.ended(&chat, &run).await, "interrupted");
    alice
        .until(&chat, "the offline notice", |e| {
            e["type"] == "notice" && e["device_offline"] == true
        })
        .await;
    server.until_link(&id, |l| l.is_none()).await;
    let (status, v) = alice
        .post(
            &format!("/api/chats/{chat}/messages"),
            json!({"text": "again"}),
        )
        .await;
    assert_eq!(status, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("is offline"), "{v}");
    let (_, v) = alice.get(&format!("/api/chats/{chat}?messages=0")).await;
    assert_eq!(v["device"]["online"], false, "{v}");

    // Started again, it redials with its kept token, and the chat goes on (its session
    // reopened on the new link).
    let mut device = Device::start(
        &sb,
        &model.base_url(),
        &server.base,
        &["--root", &root_text],
    );
    device.line("linked to").await;
    server.until_link(&id, |l| l.is_some()).await;
    let (_, list) = alice.get("/api/devices").await;
    assert_eq!(list[0]["online"], true, "{list}");
    let run = alice.send(&chat, "are you back?").await;
    assert_eq!(alice.ended(&chat, &run).await, "finished");
    let events = alice.events(&chat).await;
    assert_eq!(
        events
            .iter()
            .rev()
            .find(|e| e["type"] == "text_delta")
            .unwrap()["text"],
        "Back."
    );

    // The server goes down and comes back on the same port: the device redials.
    let addr = server.base.trim_start_matches("http://").to_owned();
    drop(alice);
    drop(bob);
    server.crash();
    device.line("dialing again").await;
    let server = Server::start(data.path(), &model.base_url(), &addr);
    server.until_link(&id, |l| l.is_some()).await;

    // A second process of the same device replaces the first, which stops for good.
    let mut second = Device::start(
        &sb,
        &model.base_url(),
        &server.base,
        &["--root", &root_text],
    );
    second.line("linked to").await;
    device.line("took the link over").await;
    assert_ne!(device.ends().await, 0);

    // Revoked in the page: the live link closes at once and the device stops, told to pair.
    // (The restarted server kept alice's account; she signs in again.)
    let alice = server.sign_in("alice").await;
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
async fn a_device_with_remote_work_off_links_and_refuses_every_chat() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let alice = server.user("alice").await;
    let sb = Sandbox::new();
    let mut device = Device::start(&sb, &model.base_url(), &server.base, &["--no-remote-work"]);
    let id = pair(&server, &alice, &mut device, "kiosk").await;
    let live = server.until_link(&id, |l| l.is_some()).await.unwrap();
    assert_eq!(live.limits["roots"], json!([]));
    // The page's new chat is refused with that said.
    let r = alice
        .post(format!("{}/api/chats", server.base))
        .json(&json!({"device": id, "dir": sb.root()}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("remote work is off"),
        "{v}"
    );
    // The device refuses a session asked of it anyway.
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

/// Waits (a minute at most) until the chat has a page open on the server.
async fn until_attached(server: &Server, chat: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !server.app.pages.attached(chat) {
        assert!(Instant::now() < deadline, "no page of {chat} opened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_chat_has_its_plan_jobs_viewer_and_memory_on_the_server() {
    let model = ScriptedServer::start(vec![
        tool_call(
            "p1",
            "plan_write",
            json!({"title": "Ship the page", "summary": "Write it, then check it.",
                "phases": [{"title": "Work", "tasks": [{"title": "write it", "status": "done"}]}]}),
        ),
        tool_call(
            "m1",
            "memory",
            json!({"action": "add", "text": "Ana prefers small commits"}),
        ),
        // A job that ends when the test says so (a file appears): its end comes after the
        // turn, so it wakes the session with a machine turn.
        tool_call(
            "b1",
            "bash",
            json!({"command": "while [ ! -f go ]; do sleep 0.1; done; echo job-output", "background": true}),
        ),
        text(&["Started."]),
        text(&["The job finished."]),
        // `show` with no page open, then with one.
        tool_call("s1", "show", json!({"path": "page.html"})),
        text(&["Not shown."]),
        tool_call("s2", "show", json!({"path": "page.html"})),
        text(&["Shown."]),
    ])
    .await
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let alice = Person {
        server: &server,
        http: server.user("alice").await,
    };
    let bob = Person {
        server: &server,
        http: server.user("bob").await,
    };
    let sb = Sandbox::new();
    let root = sb.root();
    let root_text = root.display().to_string();
    std::fs::write(
        root.join("page.html"),
        "<!doctype html><p>hello from the device</p>\n",
    )
    .unwrap();
    let mut device = Device::start(
        &sb,
        &model.base_url(),
        &server.base,
        &["--root", &root_text],
    );
    let id = pair(&server, &alice.http, &mut device, "laptop").await;
    device.line("linked to").await;
    server.until_link(&id, |l| l.is_some()).await;
    let (status, v) = alice
        .post(
            "/api/chats",
            json!({"device": id, "dir": root_text, "mode": "auto"}),
        )
        .await;
    assert_eq!(status, 201, "{v}");
    let chat = v["id"].as_str().unwrap().to_owned();

    let run = alice.send(&chat, "plan, remember, start the job").await;
    assert_eq!(alice.ended(&chat, &run).await, "finished");
    // plan_state: the plan card has the whole plan, not ACP's flat entries.
    let plan = alice
        .until(&chat, "the plan", |e| e["type"] == "plan_changed")
        .await;
    assert_eq!(plan["plan"]["title"], "Ship the page", "{plan}");
    assert_eq!(
        plan["plan"]["summary"], "Write it, then check it.",
        "{plan}"
    );
    assert_eq!(
        plan["plan"]["phases"][0]["tasks"][0]["status"], "done",
        "{plan}"
    );
    // memory: the device's memory tool wrote the person's records on the server, through the
    // API and the token the session was handed.
    let (status, api) = alice
        .post(&format!("/api/chats/{chat}/memory-token"), json!({}))
        .await;
    assert_eq!(status, 201, "{api}");
    let records: Value = reqwest::Client::new()
        .get(format!("{}/memory", api["url"].as_str().unwrap()))
        .bearer_auth(api["token"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        records["entries"][0]["text"], "Ana prefers small commits",
        "{records}"
    );
    // jobs: the job's start in the chat, its state asked of the device; bob gets nothing.
    let started = alice
        .until(&chat, "the job's start", |e| e["type"] == "job_started")
        .await;
    assert_eq!(started["kind"], "command", "{started}");
    let job = started["job_id"].as_str().unwrap().to_owned();
    let (status, v) = alice.get(&format!("/api/chats/{chat}/jobs")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["jobs"][0]["state"], "running", "{v}");
    assert_eq!(bob.get(&format!("/api/chats/{chat}/jobs")).await.0, 404);
    let (status, v) = alice
        .get(&format!("/api/chats/{chat}/jobs/99/output"))
        .await;
    assert_eq!(status, 404, "{v}");
    // The job ends: its end in the chat, then the machine turn it woke, a run of its own whose
    // input is the job's.
    std::fs::write(root.join("go"), "").unwrap();
    let ended = alice
        .until(&chat, "the job's end", |e| e["type"] == "job_ended")
        .await;
    assert_eq!(ended["end"]["status"], "done", "{ended}");
    assert_eq!(ended["end"]["exit_code"], 0, "{ended}");
    let woke = alice
        .until(&chat, "the machine turn", |e| {
            e["type"] == "user_input" && e["origin"] == "machine"
        })
        .await;
    assert!(
        woke["text"].as_str().unwrap().contains("job-output"),
        "{woke}"
    );
    let events = alice.events(&chat).await;
    let machine_run = events
        .iter()
        .rev()
        .find(|e| e["type"] == "run_started")
        .unwrap()["run"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(machine_run, run);
    assert_eq!(alice.ended(&chat, &machine_run).await, "finished");
    let (status, v) = alice
        .get(&format!("/api/chats/{chat}/jobs/{job}/output"))
        .await;
    assert_eq!(status, 200, "{v}");
    assert!(v["text"].as_str().unwrap().contains("job-output"), "{v}");
    assert_eq!(v["job"]["state"], "done", "{v}");

    // show with no page open: the device hears it was not shown, and its tool says so.
    let run = alice.send(&chat, "show the page").await;
    assert_eq!(alice.ended(&chat, &run).await, "finished");
    let bodies = model.bodies();
    let said = tool_results(&bodies[6]);
    assert!(
        said.last()
            .unwrap()
            .contains("The file cannot be shown now"),
        "{said:?}"
    );
    // With the chat's page open, the viewer gets the device's file and says it opened.
    let page = alice
        .http
        .get(format!("{}/api/events?chat={chat}", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    until_attached(&server, &chat).await;
    let run = alice.send(&chat, "show it again").await;
    let shown = alice
        .until(&chat, "the show", |e| e["type"] == "show")
        .await;
    assert_eq!(shown["kind"], "html", "{shown}");
    assert!(
        shown["content"]
            .as_str()
            .unwrap()
            .contains("hello from the device"),
        "{shown}"
    );
    let call = shown["call_id"].as_str().unwrap();
    let r = alice
        .http
        .get(format!(
            "{}/show/device?chat={chat}&call={call}",
            server.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("sandbox allow-scripts")
    );
    assert!(r.text().await.unwrap().contains("hello from the device"));
    let r = bob
        .http
        .get(format!(
            "{}/show/device?chat={chat}&call={call}",
            server.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let (status, v) = alice
        .post(
            &format!("/api/shows/{}", shown["ask"].as_str().unwrap()),
            json!({"opened": true}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(alice.ended(&chat, &run).await, "finished");
    let said = tool_results(&model.bodies()[8]);
    assert!(
        !said.last().unwrap().contains("cannot be shown"),
        "{said:?}"
    );
    drop(page);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_chats_run_keeps_its_lease_while_it_runs() {
    // A run's lease is what tells another process on a shared database that its process still
    // holds it: a device chat's long run must renew it like a local one.
    let model = ScriptedServer::start(vec![text(&["Working"]).stalling()])
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start_with_lease(
        data.path(),
        &model.base_url(),
        "127.0.0.1:0",
        Duration::from_secs(1),
    );
    let alice = Person {
        server: &server,
        http: server.user("alice").await,
    };
    let sb = Sandbox::new();
    let root_text = sb.root().display().to_string();
    let mut device = Device::start(
        &sb,
        &model.base_url(),
        &server.base,
        &["--root", &root_text],
    );
    let id = pair(&server, &alice.http, &mut device, "laptop").await;
    server.until_link(&id, |l| l.is_some()).await;
    let (status, v) = alice
        .post("/api/chats", json!({"device": id, "dir": root_text}))
        .await;
    assert_eq!(status, 201, "{v}");
    let chat = v["id"].as_str().unwrap().to_owned();
    let run = alice.send(&chat, "work a while").await;
    alice
        .until(&chat, "the stalled answer", |e| {
            e["type"] == "text_delta" && e["text"] == "Working"
        })
        .await;
    let lease = async || -> i64 {
        sqlx::query_scalar("SELECT lease_until FROM runs WHERE id = $1")
            .bind(&run)
            .fetch_one(&server.app.pool)
            .await
            .unwrap()
    };
    let first = lease().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = lease().await;
    assert!(
        later >= first + 2,
        "the lease was not renewed: {first} then {later}"
    );
    let (status, _) = alice
        .post(&format!("/api/runs/{run}/stop"), json!({}))
        .await;
    assert_eq!(status, 202);
    assert_eq!(alice.ended(&chat, &run).await, "stopped");
}
