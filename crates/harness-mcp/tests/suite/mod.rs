//! Helpers: where the real server is, and a world that runs nothing of its own.

mod everything;
mod failures;
mod filesystem;
mod prompts;
mod resources;
mod schema;
mod session;

use std::path::PathBuf;
use std::sync::Arc;

use harness_agent::{BoxFuture, CallContext, Ran, ShownFile, ToolWorld};
use harness_core::protocol::ToolCall;
use harness_loop::session::ToolOutcome;
use harness_mcp::{Limits, Mcp, ServerConfig, Transport};

/// `mcp-server-everything` as installed for the tests, or `None` with a line saying the test is
/// skipped.
pub fn everything() -> Option<PathBuf> {
    harness_test_support::mcp_everything()
}

/// The everything server over stdio, as `name`.
pub fn everything_config(name: &str) -> Option<ServerConfig> {
    let bin = everything()?;
    Some(ServerConfig::new(
        name,
        Transport::stdio(bin.to_str().unwrap(), ["stdio"]),
    ))
}

/// Starts the everything server, failing the test on any notice but dropped tools.
pub async fn start_everything(limits: Limits) -> Option<Mcp> {
    let config = everything_config("everything")?;
    let (mcp, notices) = Mcp::start(&[config], limits).await;
    assert!(
        notices.iter().all(|n| n.contains("is not offered")),
        "{notices:?}"
    );
    assert_eq!(mcp.servers().len(), 1, "{notices:?}");
    Some(mcp)
}

/// A world of no tools of its own, working in the folder it holds.
pub struct Bare(pub String);

impl ToolWorld for Bare {
    fn runs(&self, _name: &str) -> bool {
        false
    }

    fn call<'a>(&'a self, call: &'a ToolCall, _cx: CallContext) -> BoxFuture<'a, Ran> {
        Box::pin(async move { Ran::Done(ToolOutcome::error(&call.id, "no such tool")) })
    }

    fn read_for_show(&self, path: &str) -> Result<ShownFile, harness_agent::SeamError> {
        Err(harness_agent::SeamError::file(
            path,
            format!("No such file or directory: {path}"),
        ))
    }

    fn place(&self) -> String {
        self.0.clone()
    }
}

/// The bare world, working in `/work`.
pub fn bare() -> Arc<dyn ToolWorld> {
    Arc::new(Bare("/work".into()))
}
