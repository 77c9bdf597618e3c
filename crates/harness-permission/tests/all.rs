//! The crate's test suite: the permission conformance area, and the rules' own examples.
#![allow(clippy::unwrap_used)]

use harness_core::protocol::Mode;
use harness_permission::conformance::conformance_runners;
use harness_permission::{Action, Engine, Request};
use harness_spec::Spec;
use serde_json::json;

fn engine() -> Engine {
    Engine::new(Spec::embedded()).unwrap()
}

#[test]
fn engine_loads_and_its_examples_hold() {
    engine();
}

#[test]
fn conformance_permission() {
    for runner in conformance_runners() {
        harness_spec::conformance::assert_area(runner.as_ref(), Spec::embedded());
    }
}

#[test]
fn check_output_snapshot() {
    let e = engine();
    let args = json!({"command": "git -C sub push --force && ls"});
    let d = e.decide(&Request::bash(&args, Mode::Auto));
    assert_eq!(d.action, Action::Ask);
    insta::assert_snapshot!(harness_permission::render_check(&d));
    let args = json!({"command": "npm install left-pad"});
    let d = e.decide(&Request::bash(&args, Mode::Manual));
    insta::assert_snapshot!(harness_permission::render_check(&d));
    let args = json!({"command": "sudo rm -rf --no-preserve-root /"});
    let d = e.decide(&Request::bash(&args, Mode::Auto));
    insta::assert_snapshot!(harness_permission::render_check(&d));
}

#[test]
fn the_sandbox_policy_fills_the_spec_paths() {
    use harness_permission::sandbox::{Places, Sandbox};
    let sandbox = Sandbox::from_spec(Spec::embedded()).unwrap();
    assert!(sandbox.enabled && sandbox.network);
    let c = sandbox.confinement(
        Places {
            workspace: "/home/ann/project",
            home: "/home/ann",
            tmp: "/tmp",
        },
        Some(false),
    );
    for w in ["/home/ann/project", "/tmp", "/home/ann/.cache", "/dev/null"] {
        assert!(c.writable.iter().any(|p| p == w), "{w} not writable: {c:?}");
    }
    assert!(!c.writable.iter().any(|p| p == "/home/ann"), "{c:?}");
    for r in ["/home/ann/.ssh", "/etc/shadow", "/home/ann/.config/llembas"] {
        assert!(c.unreadable.iter().any(|p| p == r), "{r} readable: {c:?}");
    }
    // A protected path inside a writable root cannot be hidden; patterns are not paths.
    assert!(
        !c.unreadable
            .iter()
            .any(|p| p.starts_with("/home/ann/project")),
        "{c:?}"
    );
    assert!(!c.unreadable.iter().any(|p| p.contains('*')), "{c:?}");
    assert!(!c.network);
}
