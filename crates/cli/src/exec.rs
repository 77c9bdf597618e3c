//! Running tool calls on this machine: the file tools through `harness-fs`'s host backend
//! rooted at the working directory, `bash` as a real process, and the plan tools on the
//! session's plan. The texts a model reads come from the core crates; this module moves bytes.
//!
//! A path a call names is resolved against the working directory by the harness's one resolver
//! (`~` the home directory) and the call acts on that absolute path: inside the working
//! directory through the host backend rooted there (shown as `/`, locked while calls run), on
//! the rest of the disk through the host backend of the whole disk — the same rules, no link
//! followed. Answers name real absolute paths (`harness_agent::DiskFiles`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use harness_agent::commands::{bash_outcome, bash_seconds};
use harness_agent::personal::PersonalTools;
use harness_agent::{DiskFiles, PathMap, Side};
use harness_core::protocol::ToolCall;
use harness_fs::{HostBackend, HostOptions, Level, VPath, View};

use harness_loop::session::ToolOutcome;
use serde_json::Value;

use harness_agent::{Exit, Ran};

use crate::process;

/// The file system of one session.
pub struct Exec {
    root: PathBuf,
    /// The view while some call uses it: the host backend (and its lock on the directory) is
    /// held only while calls run, so other sessions in the same directory can work too.
    open: Mutex<std::sync::Weak<View>>,
    /// The rest of the disk, opened on its first use (it takes no lock).
    disk: std::sync::OnceLock<Arc<View>>,
    files: DiskFiles,
    /// The library, the memory file and the skills.
    pub personal: PersonalTools,
    /// Where commands' output past memory goes.
    pub spill: Arc<process::SpillDir>,
    /// The client instance's HTTP API the `memory` tool works on instead of the file
    /// (capability `memory`; the world runs those calls).
    pub memory_api: Option<harness_agent::memory_api::Api>,
}

fn arg_str<'a>(a: &'a Value, key: &str) -> Option<&'a str> {
    a.get(key).and_then(Value::as_str)
}

impl Exec {
    /// Opens the working directory `root` (canonical) as the session's file system.
    pub fn open(root: &Path) -> Result<Exec> {
        let exec = Exec {
            root: root.to_path_buf(),
            open: Mutex::new(std::sync::Weak::new()),
            disk: std::sync::OnceLock::new(),
            files: DiskFiles::new(&root.display().to_string(), &crate::settings::home_dir()),
            personal: PersonalTools::default(),
            spill: Arc::new(process::SpillDir::new(None)),
            memory_api: None,
        };
        // Check now that the directory can be opened at all (a clear error at start).
        exec.view()
            .with_context(|| format!("cannot open {} as the working directory", root.display()))?;
        Ok(exec)
    }

    /// The view of the working directory, opened for as long as the returned handle lives
    /// (shared by the calls that run at once). Another process holding the directory is waited
    /// for, up to a few seconds.
    fn view(&self) -> std::result::Result<Arc<View>, harness_fs::Error> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(v) = open.upgrade() {
            return Ok(v);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let backend = loop {
            match HostBackend::open(&self.root, HostOptions::default()) {
                Ok(b) => break b,
                Err(harness_fs::Error::RootInUse(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        };
        let v = Arc::new(View::new(
            Arc::new(backend),
            harness_fs::Access::new().grant("/", Level::Commit),
        ));
        *open = Arc::downgrade(&v);
        Ok(v)
    }

    /// The view of `side`: the working directory's, or the whole disk's.
    fn view_of(&self, side: Side) -> std::result::Result<Arc<View>, harness_fs::Error> {
        match side {
            Side::Dir => self.view(),
            Side::Disk => {
                if let Some(v) = self.disk.get() {
                    return Ok(v.clone());
                }
                let backend = HostBackend::open_disk(HostOptions::default())?;
                let v = Arc::new(View::new(
                    Arc::new(backend),
                    harness_fs::Access::new().grant("/", Level::Commit),
                ));
                Ok(self.disk.get_or_init(|| v).clone())
            }
        }
    }

    /// The instruction files that apply (`AGENTS.md`, else `CLAUDE.md`), outermost first, from
    /// the repository's top down to the working directory, by their real paths.
    pub fn instructions(&self) -> Vec<harness_core::prompt::InstructionFile> {
        harness_fs::instructions::from_host(&self.root, harness_fs::instructions::DEFAULT_BUDGET)
            .for_prompt()
    }

    /// The values of the person's own things (library, skills, memory) for the prompt.
    pub fn personal_values(&self) -> std::collections::BTreeMap<String, String> {
        self.personal.values(self.view().ok().as_deref())
    }

    /// A file for `show`, read through the view as `read` reads it.
    pub fn read_for_show(
        &self,
        path: &str,
    ) -> std::result::Result<harness_agent::ShownFile, harness_agent::SeamError> {
        self.files.read_for_show(&|side| self.view_of(side), path)
    }

    /// What a file call would answer without running when a precondition of its own fails
    /// (`harness_agent::FileTools::precheck`), on the side its path lies on.
    pub fn precheck(&self, call: &ToolCall) -> Option<ToolOutcome> {
        self.files.precheck(&|side| self.view_of(side), call)
    }

    /// A path a call names as the absolute path it acts on.
    pub fn resolve(&self, path: &str) -> String {
        self.files.dir_paths().resolve(path)
    }

    /// The working directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path of the working directory's view as the real path.
    pub fn to_host(&self, p: &VPath) -> String {
        self.files.dir_paths().shown(p)
    }

    fn error(&self, call: &ToolCall, e: harness_fs::Error) -> ToolOutcome {
        ToolOutcome::error(&call.id, e.to_string())
    }

    /// Runs a call that is not bash (bash needs the runtime: [`Exec::bash`]).
    pub fn run_sync(&self, call: &ToolCall) -> ToolOutcome {
        if let Some(out) = self.files.run(&|side| self.view_of(side), call) {
            return out;
        }
        let view = match self.view() {
            Ok(v) => v,
            Err(e) => return self.error(call, e),
        };
        let view = &*view;
        let mut out = self.personal.run(view, call).unwrap_or_else(|| {
            ToolOutcome::error(&call.id, format!("{} cannot run in llembas", call.name))
        });
        out.call_id = call.id.clone();
        out
    }

    /// Runs a bash call in the foreground, streaming its output to `stream`; a command still
    /// running at its timeout is handed back as [`Ran::Overran`].
    pub async fn bash(
        &self,
        call: &ToolCall,
        stream: Option<harness_agent::OutputSink>,
        cancel: &harness_model::CancellationToken,
        approved: bool,
    ) -> Ran {
        let a = &call.arguments;
        let Some(command) = arg_str(a, "command") else {
            return Ran::Done(harness_agent::files::missing(call, "command"));
        };
        let seconds = match bash_seconds(harness_spec::Project::Cli, a) {
            Ok(s) => s,
            Err(e) => return Ran::Done(ToolOutcome::error(&call.id, e)),
        };
        let confined = !approved && self.spill.sandbox().is_some();
        let running = match process::spawn(command, &self.root, &self.spill, !approved, stream) {
            Ok(r) => r,
            Err(e) => {
                return Ran::Done(ToolOutcome::error(&call.id, format!("{e:#}")));
            }
        };
        let finished = |exit: Exit| {
            let output = running.output();
            let mut outcome = bash_outcome(&call.id, &output, exit);
            if confined
                && let Some(note) = self.spill.sandbox().and_then(|s| s.note_for(&output, exit))
            {
                outcome.output = format!("{}\n\n{note}", outcome.output);
            }
            outcome
        };
        tokio::select! {
            exit = running.wait_for(Duration::from_secs(seconds)) => match exit {
                Some(exit) => Ran::Done(finished(exit)),
                None => Ran::Overran {
                    call_id: call.id.clone(),
                    title: command.lines().next().unwrap_or_default().to_owned(),
                    seconds,
                    running: std::sync::Arc::new(running),
                },
            },
            () = cancel.cancelled() => {
                let exit = running.stop().await;
                Ran::Done(finished(exit))
            }
        }
    }
}
