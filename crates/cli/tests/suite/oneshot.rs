//! One-shot runs (`-p`) against the scripted model server.

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_text_and_saves_the_session() {
    let server = ScriptedServer::start(vec![text(&["Hello", " there."])])
        .await
        .unwrap();
    let sb = Sandbox::new();
    let run = sb.run(&server.base_url(), &["-p", "say hello"], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Hello there.\n");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 1);
    let m = messages(&bodies[0]);
    assert_eq!(m[0]["role"], "system");
    assert!(
        m[0]["content"]
            .as_str()
            .unwrap()
            .contains(&sb.root().display().to_string())
    );
    assert_eq!(m[1], json!({"role": "user", "content": "say hello"}));
    assert_eq!(bodies[0]["model"], "scripted");
    let t = sb.transcript();
    assert_eq!(t.first().unwrap()["type"], "turn_started");
    assert_eq!(t.last().unwrap()["type"], "turn_ended");
}
