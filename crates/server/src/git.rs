//! Git underneath forge mounts (issue 32), through libgit2 (`git2`) in process: clone, stage,
//! commit, branch, tag and push against any remote (a file path, `http(s)`). Every function
//! here blocks: callers run it on tokio's blocking pool, holding the mount's lock
//! ([`lock`]).
//!
//! A credential reaches libgit2 only inside [`Remote::callbacks`], at fetch or push time, as the
//! password of HTTP basic auth; it is never written to the repository's configuration, and no
//! text made here holds it (libgit2's messages name the URL, which never carries it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use git2::{
    Cred, CredentialType, FetchOptions, IndexAddOption, PushOptions, RemoteCallbacks, Repository,
    Signature,
};

/// What went wrong, as the tool or the admin reads it (never a credential).
pub type GitResult<T> = std::result::Result<T, String>;

/// The lock of the repository at `dir`: one per mount in this process, so two chats never
/// change one working tree or index at once.
pub fn lock(dir: &Path) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let locks = LOCKS.get_or_init(Default::default);
    let mut map = match locks.lock() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    };
    map.entry(dir.to_path_buf()).or_default().clone()
}

/// Runs git work on tokio's blocking pool, holding the lock of the repository at `dir`.
pub async fn on_mount<T: Send + 'static>(
    dir: PathBuf,
    work: impl FnOnce(PathBuf) -> GitResult<T> + Send + 'static,
) -> GitResult<T> {
    let lock = lock(&dir);
    tokio::task::spawn_blocking(move || {
        let _held = lock.lock().map_err(|_| "the mount's lock".to_owned())?;
        work(dir)
    })
    .await
    .map_err(|e| format!("git: {e}"))?
}

/// How a remote is reached: its URL and the token (from the server's environment) that signs
/// fetches and pushes over HTTP.
#[derive(Clone)]
pub struct Remote {
    /// The remote's URL (a path, `file://`, `http(s)://`).
    pub url: String,
    /// The token, read at the moment of the fetch or push; `None`: none is sent.
    pub token: Option<String>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is never shown, not even in a debug line.
        f.debug_struct("Remote").field("url", &self.url).finish()
    }
}

impl Remote {
    /// The callbacks of one fetch or push: the token as basic auth's password (once: a refused
    /// token is not tried again), the user the URL names or `llembas`.
    fn callbacks(&self) -> RemoteCallbacks<'static> {
        let mut cb = RemoteCallbacks::new();
        let token = self.token.clone();
        let mut tried = false;
        cb.credentials(move |_url, user, allowed| {
            match (&token, tried) {
                (Some(t), false) if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) => {
                    tried = true;
                    Cred::userpass_plaintext(user.unwrap_or("llembas"), t)
                }
                (None, _) => Err(git2::Error::from_str(
                    "the remote asks for a credential, and no token is set (the mount names no token variable, or it is not set in the server's environment)",
                )),
                _ => Err(git2::Error::from_str(
                    "the remote refused the token (is it valid, with write access to the repository?)",
                )),
            }
        });
        cb
    }

    fn fetch_options(&self) -> FetchOptions<'static> {
        let mut fo = FetchOptions::new();
        fo.remote_callbacks(self.callbacks());
        fo
    }
}

fn text(e: git2::Error) -> String {
    e.message().to_owned()
}

/// Clones `remote` into `dir` (absent or empty), checking out `branch` (`None`: the remote's
/// default); answers the commit checked out.
pub fn clone(remote: &Remote, dir: &Path, branch: Option<&str>) -> GitResult<String> {
    let mut builder = git2::build::RepoBuilder::new();
    builder.fetch_options(remote.fetch_options());
    if let Some(b) = branch {
        builder.branch(b);
    }
    let repo = builder
        .clone(&remote.url, dir)
        .map_err(|e| format!("cloning {}: {}", remote.url, text(e)))?;
    head_sha(&repo)
}

/// Opens the repository of a mount.
pub fn open(dir: &Path) -> GitResult<Repository> {
    Repository::open(dir).map_err(|e| format!("the mount's repository: {}", text(e)))
}

/// The commit HEAD is at (empty for a repository without one).
pub fn head_sha(repo: &Repository) -> GitResult<String> {
    match repo.head() {
        Ok(h) => Ok(h.peel_to_commit().map_err(text)?.id().to_string()),
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => Ok(String::new()),
        Err(e) => Err(text(e)),
    }
}

/// The branch HEAD is on (`None`: detached or unborn).
pub fn head_branch(repo: &Repository) -> Option<String> {
    repo.head()
        .ok()
        .filter(git2::Reference::is_branch)
        .and_then(|h| h.shorthand().ok().map(str::to_owned))
}

/// Stages the paths (relative to the working tree, `/`-separated) as the working tree holds
/// them now: a changed or new file is added, a removed one leaves the index (`git add -A P`).
pub fn stage(dir: &Path, paths: &[String]) -> GitResult<()> {
    let repo = open(dir)?;
    let mut index = repo.index().map_err(text)?;
    index
        .add_all(paths.iter(), IndexAddOption::DEFAULT, None)
        .map_err(text)?;
    index.update_all(paths.iter(), None).map_err(text)?;
    index.write().map_err(text)
}

/// Whether `path` is `under` or inside it (`under` empty: everything).
pub(crate) fn within(path: &str, under: &str) -> bool {
    let under = under.trim_matches('/');
    under.is_empty()
        || path == under
        || path
            .strip_prefix(under)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// A person or llembas as git writes them.
#[derive(Debug, Clone)]
pub struct Who {
    /// The name.
    pub name: String,
    /// The email.
    pub email: String,
}

impl Who {
    fn signature(&self) -> GitResult<Signature<'static>> {
        Signature::now(&self.name, &self.email).map_err(text)
    }
}

/// A commit made and pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// Its id.
    pub sha: String,
    /// The branch it was pushed to.
    pub branch: String,
    /// How many paths it changed.
    pub files: usize,
}

/// The tip of `branch`: the remote's as last fetched, else the local one (`None`: the branch
/// is new).
fn tip<'r>(repo: &'r Repository, branch: &str) -> Option<git2::Commit<'r>> {
    [
        format!("refs/remotes/origin/{branch}"),
        format!("refs/heads/{branch}"),
    ]
    .iter()
    .find_map(|r| repo.find_reference(r).ok()?.peel_to_commit().ok())
}

/// Where the work of `branch` goes on from: its tip, or HEAD for a branch not made yet (`None`:
/// a repository without a commit).
fn start_of<'r>(repo: &'r Repository, branch: &str) -> GitResult<Option<git2::Commit<'r>>> {
    if let Some(c) = tip(repo, branch) {
        return Ok(Some(c));
    }
    match repo.head() {
        Ok(h) => Ok(Some(h.peel_to_commit().map_err(text)?)),
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => Ok(None),
        Err(e) => Err(text(e)),
    }
}

/// Commits the staged state of `paths` (each a path or a directory, relative to the working
/// tree) on top of `branch` as `author`, committed by `committer`, and pushes the branch to
/// `remote`. The remote is fetched first, so the commit goes on the branch as the remote has
/// it; a branch new to the remote starts at HEAD. HEAD and the working tree stay where they
/// are (the mount's branch, shared by every chat): one chat's commits never reach another's
/// branch. `Ok(None)`: those paths hold no change from the branch.
pub fn commit(
    dir: &Path,
    remote: &Remote,
    message: &str,
    paths: &[String],
    (author, committer): (&Who, &Who),
    branch: &str,
) -> GitResult<Option<Committed>> {
    fetch(dir, remote)?;
    let repo = open(dir)?;
    let parent = start_of(&repo, branch)?;
    let index = repo.index().map_err(text)?;
    // The parent's tree with the staged state of these paths only.
    let mut part = git2::Index::new().map_err(text)?;
    if let Some(p) = &parent {
        part.read_tree(&p.tree().map_err(text)?).map_err(text)?;
    }
    let wanted = |path: &str| paths.iter().any(|p| within(path, p));
    let parent_paths: Vec<String> = part
        .iter()
        .map(|e| String::from_utf8_lossy(&e.path).into_owned())
        .filter(|p| wanted(p))
        .collect();
    for p in parent_paths {
        part.remove_path(Path::new(&p)).map_err(text)?;
    }
    for e in index.iter() {
        if wanted(&String::from_utf8_lossy(&e.path)) {
            part.add(&e).map_err(text)?;
        }
    }
    let tree_id = part.write_tree_to(&repo).map_err(text)?;
    let parent_tree = parent.as_ref().map(|p| p.tree_id());
    if Some(tree_id) == parent_tree {
        return Ok(None);
    }
    let tree = repo.find_tree(tree_id).map_err(text)?;
    let files = repo
        .diff_tree_to_tree(
            parent.as_ref().and_then(|p| p.tree().ok()).as_ref(),
            Some(&tree),
            None,
        )
        .map(|d| d.deltas().len())
        .unwrap_or(0);
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let oid = repo
        .commit(
            None,
            &author.signature()?,
            &committer.signature()?,
            message,
            &tree,
            &parents,
        )
        .map_err(text)?;
    let refname = format!("refs/heads/{branch}");
    repo.reference(&refname, oid, true, "llembas: commit")
        .map_err(text)?;
    push(&repo, remote, &[format!("{refname}:{refname}")])?;
    Ok(Some(Committed {
        sha: oid.to_string(),
        branch: branch.to_owned(),
        files,
    }))
}

/// The commit `spec` names (a branch, a tag, a commit, `HEAD`), local or the remote's.
fn resolve<'r>(repo: &'r Repository, spec: &str) -> GitResult<git2::Commit<'r>> {
    let obj = repo
        .revparse_single(spec)
        .or_else(|_| repo.revparse_single(&format!("origin/{spec}")))
        .map_err(|_| format!("no branch, tag or commit {spec:?} in the repository"))?;
    obj.peel_to_commit()
        .map_err(|_| format!("{spec:?} does not name a commit"))
}

/// Whether a branch named `name` exists here or on the remote as last fetched.
fn branch_exists(repo: &Repository, name: &str) -> bool {
    repo.find_reference(&format!("refs/heads/{name}")).is_ok()
        || repo
            .find_reference(&format!("refs/remotes/origin/{name}"))
            .is_ok()
}

/// Creates branch `name` at `from` (`None`: where the chat's branch `work` is, else HEAD) and
/// pushes it. The working tree is not touched (it is shared): a chat switching to the branch
/// commits on top of it from then on, its staged changes coming along. The remote is fetched
/// first, so a branch made there since the clone is known (refused as existing, or a place to
/// start from). Answers the commit it starts at.
pub fn branch(
    dir: &Path,
    remote: &Remote,
    name: &str,
    from: Option<&str>,
    work: &str,
) -> GitResult<String> {
    fetch(dir, remote)?;
    let repo = open(dir)?;
    git2::Branch::name_is_valid(name)
        .ok()
        .filter(|ok| *ok)
        .ok_or_else(|| format!("{name:?} is not a valid branch name"))?;
    if branch_exists(&repo, name) {
        return Err(format!("Already exists: branch {name}"));
    }
    let start = match from {
        Some(f) => resolve(&repo, f)?,
        None => start_of(&repo, work)?
            .ok_or_else(|| "the repository has no commit to start a branch at".to_owned())?,
    };
    repo.branch(name, &start, false).map_err(text)?;
    let refname = format!("refs/heads/{name}");
    push(&repo, remote, &[format!("{refname}:{refname}")])?;
    Ok(start.id().to_string())
}

/// The commit `target` names (`None`: the tip of the chat's branch `work`, else HEAD), after a
/// fetch, so a branch or tag of the remote is read as it is now.
pub fn target_sha(
    dir: &Path,
    remote: &Remote,
    target: Option<&str>,
    work: &str,
) -> GitResult<String> {
    fetch(dir, remote)?;
    let repo = open(dir)?;
    let c = match target {
        Some(t) => resolve(&repo, t)?,
        None => start_of(&repo, work)?.ok_or_else(|| "the repository has no commit".to_owned())?,
    };
    Ok(c.id().to_string())
}

/// Creates tag `name` at commit `sha` (annotated by `tagger` with `message`, else lightweight)
/// and pushes it. An existing tag is refused, never moved.
pub fn tag(
    dir: &Path,
    remote: &Remote,
    name: &str,
    sha: &str,
    message: Option<&str>,
    tagger: &Who,
) -> GitResult<()> {
    let repo = open(dir)?;
    let refname = format!("refs/tags/{name}");
    if !git2::Reference::is_valid_name(&refname) {
        return Err(format!("{name:?} is not a valid tag name"));
    }
    if repo.find_reference(&refname).is_ok() {
        return Err(format!("Already exists: tag {name}"));
    }
    let oid = git2::Oid::from_str(sha).map_err(text)?;
    let obj = repo.find_object(oid, None).map_err(text)?;
    match message {
        Some(m) => repo
            .tag(name, &obj, &tagger.signature()?, m, false)
            .map(|_| ()),
        None => repo.tag_lightweight(name, &obj, false).map(|_| ()),
    }
    .map_err(text)?;
    push(&repo, remote, &[format!("{refname}:{refname}")])
}

/// Fetches every branch and tag of the remote (`refs/remotes/origin/*`).
pub fn fetch(dir: &Path, remote: &Remote) -> GitResult<()> {
    let repo = open(dir)?;
    let mut r = repo.remote_anonymous(&remote.url).map_err(text)?;
    r.fetch(
        &[
            "+refs/heads/*:refs/remotes/origin/*",
            "+refs/tags/*:refs/tags/*",
        ],
        Some(&mut remote.fetch_options()),
        None,
    )
    .map_err(|e| format!("fetching {}: {}", remote.url, text(e)))
}

/// Pushes `refspecs`; a ref the remote refuses (not a fast-forward, protected) is an error.
fn push(repo: &Repository, remote: &Remote, refspecs: &[String]) -> GitResult<()> {
    let mut r = repo.remote_anonymous(&remote.url).map_err(text)?;
    let refused: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut cb = remote.callbacks();
    let seen = refused.clone();
    cb.push_update_reference(move |refname, status| {
        if let Some(why) = status
            && let Ok(mut s) = seen.lock()
        {
            s.push(format!("{refname}: {why}"));
        }
        Ok(())
    });
    let mut po = PushOptions::new();
    po.remote_callbacks(cb);
    r.push(refspecs, Some(&mut po))
        .map_err(|e| format!("pushing to {}: {}", remote.url, text(e)))?;
    let refused = refused.lock().map(|r| r.clone()).unwrap_or_default();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the remote refused the push: {}",
            refused.join("; ")
        ))
    }
}

/// The paths staged and not yet committed (HEAD's tree against the index), relative.
pub fn staged(dir: &Path) -> GitResult<Vec<String>> {
    let repo = open(dir)?;
    let head_tree = match repo.head() {
        Ok(h) => Some(h.peel_to_tree().map_err(text)?),
        Err(_) => None,
    };
    let diff = repo
        .diff_tree_to_index(head_tree.as_ref(), None, None)
        .map_err(text)?;
    Ok(diff
        .deltas()
        .filter_map(|d| {
            d.new_file()
                .path()
                .or_else(|| d.old_file().path())
                .map(|p| p.to_string_lossy().replace('\\', "/"))
        })
        .collect())
}

/// What an admin's fetch did to a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The commit HEAD is at now.
    pub head: String,
    /// Whether HEAD's branch moved forward to the remote's.
    pub moved: bool,
    /// How many commits of the remote's branch HEAD's does not hold (0 when it moved or is
    /// up to date).
    pub behind: usize,
}

/// Fetches the remote and moves the mount's branch (HEAD's) forward to the remote's when that
/// is a fast-forward and nothing is changed in the working tree (the chats' changes are never
/// touched: with changes it stays, and `behind` says by how much).
pub fn fetch_forward(dir: &Path, remote: &Remote) -> GitResult<Fetched> {
    fetch(dir, remote)?;
    let repo = open(dir)?;
    let head = head_sha(&repo)?;
    let Some(branch) = head_branch(&repo) else {
        return Ok(Fetched {
            head,
            moved: false,
            behind: 0,
        });
    };
    let Some(theirs) = tip(&repo, &branch) else {
        return Ok(Fetched {
            head,
            moved: false,
            behind: 0,
        });
    };
    let ours = git2::Oid::from_str(&head).ok();
    let (_, behind) = match ours {
        Some(o) => repo.graph_ahead_behind(o, theirs.id()).map_err(text)?,
        None => (0, 1),
    };
    let fast_forward = match ours {
        Some(o) => o == theirs.id() || repo.graph_descendant_of(theirs.id(), o).map_err(text)?,
        None => true,
    };
    let mut so = git2::StatusOptions::new();
    so.include_untracked(false).include_ignored(false);
    let clean = repo.statuses(Some(&mut so)).map_err(text)?.is_empty();
    if behind == 0 || !fast_forward || !clean {
        return Ok(Fetched {
            head,
            moved: false,
            behind,
        });
    }
    let mut co = git2::build::CheckoutBuilder::new();
    co.safe();
    repo.checkout_tree(theirs.as_object(), Some(&mut co))
        .map_err(|e| format!("moving {branch} forward: {}", text(e)))?;
    repo.reference(
        &format!("refs/heads/{branch}"),
        theirs.id(),
        true,
        "llembas: fetch",
    )
    .map_err(text)?;
    Ok(Fetched {
        head: theirs.id().to_string(),
        moved: true,
        behind: 0,
    })
}
