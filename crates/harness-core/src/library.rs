//! Library scope: in a session a LLeMbas chat opened on a device, the CLI's library calls reach
//! only what belongs to that chat (the `library_scope` conformance area).
//!
//! The client says so in the `_meta.lembas` of `session/new` (acp.md, section 7): `scope` is an
//! object such as `{"chat": "c_01J9Z3K6", "project": "api"}`, the part of the device's library the
//! session may reach. Rules:
//!
//! - no `scope` (the CLI's own sessions): library calls reach the whole library, their arguments
//!   untouched, and are reported without a scope;
//! - with one, every call of a library tool ([`LIBRARY_TOOLS`]: `notes_search`, `note_view`,
//!   `note_manage`, `knowledge_search`, `knowledge_get`, by name or former name) is scoped to it
//!   and reported with `_meta.lembas.scope` equal to the scope applied; a `scope` argument the
//!   model gave (`project`, `all`, `global`) is removed, since the session's scope replaces it and
//!   a call can never widen itself;
//! - calls of other tools are never scoped;
//! - a `scope` that is not an object with a non-empty string `chat` (other members strings) is
//!   an error: the session is refused rather than given the whole library by mistake.

use serde_json::Value;

use crate::error::{Error, Result};
pub use crate::prompt::LIBRARY_TOOLS;

/// The library scope of a session, from the `_meta.lembas` object of `session/new`.
pub fn scope_from_meta(lembas: &Value) -> Result<Option<Value>> {
    let bad = |why: &str| Error::Arguments {
        tool: "session/new".into(),
        reason: format!("_meta.lembas.scope {why}"),
    };
    let scope = match lembas.get("scope") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(bad("must be an object")),
    };
    match scope.get("chat") {
        Some(Value::String(c)) if !c.trim().is_empty() => {}
        _ => return Err(bad("must name its chat as a non-empty string")),
    }
    if let Some((k, _)) = scope.iter().find(|(_, v)| !v.is_string()) {
        return Err(bad(&format!("member `{k}` must be a string")));
    }
    Ok(Some(Value::Object(scope.clone())))
}

/// A library call as it goes to the library: the arguments, and the scope it is limited to.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopedCall {
    /// The arguments, a model-given `scope` removed in a scoped session.
    pub arguments: Value,
    /// The scope the call is limited to, or `None` for the whole library.
    pub scope: Option<Value>,
}

/// Scopes one call (its tool already resolved to its own name) in a session with `scope`.
pub fn scope_call(tool: &str, arguments: &Value, scope: Option<&Value>) -> ScopedCall {
    match scope {
        Some(scope) if LIBRARY_TOOLS.contains(&tool) => {
            let mut arguments = arguments.clone();
            if let Value::Object(m) = &mut arguments {
                m.remove("scope");
            }
            ScopedCall {
                arguments,
                scope: Some(scope.clone()),
            }
        }
        _ => ScopedCall {
            arguments: arguments.clone(),
            scope: None,
        },
    }
}

/// The `_meta` member a scoped library call is reported with (`{"lembas": {"scope": ...}}`).
pub fn meta_for(call: &ScopedCall) -> Option<Value> {
    call.scope
        .as_ref()
        .map(|s| serde_json::json!({"lembas": {"scope": s}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_only_library_calls() {
        let lembas = json!({"scope": {"chat": "c_1", "project": "api"}});
        let s = scope_from_meta(&lembas).unwrap();
        let c = scope_call(
            "notes_search",
            &json!({"query": "x", "scope": "all"}),
            s.as_ref(),
        );
        assert_eq!(c.arguments, json!({"query": "x"}));
        assert_eq!(meta_for(&c), Some(json!({"lembas": lembas})));
        let c = scope_call("read", &json!({"path": "a"}), s.as_ref());
        assert_eq!(c.scope, None);
        assert!(scope_from_meta(&json!({"scope": "c_1"})).is_err());
        assert!(scope_from_meta(&json!({"scope": {"project": "api"}})).is_err());
        assert!(scope_from_meta(&json!({"scope": {"chat": "c", "project": 1}})).is_err());
        assert_eq!(scope_from_meta(&json!({})).unwrap(), None);
    }
}
