//! The `memory` tool over a LLeMbas instance's HTTP API (`spec/acp.md` §12): the requests sent
//! from this machine. The state, what each status means and the answers the model reads are
//! `harness_agent::memory_api`'s; this module is its [`Transport`] over HTTP.

use std::sync::OnceLock;
use std::time::Duration;

use harness_agent::BoxFuture;
use harness_agent::memory_api::{Api, Transport};
use serde_json::Value;

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

/// Requests over HTTP from this machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Http;

impl Transport for Http {
    fn send<'a>(
        &'a self,
        api: &'a Api,
        body: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(u16, Vec<u8>), String>> {
        Box::pin(async move {
            let client = client()?;
            let url = api.memory_url();
            let req = match body {
                Some(b) => client
                    .post(&url)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(b.to_string()),
                None => client.get(&url),
            };
            let resp =
                req.bearer_auth(&api.token).send().await.map_err(|e| {
                    format!("Memory: cannot reach the LLeMbas instance at {url}: {e}")
                })?;
            let status = resp.status().as_u16();
            let bytes = resp.bytes().await.map_err(|e| {
                format!("Memory: the LLeMbas instance's answer from {url} was cut off: {e}")
            })?;
            Ok((status, bytes.to_vec()))
        })
    }
}
