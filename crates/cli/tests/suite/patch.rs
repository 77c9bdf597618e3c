//! `apply_patch` end to end: a patch over files the session read, answered with the diffs; a
//! patch over a file it did not read changes nothing.

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_a_patch_to_files_it_read() {
    let sb = Sandbox::new();
    sb.write(
        "src/app.py",
        "def handle(request):\n    user = load(request)\n    return render(user)\n",
    );
    sb.write("old.py", "x = 1\n");
    sb.write("unread.txt", "keep\n");
    let root = sb.root();
    let app = root.join("src/app.py").display().to_string();
    let patch = format!(
        "*** Begin Patch\n*** Add File: docs/usage.md\n+# Usage\n*** Update File: {app}\n*** Move to: src/main.py\n@@ def handle(request):\n     user = load(request)\n-    return render(user)\n+    return render(user, request.locale)\n*** Delete File: old.py\n*** End Patch"
    );
    let refused = "*** Begin Patch\n*** Add File: more.md\n+more\n*** Update File: unread.txt\n-keep\n+changed\n*** End Patch";
    let server = ScriptedServer::start(vec![
        calls(&[
            ("r1", "read", json!({"path": "src/app.py"})),
            ("r2", "read", json!({"path": "old.py"})),
        ]),
        tool_call("p1", "apply_patch", json!({"patch": patch})),
        tool_call("p2", "apply_patch", json!({"patch": refused})),
        text(&["Patched."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "patch it"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(sb.read("docs/usage.md"), "# Usage\n");
    assert_eq!(
        sb.read("src/main.py"),
        "def handle(request):\n    user = load(request)\n    return render(user, request.locale)\n"
    );
    assert!(!root.join("src/app.py").exists());
    assert!(!root.join("old.py").exists());
    // The second patch touched a file the session never read: nothing of it was written.
    assert_eq!(sb.read("unread.txt"), "keep\n");
    assert!(!root.join("more.md").exists());
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 4);
    let results = tool_results(&bodies[2]);
    let answer = results.last().unwrap();
    let main = root.join("src/main.py").display().to_string();
    assert!(
        answer.contains(&format!("Moved {app} to {main}.")),
        "{answer}"
    );
    assert!(
        answer.contains("+    return render(user, request.locale)"),
        "{answer}"
    );
    assert!(
        answer.contains(&format!("Added {}.", root.join("docs/usage.md").display())),
        "{answer}"
    );
    assert!(
        answer.contains(&format!("Deleted {}.", root.join("old.py").display())),
        "{answer}"
    );
    let refusal = tool_results(&bodies[3]).last().unwrap().clone();
    assert!(refusal.contains("Not read"), "{refusal}");
    assert!(refusal.contains("unread.txt"), "{refusal}");
}
