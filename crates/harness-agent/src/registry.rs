//! Tool dispatch as a registry: each tool a layer runs has one handler, keyed by its canonical
//! name (as codex-rs's `ToolRegistry`), so a layer finds a call's handler by looking its name up
//! instead of matching strings. The runtime's own tools, the file tools, the person's own tools
//! and a world's tools are each such a registry; the layer's handler type is its own.

use std::collections::BTreeMap;

/// Handlers of type `H`, one per canonical tool name.
#[derive(Debug, Clone)]
pub struct ToolRegistry<H> {
    handlers: BTreeMap<&'static str, H>,
}

impl<H> Default for ToolRegistry<H> {
    fn default() -> Self {
        ToolRegistry {
            handlers: BTreeMap::new(),
        }
    }
}

impl<H> ToolRegistry<H> {
    /// An empty registry.
    pub fn new() -> ToolRegistry<H> {
        ToolRegistry::default()
    }

    /// The registry with `handler` answering the tool `name` (a later handler of the same name
    /// replaces the earlier one).
    #[must_use]
    pub fn with(mut self, name: &'static str, handler: H) -> ToolRegistry<H> {
        self.handlers.insert(name, handler);
        self
    }

    /// The handler of `name`, when it has one.
    pub fn get(&self, name: &str) -> Option<&H> {
        self.handlers.get(name)
    }

    /// Whether it has a handler of `name`.
    pub fn runs(&self, name: &str) -> bool {
        self.handlers.contains_key(name)
    }

    /// The names it has handlers of, in order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.handlers.keys().copied()
    }
}
