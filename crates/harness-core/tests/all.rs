//! The integration suite of harness-core: the conformance areas, the offering rules, and
//! snapshots of what a model is sent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
