//! The device link's figures, measured by hand (`#[ignore]`d: they time things, and a test never
//! asserts on a time): `cargo test --test all -- --ignored link_figures --nocapture` prints
//!
//! - the time from a send (`POST /api/chats/{id}/messages`) to its first text delta on the
//!   page's event stream (`GET /api/events`), through a device and in a local chat, the scripted
//!   model answering both;
//! - the bytes on the link (both directions, WebSocket frames as they cross TCP: a counting
//!   proxy sits between the device and the server) for a command printing 1 MB on the device,
//!   beside a command printing a line;
//! - the time from a dropped link (the proxy cuts it; then the server restarted) until the
//!   server sees the device online again.

#![allow(
    clippy::print_stderr,
    reason = "the figures are this test's output, read by the person who runs it"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use harness_test_support::ScriptedServer;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::link::{Device, Person, Server, pair};
use super::{Sandbox, text, tool_call};

/// A TCP proxy on loopback that counts the bytes each way and can cut every connection.
struct Proxy {
    addr: std::net::SocketAddr,
    /// Bytes from the device to the server, and back.
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
    cut: tokio::sync::watch::Sender<u64>,
}

impl Proxy {
    async fn start(to: std::net::SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let (up, down) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (u, d, c) = (up.clone(), down.clone(), cut.clone());
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = tokio::net::TcpStream::connect(to).await else {
                    continue;
                };
                let (ri, wi) = inbound.into_split();
                let (ro, wo) = outbound.into_split();
                let mut cut = c.subscribe();
                let (u, d) = (u.clone(), d.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = pipe(ri, wo, u) => {}
                        () = pipe(ro, wi, d) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Proxy {
            addr,
            up,
            down,
            cut,
        }
    }

    fn bytes(&self) -> (u64, u64) {
        (
            self.up.load(Ordering::SeqCst),
            self.down.load(Ordering::SeqCst),
        )
    }

    /// Cuts every connection open now.
    fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    count: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        count.fetch_add(n as u64, Ordering::SeqCst);
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The median and the extremes of `times`, in milliseconds.
fn spread(times: &mut [Duration]) -> String {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "median {:.1} ms (min {:.1}, max {:.1}, n {})",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1]),
        times.len()
    )
}

/// Sends `n` messages to the chat, each once the last ended: the times from each send to its
/// first text delta on the page's event stream.
async fn first_tokens(alice: &Person<'_>, chat: &str, n: usize) -> Vec<Duration> {
    let stream = alice
        .http
        .get(format!("{}/api/events", alice.server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, String)>();
    let reader = tokio::spawn(async move {
        let mut body = stream.bytes_stream();
        let mut pending = String::new();
        while let Some(Ok(bytes)) = body.next().await {
            let at = Instant::now();
            pending.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(end) = pending.find('\n') {
                let line: String = pending.drain(..=end).collect();
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let Ok(v) = serde_json::from_str::<Value>(data.trim()) else {
                    continue;
                };
                if v["event"]["type"] == "text_delta"
                    && let Some(run) = v["run"].as_str()
                {
                    let _ = tx.send((at, run.to_owned()));
                }
            }
        }
    });
    let mut times = Vec::new();
    for _ in 0..n {
        let sent = Instant::now();
        let run = alice.send(chat, "hello").await;
        let first = loop {
            let (at, of) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                .await
                .unwrap()
                .unwrap();
            if of == run {
                break at;
            }
        };
        times.push(first - sent);
        assert_eq!(alice.ended(chat, &run).await, "finished");
    }
    reader.abort();
    times
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measures the link's figures (times and bytes), run by hand"]
async fn link_figures() {
    const N: usize = 20;
    let mut replies: Vec<_> = (0..2 * N).map(|_| text(&["Hi", " there."])).collect();
    let big = "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxy | head -c 1048576";
    for (id, command) in [("b1", big), ("b2", "echo one line")] {
        replies.push(tool_call(id, "bash", json!({"command": command})));
        replies.push(text(&["Ran it."]));
    }
    let model = ScriptedServer::start(replies).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
    let server_addr: std::net::SocketAddr =
        server.base.trim_start_matches("http://").parse().unwrap();
    let proxy = Proxy::start(server_addr).await;
    let through = format!("http://{}", proxy.addr);
    let alice = Person {
        server: &server,
        http: server.user("alice").await,
    };
    let sb = Sandbox::new();
    let root_text = sb.root().display().to_string();
    let mut device = Device::start(&sb, &model.base_url(), &through, &["--root", &root_text]);
    let id = pair(&server, &alice.http, &mut device, "laptop").await;
    server.until_link(&id, |l| l.is_some()).await;

    // The first token, through the device and in a local chat.
    let (_, v) = alice
        .post(
            "/api/chats",
            json!({"device": id, "dir": root_text, "mode": "auto"}),
        )
        .await;
    let on_device = v["id"].as_str().unwrap().to_owned();
    let (_, v) = alice.post("/api/chats", json!({"mode": "auto"})).await;
    let local = v["id"].as_str().unwrap().to_owned();
    let mut device_times = first_tokens(&alice, &on_device, N).await;
    let mut local_times = first_tokens(&alice, &local, N).await;
    eprintln!(
        "first token, through the device: {}",
        spread(&mut device_times)
    );
    eprintln!(
        "first token, in a local chat:    {}",
        spread(&mut local_times)
    );

    // The bytes on the link for a command printing 1 MB, and for one printing a line.
    for what in ["1 MB of output", "one line of output"] {
        let (up0, down0) = proxy.bytes();
        let run = alice.send(&on_device, "run it").await;
        assert_eq!(alice.ended(&on_device, &run).await, "finished");
        let (up1, down1) = proxy.bytes();
        eprintln!(
            "bytes on the link, a turn running a command printing {what}: device→server {}, server→device {}",
            up1 - up0,
            down1 - down0
        );
    }

    // A dropped link: the time until the server sees the device online again.
    let generation = server
        .until_link(&id, |l| l.is_some())
        .await
        .unwrap()
        .generation;
    let cut = Instant::now();
    proxy.cut();
    server
        .until_link(&id, |l| l.is_some_and(|l| l.generation != generation))
        .await;
    eprintln!(
        "online again after the link was cut: {:.0} ms",
        cut.elapsed().as_secs_f64() * 1000.0
    );
    // The server restarted on its port: from its start to the device online.
    drop(alice);
    server.crash();
    let down = Instant::now();
    device.line("dialing again").await;
    let server = Server::start(data.path(), &model.base_url(), &server_addr.to_string());
    let up = Instant::now();
    server.until_link(&id, |l| l.is_some()).await;
    eprintln!(
        "online again after a server restart: {:.0} ms after it listened ({:.0} ms after it went down)",
        up.elapsed().as_secs_f64() * 1000.0,
        down.elapsed().as_secs_f64() * 1000.0
    );
}
