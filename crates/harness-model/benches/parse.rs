//! How fast the one parser reads a long streamed answer: text, reasoning in think tags, and
//! tool-call arguments in small fragments, fed as raw body bytes in network-sized pieces.

#![allow(missing_docs, clippy::unwrap_used)]

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use harness_model::{Quirks, StreamParser};
use serde_json::json;

fn body() -> Vec<u8> {
    let mut out = String::new();
    let mut push = |delta: serde_json::Value, finish: Option<&str>| {
        let chunk = json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    };
    push(json!({"role": "assistant", "content": "<think>"}), None);
    for i in 0..500 {
        push(json!({"content": format!("step {i} of the plan ")}), None);
    }
    push(json!({"content": "</think>\n\n"}), None);
    for i in 0..2000 {
        push(json!({"content": format!("word{i} ")}), None);
    }
    push(
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "write", "arguments": ""}}]}),
        None,
    );
    push(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\": \"a.txt\", \"content\": \""}}]}),
        None,
    );
    for i in 0..2000 {
        push(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": format!("line {i}\\n")}}]}),
            None,
        );
    }
    push(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"}"}}]}),
        None,
    );
    push(json!({}), Some("tool_calls"));
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

fn parse(c: &mut Criterion) {
    let quirks = Quirks::embedded().unwrap();
    let body = body();
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.measurement_time(Duration::from_secs(3));
    group.sample_size(20);
    group.bench_function("stream_4500_chunks", |b| {
        b.iter(|| {
            let mut parser = StreamParser::new(quirks);
            for piece in body.chunks(1400) {
                std::hint::black_box(parser.push_bytes(piece));
            }
            let (_, completion) = parser.finish();
            assert_eq!(completion.tool_calls.len(), 1);
            completion
        })
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
