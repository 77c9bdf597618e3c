//! The everything server's prompts as the person's commands: listed with their arguments,
//! expanded by the server with the words typed after them, a missing required one said.

use harness_mcp::Limits;

use super::*;

#[tokio::test]
async fn its_prompts_are_commands_expanded_by_the_server() {
    let Some(mcp) = start_everything(Limits::default()).await else {
        return;
    };
    let commands = mcp.commands();
    let listed: Vec<String> = commands
        .iter()
        .map(|c| format!("/{} {:?}: {}", c.name, c.argument_hint, c.description))
        .collect();
    assert!(!commands.is_empty());
    let plain = commands
        .iter()
        .find(|c| c.argument_hint.is_none())
        .expect("a prompt without arguments");
    let text = mcp.expand(plain, "").await.unwrap();
    assert!(!text.trim().is_empty());
    let with_args = commands
        .iter()
        .find(|c| matches!(&c.source, harness_agent::custom::Source::Mcp { arguments, .. } if arguments.iter().any(|(_, r)| *r)))
        .expect("a prompt with a required argument");
    let missing = mcp.expand(with_args, "").await.unwrap_err();
    assert!(
        missing.starts_with(&format!("/{} needs ", with_args.name)),
        "{missing}"
    );
    // The words typed fill the arguments in order; the server's text holds them.
    let args = commands
        .iter()
        .find(|c| c.name == "mcp__everything__args-prompt")
        .unwrap();
    let text = mcp.expand(args, "Paris France").await.unwrap();
    assert!(text.contains("Paris") && text.contains("France"), "{text}");
    insta::assert_snapshot!(listed.join("\n") + "\n--- missing\n" + &missing);
}
