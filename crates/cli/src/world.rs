//! The terminal agent's world for the runtime: the tools run on this machine's disk (the host
//! backend rooted at the working directory) and as its processes, `web_fetch` from this
//! machine, `memory` on the person's file or a client instance's API.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_agent::{BoxFuture, CallContext, JobSpawner, Process, Ran, ShownFile, ToolWorld};
use harness_core::protocol::ToolCall;
use harness_loop::session::ToolOutcome;

use crate::exec::Exec;

/// The working directory's tools.
pub struct HostWorld {
    exec: Arc<Exec>,
    /// `web_fetch` from this machine, made on its first call.
    web: std::sync::OnceLock<Result<harness_web::WebFetch, harness_web::Error>>,
}

impl HostWorld {
    /// The world of `exec`'s directory.
    pub fn new(exec: Arc<Exec>) -> HostWorld {
        HostWorld {
            exec,
            web: std::sync::OnceLock::new(),
        }
    }
}

impl ToolWorld for HostWorld {
    fn runs(&self, name: &str) -> bool {
        // The shell and the web from this machine, the file tools on its disk, and the person's
        // own things (library, memory — a client instance's when it lends its API — skills).
        matches!(name, "bash" | "web_fetch")
            || harness_agent::FileTools::NAMES.contains(&name)
            || self.exec.personal.runs(name)
            || (name == "memory" && self.exec.memory_api.is_some())
    }

    fn call<'a>(&'a self, call: &'a ToolCall, cx: CallContext) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            if crate::process::ending() {
                return Ran::Done(ToolOutcome::error(&call.id, crate::process::ENDING_TEXT));
            }
            match call.name.as_str() {
                "bash" => {
                    self.exec
                        .bash(call, Some(cx.output.clone()), &cx.cancel, cx.approved)
                        .await
                }
                "web_fetch" => {
                    let web = self.web.get_or_init(|| {
                        harness_web::WebFetch::new(
                            harness_spec::Project::Cli,
                            harness_web::Reach::Any,
                        )
                    });
                    let fetched = match web {
                        Ok(web) => web.fetch(&call.arguments, &cx.cancel).await,
                        Err(e) => Err(e.clone()),
                    };
                    Ran::Done(match fetched {
                        Ok(text) => ToolOutcome::ok(&call.id, text),
                        Err(e) => ToolOutcome::error(&call.id, e.to_string()),
                    })
                }
                "memory" if self.exec.memory_api.is_some() => {
                    let Some(api) = &self.exec.memory_api else {
                        return Ran::Done(ToolOutcome::error(&call.id, "memory is unavailable"));
                    };
                    let (output, is_error) = harness_agent::memory_api::call(
                        &crate::memory_api::Http,
                        api,
                        &call.arguments,
                    )
                    .await;
                    Ran::Done(ToolOutcome::answer(&call.id, output, is_error))
                }
                _ => {
                    let exec = self.exec.clone();
                    let c = call.clone();
                    let run = tokio::task::spawn_blocking(move || exec.run_sync(&c));
                    Ran::Done(run.await.unwrap_or_else(|e| {
                        ToolOutcome::error(&call.id, format!("the tool failed: {e}"))
                    }))
                }
            }
        })
    }

    fn instructions(&self) -> Vec<harness_core::prompt::InstructionFile> {
        self.exec.instructions()
    }

    fn values(&self) -> BTreeMap<String, String> {
        let mut values = BTreeMap::new();
        values.insert("cwd".into(), self.exec.root().display().to_string());
        values.insert("platform".into(), std::env::consts::OS.into());
        values.insert("shell".into(), "bash".into());
        values.extend(self.exec.personal_values());
        values
    }

    fn read_for_show(&self, path: &str) -> Result<ShownFile, String> {
        self.exec.read_for_show(path)
    }

    fn place(&self) -> String {
        self.exec.root().display().to_string()
    }

    fn precheck(&self, call: &ToolCall) -> Option<String> {
        self.exec.precheck(call).map(|out| out.output)
    }

    fn resolve(&self, path: &str) -> String {
        self.exec.resolve(path)
    }
}

/// Background commands as processes of this machine, in the working directory.
pub struct HostJobs {
    root: PathBuf,
    spill: Arc<crate::process::SpillDir>,
}

impl HostJobs {
    /// Jobs started in `root`, spilling their output past memory to `spill`.
    pub fn new(root: &Path, spill: Arc<crate::process::SpillDir>) -> HostJobs {
        HostJobs {
            root: root.to_path_buf(),
            spill,
        }
    }
}

impl HostJobs {
    /// Starts a job, in the sandbox when `confined`.
    fn start(&self, command: &str, confined: bool) -> Result<Arc<dyn Process>, String> {
        if crate::process::ending() {
            return Err(crate::process::ENDING_TEXT.to_owned());
        }
        crate::process::spawn(command, &self.root, &self.spill, confined, None)
            .map(|r| Arc::new(r) as Arc<dyn Process>)
            .map_err(|e| format!("{e:#}"))
    }
}

impl JobSpawner for HostJobs {
    fn spawn(&self, command: &str) -> Result<Arc<dyn Process>, String> {
        self.start(command, true)
    }

    fn spawn_approved(&self, command: &str) -> Result<Arc<dyn Process>, String> {
        self.start(command, false)
    }
}
