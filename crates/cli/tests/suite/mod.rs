//! Helpers shared by the suite: a temporary project and home, the binary run with them, and
//! scripted replies.

mod acp;
mod agents;
mod checkpoints;
mod cli;
mod commands;
mod compact;
mod environment;
mod hooks;
mod link;
mod link_figures;
mod link_gaps;
mod link_page;
mod mcp;
mod oneshot;
mod patch;
mod paths;
mod process;
mod real_server;
mod sandbox;
mod screen;
mod settings;
mod store;
mod terminal;
mod web;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use harness_test_support::{Reply, chunk};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_llembas")
}

/// A temporary project directory and a temporary llembas home.
pub struct Sandbox {
    pub project: tempfile::TempDir,
    pub home: tempfile::TempDir,
}

/// What a run of the binary gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            project: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    /// The project's canonical path (what the model is told).
    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.project.path()).unwrap()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.project.path().join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.project.path().join(rel)).unwrap()
    }

    /// A command for the binary in the project, isolated from the person's environment.
    pub fn command(&self, base_url: &str, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(bin());
        c.args(args)
            .current_dir(self.project.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("LLEMBAS_HOME", self.home.path())
            .env("NO_COLOR", "1")
            .env("OPENAI_BASE_URL", base_url)
            .env("OPENAI_MODEL", "scripted")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Runs the binary with `stdin` fed in, to its end.
    pub async fn run(&self, base_url: &str, args: &[&str], stdin: &str) -> Run {
        let mut child = self.command(base_url, args).spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).await.unwrap();
        drop(input);
        let out =
            tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
                .await
                .expect("llembas did not end within 60 s")
                .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The saved sessions' directories.
    pub fn sessions(&self) -> Vec<PathBuf> {
        let dir = self.home.path().join("data").join("sessions");
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The transcript lines of the only session.
    pub fn transcript(&self) -> Vec<Value> {
        let s = self.sessions();
        assert_eq!(s.len(), 1, "one session expected: {s:?}");
        transcript_of(&s[0])
    }
}

pub fn transcript_of(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A streamed text answer, as llama-server streams it but without a usage chunk (the scripted
/// server's fixed usage would read as a silently truncated prompt).
pub fn text(pieces: &[&str]) -> Reply {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    chunks.extend(pieces.iter().map(|p| chunk(json!({"content": p}), None)));
    chunks.push(chunk(json!({}), Some("stop")));
    Reply::sse_chunks(&chunks)
}

/// A streamed answer calling one tool (arguments sent in two pieces, as servers do).
pub fn tool_call(id: &str, name: &str, args: Value) -> Reply {
    calls(&[(id, name, args)])
}

/// A streamed answer calling several tools in one step.
pub fn calls(list: &[(&str, &str, Value)]) -> Reply {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    for (i, (id, name, args)) in list.iter().enumerate() {
        let text = args.to_string();
        let (a, b) = text.split_at(text.len() / 2);
        chunks.push(chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                "function": {"name": name, "arguments": a}}]}),
            None,
        ));
        chunks.push(chunk(
            json!({"tool_calls": [{"index": i, "function": {"arguments": b}}]}),
            None,
        ));
    }
    chunks.push(chunk(json!({}), Some("tool_calls")));
    Reply::sse_chunks(&chunks)
}

/// The messages of a recorded request.
pub fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// The tool results (role `tool`) of a recorded request, in order.
pub fn tool_results(body: &Value) -> Vec<String> {
    messages(body)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The interactive `llembas` in mode `mode`, started in `root` against the server at `url`, in
/// a clean environment (no colour, an xterm) for a pseudo-terminal test; `home` is its home.
pub fn terminal_session(
    root: &Path,
    home: &Path,
    url: &str,
    mode: &str,
) -> expectrl::session::OsSession {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["--mode", mode])
        .current_dir(root)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LLEMBAS_HOME", home)
        .env("NO_COLOR", "1")
        .env("TERM", "xterm")
        .env("OPENAI_BASE_URL", url)
        .env("OPENAI_MODEL", "scripted");
    let mut session = expectrl::Session::spawn(cmd).unwrap();
    session.get_process_mut().set_window_size(100, 60).unwrap();
    session.set_expect_timeout(Some(std::time::Duration::from_secs(20)));
    session
}
