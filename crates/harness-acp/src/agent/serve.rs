//! The serve loop: one handler a request or notification, each given the agent's state.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    CancelNotification, InitializeRequest, ListSessionsRequest, LoadSessionRequest,
    NewSessionRequest, PromptRequest, SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use agent_client_protocol::{Agent, ConnectTo, on_receive_notification, on_receive_request};

use super::{State, handlers, model, open, prompt};
use crate::Error;
use crate::ext::{
    DirRequest, JobOutputRequest, JobSendRequest, JobStopRequest, JobTranscriptRequest,
    JobsRequest, LembasResult, LimitsRequest, RewindRequest, StatusRequest,
};
use crate::host::{AgentInfo, Host};
use crate::jobs::{job_send, job_transcript};

/// Answers a request with what its handler made of it, a value or an error.
macro_rules! answer {
    ($responder:expr, $made:expr) => {
        match $made {
            Ok(r) => $responder.respond(r),
            Err(e) => $responder.respond_with_error(e),
        }
    };
}

/// One clone of `$from` under each name (each handler holds its own).
macro_rules! clones {
    ($from:ident => $($name:ident),*) => {
        $(let $name = $from.clone();)*
    };
}

/// Serves ACP as an agent over `transport` until the client closes it: `host` opens the
/// sessions, `info` says who the agent is.
pub async fn serve(
    host: Arc<dyn Host>,
    info: AgentInfo,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), Error> {
    let name = info.name.clone();
    let state = Arc::new(State::new(host, info));
    clones!(state => s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16, s17);
    Agent
        .v1()
        .name(name)
        .on_receive_request(
            async move |r: InitializeRequest, to, _| to.respond(handlers::initialize(&s1, r)),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: NewSessionRequest, to, cx| {
                answer!(to, open::new_session(&s2, r, cx).await)
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: LoadSessionRequest, to, cx| {
                answer!(to, open::load_session(&s3, r, cx).await)
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: PromptRequest, to, cx| prompt::prompt(&s4, r, to, cx),
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _| handlers::cancel(&s5, &n),
            on_receive_notification!(),
        )
        .on_receive_request(
            async move |r: ListSessionsRequest, to, _| {
                answer!(to, handlers::list_sessions(&s6, &r))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: SetSessionModeRequest, to, _| handlers::set_mode(&s7, r, to),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: SetSessionConfigOptionRequest, to, _| {
                answer!(to, model::set_config_option(&s8, r).await)
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |_: StatusRequest, to, _| to.respond(LembasResult(handlers::status(&s9))),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |_: LimitsRequest, to, _| to.respond(LembasResult(s10.limits())),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: JobsRequest, to, _| handlers::jobs(&s11, &r, to),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: JobOutputRequest, to, _| handlers::job_output(&s12, r, to).await,
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: JobStopRequest, to, _| handlers::job_stop(&s13, r, to).await,
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: JobSendRequest, to, cx| {
                answer!(to, job_send(&s14, r, &cx).await.map(LembasResult))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: JobTranscriptRequest, to, _| {
                answer!(to, job_transcript(&s15, r).await.map(LembasResult))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: RewindRequest, to, _| handlers::rewind(&s16, r, to).await,
            on_receive_request!(),
        )
        .on_receive_request(
            async move |r: DirRequest, to, _| {
                answer!(to, handlers::dir(&s17, &r.path).map(LembasResult))
            },
            on_receive_request!(),
        )
        .connect_to(transport)
        .await
        .map_err(|e| Error::Connection(e.to_string()))
}
