//! A one-prompt run's report: whether its session is kept, and the JSON stream's lines.

use harness_agent::Event;
use harness_agent::oneshot::{Totals, head, succeeded};
use harness_core::protocol::{Event as CoreEvent, TurnEnd, Usage};
use pretty_assertions::assert_eq;
use serde_json::json;

#[test]
fn a_new_session_that_failed_before_anything_happened_is_not_kept() {
    let error = TurnEnd::Error {
        message: "401".into(),
    };
    let mut t = Totals::new();
    assert!(!t.kept(true, Some(&error)));
    assert!(!t.kept(true, None));
    assert!(t.kept(false, Some(&error)), "a resumed one always is");
    assert!(t.kept(true, Some(&TurnEnd::Cancelled)));
    t.note(&Event::Core(CoreEvent::TextDelta { text: "Hi".into() }));
    assert!(t.happened());
    assert!(t.kept(true, Some(&error)));
    assert!(succeeded(Some(&TurnEnd::Finished)));
    assert!(!succeeded(Some(&TurnEnd::Cancelled)));
    assert!(!succeeded(None));
}

#[test]
fn the_result_line_adds_the_run_up() {
    let mut t = Totals::new();
    // $2 and $8 per million tokens in and out.
    t.set_price(Some(harness_spec::Cost {
        input: 2.0,
        output: 8.0,
    }));
    for usage in [
        Some(Usage {
            input_tokens: 100,
            output_tokens: 7,
        }),
        None,
        Some(Usage {
            input_tokens: 120,
            output_tokens: 3,
        }),
    ] {
        t.note(&Event::Core(CoreEvent::ModelAnswered { usage }));
    }
    for path in ["/p/b.rs", "/p/a.rs", "/p/b.rs"] {
        t.note(&Event::Edit {
            call_id: "c".into(),
            path: path.into(),
            before: String::new(),
            after: "x".into(),
        });
    }
    let mut r = t.result("s1", true, Some(&TurnEnd::Finished));
    assert!(r["duration_ms"].is_u64());
    r.as_object_mut().unwrap().remove("duration_ms");
    // (220 × 2 + 10 × 8) / 1e6 dollars.
    let cost = r.as_object_mut().unwrap().remove("cost_usd").unwrap();
    assert!((cost.as_f64().unwrap() - 0.00052).abs() < 1e-12, "{cost}");
    assert_eq!(
        r,
        json!({
            "type": "result",
            "session_id": "s1",
            "session_kept": true,
            "exit_reason": {"kind": "finished"},
            "is_error": false,
            "requests": 3,
            "usage": {"input_tokens": 220, "output_tokens": 10},
            "files_changed": ["/p/a.rs", "/p/b.rs"],
        })
    );
    let r = Totals::new().result("s2", false, None);
    assert_eq!(
        (
            r["exit_reason"].clone(),
            r["is_error"].clone(),
            r["cost_usd"].clone()
        ),
        (json!({"kind": "not_run"}), json!(true), json!(null))
    );
    assert_eq!(
        head("s1", "qwen", false),
        json!({"type": "session", "session_id": "s1", "model": "qwen", "resumed": false})
    );
}
