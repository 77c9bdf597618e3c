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
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use harness_core::protocol::ToolCall;
use harness_fs::{VPath, View};
use harness_loop::session::ToolOutcome;
use serde_json::Value;

use crate::db::Db;
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
///
/// What the chat keeps of its work on each mount (the branch a `branch` call switched it to,
/// the paths it staged and has not committed) is stored (`mount_work`), so a session built
/// again for the chat goes on with it.
pub struct ChatForge {
    mounts: Vec<Mount>,
    tree: PathBuf,
    username: String,
    /// The chat's id, once the session made it (`llembas/CHAT`).
    chat: Arc<OnceLock<String>>,
    pool: Db,
    /// What each confirmed call was asked with, by call id.
    confirmed: Mutex<HashMap<String, Confirmed>>,
}

/// A chat's work on one mount, as stored.
#[derive(Debug, Default)]
struct Work {
    /// The branch a `branch` call switched the chat to.
    branch: Option<String>,
    /// The paths its file tools staged, relative to the mount, not yet committed: a mount's
    /// working tree is shared, so a `commit` without `paths` commits these and no one else's.
    staged: BTreeSet<String>,
}

impl Work {
    /// The work a stored row holds (`None`: none kept yet).
    fn of(row: Option<(Option<String>, String)>) -> Work {
        match row {
            None => Work::default(),
            Some((branch, staged)) => Work {
                branch,
                staged: serde_json::from_str(&staged).unwrap_or_default(),
            },
        }
    }
}

const READ_WORK: &str = "SELECT branch, staged FROM mount_work WHERE chat_id = $1 AND mount = $2";
const WRITE_WORK: &str = "INSERT INTO mount_work (chat_id, mount, branch, staged) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (chat_id, mount) \
     DO UPDATE SET branch = excluded.branch, staged = excluded.staged";

/// Stages the paths changed inside mounts (`git add -A` of each, relative to its mount, under
/// the mount's lock): a file tool's change, a program's file, the Files page's. Answers what
/// was staged, by mount root.
pub async fn stage_in_mounts(
    mounts: &[Mount],
    tree: &Path,
    view: &View,
    paths: &[String],
) -> Result<Vec<(String, Vec<String>)>, String> {
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
    let mut done = Vec::new();
    for (root, rels) in by_mount {
        if !mounts.iter().any(|m| m.path == root) {
            continue;
        }
        let dir = crate::mounts::dir_of(tree, &root);
        let staging = rels.clone();
        git::on_mount(dir, move |dir| git::stage(&dir, &staging)).await?;
        done.push((root, rels));
    }
    Ok(done)
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
        pool: Db,
    ) -> ChatForge {
        ChatForge {
            mounts,
            tree,
            username: username.to_owned(),
            chat,
            pool,
            confirmed: Mutex::default(),
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

    /// The chat's id: its work is kept under it.
    fn chat_id(&self) -> Result<&str, String> {
        self.chat
            .get()
            .map(String::as_str)
            .ok_or_else(|| "the chat is not made yet".to_owned())
    }

    /// The chat's work on the mount at `root`, as stored.
    async fn work(&self, root: &str) -> Result<Work, String> {
        let chat = self.chat_id()?;
        let row: Option<(Option<String>, String)> = sqlx::query_as(READ_WORK)
            .bind(chat)
            .bind(root)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| format!("reading this chat's work on {root}: {e}"))?;
        Ok(Work::of(row))
    }

    /// Changes the chat's work on the mount at `root` in one write transaction.
    async fn change_work(&self, root: &str, change: impl FnOnce(&mut Work)) -> Result<(), String> {
        let chat = self.chat_id()?;
        let failed = |e: sqlx::Error| format!("keeping this chat's work on {root}: {e}");
        let mut tx = crate::db::begin_write(&self.pool).await.map_err(failed)?;
        let row: Option<(Option<String>, String)> = sqlx::query_as(READ_WORK)
            .bind(chat)
            .bind(root)
            .fetch_optional(&mut *tx)
            .await
            .map_err(failed)?;
        let mut work = Work::of(row);
        change(&mut work);
        let staged = serde_json::to_string(&work.staged).unwrap_or_else(|_| "[]".into());
        sqlx::query(WRITE_WORK)
            .bind(chat)
            .bind(root)
            .bind(work.branch)
            .bind(staged)
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        tx.commit().await.map_err(failed)
    }

    /// The branch `mount` works on for this chat: the one a `branch` call switched it to, the
    /// mount's working branch, or `llembas/CHAT`.
    async fn work_branch(&self, mount: &Mount) -> Result<String, String> {
        if let Some(b) = self.work(&mount.path).await?.branch {
            return Ok(b);
        }
        Ok(match &mount.work_branch {
            Some(b) => b.clone(),
            None => format!("llembas/{}", self.chat_id()?),
        })
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
        git::on_mount(self.dir(mount), work).await
    }

    /// Stages the paths a file tool changed inside mounts (`git add -A` of each), kept as this
    /// chat's.
    pub async fn stage_changed(&self, view: &View, paths: &[String]) -> Result<(), String> {
        for (root, rels) in stage_in_mounts(&self.mounts, &self.tree, view, paths).await? {
            self.change_work(&root, |w| w.staged.extend(rels)).await?;
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
                let (remote, work) = (mount.remote(), self.work_branch(mount).await?);
                let sha = self
                    .blocking(mount, move |dir| {
                        git::target_sha(&dir, &remote, target.as_deref(), &work)
                    })
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
                let target = arg(call, "target").map(str::to_owned);
                let (remote, work) = (mount.remote(), self.work_branch(mount).await?);
                let t = tag.clone();
                let sha = self
                    .blocking(mount, move |dir| {
                        // The tag where it exists, else the target, else the chat's branch.
                        git::target_sha(&dir, &remote, Some(&format!("refs/tags/{t}")), &work)
                            .or_else(|_| git::target_sha(&dir, &remote, target.as_deref(), &work))
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
                let mine: Vec<String> =
                    self.work(root.as_str()).await?.staged.into_iter().collect();
                if mine.is_empty() {
                    return Err(format!(
                        "Nothing to commit: this chat has staged no change in {root}. To commit changes staged before, name them in `paths`."
                    ));
                }
                mine
            }
        };
        let committed_paths = paths.clone();
        let branch = self.work_branch(mount).await?;
        let remote = mount.remote();
        let author = person(&self.username);
        let b = branch.clone();
        let done = self
            .blocking(mount, move |dir| {
                git::commit(&dir, &remote, &message, &paths, (&author, &llembas()), &b)
            })
            .await?;
        if done.is_some() {
            self.change_work(root.as_str(), |w| {
                w.staged
                    .retain(|p| !committed_paths.iter().any(|c| git::within(p, c)));
            })
            .await?;
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
        let (n, work) = (name.clone(), self.work_branch(mount).await?);
        let sha = self
            .blocking(mount, move |dir| {
                git::branch(&dir, &remote, &n, from.as_deref(), &work)
            })
            .await?;
        if switch {
            let switched = name.clone();
            self.change_work(&mount.path, |w| w.branch = Some(switched))
                .await?;
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
        let head = match arg(call, "head") {
            Some(h) => h.to_owned(),
            None => self.work_branch(mount).await?,
        };
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

/// What follows a change the files API (or a chat's go-back) made at `paths` (the answer stands whatever it does):
/// the search index learns of it, and a change inside a forge mount is staged, as a chat's
/// file tool stages its own (it is no chat's: a chat's `commit` takes it only when its `paths`
/// name it).
pub async fn files_changed(app: &crate::App, view: &View, paths: &[String]) {
    for path in paths {
        if let Err(e) = app.search.file_changed(app.backend.as_ref(), path).await {
            tracing::warn!("search index: {path}: {e}");
        }
    }
    if !paths
        .iter()
        .any(|p| view.access().mount_of(&VPath::parse(p)).is_some())
    {
        return;
    }
    let staged = match crate::mounts::stored(&app.pool).await {
        Ok(mounts) => stage_in_mounts(&mounts, &app.tree, view, paths).await,
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = staged {
        tracing::warn!("staging {paths:?} in a mount: {e}");
    }
}
