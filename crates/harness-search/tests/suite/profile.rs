//! The embedder's hot path is built optimised and without debug assertions in the dev profile
//! (the one `cargo test` and `cargo xtask search-eval` use). A crate of it left with the dev
//! profile's defaults keeps its ub-checks and debug assertions even at opt-level 3: gemm's
//! packing of the operands then checks every element it copies, and embedding a 10-token query
//! took ≈60 ms instead of ≈18 (perf over the eval). Checked in the root Cargo.toml, crate by
//! crate, not timed.

use std::path::Path;

/// Every crate a query's embedding spends its time in (perf over `cargo xtask search-eval`):
/// the model (candle), its matrix kernels (gemm and what they dispatch through), GELU's erf
/// (libm), the thread pool, the tokenizer and its regexes.
const HOT: [&str; 21] = [
    "candle-core",
    "candle-nn",
    "candle-transformers",
    "gemm",
    "gemm-common",
    "gemm-f32",
    "pulp",
    "dyn-stack",
    "half",
    "libm",
    "num-traits",
    "rayon",
    "rayon-core",
    "crossbeam-deque",
    "crossbeam-epoch",
    "crossbeam-utils",
    "safetensors",
    "tokenizers",
    "fancy-regex",
    "regex-automata",
    "unicode-normalization-alignments",
];

fn root_file(name: &str) -> String {
    // Read when run (cargo sets it then too), so the check can be pointed at another tree.
    let crate_dir =
        std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let path = Path::new(&crate_dir).join("../..").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_embedders_hot_path_is_optimised_without_debug_assertions_in_dev() {
    let manifest: toml::Table = root_file("Cargo.toml").parse().unwrap();
    let lock: toml::Table = root_file("Cargo.lock").parse().unwrap();
    let locked: Vec<&str> = lock["package"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.get("name").and_then(toml::Value::as_str))
        .collect();
    let packages = manifest
        .get("profile")
        .and_then(|p| p.get("dev"))
        .and_then(|d| d.get("package"))
        .and_then(toml::Value::as_table);
    let mut wrong = Vec::new();
    for name in HOT {
        assert!(
            locked.contains(&name),
            "{name} is not in Cargo.lock: the list is stale"
        );
        let section = packages.and_then(|p| p.get(name));
        let field = |k: &str| section.and_then(|s| s.get(k)).cloned();
        if field("opt-level") != Some(toml::Value::Integer(3))
            || field("debug-assertions") != Some(toml::Value::Boolean(false))
            || field("overflow-checks") != Some(toml::Value::Boolean(false))
        {
            wrong.push(name);
        }
    }
    assert!(
        wrong.is_empty(),
        "[profile.dev.package.NAME] lacks opt-level = 3, debug-assertions = false, overflow-checks = false for {wrong:?}"
    );
    // The search's own loops: optimised too, without overflow checks on every sum nor std's
    // ub-checks in its sorts and selections.
    let own = packages.and_then(|p| p.get("harness-search"));
    let field = |k: &str| own.and_then(|s| s.get(k)).cloned();
    assert_eq!(field("opt-level"), Some(toml::Value::Integer(3)));
    assert_eq!(field("debug-assertions"), Some(toml::Value::Boolean(false)));
    assert_eq!(field("overflow-checks"), Some(toml::Value::Boolean(false)));
}
