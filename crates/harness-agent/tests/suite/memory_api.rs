//! The `memory` tool over an instance's API: an instance in the test keeps a real
//! [`Memory`] and answers as the server does (the state of `State::of`, 409 with its refusal),
//! and the client's answers read as the local tool's.

use std::sync::Mutex;

use harness_agent::BoxFuture;
use harness_agent::memory_api::{self, Api, State, Transport, UNAVAILABLE};
use harness_fs::memory::{Memory, Target, api_changes, api_said};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// An instance: its one store, and every request it was sent.
struct Instance {
    memory: Mutex<Memory>,
    seen: Mutex<Vec<Option<Value>>>,
}

impl Instance {
    fn new() -> Instance {
        Instance {
            memory: Mutex::new(Memory::new()),
            seen: Mutex::new(Vec::new()),
        }
    }
}

impl Transport for Instance {
    fn send<'a>(
        &'a self,
        _api: &'a Api,
        body: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(u16, Vec<u8>), String>> {
        Box::pin(async move {
            self.seen.lock().unwrap().push(body.cloned());
            let mut m = self.memory.lock().unwrap();
            if let Some(b) = body
                && let Err(e) = m.apply(b)
            {
                return Ok((
                    409,
                    json!({"error": e.to_string()}).to_string().into_bytes(),
                ));
            }
            let state = State::of(&m, Target::Memory).to_json();
            Ok((200, state.to_string().into_bytes()))
        })
    }
}

/// An instance that answers every request with one status and body.
struct Fixed(u16, &'static str);

impl Transport for Fixed {
    fn send<'a>(
        &'a self,
        _api: &'a Api,
        _body: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(u16, Vec<u8>), String>> {
        Box::pin(async move { Ok((self.0, self.1.as_bytes().to_vec())) })
    }
}

fn api() -> Api {
    Api::from_meta(&json!({"url": "http://h/api/lembas/v1/", "token": "lsk_s_x"})).unwrap()
}

#[tokio::test]
async fn calls_through_the_api_read_as_the_local_tool() {
    let instance = Instance::new();
    let (text, failed) = memory_api::call(
        &instance,
        &api(),
        &json!({"action": "add", "text": " Tabs. ", "target": "user"}),
    )
    .await;
    assert!(!failed, "{text}");
    // The instance got the change without its target.
    assert_eq!(
        instance.seen.lock().unwrap()[0],
        Some(json!({"changes": [{"action": "add", "text": "Tabs."}]}))
    );
    let local = instance.memory.lock().unwrap().clone();
    assert_eq!(text, format!("Added m1.\n\n{}", local.view(Target::Memory)));
    let (view, failed) = memory_api::call(&instance, &api(), &json!({"action": "view"})).await;
    assert!(!failed);
    assert_eq!(view, local.view(Target::Memory));
    assert_eq!(memory_api::entries(&instance, &api()).await, "- [m1] Tabs.");
    // A refusal of the instance is the tool's answer.
    let (text, failed) =
        memory_api::call(&instance, &api(), &json!({"action": "remove", "id": "m9"})).await;
    assert!(failed);
    let mut again = local.clone();
    assert_eq!(
        text,
        again
            .apply(&json!({"action": "remove", "id": "m9"}))
            .unwrap_err()
            .to_string()
    );
}

#[tokio::test]
async fn each_status_has_its_answer() {
    let api = api();
    let (text, failed) = memory_api::call(&Fixed(401, ""), &api, &json!({"action": "view"})).await;
    assert_eq!((text.as_str(), failed), (UNAVAILABLE, true));
    let (text, _) = memory_api::call(&Fixed(409, "{}"), &api, &json!({"action": "view"})).await;
    assert_eq!(
        text,
        "Memory: the LLeMbas instance refused the change (HTTP 409 from http://h/api/lembas/v1/memory)"
    );
    let (text, _) = memory_api::call(&Fixed(200, "[]"), &api, &json!({"action": "view"})).await;
    assert_eq!(
        text,
        "Memory: the LLeMbas instance answered http://h/api/lembas/v1/memory with a body that is not a memory state"
    );
    let (text, _) = memory_api::call(&Fixed(503, ""), &api, &json!({"action": "view"})).await;
    assert_eq!(
        text,
        "Memory: the LLeMbas instance answered HTTP 503 to http://h/api/lembas/v1/memory"
    );
    // The prompt's entries are none when the instance cannot be read.
    assert_eq!(memory_api::entries(&Fixed(401, ""), &api).await, "");
    // Ids of another form than the tool's are drawn as lines.
    let body = r#"{"target": "memory", "entries": [{"id": "x", "text": "Tabs."}]}"#;
    let (text, failed) =
        memory_api::call(&Fixed(200, body), &api, &json!({"action": "view"})).await;
    assert_eq!(
        (text.as_str(), failed),
        ("memory: 1 entries\n- [x] Tabs.", false)
    );
}

#[test]
fn the_state_reads_back_as_written() {
    let mut m = Memory::new();
    m.apply(&json!({"action": "add", "text": "Tabs."})).unwrap();
    let state = State::of(&m, Target::Memory);
    assert_eq!(
        state.to_json(),
        json!({"target": "memory", "entries": [{"id": "m1", "text": "Tabs."}], "chars": 5, "limit": m.limit(Target::Memory)})
    );
    assert_eq!(State::parse(&state.to_json()), Some(state.clone()));
    assert_eq!(state.view(), m.view(Target::Memory));
    assert_eq!(State::parse(&json!({"entries": [{"id": 1}]})), None);
}

#[test]
fn arguments_become_changes_without_target() {
    assert_eq!(api_changes(&json!({"action": "view"})).unwrap(), None);
    let body = api_changes(&json!({"changes": [
        {"action": "remove", "id": "m2", "target": "memory"},
        {"action": "add", "text": "Tabs."}
    ]}))
    .unwrap()
    .unwrap();
    assert_eq!(
        body,
        json!({"changes": [{"action": "remove", "id": "m2"}, {"action": "add", "text": "Tabs."}]})
    );
    assert_eq!(
        api_said(&body, &[("m7".into(), "Tabs.".into())]),
        "Removed m2, added m7"
    );
    assert_eq!(
        api_changes(&json!({})).unwrap_err().to_string(),
        "Memory: give action (view, add, replace or remove) or changes."
    );
    assert!(Api::from_meta(&json!({"url": "ftp://x", "token": "t"})).is_none());
    assert!(Api::from_meta(&json!({"url": "http://x"})).is_none());
    assert_eq!(api().url, "http://h/api/lembas/v1");
    assert_eq!(api().memory_url(), "http://h/api/lembas/v1/memory");
    assert!(
        !format!("{:?}", api()).contains("lsk_s_x"),
        "the token is never written"
    );
}
