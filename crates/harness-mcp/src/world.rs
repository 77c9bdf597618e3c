//! A front end's world with the MCP servers' tools beside its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use harness_agent::{BoxFuture, CallContext, Ran, RegisteredTool, ShownFile, ToolWorld};
use harness_core::prompt::InstructionFile;
use harness_core::protocol::ToolCall;
use harness_loop::session::ToolOutcome;

use crate::Mcp;

/// A world that runs the MCP servers' tools and hands everything else to the world it wraps.
/// Dropping it (with the session) ends the servers' processes.
pub struct WithMcp {
    inner: Arc<dyn ToolWorld>,
    mcp: Arc<Mcp>,
}

impl WithMcp {
    /// `inner` with `mcp`'s tools.
    pub fn new(inner: Arc<dyn ToolWorld>, mcp: Arc<Mcp>) -> Self {
        WithMcp { inner, mcp }
    }

    /// The servers.
    pub fn mcp(&self) -> &Arc<Mcp> {
        &self.mcp
    }
}

impl ToolWorld for WithMcp {
    fn runs(&self, name: &str) -> bool {
        self.inner.runs(name)
    }

    fn registered(&self) -> Vec<RegisteredTool> {
        let mut tools = self.inner.registered();
        tools.extend(self.mcp.tools());
        tools
    }

    fn call<'a>(&'a self, call: &'a ToolCall, cx: CallContext) -> BoxFuture<'a, Ran> {
        if !self.mcp.has(&call.name) {
            return self.inner.call(call, cx);
        }
        Box::pin(async move {
            let (text, error) = self.mcp.call(&call.name, &call.arguments, &cx.cancel).await;
            Ran::Done(ToolOutcome::answer(&call.id, text, error))
        })
    }

    fn precheck(&self, call: &ToolCall) -> Option<String> {
        if self.mcp.has(&call.name) {
            return None;
        }
        self.inner.precheck(call)
    }

    fn subject<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, Option<String>> {
        if self.mcp.has(&call.name) {
            return Box::pin(async { None });
        }
        self.inner.subject(call)
    }

    fn instructions(&self) -> Vec<InstructionFile> {
        self.inner.instructions()
    }

    fn values(&self) -> BTreeMap<String, String> {
        self.inner.values()
    }

    fn read_for_show(&self, path: &str) -> Result<ShownFile, harness_agent::SeamError> {
        self.inner.read_for_show(path)
    }

    fn place(&self) -> String {
        self.inner.place()
    }

    fn resolve(&self, path: &str) -> String {
        self.inner.resolve(path)
    }
}
