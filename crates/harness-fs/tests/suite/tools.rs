//! The file tools' logic over the in-memory tree; what the model reads is snapshot.

use std::sync::Arc;

use harness_fs::tools::{self, EditSpec, GrepMode, GrepOptions, Ledger};
use harness_fs::{Access, Error, Level, MemoryBackend, VPath, View};

fn view_with(files: &[(&str, &str)]) -> View {
    let tree = MemoryBackend::new();
    for (p, text) in files {
        tree.add_file(&VPath::parse(p), *text).unwrap();
    }
    View::new(Arc::new(tree), Access::new().grant("/", Level::Stage))
}

#[test]
fn read_numbers_lines_and_says_how_to_continue() {
    let view = view_with(&[("/a.txt", "one\ntwo\nthree\n")]);
    let ledger = Ledger::new();
    let w = tools::read(&view, &ledger, "/a.txt", Some(2), Some(1)).unwrap();
    insta::assert_snapshot!(w.text, @r"
    /a.txt (hash b6285c57e8797db5)
    2	two
    (Showing lines 2-2 of 3. Use offset=3 to continue.)
    ");
    let all = tools::read(&view, &ledger, "a.txt", None, None).unwrap();
    assert!(
        all.text
            .ends_with("3\tthree\n(End of file - total 3 lines)")
    );
    assert_eq!(
        tools::read(&view, &ledger, "/a.txt", Some(9), None),
        Err(Error::OffsetOutOfRange {
            path: VPath::parse("/a.txt"),
            offset: 9,
            lines: 3
        })
    );
}

#[test]
fn read_cuts_long_lines_and_caps_bytes() {
    let long = "x".repeat(2100);
    let many: String = (0..3000)
        .map(|i| format!("line {i} {}\n", "y".repeat(30)))
        .collect();
    let view = view_with(&[("/long.txt", &long), ("/many.txt", &many)]);
    let ledger = Ledger::new();
    let w = tools::read(&view, &ledger, "/long.txt", None, None).unwrap();
    assert!(w.text.contains("... (line truncated to 2000 chars)"));
    let w = tools::read(&view, &ledger, "/many.txt", None, None).unwrap();
    assert!(w.capped);
    assert!(w.text.contains(&format!(
        "(Output capped at 50 KiB. Showing lines 1-{}. Use offset={} to continue.)",
        w.last,
        w.last + 1
    )));
    assert!(w.last < 2000);
}

#[test]
fn binary_and_invalid_text_are_refused() {
    let tree = MemoryBackend::new();
    tree.add_file(&VPath::parse("/b.bin"), vec![0u8, 1, 2])
        .unwrap();
    tree.add_file(&VPath::parse("/bad.txt"), vec![b'a', 0xff])
        .unwrap();
    let view = View::new(Arc::new(tree), Access::new().grant("/", Level::Ro));
    let ledger = Ledger::new();
    insta::assert_snapshot!(tools::read(&view, &ledger, "/b.bin", None, None).unwrap_err().to_string(), @"Binary file: /b.bin is not text and is not shown.");
    insta::assert_snapshot!(tools::read(&view, &ledger, "/bad.txt", None, None).unwrap_err().to_string(), @"Not text: /bad.txt is not valid UTF-8 and is not shown.");
}

#[test]
fn write_needs_a_read_at_the_current_version_to_overwrite() {
    let view = view_with(&[("/a.txt", "one\n")]);
    let ledger = Ledger::new();
    assert_eq!(
        tools::write(&view, &ledger, "/a.txt", "two\n"),
        Err(Error::NotRead(VPath::parse("/a.txt")))
    );
    let created = tools::write(&view, &ledger, "/new.txt", "fresh\n").unwrap();
    assert!(created.created);
    tools::read(&view, &ledger, "/a.txt", None, None).unwrap();
    view.write("/a.txt", b"changed behind our back\n").unwrap();
    insta::assert_snapshot!(tools::write(&view, &ledger, "/a.txt", "two\n").unwrap_err().to_string(), @"Stale: /a.txt has changed since this session last read it; read it again, then retry.");
    tools::read(&view, &ledger, "/a.txt", None, None).unwrap();
    let done = tools::write(&view, &ledger, "/a.txt", "two\n").unwrap();
    insta::assert_snapshot!(done.diff, @r"
    --- /a.txt
    +++ /a.txt
    @@ -1 +1 @@
    -changed behind our back
    +two
    ");
}

#[test]
fn edit_replaces_one_or_all_and_refuses_clearly() {
    let view = view_with(&[("/c.rs", "let a = 1;\nlet b = 1;\nlet c = 2;\n")]);
    let ledger = Ledger::new();
    assert_eq!(
        tools::edit(&view, &ledger, "/c.rs", "1", "3", false),
        Err(Error::NotRead(VPath::parse("/c.rs")))
    );
    tools::read(&view, &ledger, "/c.rs", None, None).unwrap();
    insta::assert_snapshot!(tools::edit(&view, &ledger, "/c.rs", "= 1", "= 3", false).unwrap_err().to_string(), @"Edit refused: old_string occurs 2 times in /c.rs; give more surrounding text to make it unique, or set replace_all.");
    insta::assert_snapshot!(tools::edit(&view, &ledger, "/c.rs", "", "x", false).unwrap_err().to_string(), @"Edit refused: old_string is empty; to write a whole file use write.");
    insta::assert_snapshot!(tools::edit(&view, &ledger, "/c.rs", "let z", "x", false).unwrap_err().to_string(), @"Edit refused: old_string was not found in /c.rs; it must match exactly, including whitespace and indentation.");
    let one = tools::edit(&view, &ledger, "/c.rs", "let c = 2;", "let c = 4;", false).unwrap();
    assert_eq!(one.replacements, 1);
    // The edit refreshed this session's version: no re-read needed.
    let all = tools::edit(&view, &ledger, "/c.rs", "= 1", "= 3", true).unwrap();
    assert_eq!(all.replacements, 2);
    insta::assert_snapshot!(all.diff, @r"
    --- /c.rs
    +++ /c.rs
    @@ -1,3 +1,3 @@
    -let a = 1;
    -let b = 1;
    +let a = 3;
    +let b = 3;
     let c = 4;
    ");
    // Changed outside: a stale edit says stale even when the old text is gone.
    view.write("/c.rs", b"other\n").unwrap();
    assert_eq!(
        tools::edit(&view, &ledger, "/c.rs", "let a = 3;", "x", false),
        Err(Error::Stale(VPath::parse("/c.rs")))
    );
}

#[test]
fn multiedit_is_all_or_nothing() {
    let view = view_with(&[("/m.txt", "alpha\nbeta\n")]);
    let ledger = Ledger::new();
    tools::read(&view, &ledger, "/m.txt", None, None).unwrap();
    let edits = vec![
        EditSpec {
            old_string: "alpha".into(),
            new_string: "ALPHA".into(),
            replace_all: false,
        },
        EditSpec {
            old_string: "gamma".into(),
            new_string: "GAMMA".into(),
            replace_all: false,
        },
    ];
    let e = tools::multiedit(&view, &ledger, "/m.txt", &edits).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("Invalid input: edit 2 of 2: Edit refused: old_string was not found"),
        "{e}"
    );
    assert_eq!(
        view.read_bytes(&VPath::parse("/m.txt")).unwrap(),
        b"alpha\nbeta\n"
    );
    let edits = vec![
        EditSpec {
            old_string: "alpha".into(),
            new_string: "ALPHA".into(),
            replace_all: false,
        },
        EditSpec {
            old_string: "ALPHA\nbeta".into(),
            new_string: "ALPHA\nBETA".into(),
            replace_all: false,
        },
    ];
    tools::multiedit(&view, &ledger, "/m.txt", &edits).unwrap();
    assert_eq!(
        view.read_bytes(&VPath::parse("/m.txt")).unwrap(),
        b"ALPHA\nBETA\n"
    );
}

#[test]
fn crlf_files_match_lf_old_text() {
    let view = view_with(&[("/w.txt", "a\r\nb\r\n")]);
    let ledger = Ledger::new();
    tools::read(&view, &ledger, "/w.txt", None, None).unwrap();
    tools::edit(&view, &ledger, "/w.txt", "a\nb", "x\ny", false).unwrap();
    assert_eq!(
        view.read_bytes(&VPath::parse("/w.txt")).unwrap(),
        b"x\r\ny\r\n"
    );
}

#[test]
fn glob_and_grep_include_match_as_ripgrep_globs() {
    let view = view_with(&[
        ("/src/a.rs", "fn a() {}\n"),
        ("/src/sub/b.rs", "fn b() {}\n"),
        ("/c.rs", "fn c() {}\n"),
        ("/.git/x.rs", "fn x() {}\n"),
    ]);
    let names = |r: tools::GlobResult| r.paths.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    assert_eq!(
        names(tools::glob(&view, "/", "*.rs", 100).unwrap()),
        ["/c.rs", "/src/a.rs", "/src/sub/b.rs"]
    );
    assert_eq!(
        names(tools::glob(&view, "/", "src/*.rs", 100).unwrap()),
        ["/src/a.rs"]
    );
    assert_eq!(
        names(tools::glob(&view, "/", "src/**/*.rs", 100).unwrap()),
        ["/src/a.rs", "/src/sub/b.rs"]
    );
    assert_eq!(
        names(tools::glob(&view, "/src", "sub/*.rs", 100).unwrap()),
        ["/src/sub/b.rs"]
    );
    let g = tools::glob(&view, "/", "*.rs", 2).unwrap();
    assert!(g.truncated);
    let r = tools::grep(
        &view,
        "/",
        r"fn \w",
        &GrepOptions {
            include: Some("src/**".into()),
            ..Default::default()
        },
    )
    .unwrap();
    insta::assert_snapshot!(r.render(), @r"
    /src/a.rs
    1: fn a() {}

    /src/sub/b.rs
    1: fn b() {}
    ");
    assert!(matches!(
        tools::grep(&view, "/", "(", &GrepOptions::default()),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn grep_and_glob_skip_what_ignore_files_exclude_in_the_memory_tree_too() {
    let view = view_with(&[
        ("/.git/HEAD", "ref: main\n"),
        ("/.gitignore", "target/\n*.log\n"),
        ("/.ignore", "vendor/\n"),
        ("/src/a.rs", "fn a() {}\n"),
        ("/src/.gitignore", "gen.rs\n!keep.log\n"),
        ("/src/gen.rs", "fn gen() {}\n"),
        ("/src/keep.log", "fn log() {}\n"),
        ("/target/b.rs", "fn b() {}\n"),
        ("/vendor/c.rs", "fn c() {}\n"),
        ("/x.log", "fn x() {}\n"),
    ]);
    let r = tools::grep(&view, "/", r"fn \w", &GrepOptions::default()).unwrap();
    insta::assert_snapshot!(r.render(), @r"
    /src/a.rs
    1: fn a() {}

    /src/keep.log
    1: fn log() {}
    ");
    let paths = |root: &str| {
        tools::glob(&view, root, "*.rs", 100)
            .unwrap()
            .paths
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(paths("/"), ["/src/a.rs"]);
    // A directory given explicitly is searched, with the rules of its parents still applied
    // to what is inside it.
    assert_eq!(paths("/target"), ["/target/b.rs"]);
    assert_eq!(paths("/src"), ["/src/a.rs"]);
    let r = tools::grep(&view, "/src/gen.rs", "fn", &GrepOptions::default()).unwrap();
    assert_eq!(r.matches.len(), 1);
}

#[test]
fn list_renders_marks_and_an_empty_directory() {
    let tree = MemoryBackend::new();
    tree.add_file(&VPath::parse("/ref/r.md"), "r").unwrap();
    tree.add_file(&VPath::parse("/b.md"), "b").unwrap();
    tree.add_dir(&VPath::parse("/repo/src")).unwrap();
    tree.add_dir(&VPath::parse("/empty")).unwrap();
    let view = View::new(
        Arc::new(tree),
        Access::new()
            .grant("/", Level::Commit)
            .grant("/ref", Level::Ro)
            .mount("/repo"),
    );
    insta::assert_snapshot!(tools::list(&view, "/", None).unwrap(), @r"
    empty/
    ref/ [read-only]
    repo/ [mount]
    b.md
    ");
    insta::assert_snapshot!(tools::list(&view, "/empty", None).unwrap(), @"(/empty is empty)");
}

#[test]
fn grep_mode_files_answers_each_matching_path_once_and_count_its_matching_lines() {
    let view = view_with(&[
        ("/a.rs", "fn a() {}\nfn b() {}\nlet x = 1;\n"),
        ("/b.rs", "let y = 2;\n"),
        ("/c/d.rs", "fn d() {}\n"),
    ]);
    let grep = |mode, limit| {
        tools::grep(
            &view,
            "/",
            r"fn \w",
            &GrepOptions {
                mode,
                limit,
                ..Default::default()
            },
        )
        .unwrap()
    };
    insta::assert_snapshot!(grep(GrepMode::Files, None).render(), @r"
    /a.rs
    /c/d.rs
    ");
    insta::assert_snapshot!(grep(GrepMode::Count, None).render(), @r"
    /a.rs:2
    /c/d.rs:1
    ");
    // The limit counts files in these modes, not lines.
    insta::assert_snapshot!(grep(GrepMode::Count, Some(1)).render(), @r"
    /a.rs:2
    (Results truncated. Use a more specific path, pattern or include.)
    ");
    assert!(!grep(GrepMode::Files, Some(2)).truncated);
    insta::assert_snapshot!(grep(GrepMode::Lines, None).render(), @r"
    /a.rs
    1: fn a() {}
    2: fn b() {}

    /c/d.rs
    1: fn d() {}
    ");
    assert_eq!(GrepMode::parse("files"), Some(GrepMode::Files));
    assert_eq!(GrepMode::parse("count"), Some(GrepMode::Count));
    assert_eq!(GrepMode::parse("lines"), Some(GrepMode::Lines));
    assert_eq!(GrepMode::parse("paths"), None);
}

#[test]
fn grep_context_shows_lines_around_matches_merged_with_separators_between_groups() {
    let ten: String = (1..=10)
        .map(|i| format!("l{i}{}\n", if [3, 5, 9].contains(&i) { " hit" } else { "" }))
        .collect();
    let view = view_with(&[("/a.txt", &ten), ("/b.txt", "x\nhit\ny\n")]);
    let grep = |context, limit| {
        tools::grep(
            &view,
            "/",
            "hit",
            &GrepOptions {
                context,
                limit,
                ..Default::default()
            },
        )
        .unwrap()
    };
    insta::assert_snapshot!(grep(1, None).render(), @r"
    /a.txt
    2- l2
    3: l3 hit
    4- l4
    5: l5 hit
    6- l6
    --
    8- l8
    9: l9 hit
    10- l10

    /b.txt
    1- x
    2: hit
    3- y
    ");
    // Context lines are not results: the limit counts matches, a kept match keeps its context
    // after, and the context of a match cut by the limit goes with it.
    insta::assert_snapshot!(grep(2, Some(2)).render(), @r"
    /a.txt
    1- l1
    2- l2
    3: l3 hit
    4- l4
    5: l5 hit
    6- l6
    7- l7
    (Results truncated. Use a more specific path, pattern or include.)
    ");
    insta::assert_snapshot!(grep(1, Some(3)).render(), @r"
    /a.txt
    2- l2
    3: l3 hit
    4- l4
    5: l5 hit
    6- l6
    --
    8- l8
    9: l9 hit
    10- l10
    (Results truncated. Use a more specific path, pattern or include.)
    ");
    // Without context the answer is as before; other modes ignore it.
    assert!(grep(0, None).context_lines.is_empty());
    let counted = tools::grep(
        &view,
        "/",
        "hit",
        &GrepOptions {
            context: 3,
            mode: GrepMode::Count,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(counted.render(), "/a.txt:3\n/b.txt:1\n");
}

#[test]
fn grep_context_is_at_most_the_schemas_maximum() {
    let max = tools::grep_context_max();
    assert_eq!(max, 20, "spec/tools/grep.json: context.maximum");
    let lines: String = (1..=60)
        .map(|i| format!("{}\n", if i == 30 { "hit" } else { "." }))
        .collect();
    let view = view_with(&[("/a.txt", &lines)]);
    let r = tools::grep(
        &view,
        "/",
        "hit",
        &GrepOptions {
            context: 1000,
            ..Default::default()
        },
    )
    .unwrap();
    let shown: Vec<u64> = r.context_lines.iter().map(|m| m.line).collect();
    assert_eq!(shown, (10..=29).chain(31..=50).collect::<Vec<u64>>());
}

#[test]
fn list_depth_lists_subdirectories_indented_down_to_the_schemas_maximum() {
    let tree = MemoryBackend::new();
    for p in [
        "/top.md",
        "/src/main.rs",
        "/src/sub/deep.rs",
        "/.git/HEAD",
        "/d1/d2/d3/d4/d5/d6/f.txt",
    ] {
        tree.add_file(&VPath::parse(p), "x").unwrap();
    }
    tree.add_dir(&VPath::parse("/src/empty")).unwrap();
    let view = View::new(Arc::new(tree), Access::new().grant("/", Level::Commit));
    let default = tools::list(&view, "/", None).unwrap();
    assert_eq!(default, tools::list(&view, "/", Some(1)).unwrap());
    insta::assert_snapshot!(default, @r"
    .git/
    d1/
    src/
    top.md
    ");
    insta::assert_snapshot!(tools::list(&view, "/", Some(2)).unwrap(), @r"
    .git/
    d1/
      d2/
    src/
      empty/
      sub/
      main.rs
    top.md
    ");
    insta::assert_snapshot!(tools::list(&view, "/src", Some(3)).unwrap(), @r"
    empty/
    sub/
      deep.rs
    main.rs
    ");
    assert_eq!(
        tools::list_depth_max(),
        5,
        "spec/tools/list.json: depth.maximum"
    );
    let deepest = tools::list(&view, "/", Some(99)).unwrap();
    assert!(deepest.contains("\n        d5/"), "{deepest}");
    assert!(!deepest.contains("d6/"), "{deepest}");
    assert_eq!(deepest, tools::list(&view, "/", Some(5)).unwrap());
    // Depth 0 is below the schema's minimum: the directory's own entries.
    assert_eq!(tools::list(&view, "/", Some(0)).unwrap(), default);
}

#[test]
fn skills_are_files_under_the_view() {
    use harness_fs::skills::{self, SkillAction};
    let view = view_with(&[("/skills/.keep", "")]);
    let md = "---\nname: deploy\ndescription: How to deploy the site\n---\nRun the script.\n";
    skills::manage(
        &view,
        "/skills",
        &SkillAction::Create {
            name: "deploy".into(),
            content: md.into(),
        },
    )
    .unwrap();
    let again = skills::manage(
        &view,
        "/skills",
        &SkillAction::Create {
            name: "deploy".into(),
            content: md.into(),
        },
    )
    .unwrap_err();
    insta::assert_snapshot!(again.to_string(), @r#"Skill: "deploy" already exists; use edit or patch."#);
    assert!(
        skills::manage(
            &view,
            "/skills",
            &SkillAction::Create {
                name: "Bad Name".into(),
                content: md.into()
            }
        )
        .is_err()
    );
    assert!(
        skills::manage(
            &view,
            "/skills",
            &SkillAction::Create {
                name: "x".into(),
                content: "no front matter".into()
            }
        )
        .is_err()
    );
    skills::manage(
        &view,
        "/skills",
        &SkillAction::WriteFile {
            name: "deploy".into(),
            file_path: "scripts/run.sh".into(),
            file_content: "echo go\n".into(),
        },
    )
    .unwrap();
    assert!(
        skills::manage(
            &view,
            "/skills",
            &SkillAction::WriteFile {
                name: "deploy".into(),
                file_path: "../escape.sh".into(),
                file_content: "x".into()
            }
        )
        .is_err()
    );
    skills::manage(
        &view,
        "/skills",
        &SkillAction::Patch {
            name: "deploy".into(),
            old_string: "Run the script.".into(),
            new_string: "Run scripts/run.sh.".into(),
            file_path: None,
            replace_all: false,
        },
    )
    .unwrap();
    let listed = skills::list(&view, "/skills").unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].description, "How to deploy the site");
    assert!(
        skills::view_skill(&view, "/skills", "deploy", None)
            .unwrap()
            .ends_with("Run scripts/run.sh.\n")
    );
    assert_eq!(
        skills::view_skill(&view, "/skills", "deploy", Some("scripts/run.sh")).unwrap(),
        "echo go\n"
    );
    skills::manage(
        &view,
        "/skills",
        &SkillAction::Delete {
            name: "deploy".into(),
        },
    )
    .unwrap();
    assert!(skills::list(&view, "/skills").unwrap().is_empty());
}

#[test]
fn memory_is_saved_whole_and_loaded_back_through_the_host_backend() {
    use harness_fs::memory::{Memory, Target};
    let dir = tempfile::tempdir().unwrap();
    let locks = tempfile::tempdir().unwrap();
    let backend = harness_fs::HostBackend::open(
        dir.path(),
        harness_fs::HostOptions {
            lock_dir: Some(locks.path().to_path_buf()),
            ..harness_fs::HostOptions::default()
        },
    )
    .unwrap();
    let path = VPath::parse("/memory.json");
    let (mut m, hash) = Memory::load(&backend, &path).unwrap();
    assert_eq!(hash, None);
    m.apply(&serde_json::json!({"changes": [
        {"action": "add", "text": "likes tea"},
        {"action": "add", "text": "Ana", "target": "user"}
    ]}))
    .unwrap();
    let saved = m.save(&backend, &path, None).unwrap();
    let (back, hash) = Memory::load(&backend, &path).unwrap();
    assert_eq!(back, m);
    assert_eq!(hash.as_deref(), Some(saved.as_str()));
    assert_eq!(back.entries(Target::User), vec![("m2", "Ana")]);
    // A second writer that loaded the old version cannot overwrite the new one.
    assert!(Memory::new().save(&backend, &path, None).is_err());
    let on_disk = std::fs::read_to_string(dir.path().join("memory.json")).unwrap();
    insta::assert_snapshot!(on_disk, @r#"
    {
      "version": 1,
      "next": 3,
      "memory": [
        {
          "id": "m1",
          "text": "likes tea"
        }
      ],
      "user": [
        {
          "id": "m2",
          "text": "Ana"
        }
      ]
    }
    "#);
}

#[test]
fn token_chunks_never_drop_a_refused_piece() {
    use harness_fs::chunk::{self, TokenCounter};
    let counter = TokenCounter::from_bytes(harness_fs::conformance::FIXTURE_TOKENIZER).unwrap();
    let text = "alpha beta ".repeat(300);
    assert_eq!(counter.count(&text).unwrap(), 600);
    let mut calls = 0;
    let done = chunk::index_text(&counter, &text, 480, 64, &mut |_, n| {
        calls += 1;
        if n > 100 {
            Err(chunk::Refused("too long".into()))
        } else {
            Ok(vec![0.0])
        }
    })
    .unwrap();
    assert!(calls > done.len());
    assert!(
        done.iter()
            .all(|d| d.vector.is_some() && d.piece.tokens() <= 100)
    );
    // Every token is covered.
    let mut covered = vec![false; 600];
    for d in &done {
        for c in covered
            .iter_mut()
            .take(d.piece.token_end)
            .skip(d.piece.token_start)
        {
            *c = true;
        }
    }
    assert!(covered.iter().all(|c| *c));
}
