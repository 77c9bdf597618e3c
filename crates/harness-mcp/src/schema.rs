//! Whether a model can take an MCP tool's input schema: the spec's plain subset of JSON Schema
//! (`spec/schemas/tool.schema.json`, `parameters`: type, properties, required, description,
//! enum, items, the bounds, additionalProperties; no `$ref`, `oneOf`, `anyOf`, `allOf`), with
//! the annotations servers add and models ignore (`title`, `default`, `format`, `examples`,
//! `pattern`, `const`) let through and the meta keywords (`$schema`, `$id`, `$comment`) taken
//! out. A schema that needs more is dropped with a notice rather than sent.

use serde_json::{Map, Value};

/// The keywords a model is sent.
const KEPT: &[&str] = &[
    "type",
    "properties",
    "required",
    "description",
    "enum",
    "items",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "additionalProperties",
    "title",
    "default",
    "format",
    "examples",
    "pattern",
    "const",
    "uniqueItems",
    "multipleOf",
];

/// The keywords taken out without a word.
const STRIPPED: &[&str] = &["$schema", "$id", "$comment"];

/// The schema as sent, or why a model cannot take it (naming the keyword and where it is).
pub fn check(schema: &Value) -> Result<Value, String> {
    let Value::Object(root) = schema else {
        return Err("its input schema is not an object".to_owned());
    };
    match root.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        None if root.contains_key("properties") => {}
        Some(other) => {
            return Err(format!(
                "its input schema's type is {other}, not \"object\""
            ));
        }
        None => {}
    }
    let mut out = clean(root, "")?;
    out.insert("type".into(), Value::String("object".into()));
    out.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Ok(Value::Object(out))
}

fn clean(schema: &Map<String, Value>, at: &str) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (key, value) in schema {
        let here = format!("{at}/{key}");
        if STRIPPED.contains(&key.as_str()) {
            continue;
        }
        if !KEPT.contains(&key.as_str()) {
            return Err(format!(
                "its input schema uses `{key}` (at {here}), which models are not sent"
            ));
        }
        let value = match (key.as_str(), value) {
            ("properties", Value::Object(props)) => {
                let mut cleaned = Map::new();
                for (name, prop) in props {
                    let Value::Object(p) = prop else {
                        return Err(format!("its property {here}/{name} is not a schema"));
                    };
                    cleaned.insert(
                        name.clone(),
                        Value::Object(clean(p, &format!("{here}/{name}"))?),
                    );
                }
                Value::Object(cleaned)
            }
            ("items" | "additionalProperties", Value::Object(sub)) => {
                Value::Object(clean(sub, &here)?)
            }
            ("items", Value::Array(_)) => {
                return Err(format!(
                    "its input schema gives `items` as a list (at {here}), which models are not sent"
                ));
            }
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Ok(out)
}
