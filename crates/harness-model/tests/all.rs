//! The harness-model test suite: the `quirks` conformance area and the client end to end against
//! the scripted model server.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers of the tests

mod suite;
