//! The runtime's own tools as a registry keyed by canonical tool name: each a [`ToolHandler`]
//! that answers a call with the front end, the store or the plan (`question`, `show`, `task`,
//! `session_search`, the plan tools, the loader). A call whose name has no handler here goes
//! to the session's world.

use std::sync::LazyLock;

use super::*;
use crate::registry::ToolRegistry;
use crate::seams::BoxFuture;

/// How the runtime answers one of its own tools' calls.
pub(super) type ToolHandler =
    for<'a> fn(&'a mut Driver, &'a ToolCall) -> BoxFuture<'a, Result<ToolOutcome>>;

/// The runtime's own tools, in any world.
pub(super) static RUNTIME_TOOLS: LazyLock<ToolRegistry<ToolHandler>> = LazyLock::new(|| {
    let plan: ToolHandler = |d, call| Box::pin(async move { Ok(d.plan_call(call)) });
    ToolRegistry::new()
        .with(
            "question",
            (|d, call| Box::pin(d.question(call))) as ToolHandler,
        )
        .with("show", |d, call| Box::pin(d.show(call)))
        .with("task", |d, call| Box::pin(d.task(call)))
        .with("session_search", |d, call| Box::pin(d.session_search(call)))
        .with("plan_write", plan)
        .with("plan_update", plan)
        .with("plan_submit", plan)
        .with(harness_core::offer::LOADER, |d, call| {
            Box::pin(async move { Ok(d.load_tools(call)) })
        })
});

/// Whether the runtime answers `name` itself rather than the world.
pub(super) fn answers(name: &str) -> bool {
    RUNTIME_TOOLS.runs(name)
}
