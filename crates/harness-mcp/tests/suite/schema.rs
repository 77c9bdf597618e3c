//! Which input schemas a model is sent, and why the others are dropped.

use harness_mcp::schema::check;
use serde_json::json;

#[test]
fn schemas_in_the_spec_subset_pass_and_others_are_refused_with_where() {
    let table = [
        (
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                   "properties": {"message": {"type": "string", "description": "what to echo"}},
                   "required": ["message"], "additionalProperties": false}),
            Ok(json!({"type": "object",
                   "properties": {"message": {"type": "string", "description": "what to echo"}},
                   "required": ["message"], "additionalProperties": false})),
        ),
        (json!({}), Ok(json!({"type": "object", "properties": {}}))),
        (
            json!({"type": "object", "properties": {"n": {"type": "number", "default": 10}}}),
            Ok(json!({"type": "object", "properties": {"n": {"type": "number", "default": 10}}})),
        ),
        (
            json!({"type": "array"}),
            Err("its input schema's type is \"array\", not \"object\""),
        ),
        (
            json!({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}),
            Err(
                "its input schema uses `anyOf` (at /properties/x/anyOf), which models are not sent",
            ),
        ),
        (
            json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}, "$defs": {}}),
            Err("its input schema uses `$ref` (at /properties/x/$ref), which models are not sent"),
        ),
        (
            json!({"type": "object", "properties": {"l": {"type": "array", "items": {"oneOf": []}}}}),
            Err(
                "its input schema uses `oneOf` (at /properties/l/items/oneOf), which models are not sent",
            ),
        ),
    ];
    for (schema, want) in table {
        let got = check(&schema);
        match want {
            Ok(v) => assert_eq!(got, Ok(v), "{schema}"),
            Err(e) => assert_eq!(got, Err(e.to_owned()), "{schema}"),
        }
    }
}

#[test]
fn tool_names_keep_to_the_characters_models_take() {
    for (server, tool, want) in [
        ("everything", "echo", "mcp__everything__echo"),
        ("my server", "get-sum", "mcp__my_server__get-sum"),
        ("gh", "repos/list.all", "mcp__gh__repos_list_all"),
    ] {
        assert_eq!(harness_mcp::tool_name(server, tool), want);
    }
}
