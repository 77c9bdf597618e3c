//! The forge's REST API for `pr`, `merge` and `release` (issue 32): Forgejo and Gitea share
//! `/api/v1`, so one client serves both. The token (read from the server's environment when
//! the call is made) goes in `Authorization: token …` and nowhere else; an HTTP error becomes
//! one of the fixed texts of [`refusal`].

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A pull request as the forge answers it (the fields the verbs use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    /// Its number.
    pub number: u64,
    /// Its title.
    #[serde(default)]
    pub title: String,
    /// Its page.
    #[serde(default)]
    pub html_url: String,
    /// `open` or `closed`.
    #[serde(default)]
    pub state: String,
    /// Whether it was merged.
    #[serde(default)]
    pub merged: bool,
    /// Whether the forge can merge it now.
    #[serde(default)]
    pub mergeable: bool,
    /// The head branch and its commit.
    pub head: Branch,
    /// The base branch.
    pub base: Branch,
}

/// A pull request's branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Branch {
    /// The branch's name.
    #[serde(rename = "ref")]
    pub name: String,
    /// Its commit.
    #[serde(default)]
    pub sha: String,
}

/// A release as the forge answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// Its id.
    pub id: u64,
    /// Its tag.
    pub tag_name: String,
    /// Its title.
    #[serde(default)]
    pub name: String,
    /// Its page.
    #[serde(default)]
    pub html_url: String,
    /// Unpublished.
    #[serde(default)]
    pub draft: bool,
    /// Marked not ready for general use.
    #[serde(default)]
    pub prerelease: bool,
}

/// One forge repository's API.
pub struct ForgeApi {
    http: reqwest::Client,
    /// `https://forge.example/api/v1/repos/OWNER/NAME`.
    repo_url: String,
    token: Option<String>,
}

impl ForgeApi {
    /// The API of `repo` (`OWNER/NAME`) on the forge at `base` (`https://forge.example`).
    pub fn new(base: &str, repo: &str, token: Option<String>) -> Result<ForgeApi, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .map_err(|e| format!("the forge's HTTP client: {e}"))?;
        Ok(ForgeApi {
            http,
            repo_url: format!("{}/api/v1/repos/{repo}", base.trim_end_matches('/')),
            token,
        })
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.repo_url))
            .header("Accept", "application/json");
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("token {t}"));
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .await
            // reqwest's error names the URL, which never holds the token
            .map_err(|e| format!("the forge did not answer: {}", e.without_url()))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok((status, value))
    }

    async fn expect<T: serde::de::DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        what: What,
    ) -> Result<T, String> {
        let (status, value) = self.send(method, path, body).await?;
        if !(200..300).contains(&status) {
            return Err(refusal(status, &value, what));
        }
        serde_json::from_value(value)
            .map_err(|e| format!("the forge's answer is not what Forgejo/Gitea send: {e}"))
    }

    /// The repository's default branch.
    pub async fn default_branch(&self) -> Result<String, String> {
        let v: Value = self
            .expect(reqwest::Method::GET, "", None, What::Repository)
            .await?;
        v.get("default_branch")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| "the forge did not say the repository's default branch".to_owned())
    }

    /// Opens a pull request from `head` into `base`.
    pub async fn open_pr(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, String> {
        self.expect(
            reqwest::Method::POST,
            "/pulls",
            Some(json!({"head": head, "base": base, "title": title, "body": body})),
            What::PullRequest,
        )
        .await
    }

    /// Reads pull request `number`.
    pub async fn get_pr(&self, number: u64) -> Result<PullRequest, String> {
        self.expect(
            reqwest::Method::GET,
            &format!("/pulls/{number}"),
            None,
            What::PullRequest,
        )
        .await
    }

    /// Merges pull request `number` in `style`, only while its head is still `head_sha`.
    pub async fn merge_pr(
        &self,
        number: u64,
        style: &str,
        head_sha: &str,
        delete_branch: bool,
    ) -> Result<(), String> {
        let (status, value) = self
            .send(
                reqwest::Method::POST,
                &format!("/pulls/{number}/merge"),
                Some(json!({
                    "Do": style,
                    "head_commit_id": head_sha,
                    "delete_branch_after_merge": delete_branch,
                })),
            )
            .await?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(refusal(status, &value, What::PullRequest))
        }
    }

    /// Publishes a release of `tag` (made at `target` when it does not exist).
    pub async fn create_release(
        &self,
        tag: &str,
        target: &str,
        title: &str,
        notes: &str,
        (draft, prerelease): (bool, bool),
    ) -> Result<Release, String> {
        self.expect(
            reqwest::Method::POST,
            "/releases",
            Some(json!({
                "tag_name": tag,
                "target_commitish": target,
                "name": title,
                "body": notes,
                "draft": draft,
                "prerelease": prerelease,
            })),
            What::Release,
        )
        .await
    }
}

/// What a call was about, for the 404 text.
#[derive(Debug, Clone, Copy)]
pub enum What {
    /// The repository itself.
    Repository,
    /// A pull request.
    PullRequest,
    /// A release.
    Release,
}

/// The fixed text of an HTTP refusal (`message` of the forge's body said after 405 and 409).
pub fn refusal(status: u16, body: &Value, what: What) -> String {
    let said = body
        .get("message")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty());
    let because = said
        .map(|m| format!(" The forge says: {m}"))
        .unwrap_or_default();
    match status {
        401 | 403 => "Refused by the forge: the token is missing, or lacks the scope write:repository for this repository.".to_owned(),
        404 => match what {
            What::Repository => "Not found on the forge: the repository (check the mount's api and repo).".to_owned(),
            What::PullRequest => "Not found on the forge: no such pull request in this repository.".to_owned(),
            What::Release => "Not found on the forge: the repository or the release's tag.".to_owned(),
        },
        405 => format!("Not mergeable: the forge refuses to merge this pull request now (conflicts, failing checks, or already merged).{because}"),
        409 => format!("Not merged: the head branch moved since it was confirmed, or the merge conflicts; read the pull request again and confirm its new head.{because}"),
        422 => format!("Refused by the forge: the request is not valid.{because}"),
        423 => "Refused by the forge: the repository is archived.".to_owned(),
        s => format!("The forge answered HTTP {s}.{because}"),
    }
}
