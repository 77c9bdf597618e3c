//! The crate's tests: `suite/`. The embedder's need its model files: they are ignored by plain
//! `cargo test` (their names end in `embedder`) and run by `cargo xtask test`, which installs
//! the files and names their folder in `LLEMBAS_EMBEDDER_DIR`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
