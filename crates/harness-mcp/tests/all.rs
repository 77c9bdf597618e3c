//! harness-mcp's suite: real MCP servers started by the tests (npm's
//! `@modelcontextprotocol/server-everything`, installed by `cargo xtask test`), and small
//! broken ones for the failures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
