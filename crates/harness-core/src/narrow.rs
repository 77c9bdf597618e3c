//! `narrow`: what a project offers of a shared tool's parameters where it offers less.
//!
//! A path names a property from the parameters' root: `a.b` is `b` among the properties of
//! `a`; `a[].b` is `b` among the properties of the items of the array `a`. `drop` leaves out
//! optional properties; `enum` keeps some of a property's values. The result is a subset of the
//! whole tool and nothing else: dropping a required property, naming a property the schema does
//! not have, or keeping a value the property does not allow is an error, so every call valid for
//! the narrow tool is valid for the whole one.

use serde_json::{Map, Value};

use harness_spec::Narrow;

use crate::error::{Error, Result};

/// Why a narrow rule is refused (the `error` of a `narrow` conformance case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NarrowProblem {
    /// The path names no property of the schema (`unknown_path`).
    UnknownPath,
    /// `drop` names a required property (`required`).
    Required,
    /// `enum` keeps a value the property does not allow (`not_a_subset`).
    NotASubset,
    /// `enum` keeps no value at all (`empty`).
    Empty,
}

impl NarrowProblem {
    /// The problem's code in conformance cases.
    pub fn code(self) -> &'static str {
        match self {
            NarrowProblem::UnknownPath => "unknown_path",
            NarrowProblem::Required => "required",
            NarrowProblem::NotASubset => "not_a_subset",
            NarrowProblem::Empty => "empty",
        }
    }

    fn error(self, tool: &str, path: &str, detail: impl Into<String>) -> Error {
        Error::Narrow {
            tool: tool.to_owned(),
            path: path.to_owned(),
            reason: format!("{} ({})", detail.into(), self.code()),
        }
    }
}

/// Reads the problem code back from an error made by this module.
pub fn problem_code(error: &Error) -> Option<&'static str> {
    let Error::Narrow { reason, .. } = error else {
        return None;
    };
    [
        NarrowProblem::UnknownPath,
        NarrowProblem::Required,
        NarrowProblem::NotASubset,
        NarrowProblem::Empty,
    ]
    .into_iter()
    .find(|p| reason.ends_with(&format!("({})", p.code())))
    .map(NarrowProblem::code)
}

/// One step of a path: a property name, and whether it goes into the items of an array.
fn steps(path: &str) -> Vec<(&str, bool)> {
    path.split('.')
        .map(|s| match s.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (s, false),
        })
        .collect()
}

/// The object schema holding the last property of a path, and that property's name.
fn parent_of<'s>(
    root: &'s mut Value,
    tool: &str,
    path: &str,
) -> Result<(&'s mut Map<String, Value>, String)> {
    let steps = steps(path);
    let Some(((last, last_items), init)) = steps.split_last() else {
        return Err(NarrowProblem::UnknownPath.error(tool, path, "empty path"));
    };
    if *last_items || last.is_empty() {
        return Err(NarrowProblem::UnknownPath.error(tool, path, "a path ends in a property name"));
    }
    let mut node = root;
    for (name, items) in init {
        let props = node
            .get_mut("properties")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| {
                NarrowProblem::UnknownPath.error(
                    tool,
                    path,
                    format!("`{name}` is not inside an object"),
                )
            })?;
        let mut child = props.get_mut(*name).ok_or_else(|| {
            NarrowProblem::UnknownPath.error(tool, path, format!("no property `{name}`"))
        })?;
        if *items {
            child = child.get_mut("items").ok_or_else(|| {
                NarrowProblem::UnknownPath.error(tool, path, format!("`{name}` is not an array"))
            })?;
        }
        node = child;
    }
    let obj = node
        .as_object_mut()
        .ok_or_else(|| NarrowProblem::UnknownPath.error(tool, path, "not a schema object"))?;
    if obj.get("properties").and_then(|p| p.get(*last)).is_none() {
        return Err(NarrowProblem::UnknownPath.error(tool, path, format!("no property `{last}`")));
    }
    Ok((obj, (*last).to_owned()))
}

/// Applies a project's narrow rule to a tool's parameters.
pub fn narrow_parameters(tool: &str, parameters: &Value, narrow: &Narrow) -> Result<Value> {
    let mut out = parameters.clone();
    for path in &narrow.drop {
        let (parent, name) = parent_of(&mut out, tool, path)?;
        let required = parent
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|v| v.as_str() == Some(&name)));
        if required {
            return Err(NarrowProblem::Required.error(tool, path, format!("`{name}` is required")));
        }
        if let Some(props) = parent.get_mut("properties").and_then(Value::as_object_mut) {
            props.remove(&name);
        }
    }
    for (path, keep) in &narrow.enums {
        if keep.is_empty() {
            return Err(NarrowProblem::Empty.error(tool, path, "no value kept"));
        }
        let (parent, name) = parent_of(&mut out, tool, path)?;
        let Some(prop) = parent.get_mut("properties").and_then(|p| p.get_mut(&name)) else {
            return Err(NarrowProblem::UnknownPath.error(
                tool,
                path,
                format!("no property `{name}`"),
            ));
        };
        restrict(prop, keep).map_err(|why| NarrowProblem::NotASubset.error(tool, path, why))?;
    }
    Ok(out)
}

/// Keeps only `keep` among a property's values: its `enum`, or its items' `enum` for an array,
/// or (for a property of one plain type without `enum`) values of that type.
fn restrict(prop: &mut Value, keep: &[Value]) -> std::result::Result<(), String> {
    let target = if prop.get("enum").is_none()
        && prop.get("type").and_then(Value::as_str) == Some("array")
        && prop.get("items").is_some_and(|i| i.get("enum").is_some())
    {
        prop.get_mut("items")
    } else {
        Some(prop)
    };
    let Some(Value::Object(schema)) = target else {
        return Err("the property is not a schema object".into());
    };
    match schema.get("enum").and_then(Value::as_array) {
        Some(allowed) => {
            if let Some(bad) = keep.iter().find(|v| !allowed.contains(v)) {
                return Err(format!("{bad} is not one of the property's values"));
            }
            // Keep the spec's order.
            let kept: Vec<Value> = allowed
                .iter()
                .filter(|v| keep.contains(v))
                .cloned()
                .collect();
            schema.insert("enum".into(), Value::Array(kept));
        }
        None => {
            let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
            if let Some(bad) = keep.iter().find(|v| !of_type(v, ty)) {
                return Err(format!("{bad} is not a value of type `{ty}`"));
            }
            schema.insert("enum".into(), Value::Array(keep.to_vec()));
        }
    }
    Ok(())
}

fn of_type(v: &Value, ty: &str) -> bool {
    match ty {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "target": {"type": "string", "enum": ["memory", "user"]},
            "edits": {"type": "array", "items": {"type": "object", "properties": {
                "old": {"type": "string"}, "all": {"type": "boolean"}}, "required": ["old"]}},
            "scope": {"type": "string"}
        }, "required": ["target"]})
    }

    fn n(v: Value) -> Narrow {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn drops_and_keeps() {
        let out = narrow_parameters(
            "t",
            &schema(),
            &n(json!({"drop": ["edits[].all", "scope"], "enum": {"target": ["memory"]}})),
        )
        .unwrap();
        assert_eq!(out["properties"]["target"]["enum"], json!(["memory"]));
        assert!(out["properties"].get("scope").is_none());
        assert!(
            out["properties"]["edits"]["items"]["properties"]
                .get("all")
                .is_none()
        );
    }

    #[test]
    fn refuses_what_is_no_subset() {
        let code = |v| problem_code(&narrow_parameters("t", &schema(), &n(v)).unwrap_err());
        assert_eq!(code(json!({"drop": ["target"]})), Some("required"));
        assert_eq!(code(json!({"drop": ["edits[].old"]})), Some("required"));
        assert_eq!(code(json!({"drop": ["nope"]})), Some("unknown_path"));
        assert_eq!(code(json!({"drop": ["edits.all"]})), Some("unknown_path"));
        assert_eq!(
            code(json!({"enum": {"target": ["other"]}})),
            Some("not_a_subset")
        );
        assert_eq!(code(json!({"enum": {"scope": [1]}})), Some("not_a_subset"));
    }
}
