//! The chats' `search` over the server's tree (issue 18): two users sharing a tree, the index
//! in the database (reopened, the same answers; a file changed is cut again, an unchanged one
//! not), the view applied after scoring.

use std::sync::Arc;

use harness_fs::{Access, Backend as _, Expect, Level, MemoryBackend, VPath, View};
use llembas_server::search::{ServerSearch, TREE_ROOT, answer_text, changed_paths, load};

const FILES: &[(&str, &str)] = &[
    (
        "/shared/auth.md",
        "# Sign-in\n\nFailed sign-ins are counted per account.\nAfter five failed attempts the account is locked.\n",
    ),
    (
        "/shared/budget.md",
        "# Budget\n\nThe quarterly budget for hosting is 400 euros.\n",
    ),
    (
        "/home/alice/incident.md",
        "Incident: failed sign-in attempts locked the admin account.\nfailed failed sign-in account locked\n",
    ),
];

fn tree() -> Arc<MemoryBackend> {
    let tree = Arc::new(MemoryBackend::new());
    for (path, text) in FILES {
        tree.add_file(&VPath::parse(path), *text).unwrap();
    }
    tree
}

fn view(tree: &Arc<MemoryBackend>, user: &str) -> View {
    View::new(
        tree.clone(),
        Access::new()
            .grant("/shared", Level::Ro)
            .grant(&format!("/home/{user}"), Level::Commit),
    )
    .with_cwd(&format!("/home/{user}"))
}

fn paths(a: &harness_search::Answer) -> Vec<&str> {
    a.hits.iter().map(|h| h.path.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_sharing_a_tree_search_what_they_may_read_and_the_index_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let pool = llembas_server::db::open(&llembas_server::db::sqlite_url(
        &dir.path().join("db.sqlite"),
    ))
    .await
    .unwrap();
    let tree = tree();
    let search = ServerSearch::open(pool.clone(), TREE_ROOT, None)
        .await
        .unwrap();
    for (path, _) in FILES {
        search.file_changed(tree.as_ref(), path).await.unwrap();
    }
    let (alice, bob) = (view(&tree, "alice"), view(&tree, "bob"));
    let query = "failed sign-in attempts lock the account";
    let a = search.search(&alice, query, None, 10).unwrap();
    let b = search.search(&bob, query, None, 10).unwrap();
    assert_eq!(paths(&a)[0], "/home/alice/incident.md", "{:?}", paths(&a));
    assert!(
        !paths(&b).contains(&"/home/alice/incident.md"),
        "{:?}",
        paths(&b)
    );
    assert_eq!(paths(&b)[0], "/shared/auth.md");
    // Bob's answer is the one of a tree that never had Alice's file: not its order, not its
    // scores changed.
    let dir2 = tempfile::tempdir().unwrap();
    let pool2 = llembas_server::db::open(&llembas_server::db::sqlite_url(
        &dir2.path().join("db.sqlite"),
    ))
    .await
    .unwrap();
    let alone = ServerSearch::open(pool2, TREE_ROOT, None).await.unwrap();
    for (path, _) in &FILES[..2] {
        alone.file_changed(tree.as_ref(), path).await.unwrap();
    }
    assert_eq!(alone.search(&bob, query, None, 10).unwrap(), b);
    // Without the embedder the answer says it ranked by words alone.
    let text = answer_text(&b);
    assert!(text.starts_with("/shared/auth.md:1-4 (score "), "{text}");
    assert!(text.contains("ranked by words alone"), "{text}");
    // `path` keeps the search inside a directory.
    let within = search
        .search(&alice, "account", Some("/shared"), 10)
        .unwrap();
    assert_eq!(paths(&within), vec!["/shared/auth.md"]);

    // The rows: reopened from the database, the same answers.
    let again = ServerSearch::open(pool.clone(), TREE_ROOT, None)
        .await
        .unwrap();
    assert_eq!(again.search(&alice, query, None, 10).unwrap(), a);
    // A changed file is cut again (its new words found, the old gone); a removed one leaves.
    tree.write(
        &VPath::parse("/shared/budget.md"),
        b"# Budget\n\nThe zeppelin fund is spent.\n",
        &Expect::Any,
    )
    .unwrap();
    again
        .file_changed(tree.as_ref(), "/shared/budget.md")
        .await
        .unwrap();
    assert_eq!(
        paths(&again.search(&bob, "zeppelin", None, 10).unwrap()),
        vec!["/shared/budget.md"]
    );
    assert!(
        again
            .search(&bob, "quarterly", None, 10)
            .unwrap()
            .hits
            .is_empty()
    );
    tree.trash(&VPath::parse("/shared/auth.md")).unwrap();
    again
        .file_changed(tree.as_ref(), "/shared/auth.md")
        .await
        .unwrap();
    let rows = load(&pool, TREE_ROOT).await.unwrap();
    let stored: Vec<&str> = rows.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(stored, vec!["/home/alice/incident.md", "/shared/budget.md"]);
    assert!(rows[1].pieces[0].text.contains("zeppelin"));
}

#[test]
fn the_paths_a_file_tool_changed() {
    use serde_json::json;
    assert_eq!(
        changed_paths("write", &json!({"path": "a.md", "content": ""})),
        vec!["a.md"]
    );
    assert_eq!(
        changed_paths("mv", &json!({"from": "a", "to": "b"})),
        vec!["a", "b"]
    );
    assert_eq!(
        changed_paths(
            "apply_patch",
            &json!({"patch": "*** Begin Patch\n*** Update File: x.rs\n@@\n-a\n+b\n*** Delete File: y.rs\n*** End Patch\n"})
        ),
        vec!["x.rs", "y.rs"]
    );
    assert!(changed_paths("read", &json!({"path": "a.md"})).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_searches_what_its_tools_wrote_and_never_another_users_file() {
    use super::{Server, run_end, text, tool_call};
    use harness_test_support::ScriptedServer;
    use serde_json::json;
    let model = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "write",
            json!({"path": "hangar.md", "content": "The zeppelin hangar opens at dawn.\n"}),
        ),
        tool_call("c2", "search", json!({"query": "zeppelin hangar"})),
        text(&["Found it."]),
        // Bob's chat: the same search.
        tool_call("c3", "search", json!({"query": "zeppelin hangar"})),
        text(&["Nothing."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "write and find it").await;
    let asked = stream.until(|e| e.kind() == "tool_call_asked").await;
    let approval = asked.last().unwrap().data["event"]["approval"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = alice
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "yes"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let rest = stream.until(run_end(&run)).await;
    let results: Vec<String> = rest
        .iter()
        .filter(|e| e.kind() == "tool_call_finished")
        .map(|e| e.data["event"]["result"].to_string())
        .collect();
    assert!(
        results
            .iter()
            .any(|r| r.contains("/home/alice/hangar.md:1-1")),
        "{results:?}"
    );
    let bodies = model.bodies();
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"search"), "{tools:?}");

    let mut bob = server.user("bob").await;
    let mut stream = bob.events(None).await;
    let chat = bob.chat().await;
    let run = bob.say(&chat, "find it").await;
    let rest = stream.until(run_end(&run)).await;
    let found = rest
        .iter()
        .find(|e| e.kind() == "tool_call_finished")
        .map(|e| e.data["event"]["result"].to_string())
        .unwrap();
    assert!(!found.contains("hangar.md"), "{found}");
    assert!(found.contains("No passages found."), "{found}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_is_indexed_for_the_chats_search() {
    use super::{Server, run_end, text, tool_call};
    use harness_test_support::ScriptedServer;
    use serde_json::json;
    let model = ScriptedServer::start(vec![
        tool_call("c1", "search", json!({"query": "zeppelin hangar"})),
        text(&["Found it."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let (status, body) = alice
        .put(
            "/api/files/content?path=/home/alice/up.md",
            "The zeppelin hangar opens at dawn.\n",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "find it").await;
    let rest = stream.until(run_end(&run)).await;
    let found = rest
        .iter()
        .find(|e| e.kind() == "tool_call_finished")
        .map(|e| e.data["event"]["result"].to_string())
        .unwrap();
    assert!(found.contains("/home/alice/up.md:1-1"), "{found}");
}

/// What `user`'s view of the server's tree finds for `query` (the chats' search, without the
/// chat).
fn found(server: &super::Server, grant: &str, query: &str) -> Vec<String> {
    let view = View::new(
        server.app.backend.clone(),
        Access::new().grant(grant, Level::Ro),
    );
    server
        .app
        .search
        .search(&view, query, None, 10)
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.path)
        .collect()
}

/// The files the server's index holds in its rows, with their text.
async fn indexed(server: &super::Server) -> Vec<(String, String)> {
    load(&server.app.pool, TREE_ROOT)
        .await
        .unwrap()
        .into_iter()
        .map(|f| {
            let text: String = f.pieces.iter().map(|p| p.text.as_str()).collect();
            (f.path, text.trim_end().to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_on_disk_is_indexed_at_start_and_an_admin_rebuilds_the_index() {
    use super::Server;
    use harness_test_support::ScriptedServer;
    use serde_json::json;
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("files/shared");
    std::fs::create_dir_all(shared.join("notes")).unwrap();
    std::fs::write(
        shared.join("before.md"),
        "The zeppelin hangar opens at dawn.\n",
    )
    .unwrap();
    std::fs::write(
        shared.join("notes/gone.md"),
        "The walrus choir sings on Sundays.\n",
    )
    .unwrap();
    // Files on disk before the server ever started are indexed at start, in the background.
    let server = Server::start(dir.path(), &model.base_url());
    server.app.search.settled().await;
    assert_eq!(
        found(&server, "/shared", "zeppelin hangar")[0],
        "/shared/before.md"
    );
    assert_eq!(
        found(&server, "/shared", "walrus choir")[0],
        "/shared/notes/gone.md"
    );
    // What changes on disk while the server is down is indexed at the next start (by content
    // hash: the changed file cut again, the removed one forgotten).
    server.crash();
    std::fs::write(
        shared.join("before.md"),
        "The blimp garage closes at dusk.\n",
    )
    .unwrap();
    std::fs::remove_dir_all(shared.join("notes")).unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    server.app.search.settled().await;
    assert_eq!(
        found(&server, "/shared", "blimp garage")[0],
        "/shared/before.md"
    );
    let rows = indexed(&server).await;
    assert_eq!(
        rows,
        [(
            "/shared/before.md".to_string(),
            "The blimp garage closes at dusk.".to_string()
        )]
    );

    // A file put on disk behind the server's back is found once an admin rebuilds the index;
    // a user may not.
    std::fs::write(
        shared.join("behind.md"),
        "The narwhal ferry leaves at noon.\n",
    )
    .unwrap();
    assert!(!found(&server, "/shared", "narwhal ferry").contains(&"/shared/behind.md".to_string()));
    let mut alice = server.user("alice").await;
    let (status, body) = alice.post("/api/admin/search/rebuild", json!({})).await;
    assert_eq!(status, 403, "{body}");
    let mut root = server.admin().await;
    let (status, body) = root.post("/api/admin/search/rebuild", json!({})).await;
    assert_eq!(status, 202, "{body}");
    server.app.search.settled().await;
    assert_eq!(
        found(&server, "/shared", "narwhal ferry")[0],
        "/shared/behind.md"
    );
    assert_eq!(
        found(&server, "/shared", "blimp garage")[0],
        "/shared/before.md"
    );
    // Alice still sees only what her view holds.
    let view = View::new(
        server.app.backend.clone(),
        Access::new().grant("/home/alice", Level::Commit),
    );
    assert!(
        server
            .app
            .search
            .search(&view, "narwhal ferry", None, 10)
            .unwrap()
            .hits
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_moved_is_found_under_its_new_name_and_not_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let pool = llembas_server::db::open(&llembas_server::db::sqlite_url(
        &dir.path().join("db.sqlite"),
    ))
    .await
    .unwrap();
    let tree = tree();
    tree.mkdir(&VPath::parse("/home/alice/docs")).unwrap();
    tree.add_file(
        &VPath::parse("/home/alice/docs/plan.md"),
        "The zeppelin hangar opens at dawn.\n",
    )
    .unwrap();
    let search = ServerSearch::open(pool.clone(), TREE_ROOT, None)
        .await
        .unwrap();
    search
        .file_changed(tree.as_ref(), "/home/alice/docs/plan.md")
        .await
        .unwrap();
    let alice = view(&tree, "alice");
    assert_eq!(
        paths(&search.search(&alice, "zeppelin hangar", None, 10).unwrap()),
        vec!["/home/alice/docs/plan.md"]
    );
    // `mv docs papers`: the chat's hook tells the index of both paths the call names.
    tree.rename(
        &VPath::parse("/home/alice/docs"),
        &VPath::parse("/home/alice/papers"),
    )
    .unwrap();
    let args = serde_json::json!({"from": "/home/alice/docs", "to": "/home/alice/papers"});
    for p in changed_paths("mv", &args) {
        search.file_changed(tree.as_ref(), &p).await.unwrap();
    }
    assert_eq!(
        paths(&search.search(&alice, "zeppelin hangar", None, 10).unwrap()),
        vec!["/home/alice/papers/plan.md"]
    );
    // The rows too.
    let rows = load(&pool, TREE_ROOT).await.unwrap();
    let stored: Vec<&str> = rows.iter().map(|f| f.path.as_str()).collect();
    assert!(stored.contains(&"/home/alice/papers/plan.md"), "{stored:?}");
    assert!(!stored.contains(&"/home/alice/docs/plan.md"), "{stored:?}");
}

/// The query is embedded before the index is locked: a search whose index is held by another
/// (a file being put in, another search ranking) embeds its query meanwhile, and ranks once the
/// index is let go. Counted in texts embedded, not timed.
#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn a_search_embeds_its_query_while_the_index_is_held_embedder() {
    let Some(model) = llembas_server::search::embedder_dir() else {
        panic!("LLEMBAS_EMBEDDER_DIR is not set: run with `cargo xtask test`");
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tree = tree();
    let search = rt.block_on(async {
        let pool = llembas_server::db::open(&llembas_server::db::sqlite_url(
            &dir.path().join("db.sqlite"),
        ))
        .await
        .unwrap();
        let search = ServerSearch::open(pool, TREE_ROOT, Some(&model))
            .await
            .unwrap();
        for (path, _) in FILES {
            search.file_changed(tree.as_ref(), path).await.unwrap();
        }
        Arc::new(search)
    });
    let embedder = search.embedder().unwrap();
    let held = search.lock().unwrap();
    let before = embedder.embedded();
    let (s2, bob) = (search.clone(), view(&tree, "bob"));
    let other = std::thread::spawn(move || {
        s2.search(&bob, "failed sign-in attempts lock the account", None, 10)
            .unwrap()
    });
    let since = std::time::Instant::now();
    while embedder.embedded() == before {
        assert!(
            since.elapsed() < std::time::Duration::from_secs(120),
            "the search did not embed its query while the index was held"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(held);
    let answer = other.join().unwrap();
    assert_eq!(paths(&answer)[0], "/shared/auth.md");
    assert!(answer.note.is_none(), "{:?}", answer.note);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_the_tree_is_indexed_at_start_an_upload_is_found_and_the_rows_kept() {
    use super::Server;
    use harness_test_support::ScriptedServer;
    let url = super::postgres::Postgres::get().database("search").await;
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("files/shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(
        shared.join("before.md"),
        "The zeppelin hangar opens at dawn.\n",
    )
    .unwrap();
    let server = Server::start_on(dir.path(), &model.base_url(), Some(&url));
    server.app.search.settled().await;
    assert_eq!(
        found(&server, "/shared", "zeppelin hangar")[0],
        "/shared/before.md"
    );
    let mut alice = server.user("alice").await;
    let (status, body) = alice
        .put(
            "/api/files/content?path=/home/alice/up.md",
            "The narwhal ferry leaves at noon.\n",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        found(&server, "/home/alice", "narwhal ferry")[0],
        "/home/alice/up.md"
    );
    // The rows in PostgreSQL: reopened from them, the same answers.
    let pool = llembas_server::db::open(&url).await.unwrap();
    let rows = load(&pool, TREE_ROOT).await.unwrap();
    let stored: Vec<&str> = rows.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(stored, vec!["/home/alice/up.md", "/shared/before.md"]);
    let again = ServerSearch::open(pool, TREE_ROOT, None).await.unwrap();
    let shared_view = View::new(
        server.app.backend.clone(),
        Access::new().grant("/shared", Level::Ro),
    );
    assert_eq!(
        paths(
            &again
                .search(&shared_view, "zeppelin hangar", None, 10)
                .unwrap()
        ),
        vec!["/shared/before.md"]
    );
}
