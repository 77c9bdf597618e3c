//! The end-to-end suite of `llembas`: the real binary against the scripted model server.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod suite;
