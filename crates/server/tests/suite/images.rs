//! Images sent with a message: read from the person's view, sent inline to a model that reads
//! images, refused for one that does not, and drawn with the message from its run's event.

use harness_model::settings::ModelSettings;
use harness_test_support::ScriptedServer;
use serde_json::json;

use super::{Server, run_end, text};

/// A PNG of one pixel.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_go_inline_to_a_model_that_reads_them_and_are_refused_otherwise() {
    let model = ScriptedServer::start(vec![text(&["A dot."])])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A model whose catalogue entry says it reads images.
    let server = Server::start_with(dir.path(), &model.base_url(), |c| {
        c.model = Some(ModelSettings {
            model: Some("gpt-4o".into()),
            ..ModelSettings::new(&model.base_url())
        });
    });
    let mut alice = server.user("alice").await;
    let _bob = server.user("bob").await;
    let home = server.tree().join("home/alice");
    std::fs::write(home.join("dot.png"), PNG).unwrap();
    std::fs::write(home.join("notes.txt"), "not an image\n").unwrap();
    std::fs::write(server.tree().join("home/bob/bob.png"), PNG).unwrap();
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let url = format!("/api/chats/{chat}/messages");

    // Refused before any run: not an image, another user's, too many.
    for (images, status, says) in [
        (
            json!(["/home/alice/notes.txt"]),
            400,
            "is not an image a model reads",
        ),
        (json!(["/home/bob/bob.png"]), 403, "Access denied"),
        (json!(vec!["/home/alice/dot.png"; 9]), 400, "at most 8"),
    ] {
        let (got, v) = alice
            .post(&url, json!({"text": "look", "images": images}))
            .await;
        assert_eq!(got, status, "{v}");
        assert!(v.to_string().contains(says), "{v}");
    }
    assert!(model.bodies().is_empty(), "nothing reached the model");

    let (status, v) = alice
        .post(&url, json!({"text": "what is this", "images": ["dot.png"]}))
        .await;
    assert_eq!(status, 202, "{v}");
    let run = v["run"].as_str().unwrap().to_owned();
    stream.until(run_end(&run)).await;
    use base64::Engine as _;
    let data = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(PNG)
    );
    let sent = model.bodies()[0]["messages"].to_string();
    assert!(sent.contains(&data), "{sent}");
    // The run's event names the image where the page shows it from.
    let (_, c) = alice.get(&format!("/api/chats/{chat}")).await;
    let started = c["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"]["type"] == "run_started")
        .unwrap()
        .clone();
    assert_eq!(started["event"]["images"], json!(["/home/alice/dot.png"]));

    // A model that does not read images: refused, with why.
    let plain = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &plain.base_url());
    let mut alice = server.user("alice").await;
    std::fs::write(server.tree().join("home/alice/dot.png"), PNG).unwrap();
    let chat = alice.chat().await;
    let (status, v) = alice
        .post(
            &format!("/api/chats/{chat}/messages"),
            json!({"text": "look", "images": ["/home/alice/dot.png"]}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v.to_string()
            .contains("scripted does not read images (its metadata says so)"),
        "{v}"
    );
    assert!(plain.bodies().is_empty());
}
