//! One message of a conversation, as the loop keeps it, the transcript stores it and the model
//! link is sent it: one type for the three, so nothing converts between them.

use serde::{Deserialize, Serialize};

use crate::protocol::{Origin, ToolCall};

/// One message of a conversation. The loop's history holds `User`, `Assistant` and `Tool`; the
/// runner puts the `System` text first when it asks a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions.
    System {
        /// The text.
        text: String,
    },
    /// A user turn, a nudge, a wake-up, a summary.
    User {
        /// The text.
        text: String,
        /// Who wrote it.
        #[serde(default)]
        origin: Origin,
        /// Images as `data:` or `https:` URLs.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    /// The model's answer.
    Assistant {
        /// Its visible text.
        text: String,
        /// Its reasoning, sent back as the model's metadata says (empty: none).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
        /// Its calls, with our ids.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// A tool result, in call order after its assistant message.
    Tool {
        /// Our id of the call answered.
        call_id: String,
        /// The text the model is sent (label and body).
        #[serde(alias = "content")]
        text: String,
    },
}

impl Message {
    /// A user message the person wrote, without images.
    pub fn user(text: impl Into<String>) -> Message {
        Message::User {
            text: text.into(),
            origin: Origin::Person,
            images: Vec::new(),
        }
    }

    /// A user message of `origin`, without images.
    pub fn user_from(text: impl Into<String>, origin: Origin) -> Message {
        Message::User {
            text: text.into(),
            origin,
            images: Vec::new(),
        }
    }

    /// The text of a message, whatever its role.
    pub fn text(&self) -> &str {
        match self {
            Message::System { text }
            | Message::User { text, .. }
            | Message::Assistant { text, .. }
            | Message::Tool { text, .. } => text,
        }
    }

    /// Characters of the message as a model is sent it (for token estimates: chars / 4).
    pub fn chars(&self) -> usize {
        match self {
            Message::System { text } | Message::User { text, .. } | Message::Tool { text, .. } => {
                text.chars().count()
            }
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

impl From<&crate::protocol::ToolResult> for Message {
    fn from(result: &crate::protocol::ToolResult) -> Message {
        Message::Tool {
            call_id: result.call_id.clone(),
            text: result.content.clone(),
        }
    }
}
