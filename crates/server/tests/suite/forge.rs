//! Forge mounts and the forge verbs (issue 32), against real git: bare repositories as remotes
//! (file paths) and smart HTTP through `git http-backend` on loopback, behind a small CGI
//! bridge that also asks for the token as basic auth; and the forge's API against a Forgejo
//! stand-in (an axum router written here from the documented field names) backed by the same
//! real bare repository, so a merge really moves the base branch.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use base64::Engine as _;
use git2::Repository;
use harness_test_support::ScriptedServer;
use serde_json::{Value, json};

use super::{Client, Server, last_tool_result, run_end, text, tool_call};

/// A variable of the test's environment that is surely set: the mounts name it as their token
/// variable (the tests cannot set one: changing the environment is `unsafe`), and the stand-in
/// and the git bridge expect its value.
pub fn token_variable() -> (String, String) {
    ["CARGO_PKG_NAME", "HOME", "PATH"]
        .iter()
        .find_map(|v| std::env::var(v).ok().map(|t| ((*v).to_owned(), t)))
        .expect("no variable to name")
}

/// A bare repository at `dir` with one commit on `main`: `README.md`.
pub fn bare_repo(dir: &Path) -> Repository {
    let repo = Repository::init_bare(dir).unwrap();
    let sig = git2::Signature::now("ana", "ana@example.invalid").unwrap();
    let blob = repo.blob(b"# site\n").unwrap();
    {
        let mut tb = repo.treebuilder(None).unwrap();
        tb.insert("README.md", blob, 0o100644).unwrap();
        let tree = repo.find_tree(tb.write().unwrap()).unwrap();
        repo.commit(Some("refs/heads/main"), &sig, &sig, "first", &tree, &[])
            .unwrap();
    }
    repo.set_head("refs/heads/main").unwrap();
    repo
}

/// The commit a ref of `repo` is at.
pub fn ref_sha(repo: &Path, name: &str) -> Option<String> {
    Repository::open(repo)
        .ok()?
        .refname_to_id(name)
        .ok()
        .map(|o| o.to_string())
}

/// A file of `branch` in `repo`.
pub fn file_at(repo: &Path, branch: &str, path: &str) -> Option<String> {
    let r = Repository::open(repo).ok()?;
    let c = r
        .find_reference(&format!("refs/heads/{branch}"))
        .ok()?
        .peel_to_commit()
        .ok()?;
    let entry = c.tree().ok()?.get_path(Path::new(path)).ok()?;
    let blob = r.find_blob(entry.id()).ok()?;
    Some(String::from_utf8_lossy(blob.content()).into_owned())
}

/// Commits `path` with `content` on top of `branch` of the bare repository `repo`, as someone
/// pushing to the remote would; the new commit.
pub fn commit_on(repo: &Path, branch: &str, path: &str, content: &str) -> String {
    let r = Repository::open(repo).unwrap();
    let refname = format!("refs/heads/{branch}");
    let parent = r
        .find_reference(&refname)
        .unwrap()
        .peel_to_commit()
        .unwrap();
    let blob = r.blob(content.as_bytes()).unwrap();
    let mut tb = r.treebuilder(Some(&parent.tree().unwrap())).unwrap();
    tb.insert(path, blob, 0o100644).unwrap();
    let tree = r.find_tree(tb.write().unwrap()).unwrap();
    let sig = git2::Signature::now("ana", "ana@example.invalid").unwrap();
    r.commit(Some(&refname), &sig, &sig, "by ana", &tree, &[&parent])
        .unwrap()
        .to_string()
}

/// The first parent of `branch`'s tip in `repo`.
fn parent_of(repo: &Path, branch: &str) -> String {
    let r = Repository::open(repo).unwrap();
    let c = r
        .find_reference(&format!("refs/heads/{branch}"))
        .unwrap()
        .peel_to_commit()
        .unwrap();
    c.parent_id(0).unwrap().to_string()
}

/// One pull request of the stand-in.
struct Pr {
    number: u64,
    title: String,
    head: String,
    base: String,
    merged: bool,
}

/// The stand-in's state: the real bare repository it serves and what its API made.
pub struct Forge {
    bare: PathBuf,
    token: String,
    base: String,
    prs: Vec<Pr>,
    releases: Vec<Value>,
    /// Answer 423 to a merge, as an archived repository does.
    pub archived: bool,
}

type Shared = Arc<Mutex<Forge>>;

/// The Forgejo stand-in and the git bridge on one loopback port.
pub struct StandIn {
    pub base: String,
    pub state: Shared,
}

impl StandIn {
    /// Serves `bare` (at `/git/ana/site.git`) and its API (`/api/v1/repos/ana/site`).
    pub async fn start(bare: &Path, token: &str) -> StandIn {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state: Shared = Arc::new(Mutex::new(Forge {
            bare: bare.to_path_buf(),
            token: token.to_owned(),
            base: base.clone(),
            prs: Vec::new(),
            releases: Vec::new(),
            archived: false,
        }));
        let app = axum::Router::new()
            .route("/api/v1/repos/{owner}/{repo}", get(repo_info))
            .route("/api/v1/repos/{owner}/{repo}/pulls", post(open_pr))
            .route("/api/v1/repos/{owner}/{repo}/pulls/{n}", get(get_pr))
            .route(
                "/api/v1/repos/{owner}/{repo}/pulls/{n}/merge",
                post(merge_pr),
            )
            .route("/api/v1/repos/{owner}/{repo}/releases", post(release))
            .route("/git/{*rest}", any(git_cgi))
            .with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        StandIn { base, state }
    }

    /// The repository's smart-HTTP URL.
    pub fn git_url(&self) -> String {
        format!("{}/git/ana/site.git", self.base)
    }
}

fn refused(status: u16, message: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        Json(json!({"message": message})),
    )
        .into_response()
}

fn authorized(s: &Forge, headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("token {}", s.token))
}

fn pr_json(s: &Forge, pr: &Pr) -> Value {
    let sha = |b: &str| ref_sha(&s.bare, &format!("refs/heads/{b}")).unwrap_or_default();
    json!({
        "number": pr.number,
        "title": pr.title,
        "html_url": format!("{}/ana/site/pulls/{}", s.base, pr.number),
        "state": if pr.merged { "closed" } else { "open" },
        "merged": pr.merged,
        "mergeable": !pr.merged,
        "head": {"ref": pr.head, "sha": sha(&pr.head)},
        "base": {"ref": pr.base, "sha": sha(&pr.base)},
    })
}

async fn repo_info(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let s = s.lock().unwrap();
    if !authorized(&s, &headers) {
        return refused(401, "token is required");
    }
    Json(json!({"full_name": "ana/site", "default_branch": "main", "archived": s.archived}))
        .into_response()
}

async fn open_pr(State(s): State<Shared>, headers: HeaderMap, Json(b): Json<Value>) -> Response {
    let mut s = s.lock().unwrap();
    if !authorized(&s, &headers) {
        return refused(401, "token is required");
    }
    let (head, base) = (
        b["head"].as_str().unwrap_or("").to_owned(),
        b["base"].as_str().unwrap_or("").to_owned(),
    );
    for branch in [&head, &base] {
        if ref_sha(&s.bare, &format!("refs/heads/{branch}")).is_none() {
            return refused(404, &format!("branch {branch} does not exist"));
        }
    }
    let pr = Pr {
        number: s.prs.len() as u64 + 1,
        title: b["title"].as_str().unwrap_or("").to_owned(),
        head,
        base,
        merged: false,
    };
    let v = pr_json(&s, &pr);
    s.prs.push(pr);
    (StatusCode::CREATED, Json(v)).into_response()
}

async fn get_pr(
    State(s): State<Shared>,
    headers: HeaderMap,
    UrlPath((_, _, n)): UrlPath<(String, String, u64)>,
) -> Response {
    let s = s.lock().unwrap();
    if !authorized(&s, &headers) {
        return refused(401, "token is required");
    }
    match s.prs.iter().find(|p| p.number == n) {
        Some(pr) => Json(pr_json(&s, pr)).into_response(),
        None => refused(404, "pull request does not exist"),
    }
}

async fn merge_pr(
    State(s): State<Shared>,
    headers: HeaderMap,
    UrlPath((_, _, n)): UrlPath<(String, String, u64)>,
    Json(b): Json<Value>,
) -> Response {
    let mut guard = s.lock().unwrap();
    let s = &mut *guard;
    if !authorized(s, &headers) {
        return refused(401, "token is required");
    }
    if s.archived {
        return refused(423, "repository is archived");
    }
    let Some(i) = s.prs.iter().position(|p| p.number == n) else {
        return refused(404, "pull request does not exist");
    };
    if s.prs[i].merged {
        return refused(405, "pull request is already merged");
    }
    let repo = Repository::open(&s.bare).unwrap();
    let head_ref = format!("refs/heads/{}", s.prs[i].head);
    let base_ref = format!("refs/heads/{}", s.prs[i].base);
    let head = repo.refname_to_id(&head_ref).unwrap();
    let base = repo.refname_to_id(&base_ref).unwrap();
    if b["head_commit_id"].as_str() != Some(head.to_string().as_str()) {
        return refused(409, "head out of date");
    }
    let style = b["Do"].as_str().unwrap_or("merge");
    let new_base = if style == "fast-forward-only" {
        if head != base && !repo.graph_descendant_of(head, base).unwrap() {
            return refused(405, "not possible to fast-forward");
        }
        head
    } else {
        // merge: a merge commit; squash and rebase (taken here as squash): one commit on base
        let (hc, bc) = (
            repo.find_commit(head).unwrap(),
            repo.find_commit(base).unwrap(),
        );
        let mut index = repo.merge_commits(&bc, &hc, None).unwrap();
        if index.has_conflicts() {
            return refused(405, "merge conflicts");
        }
        let tree = repo.find_tree(index.write_tree_to(&repo).unwrap()).unwrap();
        let sig = git2::Signature::now("forge", "forge@example.invalid").unwrap();
        let parents = if style == "merge" {
            vec![&bc, &hc]
        } else {
            vec![&bc]
        };
        repo.commit(None, &sig, &sig, &format!("Merge #{n}"), &tree, &parents)
            .unwrap()
    };
    repo.reference(&base_ref, new_base, true, "merge").unwrap();
    if b["delete_branch_after_merge"] == json!(true) {
        repo.find_reference(&head_ref).unwrap().delete().unwrap();
    }
    s.prs[i].merged = true;
    StatusCode::OK.into_response()
}

async fn release(State(s): State<Shared>, headers: HeaderMap, Json(b): Json<Value>) -> Response {
    let mut s = s.lock().unwrap();
    if !authorized(&s, &headers) {
        return refused(401, "token is required");
    }
    let tag = b["tag_name"].as_str().unwrap_or("").to_owned();
    let repo = Repository::open(&s.bare).unwrap();
    if repo.refname_to_id(&format!("refs/tags/{tag}")).is_err() {
        let Ok(target) = repo.revparse_single(b["target_commitish"].as_str().unwrap_or("")) else {
            return refused(404, "target does not exist");
        };
        repo.tag_lightweight(&tag, &target, false).unwrap();
    }
    let r = json!({
        "id": s.releases.len() + 1,
        "tag_name": tag,
        "name": b["name"],
        "body": b["body"],
        "draft": b["draft"],
        "prerelease": b["prerelease"],
        "html_url": format!("{}/ana/site/releases/tag/{tag}", s.base),
    });
    s.releases.push(r.clone());
    (StatusCode::CREATED, Json(r)).into_response()
}

/// Smart HTTP: `git http-backend` as CGI, after basic auth whose password is the token.
async fn git_cgi(
    State(s): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (root, token) = {
        let s = s.lock().unwrap();
        (
            s.bare.parent().unwrap().parent().unwrap().to_path_buf(),
            s.token.clone(),
        )
    };
    let password = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|up| up.split_once(':').map(|(_, p)| p.to_owned()));
    if password.as_deref() != Some(token.as_str()) {
        return (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", "Basic realm=\"git\"")],
        )
            .into_response();
    }
    let path_info = uri.path().strip_prefix("/git").unwrap_or("").to_owned();
    let query = uri.query().unwrap_or("").to_owned();
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let out = tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let mut child = std::process::Command::new("git")
            .arg("http-backend")
            .env("GIT_PROJECT_ROOT", &root)
            .env("GIT_HTTP_EXPORT_ALL", "1")
            .env("PATH_INFO", &path_info)
            .env("QUERY_STRING", &query)
            .env("REQUEST_METHOD", method.as_str())
            .env("CONTENT_TYPE", &content_type)
            .env("CONTENT_LENGTH", body.len().to_string())
            .env("REMOTE_USER", "ana")
            .env("REMOTE_ADDR", "127.0.0.1")
            .env("GIT_CONFIG_COUNT", "2")
            .env("GIT_CONFIG_KEY_0", "http.receivepack")
            .env("GIT_CONFIG_VALUE_0", "true")
            .env("GIT_CONFIG_KEY_1", "safe.directory")
            .env("GIT_CONFIG_VALUE_1", "*")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&body);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        out
    })
    .await
    .unwrap();
    let raw = out.stdout;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((at, sep)) = split else {
        return refused(500, &String::from_utf8_lossy(&out.stderr));
    };
    let head = String::from_utf8_lossy(&raw[..at]).into_owned();
    let mut status = StatusCode::OK;
    let mut resp = Response::builder();
    for line in head.lines() {
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim();
            if k.eq_ignore_ascii_case("status") {
                status = StatusCode::from_u16(v[..3].parse().unwrap()).unwrap();
            } else {
                resp = resp.header(k.trim(), v);
            }
        }
    }
    resp.status(status)
        .body(axum::body::Body::from(raw[at + sep..].to_vec()))
        .unwrap()
}

/// A server, its admin and alice (granted `level` at `/repos/site`), the remote, the stand-in
/// and the model.
struct Setup {
    _dir: tempfile::TempDir,
    bare: PathBuf,
    forge: StandIn,
    server: Server,
    root: Client,
    alice: Client,
    model: ScriptedServer,
}

async fn setup(level: &str) -> Setup {
    setup_with(level, |_| {}).await
}

async fn setup_with(level: &str, edit: impl FnOnce(&mut llembas_server::Config)) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("remotes/ana/site.git");
    bare_repo(&bare);
    let (_, token) = token_variable();
    let forge = StandIn::start(&bare, &token).await;
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let server = Server::start_with(&dir.path().join("data"), &model.base_url(), edit);
    let mut root = server.admin().await;
    let mut alice = server.user("alice").await;
    let id = alice.get("/api/auth/me").await.1["id"].as_i64().unwrap();
    let (status, body) = root
        .put_json(
            &format!("/api/admin/users/{id}/grants"),
            json!({"grants": [
                {"path": "/home/alice", "level": "stage"},
                {"path": "/repos", "level": "ro"},
                {"path": "/repos/site", "level": level},
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    Setup {
        _dir: dir,
        bare,
        forge,
        server,
        root,
        alice,
        model,
    }
}

impl Setup {
    /// Mounts the remote at `/repos/site`: over smart HTTP with the forge's API (`forge`), or
    /// as a file path with no forge.
    async fn mount(&mut self, forge: bool) -> Value {
        let (var, _) = token_variable();
        let body = if forge {
            json!({"url": self.forge.git_url(), "forge": "forgejo", "api": self.forge.base,
                   "repo": "ana/site", "token_env": var})
        } else {
            json!({"url": format!("file://{}", self.bare.display())})
        };
        let (status, got) = self
            .root
            .put_json("/api/admin/mounts/repos/site", body)
            .await;
        assert_eq!(status, 200, "{got}");
        got
    }

    /// Runs one message of a new auto-mode chat; its id, run and the event stream.
    async fn chat(&mut self) -> (String, super::Events) {
        let stream = self.alice.events(None).await;
        let (status, v) = self.alice.post("/api/chats", json!({"mode": "auto"})).await;
        assert_eq!(status, 201, "{v}");
        (v["id"].as_str().unwrap().to_owned(), stream)
    }

    /// Follows the run to its end, answering every question with what `decide` says of its tool
    /// and subject; answers each question's (tool, subject).
    async fn answering(
        &mut self,
        stream: &mut super::Events,
        run: &str,
        mut decide: impl FnMut(&str, &str) -> &'static str,
    ) -> Vec<(String, String)> {
        let mut asked = Vec::new();
        loop {
            let e = stream.next().await;
            if e.kind() == "tool_call_asked" {
                let q = &e.data["event"]["question"];
                let (tool, subject) = (
                    q["tool"].as_str().unwrap().to_owned(),
                    q["subject"].as_str().unwrap_or("").to_owned(),
                );
                let answer = decide(&tool, &subject);
                let approval = e.data["event"]["approval"].as_str().unwrap().to_owned();
                let (status, body) = self
                    .alice
                    .post(
                        &format!("/api/approvals/{approval}"),
                        json!({"answer": answer}),
                    )
                    .await;
                assert_eq!(status, 200, "{body}");
                asked.push((tool, subject));
            }
            if run_end(run)(&e) {
                return asked;
            }
        }
    }

    /// What the model was told, one tool result per request after the first.
    fn results(&self) -> Vec<String> {
        self.model
            .bodies()
            .iter()
            .skip(1)
            .map(last_tool_result)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_an_admin_mounts_a_repository_and_the_view_lists_it_never_its_git() {
    let mut s = setup("commit").await;
    let (var, token) = token_variable();
    // The token's variable is named, never a token; a URL with a password is refused.
    let (status, body) = s
        .root
        .put_json(
            "/api/admin/mounts/repos/site",
            json!({"url": "https://ana:secret@forge.example/ana/site.git"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(!body.to_string().contains("secret"), "{body}");
    let (status, body) = s
        .root
        .put_json(
            "/api/admin/mounts/home/alice/site",
            json!({"url": s.forge.git_url()}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    // A user may not mount.
    let (status, _) = s
        .alice
        .put_json(
            "/api/admin/mounts/repos/x",
            json!({"url": s.forge.git_url()}),
        )
        .await;
    assert_eq!(status, 403);
    // Over smart HTTP: the token reaches git as basic auth; without it the clone is refused.
    let (status, body) = s
        .root
        .put_json(
            "/api/admin/mounts/repos/nokey",
            json!({"url": s.forge.git_url()}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(!s.server.tree().join("repos/nokey").exists());

    let got = s.mount(true).await;
    assert_eq!(got["state"], "cloned", "{got}");
    assert_eq!(got["token_env"], var.as_str());
    assert_eq!(got["checked_out"], "main");
    assert_eq!(
        got["head"].as_str(),
        ref_sha(&s.bare, "refs/heads/main").as_deref()
    );
    let (status, list) = s.root.get("/api/admin/mounts").await;
    assert_eq!(status, 200);
    assert_eq!(list["mounts"][0]["path"], "/repos/site");
    assert!(
        !list.to_string().contains(&token),
        "the token is never shown"
    );
    let git_config =
        std::fs::read_to_string(s.server.tree().join("repos/site/.git/config")).unwrap();
    assert!(!git_config.contains(&token), "the token is never stored");

    // The chat's `list` shows it as a mount and never its `.git`; `read` cannot reach it.
    s.model
        .push(tool_call("c1", "list", json!({"path": "/repos"})));
    s.model
        .push(tool_call("c2", "list", json!({"path": "/repos/site"})));
    s.model.push(tool_call(
        "c3",
        "read",
        json!({"path": "/repos/site/.git/config"}),
    ));
    s.model.push(text(&["done"]));
    let (chat, mut stream) = s.chat().await;
    let run = s.alice.say(&chat, "look").await;
    stream.until(run_end(&run)).await;
    let results = s.results();
    assert!(results[0].contains("site/ [mount]"), "{results:?}");
    assert!(!results[1].contains(".git"), "{results:?}");
    assert!(results[1].contains("README.md"), "{results:?}");
    assert!(
        results[2].contains("No such file or directory: /repos/site/.git/config"),
        "{results:?}"
    );
    // The forge verbs were offered: the view holds a mount.
    let tools = s.model.bodies()[0]["tools"].to_string();
    for verb in [
        "\"commit\"",
        "\"branch\"",
        "\"pr\"",
        "\"merge\"",
        "\"tag\"",
        "\"release\"",
    ] {
        assert!(tools.contains(verb), "{verb} not offered");
    }

    let (status, _) = s.root.delete("/api/admin/mounts/repos/site").await;
    assert_eq!(status, 200);
    assert_eq!(s.root.get("/api/admin/mounts/repos/site").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_at_stage_a_change_is_staged_and_commit_answers_not_committed() {
    let mut s = setup("stage").await;
    s.mount(false).await;
    s.model.push(tool_call(
        "c1",
        "write",
        json!({"path": "/repos/site/notes.md", "content": "staged\n"}),
    ));
    s.model.push(tool_call(
        "c2",
        "commit",
        json!({"repo": "/repos/site", "message": "Add notes"}),
    ));
    s.model.push(tool_call(
        "c3",
        "commit",
        json!({"repo": "/home/alice", "message": "Nothing"}),
    ));
    s.model.push(text(&["done"]));
    let before = ref_sha(&s.bare, "refs/heads/main");
    let (chat, mut stream) = s.chat().await;
    let run = s.alice.say(&chat, "note it").await;
    stream.until(run_end(&run)).await;
    let results = s.results();
    assert!(
        results[1].contains(
            "Not committed: this session may change /repos/site but not commit it; the change stays staged."
        ),
        "{results:?}"
    );
    assert!(
        results[2].contains("Nothing to commit: /home/alice is not in a repository."),
        "{results:?}"
    );
    // Written to the working tree and staged; nothing committed, nothing pushed.
    let work = Repository::open(s.server.tree().join("repos/site")).unwrap();
    let st = work.status_file(Path::new("notes.md")).unwrap();
    assert!(st.contains(git2::Status::INDEX_NEW), "{st:?}");
    assert_eq!(ref_sha(&s.bare, "refs/heads/main"), before);
    // The Files page's view says the mount's branch, HEAD and what is staged.
    let (status, v) = s.alice.get("/api/view?path=/repos").await;
    assert_eq!(status, 200, "{v}");
    let site = &v["entries"][0];
    assert_eq!(site["name"], "site");
    assert_eq!(site["mount"], true);
    assert_eq!(
        site["git"],
        json!({"branch": "main", "head": before.as_deref().unwrap()[..12], "staged": 1})
    );
    let branches = Repository::open(&s.bare)
        .unwrap()
        .branches(None)
        .unwrap()
        .count();
    assert_eq!(branches, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_at_commit_a_chat_commits_as_the_person_and_pushes_to_its_branch_over_a_file_remote()
{
    let mut s = setup("commit").await;
    s.mount(false).await;
    s.model.push(tool_call(
        "c1",
        "write",
        json!({"path": "/repos/site/notes.md", "content": "one\n"}),
    ));
    s.model.push(tool_call(
        "c2",
        "commit",
        json!({"repo": "/repos/site", "message": "Add notes"}),
    ));
    s.model.push(tool_call(
        "c3",
        "pr",
        json!({"repo": "/repos/site", "title": "Add notes"}),
    ));
    s.model.push(tool_call(
        "c4",
        "branch",
        json!({"repo": "/repos/site", "name": "fix/notes"}),
    ));
    s.model.push(tool_call(
        "c4b",
        "branch",
        json!({"repo": "/repos/site", "name": "elsewhere"}),
    ));
    s.model.push(tool_call(
        "c5",
        "edit",
        json!({"path": "/repos/site/notes.md", "old_string": "one", "new_string": "two"}),
    ));
    s.model.push(tool_call(
        "c6",
        "commit",
        json!({"repo": "/repos/site", "message": "Two"}),
    ));
    s.model.push(text(&["done"]));
    // A branch pushed to the remote by someone else after the clone.
    {
        let bare = Repository::open(&s.bare).unwrap();
        let main = bare.refname_to_id("refs/heads/main").unwrap();
        bare.reference("refs/heads/elsewhere", main, false, "t")
            .unwrap();
    }
    // Another chat's change staged in the shared working tree: never in this chat's commits.
    let work = s.server.tree().join("repos/site");
    std::fs::write(work.join("theirs.md"), "not alice's\n").unwrap();
    {
        let repo = Repository::open(&work).unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("theirs.md")).unwrap();
        index.write().unwrap();
    }
    let (chat, mut stream) = s.chat().await;
    let run = s.alice.say(&chat, "note it").await;
    let asked = s.answering(&mut stream, &run, |_, _| "yes").await;
    let tools: Vec<&str> = asked.iter().map(|(t, _)| t.as_str()).collect();
    for b in [
        "main".to_owned(),
        "fix/notes".into(),
        format!("llembas/{chat}"),
    ] {
        assert!(file_at(&s.bare, &b, "theirs.md").is_none(), "{b}");
    }
    assert!(
        Repository::open(&work)
            .unwrap()
            .index()
            .unwrap()
            .get_path(Path::new("theirs.md"), 0)
            .is_some(),
        "the other change stays staged"
    );
    // The forge verbs ask by default (`spec/permission/defaults.json`), in auto mode too.
    assert_eq!(
        tools,
        ["commit", "branch", "branch", "commit"],
        "pr had no forge: answered, not asked"
    );
    let results = s.results();
    let branch = format!("llembas/{chat}");
    assert!(
        results[1].contains(&format!("on branch {branch}")),
        "{results:?}"
    );
    assert_eq!(
        file_at(&s.bare, &branch, "notes.md").as_deref(),
        Some("one\n")
    );
    let repo = Repository::open(&s.bare).unwrap();
    let c = repo
        .find_reference(&format!("refs/heads/{branch}"))
        .unwrap()
        .peel_to_commit()
        .unwrap();
    assert_eq!(c.author().name().unwrap(), "alice");
    assert_eq!(c.committer().name().unwrap(), "llembas");
    assert_eq!(c.message().unwrap(), "Add notes");
    // No forge: `pr` answers its `unavailable` text word for word.
    assert!(
        results[2].contains(
            "No pull request can be opened now: no repository mounted from a forge is in this chat's view."
        ),
        "{results:?}"
    );
    // `branch` made and pushed fix/notes; the next commit went there.
    assert!(results[3].contains("Made branch fix/notes"), "{results:?}");
    // Fetched first: a branch made on the remote since the clone is known, and refused.
    assert!(
        results[4].contains("Already exists: branch elsewhere"),
        "{results:?}"
    );
    assert_eq!(
        file_at(&s.bare, "fix/notes", "notes.md").as_deref(),
        Some("two\n")
    );
    assert_eq!(
        file_at(&s.bare, &branch, "notes.md").as_deref(),
        Some("one\n")
    );
    assert!(file_at(&s.bare, "main", "notes.md").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_over_smart_http_a_chat_commits_opens_a_pr_and_merges_only_on_a_yes() {
    let mut s = setup("commit").await;
    s.mount(true).await;
    s.model.push(tool_call(
        "c1",
        "write",
        json!({"path": "/repos/site/hello.txt", "content": "hello\n"}),
    ));
    s.model.push(tool_call(
        "c2",
        "commit",
        json!({"repo": "/repos/site", "message": "Add hello"}),
    ));
    s.model.push(tool_call(
        "c3",
        "pr",
        json!({"repo": "/repos/site", "title": "Add hello", "body": "Says hello."}),
    ));
    s.model.push(tool_call(
        "c4",
        "merge",
        json!({"repo": "/repos/site", "number": 1}),
    ));
    s.model.push(tool_call(
        "c5",
        "merge",
        json!({"repo": "/repos/site", "number": 1, "style": "merge"}),
    ));
    s.model.push(text(&["done"]));
    let main_before = ref_sha(&s.bare, "refs/heads/main").unwrap();
    let (chat, mut stream) = s.chat().await;
    let branch = format!("llembas/{chat}");
    let run = s.alice.say(&chat, "ship it").await;

    // `merge` is asked with the exact facts; the first is answered no, and merges nothing.
    let bare = s.bare.clone();
    let mut merges = 0;
    let mut main_at_second = None;
    let asked = s
        .answering(&mut stream, &run, |tool, _| {
            if tool != "merge" {
                return "yes";
            }
            merges += 1;
            if merges == 1 {
                "no"
            } else {
                main_at_second = ref_sha(&bare, "refs/heads/main");
                "yes"
            }
        })
        .await;
    assert_eq!(
        main_at_second.as_deref(),
        Some(main_before.as_str()),
        "a no merged nothing"
    );
    let head = ref_sha(&s.bare, &format!("refs/heads/{branch}"))
        .unwrap_or_else(|| panic!("{branch} not pushed: {:?}", s.results()));
    let merge_subject = format!(
        "merge pull request #1 \"Add hello\" of /repos/site: head {branch} at {head} into base main, style merge"
    );
    let merge_asks: Vec<&str> = asked
        .iter()
        .filter(|(t, _)| t == "merge")
        .map(|(_, s)| s.as_str())
        .collect();
    assert_eq!(merge_asks, [merge_subject.as_str(), merge_subject.as_str()]);

    let results = s.results();
    assert!(results[1].contains("and pushed it"), "{results:?}");
    assert!(
        results[2].contains(&format!(
            "Opened pull request #1: {}/ana/site/pulls/1 ({branch} into main).",
            s.forge.base
        )),
        "{results:?}"
    );
    assert!(results[4].contains("Merged pull request #1"), "{results:?}");
    assert_eq!(
        file_at(&s.bare, "main", "hello.txt").as_deref(),
        Some("hello\n"),
        "the merge moved main"
    );
    assert_ne!(ref_sha(&s.bare, "refs/heads/main").unwrap(), main_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_tag_and_release_are_asked_with_their_commit_and_run_only_on_a_yes() {
    let mut s = setup("commit").await;
    s.mount(true).await;
    s.model.push(tool_call(
        "c1",
        "tag",
        json!({"repo": "/repos/site", "name": "v1.0.0", "message": "First"}),
    ));
    s.model.push(tool_call(
        "c2",
        "tag",
        json!({"repo": "/repos/site", "name": "v1.0.1"}),
    ));
    s.model.push(tool_call(
        "c3",
        "release",
        json!({"repo": "/repos/site", "tag": "v1.0.1", "title": "One", "draft": true}),
    ));
    s.model.push(text(&["done"]));
    let main = ref_sha(&s.bare, "refs/heads/main").unwrap();
    let (chat, mut stream) = s.chat().await;
    let run = s.alice.say(&chat, "tag it").await;
    let mut answers = ["no", "yes", "yes"].into_iter();
    let asked = s
        .answering(&mut stream, &run, |_, _| answers.next().unwrap())
        .await;
    let subjects: Vec<Value> = asked.into_iter().map(|(_, s)| json!(s)).collect();
    assert_eq!(
        subjects,
        vec![
            json!(format!(
                "tag v1.0.0 at commit {main} of /repos/site (annotated, message \"First\"), pushed to the remote"
            )),
            json!(format!(
                "tag v1.0.1 at commit {main} of /repos/site (lightweight), pushed to the remote"
            )),
            json!(format!(
                "release v1.0.1 \"One\" of /repos/site at commit {main}: a draft"
            )),
        ]
    );
    assert!(
        ref_sha(&s.bare, "refs/tags/v1.0.0").is_none(),
        "a no tagged nothing"
    );
    assert_eq!(ref_sha(&s.bare, "refs/tags/v1.0.1"), Some(main));
    let results = s.results();
    assert!(
        results[2].contains("Released v1.0.1") && results[2].contains("(draft)"),
        "{results:?}"
    );
    assert_eq!(s.forge.state.lock().unwrap().releases.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_api_refusals_are_fixed_texts() {
    use llembas_server::forge::ForgeApi;
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("remotes/ana/site.git");
    let repo = bare_repo(&bare);
    let main = repo.refname_to_id("refs/heads/main").unwrap();
    repo.reference("refs/heads/feature", main, false, "t")
        .unwrap();
    let forge = StandIn::start(&bare, "right").await;

    let wrong = ForgeApi::new(&forge.base, "ana/site", Some("wrong".into())).unwrap();
    assert_eq!(
        wrong.get_pr(1).await.unwrap_err(),
        "Refused by the forge: the token is missing, or lacks the scope write:repository for this repository."
    );
    let api = ForgeApi::new(&forge.base, "ana/site", Some("right".into())).unwrap();
    assert_eq!(api.default_branch().await.unwrap(), "main");
    assert_eq!(
        api.get_pr(9).await.unwrap_err(),
        "Not found on the forge: no such pull request in this repository."
    );
    let pr = api.open_pr("feature", "main", "T", "").await.unwrap();
    assert_eq!(pr.number, 1);
    assert_eq!(pr.head.sha, main.to_string());
    // A stale head: 409.
    let stale = "0".repeat(40);
    assert!(
        api.merge_pr(1, "merge", &stale, false)
            .await
            .unwrap_err()
            .starts_with("Not merged: the head branch moved since it was confirmed")
    );
    forge.state.lock().unwrap().archived = true;
    assert_eq!(
        api.merge_pr(1, "merge", &pr.head.sha, false)
            .await
            .unwrap_err(),
        "Refused by the forge: the repository is archived."
    );
    forge.state.lock().unwrap().archived = false;
    api.merge_pr(1, "fast-forward-only", &pr.head.sha, false)
        .await
        .unwrap();
    assert_eq!(
        api.merge_pr(1, "merge", &pr.head.sha, false)
            .await
            .unwrap_err(),
        "Not mergeable: the forge refuses to merge this pull request now (conflicts, failing checks, or already merged). The forge says: pull request is already merged"
    );
}

/// An optional run against a live Forgejo or Gitea: only when FORGE_TEST_URL (the forge's
/// address) and FORGE_TEST_TOKEN are set, with FORGE_TEST_REPO (`OWNER/NAME`, a repository the
/// token may read); otherwise it says it was skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_live_forge_when_one_is_named() {
    let (Ok(url), Ok(token), Ok(repo)) = (
        std::env::var("FORGE_TEST_URL"),
        std::env::var("FORGE_TEST_TOKEN"),
        std::env::var("FORGE_TEST_REPO"),
    ) else {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "skipped: FORGE_TEST_URL, FORGE_TEST_TOKEN and FORGE_TEST_REPO are not all set"
            );
        }
        return;
    };
    let api = llembas_server::forge::ForgeApi::new(&url, &repo, Some(token)).unwrap();
    let branch = api.default_branch().await.unwrap();
    assert!(!branch.is_empty());
    assert!(
        api.get_pr(u64::MAX / 2)
            .await
            .unwrap_err()
            .starts_with("Not found on the forge")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_each_chat_keeps_its_branch_and_staged_work_the_files_page_stages_and_an_admin_fetches()
 {
    // Every chat session is dropped when idle and built again for the next message.
    let mut s = setup_with("commit", |c| c.idle_session = std::time::Duration::ZERO).await;
    s.mount(false).await;
    let work = s.server.tree().join("repos/site");
    // Pushed to the remote after the clone: an admin's fetch moves the clean mount forward.
    let second = commit_on(&s.bare, "main", "CHANGELOG.md", "v2\n");
    assert_eq!(
        s.alice
            .post("/api/admin/mounts/repos/site", json!({}))
            .await
            .0,
        403
    );
    let (status, v) = s.root.post("/api/admin/mounts/repos/site", json!({})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["fetched"], json!({"moved": true, "behind": 0}), "{v}");
    assert_eq!(v["head"], second.as_str());
    assert_eq!(
        std::fs::read_to_string(work.join("CHANGELOG.md")).unwrap(),
        "v2\n"
    );

    // Chat A stages a file in one message and commits it in the next.
    s.model.push(tool_call(
        "a1",
        "write",
        json!({"path": "/repos/site/a.md", "content": "a\n"}),
    ));
    s.model.push(text(&["written"]));
    let (a, mut stream) = s.chat().await;
    let run = s.alice.say(&a, "write a").await;
    s.answering(&mut stream, &run, |_, _| "yes").await;
    // The Files page writes into the mount: staged, as no chat's change.
    let (status, v) = s
        .alice
        .put(
            "/api/files/content?path=/repos/site/page.md",
            "from the page\n",
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let st = Repository::open(&work)
        .unwrap()
        .status_file(Path::new("page.md"))
        .unwrap();
    assert!(st.contains(git2::Status::INDEX_NEW), "{st:?}");
    s.model.push(tool_call(
        "a2",
        "commit",
        json!({"repo": "/repos/site", "message": "A"}),
    ));
    s.model.push(text(&["done"]));
    let run = s.alice.say(&a, "commit it").await;
    s.answering(&mut stream, &run, |_, _| "yes").await;
    let branch_a = format!("llembas/{a}");
    assert_eq!(file_at(&s.bare, &branch_a, "a.md").as_deref(), Some("a\n"));
    assert!(file_at(&s.bare, &branch_a, "page.md").is_none());
    assert_eq!(parent_of(&s.bare, &branch_a), second);

    // Chat B removes a file and switches to a branch of its own; its next message commits the
    // removal and the page's file by naming them.
    s.model.push(tool_call(
        "b1",
        "rm",
        json!({"path": "/repos/site/README.md"}),
    ));
    s.model.push(tool_call(
        "b2",
        "branch",
        json!({"repo": "/repos/site", "name": "feat/b"}),
    ));
    s.model.push(text(&["ok"]));
    let (b, mut stream) = s.chat().await;
    let run = s.alice.say(&b, "remove it").await;
    s.answering(&mut stream, &run, |_, _| "yes").await;
    s.model.push(tool_call(
        "b3",
        "commit",
        json!({"repo": "/repos/site", "message": "B",
               "paths": ["/repos/site/README.md", "/repos/site/page.md"]}),
    ));
    s.model.push(text(&["done"]));
    let run = s.alice.say(&b, "commit it").await;
    s.answering(&mut stream, &run, |_, _| "yes").await;
    // Every tool result the model was sent, in order.
    let results: Vec<String> = s
        .model
        .bodies()
        .iter()
        .flat_map(|b| b["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        results.iter().any(|r| r.contains("on branch feat/b")),
        "{results:?}"
    );
    // B's branch holds its changes on the remote's main, and nothing of chat A's.
    assert!(file_at(&s.bare, "feat/b", "README.md").is_none());
    assert_eq!(
        file_at(&s.bare, "feat/b", "page.md").as_deref(),
        Some("from the page\n")
    );
    assert!(file_at(&s.bare, "feat/b", "a.md").is_none(), "A's commit");
    assert_eq!(parent_of(&s.bare, "feat/b"), second);
    assert!(ref_sha(&s.bare, &format!("refs/heads/llembas/{b}")).is_none());
    // The mount stays on its branch; with changes in it, a fetch moves nothing and says so.
    let repo = Repository::open(&work).unwrap();
    assert_eq!(repo.head().unwrap().shorthand().unwrap(), "main");
    assert_eq!(
        repo.head()
            .unwrap()
            .peel_to_commit()
            .unwrap()
            .id()
            .to_string(),
        second
    );
    commit_on(&s.bare, "main", "CHANGELOG.md", "v3\n");
    let (status, v) = s.root.post("/api/admin/mounts/repos/site", json!({})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["fetched"], json!({"moved": false, "behind": 1}), "{v}");
    assert_eq!(v["head"], second.as_str());
    assert_eq!(std::fs::read_to_string(work.join("a.md")).unwrap(), "a\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_a_mounts_token_is_read_only_from_a_variable_the_operator_allowed() {
    // The server's default: only variables named LLEMBAS_FORGE_… may be sent to a remote.
    let mut s = setup_with("commit", |c| {
        c.forge_token_prefix = llembas_server::FORGE_TOKEN_PREFIX.into();
    })
    .await;
    let url = format!("file://{}", s.bare.display());
    let (var, _) = token_variable();
    let (status, body) = s
        .root
        .put_json(
            "/api/admin/mounts/repos/site",
            json!({"url": url, "token_env": var}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string().contains(&format!(
            "token_env {var} does not start with LLEMBAS_FORGE_"
        )),
        "{body}"
    );
    assert!(!s.server.tree().join("repos/site").exists());
    let (status, body) = s
        .root
        .put_json(
            "/api/admin/mounts/repos/site",
            json!({"url": url, "token_env": "LLEMBAS_FORGE_SITE"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["token_env"], "LLEMBAS_FORGE_SITE");
}
