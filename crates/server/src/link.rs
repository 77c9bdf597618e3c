//! The device link (`spec/acp.md` §1): the WebSocket a paired device dials out to
//! (`GET /api/device/link`), with the server as the ACP client of the agent the device runs
//! (`llembas link`: the same handlers as `llembas acp`, over this socket).
//!
//! - Before the upgrade: a request carrying an `Origin` is refused (403), one without a valid
//!   device token (`Authorization: Bearer lld_…`) is refused (401) — before any JSON-RPC.
//! - Each text frame is one JSON-RPC message (`agent_client_protocol::Lines` over the socket);
//!   other frames carry none. Frames and messages are capped at [`MAX_FRAME_BYTES`].
//! - The server pings every [`PING_EVERY`] and drops a link that answered nothing for two of
//!   them.
//! - On connect the server sends `initialize` and keeps the device's `instance` and `limits`
//!   (`_meta.lembas`): the device list shows them, and they are stored as the device's last
//!   known ones.
//! - One live link per device: a new dial replaces the older link, which is closed with
//!   [`CLOSE_REPLACED`]; revoking the device closes its live link at once with
//!   [`CLOSE_REVOKED`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, InitializeRequest, RequestPermissionRequest, SessionNotification,
};
use agent_client_protocol::{Client, Lines};
use axum::Router;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt as _, StreamExt as _};
use harness_acp::ext::{
    JobNoteNotification, JobNotification, MachinePrompt, MachinePromptEnd, PlanStateNotification,
    ShowRequest,
};
use serde_json::{Value, json};

pub use crate::device_links::{CLOSE_REPLACED, CLOSE_REVOKED, Links, Live};

use crate::App;
use crate::devices;
use crate::error::{Error, Result};

/// The largest frame (and message) either side of the link takes: 16 MiB (`spec/acp.md` §1).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// How often the server pings a link.
pub const PING_EVERY: Duration = Duration::from_secs(20);
/// How many pings may go unanswered before the link is dropped.
const MISSED_PONGS: u32 = 2;

/// The link's route.
pub fn routes() -> Router<Arc<App>> {
    Router::new().route("/api/device/link", get(dial))
}

async fn dial(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    ws: std::result::Result<
        WebSocketUpgrade,
        axum::extract::ws::rejection::WebSocketUpgradeRejection,
    >,
) -> Result<Response> {
    devices::refuse_origin(&headers)?;
    let (id, user_id) = devices::by_token(&app, &headers).await?;
    app.refuse_when_stopping()?;
    let ws = ws.map_err(|e| {
        use axum::response::IntoResponse as _;
        let r = e.into_response();
        Error::Rejected {
            status: r.status(),
            message: "the device link is a WebSocket: dial it with `llembas link`".into(),
        }
    })?;
    let api_url = crate::memory::api_url(&app, &headers);
    Ok(ws
        .max_frame_size(MAX_FRAME_BYTES)
        .max_message_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket| run(app, id, user_id, api_url, socket)))
}

/// The client's `initialize`: ACP v1 and the `_lembas` capabilities the server speaks
/// ([`crate::device_ext::CAPABILITIES`]).
fn initialize() -> InitializeRequest {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "lembas".into(),
        json!({"protocol": 2, "spec": harness_spec_version(),
            "capabilities": crate::device_ext::CAPABILITIES}),
    );
    InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(ClientCapabilities::new().meta(meta))
        .client_info(agent_client_protocol::v1::schema::Implementation::new(
            "llembas-server",
            env!("CARGO_PKG_VERSION"),
        ))
}

fn harness_spec_version() -> String {
    harness_spec::Spec::embedded().version().to_string()
}

/// One link, from its upgrade to its end.
async fn run(app: Arc<App>, id: String, user_id: i64, api_url: String, socket: WebSocket) {
    let (generation, mut stop) = app.device_links.register(&id);
    let (mut sink, stream) = socket.split();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Message>(64);
    // One writer for the socket: the ACP lines, the pings, the close.
    let writer = tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let closing = matches!(m, Message::Close(_));
            if sink.send(m).await.is_err() || closing {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let heard = Arc::new(Mutex::new(Instant::now()));
    let h = heard.clone();
    let incoming = stream.filter_map(move |m| {
        if let Ok(mut t) = h.lock() {
            *t = Instant::now();
        }
        std::future::ready(match m {
            Ok(Message::Text(t)) => Some(Ok(t.to_string())),
            Ok(_) => None,
            Err(e) => Some(Err(std::io::Error::other(e))),
        })
    });
    let outgoing = futures_util::sink::unfold(tx.clone(), async |out, line: String| {
        out.send(Message::Text(line.into())).await.map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the device link closed")
        })?;
        Ok::<_, std::io::Error>(out)
    });
    let transport = Lines::new(Box::pin(outgoing), Box::pin(incoming));
    let a = app.clone();
    let device = id.clone();
    let (app_n, device_n) = (app.clone(), id.clone());
    let (app_r, device_r) = (app.clone(), id.clone());
    let mut stopped = stop.clone();
    let ext = Ext {
        app: app.clone(),
        device: id.clone(),
    };
    let [e1, e2, e3, e4, e5, e6]: [Ext; 6] = std::array::from_fn(|_| ext.clone());
    let client = Client
        .v1()
        // The device's `_lembas` messages ([`crate::device_ext`]).
        .on_receive_notification(
            async move |n: PlanStateNotification, _cx| {
                crate::device_ext::plan_state(&e1.app, &e1.device, n).await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_notification(
            async move |n: JobNotification, _cx| {
                crate::device_ext::job(&e2.app, &e2.device, n).await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_notification(
            async move |n: JobNoteNotification, _cx| {
                crate::device_ext::job_note(&e3.app, &e3.device, n).await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_notification(
            async move |n: MachinePrompt, _cx| {
                crate::device_ext::machine_prompt(&e4.app, &e4.device, n).await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_notification(
            async move |n: MachinePromptEnd, _cx| {
                crate::device_ext::machine_prompt_end(&e5.app, &e5.device, n).await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            // The viewer's answer may wait for the person: answered from a task of its own.
            async move |r: ShowRequest, responder, _cx| {
                let (app, device) = (e6.app.clone(), e6.device.clone());
                tokio::spawn(async move {
                    let shown = crate::device_ext::show(app, device, r).await;
                    let _ = responder.respond(shown);
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            // A chat's run on the device: its events ([`crate::device_chats`]).
            async move |n: SessionNotification, _cx| {
                crate::device_chats::update(&app_n, &device_n, n).await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            // The device asks the person: an approval the page answers, or refused when no run
            // of a chat goes on in the session.
            async move |r: RequestPermissionRequest, responder, _cx| {
                crate::device_chats::permission(&app_r, &device_r, r, responder).await;
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx| {
            let init = cx.send_request(initialize()).block_task().await?;
            let init = serde_json::to_value(&init).unwrap_or_default();
            let lembas = init
                .pointer("/agentCapabilities/_meta/lembas")
                .cloned()
                .unwrap_or(Value::Null);
            let limits = lembas.get("limits").cloned().unwrap_or(Value::Null);
            if let Err(e) = devices::seen(&a, &device, Some(&limits)).await {
                tracing::warn!("device {device}: {e}");
            }
            a.device_links.ready(
                &device,
                Live {
                    generation,
                    user_id,
                    limits,
                    instance: lembas.get("instance").cloned().unwrap_or(Value::Null),
                    agent: cx.clone(),
                    api_url,
                },
            );
            let _ = stopped.wait_for(Option::is_some).await;
            Ok(())
        });
    let keepalive = keep_alive(tx.clone(), heard);
    let code = tokio::select! {
        r = client => {
            if let Err(e) = r {
                tracing::info!("device {id}: the link ended: {e}");
            }
            stop.borrow_and_update().unwrap_or(1000)
        }
        () = keepalive => 1001,
    };
    closed(&app, &id, generation, code, (tx, writer)).await;
}

/// The end of a link: its runs ended (the device offline), the close frame sent with its
/// reason, the writer given a moment to send it, the link forgotten and the device's last
/// sight kept (not for a revoked one).
async fn closed(
    app: &App,
    id: &str,
    generation: u64,
    code: u16,
    (tx, writer): (
        tokio::sync::mpsc::Sender<Message>,
        tokio::task::JoinHandle<()>,
    ),
) {
    // The runs on this link end at once, told the device is offline.
    crate::device_chats::link_down(app, id, generation).await;
    let reason = match code {
        CLOSE_REPLACED => "a newer link of this device replaced this one",
        CLOSE_REVOKED => "this device was revoked",
        1001 => "no answer to the server's pings",
        _ => "the server ended the link",
    };
    let _ = tx
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        })))
        .await;
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    app.device_links.remove(id, generation);
    if code != CLOSE_REVOKED
        && let Err(e) = devices::seen(app, id, None).await
    {
        tracing::warn!("device {id}: {e}");
    }
}

/// Pings every [`PING_EVERY`]; ends when the link answered nothing for [`MISSED_PONGS`] of
/// them (or the socket's writer is gone).
async fn keep_alive(tx: tokio::sync::mpsc::Sender<Message>, heard: Arc<Mutex<Instant>>) {
    let mut tick = tokio::time::interval(PING_EVERY);
    tick.tick().await;
    loop {
        tick.tick().await;
        let quiet = heard.lock().map(|t| t.elapsed()).unwrap_or_default();
        if quiet > PING_EVERY * MISSED_PONGS {
            return;
        }
        if tx.send(Message::Ping(Default::default())).await.is_err() {
            return;
        }
    }
}

/// What the handlers of the device's `_lembas` messages need.
#[derive(Clone)]
struct Ext {
    app: Arc<App>,
    device: String,
}
