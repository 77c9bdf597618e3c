//! Request shaping: our conversation in, the JSON body a server takes out. Every quirk of the
//! request side is coped with here: results paired with calls, roles merged, tool schemas in the
//! plain subset, ids remapped to 9 alphanumerics, arguments sent as strings, reasoning in the
//! server's field, `max_tokens` clamped; a model that calls no tools is offered none and gets its
//! history's calls and results as plain text.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, Weak};

pub use harness_core::message::Message;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::Result;
use crate::metadata::ModelInfo;
use crate::quirks::{Quirks, RequestRules, ServerProfile};

impl From<&crate::parse::Completion> for Message {
    /// The answer as the assistant message that goes into the history. Calls that cannot be run
    /// are left out (their arguments are never replayed); tell the model about them with
    /// [`Completion::invalid_calls_note`](crate::parse::Completion::invalid_calls_note).
    fn from(c: &crate::parse::Completion) -> Message {
        Message::Assistant {
            text: c.text.clone(),
            reasoning: c.reasoning.clone(),
            tool_calls: c.tool_calls.clone(),
        }
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// The description the model reads.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
}

/// Which tools the model may or must call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool (the wrap-up step).
    None,
    /// Some tool.
    Required,
    /// This tool.
    Named(String),
}

/// One request of the harness to a model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<Message>,
    /// The tools offered: shared, for a session sends the same ones with each request (a clone
    /// of the request copies none of them).
    #[serde(default)]
    pub tools: Arc<[ToolSpec]>,
    /// The tool choice (None: not sent).
    #[serde(default)]
    pub tool_choice: Option<ToolChoice>,
    /// The reasoning effort (checked against the model's efforts).
    #[serde(default)]
    pub effort: Option<String>,
    /// The most tokens wanted (clamped).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// The sampling temperature.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Send reasoning of earlier assistant messages back (models with interleaved reasoning).
    #[serde(default)]
    pub replay_reasoning: bool,
}

/// A request body ready to send, with what shaping found out.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapedRequest {
    /// The JSON body.
    pub body: Value,
    /// Our estimate of the prompt's tokens.
    pub prompt_estimate: u64,
    /// The `max_tokens` sent, if any.
    pub max_tokens: Option<u64>,
    /// Our call id → the id the server was sent.
    pub wire_ids: HashMap<String, String>,
}

const ALPHANUMERIC: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The 9 alphanumerics a call id is sent as (quirk `tool-id-format`): the same id always gives the
/// same characters; `salt` makes another choice after a clash.
pub fn wire_id(id: &str, salt: u32) -> String {
    // FNV-1a, 64 bits.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes().chain(salt.to_le_bytes()) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let mut out = String::with_capacity(9);
    for _ in 0..9 {
        out.push(char::from(ALPHANUMERIC[(hash % 62) as usize]));
        hash /= 62;
    }
    out
}

/// Keeps a tool schema in the plain subset (quirk `tool-schema-subset`).
pub fn plain_schema(schema: &Value, keys: &[String]) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    // A union keeps its first branch that is not null.
    for union in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = map.get(union) {
            let first = branches
                .iter()
                .find(|b| b.get("type").and_then(Value::as_str) != Some("null"));
            if let Some(first) = first {
                let mut merged = first.as_object().cloned().unwrap_or_default();
                if let Some(d) = map.get("description") {
                    merged.entry("description").or_insert(d.clone());
                }
                return plain_schema(&Value::Object(merged), keys);
            }
        }
    }
    let mut out = Map::new();
    for (k, v) in map {
        if !keys.iter().any(|key| key == k) {
            continue;
        }
        let v = match k.as_str() {
            "type" => match v {
                Value::Array(types) => types
                    .iter()
                    .find(|t| t.as_str() != Some("null"))
                    .cloned()
                    .unwrap_or(Value::String("string".into())),
                other => other.clone(),
            },
            "properties" => match v {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), plain_schema(s, keys)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" => plain_schema(v, keys),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if let Some(c) = map.get("const")
        && keys.iter().any(|k| k == "enum")
    {
        out.insert("enum".into(), Value::Array(vec![c.clone()]));
    }
    Value::Object(out)
}

/// Puts the conversation in the shape strict servers take (quirks `tool-call-result-pairing`,
/// `roles-alternate`): one result per call right after its message, in call order; orphan
/// results dropped; system texts first; same-role neighbours merged.
pub fn normalize(messages: &[Message], missing_result: &str) -> Vec<Message> {
    let mut results: HashMap<&str, &str> = HashMap::new();
    for m in messages {
        if let Message::Tool {
            call_id,
            text: content,
        } = m
        {
            results.entry(call_id.as_str()).or_insert(content.as_str());
        }
    }
    let mut system = Vec::new();
    let mut out: Vec<Message> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut seen_other = false;
    for m in messages {
        match m {
            Message::System { text } if !seen_other => system.push(text.clone()),
            Message::System { text } => push_merged(&mut out, Message::user(text.clone())),
            Message::Tool { .. } => {}
            Message::Assistant { .. } => {
                seen_other = true;
                // Calls with an id already used are dropped (ids repeated across turns).
                let mut m = m.clone();
                let mut calls = Vec::new();
                if let Message::Assistant { tool_calls, .. } = &mut m {
                    tool_calls.retain(|c| !answered.contains(&c.id));
                    calls = tool_calls.clone();
                }
                push_merged(&mut out, m);
                for call in calls {
                    let content = results
                        .get(call.id.as_str())
                        .map_or_else(|| missing_result.to_string(), |c| (*c).to_string());
                    answered.insert(call.id.clone());
                    out.push(Message::Tool {
                        call_id: call.id,
                        text: content,
                    });
                }
            }
            other => {
                seen_other = true;
                push_merged(&mut out, other.clone());
            }
        }
    }
    if !system.is_empty() {
        out.insert(
            0,
            Message::System {
                text: system.join("\n\n"),
            },
        );
    }
    out
}

fn push_merged(out: &mut Vec<Message>, m: Message) {
    match (out.last_mut(), m) {
        (
            Some(Message::User { text, images, .. }),
            Message::User {
                text: more,
                images: more_images,
                ..
            },
        ) => {
            join_text(text, &more);
            images.extend(more_images);
        }
        (
            Some(Message::Assistant {
                text,
                reasoning,
                tool_calls,
            }),
            Message::Assistant {
                text: more,
                reasoning: more_reasoning,
                tool_calls: more_calls,
            },
        ) if tool_calls.is_empty() => {
            join_text(text, &more);
            join_text(reasoning, &more_reasoning);
            tool_calls.extend(more_calls);
        }
        (_, m) => out.push(m),
    }
}

fn join_text(text: &mut String, more: &str) {
    if more.is_empty() {
        return;
    }
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(more);
}

/// Fills the `{key}` places of a spec text in one pass (a value holding `{...}` stays as it is).
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let found = after.find('}').and_then(|close| {
            let key = &after[..close];
            values
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (close, *v))
        });
        match found {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Our estimate of a body's prompt tokens: its characters (as compact JSON) over
/// `chars_per_token`. Counted as it is written out, without making the text.
pub fn estimate_tokens(body: &Value, chars_per_token: u64) -> u64 {
    let mut chars = CharCount(0);
    // Writing to a counter cannot fail, nor can a `Value` refuse to be written.
    let _ = serde_json::to_writer(&mut chars, body);
    chars.0.div_ceil(chars_per_token.max(1))
}

/// Counts the characters of UTF-8 written to it (every byte but continuation bytes).
struct CharCount(u64);

impl std::io::Write for CharCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.iter().filter(|b| (**b & 0xC0) != 0x80).count() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One copy of each set of tools in use: sessions offered the same tools (a server's chats)
/// share it, instead of keeping one each (about 120 kB a session), and it is shaped for the
/// wire once.
pub fn shared_tools(tools: Vec<ToolSpec>) -> Arc<[ToolSpec]> {
    static SETS: Mutex<Vec<Weak<[ToolSpec]>>> = Mutex::new(Vec::new());
    let mut sets = SETS.lock().unwrap_or_else(PoisonError::into_inner);
    sets.retain(|set| set.strong_count() > 0);
    if let Some(same) = sets
        .iter()
        .filter_map(Weak::upgrade)
        .find(|set| **set == *tools)
    {
        return same;
    }
    let set: Arc<[ToolSpec]> = tools.into();
    sets.push(Arc::downgrade(&set));
    set
}

/// A tool as the wire takes it, its schema kept to `keys`.
fn tool_json(t: &ToolSpec, keys: &[String]) -> Value {
    json!({"type": "function", "function": {
        "name": t.name,
        "description": t.description,
        "parameters": plain_schema(&t.parameters, keys),
    }})
}

/// A set of tools shaped for the wire, kept while the set is in use: a session sends the same
/// set with each of its requests (and sessions offered the same tools share one set), so each
/// is shaped once, not at every request.
fn shaped_tools(tools: &Arc<[ToolSpec]>, keys: &[String]) -> Arc<Vec<Value>> {
    type Shaped = (Weak<[ToolSpec]>, Vec<String>, Arc<Vec<Value>>);
    static SHAPED: Mutex<Vec<Shaped>> = Mutex::new(Vec::new());
    let mut shaped = SHAPED.lock().unwrap_or_else(PoisonError::into_inner);
    // A set still held is never freed (nor its place reused) while it is kept here.
    shaped.retain(|(set, _, _)| set.strong_count() > 0);
    if let Some((_, _, wire)) = shaped
        .iter()
        .find(|(set, k, _)| std::ptr::addr_eq(set.as_ptr(), Arc::as_ptr(tools)) && k == keys)
    {
        return wire.clone();
    }
    let wire = Arc::new(tools.iter().map(|t| tool_json(t, keys)).collect::<Vec<_>>());
    shaped.push((Arc::downgrade(tools), keys.to_vec(), wire.clone()));
    wire
}

/// Builds the body of one request.
pub fn shape_request(
    quirks: &Quirks,
    profile: &ServerProfile,
    model: &ModelInfo,
    request: &ChatRequest,
    stream: bool,
) -> Result<ShapedRequest> {
    if let Some(effort) = &request.effort {
        model.check_effort(effort)?;
    }
    let rules = &quirks.request;
    let messages = normalize(&request.messages, &rules.missing_result);
    let wire_ids = wire_ids_of(&messages);
    // A model that calls no tools (quirk `model-without-tools`) is offered none, and its
    // history's calls and results go as plain text.
    let mut shaper = Shaper {
        rules,
        wire_ids: &wire_ids,
        reasoning_field: request
            .replay_reasoning
            .then_some(profile.reasoning_field.as_str()),
        calls_as_text: !model.tools,
        tool_role: profile.tool_role && model.tools,
        names: HashMap::new(),
    };
    let wire_messages = shaper.messages(&messages);

    let mut body = Map::new();
    body.insert("model".into(), Value::String(model.name.clone()));
    body.insert("messages".into(), Value::Array(wire_messages));
    offer_tools(&mut body, request, model, profile, rules);
    if let Some(effort) = request
        .effort
        .clone()
        .or_else(|| model.default_effort.clone())
        && !model.efforts.is_empty()
    {
        if profile.effort_field == "reasoning.effort" {
            body.insert("reasoning".into(), json!({"effort": effort}));
        } else {
            body.insert("reasoning_effort".into(), Value::String(effort));
        }
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("stream".into(), Value::Bool(stream));
    if stream && profile.stream_usage {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    let mut body = Value::Object(body);
    let prompt_estimate = estimate_tokens(&body, rules.chars_per_token);
    let max_tokens = model.clamp_max_tokens(request.max_tokens, prompt_estimate, rules)?;
    if let Some(n) = max_tokens {
        body["max_tokens"] = json!(n);
    }
    Ok(ShapedRequest {
        body,
        prompt_estimate,
        max_tokens,
        wire_ids,
    })
}

/// Wire ids: the same for a call and its result, distinct within the request.
fn wire_ids_of(messages: &[Message]) -> HashMap<String, String> {
    let mut wire_ids: HashMap<String, String> = HashMap::new();
    let mut taken: HashSet<String> = HashSet::new();
    for m in messages {
        if let Message::Assistant { tool_calls, .. } = m {
            for c in tool_calls {
                if wire_ids.contains_key(&c.id) {
                    continue;
                }
                let mut salt = 0;
                let mut w = wire_id(&c.id, salt);
                while taken.contains(&w) {
                    salt += 1;
                    w = wire_id(&c.id, salt);
                }
                taken.insert(w.clone());
                wire_ids.insert(c.id.clone(), w);
            }
        }
    }
    wire_ids
}

/// What shapes the history's messages for one request.
struct Shaper<'a> {
    rules: &'a RequestRules,
    wire_ids: &'a HashMap<String, String>,
    /// The server's reasoning field, when reasoning is replayed.
    reasoning_field: Option<&'a str>,
    /// The calls and results go as plain text (a model without tools).
    calls_as_text: bool,
    /// Results go in the tool role (else as user messages, as text).
    tool_role: bool,
    /// The tool of each call seen so far, for its result as text.
    names: HashMap<&'a str, &'a str>,
}

impl<'a> Shaper<'a> {
    /// The history as the server takes it.
    fn messages(&mut self, messages: &'a [Message]) -> Vec<Value> {
        let mut wire_messages = Vec::new();
        for m in messages {
            let value = match m {
                Message::System { text } => json!({"role": "system", "content": text}),
                Message::User { text, images, .. } if images.is_empty() => {
                    json!({"role": "user", "content": text})
                }
                Message::User { text, images, .. } => {
                    let mut parts = vec![json!({"type": "text", "text": text})];
                    parts.extend(
                        images
                            .iter()
                            .map(|url| json!({"type": "image_url", "image_url": {"url": url}})),
                    );
                    json!({"role": "user", "content": parts})
                }
                Message::Assistant {
                    text,
                    reasoning,
                    tool_calls,
                } => self.assistant(text, reasoning, tool_calls),
                Message::Tool {
                    call_id,
                    text: content,
                } => self.result(call_id, content),
            };
            self.push(&mut wire_messages, value);
        }
        wire_messages
    }

    /// An assistant message: its text, its reasoning when replayed, its calls (as text for a
    /// model without tools).
    fn assistant(
        &mut self,
        text: &str,
        reasoning: &str,
        tool_calls: &'a [harness_core::protocol::ToolCall],
    ) -> Value {
        let mut v = json!({"role": "assistant", "content": text});
        if let Some(field) = self.reasoning_field
            && !reasoning.is_empty()
        {
            v[field] = Value::String(reasoning.to_owned());
        }
        if !tool_calls.is_empty() && self.calls_as_text {
            let mut content = text.to_owned();
            for c in tool_calls {
                self.names.insert(c.id.as_str(), c.name.as_str());
                let wire = self.wire_ids.get(&c.id).cloned().unwrap_or_default();
                let line = fill(
                    &self.rules.call_as_text,
                    &[
                        ("id", &wire),
                        ("name", &c.name),
                        ("arguments", &c.arguments.to_string()),
                    ],
                );
                if !content.is_empty() {
                    content.push('\n');
                }
                content.push_str(&line);
            }
            v["content"] = Value::String(content);
        } else if !tool_calls.is_empty() {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|c| {
                    self.names.insert(c.id.as_str(), c.name.as_str());
                    json!({
                        "id": self.wire_ids.get(&c.id).cloned().unwrap_or_default(),
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments.to_string()},
                    })
                })
                .collect();
            v["tool_calls"] = Value::Array(calls);
        }
        v
    }

    /// A call's result: in the tool role, or as a user message in the result-as-text form.
    fn result(&self, call_id: &str, content: &str) -> Value {
        let wire = self.wire_ids.get(call_id).cloned().unwrap_or_default();
        if self.tool_role {
            json!({"role": "tool", "tool_call_id": wire, "content": content})
        } else {
            let name = self.names.get(call_id).copied().unwrap_or("tool");
            let text = fill(
                &self.rules.result_as_text,
                &[("id", &wire), ("name", name), ("content", content)],
            );
            json!({"role": "user", "content": text})
        }
    }

    /// Adds a message; without a tool role, results become user messages: merge neighbours
    /// again.
    fn push(&self, wire_messages: &mut Vec<Value>, value: Value) {
        match (wire_messages.last_mut(), &value) {
            (Some(Value::Object(last)), Value::Object(new))
                if !self.tool_role
                    && last.get("role") == Some(&json!("user"))
                    && new.get("role") == Some(&json!("user"))
                    && last.get("content").is_some_and(Value::is_string)
                    && new.get("content").is_some_and(Value::is_string) =>
            {
                let joined = format!(
                    "{}\n\n{}",
                    last["content"].as_str().unwrap_or_default(),
                    new["content"].as_str().unwrap_or_default()
                );
                last.insert("content".into(), Value::String(joined));
            }
            _ => wire_messages.push(value),
        }
    }
}

/// The tools offered and the tool choice, unless the model calls none, none are offered or
/// the choice is none (a named choice to a server that cannot name one: that tool alone,
/// required).
fn offer_tools(
    body: &mut Map<String, Value>,
    request: &ChatRequest,
    model: &ModelInfo,
    profile: &ServerProfile,
    rules: &RequestRules,
) {
    let offer_tools =
        model.tools && !request.tools.is_empty() && request.tool_choice != Some(ToolChoice::None);
    if !offer_tools {
        return;
    }
    let mut tools: Vec<&ToolSpec> = request.tools.iter().collect();
    let choice = match &request.tool_choice {
        Some(ToolChoice::Auto) => Some(json!("auto")),
        Some(ToolChoice::Required) => Some(json!("required")),
        Some(ToolChoice::Named(name)) if profile.named_tool_choice => {
            Some(json!({"type": "function", "function": {"name": name}}))
        }
        Some(ToolChoice::Named(name)) => {
            tools.retain(|t| &t.name == name);
            Some(json!("required"))
        }
        Some(ToolChoice::None) | None => None,
    };
    let tools: Vec<Value> = if tools.len() == request.tools.len() {
        shaped_tools(&request.tools, &rules.schema_keys)
            .as_ref()
            .clone()
    } else {
        tools
            .iter()
            .map(|t| tool_json(t, &rules.schema_keys))
            .collect()
    };
    body.insert("tools".into(), Value::Array(tools));
    if let Some(choice) = choice {
        body.insert("tool_choice".into(), choice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_ids_are_nine_alphanumerics() {
        for id in ["", "call_1", "edit:22", "a very long id with spaces"] {
            let w = wire_id(id, 0);
            assert_eq!(w.len(), 9);
            assert!(w.chars().all(|c| c.is_ascii_alphanumeric()));
            assert_eq!(w, wire_id(id, 0));
        }
        assert_ne!(wire_id("x", 0), wire_id("x", 1));
    }

    #[test]
    fn the_estimate_counts_the_characters_of_the_compact_body() {
        let body = json!({"messages": [{"role": "user", "content": "héllo — 日本 \"q\"\n🦀"}],
            "tools": [{"name": "é", "n": 1.5}], "stream": true});
        let chars = body.to_string().chars().count() as u64;
        assert_eq!(estimate_tokens(&body, 1), chars);
        assert_eq!(estimate_tokens(&body, 4), chars.div_ceil(4));
        assert_eq!(estimate_tokens(&body, 0), chars);
    }

    #[test]
    fn a_set_of_tools_is_shaped_once_for_each_set_of_schema_keys() {
        let set: Arc<[ToolSpec]> = vec![ToolSpec {
            name: "fetch".into(),
            description: "Fetches a page.".into(),
            parameters: json!({"type": "object", "properties": {
                "url": {"type": ["string", "null"], "format": "uri"}}}),
        }]
        .into();
        let keys = |k: &[&str]| -> Vec<String> { k.iter().map(|s| (*s).to_owned()).collect() };
        let (rich, plain) = (
            keys(&["type", "properties", "format"]),
            keys(&["type", "properties"]),
        );
        let a = shaped_tools(&set, &rich);
        let b = shaped_tools(&set, &plain);
        assert!(Arc::ptr_eq(&a, &shaped_tools(&set, &rich)));
        let url = |w: &Arc<Vec<Value>>| w[0]["function"]["parameters"]["properties"]["url"].clone();
        assert_eq!(url(&a), json!({"type": "string", "format": "uri"}));
        assert_eq!(url(&b), json!({"type": "string"}));
        // An equal set made anew is shaped alike; each is what shaping one tool gives.
        let again: Arc<[ToolSpec]> = set.to_vec().into();
        assert_eq!(*shaped_tools(&again, &rich), *a);
        assert_eq!(a[0], tool_json(&set[0], &rich));
        // Equal sets come back from `shared_tools` as one, another set as itself.
        let one = shared_tools(set.to_vec());
        assert!(Arc::ptr_eq(&one, &shared_tools(set.to_vec())));
        assert!(!Arc::ptr_eq(&one, &shared_tools(Vec::new())));
    }

    #[test]
    fn fill_replaces_each_place_once() {
        assert_eq!(
            fill(
                "[result of call {id} ({name})]\n{content}",
                &[
                    ("id", "A1"),
                    ("name", "{content}"),
                    ("content", "x {id} {y}")
                ]
            ),
            "[result of call A1 ({content})]\nx {id} {y}"
        );
        assert_eq!(fill("{a} {b", &[("a", "1")]), "1 {b");
    }

    #[test]
    fn schema_subset() {
        let keys: Vec<String> = [
            "type",
            "properties",
            "required",
            "items",
            "enum",
            "description",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s = json!({"$schema": "x", "type": "object", "additionalProperties": false,
            "properties": {"a": {"type": ["string", "null"], "default": "q"},
                           "b": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 1}], "description": "B"},
                           "c": {"const": "x"}},
            "required": ["a"]});
        assert_eq!(
            plain_schema(&s, &keys),
            json!({"type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer", "description": "B"}, "c": {"enum": ["x"]}},
            "required": ["a"]})
        );
    }
}
