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
