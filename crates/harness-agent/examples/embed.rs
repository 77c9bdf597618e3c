//! Embedding the harness: a tool of the program's own (`weather`), a session against a scripted
//! model that calls it, the call allowed when asked, the events printed as the JSON a server
//! stores. `cargo run -p harness-agent --example embed` (no model server needed).

#![allow(clippy::print_stdout, reason = "an example: the events are its output")]

use std::sync::Arc;

use harness_agent::{BoxFuture, CallContext, CoreEvent, Event, Op, Ran, RegisteredTool};
use harness_agent::{Reply, ScriptedModel, SeamError, SessionBuilder, ShownFile, ToolWorld};
use harness_core::protocol::{Answer, ToolCall};
use harness_loop::session::ToolOutcome;
use serde_json::json;

struct Weather; // This program's world: no files, no shell, one tool of its own.

impl ToolWorld for Weather {
    fn runs(&self, _name: &str) -> bool {
        false
    }
    fn registered(&self) -> Vec<RegisteredTool> {
        let city = json!({"type": "string", "description": "The city."});
        vec![RegisteredTool {
            name: "weather".into(),
            description: "Today's weather in a city.".into(),
            parameters: json!({"type": "object", "properties": {"city": city}, "required": ["city"]}),
            risk: harness_spec::Risk::Execute, // asked about in the manual mode
            exclusive: false,
            deferred: false,
        }]
    }
    fn call<'a>(&'a self, call: &'a ToolCall, _cx: CallContext) -> BoxFuture<'a, Ran> {
        let city = call.arguments["city"].as_str().unwrap_or("?");
        Box::pin(async move { Ran::Done(ToolOutcome::ok(&call.id, format!("{city}: sunny"))) })
    }
    fn read_for_show(&self, path: &str) -> Result<ShownFile, SeamError> {
        Err(SeamError::file(path, "No such file or directory"))
    }
    fn place(&self) -> String {
        "/".into()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weather = Reply::call("weather", json!({"city": "Lisbon"}));
    let model = ScriptedModel::new([weather, Reply::text("It is sunny in Lisbon.")]);
    let mut spawned = SessionBuilder::new(Arc::new(model), Arc::new(Weather))
        .prompt("What is the weather in Lisbon?")
        .one_shot(None) // ends when idle; without it, when the last handle is dropped
        .spawn()?;
    while let Some(event) = spawned.events.recv().await {
        println!("{}", serde_json::to_string(&event)?);
        if let Event::Core(CoreEvent::ToolCallAsked { call_id, .. }) = event {
            let answer = Answer::Once; // or `Deny`, `Always`
            spawned.session.submit(Op::Answer { call_id, answer });
        }
    }
    Ok(spawned.run.finished().await?.result?)
}
