use harness_model::conformance::conformance_runners;
use harness_spec::Spec;
use harness_spec::conformance::assert_area;

#[test]
fn quirks_area() {
    let runners = conformance_runners();
    assert!(runners.iter().any(|r| r.area() == "quirks"));
    for runner in &runners {
        assert_area(runner.as_ref(), Spec::embedded());
    }
}

#[test]
fn every_quirk_has_a_case() {
    let spec = Spec::embedded();
    let quirks = harness_model::Quirks::from_spec(spec).unwrap();
    let file = spec.conformance("quirks").unwrap();
    for q in &quirks.quirks {
        let covered = file.cases.iter().any(|c| {
            c.get("note").and_then(|n| n.as_str()).is_some_and(|n| {
                n.starts_with(&format!("{}:", q.id)) || n.starts_with(&format!("{} (", q.id))
            })
        });
        assert!(covered, "quirk {} has no conformance case", q.id);
    }
}

#[test]
fn a_wrong_expectation_fails() {
    let runner = &conformance_runners()[0];
    let case = serde_json::json!({"server": "vllm", "sse": ["data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}", "data: [DONE]"],
        "expect": {"text": "bye", "finish": "stop"}});
    let outcome = runner.run(&case);
    assert!(!outcome.passed);
    assert_eq!(
        outcome.actual,
        serde_json::json!({"text": "hi", "finish": "stop"})
    );
    let malformed = runner.run(&serde_json::json!({"server": "x", "expect": {"finish": "stop"}}));
    assert!(!malformed.passed);
}

#[test]
fn a_200_body_given_as_text_is_read_as_a_stream() {
    let runner = &conformance_runners()[0];
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"streamed\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let case = serde_json::json!({"server": "other", "status": 200, "body": body,
        "expect": {"text": "streamed", "finish": "stop"}});
    let outcome = runner.run(&case);
    assert!(outcome.passed, "{}", outcome.actual);
}
