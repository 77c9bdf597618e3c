//! A chat's world: the server's tree through the user's view (`harness-fs`), the file tools
//! (`harness-agent`), `mkdir`/`mv`/`rm` to the trash, and the user's memory and skills; no shell.
//! Paths are the view's own (`/home/NAME/notes.md`), both ways.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::db::Db;
use harness_agent::personal::PersonalTools;
use harness_agent::{BoxFuture, CallContext, FileTools, Ran, ShownFile, ToolWorld, ViewPaths};
use harness_core::protocol::ToolCall;
use harness_fs::{Access, Backend, Level, View};
use harness_loop::session::ToolOutcome;
use harness_spec::Project;

use crate::error::{Error, Result};

/// The grants a new user gets: their home directory to change, `/shared` to read.
pub fn default_grants(username: &str) -> Vec<(String, Level)> {
    vec![
        (format!("/home/{username}"), Level::Stage),
        ("/shared".to_owned(), Level::Ro),
    ]
}

/// Stores a new user's default grants and makes their home directory.
pub async fn give_default_grants(
    pool: &Db,
    tree: &std::path::Path,
    user_id: i64,
    username: &str,
) -> Result<()> {
    for (path, level) in default_grants(username) {
        sqlx::query("INSERT INTO grants (user_id, path, level) VALUES ($1, $2, $3)")
            .bind(user_id)
            .bind(&path)
            .bind(level.as_str())
            .execute(pool)
            .await?;
    }
    let home = tree.join("home").join(username);
    std::fs::create_dir_all(&home).map_err(|e| {
        Error::Fs(harness_fs::Error::Io {
            path: home.display().to_string(),
            message: e.to_string(),
        })
    })?;
    Ok(())
}

/// A user's home directory in the tree.
pub fn home(username: &str) -> String {
    format!("/home/{username}")
}

/// The account whose home `path` is in (`/home/NAME` or below), when that is not `username`'s:
/// no grant opens another user's home, whoever set it.
pub fn others_home(path: &str, username: &str) -> Option<String> {
    let p = harness_fs::VPath::parse(path);
    let mut parts = p.components();
    match (parts.next(), parts.next()) {
        (Some("home"), Some(name)) if name != username => Some(name.to_owned()),
        _ => None,
    }
}

/// A user's grants, outermost first; a grant inside another user's home (one set before the
/// rule, or written to the database by hand) is left out.
pub async fn user_grants(pool: &Db, user_id: i64, username: &str) -> Result<Vec<(String, Level)>> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT path, level FROM grants WHERE user_id = $1")
            .bind(user_id)
            .fetch_all(pool)
            .await?;
    let mut grants = rows
        .into_iter()
        .filter(|(p, _)| others_home(p, username).is_none())
        .map(|(p, l)| Ok((p, Level::parse(&l)?)))
        .collect::<Result<Vec<_>>>()?;
    grants.sort_by(|a, b| harness_fs::VPath::parse(&a.0).cmp(&harness_fs::VPath::parse(&b.0)));
    Ok(grants)
}

/// The names of every account but `user_id`.
async fn other_usernames(pool: &Db, user_id: i64) -> Result<Vec<String>> {
    Ok(
        sqlx::query_scalar("SELECT username FROM users WHERE id <> $1")
            .bind(user_id)
            .fetch_all(pool)
            .await?,
    )
}

/// The grants of a chat made narrower than its user's view (none: the user's view whole).
pub async fn chat_grants(pool: &Db, chat: &str) -> Result<Vec<(String, Level)>> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT path, level FROM chat_grants WHERE chat_id = $1 ORDER BY path")
            .bind(chat)
            .fetch_all(pool)
            .await?;
    rows.into_iter()
        .map(|(p, l)| Ok((p, Level::parse(&l)?)))
        .collect()
}

/// `view` made narrower by a chat's grants: at each path the lower of the user's level and the
/// chat's (its most specific grant; none where it grants nothing) — the chat's grants are the
/// spec's floors over the user's view, so a chat never reaches more than its user.
pub fn narrowed(view: View, chat: &[(String, Level)]) -> View {
    if chat.is_empty() {
        return view;
    }
    let mut access = view.access().clone().floor("/", Level::None);
    for (path, level) in chat {
        access = access.floor(path, *level);
    }
    let cwd = view.cwd().to_string();
    View::new(view.backend().clone(), access).with_cwd(&cwd)
}

/// The grants a chat's model is told of: each path the user or the chat grants, at the level the
/// chat has there, those at none left out.
pub fn effective_grants(
    view: &View,
    user: &[(String, Level)],
    chat: &[(String, Level)],
) -> Vec<(String, Level)> {
    let mut paths: Vec<&String> = user.iter().chain(chat).map(|(p, _)| p).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|p| {
            let level = view.access().level(&harness_fs::VPath::parse(p));
            (level > Level::None).then(|| (p.clone(), level))
        })
        .collect()
}

/// The view of a user: their grants over the server's tree, starting in their home directory.
pub async fn user_view(
    pool: &Db,
    backend: &Arc<dyn Backend>,
    user_id: i64,
    username: &str,
) -> Result<View> {
    let grants = user_grants(pool, user_id, username).await?;
    let mut access = Access::new();
    for (path, level) in &grants {
        access = access.grant(path, *level);
    }
    for mount in crate::mounts::paths(pool).await? {
        access = access.mount(&mount);
    }
    // A grant over all of `/home` (at `/` or `/home` itself) stops at every other user's home.
    let homes = harness_fs::VPath::parse("/home");
    if grants
        .iter()
        .any(|(p, l)| *l > Level::None && homes.starts_with(&harness_fs::VPath::parse(p)))
    {
        for other in other_usernames(pool, user_id).await? {
            access = access.grant(&home(&other), Level::None);
        }
    }
    Ok(View::new(backend.clone(), access).with_cwd(&home(username)))
}

/// The `{{grants}}` of `blocks/workspace.md`: one line per grant, outermost first, `- PATH —
/// LEVEL`, ` [mount]` after a mount, the passage note after a grant below a path at none.
pub fn grants_text(view: &View, grants: &[(String, Level)]) -> String {
    grants
        .iter()
        .map(|(path, level)| {
            let p = harness_fs::VPath::parse(path);
            let mut line = format!("- {p} — {}", level.as_str());
            if view.access().is_mount(&p) {
                line.push_str(" [mount]");
            }
            if p.ancestors()
                .into_iter()
                .any(|a| a != p && view.access().level(&a) == Level::None)
            {
                line.push_str(" (passage: reached only by this full path)");
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One chat's tools.
pub struct ChatWorld {
    view: View,
    grants: String,
    files: FileTools,
    personal: PersonalTools,
    /// `web_fetch` from the server, public addresses only; made on its first call.
    web: std::sync::OnceLock<Result<harness_web::WebFetch, harness_web::Error>>,
    /// The server's search index (`search`), where the server keeps one.
    search: Option<Arc<crate::search::ServerSearch>>,
    /// The forge verbs over the mounts of the view (`commit`, `branch`, `pr`, ...).
    forge: Option<Arc<crate::verbs::ChatForge>>,
}

impl ChatWorld {
    /// The world of a chat on `view`, with the user's memory file and skills directory.
    pub fn new(view: View, grants: String, memory: PathBuf, skills: PathBuf) -> ChatWorld {
        ChatWorld {
            view,
            grants,
            files: FileTools::new(),
            personal: PersonalTools {
                library: None,
                scope: None,
                memory: Some(memory),
                user_skills: Some(skills),
            },
            web: std::sync::OnceLock::new(),
            search: None,
            forge: None,
        }
    }

    /// The chat runs the forge verbs over the mounts of its view, and stages what its file
    /// tools change inside them.
    pub fn with_forge(mut self, forge: crate::verbs::ChatForge) -> ChatWorld {
        self.forge = Some(Arc::new(forge));
        self
    }

    /// The chat answers `search` from `index`, and tells it of every file its tools change.
    pub fn with_search(mut self, index: Arc<crate::search::ServerSearch>) -> ChatWorld {
        self.search = Some(index);
        self
    }

    /// `search`: the best passages of the files this chat's view can read.
    fn search(&self, call: &ToolCall, search: &crate::search::ServerSearch) -> ToolOutcome {
        let a = &call.arguments;
        let Some(query) = a.get("query").and_then(serde_json::Value::as_str) else {
            return ToolOutcome::error(&call.id, "search: `query` is missing");
        };
        let within = a.get("path").and_then(serde_json::Value::as_str);
        let limit = a
            .get("limit")
            .and_then(serde_json::Value::as_u64)
            .map_or(10, |n| n.clamp(1, 50) as usize);
        match search.search(&self.view, query, within, limit) {
            Ok(answer) => ToolOutcome::ok(&call.id, crate::search::answer_text(&answer)),
            Err(e) => ToolOutcome::error(&call.id, format!("search: {e}")),
        }
    }

    /// `path` as the view names it, from where the chat works.
    pub fn resolve(&self, path: &str) -> String {
        self.view.resolve(path).as_str().to_owned()
    }

    /// A whole text file `python` reads, recorded as read (so the run may replace it).
    pub fn read_for_program(&self, path: &str) -> std::result::Result<String, String> {
        self.files
            .read_for_program(&self.view, &ViewPaths, path)
            .map(|(_, text)| text)
    }

    /// Whether `python` may replace `path` (not there, or read at its current version).
    pub fn check_program_save(&self, path: &str) -> std::result::Result<(), String> {
        self.files.check_program_save(&self.view, &ViewPaths, path)
    }

    /// Keeps a file `python` wrote, as `write` keeps one (levels, read before replaced), and
    /// tells the search index.
    pub async fn save_for_program(
        &self,
        path: &str,
        bytes: &[u8],
    ) -> std::result::Result<(), String> {
        let saved = tokio::task::block_in_place(|| {
            self.files
                .save_for_program(&self.view, &ViewPaths, path, bytes)
        })?;
        if let Some(forge) = &self.forge {
            // Saved inside a mount: staged, as a file tool's change is.
            forge
                .stage_changed(&self.view, &[saved.as_str().to_owned()])
                .await
                .map_err(|e| format!("{} is saved but not staged: {e}", saved.as_str()))?;
        }
        if let Some(search) = &self.search
            && let Err(e) = search
                .file_changed(self.view.backend().as_ref(), saved.as_str())
                .await
        {
            // The file is kept whatever the index does; a failure is logged.
            tracing::warn!("search index: {}: {e}", saved.as_str());
        }
        Ok(())
    }

    fn run_sync(&self, call: &ToolCall) -> ToolOutcome {
        if let Some(out) = self.files.run(&self.view, &ViewPaths, call) {
            return out;
        }
        let mut out = self.personal.run(&self.view, call).unwrap_or_else(|| {
            ToolOutcome::error(&call.id, format!("{} cannot run in a chat", call.name))
        });
        out.call_id = call.id.clone();
        out
    }
}

impl ToolWorld for ChatWorld {
    fn runs(&self, name: &str) -> bool {
        FileTools::NAMES.contains(&name)
            || FileTools::TREE.contains(&name)
            || name == "web_fetch"
            || (name == "search" && self.search.is_some())
            || (self.forge.is_some() && crate::verbs::VERBS.contains(&name))
            || self.personal.runs(name)
    }

    fn call<'a>(&'a self, call: &'a ToolCall, cx: CallContext) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            if call.name == "web_fetch" {
                let web = self.web.get_or_init(|| {
                    harness_web::WebFetch::new(Project::Llembas, harness_web::Reach::Public)
                });
                let fetched = match web {
                    Ok(web) => web.fetch(&call.arguments, &cx.cancel).await,
                    Err(e) => Err(e.clone()),
                };
                return Ran::Done(match fetched {
                    Ok(text) => ToolOutcome::ok(&call.id, text),
                    Err(e) => ToolOutcome::error(&call.id, e.to_string()),
                });
            }
            if let (Some(search), "search") = (&self.search, call.name.as_str()) {
                return Ran::Done(tokio::task::block_in_place(|| self.search(call, search)));
            }
            if let Some(forge) = &self.forge
                && crate::verbs::VERBS.contains(&call.name.as_str())
            {
                return Ran::Done(forge.call(&self.view, call).await);
            }
            let mut out = tokio::task::block_in_place(|| self.run_sync(call));
            if let Some(forge) = &self.forge
                && !out.is_error
            {
                let changed = crate::search::changed_paths(&call.name, &call.arguments);
                if let Err(e) = forge.stage_changed(&self.view, &changed).await {
                    out.output
                        .push_str(&format!("\n(The change is written but not staged: {e})"));
                }
            }
            if let Some(search) = &self.search
                && !out.is_error
            {
                for path in crate::search::changed_paths(&call.name, &call.arguments) {
                    let path = self.view.resolve(&path);
                    // The answer stands whatever the index does; a failure is logged.
                    if let Err(e) = search
                        .file_changed(self.view.backend().as_ref(), path.as_str())
                        .await
                    {
                        tracing::warn!("search index: {}: {e}", path.as_str());
                    }
                }
            }
            Ran::Done(out)
        })
    }

    fn values(&self) -> BTreeMap<String, String> {
        let mut values = BTreeMap::new();
        values.insert("cwd".into(), self.view.cwd().to_string());
        values.insert("grants".into(), self.grants.clone());
        if self.forge.as_ref().is_some_and(|f| f.holds(&self.view)) {
            values.insert(harness_agent::FORGE.into(), "true".into());
        }
        if let Some(m) = &self.personal.memory {
            values.insert(
                "memory_entries".into(),
                harness_agent::personal::memory_entries(m),
            );
        }
        values
    }

    fn read_for_show(
        &self,
        path: &str,
    ) -> std::result::Result<ShownFile, harness_agent::SeamError> {
        self.files.read_for_show(&self.view, &ViewPaths, path)
    }

    /// `AGENTS.md` (else `CLAUDE.md`) of each directory from the view's root down to where the
    /// chat works, as the spec stacks them; what the view does not show counts as absent.
    fn instructions(&self) -> Vec<harness_core::prompt::InstructionFile> {
        let start = self.view.cwd().to_string();
        match harness_fs::instructions::stack(
            &self.view,
            &start,
            harness_fs::instructions::DEFAULT_BUDGET,
        ) {
            Ok(stacked) => stacked.for_prompt(),
            Err(e) => {
                tracing::warn!("the instruction files from {start}: {e}");
                Vec::new()
            }
        }
    }

    fn subject<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            match &self.forge {
                Some(forge) => forge.subject(&self.view, call).await,
                None => None,
            }
        })
    }

    fn precheck(&self, call: &ToolCall) -> Option<String> {
        if let Some(forge) = &self.forge
            && crate::verbs::VERBS.contains(&call.name.as_str())
        {
            return forge.precheck(&self.view, call);
        }
        self.files
            .precheck(&self.view, &ViewPaths, call)
            .map(|out| out.output)
    }

    fn resolve(&self, path: &str) -> String {
        ChatWorld::resolve(self, path)
    }

    fn place(&self) -> String {
        self.view.cwd().to_string()
    }
}

/// The memory file of a user.
pub fn memory_path(data: &std::path::Path, user_id: i64) -> std::path::PathBuf {
    data.join("memory").join(format!("{user_id}.json"))
}
