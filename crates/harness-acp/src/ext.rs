//! LLeMbas's `_lembas` extensions to ACP (`spec/acp.md`): their requests and notifications,
//! and the errors of §4. The message types are public: a client (a LLeMbas instance driving a
//! linked device) speaks them with the same definitions the agent answers.

use std::path::PathBuf;

use agent_client_protocol::{JsonRpcNotification, JsonRpcRequest, JsonRpcResponse};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The codes and texts of `spec/acp.md` §4 *Errors*.
pub(crate) fn lembas_error(
    code: i32,
    message: String,
    short: &str,
) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(code, message).data(json!({ "lembas": short }))
}

/// `_lembas/status`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/status", response = LembasResult)]
pub struct StatusRequest {}

/// `_lembas/limits`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/limits", response = LembasResult)]
pub struct LimitsRequest {}

/// `_lembas/dir`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/dir", response = LembasResult)]
pub struct DirRequest {
    /// The directory to list.
    pub path: PathBuf,
}

/// `_lembas/rewind`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/rewind", response = LembasResult)]
pub struct RewindRequest {
    #[serde(rename = "sessionId")]
    /// The session.
    pub session_id: String,
    /// How many prompts to keep.
    pub turns: u32,
}

/// Any `_lembas` result, as JSON.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcResponse)]
#[serde(transparent)]
pub struct LembasResult(
    /// Its JSON.
    pub Value,
);

/// A `_lembas` notification with JSON params (device → client).
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/job")]
pub struct JobNotification(
    /// Its JSON.
    pub Value,
);

/// `_lembas/job_note`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/job_note")]
pub struct JobNoteNotification(
    /// Its JSON.
    pub Value,
);

/// `_lembas/prompt`: a machine turn the device began.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/prompt")]
pub struct MachinePrompt(
    /// Its JSON.
    pub Value,
);

/// `_lembas/prompt_end`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/prompt_end")]
pub struct MachinePromptEnd(
    /// Its JSON.
    pub Value,
);

/// `_lembas/show` (device → client): a file for the person's viewer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/show", response = LembasResult)]
pub struct ShowRequest(
    /// Its JSON.
    pub Value,
);

/// `_lembas/jobs`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/jobs", response = LembasResult)]
pub struct JobsRequest {
    #[serde(rename = "sessionId")]
    /// The session.
    pub session_id: String,
}

/// `_lembas/job/output`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/output", response = LembasResult)]
pub struct JobOutputRequest {
    #[serde(rename = "sessionId")]
    /// The session.
    pub session_id: String,
    #[serde(rename = "jobId")]
    /// The job.
    pub job_id: String,
    #[serde(default)]
    /// Where to read from, in characters.
    pub offset: usize,
}

/// `_lembas/job/stop`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/stop", response = LembasResult)]
pub struct JobStopRequest {
    #[serde(rename = "sessionId")]
    /// The session.
    pub session_id: String,
    #[serde(rename = "jobId")]
    /// The job.
    pub job_id: String,
}

/// `_lembas/job/send`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/send", response = LembasResult)]
pub struct JobSendRequest {
    #[serde(rename = "sessionId")]
    /// The session.
    pub session_id: String,
    #[serde(rename = "jobId")]
    /// The job.
    pub job_id: String,
    /// The message for the job.
    pub text: String,
}

/// `_lembas/job/transcript`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/transcript", response = LembasResult)]
pub struct JobTranscriptRequest {
    #[serde(rename = "sessionId")]
    /// The session.
    pub session_id: String,
    #[serde(rename = "jobId")]
    /// The job.
    pub job_id: String,
}

pub(crate) fn unknown_job(id: &str) -> agent_client_protocol::Error {
    lembas_error(
        -32045,
        format!("No job {id} in this session."),
        "unknown_job",
    )
}

/// `_lembas/plan_state` (device → client).
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/plan_state")]
pub struct PlanStateNotification {
    #[serde(rename = "sessionId")]
    /// The session.
    pub session_id: String,
    /// The plan (`null`: none).
    pub plan: Value,
}

pub(crate) fn unknown_session(id: &str) -> agent_client_protocol::Error {
    lembas_error(
        -32044,
        format!("No session {id} on this device."),
        "unknown_session",
    )
}
