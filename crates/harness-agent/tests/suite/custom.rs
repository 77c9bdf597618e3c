//! The person's prompt commands: files named and described, arguments filled as Claude Code
//! fills them, inline commands found and replaced, built-in names kept, lines read.

use harness_agent::custom::{
    Commands, PromptCommand, Source, command_name, inline_commands, replace_inline,
};
use harness_agent::slash::{Line, parse_line_in};
use pretty_assertions::assert_eq;

#[test]
fn files_are_named_by_path_and_described_by_front_matter_or_first_line() {
    assert_eq!(command_name("review.md").as_deref(), Some("review"));
    assert_eq!(
        command_name("frontend/component.md").as_deref(),
        Some("frontend:component")
    );
    for not in ["notes.txt", "a b.md", ".hidden.md", "x/.md", "/abs.md"] {
        assert_eq!(command_name(not), None, "{not}");
    }
    let c = PromptCommand::from_file(
        "fix-issue",
        "---\ndescription: Fix a GitHub issue\nargument-hint: NUMBER [PRIORITY]\n---\nFix issue #$1 at priority $2.\n",
        Source::Project,
    );
    assert_eq!(c.description, "Fix a GitHub issue");
    assert_eq!(c.argument_hint.as_deref(), Some("NUMBER [PRIORITY]"));
    assert_eq!(c.body, "Fix issue #$1 at priority $2.\n");
    let plain = PromptCommand::from_file("t", "# Run the tests\n\nThen say.", Source::User);
    assert_eq!(plain.description, "Run the tests");
}

#[test]
fn arguments_fill_the_placeholders_or_follow_the_text() {
    let cmd = |body: &str| PromptCommand::from_file("c", body, Source::Project);
    let cases = [
        (
            "Review $ARGUMENTS now.",
            "src/a.rs src/b.rs",
            "Review src/a.rs src/b.rs now.",
        ),
        (
            "Fix #$1 ($2), not $3.",
            "123 high",
            "Fix #123 (high), not .",
        ),
        ("Costs $5 and $x.", "a b c d e", "Costs e and $x."),
        ("Explain the code.", "", "Explain the code."),
        (
            "Explain the code.",
            "slowly",
            "Explain the code.\n\nARGUMENTS: slowly",
        ),
        ("Price: $", "", "Price: $"),
    ];
    for (body, args, want) in cases {
        assert_eq!(cmd(body).expand(args), want, "{body:?} with {args:?}");
    }
}

#[test]
fn inline_commands_are_found_and_replaced_by_their_output() {
    let text = "Status: !`git status --short`\nBranch: !`git branch --show-current` and `code`.";
    let found = inline_commands(text);
    assert_eq!(found, ["git status --short", "git branch --show-current"]);
    let out = replace_inline(text, &["M a.rs\n".into(), "main\n".into()]);
    assert_eq!(out, "Status: M a.rs\nBranch: main and `code`.");
    assert!(inline_commands("a !` ` b and !`unclosed").is_empty());
}

#[test]
fn a_line_reads_as_a_command_only_when_one_has_its_name() {
    let mut commands = Commands::default();
    commands.add(PromptCommand::from_file(
        "review",
        "Review $ARGUMENTS",
        Source::Project,
    ));
    // The project's wins over the user's; a built-in name is never taken.
    commands.add(PromptCommand::from_file("review", "Other", Source::User));
    commands.add(PromptCommand::from_file(
        "status",
        "Not this",
        Source::Project,
    ));
    assert_eq!(commands.get("review").unwrap().source, Source::Project);
    assert!(commands.get("status").is_none());
    assert_eq!(
        parse_line_in("/review  src/a.rs  fast ", &commands),
        Line::Custom {
            name: "review".into(),
            args: "src/a.rs  fast".into()
        }
    );
    assert_eq!(parse_line_in("/status", &commands), Line::Status);
    assert!(matches!(
        parse_line_in("/nope", &commands),
        Line::Unknown(_)
    ));
    assert!(commands.help().starts_with("/review"));
}

#[test]
fn mcp_prompt_arguments_fill_in_order_the_last_taking_the_rest() {
    let c = PromptCommand {
        name: "mcp__w__forecast".into(),
        description: String::new(),
        argument_hint: None,
        body: String::new(),
        source: Source::Mcp {
            server: "w".into(),
            prompt: "forecast".into(),
            arguments: vec![("city".into(), true), ("when".into(), false)],
        },
    };
    let got = c.mcp_arguments("Paris next week").unwrap();
    assert_eq!(got["city"], "Paris");
    assert_eq!(got["when"], "next week");
    assert_eq!(c.mcp_arguments("Paris").unwrap().len(), 1);
    assert_eq!(
        c.mcp_arguments(" ").unwrap_err(),
        "/mcp__w__forecast needs city: give its arguments in order (city when)"
    );
}
