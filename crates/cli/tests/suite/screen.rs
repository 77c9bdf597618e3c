//! The interactive terminal's drawing, without a terminal: outputs given to the view of a
//! window of known width, what it draws snapshotted.

use harness_agent::Event;
use harness_core::protocol::Event as CoreEvent;
use llembas_cli::render::view::View;
use serde_json::json;

/// An event from its JSON.
fn ev(v: serde_json::Value) -> Event {
    Event::Core(serde_json::from_value::<CoreEvent>(v).unwrap())
}

fn started(id: &str, command: &str) -> Event {
    ev(json!({
        "type": "tool_call_started",
        "call": {"id": id, "name": "bash", "arguments": {"command": command}},
        "block": "shell",
    }))
}

fn finished(id: &str, content: &str, is_error: bool) -> Event {
    ev(json!({
        "type": "tool_call_finished",
        "result": {"call_id": id, "result_id": "#r1", "content": content, "is_error": is_error},
    }))
}

fn output(id: &str, text: &str) -> Event {
    Event::ToolOutput {
        call_id: id.into(),
        text: text.into(),
    }
}

/// What `outs` draw in a window `width` columns wide, without colour.
fn draw(width: usize, outs: &[Event]) -> String {
    let mut view = View::new(false, Some(width));
    view.set_live(true);
    let mut s: String = outs.iter().map(|o| view.render(o)).collect();
    s.push_str(&view.close_line());
    s
}

/// A command's long output keeps its first lines and its last ones (the error at its end
/// shows); while it runs, the spinner's row follows the line it is at.
#[test]
fn folded_output_keeps_head_and_tail() {
    let lines: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    let mut view = View::new(false, Some(60));
    view.set_live(true);
    let mut drawn = view.render(&started("c1", "make"));
    let first = output("c1", &lines);
    drawn.push_str(&view.render(&first));
    let following = view.following(&first);
    let last = output("c1", "error: the build failed at the end\n");
    drawn.push_str(&view.render(&last));
    let following_after = view.following(&last);
    drawn.push_str(&view.render(&finished("c1", "exit code 2", true)));
    insta::assert_snapshot!(format!(
        "{drawn}---\nfollowing: {following:?}\nthen: {following_after:?}"
    ));
}

/// A result (not streamed) keeps its head and tail too.
#[test]
fn folded_result_keeps_head_and_tail() {
    let content: String = (1..=50).map(|i| format!("match {i}\n")).collect();
    let content = format!("{content}error: the last line says why");
    let drawn = draw(
        60,
        &[
            ev(json!({
                "type": "tool_call_started",
                "call": {"id": "g", "name": "grep", "arguments": {"pattern": "x"}},
                "block": "search",
            })),
            finished("g", &content, false),
        ],
    );
    insta::assert_snapshot!(drawn);
}

/// A huge single line is cut by the window's width, the rest counted: in a command's output as
/// it comes, at its end, in a result, and in an edit's diff.
#[test]
fn huge_lines_fold_by_width() {
    let huge = "x".repeat(300_000);
    let drawn = draw(
        60,
        &[
            started("c1", "cat one-line.txt"),
            output("c1", &format!("{huge}\nshort\n")),
            finished("c1", "exit code 0", false),
            started("c2", "cat again"),
            output("c2", &"a\n".repeat(8)),
            output("c2", &huge[..100_000]),
            output("c2", &huge[..100_000]),
            finished("c2", "exit code 0", false),
            ev(json!({
                "type": "tool_call_started",
                "call": {"id": "r", "name": "read", "arguments": {"path": "big"}},
                "block": "tool",
            })),
            finished("r", &format!("head\n{huge}\n"), false),
            Event::Edit {
                call_id: "w".into(),
                path: "big.txt".into(),
                before: String::new(),
                after: format!("{}\n", "y".repeat(10_000_000)),
            },
        ],
    );
    assert!(drawn.len() < 4_000, "{} bytes drawn", drawn.len());
    insta::assert_snapshot!(drawn);
}

/// A long text pages by the window's rows and columns: a line longer than a page is split
/// across pages; only what a page shows is read.
#[test]
fn a_long_text_pages_by_rows_and_columns() {
    use llembas_cli::render::fold::page;
    let text = format!("one\ntwo\n{}\nthree\n", "x".repeat(25));
    let mut from = 0;
    let mut pages = Vec::new();
    loop {
        let (shown, next) = page(&text, from, 3, 10);
        pages.push(shown);
        match next {
            Some(n) => from = n,
            None => break,
        }
    }
    insta::assert_snapshot!(pages.join("--- page\n"));
    // A 256 MB line's first page is one screen.
    let huge = "y".repeat(256 << 20);
    let (shown, next) = page(&huge, 0, 40, 100);
    assert_eq!((shown.len(), next), (4_001, Some(4_000)));
}

/// Text without its terminal escapes.
fn plain(styled: &str) -> String {
    let mut out = String::new();
    let mut chars = styled.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for e in chars.by_ref() {
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The answer's Markdown is fitted to a 60-column window: paragraphs and list items wrap at
/// word boundaries (a list item's rows under its text), a table that fits is drawn, one that
/// does not is drawn as a list.
#[test]
fn markdown_fits_the_window() {
    let answer = "\
The configuration loader reads every file under the settings directory, merges them in order, and reports the first key that does not parse.

- A list item that is long enough to need a second row, so it wraps under its own text.

| name | size |
|---|---:|
| a.txt | 12 |

| file | what changed | why it changed | who asked |
|---|---|---|---|
| src/config.rs | the loader merges files | two files disagreed | the person |
| src/main.rs | a flag | a wish for quiet output | the tests |

Asupercalifragilisticexpialidociouswordthatislongerthanthewholewindowitself ends it.
";
    let mut view = View::new(true, Some(60));
    view.set_live(true);
    let mut drawn = String::new();
    // As it streams, in pieces that cut words and lines.
    for piece in answer.as_bytes().chunks(37) {
        let text = String::from_utf8_lossy(piece).into_owned();
        drawn.push_str(&view.render(&ev(json!({"type": "text_delta", "text": text}))));
    }
    drawn.push_str(&view.close_line());
    // What the screen keeps: partial lines were wiped (`\r` and `ESC[J`) when drawn whole.
    let n = |v: u16| std::num::NonZero::new(v).unwrap();
    let mut p = vt100::Parser::new(n(40), n(60), 0);
    p.process(drawn.replace('\n', "\r\n").as_bytes());
    let screen = p
        .screen()
        .contents()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n");
    for line in screen.lines() {
        assert!(line.chars().count() <= 60, "{line:?}");
    }
    assert_eq!(plain(&screen), screen);
    insta::assert_snapshot!(screen.trim_end());
}

/// Output folded before it was shown (a command printing faster than it is drawn) is counted by
/// the lines it stood for: 15,000,000 lines say so, though only a few were streamed.
#[test]
fn lines_folded_unshown_are_counted() {
    let head: String = (1..=6).map(|i| format!("{i}\n")).collect();
    let note = harness_agent::output::fold_note(14_999_990, 98_888_890);
    let tail: String = (14_999_997..=15_000_000)
        .map(|i| format!("{i}\n"))
        .collect();
    let drawn = draw(
        60,
        &[
            started("c1", "seq 1 15000000"),
            output("c1", &head),
            output("c1", &format!("{note}\n{tail}")),
            finished("c1", "exit code 0", false),
        ],
    );
    insta::assert_snapshot!(drawn);
}

/// A subagent's own calls are drawn under the `task` line that runs it, a failed one with its
/// first line; a background one is named by its job.
#[test]
fn a_subagents_calls_are_drawn_under_its_task() {
    let sub = |task: Option<&str>, job: Option<&str>, id: &str, name: &str, args, status| {
        let mut v = json!({
            "type": "subagent_call",
            "call": {"id": id, "name": name, "arguments": args},
            "block": match name { "bash" => "shell", "grep" => "search", _ => "read" },
        });
        if let Some(t) = task {
            v["task_call_id"] = json!(t);
        }
        if let Some(j) = job {
            v["job_id"] = json!(j);
        }
        for (k, val) in
            serde_json::from_value::<serde_json::Map<String, serde_json::Value>>(status).unwrap()
        {
            v[k] = val;
        }
        ev(v)
    };
    let drawn = draw(
        80,
        &[
            ev(json!({
                "type": "tool_call_started",
                "call": {"id": "t1", "name": "task",
                         "arguments": {"agent": "explore", "prompt": "Find where 503 is retried."}},
                "block": "task",
            })),
            sub(
                Some("t1"),
                None,
                "s1",
                "grep",
                json!({"pattern": "503"}),
                json!({"status": "started"}),
            ),
            sub(
                Some("t1"),
                None,
                "s1",
                "grep",
                json!({"pattern": "503"}),
                json!({"status": "done"}),
            ),
            sub(
                Some("t1"),
                None,
                "s2",
                "read",
                json!({"path": "src/gone.rs"}),
                json!({"status": "started"}),
            ),
            sub(
                Some("t1"),
                None,
                "s2",
                "read",
                json!({"path": "src/gone.rs"}),
                json!({"status": "failed", "reason": "read: src/gone.rs does not exist"}),
            ),
            finished("t1", "In src/retry.rs:1.", false),
            sub(
                None,
                Some("3"),
                "s9",
                "bash",
                json!({"command": "cargo test"}),
                json!({"status": "started"}),
            ),
        ],
    );
    insta::assert_snapshot!(drawn);
}
