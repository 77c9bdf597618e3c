//! The model choice: a session's config options and `session/set_config_option`.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOption, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
};
use serde_json::json;

use super::State;
use crate::ext::{lembas_error, unknown_session};

/// The config option id of the model choice.
const MODEL_OPTION: &str = "model";

/// A session's config options: the model choice (category `model`), among the models its
/// server serves (the current one when the server lists none).
pub(super) async fn config_options(state: &State, id: &str) -> Option<Vec<SessionConfigOption>> {
    let (client, current) = state
        .sessions
        .lock()
        .ok()?
        .get(id)
        .map(|o| (o.models.clone(), o.model.clone()))?;
    let mut models = match client {
        Some(c) => c.list().await,
        None => Vec::new(),
    };
    if !models.contains(&current) {
        models.insert(0, current.clone());
    }
    let choices: Vec<SessionConfigSelectOption> = models
        .iter()
        .map(|m| SessionConfigSelectOption::new(m.clone(), m.clone()))
        .collect();
    Some(vec![
        SessionConfigOption::select(MODEL_OPTION, "Model", current, choices)
            .category(SessionConfigOptionCategory::Model),
    ])
}

/// `session/set_config_option`: the model choice. A model the device cannot run (its server
/// does not serve it) is refused with -32042 and the session keeps its model; an unknown
/// option or value shape is -32602; a prompt running, -32600.
pub(super) async fn set_config_option(
    state: &State,
    req: SetSessionConfigOptionRequest,
) -> Result<SetSessionConfigOptionResponse, agent_client_protocol::Error> {
    let id = req.session_id.to_string();
    if req.config_id.to_string() != MODEL_OPTION {
        return Err(agent_client_protocol::Error::invalid_params()
            .data(json!(format!("no config option {}", req.config_id))));
    }
    let SessionConfigOptionValue::ValueId { value } = &req.value else {
        return Err(agent_client_protocol::Error::invalid_params()
            .data(json!("the model option takes a value id")));
    };
    let wanted = value.to_string();
    let (client, ops) = state
        .sessions
        .lock()
        .ok()
        .and_then(|s| s.get(&id).map(|o| (o.models.clone(), o.ops.clone())))
        .ok_or_else(|| unknown_session(&id))?;
    let serves = match &client {
        Some(c) => c.serves(&wanted).await,
        None => true,
    };
    if !serves {
        return Err(lembas_error(
            -32042,
            format!(
                "Model unavailable: this device cannot run {wanted}; the session keeps its model."
            ),
            "model_unavailable",
        ));
    }
    let answer = ops
        .query(harness_agent::Query::Model(Some(wanted.clone())))
        .await
        .unwrap_or_default();
    if answer != format!("model: {wanted}") {
        return Err(agent_client_protocol::Error::invalid_request().data(json!(answer)));
    }
    if let Ok(mut s) = state.sessions.lock()
        && let Some(o) = s.get_mut(&id)
    {
        o.model = wanted;
    }
    Ok(SetSessionConfigOptionResponse::new(
        config_options(state, &id).await.unwrap_or_default(),
    ))
}
