//! The terminal agent's world for the runtime: the tools run on this machine's disk (the host
//! backend rooted at the working directory) and as its processes, `web_fetch` from this
//! machine, `memory` on the person's file or a client instance's API.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use harness_agent::{
    BoxFuture, CallContext, JobSpawner, Process, Ran, SeamError, ShownFile, ToolRegistry, ToolWorld,
};
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

/// One of the tools this world runs itself (not through [`Exec::run_sync`]).
struct HostTool {
    /// Whether it runs here now.
    available: fn(&HostWorld) -> bool,
    /// How a call of it runs.
    call: for<'a> fn(&'a HostWorld, &'a ToolCall, CallContext) -> BoxFuture<'a, Ran>,
}

/// The tools this world runs itself, by canonical name: the shell, the web from this machine,
/// and `memory` on a client instance's API when it lends one.
static HOST_TOOLS: LazyLock<ToolRegistry<HostTool>> = LazyLock::new(|| {
    ToolRegistry::new()
        .with(
            "bash",
            HostTool {
                available: |_| true,
                call: |w, call, cx| {
                    Box::pin(async move {
                        w.exec
                            .bash(call, Some(cx.output.clone()), &cx.cancel, cx.approved)
                            .await
                    })
                },
            },
        )
        .with(
            "web_fetch",
            HostTool {
                available: |_| true,
                call: |w, call, cx| Box::pin(w.web_fetch(call, cx)),
            },
        )
        .with(
            "memory",
            HostTool {
                available: |w| w.exec.memory_api.is_some(),
                call: |w, call, _| Box::pin(w.memory_api(call)),
            },
        )
});

impl HostWorld {
    /// The tool of its own that runs `name` here now.
    fn own(&self, name: &str) -> Option<&'static HostTool> {
        HOST_TOOLS.get(name).filter(|t| (t.available)(self))
    }

    /// `web_fetch` from this machine.
    async fn web_fetch(&self, call: &ToolCall, cx: CallContext) -> Ran {
        let web = self.web.get_or_init(|| {
            harness_web::WebFetch::new(harness_spec::Project::Cli, harness_web::Reach::Any)
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

    /// `memory` on the client instance's API.
    async fn memory_api(&self, call: &ToolCall) -> Ran {
        let Some(api) = &self.exec.memory_api else {
            return Ran::Done(ToolOutcome::error(&call.id, "memory is unavailable"));
        };
        let (output, is_error) =
            harness_agent::memory_api::call(&crate::memory_api::Http, api, &call.arguments).await;
        Ran::Done(ToolOutcome::answer(&call.id, output, is_error))
    }
}

impl ToolWorld for HostWorld {
    fn runs(&self, name: &str) -> bool {
        // Its own tools, the file tools on this machine's disk, and the person's own things
        // (library, memory, skills).
        self.own(name).is_some()
            || harness_agent::FileTools::NAMES.contains(&name)
            || self.exec.personal.runs(name)
    }

    fn call<'a>(&'a self, call: &'a ToolCall, cx: CallContext) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            if crate::process::ending() {
                return Ran::Done(ToolOutcome::error(&call.id, crate::process::ENDING_TEXT));
            }
            if let Some(tool) = self.own(&call.name) {
                return (tool.call)(self, call, cx).await;
            }
            let exec = self.exec.clone();
            let c = call.clone();
            let run = tokio::task::spawn_blocking(move || exec.run_sync(&c));
            Ran::Done(
                run.await.unwrap_or_else(|e| {
                    ToolOutcome::error(&call.id, format!("the tool failed: {e}"))
                }),
            )
        })
    }

    fn instructions(&self) -> Vec<harness_core::prompt::InstructionFile> {
        self.exec.instructions()
    }

    fn values(&self) -> BTreeMap<String, String> {
        let mut values = BTreeMap::new();
        values.insert("cwd".into(), self.exec.root().display().to_string());
        values.insert("platform".into(), platform_line());
        values.insert("shell".into(), shell_line());
        values.insert("git_status".into(), git_line(self.exec.root()));
        values.extend(self.exec.personal_values());
        values
    }

    fn read_for_show(&self, path: &str) -> Result<ShownFile, SeamError> {
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
    fn start(&self, command: &str, confined: bool) -> Result<Arc<dyn Process>, SeamError> {
        if crate::process::ending() {
            return Err(SeamError::command(command, crate::process::ENDING_TEXT));
        }
        crate::process::spawn(command, &self.root, &self.spill, confined, None)
            .map(|r| Arc::new(r) as Arc<dyn Process>)
            .map_err(|e| SeamError::command(command, format!("{e:#}")))
    }
}

impl JobSpawner for HostJobs {
    fn spawn(&self, command: &str) -> Result<Arc<dyn Process>, SeamError> {
        self.start(command, true)
    }

    fn spawn_approved(&self, command: &str) -> Result<Arc<dyn Process>, SeamError> {
        self.start(command, false)
    }
}

/// The Environment block's platform bullet (`spec/prompts/index.json` `platform`): the system
/// and architecture the tools run on.
pub fn platform_line() -> String {
    format!(
        "Platform: {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// The Environment block's shell bullet: the `bash` commands run with, by its path as `PATH`
/// finds it (the name alone when it is not found).
pub fn shell_line() -> String {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("bash"))
            .find(|p| p.is_file())
    });
    match found {
        Some(p) => format!("Shell: {}", p.display()),
        None => "Shell: bash".to_owned(),
    }
}

/// The Environment block's git bullet for `dir`: its branch and whether the tree has
/// uncommitted changes, or `not a git repository`; empty when git cannot be run.
pub fn git_line(dir: &Path) -> String {
    let out = std::process::Command::new("git")
        .args(["status", "--porcelain=v1", "--branch"])
        .current_dir(dir)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => git_status_line(&String::from_utf8_lossy(&o.stdout)),
        // git ran and said no: not a repository (or one it cannot read).
        Ok(_) => "Git: not a git repository".to_owned(),
        Err(_) => String::new(),
    }
}

/// The bullet from `git status --porcelain=v1 --branch`'s output.
pub fn git_status_line(status: &str) -> String {
    let mut lines = status.lines();
    let head = lines
        .next()
        .and_then(|l| l.strip_prefix("## "))
        .unwrap_or_default();
    let branch = if let Some(b) = head.strip_prefix("No commits yet on ") {
        format!("branch {b} (no commits yet)")
    } else if head.starts_with("HEAD (no branch)") {
        "detached HEAD".to_owned()
    } else {
        let name = head.split("...").next().unwrap_or(head);
        let name = name.split(' ').next().unwrap_or(name);
        format!("branch {name}")
    };
    let changed = lines.filter(|l| !l.is_empty()).count();
    if changed == 0 {
        format!("Git: {branch}, clean")
    } else {
        format!(
            "Git: {branch}, {changed} uncommitted change{}",
            if changed == 1 { "" } else { "s" }
        )
    }
}
