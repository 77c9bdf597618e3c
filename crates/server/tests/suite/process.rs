//! The real binary: SIGTERM interrupts the runs going on (their transcripts closed, marked
//! interrupted in the database) and exits 0 with an event stream open; stderr never holds a
//! password, a token or a cookie.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::{Client, Server, run_end, text, tool_call};

const BIN: &str = env!("CARGO_BIN_EXE_llembas-server");

/// Runs a subcommand of the binary with `stdin` as its input.
pub fn cli(args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Adds a user on the command line.
pub fn add_user(data: &Path, name: &str, password: &str) {
    add_user_on(data, &[], name, password);
}

/// Adds a user on the command line, with more options (`--database-url …`).
pub fn add_user_on(data: &Path, options: &[&str], name: &str, password: &str) {
    let data = data.to_str().unwrap();
    let mut args = vec!["user", "add", "--username", name, "--data", data];
    args.extend_from_slice(options);
    let out = cli(&args, &format!("{password}\n"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The server binary serving `data` on a loopback port, its stderr captured.
pub struct Process {
    pub base: String,
    child: Child,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Process {
    pub fn start(data: &Path, model_base: &str) -> Process {
        Self::start_with(data, model_base, &[])
    }

    /// Starts the binary as [`Process::start`] does, with more options.
    pub fn start_with(data: &Path, model_base: &str, options: &[&str]) -> Process {
        let mut child = Command::new(BIN)
            .args(["--data", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .args(["--base-url", model_base, "--model", "scripted"])
            .args(options)
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let base = loop {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "the server ended before it listened: {}",
                stderr.lock().unwrap()
            );
            if let Some(at) = line.find("http://") {
                break line[at..]
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .trim_end_matches('/')
                    .to_owned();
            }
        };
        // Keep reading stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = out.read_to_string(&mut rest);
        });
        Process {
            base,
            child,
            stderr,
            reader: Some(reader),
        }
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

    /// Ends the process at once (SIGKILL), as a crash would.
    pub fn kill(self) {
        drop(self);
    }

    /// Sends SIGTERM and waits for the exit (a guard of a minute against a hang); the exit
    /// status and all of stderr.
    pub fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let since = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if since.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
                panic!(
                    "the server did not exit within a minute of SIGTERM: {}",
                    self.stderr.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        let err = self.stderr.lock().unwrap().clone();
        (status, err)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_interrupts_the_runs_closes_their_transcripts_and_exits_0() {
    // Chat one's run waits on an approval; chat two's on a model answer that stalls.
    let model = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "write",
            json!({"path": "a.txt", "content": "never\n"}),
        ),
        text(&["Thinking ", "hard"]).stalling(),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    add_user(dir.path(), "ann", "ann-secret-1");
    let server = Process::start(dir.path(), &model.base_url());
    let mut ann = server.login("ann", "ann-secret-1").await;
    let mut stream = ann.events(None).await;
    let one = ann.chat().await;
    let run1 = ann.say(&one, "write a.txt").await;
    stream.until(|e| e.kind() == "tool_call_asked").await;
    let two = ann.chat().await;
    let run2 = ann.say(&two, "think").await;
    stream
        .until(|e| e.kind() == "text_delta" && e.data["chat"] == two)
        .await;

    let reading = tokio::spawn(async move {
        let mut ended = Vec::new();
        while ended.len() < 2 {
            let e = stream.next().await;
            if e.kind() == "run_ended" {
                ended.push(e.data["event"].clone());
            }
        }
        ended
    });
    let (status, stderr) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit {status:?}: {stderr}");
    let ended = reading.await.unwrap();
    for run in [&run1, &run2] {
        assert!(
            ended.contains(&json!({"type": "run_ended", "run": run, "status": "interrupted"})),
            "{ended:?}"
        );
    }

    // Marked by the shutdown itself, before any restart's recovery.
    let pool = llembas_server::open_db(dir.path()).await.unwrap();
    let statuses: Vec<(String, String)> =
        sqlx::query_as("SELECT id, status FROM runs ORDER BY created")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(statuses.len(), 2);
    assert!(
        statuses.iter().all(|(_, s)| s == "interrupted"),
        "{statuses:?}"
    );
    pool.close().await;
    assert!(!dir.path().join("files/home/ann/a.txt").exists());

    // Restarted: nothing left to recover, each run ended once, each transcript closed.
    let server = Server::start(dir.path(), &model.base_url());
    let mut ann = server.login("ann", "ann-secret-1").await;
    for chat in [&one, &two] {
        let (_, got) = ann.get(&format!("/api/chats/{chat}")).await;
        assert_eq!(got["running"], json!(null));
        let ends = got["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"]["type"] == "run_ended")
            .count();
        assert_eq!(ends, 1, "{got}");
        let kinds: Vec<&str> = got["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds.last(), Some(&"turn_ended"), "{kinds:?}");
        if chat == &one {
            assert!(kinds.contains(&"tool_result"), "{kinds:?}");
        }
    }
    // The chat goes on.
    model.push(text(&["Back."]));
    let mut stream = ann.events(None).await;
    let run3 = ann.say(&one, "again").await;
    let end = stream.until(run_end(&run3)).await;
    assert_eq!(end.last().unwrap().data["event"]["status"], "finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_never_holds_a_password_a_token_or_a_cookie() {
    let model = ScriptedServer::start(vec![text(&["Hi."])]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    add_user(dir.path(), "ann", "ann-secret-2");
    let server = Process::start(dir.path(), &model.base_url());
    let mut anon = Client::anonymous(&server.base);
    let (status, _) = anon
        .post(
            "/api/auth/login",
            json!({"username": "ann", "password": "wrong-guess-77"}),
        )
        .await;
    assert_eq!(status, 401);
    let mut ann = server.login("ann", "ann-secret-2").await;
    let cookie = ann.cookie.clone().unwrap();
    let (status, t) = ann.post("/api/tokens", json!({"label": "ci"})).await;
    assert_eq!(status, 200);
    let token = t["token"].as_str().unwrap().to_owned();
    let mut script = Client::anonymous(&server.base);
    script.bearer = Some(token.clone());
    let chat = script.chat().await;
    let mut stream = script.events(None).await;
    let run = script.say(&chat, "hello").await;
    stream.until(run_end(&run)).await;
    let mut forged = Client::anonymous(&server.base);
    forged.bearer = Some(format!("{token}x"));
    assert_eq!(forged.get("/api/chats").await.0, 401);
    let (status, _) = ann.get("/api/chats?token=zz-not-logged").await;
    assert_eq!(status, 200);
    drop(stream);

    let (status, stderr) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit {status:?}: {stderr}");
    assert!(stderr.contains("POST /api/auth/login 200"), "{stderr}");
    assert!(stderr.contains("POST /api/tokens 200"), "{stderr}");
    for secret in [
        "ann-secret-2",
        "wrong-guess-77",
        cookie.as_str(),
        token.as_str(),
        &token[4..20],
        "zz-not-logged",
    ] {
        assert!(
            !stderr.contains(secret),
            "stderr holds {secret:?}:\n{stderr}"
        );
    }
}
