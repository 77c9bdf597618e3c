//! Helpers: a small tool world, a job spawner whose jobs end when told, and a runner that
//! collects what a session says.

mod agents;
mod checkpoint;
mod custom;
mod files;
mod hooks;
mod library;
mod memory_api;
mod oneshot;
mod output;
mod person;
mod personal;
mod protocol;
mod runtime;
mod session_search;
mod sessions;
mod slash;
mod typed;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_agent::{
    BoxFuture, CallContext, Event, Exit, JobSpawner, Process, Ran, RegisteredTool, SeamError,
    ShownFile, ToolWorld,
};
use harness_core::protocol::{Event as CoreEvent, ToolCall};
use harness_loop::session::ToolOutcome;
use harness_spec::Risk;
use serde_json::json;

/// A world with `bash` (it echoes the command, or waits for a cancel on `sleep`), a file for
/// `show`, and two tools of its own: `clock` (a read) and `launch` (an execute, so manual mode
/// asks).
pub struct TestWorld {
    pub calls: Mutex<Vec<String>>,
}

impl TestWorld {
    pub fn new() -> Arc<TestWorld> {
        Arc::new(TestWorld {
            calls: Mutex::new(Vec::new()),
        })
    }
}

impl ToolWorld for TestWorld {
    fn runs(&self, name: &str) -> bool {
        name == "bash"
    }

    fn registered(&self) -> Vec<RegisteredTool> {
        vec![
            RegisteredTool {
                name: "clock".into(),
                description: "The time of day.".into(),
                parameters: json!({"type": "object", "properties": {}}),
                risk: Risk::Read,
                exclusive: false,
                deferred: false,
            },
            RegisteredTool {
                name: "launch".into(),
                description: "Launches the rocket.".into(),
                parameters: json!({"type": "object", "properties": {}}),
                risk: Risk::Execute,
                exclusive: true,
                deferred: false,
            },
        ]
    }

    fn call<'a>(&'a self, call: &'a ToolCall, cx: CallContext) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            self.calls.lock().unwrap().push(call.name.clone());
            match call.name.as_str() {
                "clock" => Ran::Done(ToolOutcome::ok(&call.id, "12:00")),
                "launch" => Ran::Done(ToolOutcome::ok(&call.id, "launched")),
                "bash" => {
                    let command = call.arguments["command"].as_str().unwrap_or_default();
                    if command.starts_with("sleep") {
                        cx.cancel.cancelled().await;
                        return Ran::Done(ToolOutcome::error(&call.id, "stopped"));
                    }
                    (cx.output)(format!("{command}\n"));
                    Ran::Done(ToolOutcome::ok(&call.id, format!("{command}\nexit code 0")))
                }
                other => Ran::Done(ToolOutcome::error(&call.id, format!("no tool {other}"))),
            }
        })
    }

    fn read_for_show(&self, path: &str) -> Result<ShownFile, SeamError> {
        match path {
            "/work/notes.md" | "notes.md" => Ok(ShownFile {
                path: "/work/notes.md".into(),
                content: "# Notes\n".into(),
            }),
            other => Err(SeamError::file(
                other,
                format!("No such file or directory: {other}"),
            )),
        }
    }

    fn place(&self) -> String {
        "/work".into()
    }
}

/// Jobs that print their command and end with 0 after a moment.
pub struct QuickJobs;

struct QuickJob {
    output: String,
    started: std::time::Instant,
}

impl Process for QuickJob {
    fn output(&self) -> String {
        self.output.clone()
    }

    fn wait_for(&self, timeout: Duration) -> BoxFuture<'_, Option<Exit>> {
        Box::pin(async move {
            let left = Duration::from_millis(100).saturating_sub(self.started.elapsed());
            if left > timeout {
                tokio::time::sleep(timeout).await;
                None
            } else {
                tokio::time::sleep(left).await;
                Some(Exit::Code(0))
            }
        })
    }

    fn stop(&self) -> BoxFuture<'_, Exit> {
        Box::pin(async { Exit::Signal(15) })
    }
}

impl JobSpawner for QuickJobs {
    fn spawn(&self, command: &str) -> Result<Arc<dyn Process>, SeamError> {
        Ok(Arc::new(QuickJob {
            output: format!("{command}\n"),
            started: std::time::Instant::now(),
        }))
    }
}

/// The events among the outs.
pub fn events(outs: &[Event]) -> Vec<CoreEvent> {
    outs.iter()
        .filter_map(|o| match o {
            Event::Core(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// The text the model streamed.
pub fn text(outs: &[Event]) -> String {
    events(outs)
        .iter()
        .filter_map(|e| match e {
            CoreEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}
