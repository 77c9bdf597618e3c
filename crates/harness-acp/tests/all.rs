//! harness-acp's suite: the mapping's rules, and sessions driven through the crate by
//! `agent-client-protocol`'s own client over an in-memory stream.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
