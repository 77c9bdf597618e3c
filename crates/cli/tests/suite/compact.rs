//! Compaction: `/compact` in the terminal, and compaction and one retry when the model's server
//! says the context overflowed.

use std::time::Duration;

use expectrl::Expect as _;
use harness_test_support::{Reply, ScriptedServer};
use serde_json::{Value, json};

use super::*;

fn compaction() -> Value {
    harness_spec::Spec::embedded().json("loop.json").unwrap()["context"]["compaction"].clone()
}

/// The summary request: the whole conversation, then the spec's request, no tool may be called.
fn assert_summary_request(body: &Value, history: &[&str]) {
    let m = messages(body);
    let last = m.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"], compaction()["request"]);
    assert!(body.get("tools").is_none(), "no tools offered: {body}");
    let all = serde_json::to_string(&m).unwrap();
    for h in history {
        assert!(all.contains(h), "{h:?} not in the summary request: {all}");
    }
}

/// After compaction the model sees the system text, then the summary with the table of reads.
fn assert_compacted(body: &Value, summary: &str, read: &str) -> String {
    let m = messages(body);
    assert_eq!(m[0]["role"], "system");
    assert_eq!(m[1]["role"], "user");
    let text = m[1]["content"].as_str().unwrap().to_owned();
    let head = compaction()["summary"]
        .as_str()
        .unwrap()
        .replace("{summary}", summary);
    assert!(text.starts_with(&head), "{text}");
    let heading = compaction()["table_heading"].as_str().unwrap().to_owned();
    assert!(text.contains(&heading), "{text}");
    assert!(text.contains(&format!("| {read} | 1-2 |")), "{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_compacts_and_sends_again() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\nbeta\n");
    let a = sb.root().join("a.txt").display().to_string();
    let server = ScriptedServer::start(vec![
        tool_call("c1", "read", json!({"path": "a.txt"})),
        Reply::error(413, "the request exceeds the maximum context length"),
        text(&["The task: read a.txt. ", "It holds alpha and beta."]),
        tool_call("c2", "read", json!({"path": "a.txt"})),
        text(&["Finished."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["-p", "read a.txt and say what it holds"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.ends_with("Finished.\n"), "{run:?}");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 5, "{bodies:#?}");
    assert_summary_request(&bodies[2], &["read a.txt and say what it holds", "alpha"]);
    assert_compacted(
        &bodies[3],
        "The task: read a.txt. It holds alpha and beta.",
        &a,
    );
    assert_eq!(messages(&bodies[3]).len(), 2);
    // The dedupe table is empty: the same read again is inserted whole, not as a stub.
    let again = tool_results(&bodies[4]);
    assert_eq!(again.len(), 1);
    assert!(
        again[0].contains("alpha") && again[0].contains("beta"),
        "{again:?}"
    );
    let t = sb.transcript();
    assert_eq!(t.iter().filter(|e| e["type"] == "compacted").count(), 1);
    assert_eq!(t.last().unwrap()["type"], "turn_ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_compact_in_the_terminal() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\nbeta\n");
    let a = sb.root().join("a.txt").display().to_string();
    let server = ScriptedServer::start(vec![
        tool_call("c1", "read", json!({"path": "a.txt"})),
        text(&["It holds alpha and beta."]),
        text(&["We read a.txt: alpha and beta."]),
        text(&["Still alpha."]),
    ])
    .await
    .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut s = terminal_session(&root, &home, &url, "auto");
        s.expect("auto ›").unwrap();
        s.send("what is in a.txt?\r").unwrap();
        s.expect("It holds alpha and beta.").unwrap();
        s.expect("auto ›").unwrap();
        s.send("/compact\r").unwrap();
        s.expect("compacted: ").unwrap();
        s.expect("auto ›").unwrap();
        s.send("and now?\r").unwrap();
        s.expect("Still alpha.").unwrap();
        s.expect("auto ›").unwrap();
        s.send("/quit\r").unwrap();
        s.expect("saved (llembas --resume ").unwrap();
    })
    .await
    .unwrap();
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 4, "{bodies:#?}");
    assert_summary_request(
        &bodies[2],
        &["what is in a.txt?", "It holds alpha and beta."],
    );
    let text = assert_compacted(&bodies[3], "We read a.txt: alpha and beta.", &a);
    // The next prompt follows the summary (consecutive user messages go as one).
    assert_eq!(messages(&bodies[3]).len(), 2);
    assert!(text.ends_with("\n\nand now?"), "{text}");
    assert!(!text.contains("It holds alpha and beta."), "{text}");
    let t = sb.transcript();
    assert_eq!(t.iter().filter(|e| e["type"] == "compacted").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_near_the_window_is_compacted_first() {
    let sb = Sandbox::new();
    // Two files of 250 lines of 130 characters, about 8,400 tokens each: with the system text
    // and the tools, past 80 % of a 25,000-token window after both reads, below the whole window.
    let big: String = (0..250).map(|i| format!("{i:>129}\n")).collect();
    sb.write("one.txt", &big);
    sb.write("two.txt", &big);
    let server = ScriptedServer::start(vec![
        calls(&[
            ("c1", "read", json!({"path": "one.txt"})),
            ("c2", "read", json!({"path": "two.txt"})),
        ]),
        text(&["Both files hold numbered lines."]),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    std::fs::write(
        sb.home.path().join("config.toml"),
        format!(
            "default_endpoint = \"local\"\n[endpoints.local]\nbase_url = \"{}\"\nmodel = \"scripted\"\ncontext = 25000\noutput = 200\n",
            server.base_url()
        ),
    )
    .unwrap();
    let mut cmd = sb.command("", &["-p", "what is in one.txt and two.txt?"]);
    cmd.env_remove("OPENAI_BASE_URL").env_remove("OPENAI_MODEL");
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.ends_with("Done.\n"), "{stdout}");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3, "{bodies:#?}");
    assert_summary_request(
        &bodies[1],
        &["what is in one.txt and two.txt?", "                  249"],
    );
    let m = messages(&bodies[2]);
    assert_eq!(m.len(), 2);
    let summary = m[1]["content"].as_str().unwrap();
    assert!(
        summary.contains("Both files hold numbered lines."),
        "{summary}"
    );
    for f in ["one.txt", "two.txt"] {
        let p = sb.root().join(f).display().to_string();
        assert!(summary.contains(&format!("| {p} | 1-250 |")), "{summary}");
    }
}
