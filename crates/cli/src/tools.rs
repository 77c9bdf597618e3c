//! The CLI's facts that fill tool descriptions, and (growing) the execution of tool calls on the
//! local disk.

use std::collections::BTreeMap;

/// Run-time values of the tool variables the spec leaves to the project's settings.
pub fn runtime_values() -> BTreeMap<String, String> {
    BTreeMap::from([("memory_limit".to_owned(), "4,000 characters".to_owned())])
}
