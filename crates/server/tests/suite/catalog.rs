//! The harness as a chat sees it: the spec's version, and the tools a chat is offered, from the
//! runtime; `/` is the app.

use harness_spec::Spec;
use harness_test_support::ScriptedServer;
use serde_json::json;

use super::{Client, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_a_chat_is_offered_come_from_its_runtime_and_root_is_the_app() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pyodide/314.0.7")).unwrap();
    std::fs::write(dir.path().join("pyodide/314.0.7/pyodide.mjs"), "").unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut anon = Client::anonymous(&server.base);
    let (_, spec) = anon.get("/api/spec").await;
    assert_eq!(spec["version"], "3.3.0-draft");
    assert_eq!(spec["sha256"], Spec::embedded().sha256());
    let (status, _) = anon.get("/api/tools?mode=manual").await;
    assert_eq!(status, 401);

    // The names offered, those behind the loader (deferred: `- NAME:` in its description)
    // included, as the model gets them.
    let names = |v: &serde_json::Value| -> Vec<String> {
        let mut names = Vec::new();
        for t in v["tools"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap().to_string();
            if name == "load_tools" {
                for line in t["description"].as_str().unwrap().lines() {
                    if let Some(rest) = line.strip_prefix("- ")
                        && let Some((deferred, _)) = rest.split_once(':')
                    {
                        names.push(deferred.to_string());
                    }
                }
            }
            names.push(name);
        }
        names
    };
    let mut alice = server.user("alice").await;
    let (status, manual) = alice.get("/api/tools?mode=manual").await;
    assert_eq!(status, 200, "{manual}");
    let plain = names(&manual);
    // Earlier chats are searched too (deferred).
    for name in [
        "read",
        "write",
        "mkdir",
        "rm",
        "web_fetch",
        "memory",
        "session_search",
    ] {
        assert!(plain.contains(&name.to_string()), "{name}: {plain:?}");
    }
    // Only what the chat's runtime answers: no shell, no forge verbs or web search it cannot
    // run, no page tools without a page, the plan's end only in plan mode.
    for name in [
        "bash",
        "pr",
        "merge",
        "commit",
        "web_search",
        "python",
        "show",
        "plan_submit",
    ] {
        assert!(!plain.contains(&name.to_string()), "{name}: {plain:?}");
    }
    let (_, plan) = alice.get("/api/tools?mode=plan").await;
    assert!(names(&plan).contains(&"plan_submit".to_string()));
    let (status, _) = alice.get("/api/tools?mode=reckless").await;
    assert_eq!(status, 400);

    // A chat with a page open is offered the page's tools, in the chat's own mode.
    let chat = alice.chat().await;
    let _page = super::pages::page_stream(&alice, &chat).await;
    let (_, offered) = alice.get(&format!("/api/tools?chat={chat}")).await;
    assert_eq!(offered["mode"], "manual");
    assert_eq!(offered["page"], json!(true));
    let with_page = names(&offered);
    assert!(with_page.contains(&"python".to_string()), "{with_page:?}");
    // Another user's chat is not found.
    let mut bob = server.user("bob").await;
    let (status, _) = bob.get(&format!("/api/tools?chat={chat}")).await;
    assert_eq!(status, 404);

    // `/` is the app's page (sign-in or the chats), with the pages' strict CSP.
    let r = anon
        .http
        .get(format!("{}/", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.starts_with("default-src 'self'"), "{csp}");
    let body = r.text().await.unwrap();
    assert!(!body.contains("spec"), "{body}");
    assert!(body.contains("<script"), "{body}");
}
