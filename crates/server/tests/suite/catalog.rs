//! The harness as a chat sees it: the spec's version and the tools a chat is offered.

use harness_spec::Spec;
use harness_test_support::ScriptedServer;

use super::{Client, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_and_tools_as_a_chat_sees_them() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut c = Client::anonymous(&server.base);
    let (_, spec) = c.get("/api/spec").await;
    assert_eq!(spec["version"], "3.2.0-draft");
    assert_eq!(spec["sha256"], Spec::embedded().sha256());

    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, plain) = c.get("/api/tools?mode=manual").await;
    let plain = names(&plain);
    assert!(plain.contains(&"read".to_string()), "{plain:?}");
    assert!(plain.contains(&"mkdir".to_string()), "{plain:?}");
    assert!(
        !plain.contains(&"bash".to_string()),
        "bash is never in a chat: {plain:?}"
    );
    assert!(
        !plain.contains(&"python".to_string()),
        "python needs a page: {plain:?}"
    );
    assert!(
        !plain.contains(&"plan_submit".to_string()),
        "plan_submit only in plan mode"
    );

    let (_, full) = c
        .get("/api/tools?mode=plan&page=true&display=true&forge=true")
        .await;
    let full = names(&full);
    for name in ["show", "commit", "merge", "plan_submit"] {
        assert!(
            full.contains(&name.to_string()),
            "{name} missing from {full:?}"
        );
    }
    assert!(
        !full.contains(&"python".to_string()),
        "no Pyodide is served, so no page runs Python"
    );

    let (status, _) = c.get("/api/tools?mode=reckless").await;
    assert_eq!(status, 400);

    let (status, page) = c.get("/").await;
    assert_eq!(status, 200);
    let page = page.as_str().unwrap();
    assert!(page.contains("3.2.0-draft"), "{page}");
    assert!(page.contains("plan mode"), "{page}");
}
