//! Shell commands as real processes: started in their own process group, stdout and stderr
//! merged into one stream in the order they were written, the output kept whole and streamed
//! as it comes, waited for up to a timeout and left running after it (a job), stopped by group.

use std::io::Read as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::sync::{mpsc, watch};

pub use harness_agent::Exit;

/// A running (or ended) shell command.
#[derive(Clone)]
pub struct Running {
    pid: u32,
    output: Arc<Mutex<String>>,
    exit: watch::Receiver<Option<Exit>>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("pid", &self.pid).finish()
    }
}

/// Starts `command` with `bash -c` in `cwd`. Every piece of output is appended to the kept
/// output and sent on `chunks` (when given) as it arrives.
pub fn spawn(
    command: &str,
    cwd: &Path,
    chunks: Option<mpsc::UnboundedSender<String>>,
) -> Result<Running> {
    let (reader, writer) = std::io::pipe().context("cannot make a pipe")?;
    let writer2 = writer.try_clone().context("cannot make a pipe")?;
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0")
        .process_group(0)
        .kill_on_drop(false);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start bash in {}", cwd.display()))?;
    // The parent's copies of the write ends went into `cmd`; drop it so the pipe closes when
    // the last process of the group that holds it exits.
    drop(cmd);
    let pid = child.id().unwrap_or(0);
    let output = Arc::new(Mutex::new(String::new()));
    let (exit_tx, exit_rx) = watch::channel(None);

    let out = output.clone();
    let reading = std::thread::spawn(move || {
        let mut reader = reader;
        let mut buf = [0u8; 8192];
        let mut pending: Vec<u8> = Vec::new();
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    pending.extend_from_slice(&buf[..n]);
                    // Keep an incomplete UTF-8 sequence for the next read.
                    let valid = match std::str::from_utf8(&pending) {
                        Ok(_) => pending.len(),
                        Err(e) if e.error_len().is_none() => e.valid_up_to(),
                        Err(_) => pending.len(),
                    };
                    let text = String::from_utf8_lossy(&pending[..valid]).into_owned();
                    pending.drain(..valid);
                    if let Ok(mut o) = out.lock() {
                        o.push_str(&text);
                    }
                    if let Some(tx) = &chunks {
                        let _ = tx.send(text);
                    }
                }
            }
        }
        if !pending.is_empty() {
            let text = String::from_utf8_lossy(&pending).into_owned();
            if let Ok(mut o) = out.lock() {
                o.push_str(&text);
            }
            if let Some(tx) = &chunks {
                let _ = tx.send(text);
            }
        }
    });

    tokio::spawn(async move {
        let status = child.wait().await;
        // Output written by the shell before it exited is still in the pipe; a grandchild
        // still holding the pipe open must not hold up the end, so wait a little only.
        let _ = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + Duration::from_millis(200);
            while !reading.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .await;
        let exit = match status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt as _;
                match (s.code(), s.signal()) {
                    (Some(c), _) => Exit::Code(c),
                    (None, Some(sig)) => Exit::Signal(sig),
                    (None, None) => Exit::Code(-1),
                }
            }
            Err(_) => Exit::Code(-1),
        };
        let _ = exit_tx.send(Some(exit));
    });

    Ok(Running {
        pid,
        output,
        exit: exit_rx,
    })
}

impl Running {
    /// The process id (of the shell, which leads its group).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Everything written so far.
    pub fn output(&self) -> String {
        self.output.lock().map(|o| o.clone()).unwrap_or_default()
    }

    /// How it ended, if it has.
    pub fn exit(&self) -> Option<Exit> {
        *self.exit.borrow()
    }

    /// Waits until it ends.
    pub async fn wait(&self) -> Exit {
        let mut rx = self.exit.clone();
        loop {
            if let Some(e) = *rx.borrow_and_update() {
                return e;
            }
            if rx.changed().await.is_err() {
                return rx.borrow().unwrap_or(Exit::Code(-1));
            }
        }
    }

    /// Waits until it ends or `timeout` passes (`None`: still running).
    pub async fn wait_for(&self, timeout: Duration) -> Option<Exit> {
        tokio::time::timeout(timeout, self.wait()).await.ok()
    }

    /// Stops the whole process group: SIGTERM, then SIGKILL after a grace period.
    pub async fn stop(&self) -> Exit {
        if self.exit().is_none() {
            signal_group(self.pid, rustix::process::Signal::TERM);
            if let Some(e) = self.wait_for(Duration::from_secs(2)).await {
                return e;
            }
            signal_group(self.pid, rustix::process::Signal::KILL);
        }
        self.wait().await
    }
}

/// A command as the runtime holds it (a job, or a foreground command past its timeout).
impl harness_agent::Process for Running {
    fn output(&self) -> String {
        Running::output(self)
    }

    fn wait_for(&self, timeout: Duration) -> harness_agent::BoxFuture<'_, Option<Exit>> {
        Box::pin(Running::wait_for(self, timeout))
    }

    fn stop(&self) -> harness_agent::BoxFuture<'_, Exit> {
        Box::pin(Running::stop(self))
    }
}

fn signal_group(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn merges_and_streams_output() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let r = spawn("echo out; echo err >&2; exit 3", dir.path(), Some(tx)).unwrap();
        assert_eq!(r.wait().await, Exit::Code(3));
        assert_eq!(r.output(), "out\nerr\n");
        let mut streamed = String::new();
        while let Ok(c) = rx.try_recv() {
            streamed.push_str(&c);
        }
        assert_eq!(streamed, "out\nerr\n");
    }

    #[tokio::test]
    async fn outlives_its_timeout_and_stops_by_group() {
        let dir = tempfile::tempdir().unwrap();
        let r = spawn("echo start; sleep 30; echo never", dir.path(), None).unwrap();
        assert_eq!(r.wait_for(Duration::from_millis(300)).await, None);
        assert_eq!(r.output(), "start\n");
        let e = r.stop().await;
        assert!(matches!(e, Exit::Signal(_)), "{e:?}");
        assert_eq!(r.output(), "start\n");
    }
}
