//! LLeMbas's `_lembas` extensions to ACP (`spec/acp.md`): their requests and notifications,
//! and the errors of §4.

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
pub(crate) struct StatusRequest {}

/// `_lembas/limits`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/limits", response = LembasResult)]
pub(crate) struct LimitsRequest {}

/// `_lembas/dir`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/dir", response = LembasResult)]
pub(crate) struct DirRequest {
    pub(crate) path: PathBuf,
}

/// `_lembas/rewind`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/rewind", response = LembasResult)]
pub(crate) struct RewindRequest {
    #[serde(rename = "sessionId")]
    pub(crate) session_id: String,
    pub(crate) turns: u32,
}

/// Any `_lembas` result, as JSON.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcResponse)]
#[serde(transparent)]
pub(crate) struct LembasResult(pub(crate) Value);

/// A `_lembas` notification with JSON params (device → client).
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/job")]
pub(crate) struct JobNotification(pub(crate) Value);

/// `_lembas/job_note`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/job_note")]
pub(crate) struct JobNoteNotification(pub(crate) Value);

/// `_lembas/prompt`: a machine turn the device began.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/prompt")]
pub(crate) struct MachinePrompt(pub(crate) Value);

/// `_lembas/prompt_end`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/prompt_end")]
pub(crate) struct MachinePromptEnd(pub(crate) Value);

/// `_lembas/show` (device → client): a file for the person's viewer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/show", response = LembasResult)]
pub(crate) struct ShowRequest(pub(crate) Value);

/// `_lembas/jobs`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/jobs", response = LembasResult)]
pub(crate) struct JobsRequest {
    #[serde(rename = "sessionId")]
    pub(crate) session_id: String,
}

/// `_lembas/job/output`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/output", response = LembasResult)]
pub(crate) struct JobOutputRequest {
    #[serde(rename = "sessionId")]
    pub(crate) session_id: String,
    #[serde(rename = "jobId")]
    pub(crate) job_id: String,
    #[serde(default)]
    pub(crate) offset: usize,
}

/// `_lembas/job/stop`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/stop", response = LembasResult)]
pub(crate) struct JobStopRequest {
    #[serde(rename = "sessionId")]
    pub(crate) session_id: String,
    #[serde(rename = "jobId")]
    pub(crate) job_id: String,
}

/// `_lembas/job/send`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/send", response = LembasResult)]
pub(crate) struct JobSendRequest {
    #[serde(rename = "sessionId")]
    pub(crate) session_id: String,
    #[serde(rename = "jobId")]
    pub(crate) job_id: String,
    pub(crate) text: String,
}

/// `_lembas/job/transcript`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/transcript", response = LembasResult)]
pub(crate) struct JobTranscriptRequest {
    #[serde(rename = "sessionId")]
    pub(crate) session_id: String,
    #[serde(rename = "jobId")]
    pub(crate) job_id: String,
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
pub(crate) struct PlanStateNotification {
    #[serde(rename = "sessionId")]
    pub(crate) session_id: String,
    pub(crate) plan: Value,
}

pub(crate) fn unknown_session(id: &str) -> agent_client_protocol::Error {
    lembas_error(
        -32044,
        format!("No session {id} on this device."),
        "unknown_session",
    )
}
