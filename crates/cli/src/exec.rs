//! Running tool calls on this machine: the file tools through `harness-fs`'s host backend
//! rooted at the working directory, `bash` as a real process, and the plan tools on the
//! session's plan. The texts a model reads come from the core crates; this module moves bytes.
//!
//! The host backend shows the working directory as `/`. The model is told the real directory
//! (its shell runs there), so paths are mapped both ways: an absolute path inside the working
//! directory, a relative path, or a path of the view go in; the paths of answers come back as
//! real absolute paths.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use harness_agent::commands::{bash_outcome, bash_seconds};
use harness_agent::personal::PersonalTools;
use harness_agent::{FileTools, PathMap};
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
    files: FileTools,
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
            files: FileTools::new(),
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

    /// The instruction files that apply (`AGENTS.md`, else `CLAUDE.md`), outermost first, from
    /// the repository's top down to the working directory, by their real paths.
    pub fn instructions(&self) -> Vec<harness_core::prompt::InstructionFile> {
        let stacked = harness_fs::instructions::from_host(
            &self.root,
            harness_fs::instructions::DEFAULT_BUDGET,
        );
        stacked
            .files
            .iter()
            .map(|f| harness_core::prompt::InstructionFile {
                path: f.path.to_string(),
                text: f.text.clone(),
            })
            .collect()
    }

    /// The values of the person's own things (library, skills, memory) for the prompt.
    pub fn personal_values(&self) -> std::collections::BTreeMap<String, String> {
        self.personal.values(self.view().ok().as_deref())
    }

    /// A file for `show`, read through the view as `read` reads it.
    pub fn read_for_show(
        &self,
        path: &str,
    ) -> std::result::Result<harness_agent::ShownFile, String> {
        let view = self.view().map_err(|e| e.to_string())?;
        self.files.read_for_show(&view, self, path)
    }

    /// The working directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path as the model gave it, as a path of the view.
    pub fn to_view(&self, input: &str) -> String {
        let p = Path::new(input);
        if p.is_absolute()
            && let Ok(rel) = p.strip_prefix(&self.root)
        {
            return format!("/{}", rel.display());
        }
        input.to_owned()
    }

    /// A path of the view as the real path.
    pub fn to_host(&self, p: &VPath) -> String {
        let rel = p.as_str().trim_start_matches('/');
        if rel.is_empty() {
            self.root.display().to_string()
        } else {
            self.root.join(rel).display().to_string()
        }
    }

    fn error(&self, call: &ToolCall, e: harness_fs::Error) -> ToolOutcome {
        ToolOutcome::error(&call.id, e.to_string())
    }

    /// Runs a call that is not bash (bash needs the runtime: [`Exec::bash`]).
    pub fn run_sync(&self, call: &ToolCall) -> ToolOutcome {
        let view = match self.view() {
            Ok(v) => v,
            Err(e) => return self.error(call, e),
        };
        let view = &*view;
        if let Some(out) = self.files.run(view, self, call) {
            return out;
        }
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

/// The host backend shows the working directory as `/`; the model and the person know real
/// paths.
impl PathMap for Exec {
    fn to_view(&self, input: &str) -> String {
        Exec::to_view(self, input)
    }

    fn shown(&self, p: &VPath) -> String {
        self.to_host(p)
    }
}
