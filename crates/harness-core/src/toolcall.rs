//! Tool-call indexing: the pieces of streamed tool calls (`delta.tool_calls[]`) put together
//! into whole calls, whatever the server does with `index` and `id` (the `toolcall_index`
//! conformance area).
//!
//! Rules, in the order they are tried for each piece:
//!
//! 1. An empty `id` or `name` counts as absent; `arguments` may be a string (a fragment of JSON
//!    text) or a whole JSON value (a call that arrives whole).
//! 2. With an `index`: the piece goes to the latest call with that index, unless that call
//!    already has a different `id` or a different `name`, in which case it starts a new call
//!    (servers that give every parallel call index 0). The same id again is the same call.
//! 3. Without an `index` but with an `id`: the call with that id, else a new one.
//! 4. With neither: the piece continues the most recent call, unless it brings a name and that
//!    call already has one, in which case it starts a new call.
//! 5. A name may come after the arguments.
//! 6. At the end, each call's arguments are parsed: empty text is `{}`; a JSON string holding
//!    JSON is parsed once more; several complete JSON objects back to back are that many calls
//!    of the same tool. Arguments that still do not parse, or a call with no name, are kept as
//!    invalid (answered to the model as an error, never run).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One piece of a streamed tool call, as a server sent it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallDelta {
    /// The server's `index`, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// The server's call id, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function.name`, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `function.arguments`: a fragment of JSON text, or a whole value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}

/// A call put together from its pieces.
#[derive(Debug, Clone, PartialEq)]
pub struct AssembledCall {
    /// The server's id, if it gave one (the harness gives its own ids; this is for the record).
    pub server_id: Option<String>,
    /// The tool name; `None` when no piece named it.
    pub name: Option<String>,
    /// The parsed arguments, or the raw text that did not parse.
    pub arguments: Result<Value, String>,
}

#[derive(Debug, Default)]
struct Slot {
    index: Option<u64>,
    id: Option<String>,
    name: Option<String>,
    text: String,
}

/// Puts streamed tool-call pieces together.
#[derive(Debug, Default)]
pub struct CallAssembler {
    slots: Vec<Slot>,
    current: Option<usize>,
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|s| !s.is_empty())
}

impl CallAssembler {
    /// A new, empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no piece has arrived.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Takes one piece.
    pub fn push(&mut self, delta: &CallDelta) {
        let id = non_empty(&delta.id);
        let name = non_empty(&delta.name);
        let target = self.target(delta.index, id, name);
        let slot = &mut self.slots[target];
        if slot.index.is_none() {
            slot.index = delta.index;
        }
        if slot.id.is_none() {
            slot.id = id.map(str::to_owned);
        }
        if slot.name.is_none() {
            slot.name = name.map(str::to_owned);
        }
        match &delta.arguments {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => slot.text.push_str(s),
            Some(whole) => slot.text.push_str(&whole.to_string()),
        }
        self.current = Some(target);
    }

    fn target(&mut self, index: Option<u64>, id: Option<&str>, name: Option<&str>) -> usize {
        let conflicts = |slot: &Slot| {
            id.is_some_and(|id| slot.id.as_deref().is_some_and(|s| s != id))
                || name.is_some_and(|n| slot.name.as_deref().is_some_and(|s| s != n))
        };
        let found = if let Some(index) = index {
            self.slots
                .iter()
                .rposition(|s| s.index == Some(index))
                .filter(|&i| !conflicts(&self.slots[i]))
        } else if let Some(id) = id {
            self.slots.iter().rposition(|s| s.id.as_deref() == Some(id))
        } else {
            self.current
                .filter(|&i| name.is_none() || self.slots[i].name.is_none())
        };
        match found {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        }
    }

    /// The calls, in the order they began.
    pub fn finish(self) -> Vec<AssembledCall> {
        let mut out = Vec::new();
        for slot in self.slots {
            let parsed = parse_arguments(&slot.text);
            match parsed {
                Ok(values) => {
                    for v in values {
                        out.push(AssembledCall {
                            server_id: slot.id.clone(),
                            name: slot.name.clone(),
                            arguments: Ok(v),
                        });
                    }
                }
                Err(raw) => out.push(AssembledCall {
                    server_id: slot.id,
                    name: slot.name,
                    arguments: Err(raw),
                }),
            }
        }
        out
    }
}

/// Parses a call's argument text into one or more argument objects (several objects back to
/// back are several calls). Empty text is `{}`; a JSON string holding JSON is parsed once more.
/// Anything else is an error carrying the raw text.
pub fn parse_arguments(text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Ok(vec![Value::Object(Default::default())]);
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(o)) => return Ok(vec![Value::Object(o)]),
        Ok(Value::String(inner)) => {
            if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(inner.trim()) {
                return Ok(vec![Value::Object(o)]);
            }
            return Err(text.to_owned());
        }
        Ok(_) => return Err(text.to_owned()),
        Err(_) => {}
    }
    let mut values = Vec::new();
    for v in serde_json::Deserializer::from_str(trimmed).into_iter::<Value>() {
        match v {
            Ok(Value::Object(o)) => values.push(Value::Object(o)),
            _ => return Err(text.to_owned()),
        }
    }
    if values.is_empty() {
        Err(text.to_owned())
    } else {
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(deltas: Value) -> Vec<(Option<String>, Result<Value, String>)> {
        let deltas: Vec<CallDelta> = serde_json::from_value(deltas).unwrap();
        let mut a = CallAssembler::new();
        for d in &deltas {
            a.push(d);
        }
        a.finish()
            .into_iter()
            .map(|c| (c.name, c.arguments))
            .collect()
    }

    #[test]
    fn openai_shape() {
        let calls = run(json!([
            {"index": 0, "id": "a", "name": "read", "arguments": ""},
            {"index": 0, "arguments": "{\"path\":"},
            {"index": 1, "id": "b", "name": "glob", "arguments": "{\"pattern\":\"*\"}"},
            {"index": 0, "arguments": "\"x\"}"}
        ]));
        assert_eq!(
            calls,
            vec![
                (Some("read".into()), Ok(json!({"path": "x"}))),
                (Some("glob".into()), Ok(json!({"pattern": "*"})))
            ]
        );
    }

    #[test]
    fn every_call_index_zero_and_back_to_back() {
        let calls = run(json!([
            {"index": 0, "id": "a", "name": "read", "arguments": {"path": "x"}},
            {"index": 0, "id": "b", "name": "read", "arguments": {"path": "y"}},
            {"index": 0, "id": "b", "arguments": ""},
            {"name": "grep", "arguments": "{\"p\":1}{\"p\":2}"}
        ]));
        assert_eq!(calls.len(), 4);
        assert_eq!(calls[1].1, Ok(json!({"path": "y"})));
        assert_eq!(calls[3], (Some("grep".into()), Ok(json!({"p": 2}))));
    }

    #[test]
    fn bad_arguments_stay_invalid() {
        assert_eq!(parse_arguments("{\"a\":"), Err("{\"a\":".into()));
        assert_eq!(
            parse_arguments("\"{\\\"a\\\":1}\""),
            Ok(vec![json!({"a": 1})])
        );
        assert_eq!(parse_arguments("[1]"), Err("[1]".into()));
    }
}
