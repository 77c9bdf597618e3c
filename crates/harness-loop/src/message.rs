//! One message of a session's history, as the loop keeps it, the transcript stores it and the
//! model link is sent it.

use harness_core::protocol::{Origin, ToolCall};
use serde::{Deserialize, Serialize};

/// One message of the history the model is sent (the system text is the driver's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// A user turn, a nudge, a wake-up, a summary.
    User {
        /// The text.
        text: String,
        /// Who wrote it.
        #[serde(default)]
        origin: Origin,
    },
    /// The model's answer.
    Assistant {
        /// Its visible text.
        text: String,
        /// Its reasoning, sent back as the model's metadata says.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
        /// Its calls.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// A tool result, in call order after its assistant message.
    Tool {
        /// The call answered.
        call_id: String,
        /// The text inserted (label and body).
        text: String,
    },
}

impl Message {
    /// Characters of the message as a model is sent it (for token estimates: chars / 4).
    pub fn chars(&self) -> usize {
        match self {
            Message::User { text, .. } | Message::Tool { text, .. } => text.chars().count(),
            Message::Assistant {
                text,
                reasoning,
                tool_calls,
            } => {
                text.chars().count()
                    + reasoning.chars().count()
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.to_string().len())
                        .sum::<usize>()
            }
        }
    }
}
