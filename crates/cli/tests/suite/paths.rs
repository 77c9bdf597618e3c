//! Files land where the person was told (issue 27): every file tool, in every mode, on a path
//! inside the working directory and on one outside it, acts on the one absolute path the
//! question, its diff and the answer name; and a call that cannot run is answered with why,
//! never put to the person first. In-process, on this machine's disk, with the terminal agent's
//! own tool world.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_agent::{CoreEvent, Event, Op, Reply, ScriptedModel, SessionBuilder, Spawned};
use harness_core::protocol::{Answer, Mode, PermissionQuestion, ToolResult};
use llembas_cli::exec::Exec;
use llembas_cli::world::HostWorld;
use serde_json::{Value, json};

/// A project and a directory beside it, each holding `notes.txt` ("hello").
struct Place {
    _base: tempfile::TempDir,
    project: PathBuf,
    outside: PathBuf,
}

impl Place {
    fn new() -> Place {
        let base = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(base.path()).unwrap();
        let (project, outside) = (root.join("project"), root.join("outside"));
        for dir in [&project, &outside] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("notes.txt"), "hello\n").unwrap();
        }
        std::fs::write(outside.join("only-outside.txt"), "marker\n").unwrap();
        Place {
            _base: base,
            project,
            outside,
        }
    }

    /// The directory a case works in.
    fn dir(&self, outside: bool) -> &Path {
        if outside {
            &self.outside
        } else {
            &self.project
        }
    }
}

/// What a session said: every question and every result, by call.
#[derive(Default)]
struct Said {
    asked: Vec<(String, PermissionQuestion)>,
    results: Vec<ToolResult>,
}

/// Runs `replies` in `place`'s project in `mode`, answering yes once to every question.
async fn run(place: &Place, mode: Mode, replies: Vec<Reply>) -> Said {
    let exec = Arc::new(Exec::open(&place.project).unwrap());
    let model = ScriptedModel::new(replies.into_iter().chain([Reply::text("done")]));
    let home = llembas_cli::session::home_dir();
    let Spawned {
        session,
        events: mut out,
        run,
    } = SessionBuilder::new(Arc::new(model), Arc::new(HostWorld::new(exec)))
        .mode(mode)
        .rules(Vec::new(), &home)
        .prompt("go")
        .one_shot(None)
        .spawn()
        .unwrap();
    // The session ends with the run, and with it what it says.
    let mut said = Said::default();
    while let Some(o) = out.recv().await {
        match o {
            Event::Core(CoreEvent::ToolCallAsked { call_id, question }) => {
                assert!(session.submit(Op::Answer {
                    call_id: call_id.clone(),
                    answer: Answer::Once,
                }));
                said.asked.push((call_id, question));
            }
            Event::Core(CoreEvent::ToolCallFinished { result }) => said.results.push(result),
            _ => {}
        }
    }
    run.finished().await.unwrap().result.unwrap();
    said
}

/// One row: a tool's call on a directory (`path` as the model writes it, `dir` the real one),
/// whether it changes `notes.txt` (a read of it comes first) and what the file then holds.
struct Row {
    tool: &'static str,
    call: fn(path: &str, dir: &str) -> Value,
    /// The file the call acts on, in the directory.
    file: &'static str,
    /// What the file holds after the call (`None`: a read, nothing changes).
    after: Option<&'static str>,
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            tool: "read",
            call: |p, _| json!({"path": format!("{p}/notes.txt")}),
            file: "notes.txt",
            after: None,
        },
        Row {
            tool: "write",
            call: |p, _| json!({"path": format!("{p}/new.txt"), "content": "made\n"}),
            file: "new.txt",
            after: Some("made\n"),
        },
        Row {
            tool: "edit",
            call: |p, _| json!({"path": format!("{p}/notes.txt"), "old_string": "hello", "new_string": "bye"}),
            file: "notes.txt",
            after: Some("bye\n"),
        },
        Row {
            tool: "multiedit",
            call: |p, _| {
                json!({"path": format!("{p}/notes.txt"),
                    "edits": [{"old_string": "hello", "new_string": "bye"}]})
            },
            file: "notes.txt",
            after: Some("bye\n"),
        },
        Row {
            tool: "apply_patch",
            call: |p, _| {
                json!({"patch": format!(
                    "*** Begin Patch\n*** Update File: {p}/notes.txt\n@@\n-hello\n+bye\n*** End Patch\n"
                )})
            },
            file: "notes.txt",
            after: Some("bye\n"),
        },
        Row {
            tool: "glob",
            call: |p, _| json!({"pattern": "*.txt", "path": p}),
            file: "notes.txt",
            after: None,
        },
        Row {
            tool: "grep",
            call: |p, _| json!({"pattern": "hello", "path": p}),
            file: "notes.txt",
            after: None,
        },
        Row {
            tool: "list",
            call: |p, _| json!({"path": p}),
            file: "notes.txt",
            after: None,
        },
    ]
}

/// What the permission design says of a call: `Some(true)` asked, `Some(false)` run, `None`
/// refused.
fn expected(mode: Mode, write: bool, outside: bool) -> Option<bool> {
    match (mode, write, outside) {
        (Mode::Plan, true, _) => None,
        (Mode::Auto, _, _) => Some(false),
        (Mode::Manual, true, _) => Some(true),
        (_, false, false) | (Mode::Edit, true, false) => Some(false),
        _ => Some(true),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_tool_in_every_mode_acts_on_the_path_it_names() {
    let mut failures = Vec::new();
    for row in rows() {
        for mode in [Mode::Manual, Mode::Edit, Mode::Auto, Mode::Plan] {
            for outside in [false, true] {
                let place = Place::new();
                let dir = place.dir(outside).display().to_string();
                // Inside by a relative path, outside by an absolute one (a patch's paths are
                // relative: `../outside`).
                let path = match (outside, row.tool) {
                    (false, _) => ".".to_owned(),
                    (true, "apply_patch") => "../outside".to_owned(),
                    (true, _) => dir.clone(),
                };
                let target = format!("{dir}/{}", row.file);
                let mut replies = Vec::new();
                if row.after.is_some() && row.file == "notes.txt" {
                    replies.push(Reply::call("read", json!({"path": target})));
                }
                replies.push(Reply::call(row.tool, (row.call)(&path, &dir)));
                let said = run(&place, mode, replies).await;
                let case = format!(
                    "{} {mode} {}",
                    row.tool,
                    if outside { "outside" } else { "inside" }
                );
                let mut check = |ok: bool, what: String| {
                    if !ok {
                        failures.push(format!("{case}: {what}"));
                    }
                };
                let Some(result) = said.results.last() else {
                    check(false, "no result".into());
                    continue;
                };
                let asked: Vec<&PermissionQuestion> = said
                    .asked
                    .iter()
                    .filter(|(id, _)| *id == result.call_id)
                    .map(|(_, q)| q)
                    .collect();
                let want = expected(mode, row.after.is_some(), outside);
                check(
                    asked.len() == usize::from(want == Some(true)),
                    format!("asked {} times, expected {want:?}", asked.len()),
                );
                for q in &asked {
                    if row.tool != "apply_patch" {
                        let named = if row.after.is_some() || row.tool == "read" {
                            &target
                        } else {
                            &dir
                        };
                        check(
                            q.subject == *named,
                            format!("the question names {:?}, not {named}", q.subject),
                        );
                    }
                    if row.after.is_some() {
                        let change = q.change.clone().unwrap_or_default();
                        check(
                            change.contains(&target),
                            format!("the question's change does not name {target}: {change}"),
                        );
                    }
                }
                // Nothing lands inside the project under the outside path's name.
                let rerooted = place.project.join(place.outside.strip_prefix("/").unwrap());
                check(
                    !rerooted.exists(),
                    format!("{} was made", rerooted.display()),
                );
                let now = std::fs::read_to_string(&target).ok();
                if want.is_none() {
                    check(
                        result.is_error,
                        format!("ran in plan mode: {}", result.body()),
                    );
                    let before = (row.file == "notes.txt").then(|| "hello\n".to_owned());
                    check(now == before, format!("{target} changed: {now:?}"));
                    continue;
                }
                check(!result.is_error, format!("failed: {}", result.body()));
                let names = if row.tool == "list" {
                    result.body().contains("notes.txt")
                        && result.body().contains("only-outside.txt") == outside
                } else if matches!(row.tool, "grep" | "glob" | "read") && !outside {
                    // Inside the working directory, hits and a read's header name the file
                    // relative to it.
                    result.body().lines().any(|l| l.starts_with("notes.txt"))
                } else {
                    result.body().contains(&target)
                };
                check(
                    names,
                    format!("the answer does not name {target}: {}", result.body()),
                );
                if let Some(after) = row.after {
                    check(
                        now.as_deref() == Some(after),
                        format!("{target} holds {now:?}"),
                    );
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_cannot_run_is_answered_not_asked() {
    for outside in [false, true] {
        let place = Place::new();
        let dir = place.dir(outside).display().to_string();
        let notes = format!("{dir}/notes.txt");
        // Edit mode asks outside the project; manual mode asks for every write inside.
        let mode = if outside { Mode::Edit } else { Mode::Manual };
        let patch_path = if outside {
            "../outside/nope.txt"
        } else {
            "nope.txt"
        };
        let cases: Vec<(&str, Value, String)> = vec![
            (
                "write",
                json!({"path": notes, "content": "over\n"}),
                format!("Not read: read {notes} before changing it"),
            ),
            (
                "edit",
                json!({"path": notes, "old_string": "absent", "new_string": "x"}),
                notes.clone(),
            ),
            ("write", json!({"path": dir, "content": "x"}), dir.clone()),
            (
                "write",
                json!({"path": format!("{dir}/new.txt")}),
                "write: the argument `content` is missing".to_owned(),
            ),
            (
                "apply_patch",
                json!({"patch": format!(
                    "*** Begin Patch\n*** Update File: {patch_path}\n@@\n-a\n+b\n*** End Patch\n"
                )}),
                format!("{dir}/nope.txt"),
            ),
            (
                "apply_patch",
                json!({"patch": format!(
                    "*** Begin Patch\n*** Add File: {}/abs.txt\n+x\n*** End Patch\n",
                    place.outside.display()
                )}),
                format!("{}/abs.txt is absolute", place.outside.display()),
            ),
        ];
        // A patch that changes files on both sides.
        let mut cases = cases;
        cases.push((
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: in.txt\n+x\n*** Add File: ../outside/out.txt\n+x\n*** End Patch\n"}),
            format!(
                "apply_patch: the patch changes files both inside {} and outside it ({}/out.txt)",
                place.project.display(),
                place.outside.display()
            ),
        ));
        for (tool, args, says) in cases {
            let said = run(&place, mode, vec![Reply::call(tool, args.clone())]).await;
            assert!(
                said.asked.is_empty(),
                "{tool} {args} was asked: {:?}",
                said.asked
            );
            let result = said.results.last().unwrap();
            assert!(result.is_error, "{tool} {args}: {}", result.body());
            assert!(
                result.body().contains(&says),
                "{tool} {args}: {}",
                result.body()
            );
        }
        assert_eq!(
            std::fs::read_to_string(&notes).unwrap(),
            "hello\n",
            "nothing changed"
        );

        // An edit whose file was read in an earlier step, but whose text is not there.
        let said = run(
            &place,
            mode,
            vec![
                Reply::call("read", json!({"path": notes})),
                Reply::call(
                    "edit",
                    json!({"path": notes, "old_string": "absent", "new_string": "x"}),
                ),
            ],
        )
        .await;
        let edit = said.results.last().unwrap();
        assert!(edit.is_error, "{}", edit.body());
        assert!(
            said.asked.iter().all(|(id, _)| *id != edit.call_id),
            "the edit was asked: {:?}",
            said.asked
        );
    }
}
