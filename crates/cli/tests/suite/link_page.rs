//! The device pages in a real browser ([`harness_test_support::browser`]: Debian's headless
//! Chromium through chromedriver), against the real server and a real `llembas link` process:
//! the /devices page pairs it and shows it online with what it shares, a new chat "on" it from
//! the chat list runs on its disk (a write approved in the page, the plan card, Stop), and Revoke
//! ends it. Screenshots go where the server's browser tests put theirs
//! (`CARGO_TARGET_TMPDIR/browser/`, named `device-…`).
//!
//! Without chromedriver every test here fails at once, saying how to install it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fantoccini::{Client, Locator, key::Key};
use harness_test_support::ScriptedServer;
use harness_test_support::browser::run;
use serde_json::{Value, json};

use super::link::{Device, Server};
use super::{Sandbox, text, tool_call};

/// How long a wait in the page may take before the test fails.
const WAIT: Duration = Duration::from_secs(30);

/// A fresh page: no cookie, a desktop window.
async fn fresh() -> &'static Client {
    let b = match harness_test_support::browser::shared().await {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    };
    let c = &b.client;
    c.set_window_size(1280, 900).await.unwrap();
    c.goto("about:blank").await.unwrap();
    c.delete_all_cookies().await.unwrap();
    c
}

async fn shot(c: &Client, name: &str) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser");
    std::fs::create_dir_all(&dir).unwrap();
    let png = c.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("device-{name}.png")), png).unwrap();
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.unwrap()
}

async fn page_text(c: &Client) -> String {
    js(c, "return document.body.innerText")
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits until the script returns true.
async fn until(c: &Client, what: &str, script: &str) {
    let start = Instant::now();
    while c.execute(script, vec![]).await.unwrap_or(Value::Null) != Value::Bool(true) {
        if start.elapsed() > WAIT {
            shot(c, "timed-out").await;
            panic!(
                "the page did not show {what} within {WAIT:?}; it shows:\n{}",
                page_text(c).await
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn find(c: &Client, css: &str) -> fantoccini::elements::Element {
    match c.wait().at_most(WAIT).for_element(Locator::Css(css)).await {
        Ok(e) => e,
        Err(e) => {
            shot(c, "timed-out").await;
            panic!(
                "no {css} in the page within {WAIT:?} ({e}); it shows:\n{}",
                page_text(c).await
            );
        }
    }
}

async fn say(c: &Client, words: &str) {
    let prompt = find(c, "#prompt").await;
    prompt.send_keys(words).await.unwrap();
    prompt
        .send_keys(&char::from(Key::Enter).to_string())
        .await
        .unwrap();
}

/// The text of the device's row in the /devices page (a script's expression).
fn row(id: &str) -> String {
    format!("(document.querySelector(\"tr[data-device='{id}']\")?.innerText ?? '')")
}

#[test]
fn a_device_is_paired_in_the_page_and_holds_a_chat_there_until_revoked() {
    run(async {
        let model = ScriptedServer::start(vec![
            tool_call(
                "p1",
                "plan_write",
                json!({"title": "Greet the device", "summary": "Write the file, then check it.",
                    "phases": [{"title": "Work", "tasks": [{"title": "Write hello.txt", "status": "done"},
                                                          {"title": "Check it", "status": "done"}]}]}),
            ),
            tool_call(
                "w1",
                "write",
                json!({"path": "hello.txt", "content": "hello from the page\n"}),
            ),
            text(&["Wrote ", "hello.txt."]),
            text(&["Working"]).stalling(),
        ])
        .await
        .unwrap();
        let data = tempfile::tempdir().unwrap();
        let server = Server::start(data.path(), &model.base_url(), "127.0.0.1:0");
        let alice = server.user("alice").await;
        let sb = Sandbox::new();
        let root = sb.root();
        let root_text = root.display().to_string();
        let c = fresh().await;
        c.goto(&format!("{}/login", server.base)).await.unwrap();
        find(c, "#username").await.send_keys("alice").await.unwrap();
        find(c, "#password")
            .await
            .send_keys("alice-password")
            .await
            .unwrap();
        find(c, "#signin").await.click().await.unwrap();
        find(c, "#newchat").await;

        // `llembas link` prints a code and the page to confirm it on; the person opens that
        // page (the code filled in), names the device and links it.
        let mut device = Device::start(
            &sb,
            &model.base_url(),
            &server.base,
            &["--root", &root_text, "--name", "laptop"],
        );
        let said = device.line("To link this device, open").await;
        let url = said.split("open ").nth(1).unwrap().trim().to_owned();
        assert!(
            url.starts_with(&format!("{}/devices?code=", server.base)),
            "{url}"
        );
        c.goto(&url).await.unwrap();
        let code = url.split("code=").nth(1).unwrap();
        assert_eq!(
            find(c, "#usercode").await.prop("value").await.unwrap(),
            Some(code.to_owned())
        );
        until(
            c,
            "the empty list",
            "return document.body.dataset.devices === '0'",
        )
        .await;
        assert_eq!(
            js(
                c,
                "return document.querySelector('#pairing code').textContent"
            )
            .await,
            json!(format!("llembas link {}", server.base))
        );
        shot(c, "pairing").await;
        find(c, "#devicename")
            .await
            .send_keys("Ana's laptop")
            .await
            .unwrap();
        find(c, "#confirmdevice").await.click().await.unwrap();
        until(
            c,
            "the pairing confirmed",
            "return document.querySelector('#paired').textContent.startsWith(\"Linked Ana's laptop\")",
        )
        .await;
        let l = device.line("paired as").await;
        let id = l
            .split("(device ")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap()
            .to_owned();
        device.line("linked to").await;
        server.until_link(&id, |l| l.is_some()).await;
        // The list follows the device: online, sharing its root, without a reload.
        until(
            c,
            "the device online",
            &format!("return {}.includes('online')", row(&id)),
        )
        .await;
        let shown = js(c, &format!("return {}", row(&id))).await;
        let shown = shown.as_str().unwrap();
        assert!(shown.contains("Ana's laptop"), "{shown}");
        assert!(shown.contains(&root_text), "{shown}");
        shot(c, "linked").await;

        // A new chat on the device, in the directory it shares, from the chat list.
        c.goto(&format!("{}/chats", server.base)).await.unwrap();
        find(c, "#newmode")
            .await
            .select_by_value("manual")
            .await
            .unwrap();
        until(
            c,
            "the device offered",
            "return !document.querySelector('.new.where').hidden",
        )
        .await;
        find(c, "#newwhere")
            .await
            .select_by_value(&id)
            .await
            .unwrap();
        assert_eq!(
            find(c, "#newdir").await.prop("value").await.unwrap(),
            Some(root_text.clone())
        );
        shot(c, "new-chat").await;
        find(c, "#newchat").await.click().await.unwrap();
        find(c, "#prompt").await;
        let chat = c
            .current_url()
            .await
            .unwrap()
            .path()
            .trim_start_matches("/chats/")
            .to_owned();
        let v: Value = alice
            .get(format!("{}/api/chats/{chat}?messages=0", server.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["device"]["id"], json!(id), "{v}");
        assert_eq!(v["device"]["cwd"], json!(root_text), "{v}");
        until(
            c,
            "the device's tag",
            "return document.querySelector('#device')?.classList.contains('online') === true",
        )
        .await;

        // A write asked in the page, with its change; approved there, it lands on the device.
        say(c, "plan it, then write hello.txt").await;
        find(c, ".ask .yes").await;
        let preview = js(
            c,
            "return [...document.querySelectorAll('.tool .preview .add')].map(l => l.textContent)",
        )
        .await;
        assert_eq!(preview, json!(["+hello from the page"]));
        assert!(!root.join("hello.txt").exists());
        until(
            c,
            "the plan card",
            "return document.querySelectorAll('#plan [data-task]').length === 2",
        )
        .await;
        shot(c, "asked").await;
        find(c, ".ask .yes").await.click().await.unwrap();
        until(
            c,
            "the answer after the write",
            "return document.querySelector('.answer')?.textContent === 'Wrote hello.txt.'",
        )
        .await;
        until(
            c,
            "the run's end",
            "return document.body.dataset.running === 'no'",
        )
        .await;
        assert_eq!(sb.read("hello.txt"), "hello from the page\n");
        let plan = js(c, "return document.querySelector('#plan').innerText").await;
        assert!(
            plan.as_str().unwrap().contains("Greet the device"),
            "{plan}"
        );
        shot(c, "approved").await;

        // Stop: the device's turn is cancelled, the run stopped.
        say(c, "work a while").await;
        until(
            c,
            "the stalled answer",
            "return [...document.querySelectorAll('.answer')].some(a => a.textContent === 'Working')",
        )
        .await;
        find(c, "#stop").await.click().await.unwrap();
        until(
            c,
            "the run stopped",
            "return document.body.dataset.running === 'no'",
        )
        .await;
        find(c, "p.notice[id^='stopped-']").await;
        shot(c, "stopped").await;

        // Revoked in the page: the device is told to pair again and stops; the list is empty.
        c.goto(&format!("{}/devices", server.base)).await.unwrap();
        find(c, &format!("tr[data-device='{id}'] button.danger"))
            .await
            .click()
            .await
            .unwrap();
        c.accept_alert().await.unwrap();
        until(
            c,
            "the device gone",
            "return document.body.dataset.devices === '0'",
        )
        .await;
        device.line("pair it again").await;
        assert_ne!(device.ends().await, 0);
        server.until_link(&id, |l| l.is_none()).await;
        shot(c, "revoked").await;
    });
}
