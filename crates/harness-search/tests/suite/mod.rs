mod alloc;
mod cost;
mod embedder;
mod index;
mod profile;
mod store;

use std::path::PathBuf;

/// The model's folder the xtask installed (`LLEMBAS_EMBEDDER_DIR`).
pub fn model_dir() -> PathBuf {
    match std::env::var("LLEMBAS_EMBEDDER_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => panic!(
            "LLEMBAS_EMBEDDER_DIR is not set: run the embedder's tests with `cargo xtask test` (it installs the model)"
        ),
    }
}

/// The embedder, loaded once for the whole test binary.
pub fn embedder() -> harness_search::Embedder {
    harness_search::Embedder::load(&model_dir()).unwrap()
}
