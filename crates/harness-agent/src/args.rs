//! A call's arguments read one way for every tool the runtime and its worlds run: a required
//! argument that is absent, or one of the wrong type, answers the same text whoever runs the
//! tool (`NAME: the argument `KEY` is missing`, `NAME: `KEY` must be WHAT`).

use harness_core::protocol::ToolCall;
use harness_loop::session::ToolOutcome;
use serde_json::Value;

/// A typed argument: `Ok(None)` when absent (or null), the answer to send when of the wrong
/// type.
pub type Arg<T> = Result<Option<T>, Refused>;

/// The answer a call gets instead of running (boxed: an outcome is large).
pub type Refused = Box<ToolOutcome>;

/// A string argument.
pub fn arg_str<'a>(call: &'a ToolCall, key: &str) -> Arg<&'a str> {
    match call.arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(wrong_type(call, key, "a string").into()),
    }
}

/// A whole-number argument, 0 or more.
pub fn arg_usize(call: &ToolCall, key: &str) -> Arg<usize> {
    match call.arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(n) => Ok(Some(n)),
            // A whole number too large to hold (1e20): said as such, not as the wrong type.
            None if v
                .as_f64()
                .is_some_and(|f| f.is_finite() && f >= 0.0 && f.fract() == 0.0) =>
            {
                Err(ToolOutcome::error(
                    &call.id,
                    format!(
                        "{}: `{key}` {v} is past the largest {key} there can be ({})",
                        call.name,
                        usize::MAX
                    ),
                )
                .into())
            }
            None => Err(wrong_type(call, key, "a whole number, 0 or more").into()),
        },
    }
}

/// A true-or-false argument.
pub fn arg_bool(call: &ToolCall, key: &str) -> Arg<bool> {
    match call.arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong_type(call, key, "true or false").into()),
    }
}

/// A required string argument: the answer to send when it is absent or not a string.
pub fn required_str<'a>(call: &'a ToolCall, key: &str) -> Result<&'a str, Refused> {
    arg_str(call, key)?.ok_or_else(|| missing(call, key).into())
}

/// The answer to a call missing a required argument.
pub fn missing(call: &ToolCall, key: &str) -> ToolOutcome {
    ToolOutcome::error(
        &call.id,
        format!("{}: the argument `{key}` is missing", call.name),
    )
}

/// The answer to a call whose argument `key` is there but of the wrong type (`what` it must
/// be: "a string", "true or false", ...).
pub fn wrong_type(call: &ToolCall, key: &str, what: &str) -> ToolOutcome {
    ToolOutcome::error(&call.id, format!("{}: `{key}` must be {what}", call.name))
}
