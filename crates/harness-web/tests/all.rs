//! The harness-web test suite: `web_fetch` against a real HTTP server on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers of the tests

mod suite;
