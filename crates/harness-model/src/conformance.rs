//! The `quirks` conformance area: recorded server answers run through the same parser the
//! products use.
//!
//! A case is `{"server", "sse": [raw lines]}`, `{"server", "json": {...}}` or `{"server",
//! "status": N, "body": "..."}` (optional `"retry_after"` header value; a 200 body that is not
//! JSON is read as a streamed body), with an optional
//! `"context": {"window", "prompt_estimate"}` (what the harness knew of the request, for silent
//! truncation, which counts only for the servers its quirk lists: the case's `server` is the
//! endpoint's server kind). `expect` holds any of `text`, `reasoning` (compared trimmed), `tool_calls`
//! (`[{name, arguments}]`, ids not compared) and `finish` (always compared).

use harness_spec::conformance::{AreaRunner, Outcome};
use serde_json::{Map, Value, json};

use crate::classify::classify_http;
use crate::parse::{Completion, RequestContext, StreamParser, error_completion, parse_response};
use crate::quirks::Quirks;

/// The runners of this crate's areas.
pub fn conformance_runners() -> Vec<Box<dyn AreaRunner>> {
    vec![Box::new(QuirksRunner)]
}

/// Runs `quirks` cases.
#[derive(Debug, Clone, Copy, Default)]
pub struct QuirksRunner;

/// Parses one case's answer into a completion (what the case's server sent, through our parser).
pub fn run_case(quirks: &Quirks, case: &Value) -> Result<Completion, String> {
    let ctx = case.get("context");
    let context = RequestContext {
        window: ctx.and_then(|c| c.get("window")).and_then(Value::as_u64),
        prompt_estimate: ctx
            .and_then(|c| c.get("prompt_estimate"))
            .and_then(Value::as_u64),
        server: case
            .get("server")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    };
    if let Some(lines) = case.get("sse") {
        let lines = lines
            .as_array()
            .ok_or("`sse` must be an array of the raw lines")?;
        let mut parser = StreamParser::new(quirks).with_context(context.clone());
        for line in lines {
            let line = line.as_str().ok_or("every `sse` line must be a string")?;
            // A line may hold several lines (a recorded body pasted whole).
            for part in line.split('\n') {
                parser.push_line(part.strip_suffix('\r').unwrap_or(part));
            }
        }
        return Ok(parser.finish().1);
    }
    if let Some(body) = case.get("json") {
        return Ok(parse_response(quirks, body, context));
    }
    if let Some(status) = case.get("status") {
        let status = status
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .ok_or("`status` must be an HTTP status number")?;
        let body = match case.get("body") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let retry_after = case.get("retry_after").and_then(Value::as_str);
        if status < 400 {
            // A 200 body is a whole JSON answer, or else a streamed body given as one text.
            if let Ok(value) = serde_json::from_str::<Value>(&body) {
                return Ok(parse_response(quirks, &value, context));
            }
            let mut parser = StreamParser::new(quirks).with_context(context.clone());
            parser.push_bytes(body.as_bytes());
            return Ok(parser.finish().1);
        }
        return Ok(error_completion(classify_http(
            quirks,
            status,
            &body,
            retry_after,
        )));
    }
    Err("a quirks case needs `sse`, `json` or `status`".into())
}

impl AreaRunner for QuirksRunner {
    fn area(&self) -> &'static str {
        "quirks"
    }

    fn run(&self, case: &Value) -> Outcome {
        let quirks = match Quirks::embedded() {
            Ok(q) => q,
            Err(e) => return Outcome::malformed(e.to_string()),
        };
        let Some(expect) = case.get("expect").and_then(Value::as_object) else {
            return Outcome::malformed("the case has no `expect` object");
        };
        let completion = match run_case(quirks, case) {
            Ok(c) => c,
            Err(why) => return Outcome::malformed(why),
        };
        let calls: Vec<Value> = completion
            .tool_calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.arguments}))
            .collect();
        let mut actual = Map::new();
        let mut passed = true;
        for key in ["text", "reasoning", "tool_calls", "finish"] {
            let value = match key {
                "text" => json!(completion.text.trim()),
                "reasoning" => json!(completion.reasoning.trim()),
                "tool_calls" => Value::Array(calls.clone()),
                _ => json!(completion.finish.reason.as_str()),
            };
            if let Some(expected) = expect.get(key) {
                let same = match (key, expected) {
                    ("text" | "reasoning", Value::String(e)) => value.as_str() == Some(e.trim()),
                    _ => &value == expected,
                };
                passed &= same;
                actual.insert(key.into(), value);
            } else if key == "finish" {
                passed = false;
                actual.insert(key.into(), value);
            }
        }
        Outcome {
            passed,
            actual: Value::Object(actual),
        }
    }
}
