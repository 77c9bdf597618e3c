//! The forge verbs of a chat (issue 32): `commit`, `branch` and `tag` over git for any remote,
//! `pr`, `merge` and `release` through the forge's API ([`crate::forge`]), on the mounts of the
//! chat's view ([`crate::mounts`]); and the staging of every change a file tool makes inside a
//! mount (`git add`).
//!
//! Every verb needs level `commit` at the repository (the view's `commit` check, the spec's
//! texts: `Nothing to commit`, `Not committed`, `Read-only`). `pr`, `merge` and `release` on
//! a mount with no forge answer the tool's `unavailable` text word for word. `merge`, `tag` and
//! `release` are `confirm: always`: their question states the facts the call will use
//! ([`ChatForge::subject`]), and the call runs with exactly those (the head commit a merge
//! passes as `head_commit_id`, the commit a tag or release marks).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use harness_core::protocol::ToolCall;
use harness_fs::{VPath, View};
use harness_loop::session::ToolOutcome;
use serde_json::Value;

use crate::forge::ForgeApi;
use crate::git::{self, Who};
use crate::mounts::{ForgeKind, Mount};

/// The verbs' names.
pub const VERBS: &[&str] = &["commit", "branch", "pr", "merge", "tag", "release"];

/// The committer of every commit a chat makes (`spec/filesystem.md`, *Forge mounts*).
pub fn llembas() -> Who {
    Who {
        name: "llembas".into(),
        email: "llembas@llembas.invalid".into(),
    }
}

/// A person as the author of a commit or tagger of a tag.
pub fn person(username: &str) -> Who {
    Who {
        name: username.to_owned(),
        email: format!("{username}@llembas.invalid"),
    }
}

/// What a confirmed call will use, fixed when the person was asked.
#[derive(Debug, Clone)]
enum Confirmed {
    /// The pull request's head commit.
    Merge { sha: String },
    /// The commit a tag or release marks.
    Target { sha: String },
    /// The facts could not be read: the call does not run.
    Unread(String),
}

/// The forge verbs of one chat.
pub struct ChatForge {
    mounts: Vec<Mount>,
    tree: PathBuf,
    username: String,
    /// The chat's id, once the session made it (`llembas/CHAT`).
    chat: Arc<OnceLock<String>>,
    /// The branch each mount works on for this chat, once `branch` switched it.
    work: Mutex<HashMap<String, String>>,
    /// What each confirmed call was asked with, by call id.
    confirmed: Mutex<HashMap<String, Confirmed>>,
    /// The paths this chat's file tools staged, by mount root, not yet committed: a mount's
    /// working tree is shared, so a `commit` without `paths` commits these and no one else's.
    staged: Mutex<HashMap<String, BTreeSet<String>>>,
}

fn arg<'a>(call: &'a ToolCall, k: &str) -> Option<&'a str> {
    call.arguments
        .get(k)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn flag(call: &ToolCall, k: &str) -> Option<bool> {
    call.arguments.get(k).and_then(Value::as_bool)
}

/// The tool's `unavailable` text, word for word.
fn unavailable(tool: &str) -> String {
    harness_spec::Spec::embedded()
        .tool(tool)
        .and_then(|t| t.unavailable.clone())
        .unwrap_or_default()
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

impl ChatForge {
    /// The verbs over `mounts` (those configured) in the tree at `tree`, for `username`'s chat.
    pub fn new(
        mounts: Vec<Mount>,
        tree: PathBuf,
        username: &str,
        chat: Arc<OnceLock<String>>,
    ) -> ChatForge {
        ChatForge {
            mounts,
            tree,
            username: username.to_owned(),
            chat,
            work: Mutex::default(),
            confirmed: Mutex::default(),
            staged: Mutex::default(),
        }
    }

    /// Whether `view` shows a mount (the requirement `forge` holds).
    pub fn holds(&self, view: &View) -> bool {
        self.mounts
            .iter()
            .any(|m| view.access().visible(&VPath::parse(&m.path)))
    }

    fn mount(&self, path: &VPath) -> Option<&Mount> {
        self.mounts.iter().find(|m| m.path == path.as_str())
    }

    /// The branch `mount` works on for this chat.
    fn work_branch(&self, mount: &Mount) -> String {
        if let Some(b) = self
            .work
            .lock()
            .ok()
            .and_then(|w| w.get(&mount.path).cloned())
        {
            return b;
        }
        match &mount.work_branch {
            Some(b) => b.clone(),
            None => format!("llembas/{}", self.chat.get().map_or("chat", String::as_str)),
        }
    }

    /// The mount a call is about (`repo`, default the current directory), once the view says
    /// the chat may commit there.
    fn target(&self, view: &View, call: &ToolCall) -> Result<(VPath, &Mount), String> {
        let asked = arg(call, "repo").unwrap_or(".");
        view.commit(asked).map_err(|e| e.to_string())?;
        let p = view.resolve(asked);
        let root = view
            .access()
            .mount_of(&p)
            .cloned()
            .ok_or_else(|| harness_fs::Error::NothingToCommit(p.clone()).to_string())?;
        let mount = self
            .mount(&root)
            .ok_or_else(|| format!("{root} is no longer mounted"))?;
        Ok((root, mount))
    }

    fn dir(&self, mount: &Mount) -> PathBuf {
        crate::mounts::dir_of(&self.tree, &mount.path)
    }

    fn api(&self, tool: &str, mount: &Mount) -> Result<ForgeApi, String> {
        if mount.forge == ForgeKind::None {
            return Err(unavailable(tool));
        }
        let base = mount.api.as_deref().ok_or_else(|| unavailable(tool))?;
        let repo = mount.forge_repo().ok_or_else(|| unavailable(tool))?;
        ForgeApi::new(base, &repo, mount.token())
    }

    /// Runs git work on the blocking pool, holding the mount's lock.
    async fn blocking<T: Send + 'static>(
        &self,
        mount: &Mount,
        work: impl FnOnce(PathBuf) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let dir = self.dir(mount);
        let lock = git::lock(&dir);
        tokio::task::spawn_blocking(move || {
            let _held = lock.lock().map_err(|_| "the mount's lock".to_owned())?;
            work(dir)
        })
        .await
        .map_err(|e| format!("git: {e}"))?
    }

    /// Stages the paths a file tool changed inside mounts (`git add -A` of each).
    pub async fn stage_changed(&self, view: &View, paths: &[String]) -> Result<(), String> {
        let mut by_mount: HashMap<String, Vec<String>> = HashMap::new();
        for raw in paths {
            let p = view.resolve(raw);
            let Some(root) = view.access().mount_of(&p) else {
                continue;
            };
            if let Some(rel) = p.relative_to(root).filter(|r| !r.is_empty()) {
                by_mount
                    .entry(root.as_str().to_owned())
                    .or_default()
                    .push(rel.to_owned());
            }
        }
        for (root, rels) in by_mount {
            let Some(mount) = self.mount(&VPath::parse(&root)) else {
                continue;
            };
            let mine = rels.clone();
            self.blocking(mount, move |dir| git::stage(&dir, &rels))
                .await?;
            self.staged
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(root)
                .or_default()
                .extend(mine);
        }
        Ok(())
    }

    /// Why `call` cannot run, said before the person is asked about it: the view's `commit`
    /// check, and a verb of the forge's API on a mount with no forge (its `unavailable` text).
    pub fn precheck(&self, view: &View, call: &ToolCall) -> Option<String> {
        let (_, mount) = match self.target(view, call) {
            Ok(t) => t,
            Err(e) => return Some(e),
        };
        if matches!(call.name.as_str(), "pr" | "merge" | "release") {
            return self.api(&call.name, mount).err();
        }
        None
    }

    /// What a `confirm: always` call will do, stated exactly for the person's question (and
    /// kept, so the call runs with what was stated). `None`: not a verb with such facts.
    pub async fn subject(&self, view: &View, call: &ToolCall) -> Option<String> {
        if !matches!(call.name.as_str(), "merge" | "tag" | "release") {
            return None;
        }
        let (text, confirmed) = match self.facts(view, call).await {
            Ok(pair) => pair,
            Err(e) => (
                format!("{} (it cannot run: {e})", call.name),
                Confirmed::Unread(e),
            ),
        };
        if let Ok(mut c) = self.confirmed.lock() {
            c.insert(call.id.clone(), confirmed);
        }
        Some(text)
    }

    async fn facts(&self, view: &View, call: &ToolCall) -> Result<(String, Confirmed), String> {
        let (root, mount) = self.target(view, call)?;
        match call.name.as_str() {
            "merge" => {
                let number = call
                    .arguments
                    .get("number")
                    .and_then(Value::as_u64)
                    .ok_or("merge: `number` is missing")?;
                let api = self.api("merge", mount)?;
                let pr = api.get_pr(number).await?;
                let style = arg(call, "style").unwrap_or("merge");
                let delete = if flag(call, "delete_branch") == Some(true) {
                    ", then delete the head branch"
                } else {
                    ""
                };
                Ok((
                    format!(
                        "merge pull request #{} \"{}\" of {root}: head {} at {} into base {}, style {style}{delete}",
                        pr.number, pr.title, pr.head.name, pr.head.sha, pr.base.name
                    ),
                    Confirmed::Merge { sha: pr.head.sha },
                ))
            }
            "tag" => {
                let name = arg(call, "name")
                    .ok_or("tag: `name` is missing")?
                    .to_owned();
                let target = arg(call, "target").map(str::to_owned);
                let sha = self
                    .blocking(mount, move |dir| git::target_sha(&dir, target.as_deref()))
                    .await?;
                let kind = match arg(call, "message") {
                    Some(m) => format!("annotated, message \"{m}\""),
                    None => "lightweight".into(),
                };
                Ok((
                    format!("tag {name} at commit {sha} of {root} ({kind}), pushed to the remote"),
                    Confirmed::Target { sha },
                ))
            }
            _ => {
                let tag = arg(call, "tag")
                    .ok_or("release: `tag` is missing")?
                    .to_owned();
                self.api("release", mount)?;
                let target = arg(call, "target")
                    .map(str::to_owned)
                    .unwrap_or_else(|| self.work_branch(mount));
                let (t, tg) = (tag.clone(), target.clone());
                let sha = self
                    .blocking(mount, move |dir| {
                        git::target_sha(&dir, Some(&format!("refs/tags/{t}")))
                            .or_else(|_| git::target_sha(&dir, Some(&tg)))
                            .or_else(|_| git::target_sha(&dir, None))
                    })
                    .await?;
                let title = arg(call, "title").unwrap_or(&tag);
                let draft = if flag(call, "draft") == Some(true) {
                    "a draft"
                } else {
                    "published"
                };
                let pre = if flag(call, "prerelease") == Some(true) {
                    ", a pre-release"
                } else {
                    ""
                };
                Ok((
                    format!("release {tag} \"{title}\" of {root} at commit {sha}: {draft}{pre}"),
                    Confirmed::Target { sha },
                ))
            }
        }
    }

    fn take_confirmed(&self, call: &ToolCall) -> Option<Confirmed> {
        self.confirmed.lock().ok()?.remove(&call.id)
    }

    /// Runs one verb.
    pub async fn call(&self, view: &View, call: &ToolCall) -> ToolOutcome {
        let done = match call.name.as_str() {
            "commit" => self.commit(view, call).await,
            "branch" => self.branch(view, call).await,
            "pr" => self.pr(view, call).await,
            "merge" => self.merge(view, call).await,
            "tag" => self.tag(view, call).await,
            "release" => self.release(view, call).await,
            other => Err(format!("{other} is not a forge verb")),
        };
        match done {
            Ok(text) => ToolOutcome::ok(&call.id, text),
            Err(text) => ToolOutcome::error(&call.id, text),
        }
    }

    async fn commit(&self, view: &View, call: &ToolCall) -> Result<String, String> {
        let (root, mount) = self.target(view, call)?;
        let message = arg(call, "message")
            .ok_or("commit: `message` is missing")?
            .to_owned();
        let paths = match call.arguments.get("paths").and_then(Value::as_array) {
            None => None,
            Some(list) => {
                let mut rels = Vec::new();
                for p in list.iter().filter_map(Value::as_str) {
                    let abs = view.resolve(p);
                    view.check_visible(&abs).map_err(|e| e.to_string())?;
                    match abs.relative_to(&root) {
                        Some(rel) => rels.push(rel.to_owned()),
                        None => return Err(format!("{abs} is not in {root}")),
                    }
                }
                Some(rels)
            }
        };
        // Without `paths`: what this chat staged (another chat's changes in the shared working
        // tree stay staged, uncommitted).
        let paths = match paths {
            Some(p) => p,
            None => {
                let mine = self
                    .staged
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get(root.as_str())
                    .map(|s| s.iter().cloned().collect::<Vec<_>>())
                    .unwrap_or_default();
                if mine.is_empty() {
                    return Err(format!(
                        "Nothing to commit: this chat has staged no change in {root}. To commit changes staged before, name them in `paths`."
                    ));
                }
                mine
            }
        };
        let committed_paths = paths.clone();
        let branch = self.work_branch(mount);
        let remote = mount.remote();
        let author = person(&self.username);
        let b = branch.clone();
        let done = self
            .blocking(mount, move |dir| {
                git::commit(
                    &dir,
                    &remote,
                    &message,
                    Some(&paths),
                    (&author, &llembas()),
                    &b,
                )
            })
            .await?;
        if let Some(mine) = self
            .staged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(root.as_str())
        {
            mine.retain(|p| !committed_paths.iter().any(|c| git::within(p, c)));
        }
        match done {
            None => Err(format!("Nothing to commit: no change is staged in {root}.")),
            Some(c) => Ok(format!(
                "Committed {} in {root} ({} file{} changed) on branch {}, and pushed it.",
                short(&c.sha),
                c.files,
                if c.files == 1 { "" } else { "s" },
                c.branch
            )),
        }
    }

    async fn branch(&self, view: &View, call: &ToolCall) -> Result<String, String> {
        let (root, mount) = self.target(view, call)?;
        let name = arg(call, "name")
            .ok_or("branch: `name` is missing")?
            .to_owned();
        let from = arg(call, "from").map(str::to_owned);
        let switch = flag(call, "switch").unwrap_or(true);
        let remote = mount.remote();
        let n = name.clone();
        let sha = self
            .blocking(mount, move |dir| {
                git::branch(&dir, &remote, &n, from.as_deref(), switch)
            })
            .await?;
        if switch && let Ok(mut w) = self.work.lock() {
            w.insert(mount.path.clone(), name.clone());
        }
        Ok(format!(
            "Made branch {name} in {root} at {} and pushed it{}.",
            short(&sha),
            if switch {
                "; the mount works on it from now on"
            } else {
                ""
            }
        ))
    }

    async fn pr(&self, view: &View, call: &ToolCall) -> Result<String, String> {
        let (_, mount) = self.target(view, call)?;
        let api = self.api("pr", mount)?;
        let title = arg(call, "title").ok_or("pr: `title` is missing")?;
        let head = arg(call, "head")
            .map(str::to_owned)
            .unwrap_or_else(|| self.work_branch(mount));
        let base = match arg(call, "base") {
            Some(b) => b.to_owned(),
            None => api.default_branch().await?,
        };
        let pr = api
            .open_pr(&head, &base, title, arg(call, "body").unwrap_or(""))
            .await?;
        Ok(format!(
            "Opened pull request #{}: {} ({} into {}).",
            pr.number, pr.html_url, pr.head.name, pr.base.name
        ))
    }

    async fn merge(&self, view: &View, call: &ToolCall) -> Result<String, String> {
        let (_, mount) = self.target(view, call)?;
        let api = self.api("merge", mount)?;
        let number = call
            .arguments
            .get("number")
            .and_then(Value::as_u64)
            .ok_or("merge: `number` is missing")?;
        let sha = match self.take_confirmed(call) {
            Some(Confirmed::Merge { sha }) => sha,
            Some(Confirmed::Unread(e)) => return Err(e),
            _ => {
                return Err(
                    "Not merged: the person was not shown the head commit to merge.".into(),
                );
            }
        };
        let style = arg(call, "style").unwrap_or("merge");
        let delete = flag(call, "delete_branch").unwrap_or(false);
        api.merge_pr(number, style, &sha, delete).await?;
        let pr = api.get_pr(number).await?;
        Ok(format!(
            "Merged pull request #{number} ({} at {} into {}, style {style}): {}",
            pr.head.name,
            short(&sha),
            pr.base.name,
            pr.html_url
        ))
    }

    async fn tag(&self, view: &View, call: &ToolCall) -> Result<String, String> {
        let (root, mount) = self.target(view, call)?;
        let name = arg(call, "name")
            .ok_or("tag: `name` is missing")?
            .to_owned();
        let sha = match self.take_confirmed(call) {
            Some(Confirmed::Target { sha }) => sha,
            Some(Confirmed::Unread(e)) => return Err(e),
            _ => return Err("Not tagged: the person was not shown the commit to tag.".into()),
        };
        let message = arg(call, "message").map(str::to_owned);
        let remote = mount.remote();
        let tagger = person(&self.username);
        let (n, s) = (name.clone(), sha.clone());
        self.blocking(mount, move |dir| {
            git::tag(&dir, &remote, &n, &s, message.as_deref(), &tagger)
        })
        .await?;
        Ok(format!(
            "Tagged {} of {root} as {name} and pushed the tag.",
            short(&sha)
        ))
    }

    async fn release(&self, view: &View, call: &ToolCall) -> Result<String, String> {
        let (_, mount) = self.target(view, call)?;
        let api = self.api("release", mount)?;
        let tag = arg(call, "tag").ok_or("release: `tag` is missing")?;
        let sha = match self.take_confirmed(call) {
            Some(Confirmed::Target { sha }) => sha,
            Some(Confirmed::Unread(e)) => return Err(e),
            _ => {
                return Err("Not released: the person was not shown the commit to release.".into());
            }
        };
        let r = api
            .create_release(
                tag,
                &sha,
                arg(call, "title").unwrap_or(tag),
                arg(call, "notes").unwrap_or(""),
                (
                    flag(call, "draft").unwrap_or(false),
                    flag(call, "prerelease").unwrap_or(false),
                ),
            )
            .await?;
        Ok(format!(
            "Released {} \"{}\"{}: {}",
            r.tag_name,
            r.name,
            if r.draft { " (draft)" } else { "" },
            r.html_url
        ))
    }
}
