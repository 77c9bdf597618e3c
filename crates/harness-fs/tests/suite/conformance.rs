//! Every area this crate implements, run from the embedded spec.

use harness_fs::conformance::conformance_runners;
use harness_spec::Spec;
use harness_spec::conformance::assert_area;

fn area(name: &str) {
    let runners = conformance_runners();
    let runner = runners
        .iter()
        .find(|r| r.area() == name)
        .expect("a runner for the area");
    assert_area(runner.as_ref(), Spec::embedded());
}

#[test]
fn fs_access() {
    area("fs_access");
}

#[test]
fn host_fs() {
    area("host_fs");
}

#[test]
fn instructions() {
    area("instructions");
}

#[test]
fn chunk_tokens() {
    area("chunk_tokens");
}

#[test]
fn chunk() {
    area("chunk");
}

#[test]
fn memory() {
    area("memory");
}

#[test]
fn the_seed_cases_are_kept_word_for_word() {
    let seed: serde_json::Value =
        serde_json::from_str(include_str!("../../../../spec/conformance/fs_access.json")).unwrap();
    let cases = seed["cases"].as_array().unwrap();
    assert!(cases.len() >= 20);
    assert!(
        seed["about"]
            .as_str()
            .unwrap()
            .starts_with("The file system as one session sees it")
    );
}
