//! A prompt's images and embedded files: advertised, taken, and sent to a model that sees.

use agent_client_protocol::v1::schema::{
    BlobResourceContents, ContentBlock, EmbeddedResource, EmbeddedResourceResource, ImageContent,
    TextContent, TextResourceContents,
};
use harness_acp::map::prompt_input;
use harness_agent::Reply;
use harness_core::message::Message;

use super::{TestHost, prompt_once};

fn blocks() -> Vec<ContentBlock> {
    vec![
        ContentBlock::Text(TextContent::new("What is wrong here?")),
        ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
        ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                "fn main() {}\n",
                "file:///work/src/main.rs",
            )),
        )),
        ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::BlobResourceContents(
                BlobResourceContents::new("R0lGODlh", "file:///work/shot.gif")
                    .mime_type("image/gif".to_owned()),
            ),
        )),
        ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::BlobResourceContents(BlobResourceContents::new(
                "AAEC",
                "file:///work/data.bin",
            )),
        )),
    ]
}

#[test]
fn every_block_is_taken_or_said() {
    let (text, images) = prompt_input(&blocks());
    assert_eq!(
        text,
        "What is wrong here?\n<context ref=\"file:///work/src/main.rs\">\nfn main() {}\n</context>\n\
         \n[file:///work/data.bin (no type): binary content, not read]\n"
    );
    assert_eq!(
        images,
        [
            "data:image/png;base64,iVBORw0KGgo=",
            "data:image/gif;base64,R0lGODlh"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompts_images_reach_a_model_that_sees() {
    let host = TestHost::new(vec![Reply::text("A missing semicolon.")]);
    host.vision
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let (answer, _) = prompt_once(host.clone(), blocks()).await;
    answer.unwrap();
    let requests = host.models.lock().unwrap()[0].requests();
    let (text, images) = requests[0]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::User { text, images, .. } => Some((text.clone(), images.clone())),
            _ => None,
        })
        .unwrap();
    assert!(
        text.contains("<context ref=\"file:///work/src/main.rs\">"),
        "{text}"
    );
    assert_eq!(images.len(), 2, "{images:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_plan_state_is_the_sessions_plan() {
    use agent_client_protocol::v1::schema::SessionUpdate;
    let plan = serde_json::json!({
        "title": "Retry failed uploads",
        "summary": "Wrap the upload client in a bounded retry.",
        "findings": [], "objectives": [],
        "phases": [{"id": "p1", "title": "Work", "tasks": [
            {"id": "t1", "title": "Add RetryPolicy", "status": "doing"}]}],
        "submitted": false
    });
    let slash = || vec![ContentBlock::Text(TextContent::new("/plan"))];
    // (capabilities, whether the plan card names the client's plan)
    for (caps, held) in [(&["plan_state"][..], true), (&[][..], false)] {
        let host = TestHost::new(Vec::new());
        let meta = serde_json::json!({"mode": "auto", "plan_state": plan});
        let (answer, updates) = super::prompt_with(host, caps, meta, slash()).await;
        answer.unwrap();
        let said: String = updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::AgentMessageChunk(c) => match &c.content {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(
            said.contains("Retry failed uploads"),
            held,
            "{caps:?}: {said}"
        );
        assert_eq!(said.contains("Add RetryPolicy"), held, "{caps:?}: {said}");
    }
}

/// The person's prompt commands: advertised after the built-in ones (not one that runs shell
/// commands), `/NAME ARGS` sends the expanded prompt to the model, and one that runs shell
/// commands is refused with a line saying where it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persons_prompt_commands_are_advertised_and_expanded() {
    use agent_client_protocol::v1::schema::SessionUpdate;
    use harness_agent::custom::{PromptCommand, Source};
    let said = |updates: &[SessionUpdate]| -> String {
        updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::AgentMessageChunk(c) => match &c.content {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    };
    let with_commands = |reply: Vec<Reply>| {
        let host = TestHost::new(reply);
        let mut commands = host.commands.lock().unwrap();
        commands.add(PromptCommand::from_file(
            "review",
            "---\ndescription: Review a file\nargument-hint: FILE\n---\nReview $ARGUMENTS for bugs.\n",
            Source::Project,
        ));
        commands.add(PromptCommand::from_file(
            "branch",
            "The branch: !`git branch --show-current`\n",
            Source::User,
        ));
        drop(commands);
        host
    };
    let text = |t: &str| vec![ContentBlock::Text(TextContent::new(t))];

    let host = with_commands(vec![Reply::text("Looks fine.")]);
    let (answer, updates) = super::prompt_with(
        host.clone(),
        &[],
        serde_json::json!({}),
        text("/review src/lib.rs"),
    )
    .await;
    answer.unwrap();
    let advertised = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::AvailableCommandsUpdate(c) => Some(c.available_commands.clone()),
            _ => None,
        })
        .expect("the commands advertised");
    let names: Vec<&str> = advertised.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["mode", "plan", "jobs", "compact", "recall", "review"]
    );
    assert_eq!(advertised[5].description, "Review a file");
    let requests = host.models.lock().unwrap()[0].requests();
    let sent = requests[0]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::User { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap();
    assert!(sent.contains("Review src/lib.rs for bugs."), "{sent}");
    assert!(!sent.contains("/review"), "{sent}");
    assert_eq!(said(&updates), "Looks fine.");

    let host = with_commands(Vec::new());
    let (answer, updates) =
        super::prompt_with(host.clone(), &[], serde_json::json!({}), text("/branch")).await;
    answer.unwrap();
    assert_eq!(
        said(&updates),
        "/branch runs shell commands (!`…`) before its prompt is sent; they run at the terminal only (llembas), not from an editor"
    );
    assert!(
        host.models.lock().unwrap()[0].requests().is_empty(),
        "the model was asked"
    );
}
