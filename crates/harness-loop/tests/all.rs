//! The crate's test suite: the `context` and `jobs` conformance areas, the session's run, the
//! transcript, and the hygiene figure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
