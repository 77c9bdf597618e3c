//! Tool-call assembly: the pieces of streamed tool calls (`delta.tool_calls[]`) put together
//! into whole calls, whatever the server does with `index` and `id`, and each call's arguments
//! read (the `toolcall_index` conformance area). This is the one implementation of the rule:
//! harness-model's stream parser feeds it every piece and takes its calls.
//!
//! Where a piece goes, rules tried in order:
//!
//! 1. An empty `id` or `name` counts as absent; `arguments` may be a string (a fragment of JSON
//!    text) or a whole JSON value (a call that arrives whole); `null` counts as absent.
//! 2. With an `id` an earlier call has: that call (the latest with it), unless the piece brings
//!    another `index` or another name than that call has, in which case it starts a new call
//!    (a server that repeats one id for every call).
//! 3. With an `index`: the latest call of that index, unless that call already has another id
//!    or another name, or the piece names the call's tool again while the call's arguments are
//!    already complete JSON and the piece's begin a new object (servers that give every
//!    parallel call index 0): then it starts a new call.
//! 4. With an `id` and no `index`: a new call (a known id was rule 2).
//! 5. With neither: the call the previous piece went to, unless the piece names a tool and
//!    that call has a name already, another one or the same with complete arguments while the
//!    piece's begin a new object: then it starts a new call.
//!
//! A call's first id and name stay; a name may come after the arguments. A piece whose
//! arguments repeat, whole, the call's complete arguments adds nothing (a proxy that sends a
//! finished call again at the end).
//!
//! At the end ([`CallAssembler::finish`], told how the answer ended), each call's argument
//! text is read as JSON values back to back, each one a call of the same tool (a server that
//! never raises `index`): empty text is `{}`, `null` is `{}`, a JSON string holding a JSON
//! object is that object; any other value is not an object, so not a call. Text that does not
//! parse is repaired when the answer ended normally, losslessly only: trailing commas dropped
//! and missing closing brackets added, never inside a string (an unterminated string is no
//! repair) nor after a bare `:`. When the output limit or an error cut the answer, nothing is
//! repaired and empty text is cut off too; when an error ended it, no call is run at all. A
//! call that cannot be run keeps its raw text and [`Unusable`] says why, to be told to the model.
//! A call with no name is given with `name: None` for the caller to refuse
//! ([`Unusable::NoName`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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

impl CallDelta {
    /// Reads one entry of `delta.tool_calls[]` (or a legacy `function_call`, given as
    /// `{"function": ...}`): `index`, `id`, `function.name`, `function.arguments`. Fields of
    /// another type count as absent.
    pub fn from_wire(entry: &Value) -> CallDelta {
        let function = entry.get("function");
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        CallDelta {
            index: entry.get("index").and_then(Value::as_u64),
            id: text(entry.get("id")),
            name: text(function.and_then(|f| f.get("name"))),
            arguments: function
                .and_then(|f| f.get("arguments"))
                .filter(|a| !a.is_null())
                .cloned(),
        }
    }
}

/// How the answer that carried the calls ended: what [`CallAssembler::finish`] may do with
/// arguments that did not come whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallEnd {
    /// The answer ended normally: broken arguments get the lossless repairs.
    #[default]
    Complete,
    /// The output limit cut it (`finish_reason: length`): arguments that are not whole were
    /// cut off; whole calls before them still stand.
    Length,
    /// An error ended it: no call is run.
    Error,
}

/// Why an assembled call cannot be run. [`Unusable::reason`] is the text told to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unusable {
    /// No piece named the tool.
    NoName,
    /// The answer was cut before the call had any arguments.
    CutOffEmpty,
    /// The answer was cut inside the arguments.
    CutOff,
    /// The arguments are not JSON, even repaired.
    NotJson,
    /// The arguments are JSON but not an object.
    NotObject,
    /// The arguments were whole, but an error ended the answer.
    AnswerFailed,
}

impl Unusable {
    /// The reason, as the model is told it.
    pub fn reason(self) -> &'static str {
        match self {
            Unusable::NoName => "the call has no tool name",
            Unusable::CutOffEmpty => "the arguments were cut off",
            Unusable::CutOff => "the arguments were cut off before they were complete",
            Unusable::NotJson => "the arguments are not valid JSON",
            Unusable::NotObject => "the arguments are not a JSON object",
            Unusable::AnswerFailed => "the answer ended with an error, so the call is not run",
        }
    }
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

/// A call put together from its pieces.
#[derive(Debug, Clone, PartialEq)]
pub struct AssembledCall {
    /// The server's id, if it gave one (the harness gives its own ids; this is for the record).
    pub server_id: Option<String>,
    /// The tool name; `None` when no piece named it (not a call to run: [`Unusable::NoName`]).
    pub name: Option<String>,
    /// The argument text this call was read from, trimmed (several calls read from one text
    /// each have their own part).
    pub raw: String,
    /// The arguments object, or why the call cannot be run.
    pub arguments: Result<Value, Unusable>,
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

/// Whether `text` is one or more complete JSON values back to back.
fn is_complete_json(text: &str) -> bool {
    let t = text.trim();
    !t.is_empty()
        && serde_json::Deserializer::from_str(t)
            .into_iter::<serde::de::IgnoredAny>()
            .all(|r| r.is_ok())
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
        let whole;
        let args = match &delta.arguments {
            None | Some(Value::Null) => "",
            Some(Value::String(s)) => s.as_str(),
            Some(other) => {
                whole = other.to_string();
                whole.as_str()
            }
        };
        let target = self.target(delta.index, id, name, args);
        self.current = Some(target);
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
        // A whole call sent again adds nothing.
        if !slot.text.is_empty() && slot.text.trim() == args.trim() && is_complete_json(&slot.text)
        {
            return;
        }
        slot.text.push_str(args);
    }

    fn target(
        &mut self,
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        args: &str,
    ) -> usize {
        let other_name =
            |slot: &Slot| name.is_some_and(|n| slot.name.as_deref().is_some_and(|s| s != n));
        // The piece names the call's tool again where the call is whole and new arguments
        // begin (checked last: it reads the call's arguments so far).
        let restarts = |slot: &Slot| {
            name.is_some()
                && slot.name.is_some()
                && args.trim_start().starts_with('{')
                && is_complete_json(&slot.text)
        };
        let found = if let Some(i) =
            id.and_then(|id| self.slots.iter().rposition(|s| s.id.as_deref() == Some(id)))
        {
            let slot = &self.slots[i];
            let other_index = matches!((index, slot.index), (Some(a), Some(b)) if a != b);
            (!other_index && !other_name(slot)).then_some(i)
        } else if let Some(index) = index {
            self.slots
                .iter()
                .rposition(|s| s.index == Some(index))
                .filter(|&i| {
                    let slot = &self.slots[i];
                    let other_id = id.is_some() && slot.id.is_some();
                    !other_id && !other_name(slot) && !restarts(slot)
                })
        } else if id.is_some() {
            None
        } else {
            self.current.filter(|&i| {
                let slot = &self.slots[i];
                !other_name(slot) && !restarts(slot)
            })
        };
        match found {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        }
    }

    /// The calls, in the order they began (a text of several objects gives its calls in turn).
    pub fn finish(self, end: CallEnd) -> Vec<AssembledCall> {
        let mut out = Vec::new();
        for slot in self.slots {
            for (raw, arguments) in read_arguments(&slot.text, end) {
                let arguments = match arguments {
                    Ok(_) if end == CallEnd::Error => Err(Unusable::AnswerFailed),
                    other => other,
                };
                out.push(AssembledCall {
                    server_id: slot.id.clone(),
                    name: slot.name.clone(),
                    raw,
                    arguments,
                });
            }
        }
        out
    }
}

/// Reads a call's argument text into one or more calls' arguments (several values back to
/// back are several calls), each with the part of the text it came from. The rules are the
/// module's: empty text is `{}` (cut off if the answer was cut), `null` is `{}`, a JSON string
/// holding an object is that object, text that does not parse is repaired only when `end` is
/// [`CallEnd::Complete`].
pub fn read_arguments(text: &str, end: CallEnd) -> Vec<(String, Result<Value, Unusable>)> {
    let text = text.trim();
    let cut = end != CallEnd::Complete;
    if text.is_empty() {
        let args = if cut {
            Err(Unusable::CutOffEmpty)
        } else {
            Ok(Value::Object(Map::new()))
        };
        return vec![(String::new(), args)];
    }
    let mut out = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    loop {
        let start = stream.byte_offset();
        match stream.next() {
            None => break,
            Some(Ok(v)) => {
                let raw = text[start..stream.byte_offset()].trim();
                out.push((raw.to_owned(), as_object(v)));
            }
            Some(Err(_)) => {
                let rest = text[start..].trim();
                let args = if cut {
                    Err(Unusable::CutOff)
                } else {
                    repair_json(rest).map_or(Err(Unusable::NotJson), as_object)
                };
                out.push((rest.to_owned(), args));
                break;
            }
        }
    }
    out
}

/// One value as a call's arguments: an object, `null` (no arguments) or a string holding an
/// object.
fn as_object(value: Value) -> Result<Value, Unusable> {
    match value {
        Value::Object(o) => Ok(Value::Object(o)),
        Value::Null => Ok(Value::Object(Map::new())),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(o)) => Ok(Value::Object(o)),
            _ => Err(Unusable::NotObject),
        },
        _ => Err(Unusable::NotObject),
    }
}

/// The lossless repairs: trailing commas dropped, missing closing brackets added — never
/// inside a string (an unterminated string is no repair) nor after a bare `:`.
fn repair_json(raw: &str) -> Option<Value> {
    let mut out = String::with_capacity(raw.len() + 4);
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let drop_trailing_comma = |out: &mut String| {
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        if out.ends_with(',') {
            out.pop();
        }
    };
    for c in raw.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                if stack.pop() != Some(c) {
                    return None;
                }
                drop_trailing_comma(&mut out);
            }
            _ => {}
        }
        out.push(c);
    }
    if in_string {
        return None;
    }
    drop_trailing_comma(&mut out);
    if out.ends_with(':') {
        return None;
    }
    while let Some(c) = stack.pop() {
        out.push(c);
    }
    serde_json::from_str(&out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    type Call = (Option<String>, Result<Value, Unusable>);

    fn run(deltas: Value, end: CallEnd) -> Vec<Call> {
        let deltas: Vec<CallDelta> = serde_json::from_value(deltas).unwrap();
        let mut a = CallAssembler::new();
        for d in &deltas {
            a.push(d);
        }
        a.finish(end)
            .into_iter()
            .map(|c| (c.name, c.arguments))
            .collect()
    }

    fn args(text: &str, end: CallEnd) -> Vec<Result<Value, Unusable>> {
        read_arguments(text, end)
            .into_iter()
            .map(|(_, a)| a)
            .collect()
    }

    #[test]
    fn openai_shape() {
        let calls = run(
            json!([
                {"index": 0, "id": "a", "name": "read", "arguments": ""},
                {"index": 0, "arguments": "{\"path\":"},
                {"index": 1, "id": "b", "name": "glob", "arguments": "{\"pattern\":\"*\"}"},
                {"index": 0, "arguments": "\"x\"}"}
            ]),
            CallEnd::Complete,
        );
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
        let calls = run(
            json!([
                {"index": 0, "id": "a", "name": "read", "arguments": {"path": "x"}},
                {"index": 0, "id": "b", "name": "read", "arguments": {"path": "y"}},
                {"index": 0, "id": "b", "arguments": ""},
                {"name": "grep", "arguments": "{\"p\":1}{\"p\":2}"}
            ]),
            CallEnd::Complete,
        );
        assert_eq!(calls.len(), 4);
        assert_eq!(calls[1].1, Ok(json!({"path": "y"})));
        assert_eq!(calls[3], (Some("grep".into()), Ok(json!({"p": 2}))));
    }

    #[test]
    fn one_id_for_every_call_and_a_repeat() {
        let calls = run(
            json!([
                {"index": 0, "id": "c", "name": "read", "arguments": "{\"path\":\"one\"}"},
                {"index": 1, "id": "c", "name": "read", "arguments": "{\"path\":\"two\"}"},
                {"index": 1, "id": "c", "name": "read", "arguments": "{\"path\":\"two\"}"}
            ]),
            CallEnd::Complete,
        );
        assert_eq!(
            calls,
            vec![
                (Some("read".into()), Ok(json!({"path": "one"}))),
                (Some("read".into()), Ok(json!({"path": "two"})))
            ]
        );
    }

    #[test]
    fn a_repeated_name_on_every_fragment_is_one_call() {
        let calls = run(
            json!([
                {"name": "read", "arguments": "{\"path\":"},
                {"name": "read", "arguments": "\"x\"}"},
                {"name": "read", "arguments": "{\"path\":\"y\"}"}
            ]),
            CallEnd::Complete,
        );
        assert_eq!(
            calls,
            vec![
                (Some("read".into()), Ok(json!({"path": "x"}))),
                (Some("read".into()), Ok(json!({"path": "y"})))
            ]
        );
    }

    #[test]
    fn arguments_read_by_the_end() {
        assert_eq!(
            args("{\"a\":", CallEnd::Complete),
            vec![Err(Unusable::NotJson)]
        );
        assert_eq!(
            args("\"{\\\"a\\\":1}\"", CallEnd::Complete),
            vec![Ok(json!({"a": 1}))]
        );
        assert_eq!(
            args("[1]", CallEnd::Complete),
            vec![Err(Unusable::NotObject)]
        );
        assert_eq!(args(" null ", CallEnd::Complete), vec![Ok(json!({}))]);
        assert_eq!(args("", CallEnd::Length), vec![Err(Unusable::CutOffEmpty)]);
        assert_eq!(
            args("{\"a\": [1,]", CallEnd::Complete),
            vec![Ok(json!({"a": [1]}))]
        );
        assert_eq!(
            args("{\"a\": [1,]", CallEnd::Length),
            vec![Err(Unusable::CutOff)]
        );
        assert_eq!(
            read_arguments("{\"a\":1} {\"b\":", CallEnd::Complete),
            vec![
                ("{\"a\":1}".to_owned(), Ok(json!({"a": 1}))),
                ("{\"b\":".to_owned(), Err(Unusable::NotJson))
            ]
        );
        let failed = run(
            json!([{"index": 0, "name": "read", "arguments": "{}"}]),
            CallEnd::Error,
        );
        assert_eq!(failed[0].1, Err(Unusable::AnswerFailed));
    }

    #[test]
    fn repairs_are_lossless_only() {
        assert_eq!(
            repair_json(r#"{"a": [1, 2,], }"#),
            Some(json!({"a": [1, 2]}))
        );
        assert_eq!(
            repair_json(r#"{"a": {"b": 1"#),
            Some(json!({"a": {"b": 1}}))
        );
        assert_eq!(repair_json(r#"{"a": "unterminated"#), None);
        assert_eq!(repair_json(r#"{"a": "x,}"}"#), Some(json!({"a": "x,}"})));
        assert_eq!(repair_json(r#"{"a":"#), None);
        assert_eq!(repair_json(r#"{"a": 1]"#), None);
    }
}
