//! Chats: a write that asks and is approved lands in the user's tree; the stream cut and
//! resumed with Last-Event-ID loses and repeats nothing; stop; a crash mid-run leaves the run
//! interrupted and the transcript whole; no user reaches another's chats, runs or approvals.

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::postgres::Postgres;
use super::{Server, run_end, text, tool_call};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_asks_and_is_approved_lands_in_the_users_tree() {
    write_approved(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_write_that_asks_and_is_approved_lands_in_the_users_tree() {
    write_approved(Some(Postgres::get().database("write_approved").await)).await;
}

async fn write_approved(db: Option<String>) {
    let model = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "write",
            json!({"path": "notes.md", "content": "hello from the chat\n"}),
        ),
        text(&["Wrote ", "notes.md."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_on(dir.path(), &model.base_url(), db.as_deref());
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "write me a note").await;

    let asked = stream.until(|e| e.kind() == "tool_call_asked").await;
    let ask = asked.last().unwrap();
    assert_eq!(ask.data["chat"], chat);
    assert_eq!(ask.data["run"], run);
    let approval = ask.data["event"]["approval"].as_str().unwrap().to_owned();
    assert!(!server.tree().join("home/alice/notes.md").exists());

    // Another user cannot answer it; an unknown answer is refused.
    let mut bob = server.user("bob").await;
    let (status, body) = bob
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "yes"}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = alice
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "maybe"}),
        )
        .await;
    assert_eq!(status, 400);

    let (status, body) = alice
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "yes"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = alice
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "yes"}),
        )
        .await;
    assert_eq!(status, 409, "answered once only");

    let rest = stream.until(run_end(&run)).await;
    assert_eq!(rest.last().unwrap().data["event"]["status"], "finished");
    let finished = rest
        .iter()
        .find(|e| e.kind() == "tool_call_finished")
        .unwrap();
    assert_eq!(
        finished.data["event"]["result"]["is_error"], false,
        "{:?}",
        finished.data
    );
    assert_eq!(
        std::fs::read_to_string(server.tree().join("home/alice/notes.md")).unwrap(),
        "hello from the chat\n"
    );
    let (status, file) = alice
        .get("/api/files/content?path=/home/alice/notes.md")
        .await;
    assert_eq!(status, 200);
    assert_eq!(file["content"], "hello from the chat\n");

    // The chat as stored: its messages and events, numbered 1, 2, … without a gap.
    let (status, got) = alice.get(&format!("/api/chats/{chat}")).await;
    assert_eq!(status, 200);
    assert!(
        got["title"]
            .as_str()
            .unwrap()
            .starts_with("write me a note")
    );
    assert!(!got["messages"].as_array().unwrap().is_empty());
    let seqs: Vec<i64> = got["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    let (_, list) = alice.get("/api/chats").await;
    assert_eq!(list.as_array().unwrap().len(), 1);

    // Bob sees none of it.
    assert_eq!(bob.get(&format!("/api/chats/{chat}")).await.0, 404);
    assert_eq!(bob.get("/api/chats").await.1, json!([]));
    let (status, _) = bob
        .post(
            &format!("/api/chats/{chat}/messages"),
            json!({"text": "hi"}),
        )
        .await;
    assert_eq!(status, 404);
    // The model's request carried the chat's tools: file tools, no bash.
    let body = &model.bodies()[0];
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"write") && tools.contains(&"mkdir"),
        "{tools:?}"
    );
    assert!(!tools.contains(&"bash"), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_cut_and_resumed_loses_and_repeats_nothing_and_stop_stops() {
    stream_resumed(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_the_stream_cut_and_resumed_loses_and_repeats_nothing_and_stop_stops() {
    stream_resumed(Some(Postgres::get().database("stream_resumed").await)).await;
}

async fn stream_resumed(db: Option<String>) {
    let model = ScriptedServer::start(vec![
        text(&["one ", "two ", "three ", "four ", "five."]),
        text(&["Still ", "going"]).stalling(),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_on(dir.path(), &model.base_url(), db.as_deref());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let mut bobs = bob.events(None).await;
    let chat = alice.chat().await;

    let mut stream = alice.events(None).await;
    let run = alice.say(&chat, "count").await;
    // Read a few events, then cut the stream.
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(stream.next().await);
    }
    drop(stream);
    let last = seen.last().unwrap().id;
    let mut stream = alice.events(Some(last)).await;
    seen.extend(stream.until(run_end(&run)).await);

    // Stored a moment after they were sent: read once the log's writer has caught up.
    llembas_server::chats::flush(&server.app.pool).await;
    let all: Vec<i64> = sqlx::query_scalar("SELECT id FROM events WHERE chat_id = $1 ORDER BY id")
        .bind(&chat)
        .fetch_all(&server.app.pool)
        .await
        .unwrap();
    let got: Vec<i64> = seen.iter().map(|e| e.id).collect();
    assert_eq!(got, all, "every event once, in order");
    let said: String = seen
        .iter()
        .filter(|e| e.kind() == "text_delta")
        .map(|e| e.data["event"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(said, "one two three four five.");

    // A second run stalls mid-answer; stop ends it (also a busy chat refuses a second message).
    let run2 = alice.say(&chat, "go on").await;
    stream.until(|e| e.kind() == "text_delta").await;
    let (status, _) = alice
        .post(
            &format!("/api/chats/{chat}/messages"),
            json!({"text": "more"}),
        )
        .await;
    assert_eq!(status, 409);
    let (status, _) = bob.post(&format!("/api/runs/{run2}/stop"), json!({})).await;
    assert_eq!(status, 404, "bob cannot stop alice's run");
    let (status, body) = alice
        .post(&format!("/api/runs/{run2}/stop"), json!({}))
        .await;
    assert_eq!(status, 202, "{body}");
    let end = stream.until(run_end(&run2)).await;
    assert_eq!(end.last().unwrap().data["event"]["status"], "stopped");
    let (status, _) = alice
        .post(&format!("/api/runs/{run2}/stop"), json!({}))
        .await;
    assert_eq!(status, 409, "an ended run");

    // Bob's stream carried none of alice's events: a marker of his own comes first.
    let bobs_chat = bob.chat().await;
    let (status, _) = bob
        .post(
            &format!("/api/chats/{bobs_chat}/messages"),
            json!({"text": ""}),
        )
        .await;
    assert_eq!(status, 400);
    drop(bobs);
    bobs = bob.events(None).await;
    let _ = &mut bobs;
    // Stored a moment after they were sent: read once the log's writer has caught up.
    llembas_server::chats::flush(&server.app.pool).await;
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM events WHERE user_id = (SELECT id FROM users WHERE username = 'bob')",
    )
    .fetch_one(&server.app.pool)
    .await
    .unwrap();
    assert_eq!(n, 0, "bob has no events, so his stream has none to send");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_run_leaves_it_interrupted_and_the_transcript_whole() {
    crash(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_crash_mid_run_leaves_it_interrupted_and_the_transcript_whole() {
    crash(Some(Postgres::get().database("crash").await)).await;
}

async fn crash(db: Option<String>) {
    let model = ScriptedServer::start(vec![tool_call(
        "c1",
        "write",
        json!({"path": "a.txt", "content": "x"}),
    )])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_on(dir.path(), &model.base_url(), db.as_deref());
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "write a.txt").await;
    let seen = stream.until(|e| e.kind() == "tool_call_asked").await;
    let seen_last = seen.iter().map(|e| e.id).max().unwrap();
    drop(stream);
    server.crash();

    let server = Server::start_on(dir.path(), &model.base_url(), db.as_deref());
    let mut alice = server.login("alice", "alice-password").await;
    // On SQLite the restart marks it at once; on PostgreSQL once the dead one's lease ran out.
    // The stream goes on after what the first one saw.
    let mut stream = alice.events(Some(seen_last)).await;
    stream.until(run_end(&run)).await;
    drop(stream);
    let (_, got) = alice.get(&format!("/api/chats/{chat}")).await;
    assert_eq!(got["running"], json!(null));
    let events = got["events"].as_array().unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        last["event"],
        json!({"type": "run_ended", "run": run, "status": "interrupted"})
    );
    // The open call got its result in the transcript, and the cut turn was closed.
    let transcript = got["messages"].as_array().unwrap();
    let kinds: Vec<&str> = transcript
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    let at = kinds.iter().position(|k| *k == "tool_result");
    assert!(at.is_some(), "the asked call has a result: {kinds:?}");
    assert_eq!(kinds.last(), Some(&"turn_ended"), "{kinds:?}");

    // The chat goes on after the restart.
    model.push(text(&["Back."]));
    let mut stream = alice.events(Some(last["id"].as_i64().unwrap())).await;
    let run2 = alice.say(&chat, "again").await;
    let end = stream.until(run_end(&run2)).await;
    assert_eq!(end.last().unwrap().data["event"]["status"], "finished");
    // No id a stream was given before the crash is given again (on SQLite an event reaches the
    // streams a moment before it is stored; the ids are reserved ahead).
    let first = end.iter().map(|e| e.id).min().unwrap();
    assert!(first > seen_last, "{first} after {seen_last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_while_the_answer_streams_keeps_what_the_person_saw_of_it() {
    let model = ScriptedServer::start(vec![text(&["Half ", "an answer"]).stalling()])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "tell me").await;
    let mut shown = String::new();
    let mut seen = 0;
    while shown != "Half an answer" {
        let got = stream.until(|e| e.kind() == "text_delta").await;
        seen = got.last().unwrap().id;
        shown.push_str(got.last().unwrap().data["event"]["text"].as_str().unwrap());
    }
    // What reached the stream is stored before the crash (on SQLite a moment after it is sent).
    chats_flush(&server).await;
    drop(stream);
    server.crash();

    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.login("alice", "alice-password").await;
    let mut stream = alice.events(Some(seen)).await;
    stream.until(run_end(&run)).await;
    let (_, got) = alice.get(&format!("/api/chats/{chat}")).await;
    let transcript = got["messages"].as_array().unwrap();
    let kinds: Vec<&str> = transcript
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.last(), Some(&"turn_ended"), "{transcript:?}");
    let said = &transcript[transcript.len() - 2];
    assert_eq!(said["type"], "assistant", "{transcript:?}");
    assert_eq!(said["text"], "Half an answer", "{transcript:?}");

    // The model is told what it had said when the chat goes on.
    model.push(text(&["Go on."]));
    let run2 = alice.say(&chat, "go on").await;
    stream.until(run_end(&run2)).await;
    let messages = model.bodies().last().unwrap()["messages"].clone();
    assert!(
        messages
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == "Half an answer"),
        "{messages}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_follows_the_users_agents_md_and_searches_their_earlier_chats_only() {
    let model = ScriptedServer::start(vec![
        text(&["We chose the blue-green deploy."]),
        tool_call("s1", "session_search", json!({"query": "deploy"})),
        text(&["Found it."]),
        tool_call("s2", "session_search", json!({"query": "deploy"})),
        text(&["Nothing."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    std::fs::write(
        server.tree().join("home/alice/AGENTS.md"),
        "Answer in French.\n",
    )
    .unwrap();
    std::fs::write(server.tree().join("home/bob/AGENTS.md"), "Bob's rules.\n").unwrap();
    let mut stream = alice.events(None).await;
    let first = alice.chat().await;
    let run = alice.say(&first, "how do we deploy?").await;
    stream.until(run_end(&run)).await;
    let system = model.bodies()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("## /home/alice/AGENTS.md\n\nAnswer in French."),
        "{system}"
    );
    assert!(!system.contains("Bob's rules"), "{system}");

    // A later chat finds what the first said.
    let second = alice.chat().await;
    let run = alice.say(&second, "what did we decide?").await;
    stream.until(run_end(&run)).await;
    let result = super::last_tool_result(&model.bodies()[2]);
    assert!(
        result.contains("model: We chose the blue-green deploy."),
        "{result}"
    );
    assert!(result.contains("how do we deploy?"), "{result}");
    assert!(result.contains(&first), "{result}");

    // Another user's search finds none of it.
    let mut bobs = bob.events(None).await;
    let chat = bob.chat().await;
    let run = bob.say(&chat, "what did alice decide?").await;
    bobs.until(run_end(&run)).await;
    let result = super::last_tool_result(&model.bodies()[4]);
    assert!(!result.contains("blue-green"), "{result}");
    let system = model.bodies()[3]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("Bob's rules."), "{system}");
    assert!(!system.contains("French"), "{system}");
}

/// Waits until the server's event log has stored what it was given.
async fn chats_flush(server: &Server) {
    server.app.hub.flush().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chats_session_lives_while_it_runs_or_a_page_shows_it_and_is_built_again_after() {
    let model = ScriptedServer::start(vec![text(&["One."]), text(&["Two."]), text(&["Three."])])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &model.base_url(), |c| {
        c.idle_session = std::time::Duration::from_secs(2);
    });
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    // Chats made and never used hold nothing in memory once idle a while.
    let mut chats = Vec::new();
    for _ in 0..20 {
        chats.push(alice.chat().await);
    }
    wait_until(|| server.app.chats.is_empty()).await;
    // A run's session goes when the run ends (no page shows the chat).
    let chat = chats[0].clone();
    let run = alice.say(&chat, "first").await;
    stream.until(run_end(&run)).await;
    wait_until(|| server.app.chats.is_empty()).await;
    // Built again from the database, the chat goes on with its history.
    let run = alice.say(&chat, "second").await;
    stream.until(run_end(&run)).await;
    let body = model.bodies().last().unwrap().clone();
    assert!(
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == "One."),
        "{body}"
    );
    wait_until(|| server.app.chats.is_empty()).await;
    // While a page shows the chat its session stays; when the page goes, so does it.
    let page = super::pages::page_stream(&alice, &chat).await;
    let run = alice.say(&chat, "third").await;
    stream.until(run_end(&run)).await;
    assert_eq!(server.app.chats.len(), 1);
    drop(page);
    wait_until(|| server.app.chats.is_empty()).await;
    // Deleted chats leave nothing behind at once, idle or not.
    let more = [alice.chat().await, alice.chat().await];
    assert_eq!(server.app.chats.len(), 2);
    for c in chats.iter().chain(&more) {
        let (status, body) = alice.delete(&format!("/api/chats/{c}")).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(server.app.chats.len(), 0);
}

/// Waits (a minute at most) until `f` holds.
async fn wait_until(f: impl Fn() -> bool) {
    for _ in 0..600 {
        if f() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the condition did not hold within a minute");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_fetches_no_address_of_the_servers_own_network_and_asks_with_the_diff() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let inside = format!("{}/models", model.base_url());
    model.push(tool_call("c1", "web_fetch", json!({"url": inside})));
    model.push(text(&["Cannot."]));
    model.push(tool_call(
        "c2",
        "write",
        json!({"path": "new.md", "content": "one\n"}),
    ));
    model.push(text(&["Asked."]));
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;

    let run = alice.say(&chat, "fetch the model list").await;
    let events = stream.until(run_end(&run)).await;
    let finished = events
        .iter()
        .find(|e| e.kind() == "tool_call_finished")
        .expect("the call is answered");
    let result = &finished.data["event"]["result"];
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["content"].as_str().unwrap().ends_with(&format!(
            "web_fetch: {inside} is on the server's own network; it is not fetched"
        )),
        "{result}"
    );

    // The permission question of a write shows the change it would make.
    let run = alice.say(&chat, "write a file").await;
    let asked = stream.until(|e| e.kind() == "tool_call_asked").await;
    let question = &asked.last().unwrap().data["event"]["question"];
    assert_eq!(
        question["change"], "--- /dev/null\n+++ /home/alice/new.md\n@@ -0,0 +1 @@\n+one\n",
        "{question}"
    );
    let approval = asked.last().unwrap().data["event"]["approval"]
        .as_str()
        .unwrap()
        .to_owned();
    alice
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "no"}),
        )
        .await;
    stream.until(run_end(&run)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_runs_at_once_store_every_event_once_numbered_without_a_gap_per_chat() {
    many_runs(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_many_runs_at_once_store_every_event_once_numbered_without_a_gap_per_chat() {
    many_runs(Some(Postgres::get().database("many_runs").await)).await;
}

async fn many_runs(db: Option<String>) {
    let replies = (0..12).map(|_| text(&["a ", "b ", "c ", "d."])).collect();
    let model = ScriptedServer::start(replies).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_on(dir.path(), &model.base_url(), db.as_deref());
    let mut tasks = Vec::new();
    for name in ["alice", "bob"] {
        let mut c = server.user(name).await;
        let mut stream = c.events(None).await;
        let mut runs = Vec::new();
        let mut chats = Vec::new();
        for _ in 0..6 {
            chats.push(c.chat().await);
        }
        for chat in &chats {
            runs.push(c.say(chat, "count").await);
        }
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut ended = 0;
            while ended < runs.len() {
                let e = stream.next().await;
                if e.kind() == "run_ended" {
                    ended += 1;
                }
                seen.push(e);
            }
            (name, chats, seen)
        }));
    }
    for t in tasks {
        let (name, chats, seen) = t.await.unwrap();
        let ids: Vec<i64> = seen.iter().map(|e| e.id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{name}: {ids:?}");
        assert!(
            seen.iter()
                .all(|e| chats.contains(&e.data["chat"].as_str().unwrap().to_owned())),
            "{name}'s stream holds only {name}'s events"
        );
        for chat in &chats {
            let seqs: Vec<i64> = seen
                .iter()
                .filter(|e| e.data["chat"] == chat.as_str())
                .map(|e| e.data["seq"].as_i64().unwrap())
                .collect();
            assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
            // Stored a moment after they were sent: read once the log's writer has caught up.
            llembas_server::chats::flush(&server.app.pool).await;
            let stored: Vec<i64> =
                sqlx::query_scalar("SELECT seq FROM events WHERE chat_id = $1 ORDER BY id")
                    .bind(chat)
                    .fetch_all(&server.app.pool)
                    .await
                    .unwrap();
            assert_eq!(stored, seqs, "stored as sent");
            let said: String = seen
                .iter()
                .filter(|e| e.data["chat"] == chat.as_str() && e.kind() == "text_delta")
                .map(|e| e.data["event"]["text"].as_str().unwrap())
                .collect();
            assert_eq!(said, "a b c d.");
        }
    }
}

/// Appends `n` events of the user `user_id` to `chat` through the event log; the last's id.
async fn notes(server: &Server, user_id: i64, chat: &str, n: usize) -> i64 {
    let mut last = 0;
    for i in 0..n {
        let stored = server
            .app
            .hub
            .append(user_id, chat, None, json!({"type": "note", "n": i}))
            .await
            .unwrap();
        last = stored.id;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_replays_what_last_event_id_asks_for_and_no_more_than_its_bound() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let id = alice.get("/api/auth/me").await.1["id"].as_i64().unwrap();
    let chat = alice.chat().await;
    let second = notes(&server, id, &chat, 2).await;
    notes(&server, id, &chat, 1).await;

    // Asking for nothing, a stream sends nothing old: its first event is a new one.
    let mut fresh = alice.events(None).await;
    let new = notes(&server, id, &chat, 1).await;
    assert_eq!(fresh.next().await.id, new);
    // The chat says where a page's stream goes on from.
    let (_, got) = alice.get(&format!("/api/chats/{chat}?messages=0")).await;
    assert_eq!(got["stream_after"], new);

    // Asking after an event, it replays what came after it.
    let mut resumed = alice.events(Some(second)).await;
    let replayed: Vec<i64> = vec![resumed.next().await.id, resumed.next().await.id];
    assert_eq!(replayed, vec![second + 1, new]);

    // Asking for more than the bound, it says to read the state again, then goes on live.
    let newest = notes(
        &server,
        id,
        &chat,
        llembas_server::chats::REPLAY_MAX as usize + 5,
    )
    .await;
    let mut behind = alice.events(Some(new)).await;
    let reset = behind.next().await;
    assert_eq!(reset.kind(), "stream_reset", "{:?}", reset.data);
    assert_eq!(reset.id, newest);
    let live = notes(&server, id, &chat, 1).await;
    assert_eq!(behind.next().await.id, live);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_stream_past_the_cap_closes_their_oldest_and_no_one_elses() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let alice_id = alice.get("/api/auth/me").await.1["id"].as_i64().unwrap();
    let bob_id = bob.get("/api/auth/me").await.1["id"].as_i64().unwrap();
    let alices_chat = alice.chat().await;
    let bobs_chat = bob.chat().await;
    let mut bobs = bob.events(None).await;
    let mut streams = Vec::new();
    for _ in 0..llembas_server::streams::MAX_STREAMS {
        streams.push(alice.events(None).await);
    }
    let mut newest = alice.events(None).await;
    let said = streams[0].ends().await;
    assert!(
        said.contains("event: closed") && said.contains("too_many_streams"),
        "{said}"
    );
    // The others, the new one and bob's go on.
    let note = notes(&server, alice_id, &alices_chat, 1).await;
    assert_eq!(newest.next().await.id, note);
    assert_eq!(streams[1].next().await.id, note);
    let note = notes(&server, bob_id, &bobs_chat, 1).await;
    assert_eq!(bobs.next().await.id, note);
}

/// A machine turn's marks, read by the spec's templates: a report and a job's end, in order.
#[test]
fn a_wake_ups_marks_are_read_as_fields_in_order() {
    let text = "<job-report id=\"1\">\nlooked at 3 files\n</job-report>\n\n<job id=\"1\" kind=\"subagent\" state=\"done\">\ncount the notes\nThere are 3 notes.\nline two\n</job>";
    let mut e = json!({"type": "user_input", "text": text, "origin": "machine"});
    llembas_server::marks::add_job_marks(&mut e);
    assert_eq!(
        e["jobs"],
        json!([
            {"job_id": "1", "text": "looked at 3 files"},
            {"job_id": "1", "kind": "subagent", "state": "done", "title": "count the notes",
             "text": "There are 3 notes.\nline two"},
        ])
    );
    // The person's words are never read for marks; a machine turn without any has none.
    let mut person = json!({"type": "user_input", "text": text});
    llembas_server::marks::add_job_marks(&mut person);
    assert!(person.get("jobs").is_none());
    let mut other =
        json!({"type": "user_input", "text": "the turn was stopped", "origin": "machine"});
    llembas_server::marks::add_job_marks(&mut other);
    assert_eq!(other["jobs"], json!([]));
}

/// A job's wake-up (a machine turn) is stored with its marks as fields (`jobs`: what the page
/// draws the job's card from), sent so on the stream and read back so; one stored before (without
/// them) is given them when read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_wake_up_carries_its_marks_as_fields() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let user_id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE username = 'alice'")
        .fetch_one(&server.app.pool)
        .await
        .unwrap();
    let text = "<job id=\"1\" kind=\"command\" state=\"done\">\nmake test\nexit code 0. No output.\n</job>";
    let wake = json!({"type": "user_input", "text": text, "origin": "machine"});
    server
        .app
        .hub
        .append(user_id, &chat, None, wake.clone())
        .await
        .unwrap();
    let jobs = json!([{"job_id": "1", "kind": "command", "state": "done", "title": "make test",
                       "text": "exit code 0. No output."}]);
    let sent = stream.until(|e| e.kind() == "user_input").await;
    let sent = sent.last().unwrap().clone();
    assert_eq!(sent.data["event"]["jobs"], jobs);

    // Read back with the chat, as a page opened later reads it.
    let read = async |alice: &mut super::Client| {
        let (status, got) = alice.get(&format!("/api/chats/{chat}?messages=0")).await;
        assert_eq!(status, 200, "{got}");
        got["events"][0]["event"]["jobs"].clone()
    };
    assert_eq!(read(&mut alice).await, jobs);

    // Stored before the marks were (no `jobs`): given them when read.
    server.app.hub.flush().await;
    sqlx::query("UPDATE events SET data = $1 WHERE id = $2")
        .bind(wake.to_string())
        .bind(sent.id)
        .execute(&server.app.pool)
        .await
        .unwrap();
    assert_eq!(read(&mut alice).await, jobs);
}
