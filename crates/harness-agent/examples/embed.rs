//! Embedding the harness: a program registers one tool of its own (`weather`), runs a session
//! against an in-process scripted model that calls it, and prints the events as they come.
//!
//! `cargo run -p harness-agent --example embed` (no model server needed).

#![allow(clippy::print_stdout)]

use std::sync::Arc;

use harness_agent::{
    BoxFuture, CallContext, Out, Ran, RegisteredTool, Reply, ScriptedModel, SessionBuilder,
    ShownFile, ToolWorld,
};
use harness_core::protocol::{Event, Mode, ToolCall};
use harness_loop::session::ToolOutcome;
use serde_json::json;

/// This program's world: no files, no shell, one tool of its own.
struct Weather;

impl ToolWorld for Weather {
    fn runs(&self, _name: &str) -> bool {
        false
    }

    fn registered(&self) -> Vec<RegisteredTool> {
        vec![RegisteredTool {
            name: "weather".into(),
            description: "Today's weather in a city.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city."}},
                "required": ["city"]
            }),
            risk: harness_spec::Risk::Read,
            exclusive: false,
            deferred: false,
        }]
    }

    fn call<'a>(&'a self, call: &'a ToolCall, _cx: CallContext) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            let city = call.arguments["city"].as_str().unwrap_or("nowhere");
            Ran::Done(ToolOutcome::ok(&call.id, format!("{city}: sunny, 21 °C")))
        })
    }

    fn read_for_show(&self, path: &str) -> Result<ShownFile, String> {
        Err(format!("{path}: No such file or directory"))
    }

    fn place(&self) -> String {
        "/".into()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), harness_agent::Error> {
    let model = ScriptedModel::new([
        Reply::call("weather", json!({"city": "Lisbon"})),
        Reply::text("It is sunny in Lisbon, 21 °C."),
    ]);
    let built = SessionBuilder::new(Arc::new(model), Arc::new(Weather))
        .mode(Mode::Manual)
        .build()?;
    let harness_agent::Built {
        mut driver,
        mut out,
        ctl: _ctl,
    } = built;
    driver.queue_prompt("What is the weather in Lisbon?".into());
    let printer = tokio::spawn(async move {
        while let Some(o) = out.recv().await {
            match o {
                Out::Event(Event::TextDelta { text }) => print!("{text}"),
                Out::Event(Event::ToolCallStarted { call, .. }) => {
                    println!("-> {} {}", call.name, call.arguments);
                }
                Out::Event(Event::ToolCallFinished { result }) => {
                    println!("<- {}", result.content.replace('\n', " "));
                }
                Out::Event(Event::TurnEnded { reason }) => {
                    println!("\n[turn ended: {}]", harness_agent::turn_end_text(&reason));
                }
                Out::Event(other) => println!("[{}]", event_name(&other)),
                _ => {}
            }
        }
    });
    driver.run(true).await?;
    drop(driver);
    let _ = printer.await;
    Ok(())
}

fn event_name(e: &Event) -> String {
    serde_json::to_value(e)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "event".into())
}
