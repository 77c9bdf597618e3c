//! The interactive terminal driven in a pseudo-terminal; what the screen shows is snapshotted.

use expectrl::Expect as _;
use harness_test_support::ScriptedServer;
use serde_json::json;

use super::*;

pub(super) struct Screen {
    pub(super) session: expectrl::session::OsSession,
    pub(super) bytes: Vec<u8>,
}

impl Screen {
    pub(super) fn expect(&mut self, text: &str) {
        match self.session.expect(text) {
            Ok(found) => self.bytes.extend_from_slice(found.as_bytes()),
            Err(e) => {
                let mut buf = [0u8; 65536];
                while let Ok(n) = self.session.try_read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    self.bytes.extend_from_slice(&buf[..n]);
                }
                panic!("waiting for {text:?}: {e}; the screen:\n{}", self.render())
            }
        }
    }

    pub(super) fn send_line(&mut self, line: &str) {
        self.session.send(format!("{line}\r")).unwrap();
    }

    pub(super) fn render(&self) -> String {
        let n = |v: u16| std::num::NonZero::new(v).unwrap();
        let mut p = vt100::Parser::new(n(60), n(100), 0);
        p.process(&self.bytes);
        p.screen()
            .contents()
            .lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_owned()
    }
}

/// Result ids (`[#a3f2]`) are salted by the session's id: shown as `[#id]`.
pub(super) fn redact_ids(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("[#") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let len = after
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(after.len());
        if len > 0 && after[len..].starts_with(']') {
            out.push_str("[#id]");
            rest = &after[len + 1..];
        } else {
            out.push_str("[#");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_session_in_a_pty() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "touch made.txt && echo hi from bash"}),
        ),
        text(&["The command said hi."]),
        tool_call(
            "c2",
            "bash",
            json!({"command": "sleep 0.3; echo bg-done", "background": true}),
        ),
        text(&["Started it."]),
        text(&["The job is done."]),
    ])
    .await
    .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        let session = terminal_session(&root, &home, &url, "manual");
        let mut s = Screen {
            session,
            bytes: Vec::new(),
        };
        s.expect("manual ›");
        s.send_line("/help");
        s.expect("/quit");
        s.expect("manual ›");
        s.send_line("say hi with bash");
        s.expect("allow? [y/a/n]");
        s.send_line("y");
        s.expect("The command said hi.");
        s.expect("manual ›");
        s.send_line("/jobs");
        s.expect("No jobs in this session.");
        s.expect("manual ›");
        s.send_line("run it in the background");
        s.expect("Started it.");
        s.expect("manual ›");
        // The job's end wakes the session while the prompt waits: shown above it.
        s.expect("The job is done.");
        s.send_line("/jobs");
        s.expect("done");
        s.expect("manual ›");
        s.send_line("/mode auto");
        s.expect("auto ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.expect(")");
        if std::env::var_os("LLEMBAS_DUMP_PTY").is_some() {
            eprintln!("{:?}", String::from_utf8_lossy(&s.bytes));
        }
        s.render()
    })
    .await
    .unwrap();
    let id = sb.sessions()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let screen = screen
        .replace(&id, "[session]")
        .replace(&sb.root().display().to_string(), "[project]");
    insta::assert_snapshot!(redact_ids(&screen));
    let t = sb.transcript();
    assert_eq!(t.iter().filter(|e| e["type"] == "turn_ended").count(), 3);
    let machine = t
        .iter()
        .filter(|e| e["type"] == "turn_started" && e["origin"] == "machine")
        .count();
    assert_eq!(machine, 1, "the job's end started a turn of its own");
    assert!(sb.project.path().join("made.txt").exists());
}

/// Starts the terminal in `mode` against `replies`, runs `script` on its screen, gives the
/// screen and the raw bytes written.
pub(super) async fn pty(
    mode: &'static str,
    replies: Vec<harness_test_support::Reply>,
    script: impl FnOnce(&mut Screen) + Send + 'static,
) -> (String, Vec<u8>, Sandbox) {
    pty_with("", mode, replies, script).await
}

/// [`pty`] with this config file.
pub(super) async fn pty_with(
    config: &str,
    mode: &'static str,
    replies: Vec<harness_test_support::Reply>,
    script: impl FnOnce(&mut Screen) + Send + 'static,
) -> (String, Vec<u8>, Sandbox) {
    pty_full(config, Term::Plain, mode, replies, script).await
}

/// The terminal a test runs in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Term {
    /// As the test pty starts: no echo, `NO_COLOR`.
    Plain,
    /// Echoing what is typed, as a person's does.
    Echo,
    /// With colour (no `NO_COLOR`).
    Colour,
}

/// [`pty_with`] in this terminal.
pub(super) async fn pty_full(
    config: &str,
    term: Term,
    mode: &'static str,
    replies: Vec<harness_test_support::Reply>,
    script: impl FnOnce(&mut Screen) + Send + 'static,
) -> (String, Vec<u8>, Sandbox) {
    let sb = Sandbox::new();
    if !config.is_empty() {
        std::fs::write(sb.home.path().join("config.toml"), config).unwrap();
    }
    let server = ScriptedServer::start(replies).await.unwrap();
    let root = sb.root();
    let url = server.base_url();
    sb.write("a.txt", "alpha\n");
    let home = sb.home.path().to_path_buf();
    let (screen, bytes) = tokio::task::spawn_blocking(move || {
        let session = match term {
            Term::Echo => echoing_session(&root, &home, &url, mode, true),
            Term::Colour => echoing_session(&root, &home, &url, mode, false),
            Term::Plain => terminal_session(&root, &home, &url, mode),
        };
        let mut s = Screen {
            session,
            bytes: Vec::new(),
        };
        script(&mut s);
        if std::env::var_os("LLEMBAS_DUMP_PTY").is_some() {
            eprintln!("{:?}", String::from_utf8_lossy(&s.bytes));
        }
        (s.render(), s.bytes)
    })
    .await
    .unwrap();
    let mut screen = screen.replace(&sb.root().display().to_string(), "[project]");
    for dir in sb.sessions() {
        let id = dir.file_name().unwrap().to_string_lossy().into_owned();
        screen = screen.replace(&id, "[session]");
    }
    drop(server);
    (redact_ids(&screen), bytes, sb)
}

/// [`terminal_session`] in a terminal that echoes what is typed (`stty echo` before the start),
/// under `NO_COLOR` when `no_color` (else with colour, and without echo).
fn echoing_session(
    root: &std::path::Path,
    home: &std::path::Path,
    url: &str,
    mode: &str,
    no_color: bool,
) -> expectrl::session::OsSession {
    let mut cmd = std::process::Command::new("sh");
    let start = if no_color {
        "stty echo && exec \"$0\" --mode \"$1\""
    } else {
        "exec \"$0\" --mode \"$1\""
    };
    cmd.args(["-c", start, bin(), mode])
        .current_dir(root)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LLEMBAS_HOME", home)
        .env("TERM", "xterm")
        .env("OPENAI_BASE_URL", url)
        .env("OPENAI_MODEL", "scripted");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let mut session = expectrl::Session::spawn(cmd).unwrap();
    session.get_process_mut().set_window_size(100, 60).unwrap();
    session.set_expect_timeout(Some(std::time::Duration::from_secs(20)));
    session
}

/// A question without an "always" pattern offers `[y/n]`, and `a` is not taken for an answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_is_offered_only_where_it_is() {
    let (screen, _, _sb) = pty(
        "manual",
        vec![
            tool_call("c1", "bash", json!({"command": "git push --force"})),
            text(&["Not pushed."]),
        ],
        |s| {
            s.expect("manual ›");
            s.send_line("push it");
            s.expect("allow? [y/n]");
            s.send_line("a");
            s.expect("not offered");
            s.expect("allow? [y/n]");
            s.send_line("n");
            s.expect("Not pushed.");
            s.expect("manual ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    insta::assert_snapshot!(screen);
}

/// Ctrl-C twice leaves: at an idle prompt, and while an answer streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_twice_leaves() {
    let (screen, _, _sb) = pty("manual", vec![], |s| {
        s.expect("manual ›");
        s.session.send(expectrl::ControlCode::EndOfText).unwrap();
        s.expect("Ctrl-C again to leave");
        // The prompt is back (the line editor has the terminal again).
        s.expect("manual ›");
        s.session.send(expectrl::ControlCode::EndOfText).unwrap();
        s.expect("saved (llembas --resume ");
    })
    .await;
    insta::assert_snapshot!("ctrl_c_twice_leaves_idle", screen);
    let stalled = harness_test_support::Reply::Sse {
        pieces: vec![format!(
            "data: {}\n\n",
            harness_test_support::chunk(json!({"role": "assistant", "content": "Streaming"}), None)
        )],
        stall: true,
    };
    let (screen, _, _sb) = pty("manual", vec![stalled], |s| {
        s.expect("manual ›");
        s.send_line("write a long story");
        s.expect("Streaming");
        s.session.send(expectrl::ControlCode::EndOfText).unwrap();
        s.expect("Ctrl-C again to leave");
        s.expect("cancelled");
        s.expect("manual ›");
        s.session.send(expectrl::ControlCode::EndOfText).unwrap();
        s.expect("saved (llembas --resume ");
    })
    .await;
    insta::assert_snapshot!("ctrl_c_twice_leaves_streaming", screen);
}

/// With `NO_COLOR` the spinner is drawn without colour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinner_has_no_colour_under_no_color() {
    let (_, bytes, _sb) = pty(
        "auto",
        vec![
            tool_call("c1", "bash", json!({"command": "sleep 1.5; echo slept"})),
            text(&["Done."]),
        ],
        |s| {
            s.expect("auto ›");
            s.send_line("sleep a little");
            s.expect("Done.");
            s.expect("auto ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    let raw = String::from_utf8_lossy(&bytes);
    assert!(
        raw.contains("running bash"),
        "the spinner was drawn: {raw:?}"
    );
    for sgr in [
        "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m", "\x1b[1m", "\x1b[2m",
    ] {
        assert!(!raw.contains(sgr), "{sgr:?} under NO_COLOR: {raw:?}");
    }
}

/// What the screen shows of reads, a new file, an edit, a plan and a question comes from typed
/// events: no result header, stored-result id, plan receipt or question JSON meant for the
/// model; a new file's diff is headed `--- /dev/null` (a job's lines: the first test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screen_shows_typed_events_not_model_text() {
    let (screen, _, sb) = pty(
        "auto",
        vec![
            calls(&[
                (
                    "c1",
                    "plan_write",
                    json!({"title": "Tidy", "phases": [{"title": "Work", "tasks": [{"title": "add new.txt"}]}]}),
                ),
                ("c2", "read", json!({"path": "a.txt"})),
            ]),
            calls(&[
                ("c3", "write", json!({"path": "new.txt", "content": "one\ntwo\n"})),
                (
                    "c4",
                    "edit",
                    json!({"path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
                ),
            ]),
            tool_call(
                "c5",
                "question",
                json!({"question": "Which colour?", "options": ["red", "blue"]}),
            ),
            text(&["All done."]),
            // The open plan's nudge (item 5 of issue 15).
            text(&["The plan stays open."]),
        ],
        |s| {
            s.expect("auto ›");
            s.send_line("tidy up");
            s.expect("answer ›");
            s.send_line("2");
            s.expect("The plan stays open.");
            s.expect("auto ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    let _ = std::fs::write(
        std::env::temp_dir().join("typed-events-screen.txt"),
        &screen,
    );
    insta::assert_snapshot!(screen);
    assert_eq!(sb.read("a.txt"), "beta\n");
}

/// A change is asked with its diff (folded when long), not approved blind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_asked_with_its_diff() {
    let long: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    let (screen, _, sb) = pty(
        "manual",
        vec![
            tool_call("c1", "read", json!({"path": "a.txt"})),
            tool_call(
                "c2",
                "edit",
                json!({"path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
            ),
            tool_call("c3", "write", json!({"path": "long.txt", "content": long})),
            text(&["Done."]),
        ],
        |s| {
            s.expect("manual ›");
            s.send_line("change things");
            s.expect("allow? [y/a/n]");
            s.send_line("y");
            s.expect("more lines of the diff");
            s.expect("allow? [y/a/n]");
            s.send_line("n");
            s.expect("Done.");
            s.expect("manual ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    insta::assert_snapshot!(screen);
    assert_eq!(sb.read("a.txt"), "beta\n");
}

/// A command's long output is folded to its first lines as it comes and its last ones at its end
/// (the count said, `/recall` shows it whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_output_is_folded() {
    let (screen, _, _sb) = pty(
        "auto",
        vec![
            tool_call(
                "c1",
                "bash",
                json!({"purpose": "count to two hundred", "command": "seq 1 200"}),
            ),
            text(&["Counted."]),
        ],
        |s| {
            s.expect("auto ›");
            s.send_line("count");
            s.expect("Counted.");
            s.expect("auto ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    // The result id is salted by the session's.
    let screen = match screen.split_once("/recall #") {
        Some((a, b)) => format!("{a}/recall #id{}", &b[b.find(' ').unwrap_or(0)..]),
        None => screen,
    };
    insta::assert_snapshot!(screen);
}

/// `/status` says the model, endpoint, mode, tokens, context and session; the prompt shows the
/// context in use once the server said it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_tokens_and_context() {
    use harness_test_support::chunk;
    let mut done = chunk(json!({}), Some("stop"));
    done["usage"] = json!({"prompt_tokens": 12000, "completion_tokens": 40, "total_tokens": 12040});
    let reply = harness_test_support::Reply::sse_chunks(&[
        chunk(json!({"role": "assistant", "content": "Hi."}), None),
        done,
    ]);
    let config = "default_endpoint = \"t\"\n[endpoints.t]\nbase_url = \"http://127.0.0.1:9/v1\"\ncontext = 40000\n";
    let (screen, _, _sb) = pty_with(config, "manual", vec![reply], |s| {
        s.expect("manual ›");
        s.send_line("/status");
        s.expect("session   ");
        s.expect("manual ›");
        s.send_line("hello");
        s.expect("manual · 30% ›");
        s.send_line("/status");
        s.expect("(30%)");
        s.expect("manual · 30% ›");
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
}

/// What is typed while a turn runs is not drawn into the answer: it waits for the next prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_ahead_waits_for_the_prompt() {
    let (screen, bytes, _sb) = pty_full(
        "",
        Term::Echo,
        "auto",
        vec![
            tool_call("c1", "bash", json!({"command": "sleep 2; echo woke"})),
            text(&["Slept."]),
        ],
        |s| {
            s.expect("auto ›");
            s.send_line("sleep");
            s.expect("$ sleep 2; echo woke");
            s.session.send("typed ahead").unwrap();
            s.expect("Slept.");
            s.expect("typed ahead");
            // Ctrl-U clears the line; then leave.
            s.session.send("\x15").unwrap();
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    // Not echoed while the turn ran (the terminal draws it only at the next prompt).
    let raw = String::from_utf8_lossy(&bytes);
    let during = &raw[raw.find("echo woke").unwrap()..raw.find("Slept.").unwrap()];
    assert!(!during.contains("typed ahead"), "{during:?}");
    insta::assert_snapshot!(screen);
}

/// `/model NAME` is checked against the models the server lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_switch_is_checked_against_the_server() {
    let (screen, _, _sb) = pty("manual", vec![], |s| {
        s.expect("manual ›");
        s.send_line("/model gpt-nonexistent");
        s.expect("the model is not changed");
        s.expect("manual ›");
        s.send_line("/model scripted");
        s.expect("model: scripted");
        s.expect("manual ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
    })
    .await;
    let screen = screen
        .lines()
        .map(|l| match l.split_once(" does not serve") {
            Some((_, rest)) => format!("[server] does not serve{rest}"),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(screen);
}

/// An answer's Markdown is drawn as it streams (where colour is on): headings, emphasis, code,
/// lists, a table aligned, a code block framed and coloured; no `**`, `##` or fences left. A
/// line is redrawn once it is complete (its first half came plain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_is_drawn_as_it_streams() {
    let (screen, bytes, _sb) = pty_full(
        "",
        Term::Colour,
        "manual",
        vec![text(&[
            "## Plan of",
            " **attack**\n\nFirst *look*, then run `grep`.\n- one\n  - two\n3. three\n\n",
            "| name | n |\n|---|--:|\n| alpha | 1 |\n",
            "| beta | 22 |\n\n```rust\nfn main() { let x = 1; }\n```\n> quoted\n\nDone.",
        ])],
        |s| {
            s.expect("manual ›");
            s.send_line("explain");
            s.expect("Done.");
            s.expect("manual ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    let raw = String::from_utf8_lossy(&bytes);
    for (what, styled) in [
        ("heading bold", "\x1b[1m\x1b[35mPlan of \x1b[1m"),
        ("emphasis italic", "\x1b[3mlook\x1b[0m"),
        ("inline code", "\x1b[36mgrep\x1b[0m"),
        ("the code coloured", "\x1b[38;2;"),
    ] {
        assert!(raw.contains(styled), "{what}: {raw:?}");
    }
    let answer = &screen[screen.find("explain").unwrap()..];
    for raw_md in ["**", "##", "```", "|---"] {
        assert!(!answer.contains(raw_md), "{raw_md:?} left:\n{screen}");
    }
    insta::assert_snapshot!(screen);
}

/// A burst of Shift-Tab presses cycles the mode once a press: none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_shift_tabs_cycles_once_a_press() {
    let (screen, _, _sb) = pty("manual", vec![], |s| {
        s.expect("manual ›");
        // Three presses in one write (manual → edit → auto → plan).
        s.session.send("\x1b[Z\x1b[Z\x1b[Z").unwrap();
        s.expect("plan ›");
        s.send_line("/mode");
        s.expect("mode: plan");
        s.expect("plan ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
    })
    .await;
    insta::assert_snapshot!(screen);
}

/// The terminal in `dir` with these arguments (under `NO_COLOR`).
pub(super) fn spawn_in(
    dir: &std::path::Path,
    home: &std::path::Path,
    url: &str,
    args: &[&str],
) -> Screen {
    spawn_with(dir, home, url, args, true)
}

/// [`spawn_in`], with colour unless `no_color`.
fn spawn_with(
    dir: &std::path::Path,
    home: &std::path::Path,
    url: &str,
    args: &[&str],
    no_color: bool,
) -> Screen {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LLEMBAS_HOME", home)
        .env("TERM", "xterm")
        .env("OPENAI_BASE_URL", url)
        .env("OPENAI_MODEL", "scripted");
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let mut session = expectrl::Session::spawn(cmd).unwrap();
    session.get_process_mut().set_window_size(100, 60).unwrap();
    session.set_expect_timeout(Some(std::time::Duration::from_secs(20)));
    Screen {
        session,
        bytes: Vec::new(),
    }
}

/// After `--resume` the conversation is replayed (folded) and the mode it was left in is
/// restored; resumed from another directory, it says so instead of going on silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_replays_the_conversation_and_restores_the_mode() {
    let sb = Sandbox::new();
    let long: String = (1..=12).map(|i| format!("Line {i}.\n")).collect();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"purpose": "greet", "command": "echo hi"}),
        ),
        text(&["Said **hi**."]),
        text(&[&long]),
    ])
    .await
    .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let sub = root.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let (resumed, elsewhere) = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&root, &home, &url, &["--mode", "auto"]);
        s.expect("auto ›");
        s.send_line("say hi");
        s.expect("Said **hi**.");
        s.expect("auto ›");
        s.send_line("count to twelve");
        s.expect("Line 12.");
        s.expect("auto ›");
        s.send_line("/mode plan");
        s.expect("plan ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        let mut r = spawn_in(&root, &home, &url, &["--resume"]);
        r.expect("plan ›");
        r.send_line("/quit");
        r.expect("saved (llembas --resume ");
        let mut o = spawn_in(&sub, &home, &url, &["--resume"]);
        o.expect("no saved session");
        let _ = o.session.expect(expectrl::Eof);
        let id = {
            let line = String::from_utf8_lossy(&r.bytes).into_owned();
            let at = line.find("session ").unwrap() + "session ".len();
            line[at..].split_whitespace().next().unwrap().to_owned()
        };
        let mut o = spawn_in(&sub, &home, &url, &["--resume", &id]);
        o.expect("plan ›");
        o.send_line("/quit");
        o.expect("saved (llembas --resume ");
        (r.render(), o.render())
    })
    .await
    .unwrap();
    let id = sb.sessions()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let clean = |s: String| {
        s.replace(&id, "[session]")
            .replace(&sb.root().display().to_string(), "[project]")
    };
    insta::assert_snapshot!("resume_replays_the_conversation", clean(resumed));
    insta::assert_snapshot!("resume_from_another_directory_warns", clean(elsewhere));
}

/// `/resume` lists this directory's other sessions, numbered; a number goes on with one (its
/// conversation replayed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_resume_picks_a_session() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![text(&["One."]), text(&["Two."])])
        .await
        .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&root, &home, &url, &["--mode", "manual"]);
        s.expect("manual ›");
        s.send_line("the first");
        s.expect("One.");
        s.expect("manual ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        let mut s = spawn_in(&root, &home, &url, &["--mode", "manual"]);
        s.expect("manual ›");
        s.send_line("the second");
        s.expect("Two.");
        s.expect("manual ›");
        s.send_line("/resume");
        s.expect("resume which?");
        s.send_line("1");
        s.expect("› the first");
        s.expect("manual ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    let mut screen = screen.replace(&sb.root().display().to_string(), "[project]");
    // Named by their first prompt (two ids of the same minute sort by their random tail).
    for dir in sb.sessions() {
        let id = dir.file_name().unwrap().to_string_lossy().into_owned();
        let first = std::fs::read_to_string(dir.join("transcript.jsonl")).unwrap();
        let n = if first.contains("the first") { 1 } else { 2 };
        screen = screen.replace(&id, &format!("[session {n}]"));
    }
    // The time a session was saved.
    let screen: String = screen
        .lines()
        .map(|l| match l.strip_prefix(" 1. ") {
            Some(rest) => format!(
                " 1. [time]  {}",
                rest.split_once("  ").map_or(rest, |x| x.1)
            ),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(screen);
}

/// `!command` runs a shell command the person typed, through the session's permission rules
/// (refused where a call would be), shows its output, and sends it to the model with the next
/// prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bang_runs_a_command_and_tells_the_model() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![text(&["It said hello."])])
        .await
        .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&root, &home, &url, &["--mode", "edit"]);
        s.expect("edit ›");
        s.send_line("!echo hello; echo oops >&2; exit 3");
        // Asked as the model's call would be (`exit 3` is not a read in edit mode).
        s.expect("allow? [y/n]");
        s.send_line("y");
        s.expect("exit code 3");
        s.expect("edit ›");
        s.send_line("!rm -rf /");
        s.expect("not run");
        s.expect("edit ›");
        s.send_line("what did it say?");
        s.expect("It said hello.");
        s.expect("edit ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    let bodies = server.bodies();
    let last = bodies.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .to_string();
    assert!(
        last.contains("the person ran `echo hello; echo oops >&2; exit 3`")
            && last.contains("exit code 3")
            && last.contains("hello\\noops")
            && last.contains("what did it say?"),
        "{last}"
    );
    assert!(
        !last.contains("rm -rf"),
        "a refused command is not sent: {last}"
    );
    let id = sb.sessions()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    insta::assert_snapshot!(screen.replace(&id, "[session]"));
}

/// Tab completes a slash command and the path after an `@`; a prompt's `@path` attaches the
/// file's content for the model (said on the screen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tab_completes_and_at_path_attaches_a_file() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    sb.write("src/lib.rs", "pub fn f() {}\n");
    let server = ScriptedServer::start(vec![text(&["It says alpha."])])
        .await
        .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&root, &home, &url, &["--mode", "manual"]);
        s.expect("manual ›");
        s.session.send("/sta\t").unwrap();
        s.expect("/status ");
        s.send_line("");
        s.expect("session   ");
        s.expect("manual ›");
        s.session.send("what do @a.\t").unwrap();
        s.expect("@a.txt");
        s.session.send("and @sr\t").unwrap();
        s.expect("@src/");
        s.send_line("lib.rs say?");
        s.expect("It says alpha.");
        s.expect("manual ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    let bodies = server.bodies();
    let last = bodies.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .to_string();
    assert!(
        last.contains("what do @a.txt and @src/lib.rs say?")
            && last.contains("[the person attached the file a.txt]\\nalpha")
            && last.contains("[the person attached the file src/lib.rs]\\npub fn f() {}"),
        "{last}"
    );
    let id = sb.sessions()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let screen = screen.replace(&id, "[session]");
    let screen = screen
        .lines()
        .map(|l| match l.split_once("endpoint  ") {
            Some(_) => "endpoint  [server]".to_owned(),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(screen);
}

/// `/undo` puts back the files the last turn changed with the file tools (a file it made is
/// removed), and the model is told with the next prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_puts_back_the_last_turns_files() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    let server = ScriptedServer::start(vec![
        tool_call("c0", "read", json!({"path": "a.txt"})),
        calls(&[
            (
                "c1",
                "write",
                json!({"path": "new.txt", "content": "one\n"}),
            ),
            (
                "c2",
                "edit",
                json!({"path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
            ),
        ]),
        tool_call(
            "c3",
            "edit",
            json!({"path": "a.txt", "old_string": "beta", "new_string": "gamma"}),
        ),
        text(&["Changed."]),
        text(&["Understood."]),
    ])
    .await
    .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&root, &home, &url, &["--mode", "auto"]);
        s.expect("auto ›");
        s.send_line("change things");
        s.expect("Changed.");
        s.expect("auto ›");
        s.send_line("/undo");
        s.expect("removed");
        s.expect("auto ›");
        s.send_line("/undo");
        s.expect("nothing to undo");
        s.expect("auto ›");
        s.send_line("ok?");
        s.expect("Understood.");
        s.expect("auto ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    assert_eq!(sb.read("a.txt"), "alpha\n");
    assert!(!sb.project.path().join("new.txt").exists());
    let bodies = server.bodies();
    let last = bodies.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .to_string();
    assert!(
        last.contains("the person undid the file changes of the last turn"),
        "{last}"
    );
    let id = sb.sessions()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    insta::assert_snapshot!(
        screen
            .replace(&id, "[session]")
            .replace(&sb.root().display().to_string(), "[project]")
    );
}

/// A one-shot run's answer is drawn as Markdown on a terminal with colour too (piped it is
/// plain: the one-shot tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_draws_markdown_on_a_terminal() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![text(&[
        "# Result\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nAll **good**.",
    ])])
    .await
    .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let (screen, bytes) = tokio::task::spawn_blocking(move || {
        let mut s = spawn_with(&root, &home, &url, &["-p", "check"], false);
        s.expect("llembas: session");
        (s.render(), s.bytes.clone())
    })
    .await
    .unwrap();
    let raw = String::from_utf8_lossy(&bytes);
    assert!(raw.contains("\x1b[1mgood\x1b[0m"), "{raw:?}");
    let answer: Vec<&str> = screen
        .lines()
        .filter(|l| !l.starts_with("llembas:"))
        .collect();
    insta::assert_snapshot!(answer.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_at_image_goes_with_the_prompt_to_a_model_that_reads_images() {
    let sb = Sandbox::new();
    // Not a real PNG: the bytes go as they are, base64 in a data: URL.
    sb.write("cat.png", "PNG-bytes");
    let server = ScriptedServer::start(vec![text(&["A cat."]), text(&["Still a cat."])])
        .await
        .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        // gpt-4o's metadata says it reads images.
        let mut s = spawn_in(&root, &home, &url, &["--model", "gpt-4o"]);
        s.expect("edit ›");
        s.send_line("what is @cat.png");
        s.expect("attached image cat.png (1 KB)");
        s.expect("A cat.");
        s.expect("edit ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    let body = server.bodies()[0].to_string();
    assert!(
        body.contains("data:image/png;base64,UE5HLWJ5dGVz"),
        "{body}\n{screen}"
    );
    assert!(screen.contains("attached image cat.png (1 KB)"), "{screen}");
}

/// Issue 27: the terminal asks about a write outside the working directory by its real path,
/// shows the diff of that path, and the file lands there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_outside_is_asked_and_lands_by_its_real_path() {
    let out = tempfile::tempdir().unwrap();
    let target = std::fs::canonicalize(out.path()).unwrap().join("OUT.txt");
    let t = target.display().to_string();
    let (screen, _, sb) = pty(
        "edit",
        vec![
            tool_call("c1", "write", json!({"path": t, "content": "made\n"})),
            text(&["Written."]),
        ],
        |s| {
            s.expect("edit ›");
            s.send_line("write it");
            s.expect("allow? [y/a/n]");
            s.send_line("y");
            s.expect("Written.");
            s.expect("edit ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    assert!(
        screen.contains(&format!("write wants to run:\n    {t}\n")),
        "{screen}"
    );
    assert!(screen.contains(&format!("+++ {t}")), "{screen}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "made\n");
    let rerooted = sb.root().join(target.strip_prefix("/").unwrap());
    assert!(!rerooted.exists(), "{} was made", rerooted.display());
}

/// The person's prompt commands: the project's (`.llembas/commands/`, `.claude/commands/`,
/// subdirectories named with `:`) and their own (`commands/` beside the config) are listed in
/// `/help`; `/review ARGS` sends the file's text with the arguments filled and its
/// ``!`command` `` run under the session's rules and replaced by its output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_commands_are_listed_and_expand_with_arguments_and_commands() {
    let sb = Sandbox::new();
    sb.write(
        ".llembas/commands/review.md",
        "---\ndescription: Review files with care\nargument-hint: FILES\n---\nReview $ARGUMENTS with care.\nBranch: !`echo on-main`\n",
    );
    sb.write(
        ".claude/commands/tests/run.md",
        "# Run the tests\n\nThen say.\n",
    );
    std::fs::create_dir_all(sb.home.path().join("commands")).unwrap();
    std::fs::write(sb.home.path().join("commands/mine.md"), "My own.\n").unwrap();
    let server = ScriptedServer::start(vec![text(&["Reviewed."])])
        .await
        .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&root, &home, &url, &["--mode", "auto"]);
        s.expect("auto ›");
        s.send_line("/help");
        s.expect("/review FILES");
        s.expect("/tests:run");
        s.expect("auto ›");
        // Tab completes the person's commands beside the built-in ones.
        s.session.send("/rev\t").unwrap();
        s.expect("/review ");
        s.send_line("src/a.rs src/b.rs");
        s.expect("Reviewed.");
        s.expect("auto ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    for line in [
        "/review FILES                   Review files with care (project)",
        "/tests:run                      Run the tests (project)",
        "/mine                           My own. (user)",
    ] {
        assert!(screen.contains(line), "{line}\n{screen}");
    }
    let bodies = server.bodies();
    let last = bodies.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"]
        .to_string();
    assert!(
        last.contains("Review src/a.rs src/b.rs with care.\\nBranch: on-main"),
        "{last}"
    );
}

/// `/export` writes the conversation as Markdown beside the work (each call with its result
/// folded), `/export FILE.json` its entries as JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_writes_the_conversation_as_markdown_or_json() {
    let (screen, _, sb) = pty(
        "auto",
        vec![
            tool_call("c1", "read", json!({"path": "a.txt"})),
            text(&["It says **alpha**."]),
        ],
        |s| {
            s.expect("auto ›");
            s.send_line("what does a.txt say?");
            s.expect("It says");
            s.expect("auto ›");
            s.send_line("/export");
            s.expect("exported to");
            s.expect("auto ›");
            s.send_line("/export notes/out.json");
            s.expect("out.json");
            s.expect("auto ›");
            s.send_line("/quit");
            s.expect("saved (llembas --resume ");
        },
    )
    .await;
    let id = sb.sessions()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        screen.contains("exported to [project]/llembas-[session].md"),
        "{screen}"
    );
    let md = std::fs::read_to_string(sb.root().join(format!("llembas-{id}.md"))).unwrap();
    let md = md
        .replace(&id, "[session]")
        .replace(&sb.root().display().to_string(), "[project]");
    insta::assert_snapshot!(redact_ids(&md));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sb.root().join("notes/out.json")).unwrap())
            .unwrap();
    assert_eq!(json["session"]["id"], json!(id));
    let types: Vec<&str> = json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(
        types.starts_with(&["turn_started", "assistant"]) && types.contains(&"tool_result"),
        "{types:?}"
    );
}
