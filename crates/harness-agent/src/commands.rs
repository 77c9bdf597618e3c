//! The rules of a `bash` call that do not depend on how a world runs it: its foreground
//! timeouts (the spec's numbers for the project) and the text of its result.

use harness_loop::session::ToolOutcome;
use harness_spec::Project;

use crate::seams::Exit;

/// Seconds a command runs in the foreground by default and at most: bash's `variables` as the
/// spec fills them for `project` (the numbers live only there).
pub fn bash_timeouts(project: Project) -> Result<(u64, u64), String> {
    let var = |name: &str| {
        harness_spec::Spec::embedded()
            .tool("bash")
            .and_then(|t| t.variables.get(name))
            .and_then(|v| v.value_for(project))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("the spec gives bash no whole number of seconds for {name}"))
    };
    Ok((var("timeout_default")?, var("timeout_max")?))
}

/// Seconds a foreground `bash` call runs before it is handed back as a job: its `timeout`
/// argument (the spec's default without one), from 1 to the spec's most for `project`.
pub fn bash_seconds(project: Project, args: &serde_json::Value) -> Result<u64, String> {
    let (default, max) = bash_timeouts(project)?;
    Ok(args
        .get("timeout")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(default)
        .clamp(1, max))
}

/// A finished command's result: its output, then its exit status; an error unless it exited 0.
pub fn bash_outcome(call_id: &str, output: &str, exit: Exit) -> ToolOutcome {
    let status = match exit {
        Exit::Code(c) => format!("exit code {c}"),
        Exit::Signal(s) => format!("killed by signal {s}"),
    };
    let body = output.trim_end_matches('\n');
    let text = if body.is_empty() {
        format!("(no output)\n{status}")
    } else {
        format!("{body}\n{status}")
    };
    ToolOutcome::answer(call_id, text, exit != Exit::Code(0))
}
