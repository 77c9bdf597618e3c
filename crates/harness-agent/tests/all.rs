//! harness-agent's suite: sessions driven against the scripted model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
