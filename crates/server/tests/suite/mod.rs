//! What the tests share: a server on its own runtime (dropping it is a crash: every task ends
//! at once), signed-in clients, the SSE reader, scripted model replies.

mod accounts;
mod admin;
mod browser;
mod catalog;
mod chats;
mod db;
mod devices;
mod files;
mod forge;
mod images;
mod mcp;
mod memory;
mod pages;
mod postgres;
mod process;
mod rewind;
mod search;
mod settings;
mod shares;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use harness_model::settings::ModelSettings;
use harness_test_support::{Reply, chunk};
use llembas_server::auth::{Role, create_user};
use llembas_server::{App, Config};
use serde_json::{Value, json};

/// A server on a loopback port, on a runtime of its own.
pub struct Server {
    pub base: String,
    pub app: Arc<App>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Starts a server on `data`, with the model at `model_base`.
    pub fn start(data: &Path, model_base: &str) -> Server {
        Self::start_with(data, model_base, |_| {})
    }

    /// Starts a server on `data` and the database `url` (`None`: the data directory's SQLite
    /// file; on PostgreSQL with a lease of a second, so a crashed server's runs are soon taken).
    pub fn start_on(data: &Path, model_base: &str, url: Option<&str>) -> Server {
        Self::start_with(data, model_base, |c| {
            if let Some(u) = url {
                c.database_url = Some(u.to_owned());
                c.run_lease = Duration::from_secs(1);
            }
        })
    }

    /// Starts a server as [`Server::start`] does, its configuration changed by `edit`.
    pub fn start_with(data: &Path, model_base: &str, edit: impl FnOnce(&mut Config)) -> Server {
        let mut config = Config {
            data: data.to_path_buf(),
            database_url: None,
            run_lease: Duration::from_secs(30),
            model: Some(ModelSettings {
                model: Some("scripted".into()),
                ..ModelSettings::new(model_base)
            }),
            secure_cookie: false,
            allow_signups: false,
            idle_session: llembas_server::IDLE_SESSION,
            // The tests name variables their process has (they set none).
            forge_token_prefix: String::new(),
        };
        edit(&mut config);
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
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                tx.send((addr, app.clone())).unwrap();
                tokio::select! {
                    r = llembas_server::serve(app, listener, std::future::pending()) => r.unwrap(),
                    _ = stop_rx => {}
                }
            });
            rt.shutdown_timeout(Duration::from_secs(10));
        });
        let (addr, app) = rx.recv().unwrap();
        Server {
            base: format!("http://{addr}"),
            app,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Adds an account with the default grants.
    pub async fn user(&self, name: &str) -> Client {
        let password = format!("{name}-password");
        let id = create_user(&self.app.pool, name, &password, Role::User)
            .await
            .unwrap();
        llembas_server::world::give_default_grants(&self.app.pool, &self.app.tree, id, name)
            .await
            .unwrap();
        self.login(name, &password).await
    }

    /// Adds the admin `root` and signs in as it.
    pub async fn admin(&self) -> Client {
        create_user(&self.app.pool, "root", "root-password", Role::Admin)
            .await
            .unwrap();
        self.login("root", "root-password").await
    }

    /// Signs in.
    pub async fn login(&self, name: &str, password: &str) -> Client {
        let mut c = Client::anonymous(&self.base);
        let (status, body) = c
            .post(
                "/api/auth/login",
                json!({"username": name, "password": password}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        c
    }

    /// The server's tree on disk.
    pub fn tree(&self) -> PathBuf {
        self.app.tree.clone()
    }

    /// Ends the server at once, as a crash would.
    pub fn crash(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A client with the cookie its sign-in set (or a bearer token).
#[derive(Clone)]
pub struct Client {
    pub base: String,
    pub http: reqwest::Client,
    pub cookie: Option<String>,
    pub bearer: Option<String>,
    pub set_cookie: Option<String>,
}

impl Client {
    pub fn anonymous(base: &str) -> Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client {
            base: base.to_owned(),
            http: reqwest::Client::builder().build().unwrap(),
            cookie: None,
            bearer: None,
            set_cookie: None,
        }
    }

    fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(c) = &self.cookie {
            r = r.header("cookie", format!("llembas_session={c}"));
        }
        if let Some(t) = &self.bearer {
            r = r.bearer_auth(t);
        }
        r
    }

    pub async fn send(&mut self, r: reqwest::RequestBuilder) -> (u16, Value) {
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        if let Some(sc) = resp.headers().get("set-cookie") {
            let sc = sc.to_str().unwrap().to_owned();
            let value = sc
                .split(';')
                .next()
                .unwrap()
                .trim_start_matches("llembas_session=")
                .to_owned();
            self.cookie = (!value.is_empty()).then_some(value);
            self.set_cookie = Some(sc);
        }
        let text = resp.text().await.unwrap();
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, v)
    }

    /// The answer to a GET as it came: status, headers and body.
    pub async fn get_raw(&mut self, path: &str) -> reqwest::Response {
        self.req(reqwest::Method::GET, path).send().await.unwrap()
    }

    pub async fn get(&mut self, path: &str) -> (u16, Value) {
        let r = self.req(reqwest::Method::GET, path);
        self.send(r).await
    }

    pub async fn post(&mut self, path: &str, body: Value) -> (u16, Value) {
        let r = self.req(reqwest::Method::POST, path).json(&body);
        self.send(r).await
    }

    pub async fn post_with(
        &mut self,
        path: &str,
        body: Value,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut r = self.req(reqwest::Method::POST, path).json(&body);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        self.send(r).await
    }

    pub async fn patch(&mut self, path: &str, body: Value) -> (u16, Value) {
        let r = self.req(reqwest::Method::PATCH, path).json(&body);
        self.send(r).await
    }

    pub async fn put_json(&mut self, path: &str, body: Value) -> (u16, Value) {
        let r = self.req(reqwest::Method::PUT, path).json(&body);
        self.send(r).await
    }

    pub async fn delete(&mut self, path: &str) -> (u16, Value) {
        let r = self.req(reqwest::Method::DELETE, path);
        self.send(r).await
    }

    pub async fn put(&mut self, path: &str, body: &str) -> (u16, Value) {
        let r = self.req(reqwest::Method::PUT, path).body(body.to_owned());
        self.send(r).await
    }

    /// A new chat's id.
    pub async fn chat(&mut self) -> String {
        let (status, v) = self.post("/api/chats", json!({})).await;
        assert_eq!(status, 201, "{v}");
        v["id"].as_str().unwrap().to_owned()
    }

    /// Sends a message; the run's id.
    pub async fn say(&mut self, chat: &str, text: &str) -> String {
        let (status, v) = self
            .post(
                &format!("/api/chats/{chat}/messages"),
                json!({"text": text}),
            )
            .await;
        assert_eq!(status, 202, "{v}");
        v["run"].as_str().unwrap().to_owned()
    }

    /// Opens the event stream (after the event `after`, sent as `Last-Event-ID`).
    pub async fn events(&self, after: Option<i64>) -> Events {
        let mut r = self.req(reqwest::Method::GET, "/api/events");
        if let Some(a) = after {
            r = r.header("last-event-id", a.to_string());
        }
        let resp = r.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        Events {
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
        }
    }
}

/// One event of the stream.
#[derive(Debug, Clone)]
pub struct Ev {
    pub id: i64,
    pub data: Value,
}

impl Ev {
    pub fn kind(&self) -> &str {
        self.data["event"]["type"].as_str().unwrap_or("")
    }
}

type ByteStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// The SSE stream, read event by event.
pub struct Events {
    body: ByteStream,
    buf: String,
}

impl Events {
    /// The next event (a guard of a minute against a hang).
    pub async fn next(&mut self) -> Ev {
        use futures_util::StreamExt;
        loop {
            if let Some(at) = self.buf.find("\n\n") {
                let block: String = self.buf[..at].to_owned();
                self.buf.drain(..at + 2);
                let mut id = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if let Some(id) = id {
                    return Ev {
                        id,
                        data: serde_json::from_str(&data).unwrap(),
                    };
                }
                continue;
            }
            let piece = tokio::time::timeout(Duration::from_secs(60), self.body.next())
                .await
                .expect("no event within a minute")
                .expect("the stream ended")
                .unwrap();
            self.buf.push_str(&String::from_utf8_lossy(&piece));
        }
    }

    /// Reads to the stream's end (a guard of a minute against a hang, keep-alives or not): what
    /// it sent meanwhile, which holds no event with an id.
    pub async fn ends(&mut self) -> String {
        let said = self.closes().await;
        assert!(
            !said.lines().any(|l| l.starts_with("id:")),
            "the stream sent events before it ended: {said}"
        );
        said
    }

    /// Reads to the stream's end (a guard of a minute against a hang): all it sent meanwhile,
    /// events included.
    pub async fn closes(&mut self) -> String {
        use futures_util::StreamExt;
        let guard = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let piece = tokio::time::timeout_at(guard, self.body.next())
                .await
                .expect("the stream did not end within a minute");
            match piece {
                Some(Ok(p)) => self.buf.push_str(&String::from_utf8_lossy(&p)),
                Some(Err(_)) | None => break,
            }
        }
        std::mem::take(&mut self.buf)
    }

    /// Events up to and including the first that `stop` accepts.
    pub async fn until(&mut self, stop: impl Fn(&Ev) -> bool) -> Vec<Ev> {
        let mut got = Vec::new();
        loop {
            let e = self.next().await;
            let done = stop(&e);
            got.push(e);
            if done {
                return got;
            }
        }
    }
}

/// A streamed answer calling one tool.
pub fn tool_call(id: &str, name: &str, args: Value) -> Reply {
    Reply::sse_chunks(&[
        chunk(json!({"role": "assistant", "content": null}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ])
}

/// A streamed text answer.
pub fn text(pieces: &[&str]) -> Reply {
    Reply::text_stream(pieces)
}

/// The stream's event ending the run `run`.
pub fn run_end(run: &str) -> impl Fn(&Ev) -> bool + '_ {
    move |e: &Ev| e.kind() == "run_ended" && e.data["run"] == run
}

/// What the last tool result said to the model, in a request's body.
pub fn last_tool_result(body: &serde_json::Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .unwrap_or_else(|| panic!("no tool result in {body}"))
}
