//! The error texts a person reads.

use harness_model::{Catalogue, Error, ModelInfo, ModelOverrides, Quirks, classify_http};

fn quirks() -> &'static Quirks {
    Quirks::embedded().unwrap()
}

#[test]
fn capacity_and_overflow_texts() {
    let busy = classify_http(
        quirks(),
        503,
        r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#,
        Some("5"),
    );
    insta::assert_snapshot!(Error::Capacity { error: busy, attempts: 30 }.to_string(),
        @"the model server has no capacity now (after 30 attempts): 503: Loading model");
    let overflow = classify_http(
        quirks(),
        400,
        r#"{"error":{"message":"prompt too long; exceeded context length by 12 tokens"}}"#,
        None,
    );
    insta::assert_snapshot!(Error::ContextOverflow(overflow).to_string(),
        @"context overflow: 400: prompt too long; exceeded context length by 12 tokens");
    let empty = classify_http(quirks(), 413, "", None);
    insta::assert_snapshot!(Error::ContextOverflow(empty).to_string(),
        @"context overflow: 413: HTTP 413 with an empty body");
}

#[test]
fn a_prompt_that_cannot_fit_says_so_before_sending() {
    let model = ModelInfo::resolve(
        Catalogue::embedded().unwrap(),
        "tiny-local",
        &ModelOverrides {
            context: Some(300),
            ..ModelOverrides::default()
        },
    );
    let err = model
        .clamp_max_tokens(None, 200, &quirks().request)
        .unwrap_err();
    insta::assert_snapshot!(err.to_string(),
        @"context overflow: the prompt is about 200 tokens and leaves no room for an answer in the 300-token window of model tiny-local");
    let fits = model
        .clamp_max_tokens(Some(10), 20, &quirks().request)
        .unwrap();
    assert_eq!(fits, Some(10));
}

#[test]
fn catalogue_models_are_found_by_alias_and_overridden() {
    let catalogue = Catalogue::embedded().unwrap();
    let first = &catalogue.models()[0];
    let alias = first
        .aliases
        .first()
        .cloned()
        .unwrap_or_else(|| first.id.clone());
    let info = ModelInfo::resolve(catalogue, &alias, &ModelOverrides::default());
    assert_eq!(info.catalogue_id.as_deref(), Some(first.id.as_str()));
    assert_eq!(info.context, Some(first.context));
    assert_eq!(info.output, Some(first.output));
    let served = ModelInfo::resolve(
        catalogue,
        &format!("someone/{}", first.id.to_uppercase()),
        &ModelOverrides {
            context: Some(4096),
            capacity: Some(2),
            ..ModelOverrides::default()
        },
    );
    assert_eq!(served.catalogue_id.as_deref(), Some(first.id.as_str()));
    assert_eq!(served.context, Some(4096));
    assert_eq!(served.capacity, Some(2));
    assert_eq!(served.name, format!("someone/{}", first.id.to_uppercase()));
    let unknown = ModelInfo::resolve(catalogue, "no-such-model-xyz", &ModelOverrides::default());
    assert_eq!(
        (unknown.catalogue_id, unknown.context, unknown.tools),
        (None, None, true)
    );
}

#[test]
fn the_model_is_told_which_calls_were_not_run() {
    let mut parser = harness_model::StreamParser::new(quirks());
    for line in [
        r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"write","arguments":"{\"path\": \"x\", \"content\": \"unfini"}}]},"finish_reason":null}]}"#,
        r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
        "data: [DONE]",
    ] {
        parser.push_line(line);
    }
    let (_, completion) = parser.finish();
    assert!(completion.tool_calls.is_empty());
    assert_eq!(
        completion.invalid_calls[0].raw,
        r#"{"path": "x", "content": "unfini"#
    );
    insta::assert_snapshot!(completion.invalid_calls_note(quirks()).unwrap(),
        @"Your call of write was not run: the arguments were cut off before they were complete. Send it again with complete JSON arguments; split long content into smaller calls.");
    let message = harness_model::Message::from(&completion);
    assert_eq!(
        message,
        harness_model::Message::Assistant {
            text: String::new(),
            reasoning: String::new(),
            tool_calls: vec![]
        }
    );
}

/// A 200 whose body is no event stream says what came: an HTML page (a base URL without its
/// `/v1`), something else, or nothing.
#[test]
fn a_body_that_is_no_stream_says_what_it_was() {
    let said = |body: &[u8]| {
        let mut parser = harness_model::StreamParser::new(quirks());
        // Split anywhere.
        for piece in body.chunks(7) {
            parser.push_bytes(piece);
        }
        let (_, completion) = parser.finish();
        completion.finish.error.unwrap().message
    };
    insta::assert_snapshot!(
        [
            said(b"<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body>...</body></html>"),
            said(b"Not Found"),
            said(b""),
        ]
        .join("\n"),
        @r#"
    the server answered with an HTML page, not an event stream (it begins "<!DOCTYPE html> <html><head><title>Welcome to nginx!</title>"): the base URL may be a web page's, not the API's (which usually ends in /v1)
    the server answered with something other than an event stream (it begins "Not Found")
    the server closed the answer without sending anything
    "#
    );
}
