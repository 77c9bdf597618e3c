//! One message of a session's history: harness-core's [`Message`], the one type the loop, the
//! transcript and the model link share.

pub use harness_core::message::Message;
