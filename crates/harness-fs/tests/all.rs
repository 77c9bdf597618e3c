//! harness-fs's test suite: the conformance areas, the host backend's rules on real
//! directories, the file tools, and snapshots of what a model reads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
