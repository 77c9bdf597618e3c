//! Shell commands as real processes: started in their own process group, stdout and stderr
//! merged into one stream in the order they were written, streamed to the person as it comes
//! and waited for up to a timeout, left running after it (a job), stopped by group.
//!
//! The output is held by harness-agent's [`HeldOutput`]: bounded whatever a command prints,
//! the rest spilled to a file the session owns, the stream to the person windowed.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use harness_agent::OutputSink;
use harness_agent::output::HeldOutput;
use tokio::sync::{Notify, watch};

pub use crate::sandbox::{Sandbox, landlock_works};
pub use harness_agent::Exit;

/// How often output waiting to be shown is passed on.
const STREAM_TICK: Duration = Duration::from_millis(50);

/// The variable every command of this llembas process carries (inherited by all it starts):
/// this process's own mark, so that its end finds every process it left, in whatever group.
const RUN_VAR: &str = "LLEMBAS_RUN";
/// The variable naming the session a command belongs to, so that a resumed session finds what
/// a killed llembas left of it.
const SESSION_VAR: &str = "LLEMBAS_SESSION";

/// This process's mark: its pid and its start time.
fn run_mark() -> &'static str {
    static MARK: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MARK.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!("{}-{nanos}", std::process::id())
    })
}

/// A session's commands: their session (for [`end_left_by`]), their sandbox, and where they
/// spill their output, `<dir>/<n>.out`, numbered as they start.
#[derive(Debug, Default)]
pub struct SpillDir {
    dir: Option<PathBuf>,
    session: String,
    next: std::sync::atomic::AtomicU32,
    sandbox: Option<Sandbox>,
    hidden: Vec<String>,
}

impl SpillDir {
    /// Spill files in `dir` (none at all when `None`: output past memory is then dropped).
    pub fn new(dir: Option<PathBuf>) -> SpillDir {
        SpillDir {
            dir,
            session: String::new(),
            next: std::sync::atomic::AtomicU32::new(1),
            sandbox: None,
            hidden: Vec::new(),
        }
    }

    /// The same, for commands of the session `id`, run in `sandbox` unless approved.
    #[must_use]
    pub fn for_session(dir: PathBuf, id: &str, sandbox: Option<Sandbox>) -> SpillDir {
        SpillDir {
            session: id.to_owned(),
            sandbox,
            ..SpillDir::new(Some(dir))
        }
    }

    /// The same, its commands started without the environment variables `hidden` (the keys
    /// the harness itself uses: a command has no business with the model's key).
    #[must_use]
    pub fn hiding(mut self, hidden: Vec<String>) -> SpillDir {
        self.hidden = hidden;
        self
    }

    /// The sandbox its commands run in (unless the person approved them).
    pub fn sandbox(&self) -> Option<&Sandbox> {
        self.sandbox.as_ref()
    }

    /// The session its commands belong to (empty: none named).
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The next command's spill file.
    pub fn next(&self) -> Option<PathBuf> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.dir.as_ref().map(|d| d.join(format!("{n}.out")))
    }
}

/// Starts the command in a session of its own, which makes it the leader of its own process
/// group (stopped as one) and leaves it no controlling terminal: it cannot open `/dev/tty` to
/// read the person's keys or push its own into llembas's prompt.
fn new_session(cmd: &mut std::process::Command) {
    crate::sandbox::in_child(cmd, || {
        rustix::process::setsid()
            .map(drop)
            .map_err(std::io::Error::from)
    });
}

/// A running (or ended) shell command.
#[derive(Clone)]
pub struct Running {
    pid: u32,
    kept: Arc<Mutex<HeldOutput>>,
    exit: watch::Receiver<Option<Exit>>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("pid", &self.pid).finish()
    }
}

fn flush(kept: &Mutex<HeldOutput>, sink: Option<&OutputSink>) {
    let Some(sink) = sink else {
        return;
    };
    let text = kept.lock().ok().and_then(|mut k| k.take_unsent());
    if let Some(text) = text {
        sink(text);
    }
}

/// Starts `command` with `bash -c` in `cwd`. Output past what memory holds goes to `spill`
/// (a file path, created when first needed); output is shown through `stream` as it comes, all
/// of it before the command's end is reported.
pub fn spawn(
    command: &str,
    cwd: &Path,
    owner: &SpillDir,
    confined: bool,
    stream: Option<OutputSink>,
) -> Result<Running> {
    let spill = owner.next();
    let confine = match owner.sandbox() {
        Some(s) if confined => Some(s.for_command()?),
        _ => None,
    };
    let limits = harness_agent::output::OutputLimits::embedded()?;
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
        .env(RUN_VAR, run_mark())
        .env(SESSION_VAR, owner.session())
        .kill_on_drop(false);
    for var in &owner.hidden {
        cmd.env_remove(var);
    }
    new_session(cmd.as_std_mut());
    let mut child = match confine {
        // The system-call filter confines the thread that asks and what it starts: a thread of
        // its own, which ends after starting the command, confines only the command.
        Some(confine) => {
            let filter = confine.install(cmd.as_std_mut());
            let runtime = tokio::runtime::Handle::current();
            std::thread::spawn(move || {
                let _in_runtime = runtime.enter();
                filter.enter()?;
                let child = cmd.spawn().context("cannot start bash");
                drop(cmd);
                child
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the thread starting the command failed"))?
            .with_context(|| format!("in {}", cwd.display()))?
        }
        None => {
            let child = cmd
                .spawn()
                .with_context(|| format!("cannot start bash in {}", cwd.display()));
            drop(cmd);
            child?
        }
    };
    // The parent's copies of the write ends went into `cmd`, dropped once it started the
    // command, so the pipe closes when the last process of the group that holds it exits.
    let pid = child.id().unwrap_or(0);
    let kept = Arc::new(Mutex::new(HeldOutput::new(limits, spill)));
    let more = Arc::new(Notify::new());
    let (exit_tx, exit_rx) = watch::channel(None);
    let streaming = stream.is_some();

    let (k, m) = (kept.clone(), more.clone());
    let reading = std::thread::spawn(move || {
        let mut reader = reader;
        let mut buf = vec![0u8; 64 * 1024];
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
                    if let Ok(mut kept) = k.lock() {
                        kept.push(&text, streaming);
                    }
                    m.notify_one();
                }
            }
        }
        if !pending.is_empty() {
            let text = String::from_utf8_lossy(&pending).into_owned();
            if let Ok(mut kept) = k.lock() {
                kept.push(&text, streaming);
            }
        }
        m.notify_one();
    });

    let k = kept.clone();
    tokio::spawn(async move {
        let waiting = child.wait();
        tokio::pin!(waiting);
        let status = loop {
            tokio::select! {
                status = &mut waiting => break status,
                () = more.notified() => {
                    flush(&k, stream.as_ref());
                    tokio::time::sleep(STREAM_TICK).await;
                }
            }
        };
        // Output written by the shell before it exited is still in the pipe; a grandchild
        // still holding the pipe open must not hold up the end, so wait a little only.
        let _ = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + Duration::from_millis(200);
            while !reading.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .await;
        flush(&k, stream.as_ref());
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
        kept,
        exit: exit_rx,
    })
}

impl Running {
    /// The process id (of the shell, which leads its group).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The output as it is held: all of it, or its head and tail with what lies between said.
    pub fn output(&self) -> String {
        self.kept.lock().map(|k| k.view()).unwrap_or_default()
    }

    /// Characters written so far, and the output after the `from`th as far as it is held.
    pub fn output_since(&self, from: u64) -> (u64, String) {
        self.kept
            .lock()
            .map(|k| (k.total, k.since(from)))
            .unwrap_or_default()
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

    fn output_since(&self, from: u64) -> (u64, String) {
        Running::output_since(self, from)
    }

    fn wait_for(&self, timeout: Duration) -> harness_agent::BoxFuture<'_, Option<Exit>> {
        Box::pin(Running::wait_for(self, timeout))
    }

    fn stop(&self) -> harness_agent::BoxFuture<'_, Exit> {
        Box::pin(Running::stop(self))
    }
}

/// The processes of this machine (of this user: others' cannot be read) whose environment
/// holds `var=value`, with their process groups. Empty where there is no `/proc`.
fn marked(var: &str, value: &str, not_ours: bool) -> Vec<(u32, u32)> {
    let needle = format!("{var}={value}");
    let ours = format!("{RUN_VAR}={}", run_mark());
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if !env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            continue;
        }
        if not_ours && env.split(|b| *b == 0).any(|kv| kv == ours.as_bytes()) {
            continue;
        }
        // `pid (comm) state ppid pgrp …`: the fields after the last ')'.
        let pgrp = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|st| {
                let rest = st.rsplit_once(')')?.1.to_owned();
                rest.split_whitespace().nth(2)?.parse::<u32>().ok()
            });
        if let Some(pgrp) = pgrp {
            found.push((pid, pgrp));
        }
    }
    found
}

/// Ends the processes marked `var=value`: their groups get SIGTERM, and what is left a moment
/// later SIGKILL. Gives how many processes there were.
fn end_marked(var: &str, value: &str, not_ours: bool) -> usize {
    let first = marked(var, value, not_ours);
    if first.is_empty() {
        return 0;
    }
    let term = |list: &[(u32, u32)], sig: rustix::process::Signal| {
        for &(pid, pgrp) in list {
            signal_group(pgrp, sig);
            if let Some(p) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(p, sig);
            }
        }
    };
    term(&first, rustix::process::Signal::TERM);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let left = marked(var, value, not_ours);
        if left.is_empty() {
            break;
        }
        if std::time::Instant::now() >= deadline {
            term(&left, rustix::process::Signal::KILL);
            // SIGKILL cannot be refused, but takes a moment to land on a loaded machine.
            let killed = std::time::Instant::now() + Duration::from_secs(1);
            while !marked(var, value, not_ours).is_empty() && std::time::Instant::now() < killed {
                std::thread::sleep(Duration::from_millis(10));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    first.len()
}

/// Ends every process this llembas process started, and all they started, wherever they
/// went: called on every way out (the end of a run, a signal, a closed ACP stdin).
pub fn end_all() -> usize {
    end_marked(RUN_VAR, run_mark(), false)
}

/// Ends what an earlier run of the session `id` left running (a llembas killed with SIGKILL
/// could end nothing); gives how many processes that was. Processes of this run are not
/// touched.
pub fn end_left_by(id: &str) -> usize {
    if id.is_empty() {
        return 0;
    }
    end_marked(SESSION_VAR, id, true)
}

/// The exit code of the signal being handled (128 + its number), once one came; 0 before.
static ENDING: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Told when a signal came (see [`ending_notice`]).
static ENDING_NOTICE: Notify = Notify::const_new();

/// The text of a call refused because a signal told llembas to end.
pub const ENDING_TEXT: &str = "not run: llembas was told to end (a signal) and starts nothing new";

/// Whether a signal told this process to end: from then on nothing new starts (no command, no
/// file change), whatever the run was doing.
pub fn ending() -> bool {
    ENDING.load(std::sync::atomic::Ordering::SeqCst) != 0
}

/// Waits until a signal tells this process to end, for a front end to stop its run.
pub async fn ending_notice() {
    let notified = ENDING_NOTICE.notified();
    if ending() {
        return;
    }
    notified.await;
}

/// Runs `work`, and ends everything this process started when it is told to end (SIGTERM,
/// SIGHUP), then exits as the signal would (128 + its number). Once a signal came, the end of
/// `work` is not the process's: ending a command can let the run go on and finish before the
/// handler is done, and the process then still exits as the signal says, not with the run's
/// status. Needs a tokio runtime.
pub async fn ending_on_signals<T>(work: impl std::future::Future<Output = T>) -> T {
    use std::sync::atomic::Ordering;
    use tokio::signal::unix::{SignalKind, signal};
    for (kind, code) in [(SignalKind::terminate(), 143), (SignalKind::hangup(), 129)] {
        let Ok(mut s) = signal(kind) else {
            continue;
        };
        tokio::spawn(async move {
            if s.recv().await.is_some() {
                // Before anything is ended: what ending it lets finish sees the signal.
                ENDING.store(code, Ordering::SeqCst);
                ENDING_NOTICE.notify_waiters();
                let _ = tokio::task::spawn_blocking(end_all).await;
                std::process::exit(code);
            }
        });
    }
    let out = work.await;
    if ENDING.load(Ordering::SeqCst) != 0 {
        // The handler exits the process.
        std::future::pending::<()>().await;
    }
    out
}

/// Marks a command as one of this process's, so that [`end_all`] ends it too.
pub fn mark(cmd: &mut tokio::process::Command) {
    cmd.env(RUN_VAR, run_mark());
}

/// Kills the process group `pid` leads, everything in it at once (SIGKILL).
pub fn kill_group(pid: u32) {
    signal_group(pid, rustix::process::Signal::KILL);
}

fn signal_group(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, sig);
    }
}
