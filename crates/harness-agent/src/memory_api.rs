//! The `memory` tool over a LLeMbas instance's HTTP API (`spec/acp.md` §12, capability
//! `memory`), both ends of its rules: the state an instance answers ([`State`], written by the
//! server, read by a client), what a status means to the model ([`answer`]), and a call run
//! through any [`Transport`] ([`call`], [`entries`]). `GET {url}/memory` gives the state (for
//! `view` and the prompt's entries), `POST {url}/memory` with `{"changes": [...]}` applies one
//! change or a batch. The instance keeps one store, so a call's `target` is dropped (the tool
//! narrowed as the instance's own). The answer is drawn by harness-fs's [`Memory`] as the local
//! tool draws its own. The token is sent, never written.
//!
//! The HTTP itself is the front end's: this crate does no network I/O.

use harness_fs::memory::{Memory, Target};
use serde_json::{Value, json};

use crate::seams::BoxFuture;

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
    /// The API of `_meta.lembas.api` (`{"url", "token"}`), if it is well formed (an `http` or
    /// `https` URL, a token).
    pub fn from_meta(api: &Value) -> Option<Api> {
        let url = api.get("url")?.as_str()?.trim_end_matches('/').to_owned();
        let token = api.get("token")?.as_str()?.to_owned();
        (url.starts_with("http://") || url.starts_with("https://")).then_some(Api { url, token })
    }

    /// The memory endpoint: `{url}/memory`.
    pub fn memory_url(&self) -> String {
        format!("{}/memory", self.url)
    }
}

/// The answer to an expired token (HTTP 401).
pub const UNAVAILABLE: &str =
    "Memory is unavailable in this session: the LLeMbas instance no longer accepts its token.";

/// An instance's memory state: `{"target", "entries": [{"id", "text"}], "chars", "limit"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// The store the entries are of.
    pub target: Target,
    /// The entries, `(id, text)`, in order.
    pub entries: Vec<(String, String)>,
    /// The characters in use, when said.
    pub chars: Option<usize>,
    /// The store's limit in characters, when said.
    pub limit: Option<usize>,
}

impl State {
    /// The state an instance answers for `target` of `m`.
    pub fn of(m: &Memory, target: Target) -> State {
        State {
            target,
            entries: m
                .entries(target)
                .into_iter()
                .map(|(id, text)| (id.to_owned(), text.to_owned()))
                .collect(),
            chars: Some(m.usage(target)),
            limit: Some(m.limit(target)),
        }
    }

    /// The state as the API's JSON body.
    pub fn to_json(&self) -> Value {
        let entries: Vec<Value> = self
            .entries
            .iter()
            .map(|(id, text)| json!({"id": id, "text": text}))
            .collect();
        json!({
            "target": self.target.as_str(),
            "entries": entries,
            "chars": self.chars,
            "limit": self.limit,
        })
    }

    /// A state read from the API's JSON body (`None`: not a memory state).
    pub fn parse(body: &Value) -> Option<State> {
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
        let number = |k: &str| {
            body.get(k)
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
        };
        Some(State {
            target,
            entries,
            chars: number("chars"),
            limit: number("limit"),
        })
    }

    /// The state as harness-fs's [`Memory`], so it is shown as the local tool shows it
    /// (`None` when its ids are not of the form `m<N>`).
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

    /// The state as the model reads it (the local tool's `view`).
    pub fn view(&self) -> String {
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

/// What an instance's answer to `{url}` means: the state (200), or the tool's answer to a
/// failure — [`UNAVAILABLE`] for 401, the instance's own refusal for 409, the status named for
/// anything else.
pub fn answer(url: &str, status: u16, body: &[u8]) -> Result<State, String> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    match status {
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

/// How a front end reaches an instance: one request to [`Api::memory_url`] with the bearer
/// token, `GET` without a body, `POST` of JSON with one; the status and the body, or the tool's
/// answer when the instance could not be reached or its answer was cut off.
pub trait Transport: Send + Sync {
    /// Sends one request.
    fn send<'a>(
        &'a self,
        api: &'a Api,
        body: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(u16, Vec<u8>), String>>;
}

async fn state(t: &dyn Transport, api: &Api, body: Option<&Value>) -> Result<State, String> {
    let (status, bytes) = t.send(api, body).await?;
    answer(&api.memory_url(), status, &bytes)
}

/// Runs a `memory` call against the instance: the text the model reads and whether it failed.
pub async fn call(t: &dyn Transport, api: &Api, args: &Value) -> (String, bool) {
    let body = match harness_fs::memory::api_changes(args) {
        Ok(b) => b,
        Err(e) => return (e.to_string(), true),
    };
    match state(t, api, body.as_ref()).await {
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
pub async fn entries(t: &dyn Transport, api: &Api) -> String {
    match state(t, api, None).await {
        Ok(state) => harness_core::prompt::memory_entries(
            state
                .entries
                .iter()
                .map(|(id, text)| (id.as_str(), text.as_str())),
        ),
        Err(_) => String::new(),
    }
}
