//! One prompt run to its end without a person at a screen (`llembas -p`, an embedder's batch
//! run), as every front end reports it: whether the new session is kept, whether the run
//! succeeded, and the JSON stream's opening and closing lines (`{"type": "session"}`, `{"type":
//! "result"}`) with what the run added up to.

use std::collections::BTreeSet;
use std::time::Instant;

use harness_core::protocol::{Event as CoreEvent, TurnEnd};
use serde_json::{Value, json};

use crate::protocol::Event;

/// Whether the run succeeded: its turn finished.
pub fn succeeded(end: Option<&TurnEnd>) -> bool {
    matches!(end, Some(TurnEnd::Finished))
}

/// The JSON stream's first line: the session it belongs to.
pub fn head(session_id: &str, model: &str, resumed: bool) -> Value {
    json!({
        "type": "session",
        "session_id": session_id,
        "model": model,
        "resumed": resumed,
    })
}

/// What a run added up to, from the outputs it gave.
#[derive(Debug, Clone)]
pub struct Totals {
    started: Instant,
    requests: u64,
    input_tokens: u64,
    output_tokens: u64,
    files: BTreeSet<String>,
    happened: bool,
    /// The model's price, when known, and what the run cost at it.
    price: Option<harness_spec::Cost>,
    cost: f64,
}

impl Default for Totals {
    fn default() -> Totals {
        Totals::new()
    }
}

impl Totals {
    /// Nothing yet; the run's time counts from now.
    pub fn new() -> Totals {
        Totals {
            started: Instant::now(),
            requests: 0,
            input_tokens: 0,
            output_tokens: 0,
            files: BTreeSet::new(),
            happened: false,
            price: None,
            cost: 0.0,
        }
    }

    /// Counts the run's cost at `price` (US dollars per million tokens; `None`: not known, and
    /// the result says so).
    pub fn set_price(&mut self, price: Option<harness_spec::Cost>) {
        self.price = price;
    }

    /// Notes one output of the session.
    pub fn note(&mut self, out: &Event) {
        match out {
            Event::Core(CoreEvent::ModelAnswered { usage }) => {
                self.requests += 1;
                if let Some(u) = usage {
                    self.input_tokens += u.input_tokens;
                    self.output_tokens += u.output_tokens;
                    if let Some(p) = &self.price {
                        self.cost += p.of(u.input_tokens, u.output_tokens);
                    }
                }
            }
            Event::Edit { path, .. } => {
                self.files.insert(path.clone());
            }
            Event::Core(
                CoreEvent::TextDelta { .. }
                | CoreEvent::ReasoningDelta { .. }
                | CoreEvent::ToolCallStarted { .. }
                | CoreEvent::PlanChanged { .. },
            ) => self.happened = true,
            _ => {}
        }
    }

    /// Whether the model did something (a word, a call, a plan) in the run.
    pub fn happened(&self) -> bool {
        self.happened
    }

    /// Whether the session is kept: always when it was resumed (`fresh` false); a new one that
    /// failed (or never ran) before anything happened (a refused key, a server that is down)
    /// is not.
    pub fn kept(&self, fresh: bool, end: Option<&TurnEnd>) -> bool {
        let failed = matches!(
            end,
            None | Some(TurnEnd::Error { .. } | TurnEnd::ModelUnavailable { .. })
        );
        !(fresh && failed && !self.happened)
    }

    /// The JSON stream's closing line: the session, why the run ended and what it took.
    pub fn result(&self, session_id: &str, kept: bool, end: Option<&TurnEnd>) -> Value {
        json!({
            "type": "result",
            "session_id": session_id,
            "session_kept": kept,
            "exit_reason": end.map_or(json!({"kind": "not_run"}), |e| {
                serde_json::to_value(e).unwrap_or_default()
            }),
            "is_error": !succeeded(end),
            "requests": self.requests,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
            "cost_usd": self.price.map(|_| self.cost),
            "duration_ms": u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "files_changed": self.files,
        })
    }
}
