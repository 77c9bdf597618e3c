//! The `memory` tool over a LLeMbas instance's HTTP API (`spec/acp.md` §12, capability
//! `memory`): the records are the instance's, not a file on this device. `GET {url}/memory`
//! gives the state (for `view` and the prompt's entries), `POST {url}/memory` with
//! `{"changes": [...]}` applies one change or a batch. The instance keeps one store, so a
//! call's `target` is dropped (the tool narrowed as the instance's own). The answer is drawn by
//! harness-fs's [`Memory`] as the local tool draws its own. The token is sent, never written.

use std::sync::OnceLock;
use std::time::Duration;

use harness_fs::memory::{Memory, Target};
use serde_json::{Value, json};

/// What a session was handed in `_meta.lembas.api`.
#[derive(Clone)]
pub struct Api {
    /// The base URL (`…/api/lembas/v1`), without a trailing slash.
    pub url: String,
    /// The bearer token scoped to the chat.
    pub token: String,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").field("url", &self.url).finish()
    }
}

impl Api {
    /// The API of `_meta.lembas.api` (`{"url", "token"}`), if it is well formed.
    pub fn from_meta(api: &Value) -> Option<Api> {
        let url = api.get("url")?.as_str()?.trim_end_matches('/').to_owned();
        let token = api.get("token")?.as_str()?.to_owned();
        (url.starts_with("http://") || url.starts_with("https://")).then_some(Api { url, token })
    }
}

/// The answer to an expired token (HTTP 401).
pub const UNAVAILABLE: &str =
    "Memory is unavailable in this session: the LLeMbas instance no longer accepts its token.";

fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .connect_timeout(Duration::from_secs(10))
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("llembas/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| format!("Memory: cannot build the HTTP client: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The instance's memory state: `{"target", "entries": [{"id", "text"}], "chars", "limit"}`.
struct State {
    target: Target,
    entries: Vec<(String, String)>,
    limit: Option<usize>,
}

impl State {
    fn parse(body: &Value) -> Option<State> {
        let target = match body.get("target").and_then(Value::as_str) {
            Some("user") => Target::User,
            _ => Target::Memory,
        };
        let entries = body
            .get("entries")?
            .as_array()?
            .iter()
            .map(|e| {
                Some((
                    e.get("id")?.as_str()?.to_owned(),
                    e.get("text")?.as_str()?.to_owned(),
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        let limit = body
            .get("limit")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok());
        Some(State {
            target,
            entries,
            limit,
        })
    }

    /// The state as harness-fs's [`Memory`], so it is shown as the local tool shows it.
    fn memory(&self) -> Option<Memory> {
        let number = |id: &str| id.strip_prefix('m').and_then(|d| d.parse::<u64>().ok());
        let next = self
            .entries
            .iter()
            .map(|(id, _)| number(id))
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()
            .unwrap_or(0)
            + 1;
        let list: Vec<Value> = self
            .entries
            .iter()
            .map(|(id, text)| json!({"id": id, "text": text}))
            .collect();
        let (memory, user) = match self.target {
            Target::User => (Vec::new(), list),
            Target::Memory => (list, Vec::new()),
        };
        let file = json!({"version": 1, "next": next, "memory": memory, "user": user});
        let m = Memory::from_json("the instance's memory", file.to_string().as_bytes()).ok()?;
        Some(match self.limit {
            Some(l) => m.with_limit(self.target, l),
            None => m,
        })
    }

    fn view(&self) -> String {
        match self.memory() {
            Some(m) => m.view(self.target),
            None => {
                // Ids of another form than ours: the same lines, drawn here.
                let mut out = format!("{}: {} entries", self.target.as_str(), self.entries.len());
                for (id, text) in &self.entries {
                    out.push_str(&format!("\n- [{id}] {text}"));
                }
                out
            }
        }
    }
}

/// One request's outcome: the state, or the tool's answer to a failure.
async fn send(api: &Api, body: Option<&Value>) -> Result<State, String> {
    let client = client()?;
    let url = format!("{}/memory", api.url);
    let req = match body {
        Some(b) => client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(b.to_string()),
        None => client.get(&url),
    };
    let resp = req
        .bearer_auth(&api.token)
        .send()
        .await
        .map_err(|e| format!("Memory: cannot reach the LLeMbas instance at {url}: {e}"))?;
    let status = resp.status();
    let bytes = resp.bytes().await.map_err(|e| {
        format!("Memory: the LLeMbas instance's answer from {url} was cut off: {e}")
    })?;
    let json: Option<Value> = serde_json::from_slice(&bytes).ok();
    match status.as_u16() {
        200 => json.as_ref().and_then(State::parse).ok_or_else(|| {
            format!(
                "Memory: the LLeMbas instance answered {url} with a body that is not a memory state"
            )
        }),
        401 => Err(UNAVAILABLE.to_owned()),
        409 => Err(json
            .as_ref()
            .and_then(|j| j.get("error"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| {
                format!("Memory: the LLeMbas instance refused the change (HTTP 409 from {url})")
            })),
        _ => Err(format!(
            "Memory: the LLeMbas instance answered HTTP {status} to {url}"
        )),
    }
}

/// Runs a `memory` call against the instance: the text the model reads and whether it failed.
pub async fn call(api: &Api, args: &Value) -> (String, bool) {
    let body = match harness_fs::memory::api_changes(args) {
        Ok(b) => b,
        Err(e) => return (e.to_string(), true),
    };
    match send(api, body.as_ref()).await {
        Ok(state) => match &body {
            None => (state.view(), false),
            Some(b) => (
                format!(
                    "{}.\n\n{}",
                    harness_fs::memory::api_said(b, &state.entries),
                    state.view()
                ),
                false,
            ),
        },
        Err(e) => (e, true),
    }
}

/// The prompt's memory entries, from the instance (none when it cannot be read).
pub async fn entries(api: &Api) -> String {
    match send(api, None).await {
        Ok(state) => harness_core::prompt::memory_entries(
            state
                .entries
                .iter()
                .map(|(id, text)| (id.as_str(), text.as_str())),
        ),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_become_changes_without_target() {
        use harness_fs::memory::{api_changes, api_said};
        assert_eq!(api_changes(&json!({"action": "view"})).unwrap(), None);
        assert_eq!(
            api_changes(&json!({"action": "add", "text": " Tabs. ", "target": "user"})).unwrap(),
            Some(json!({"changes": [{"action": "add", "text": "Tabs."}]}))
        );
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
        assert_eq!(
            Api::from_meta(&json!({"url": "http://h/v1/", "token": "t"}))
                .unwrap()
                .url,
            "http://h/v1"
        );
    }
}
