//! The end-to-end suite of `llembas`: the real binary against the scripted model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(
    clippy::print_stderr,
    reason = "what a failing test saw of the terminal or the editor's stream, shown with it"
)]

mod suite;
