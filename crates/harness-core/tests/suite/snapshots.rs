//! What a model is sent, per project × session kind × mode: the offered tools and the assembled
//! system prompt. Review changes with `cargo insta review`.

use std::collections::BTreeMap;

use harness_core::offer::{Holds, OfferContext, offer};
use harness_core::plan::Plan;
use harness_core::prompt::{
    Assembled, InstructionFile, PromptInput, Prototype, PrototypeHandoff, assemble,
};
use harness_core::protocol::{Mode, Project, SessionKind};
use harness_spec::Spec;
use serde_json::{Value, json};

/// What holds in each world: a bare terminal has no display; a chat in the web UI has a page,
/// a display and (here) a forge mount; an agent chat run from the web UI has a display.
fn holds(project: Project, kind: SessionKind) -> Holds {
    match (project, kind) {
        (Project::Cli, SessionKind::Agent) => Holds::default(),
        (Project::Llembas, SessionKind::Chat) => Holds {
            page: true,
            display: true,
            forge: true,
        },
        _ => Holds {
            page: false,
            display: true,
            forge: false,
        },
    }
}

fn values() -> BTreeMap<String, String> {
    [
        ("memory_limit", "4,000 characters"),
        (
            "python_packages",
            "numpy, pandas and matplotlib can be imported.",
        ),
        ("product_version", "0.1.0"),
        ("model", "qwen3-coder-30b-a3b-instruct"),
        ("cwd", "/home/ana/src/api"),
        ("platform", "Platform: linux x86_64"),
        ("shell", "Shell: /bin/bash"),
        ("git_status", "Git: branch main, clean"),
        (
            "memory_entries",
            "- [m1] Ana prefers small commits.\n- [m2] The API tests need `make db` first.",
        ),
        (
            "client_context",
            "This chat is about the billing API's retries.",
        ),
        ("date", "2026-11-29"),
        ("grants", "- /home/ana/src/api — stage\n- /shared/docs — ro"),
        ("library_summary", "12 notes, 3 documents"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect()
}

fn context(project: Project, kind: SessionKind, mode: Mode) -> OfferContext {
    let mut c = OfferContext::new(project, kind, mode);
    c.holds = holds(project, kind);
    c.values = values();
    c
}

fn combos() -> Vec<(Project, SessionKind, Mode)> {
    let mut out = Vec::new();
    for p in [Project::Cli, Project::Llembas] {
        for k in SessionKind::ALL {
            for m in Mode::ALL {
                out.push((p, k, m));
            }
        }
    }
    out
}

#[test]
fn offered_tool_lists() {
    let spec = Spec::embedded();
    let mut table = serde_json::Map::new();
    for (p, k, m) in combos() {
        let names: Vec<Value> = offer(spec, &context(p, k, m))
            .unwrap()
            .into_iter()
            .map(|t| Value::String(t.name))
            .collect();
        table.insert(format!("{} {} {}", p.as_str(), k, m), Value::Array(names));
    }
    insta::assert_json_snapshot!("offered_tool_lists", Value::Object(table));
}

#[test]
fn offered_tools_in_full() {
    let spec = Spec::embedded();
    for (p, k) in [
        (Project::Cli, SessionKind::Agent),
        (Project::Llembas, SessionKind::Chat),
        (Project::Llembas, SessionKind::Agent),
    ] {
        let tools = offer(spec, &context(p, k, Mode::Plan)).unwrap();
        insta::assert_json_snapshot!(format!("offered_tools_{}_{}", p.as_str(), k), tools);
    }
}

fn sample_plan() -> Plan {
    Plan::write(&json!({
        "title": "Retry failed uploads",
        "summary": "Wrap the upload client in a bounded retry.",
        "findings": ["Uploads fail on 503 (src/upload.rs:88)"],
        "objectives": ["A 503 is retried up to 5 times"],
        "phases": [{"title": "Work", "tasks": [
            {"title": "Add RetryPolicy", "status": "done"},
            {"title": "Use it in upload()", "status": "doing"}]}]
    }))
    .unwrap()
}

/// The text kept from one request to the next is [`assemble`]'s for the input of each: a
/// change of any input (mode, tools, plan, personality, values, ...) gives the new text.
#[test]
fn a_kept_system_text_follows_every_change_of_its_input() {
    let spec = Spec::embedded();
    let plan = sample_plan();
    let instructions = [InstructionFile {
        path: "/home/ana/src/AGENTS.md".into(),
        text: "Use tabs.".into(),
    }];
    let handoff = PrototypeHandoff {
        instance: "2.0.0".into(),
        prototypes: vec![Prototype {
            title: "Pricing page".into(),
            path: "/home/ana/src/site/proto/pricing.html".into(),
            description: None,
        }],
    };
    let vals = values();
    let mut other_vals = vals.clone();
    other_vals.insert(
        "memory_entries".into(),
        "- the user writes British English".into(),
    );
    // With a display, so that `show` is offered and the prototypes are put in.
    let mut c = context(Project::Cli, SessionKind::Agent, Mode::Edit);
    c.holds.display = true;
    let offered = offer(spec, &c).unwrap();
    let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
    // Without the library's tools (the library block goes).
    let fewer: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !n.starts_with("note") && !n.starts_with("knowledge"))
        .collect();
    let base = PromptInput {
        project: Project::Cli,
        kind: SessionKind::Agent,
        mode: Mode::Edit,
        subagent: None,
        agent_text: None,
        personality: None,
        offered: &names,
        instructions: &[],
        plan: None,
        prototypes: None,
        values: &vals,
    };
    let inputs = [
        base.clone(),
        base.clone(),
        PromptInput {
            mode: Mode::Plan,
            ..base.clone()
        },
        PromptInput {
            mode: Mode::Plan,
            plan: Some(&plan),
            ..base.clone()
        },
        PromptInput {
            personality: Some("concise"),
            ..base.clone()
        },
        PromptInput {
            offered: &fewer,
            ..base.clone()
        },
        PromptInput {
            instructions: &instructions,
            ..base.clone()
        },
        PromptInput {
            values: &other_vals,
            ..base.clone()
        },
        PromptInput {
            subagent: Some("explore"),
            ..base.clone()
        },
        PromptInput {
            prototypes: Some(&handoff),
            ..base.clone()
        },
        base.clone(),
    ];
    let mut kept = Assembled::new(spec);
    let mut texts = Vec::new();
    for input in &inputs {
        let text = kept.text(input).unwrap();
        assert_eq!(text, assemble(spec, input).unwrap());
        texts.push(text);
    }
    // Each change above changes the text (the first and the last are the same input).
    for (i, t) in texts.iter().enumerate().take(texts.len() - 1).skip(2) {
        assert_ne!(*t, texts[0], "input {i} gave the first text");
    }
    assert_eq!(texts[0], texts[1]);
    assert_eq!(texts[0], texts[texts.len() - 1]);
}

#[test]
fn assembled_prompts() {
    let spec = Spec::embedded();
    let instructions = [
        InstructionFile {
            path: "/home/ana/src/AGENTS.md".into(),
            text: "Use tabs.".into(),
        },
        InstructionFile {
            path: "/home/ana/src/api/AGENTS.md".into(),
            text: "Run `make check` before you finish.".into(),
        },
    ];
    let plan = sample_plan();
    let vals = values();
    for (p, k, m) in combos() {
        let offered = offer(spec, &context(p, k, m)).unwrap();
        let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
        let input = PromptInput {
            project: p,
            kind: k,
            mode: m,
            subagent: None,
            agent_text: None,
            personality: None,
            offered: &names,
            instructions: &instructions,
            plan: (m == Mode::Plan).then_some(&plan),
            prototypes: None,
            values: &vals,
        };
        let text = assemble(spec, &input).unwrap();
        assert!(!text.contains("{{"), "unfilled in {p:?} {k} {m}");
        insta::assert_snapshot!(format!("prompt_{}_{}_{}", p.as_str(), k, m), text);
    }
}

#[test]
fn assembled_prompt_of_a_subagent_with_prototypes() {
    let spec = Spec::embedded();
    let mut c = context(Project::Cli, SessionKind::Agent, Mode::Auto);
    c.subagent = true;
    c.read_only = true;
    c.holds.display = true;
    let offered = offer(spec, &c).unwrap();
    let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
    let handoff = PrototypeHandoff {
        instance: "2.0.0".into(),
        prototypes: vec![Prototype {
            title: "Pricing page".into(),
            path: "/home/ana/src/site/proto/pricing.html".into(),
            description: Some("three tiers".into()),
        }],
    };
    let vals = values();
    let input = PromptInput {
        project: Project::Cli,
        kind: SessionKind::Agent,
        mode: Mode::Auto,
        subagent: Some("explore"),
        agent_text: None,
        personality: Some("concise"),
        offered: &names,
        instructions: &[],
        plan: None,
        prototypes: Some(&handoff),
        values: &vals,
    };
    let text = assemble(spec, &input).unwrap();
    assert!(text.contains("# You are a subagent"));
    assert!(text.contains("- Pricing page — /home/ana/src/site/proto/pricing.html — three tiers"));
    insta::assert_snapshot!("prompt_cli_explore_subagent", text);
    assert!(
        assemble(
            spec,
            &PromptInput {
                personality: Some("grumpy"),
                ..input.clone()
            }
        )
        .unwrap_err()
        .to_string()
        .contains("grumpy")
    );
}

#[test]
fn texts_from_outside_are_never_filled() {
    // An instruction file, a plan or a grant may hold `{{...}}` and bullet lines of its own:
    // they reach the model as written.
    let spec = Spec::embedded();
    let instructions = [InstructionFile {
        path: "/home/ana/src/api/AGENTS.md".into(),
        text: "Templates use {{name}}.\n- {{empty}}\nOpen {{ with no end.".into(),
    }];
    let plan = Plan::write(&json!({"title": "Render {{title}}", "phases": [{"title": "A", "tasks": [{"title": "- {{x}}"}]}]}))
        .unwrap();
    let vals = values();
    let c = context(Project::Cli, SessionKind::Agent, Mode::Edit);
    let offered = offer(spec, &c).unwrap();
    let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
    let text = assemble(
        spec,
        &PromptInput {
            project: Project::Cli,
            kind: SessionKind::Agent,
            mode: Mode::Edit,
            subagent: None,
            agent_text: None,
            personality: None,
            offered: &names,
            instructions: &instructions,
            plan: Some(&plan),
            prototypes: None,
            values: &vals,
        },
    )
    .unwrap();
    assert!(text.contains("Templates use {{name}}.\n- {{empty}}\nOpen {{ with no end."));
    assert!(text.contains("## Render {{title}}"));
    assert!(text.contains("- [todo] - {{x}} (t1)"));
}

#[test]
fn optional_blocks_and_environment_lines_come_and_go() {
    let spec = Spec::embedded();
    let entries = harness_core::prompt::memory_entries([("m1", "Ana prefers\nsmall commits.")]);
    assert_eq!(entries, "- [m1] Ana prefers small commits.");
    for project in [Project::Cli, Project::Llembas] {
        let kind = if project == Project::Cli {
            SessionKind::Agent
        } else {
            SessionKind::Chat
        };
        let offered = offer(spec, &context(project, kind, Mode::Manual)).unwrap();
        let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
        let mut vals = values();
        let full = |vals: &BTreeMap<String, String>| {
            assemble(
                spec,
                &PromptInput {
                    project,
                    kind,
                    mode: Mode::Manual,
                    subagent: None,
                    agent_text: None,
                    personality: None,
                    offered: &names,
                    instructions: &[],
                    plan: None,
                    prototypes: None,
                    values: vals,
                },
            )
            .unwrap()
        };
        let with = full(&vals);
        assert!(with.contains("# Memory"), "{with}");
        assert!(with.contains("- [m2] The API tests need `make db` first."));
        assert_eq!(
            with.contains("billing API's retries"),
            project == Project::Cli
        );
        assert_eq!(
            with.contains("- Platform: linux x86_64"),
            project == Project::Cli
        );
        vals.remove("memory_entries");
        vals.remove("client_context");
        vals.remove("platform");
        vals.remove("shell");
        vals.remove("git_status");
        let without = full(&vals);
        assert!(!without.contains("# Memory"), "{without}");
        assert!(!without.contains("From the app that opened"));
        assert!(
            !without.lines().any(|l| l.trim() == "-"),
            "an empty bullet stayed:\n{without}"
        );
    }
}
