//! The personal tools (memory file, skills) and the bash rules.

use std::sync::Arc;

use harness_agent::Exit;
use harness_agent::commands::{bash_outcome, bash_seconds, bash_timeouts};
use harness_agent::personal::{PersonalTools, memory, memory_entries, runtime_values};
use harness_core::protocol::ToolCall;
use harness_fs::{Access, HostBackend, HostOptions, Level, View};
use harness_spec::Project;
use serde_json::json;

#[test]
fn memory_keeps_entries_in_its_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("memory.json");
    let (t, e) = memory(&p, &json!({"action": "add", "text": "Prefers tabs."}));
    assert!(!e, "{t}");
    assert!(memory_entries(&p).contains("Prefers tabs."));
    assert_eq!(
        runtime_values()["memory_limit"],
        "2,200 characters for `memory`, 1,375 for `user`"
    );
}

#[test]
fn bash_rules_come_from_the_spec() {
    assert_eq!(bash_timeouts(Project::Cli), Ok((120, 600)));
    // A call's timeout: the default without one, clamped to 1 ..= the most.
    assert_eq!(
        bash_seconds(Project::Cli, &json!({"command": "ls"})),
        Ok(120)
    );
    assert_eq!(bash_seconds(Project::Cli, &json!({"timeout": 30})), Ok(30));
    assert_eq!(bash_seconds(Project::Cli, &json!({"timeout": 0})), Ok(1));
    assert_eq!(
        bash_seconds(Project::Cli, &json!({"timeout": 9999})),
        Ok(600)
    );
    let done = bash_outcome("c1", "hi\n", Exit::Code(0));
    assert_eq!(
        (done.output.as_str(), done.is_error),
        ("hi\nexit code 0", false)
    );
    let killed = bash_outcome("c2", "", Exit::Signal(9));
    assert_eq!(
        (killed.output.as_str(), killed.is_error),
        ("(no output)\nkilled by signal 9", true)
    );
}

fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        id: format!("c_{name}"),
        name: name.into(),
        arguments,
    }
}

#[test]
fn a_new_skill_goes_to_the_person_and_a_change_where_the_skill_is() {
    let project = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let view = View::new(
        Arc::new(HostBackend::open(project.path(), HostOptions::default()).unwrap()),
        Access::new().grant("/", Level::Commit),
    );
    let tools = PersonalTools {
        user_skills: Some(user.path().join("skills")),
        ..PersonalTools::default()
    };
    assert!(tools.runs("skills_list") && !tools.runs("memory") && !tools.runs("notes_search"));
    let body = "---\nname: deploy\ndescription: How to deploy.\n---\nRun make deploy.\n";
    let made = tools
        .run(
            &view,
            &call(
                "skill_manage",
                json!({"action": "create", "name": "deploy", "content": body}),
            ),
        )
        .unwrap();
    assert!(!made.is_error, "{}", made.output);
    assert!(user.path().join("skills/deploy/SKILL.md").exists());
    let listed = tools.run(&view, &call("skills_list", json!({}))).unwrap();
    assert_eq!(listed.output, "deploy — How to deploy. (user)");
    let mine = "---\nname: lint\ndescription: Lint it.\n---\ncargo clippy\n";
    let made = tools
        .run(
            &view,
            &call(
                "skill_manage",
                json!({"action": "create", "name": "lint", "content": mine, "scope": "project"}),
            ),
        )
        .unwrap();
    assert!(!made.is_error, "{}", made.output);
    assert!(
        project
            .path()
            .join(".llembas/skills/lint/SKILL.md")
            .exists()
    );
    let listed = tools.run(&view, &call("skills_list", json!({}))).unwrap();
    assert_eq!(
        listed.output,
        "lint — Lint it. (project)\ndeploy — How to deploy. (user)"
    );
    assert!(tools.run(&view, &call("read", json!({}))).is_none());
}

#[test]
fn the_personal_values_are_those_of_the_parts_set() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("memory.json");
    memory(&p, &json!({"action": "add", "text": "Prefers tabs."}));
    let none = PersonalTools::default().values(None);
    assert_eq!(
        none,
        std::collections::BTreeMap::from([("skill_count".to_owned(), "0".to_owned())])
    );
    let tools = PersonalTools {
        memory: Some(p.clone()),
        ..PersonalTools::default()
    };
    let values = tools.values(None);
    assert_eq!(values["memory_entries"], memory_entries(&p));
    assert!(!values.contains_key("library_summary"));
}
