//! `cargo xtask bench server`: the release `llembas-server` on a temporary data directory,
//! against an in-process scripted streaming model server (plain HTTP/1.1 over tokio, so nothing
//! of the model's own timing is in the figures), with 200 concurrent streaming chats: each of
//! 200 users signs in, creates a chat and opens its event stream; then all post a message at
//! once and read their stream to the run's end. The load runs optimised as the server does
//! (a debug `cargo xtask` builds and runs the release one), for its slowness would be counted
//! as the server's.
//!
//! Figures:
//! - **added first-token latency**: from the model server writing the answer's first piece to
//!   the client receiving it as a `text_delta`; and, besides, from posting the message to the
//!   model's request (building the request), and end to end (post → first `text_delta`), all
//!   200 posted at one instant;
//! - **per event**: from the model server writing a piece to the client receiving it as a
//!   `text_delta` (parsing, the loop, storing the event in the database, the stream);
//! - **RSS**: the server's resident memory (`VmRSS` after the run, `VmHWM` the peak), from /proc;
//! - **errors**: refused requests, broken streams, runs not `finished`.
//!
//! - **churn**: the RSS 10,000 chats made and deleted by one user leave behind.
//!
//! The goal of issue 16: p99 added first-token latency ≤ 20 ms, RSS ≤ 200 MB, no error; of
//! issue 28: the churn moves RSS by less than 30 MB. `--profile NAME` builds and runs in that
//! cargo profile (release by default), in `CARGO_TARGET_DIR` when it is set.

use std::collections::HashMap;
use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Concurrent chats.
const CHATS: usize = 200;
/// Pieces of each streamed answer.
const PIECES: usize = 20;
/// The model's pause between two pieces.
const GAP: Duration = Duration::from_millis(50);
/// The guard against a hang: a run must end within this.
const RUN_GUARD: Duration = Duration::from_secs(300);

/// When the model server wrote each piece of each chat's answer (by the chat's tag).
type Sent = Arc<Mutex<HashMap<usize, Vec<Instant>>>>;

pub fn bench_server(profile: &str) -> Result<()> {
    let built = crate::profile_dir(profile);
    let this_profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    if built.file_name().and_then(|n| n.to_str()) != Some(this_profile) {
        // The load — 200 clients and the scripted model — shares the server's two cores: built
        // for debugging it took more CPU than the server did (0.68 against 0.54 CPU-seconds
        // while the answers streamed) and its slowness was counted as the server's (first
        // token p99 24–38 ms against 14–27 with both optimised). So it runs in the server's
        // profile too.
        if !crate::cargo(&[
            "build",
            "--profile",
            profile,
            "-p",
            "xtask",
            "-p",
            "llembas-server",
        ])? {
            bail!("cannot build xtask and llembas-server in the {profile} profile");
        }
        let xtask = built.join("xtask");
        let status = Command::new(&xtask)
            .args(["bench", "server", "--profile", profile])
            .status()
            .with_context(|| format!("cannot run {}", xtask.display()))?;
        if !status.success() {
            bail!("{} bench server: {status}", xtask.display());
        }
        return Ok(());
    }
    if !crate::cargo(&["build", "--profile", profile, "-p", "llembas-server"])? {
        bail!("cannot build llembas-server in the {profile} profile");
    }
    let bin = built.join("llembas-server");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run(&bin))
}

async fn run(bin: &Path) -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let sent: Sent = Arc::default();
    // 200 chats connect at once: more waiting connections than tokio's 128 (one past it is
    // dropped, and tried again a second later).
    let model = tokio::net::TcpSocket::new_v4()?;
    model.bind("127.0.0.1:0".parse()?)?;
    let model = model.listen(1024)?;
    let model_addr = model.local_addr()?;
    tokio::spawn(model_server(model, sent.clone()));

    let config = dir.path().join("models.toml");
    std::fs::write(
        &config,
        format!(
            "default_endpoint = \"bench\"\n\n[endpoints.bench]\nbase_url = \"http://{model_addr}/v1\"\nmodel = \"bench\"\ncapacity = {}\n",
            CHATS + 8
        ),
    )?;
    let data = dir.path().join("data");
    println!("adding {CHATS} users…");
    let users: Vec<(String, String)> = (0..CHATS)
        .map(|i| (format!("u{i:03}"), format!("password-{i:03}-bench")))
        .collect();
    add_users(bin, &data, &users)?;

    let (mut child, base) = start(bin, &data, &config)?;
    let pid = child.id();
    let rss_idle = rss(pid, "VmRSS");
    println!("server pid {pid} at {base}, {} MB idle", mb(rss_idle));

    // Every chat and this task: past it, all are signed in with a chat and a stream open.
    let barrier = Arc::new(tokio::sync::Barrier::new(CHATS + 1));
    let peak_threads = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, on) = (peak_threads.clone(), sampling.clone());
        std::thread::spawn(move || {
            while on.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss(pid, "Threads"), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    for (i, (name, password)) in users.into_iter().enumerate() {
        let (base, barrier, sent, errors) =
            (base.clone(), barrier.clone(), sent.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            match chat(i, &base, &name, &password, &barrier, &sent).await {
                Ok(f) => Some(f),
                Err(e) => {
                    errors
                        .lock()
                        .map(|mut v| v.push(format!("{name}: {e:#}")))
                        .ok();
                    None
                }
            }
        }));
    }
    barrier.wait().await;
    // Everyone ready; a pause lets the sign-ins' work settle (and a profiler attach).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_ready = rss(pid, "VmRSS");
    println!("all {CHATS} signed in with a chat and a stream; posting");
    barrier.wait().await;
    let started = Instant::now();
    let mut firsts = Vec::new();
    let mut firsts_added = Vec::new();
    let mut events = Vec::new();
    let mut before_model = Vec::new();
    for t in tasks {
        if let Ok(Some(f)) = t.await {
            firsts.push(f.first);
            firsts_added.extend(f.first_added);
            events.extend(f.events);
            if let Some(b) = f.before_model {
                before_model.push(b);
            }
        }
    }
    let wall = started.elapsed();
    let rss_after = rss(pid, "VmRSS");
    let rss_peak = rss(pid, "VmHWM");
    let churned = churn(&base, pid).await;
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let _ = sampler.join();
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let exit = child.wait()?;
    let errors = errors.lock().map(|v| v.clone()).unwrap_or_default();

    println!();
    println!(
        "{CHATS} concurrent streaming chats, {PIECES} pieces each {} ms apart; {:.1} s in all",
        GAP.as_millis(),
        wall.as_secs_f64()
    );
    println!("| figure | p50 | p99 | max | n |");
    println!("|---|---|---|---|---|");
    row(
        "added first-token latency (model's first piece → text_delta)",
        &mut firsts_added,
    );
    row("post → the model's request", &mut before_model);
    row("end to end (post → first text_delta)", &mut firsts);
    row("per event (model piece → text_delta)", &mut events);
    println!(
        "RSS: {} MB idle, {} MB with the chats made and streams open, {} MB after the runs, {} MB peak; {} threads at most",
        mb(rss_idle),
        mb(rss_ready),
        mb(rss_after),
        mb(rss_peak),
        peak_threads.load(std::sync::atomic::Ordering::Relaxed)
    );
    let churn_ok = match &churned {
        Ok((before, after)) => {
            println!(
                "{CHURN} chats made and deleted by one user: RSS {} MB before, {} MB after ({:+.1} MB)",
                mb(*before),
                mb(*after),
                (*after as f64 - *before as f64) / 1024.0
            );
            after.saturating_sub(*before) < 30 * 1024
        }
        Err(e) => {
            println!("{CHURN} chats made and deleted by one user: failed: {e:#}");
            false
        }
    };
    println!("errors: {}", errors.len());
    for e in errors.iter().take(10) {
        println!("  {e}");
    }
    println!("server exit on SIGTERM: {exit}");
    let p99 = percentile(&firsts_added, 99).unwrap_or(Duration::MAX);
    let goal =
        p99 <= Duration::from_millis(20) && rss_peak <= 200 * 1024 && errors.is_empty() && churn_ok;
    println!(
        "goal (p99 first token ≤ 20 ms, RSS ≤ 200 MB, no error, {CHURN} chats made and deleted move RSS < 30 MB): {}",
        if goal { "met" } else { "MISSED" }
    );
    Ok(())
}

/// Chats one user makes and deletes after the streaming run (issue 28: they must not stay in
/// memory).
const CHURN: usize = 10_000;

/// One user makes [`CHURN`] chats, eight at a time, then deletes them: the server's RSS after a
/// first hundred made and deleted (its pools warm) and after all (kB).
async fn churn(base: &str, pid: u32) -> Result<(u64, u64)> {
    use futures_util::StreamExt as _;
    let http = reqwest::Client::builder().build()?;
    let login = http
        .post(format!("{base}/api/auth/login"))
        .json(&json!({"username": "u000", "password": "password-000-bench"}))
        .send()
        .await?;
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .context("no cookie")?
        .to_owned();
    let round = |n: usize| {
        let (http, cookie) = (http.clone(), cookie.clone());
        async move {
            let made: Vec<Result<String>> = futures_util::stream::iter(0..n)
                .map(|_| {
                    let (http, cookie) = (http.clone(), cookie.clone());
                    async move {
                        let v = ok_json(
                            http.post(format!("{base}/api/chats"))
                                .header("cookie", &cookie)
                                .json(&json!({}))
                                .send()
                                .await?,
                        )
                        .await?;
                        Ok(v["id"].as_str().context("no chat id")?.to_owned())
                    }
                })
                .buffer_unordered(8)
                .collect()
                .await;
            let ids = made.into_iter().collect::<Result<Vec<_>>>()?;
            let deleted: Vec<Result<Value>> = futures_util::stream::iter(ids)
                .map(|id| {
                    let (http, cookie) = (http.clone(), cookie.clone());
                    async move {
                        ok_json(
                            http.delete(format!("{base}/api/chats/{id}"))
                                .header("cookie", &cookie)
                                .send()
                                .await?,
                        )
                        .await
                    }
                })
                .buffer_unordered(8)
                .collect()
                .await;
            deleted.into_iter().collect::<Result<Vec<_>>>().map(drop)
        }
    };
    round(100).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss(pid, "VmRSS");
    round(CHURN).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok((before, rss(pid, "VmRSS")))
}

fn mb(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

/// A line of `/proc/PID/status` in kB.
fn rss(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: usize) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let at = ((sorted.len() * p).div_ceil(100)).clamp(1, sorted.len()) - 1;
    sorted.get(at).copied()
}

fn ms(d: Option<Duration>) -> String {
    d.map(|d| format!("{:.2} ms", d.as_secs_f64() * 1000.0))
        .unwrap_or_else(|| "—".into())
}

fn row(name: &str, v: &mut [Duration]) {
    v.sort();
    println!(
        "| {name} | {} | {} | {} | {} |",
        ms(percentile(v, 50)),
        ms(percentile(v, 99)),
        ms(v.last().copied()),
        v.len()
    );
}

fn add_users(bin: &Path, data: &Path, users: &[(String, String)]) -> Result<()> {
    // The first alone: it makes the database (two processes would race its migrations).
    let (first, rest) = users.split_at(1.min(users.len()));
    for pair in std::iter::once(first).chain(rest.chunks(4)) {
        let mut children = Vec::new();
        for (name, password) in pair {
            let mut c = Command::new(bin)
                .args(["user", "add", "--username", name, "--data"])
                .arg(data)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .context("cannot run llembas-server user add")?;
            if let Some(mut stdin) = c.stdin.take() {
                writeln!(stdin, "{password}")?;
            }
            children.push(c);
        }
        for c in children {
            let out = c.wait_with_output()?;
            if !out.status.success() {
                bail!("user add failed: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
    Ok(())
}

/// Starts the server on a loopback port: the child and its base URL.
fn start(bin: &Path, data: &Path, config: &Path) -> Result<(Child, String)> {
    let mut child = Command::new(bin)
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start llembas-server")?;
    let out = child.stdout.take().context("no stdout")?;
    let mut out = std::io::BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line)? == 0 {
            bail!("llembas-server ended before it listened");
        }
        if let Some(at) = line.find("http://") {
            let base = line[at..]
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_owned();
            std::thread::spawn(move || {
                let mut rest = String::new();
                while out.read_line(&mut rest).map(|n| n > 0).unwrap_or(false) {
                    rest.clear();
                }
            });
            return Ok((child, base));
        }
    }
}

/// One chat's figures.
struct Figures {
    first: Duration,
    first_added: Option<Duration>,
    before_model: Option<Duration>,
    events: Vec<Duration>,
}

/// When the model server saw each chat's request.
static ASKED: Mutex<Option<HashMap<usize, Instant>>> = Mutex::new(None);

async fn chat(
    i: usize,
    base: &str,
    name: &str,
    password: &str,
    barrier: &tokio::sync::Barrier,
    sent: &Sent,
) -> Result<Figures> {
    use futures_util::StreamExt as _;
    let http = reqwest::Client::builder().build()?;
    let login = http
        .post(format!("{base}/api/auth/login"))
        .json(&json!({"username": name, "password": password}))
        .send()
        .await?;
    if !login.status().is_success() {
        bail!("sign-in: {}", login.status());
    }
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .context("no cookie")?
        .to_owned();
    let created: Value = ok_json(
        http.post(format!("{base}/api/chats"))
            .header("cookie", &cookie)
            .json(&json!({}))
            .send()
            .await?,
    )
    .await?;
    let chat = created["id"].as_str().context("no chat id")?.to_owned();
    let events = http
        .get(format!("{base}/api/events"))
        .header("cookie", &cookie)
        .send()
        .await?;
    if !events.status().is_success() {
        bail!("events: {}", events.status());
    }
    let mut body = events.bytes_stream();
    // Ready; then all post at once.
    barrier.wait().await;
    barrier.wait().await;

    let posted = Instant::now();
    let answer: Value = ok_json(
        http.post(format!("{base}/api/chats/{chat}/messages"))
            .header("cookie", &cookie)
            .json(&json!({"text": format!("bench-tag-{i}: say twenty words")}))
            .send()
            .await?,
    )
    .await?;
    let run = answer["run"].as_str().context("no run id")?.to_owned();
    let mut buf = String::new();
    let mut first = None;
    let mut received: Vec<(usize, Instant)> = Vec::new();
    let deadline = posted + RUN_GUARD;
    let status = 'read: loop {
        let piece = tokio::time::timeout_at(deadline.into(), body.next())
            .await
            .context("the run did not end in time")?
            .context("the stream ended")??;
        let at = Instant::now();
        buf.push_str(&String::from_utf8_lossy(&piece));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if data.is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&data)?;
            if v["run"] != run.as_str() {
                continue;
            }
            match v["event"]["type"].as_str() {
                Some("text_delta") => {
                    first.get_or_insert(at);
                    let text = v["event"]["text"].as_str().unwrap_or_default();
                    for word in text.split_whitespace() {
                        if let Some(k) = word.strip_prefix('w').and_then(|d| d.parse().ok()) {
                            received.push((k, at));
                        }
                    }
                }
                Some("run_ended") => break 'read v["event"]["status"].clone(),
                _ => {}
            }
        }
    };
    if status != "finished" {
        bail!("the run ended {status}");
    }
    let first = first.context("no text_delta")?;
    let sent_at = sent
        .lock()
        .map(|m| m.get(&i).cloned().unwrap_or_default())
        .unwrap_or_default();
    if received.len() != PIECES {
        bail!("{} of {PIECES} pieces arrived", received.len());
    }
    let events = received
        .iter()
        .filter_map(|(k, at)| sent_at.get(*k).map(|s| at.saturating_duration_since(*s)))
        .collect();
    let asked = ASKED
        .lock()
        .ok()
        .and_then(|m| m.as_ref().and_then(|m| m.get(&i).copied()));
    let first_added = sent_at.first().map(|s| first.saturating_duration_since(*s));
    Ok(Figures {
        first: first.duration_since(posted),
        first_added,
        before_model: asked.map(|a| a.saturating_duration_since(posted)),
        events,
    })
}

async fn ok_json(r: reqwest::Response) -> Result<Value> {
    let status = r.status();
    let text = r.text().await?;
    if !status.is_success() {
        bail!("{status}: {text}");
    }
    Ok(serde_json::from_str(&text)?)
}

/// The scripted model server: `GET /v1/models` names `bench`; a chat completion streams
/// [`PIECES`] pieces `w0 w1 …`, [`GAP`] apart, the first at once, recording when each was
/// written by the `bench-tag-N` of the request's body.
async fn model_server(listener: tokio::net::TcpListener, sent: Sent) {
    loop {
        let Ok((conn, _)) = listener.accept().await else {
            return;
        };
        let sent = sent.clone();
        tokio::spawn(async move {
            let _ = answer(conn, sent).await;
        });
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "bench", "object": "chat.completion.chunk", "created": 0, "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

async fn answer(mut conn: tokio::net::TcpStream, sent: Sent) -> Result<()> {
    conn.set_nodelay(true)?;
    let mut buf = Vec::new();
    let mut piece = [0u8; 16384];
    let head_end = loop {
        let n = conn.read(&mut piece).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&piece[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = conn.read(&mut piece).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&piece[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).to_string();
    if head.starts_with("GET") {
        let list =
            json!({"object": "list", "data": [{"id": "bench", "object": "model"}]}).to_string();
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{list}",
            list.len()
        );
        conn.write_all(reply.as_bytes()).await?;
        return Ok(());
    }
    let tag: Option<usize> = body.find("bench-tag-").and_then(|at| {
        body[at + 10..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|d| d.parse().ok())
    });
    if let Some(t) = tag
        && let Ok(mut m) = ASKED.lock()
    {
        m.get_or_insert_with(HashMap::new)
            .entry(t)
            .or_insert_with(Instant::now);
    }
    conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
    )
    .await?;
    conn.write_all(chunk(json!({"role": "assistant", "content": ""}), None).as_bytes())
        .await?;
    for k in 0..PIECES {
        if k > 0 {
            tokio::time::sleep(GAP).await;
        }
        conn.write_all(chunk(json!({"content": format!("w{k} ")}), None).as_bytes())
            .await?;
        conn.flush().await?;
        if let Some(t) = tag
            && let Ok(mut m) = sent.lock()
        {
            m.entry(t).or_default().push(Instant::now());
        }
    }
    conn.write_all(chunk(json!({}), Some("stop")).as_bytes())
        .await?;
    conn.write_all(b"data: [DONE]\n\n").await?;
    conn.shutdown().await?;
    Ok(())
}
