//! The interactive terminal's commands and keys in a pseudo-terminal: `/plan`'s card, `/new`
//! keeping the mode, `/recall` paging, Ctrl-C at an approval.

use expectrl::Expect as _;
use serde_json::json;

use super::terminal::pty;
use super::*;

/// `/plan` draws the plan as a card, not as its Markdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_plan_draws_the_card() {
    let (screen, _, _sb) = pty(
        "auto",
        vec![
            tool_call(
                "c1",
                "plan_write",
                json!({"title": "Fix the answer", "phases": [
                    {"title": "Work", "tasks": [{"title": "read lib.rs"}, {"title": "fix it"}]}]}),
            ),
            text(&["Planned."]),
        ],
        |s| {
            s.expect("auto ›");
            s.send_line("plan it");
            s.expect("Planned.");
            s.expect("auto ›");
            s.send_line("/plan");
            s.expect("fix it");
            s.expect("auto ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    let after = &screen[screen.rfind("› /plan").unwrap()..];
    assert!(!after.contains("##"), "{after}");
    insta::assert_snapshot!(after);
}

/// `/new` starts the next session in the mode chosen with `/mode`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_new_keeps_the_mode() {
    let (screen, _, _sb) = pty("manual", vec![], |s| {
        s.expect("manual ›");
        s.send_line("/mode auto");
        s.expect("auto ›");
        s.send_line("/new");
        s.expect("mode auto · /help");
        s.expect("auto ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
    })
    .await;
    insta::assert_snapshot!(screen);
}

/// `/recall` of a long result shows a page at a time: Enter for the next, `q` stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_recall_pages_a_long_result() {
    let (screen, bytes, _sb) = pty(
        "auto",
        vec![
            tool_call("c1", "bash", json!({"command": "seq 1 5000"})),
            text(&["Counted."]),
        ],
        |s| {
            s.expect("auto ›");
            s.send_line("count");
            s.expect("Counted.");
            s.expect("auto ›");
            let raw = s.render();
            let at = raw.find("/recall #").expect(&raw) + "/recall ".len();
            let id = raw[at..].split(' ').next().unwrap().to_owned();
            s.send_line(&format!("/recall {id}"));
            s.expect("Enter: next page");
            s.send_line("");
            s.expect("Enter: next page");
            s.send_line("q");
            s.expect("auto ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    // Two pages of the 60-row window were shown, each ended by the pager's line; the screen
    // ends with the second page.
    let raw = String::from_utf8_lossy(&bytes);
    assert_eq!(raw.matches("Enter: next page").count(), 2);
    insta::assert_snapshot!(screen);
}

/// Ctrl-C at an approval stops the turn (as it does while the turn runs), not only the call:
/// the model is not asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_an_approval_stops_the_turn() {
    let (screen, _, sb) = pty(
        "manual",
        vec![
            tool_call("c1", "bash", json!({"command": "touch made.txt"})),
            text(&["I went on anyway."]),
        ],
        |s| {
            s.expect("manual ›");
            s.send_line("make a file");
            s.expect("allow? [y/a/n]");
            s.session.send(expectrl::ControlCode::EndOfText).unwrap();
            s.expect("cancelled");
            s.expect("manual ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    assert!(!screen.contains("I went on anyway."), "{screen}");
    assert!(!sb.project.path().join("made.txt").exists());
    insta::assert_snapshot!(screen);
}

/// A store that cannot be written (a full disk: the transcript is `/dev/full`) stops the
/// session at the next prompt with its error said at once, not a spinner for ever; a prompt
/// after it is answered with the same error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_said_at_the_next_prompt() {
    let sb = Sandbox::new();
    let server = harness_test_support::ScriptedServer::start(vec![text(&["Never sent."])])
        .await
        .unwrap();
    let (root, home, url) = (sb.root(), sb.home.path().to_path_buf(), server.base_url());
    let sessions = home.join("data").join("sessions");
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = super::terminal::Screen {
            session: terminal_session(&root, &home, &url, "manual"),
            bytes: Vec::new(),
        };
        s.expect("manual ›");
        let dir = std::fs::read_dir(&sessions)
            .unwrap()
            .flatten()
            .next()
            .unwrap()
            .path();
        let transcript = dir.join("transcript.jsonl");
        let _ = std::fs::remove_file(&transcript);
        std::os::unix::fs::symlink("/dev/full", &transcript).unwrap();
        s.send_line("hello");
        s.expect("the session stopped");
        s.expect("manual ›");
        s.send_line("hello again");
        s.expect("the session stopped");
        s.expect("manual ›");
        s.send_line("/quit");
        s.expect("saved up to the error (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    let mut screen = screen;
    for dir in sb.sessions() {
        let id = dir.file_name().unwrap().to_string_lossy().into_owned();
        screen = screen.replace(&id, "[session]");
    }
    let screen = screen.replace(&sb.home.path().display().to_string(), "[home]");
    assert!(server.requests().is_empty(), "no request was made");
    insta::assert_snapshot!(screen);
}

/// Esc stops a running turn and its byte does not stay in the input: a bracketed paste of 3
/// lines after it is one prompt of 3 lines. A prompt holds a newline by Alt-Enter, Ctrl-J or
/// `\` before Enter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esc_stops_the_run_and_prompts_hold_newlines() {
    let stalled = harness_test_support::Reply::Sse {
        pieces: vec![format!(
            "data: {}\n\n",
            harness_test_support::chunk(json!({"role": "assistant", "content": "Streaming"}), None)
        )],
        stall: true,
    };
    let sb = Sandbox::new();
    let server = harness_test_support::ScriptedServer::start(vec![
        stalled,
        text(&["Got the paste."]),
        text(&["Got Alt-Enter."]),
        text(&["Got Ctrl-J."]),
        text(&["Got the backslash."]),
    ])
    .await
    .unwrap();
    let (root, home, url) = (sb.root(), sb.home.path().to_path_buf(), server.base_url());
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = super::terminal::Screen {
            session: terminal_session(&root, &home, &url, "auto"),
            bytes: Vec::new(),
        };
        s.expect("auto ›");
        s.send_line("write a long story");
        s.expect("Streaming");
        s.session.send("\x1b").unwrap();
        s.expect("cancelled");
        s.expect("auto ›");
        s.session
            .send("\x1b[200~one\ntwo\nthree\x1b[201~\r")
            .unwrap();
        s.expect("Got the paste.");
        s.expect("auto ›");
        s.session.send("first\x1b\rsecond\r").unwrap();
        s.expect("Got Alt-Enter.");
        s.expect("auto ›");
        s.session.send("up\ndown\r").unwrap();
        s.expect("Got Ctrl-J.");
        s.expect("auto ›");
        s.session.send("left\\\rright\r").unwrap();
        s.expect("Got the backslash.");
        s.expect("auto ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    let prompts: Vec<String> = server
        .bodies()
        .iter()
        .map(|b| {
            let m = messages(b);
            let last = m.iter().rev().find(|m| m["role"] == "user").unwrap();
            last["content"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    // The stopped turn is noted for the model before the next prompt.
    let (note, pasted) = prompts[1].split_once("\n\n").unwrap();
    assert!(note.starts_with("[stopped]"), "{note}");
    assert_eq!(
        [&prompts[..1], &[pasted.to_owned()], &prompts[2..]].concat(),
        [
            "write a long story",
            "one\ntwo\nthree",
            "first\nsecond",
            "up\ndown",
            "left\nright"
        ]
    );
    let mut screen = screen;
    for dir in sb.sessions() {
        let id = dir.file_name().unwrap().to_string_lossy().into_owned();
        screen = screen.replace(&id, "[session]");
    }
    insta::assert_snapshot!(screen);
}

/// Type-ahead read from the terminal's bytes: Enter ends a line, a paste is whole, Esc and
/// keys' sequences are left out, Backspace and Ctrl-U edit.
#[test]
fn type_ahead_is_read_as_the_prompt_would() {
    use llembas_cli::interactive::keys::{Typed, typed_ahead};
    let t = |lines: &[&str], rest: &str| Typed {
        lines: lines.iter().map(|l| l.to_string()).collect(),
        rest: rest.into(),
    };
    let cases: [(&[u8], Typed); 7] = [
        (b"abc", t(&[], "abc")),
        (b"\x1babc", t(&[], "abc")),
        (b"ab\rcd", t(&["ab"], "cd")),
        (
            b"\x1b[200~one\ntwo\rthree\x1b[201~",
            t(&[], "one\ntwo\nthree"),
        ),
        (b"\x1b[Aup\x1bOBx", t(&[], "upx")),
        (b"abd\x7fc\x15xyz", t(&[], "xyz")),
        ("é\x7fe".as_bytes(), t(&[], "e")),
    ];
    for (bytes, want) in cases {
        assert_eq!(
            typed_ahead(bytes),
            want,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

/// What a session cost: at the configured price (over the catalogue's), in `/status`, in the
/// prompt's status line after the context used, and in `-p --output json`'s result; the tokens
/// stay shown. The catalogue prices the models their makers sell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_is_shown_at_the_models_price() {
    use harness_test_support::chunk;
    let answered = || {
        let mut done = chunk(json!({}), Some("stop"));
        done["usage"] =
            json!({"prompt_tokens": 12000, "completion_tokens": 40, "total_tokens": 12040});
        harness_test_support::Reply::sse_chunks(&[
            chunk(json!({"role": "assistant", "content": "Hi."}), None),
            done,
        ])
    };
    let config = "default_endpoint = \"t\"\n[endpoints.t]\nbase_url = \"http://127.0.0.1:9/v1\"\ncontext = 40000\n[prices.\"scripted\"]\ninput = 2.0\noutput = 8.0\n";
    let (screen, _, sb) = super::terminal::pty_with(config, "manual", vec![answered()], |s| {
        s.expect("manual ›");
        s.send_line("hello");
        // (12000 × $2 + 40 × $8) per million tokens.
        s.expect("manual · 30% · $0.02 ›");
        s.send_line("/status");
        s.expect("session   ");
        s.expect("›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
    })
    .await;
    let screen = screen.replace(
        &screen
            .lines()
            .find_map(|l| l.strip_prefix("endpoint  "))
            .unwrap_or("-")
            .to_owned(),
        "[server]",
    );
    insta::assert_snapshot!(screen);

    // `-p --output json`: the result line says the cost.
    let server = harness_test_support::ScriptedServer::start(vec![answered()])
        .await
        .unwrap();
    let run = sb
        .run(&server.base_url(), &["--output", "json", "-p", "hello"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let result: serde_json::Value =
        serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        result["usage"],
        json!({"input_tokens": 12000, "output_tokens": 40})
    );
    let cost = result["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.02432).abs() < 1e-9, "{result}");

    // The catalogue's prices: a sold model by its alias, none for open weights.
    let catalogue = harness_model::Catalogue::embedded().unwrap();
    let gpt = catalogue.find("gpt-4.1-2025-04-14").unwrap().cost.unwrap();
    assert_eq!((gpt.input, gpt.output), (2.0, 8.0));
    assert!(catalogue.find("qwen3-8b").unwrap().cost.is_none());
}
