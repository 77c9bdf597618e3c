//! The spec as a product loads it: embedded, from a pinned copy, and refused when broken.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use harness_spec::{Error, Risk, Spec};

fn spec_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Copies the spec and breaks `tools/read.json`: an unknown risk and an undeclared variable.
fn broken_copy(root: &Path) -> PathBuf {
    let spec = root.join("spec");
    copy_dir(&spec_dir(), &spec);
    let path = spec.join("tools/read.json");
    let mut tool: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    tool["risk"] = "dangerous".into();
    let d = tool["description"].as_str().unwrap().to_string();
    tool["description"] = format!("{d} {{{{undeclared}}}}").into();
    std::fs::write(&path, serde_json::to_string_pretty(&tool).unwrap()).unwrap();
    spec
}

#[test]
fn embedded_spec_is_the_spec_directory() {
    let embedded = Spec::embedded();
    assert_eq!(embedded.version().to_string(), "3.3.0-draft");
    assert!(
        !embedded.version().pre.is_empty(),
        "a draft is a pre-release"
    );
    let on_disk = Spec::from_dir(spec_dir()).unwrap();
    assert_eq!(embedded.sha256(), on_disk.sha256());
    assert_eq!(embedded.sha256().len(), 64);
    assert_eq!(embedded.tool("read").unwrap().risk, Risk::Read);
    assert!(embedded.conformance_areas().contains(&"fs_access"));
}

#[test]
fn pinned_copy_is_checked_by_hash() {
    let sha = Spec::embedded().sha256().to_string();
    Spec::from_dir_pinned(spec_dir(), &sha).unwrap();
    let err = Spec::from_dir_pinned(spec_dir(), &"0".repeat(64)).unwrap_err();
    assert!(matches!(err, Error::HashMismatch { .. }), "{err}");
    assert!(err.to_string().contains(&sha), "{err}");
}

#[test]
fn a_changed_file_changes_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec");
    copy_dir(&spec_dir(), &spec);
    std::fs::write(spec.join("VERSION"), "3.0.1-draft\n").unwrap();
    let copy = Spec::from_dir(&spec).unwrap();
    assert_ne!(copy.sha256(), Spec::embedded().sha256());
    assert_eq!(copy.version().to_string(), "3.0.1-draft");
}

#[test]
fn broken_copy_is_refused_naming_file_and_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let spec = broken_copy(dir.path());
    let err = Spec::from_dir(&spec).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("spec/tools/read.json at /risk"), "{text}");
    assert!(
        text.contains(
            "spec/tools/read.json at /description: {{undeclared}} is used but not declared"
        ),
        "{text}"
    );
}

#[test]
fn broken_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec");
    copy_dir(&spec_dir(), &spec);
    std::fs::write(spec.join("VERSION"), "three\n").unwrap();
    let text = Spec::from_dir(&spec).unwrap_err().to_string();
    assert!(text.contains("spec/VERSION"), "{text}");
    assert!(text.contains("not SemVer"), "{text}");
}

/// The build script itself — what `cargo build` runs — fails on a broken copy, naming the file
/// and the pointer. The script finds the spec at `$CARGO_MANIFEST_DIR/../../spec`, so it is run
/// with a manifest directory inside a temporary tree that holds the broken copy.
#[test]
fn build_script_fails_on_a_broken_copy() {
    let exe = std::env::current_exe().unwrap();
    let build_dir = exe.parent().unwrap().parent().unwrap().join("build");
    let script = std::fs::read_dir(&build_dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("harness-spec-"))
        .map(|e| e.path().join("build-script-build"))
        .filter(|p| p.exists())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("the build script of harness-spec has been built");

    let dir = tempfile::tempdir().unwrap();
    broken_copy(dir.path());
    let manifest = dir.path().join("crates/harness-spec");
    std::fs::create_dir_all(&manifest).unwrap();
    let out = std::process::Command::new(&script)
        .env("CARGO_MANIFEST_DIR", &manifest)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the build script accepted a broken spec"
    );
    assert!(stderr.contains("spec/tools/read.json at /risk"), "{stderr}");

    // And the intact spec passes the same script.
    let ok = dir.path().join("ok");
    copy_dir(&spec_dir(), &ok.join("spec"));
    let manifest = ok.join("crates/harness-spec");
    std::fs::create_dir_all(&manifest).unwrap();
    let out = std::process::Command::new(&script)
        .env("CARGO_MANIFEST_DIR", &manifest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn typed_tables() {
    let spec = Spec::embedded();
    assert!(
        spec.models().len() >= 25,
        "the catalogue holds at least 25 models"
    );
    let smol = spec
        .models()
        .iter()
        .find(|m| m.id.contains("smollm2"))
        .expect("the tiny local test model is catalogued");
    assert!(smol.context > 0 && smol.output > 0);
    assert!(
        spec.models().iter().any(|m| m.open_weights)
            && spec.models().iter().any(|m| !m.open_weights)
    );
    let lp = spec.loop_config();
    assert_eq!(lp.context.cap.max_lines, 400);
    assert_eq!(lp.context.cap.max_chars, 40_000);
    assert!(lp.budgets.cli.steps < lp.steps.backstop);
    for table in ["hardline", "arity", "defaults", "modes"] {
        assert!(
            spec.permission_table(table).is_some(),
            "permission/{table}.json"
        );
    }
    assert!(spec.quirks().is_some());
}

#[test]
fn a_budget_above_the_backstop_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec");
    copy_dir(&spec_dir(), &spec);
    let path = spec.join("loop.json");
    let mut lp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    lp["budgets"]["cli"]["steps"] = 100_000.into();
    std::fs::write(&path, serde_json::to_string_pretty(&lp).unwrap()).unwrap();
    let text = Spec::from_dir(&spec).unwrap_err().to_string();
    assert!(text.contains("spec/loop.json"), "{text}");
    assert!(text.contains("backstop"), "{text}");
}

#[test]
fn the_embedded_files_pass_the_same_validation_the_build_ran() {
    // `Spec::embedded()` trusts build.rs; this holds it to the same rules at test time.
    let spec = Spec::embedded();
    let files: std::collections::BTreeMap<String, Vec<u8>> = spec
        .paths()
        .map(|p| (p.to_string(), spec.text(p).unwrap().as_bytes().to_vec()))
        .collect();
    let report = harness_spec::validate::validate(&files);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn the_search_tool_says_its_ranking_numbers_and_a_wrong_one_is_refused() {
    let r = Spec::embedded()
        .tool("search")
        .and_then(|t| t.ranking)
        .expect("tools/search.json has `ranking`");
    assert!(r.rrf_k > 0.0 && (0.0..=1.0).contains(&r.bm25_b), "{r:?}");
    assert!(r.word_candidates >= 1 && r.vector_candidates >= 1, "{r:?}");
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec");
    copy_dir(&spec_dir(), &spec);
    let path = spec.join("tools/search.json");
    let mut tool: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    tool["ranking"]["bm25_b"] = 2.into();
    std::fs::write(&path, serde_json::to_string_pretty(&tool).unwrap()).unwrap();
    let text = Spec::from_dir(&spec).unwrap_err().to_string();
    assert!(
        text.contains("spec/tools/search.json at /ranking/bm25_b"),
        "{text}"
    );
}
