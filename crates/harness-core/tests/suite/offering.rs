//! The offering rules of the README, read against the spec's tools.

use std::collections::BTreeMap;

use harness_core::offer::{
    Facts, Holds, LOADER, OfferContext, Offering, is_offered, offer, resolve_call, unavailable,
};
use harness_core::protocol::{Mode, Project, Risk, SessionKind, ToolCall};
use harness_spec::Spec;
use serde_json::json;

fn values() -> BTreeMap<String, String> {
    [
        ("memory_limit", "4,000 characters"),
        (
            "python_packages",
            "numpy, pandas and matplotlib can be imported.",
        ),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect()
}

fn cx(project: Project, kind: SessionKind, mode: Mode, holds: Holds) -> OfferContext {
    let mut c = OfferContext::new(project, kind, mode);
    c.holds = holds;
    c.values = values();
    c
}

const ALL_HOLD: Holds = Holds {
    page: true,
    display: true,
    forge: true,
};

fn names(c: &OfferContext) -> Vec<String> {
    offer(Spec::embedded(), c)
        .expect("offer")
        .into_iter()
        .map(|t| t.name)
        .collect()
}

fn every_context() -> Vec<OfferContext> {
    let mut out = Vec::new();
    for project in [Project::Cli, Project::Llembas] {
        for kind in SessionKind::ALL {
            for mode in Mode::ALL {
                for holds in [Holds::default(), ALL_HOLD] {
                    for subagent in [false, true] {
                        let mut c = cx(project, kind, mode, holds);
                        c.subagent = subagent;
                        out.push(c);
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_readme_rules_hold_everywhere() {
    for c in every_context() {
        let n = names(&c);
        let has = |t: &str| n.iter().any(|x| x == t);
        let label = format!("{:?}", c);
        if c.kind == SessionKind::Chat {
            assert!(!has("bash"), "bash in a chat: {label}");
        }
        if c.kind == SessionKind::Agent {
            assert!(!has("mkdir"), "mkdir in an agent session: {label}");
        }
        if !c.holds.display {
            assert!(!has("show"), "show without a display: {label}");
        }
        if !c.holds.page {
            assert!(!has("python"), "python without a page: {label}");
        }
        if !c.holds.forge {
            for t in ["commit", "branch", "pr", "merge", "tag", "release"] {
                assert!(!has(t), "{t} without a forge: {label}");
            }
        }
        assert_eq!(
            has("report"),
            c.subagent,
            "report only for subagents: {label}"
        );
        assert_eq!(
            has("plan_submit"),
            c.mode == Mode::Plan,
            "plan_submit: {label}"
        );
        assert!(
            has("plan_write") && has("plan_update"),
            "plan tools: {label}"
        );
        if c.project == Project::Llembas {
            for t in [
                "notes_search",
                "knowledge_search",
                "bash",
                "multiedit",
                "apply_patch",
            ] {
                assert!(!has(t), "{t} is not LLeMbas's: {label}");
            }
        }
        if c.project == Project::Cli {
            for t in ["mkdir", "mv", "rm", "search", "python", "commit"] {
                assert!(!has(t), "{t} is not the CLI's: {label}");
            }
        }
    }
}

#[test]
fn the_two_main_sessions() {
    let cli = names(&cx(
        Project::Cli,
        SessionKind::Agent,
        Mode::Edit,
        Holds::default(),
    ));
    for t in [
        "bash",
        "read",
        "write",
        "edit",
        "glob",
        "grep",
        "list",
        "task",
        "notes_search",
        "job_list",
    ] {
        assert!(cli.iter().any(|x| x == t), "the CLI offers {t}");
    }
    let chat = names(&cx(
        Project::Llembas,
        SessionKind::Chat,
        Mode::Edit,
        ALL_HOLD,
    ));
    for t in [
        "read", "write", "mkdir", "mv", "rm", "search", "python", "show", "commit", "merge",
    ] {
        assert!(chat.iter().any(|x| x == t), "a chat offers {t}");
    }
}

#[test]
fn a_read_only_helper_gets_exactly_the_readers() {
    let spec = Spec::embedded();
    for c in every_context() {
        let mut ro = c.clone();
        ro.read_only = true;
        let got = names(&ro);
        let want: Vec<String> = spec
            .tools()
            .iter()
            .filter(|t| t.risk == Risk::Read && is_offered(t, &c))
            .map(|t| t.name.clone())
            .collect();
        assert_eq!(got, want);
        for name in &got {
            assert_eq!(spec.tool(name).unwrap().risk, Risk::Read);
        }
    }
}

#[test]
fn purpose_goes_first_and_is_required() {
    let spec = Spec::embedded();
    let tools = offer(
        spec,
        &cx(Project::Cli, SessionKind::Agent, Mode::Auto, ALL_HOLD),
    )
    .unwrap();
    let bash = tools.iter().find(|t| t.name == "bash").unwrap();
    let props = bash.parameters["properties"].as_object().unwrap();
    assert_eq!(props.keys().next().map(String::as_str), Some("purpose"));
    assert_eq!(bash.parameters["required"][0], json!("purpose"));
    let read = tools.iter().find(|t| t.name == "read").unwrap();
    assert!(read.parameters["properties"].get("purpose").is_none());
}

#[test]
fn nothing_unfilled_reaches_a_model() {
    for c in every_context() {
        for t in offer(Spec::embedded(), &c).unwrap() {
            assert!(!t.description.contains("{{"), "{} description", t.name);
            assert!(
                !t.parameters.to_string().contains("{{"),
                "{} parameters",
                t.name
            );
        }
    }
    // Without the run-time value of memory_limit, the offer is an error naming it.
    let mut c = cx(
        Project::Cli,
        SessionKind::Agent,
        Mode::Edit,
        Holds::default(),
    );
    c.values.clear();
    let e = offer(Spec::embedded(), &c).unwrap_err();
    assert!(e.to_string().contains("memory_limit"), "{e}");
}

#[test]
fn a_requirement_gone_answers_the_unavailable_text() {
    let spec = Spec::embedded();
    let python = spec.tool("python").unwrap();
    assert_eq!(
        unavailable(python, &Holds::default()),
        Some("Python cannot run now: no open browser page is attached to this chat.")
    );
    assert_eq!(unavailable(python, &ALL_HOLD), None);
    let read = spec.tool("read").unwrap();
    assert_eq!(unavailable(read, &Holds::default()), None);
}

#[test]
fn aliases_work_as_the_tool() {
    let spec = Spec::embedded();
    let call = |name: &str, args| ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: args,
    };
    let r = resolve_call(spec, Project::Cli, &call("bash_output", json!({"id": "2"}))).unwrap();
    assert_eq!(r.call.name, "job_output");
    assert_eq!(r.former.as_deref(), Some("bash_output"));
    let r = resolve_call(
        spec,
        Project::Cli,
        &call(
            "todo",
            json!({"todos": [{"content": "x", "status": "in_progress"}]}),
        ),
    )
    .unwrap();
    assert_eq!(r.call.name, "plan_write");
    assert_eq!(
        r.call.arguments,
        json!({"title": "Work", "phases": [{"title": "Work", "tasks": [{"title": "x", "status": "doing"}]}]})
    );
    assert!(resolve_call(spec, Project::Llembas, &call("todo", json!({"todos": []}))).is_err());
    assert!(resolve_call(spec, Project::Llembas, &call("bash", json!({}))).is_err());
    let r = resolve_call(
        spec,
        Project::Cli,
        &call("bash", json!({"purpose": "list files", "command": "ls"})),
    )
    .unwrap();
    assert_eq!(r.purpose.as_deref(), Some("list files"));
    assert_eq!(r.call.arguments, json!({"command": "ls"}));
}

#[test]
fn an_offering_knows_only_what_it_offered() {
    let spec = Spec::embedded();
    let o = Offering::new(
        spec,
        cx(
            Project::Llembas,
            SessionKind::Chat,
            Mode::Edit,
            Holds::default(),
        ),
    )
    .unwrap();
    let call = |name: &str| ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: json!({}),
    };
    assert!(o.resolve(&call("read")).is_ok());
    assert!(o.resolve(&call("python")).is_err());
    assert!(o.resolve(&call("plan_submit")).is_err());
    assert!(o.resolve(&call("nonsense")).is_err());
}

#[test]
fn calls_are_checked_against_the_tool_as_offered() {
    let spec = Spec::embedded();
    let call = |name: &str, args| ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: args,
    };
    let chat = Offering::new(
        spec,
        cx(Project::Llembas, SessionKind::Chat, Mode::Edit, ALL_HOLD),
    )
    .unwrap();
    // LLeMbas narrows memory to one store: `target` is not part of its tool.
    assert!(
        chat.check(&call("memory", json!({"action": "view"})))
            .is_ok()
    );
    let e = chat
        .check(&call("memory", json!({"action": "view", "target": "user"})))
        .unwrap_err()
        .to_string();
    assert!(e.contains("memory: invalid arguments"), "{e}");
    let cli = Offering::new(
        spec,
        cx(
            Project::Cli,
            SessionKind::Agent,
            Mode::Edit,
            Holds::default(),
        ),
    )
    .unwrap();
    assert!(
        cli.check(&call("memory", json!({"action": "view", "target": "user"})))
            .is_ok()
    );
    // `purpose` is required where the tool has it, and taken out after the check.
    assert!(cli.check(&call("bash", json!({"command": "ls"}))).is_err());
    let r = cli
        .check(&call(
            "bash",
            json!({"purpose": "list the files", "command": "ls"}),
        ))
        .unwrap();
    assert_eq!(r.call.arguments, json!({"command": "ls"}));
    // The former `todo` converts to arguments plan_write takes.
    let r = cli
        .check(&call(
            "todo",
            json!({"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "completed"}]}),
        ))
        .unwrap();
    assert_eq!(r.call.name, "plan_write");
    let e = cli
        .check(&call("read", json!({"path": 3})))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/path"), "{e}");
}

/// A fresh CLI session with an empty library and no skills, as the CLI's world says it.
fn fresh_cli(loaded: &[&str]) -> OfferContext {
    let mut c = cx(
        Project::Cli,
        SessionKind::Agent,
        Mode::Edit,
        Holds::default(),
    );
    c.values
        .insert("library_summary".into(), "0 notes, 0 documents".into());
    c.values.insert("skill_count".into(), "0".into());
    c.facts = Facts::from_values(&c.values);
    c.loaded = loaded.iter().map(|s| (*s).to_owned()).collect();
    c
}

#[test]
fn the_first_step_of_coding_work_is_sent_whole() {
    let o = Offering::new(Spec::embedded(), fresh_cli(&[])).expect("offering");
    let sent: Vec<&str> = o.tools.iter().map(|t| t.name.as_str()).collect();
    for name in [
        "read", "write", "edit", "glob", "grep", "list", "bash", LOADER,
    ] {
        assert!(sent.contains(&name), "{name} is not sent whole: {sent:?}");
    }
    // The plan's tools wait under the loader until a task plans (or the mode is plan mode).
    let deferred: Vec<&str> = o.deferred.iter().map(|t| t.name.as_str()).collect();
    for name in ["plan_write", "plan_update"] {
        assert!(
            deferred.contains(&name),
            "{name} is not deferred: {deferred:?}"
        );
    }
    assert!(!o.deferred.is_empty());
    for t in &o.deferred {
        assert!(
            !sent.contains(&t.name.as_str()),
            "{} sent and deferred",
            t.name
        );
    }
}

#[test]
fn plan_mode_sends_the_plans_tools_whole() {
    let mut c = fresh_cli(&[]);
    c.mode = Mode::Plan;
    let o = Offering::new(Spec::embedded(), c).expect("offering");
    let sent: Vec<&str> = o.tools.iter().map(|t| t.name.as_str()).collect();
    for name in ["plan_write", "plan_update", "plan_submit"] {
        assert!(sent.contains(&name), "{name} is not sent whole: {sent:?}");
    }
}

#[test]
fn every_tool_is_still_callable_deferred_or_not() {
    // Facts not known: every tool the CLI's agent session has is offered.
    let c = cx(
        Project::Cli,
        SessionKind::Agent,
        Mode::Edit,
        Holds::default(),
    );
    let o = Offering::new(Spec::embedded(), c.clone()).expect("offering");
    let all = offer(Spec::embedded(), &c).expect("offer");
    assert!(all.iter().any(|t| t.tool.deferred));
    for t in &all {
        let call = ToolCall {
            id: "c1".into(),
            name: t.name.clone(),
            arguments: json!({}),
        };
        let r = o
            .resolve(&call)
            .unwrap_or_else(|e| panic!("{} does not resolve: {e}", t.name));
        assert_eq!(r.tool.name, t.name);
        assert!(o.offers(&t.name), "{} is not offered", t.name);
    }
    let load = ToolCall {
        id: "c2".into(),
        name: LOADER.into(),
        arguments: json!({}),
    };
    assert!(o.resolve(&load).is_ok(), "the loader is not callable");
}

#[test]
fn a_load_sends_the_tool_whole_from_then_on() {
    let o = Offering::new(Spec::embedded(), fresh_cli(&[])).expect("offering");
    assert!(o.is_deferred("web_fetch"));
    let call = ToolCall {
        id: "c1".into(),
        name: LOADER.into(),
        arguments: json!({"names": ["web_fetch", "read", "no_such_tool"]}),
    };
    let (names, load) = o.load(&call);
    assert_eq!(names, vec!["web_fetch".to_owned()]);
    let (text, error) = load.answer();
    assert!(!error);
    assert!(text.contains("Loaded web_fetch"), "{text}");
    assert!(text.contains("Already loaded: read."), "{text}");
    assert!(text.contains("no_such_tool"), "{text}");
    let again = Offering::new(Spec::embedded(), fresh_cli(&["web_fetch"])).expect("offering");
    assert!(again.tools.iter().any(|t| t.name == "web_fetch"));
    let loader = again
        .tools
        .iter()
        .find(|t| t.name == LOADER)
        .expect("the loader");
    assert!(!loader.description.contains("- web_fetch:"));
}

#[test]
fn an_empty_library_and_no_skills_are_not_offered() {
    let o = Offering::new(Spec::embedded(), fresh_cli(&[])).expect("offering");
    for name in harness_core::prompt::LIBRARY_TOOLS
        .iter()
        .chain(&["skills_list", "skill_view"])
    {
        assert!(!o.offers(name), "{name} is offered with nothing to serve");
    }
    assert!(o.offers("skill_manage"), "the first skill cannot be made");
}
