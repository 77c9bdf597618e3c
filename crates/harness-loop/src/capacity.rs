//! Capacity: how many requests a model server takes at once (`loop.json` `capacity`).
//!
//! The harness queues locally rather than relying on a server's queue. Each server (named by
//! its endpoint) has a number of slots — its endpoint's own figure, else
//! `default_concurrent_requests`. A request holds a slot while it runs; a running subagent holds
//! one for as long as it runs (when `subagents_count`), so a main agent and its background
//! subagents never ask one small server for more than it takes.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::config::CapacityConfig;

/// Who holds or waits for a slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Holder {
    /// One model request (a session's step), by the caller's id for it.
    Request(String),
    /// A running subagent job, by `session/job id`.
    Subagent(String),
}

/// The answer to [`Capacity::acquire`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Admit {
    /// A slot is held: go.
    Now,
    /// Every slot is taken: wait, `position` in the queue (from 1).
    Queued {
        /// Place in the line.
        position: usize,
    },
}

#[derive(Debug, Clone, Default)]
struct Server {
    slots: Option<u32>,
    holders: Vec<Holder>,
    queue: VecDeque<Holder>,
}

/// Slots per server.
#[derive(Debug, Clone)]
pub struct Capacity {
    cfg: CapacityConfig,
    servers: BTreeMap<String, Server>,
}

impl Capacity {
    /// No server known yet.
    pub fn new(cfg: CapacityConfig) -> Capacity {
        Capacity {
            cfg,
            servers: BTreeMap::new(),
        }
    }

    /// Sets a server's slots (its endpoint's `capacity`).
    pub fn set_slots(&mut self, server: &str, slots: u32) {
        self.servers.entry(server.to_string()).or_default().slots = Some(slots.max(1));
    }

    /// The slots of `server`.
    pub fn slots(&self, server: &str) -> u32 {
        self.servers
            .get(server)
            .and_then(|s| s.slots)
            .unwrap_or(self.cfg.default_concurrent_requests)
            .max(1)
    }

    /// Slots held now on `server` (requests and running subagents).
    pub fn in_use(&self, server: &str) -> usize {
        self.servers.get(server).map_or(0, |s| s.holders.len())
    }

    /// Free slots on `server`.
    pub fn available(&self, server: &str) -> usize {
        (self.slots(server) as usize).saturating_sub(self.in_use(server))
    }

    /// Asks for a slot. A subagent is counted only when `subagents_count` says so (then it is
    /// always admitted, as it already runs: it may push the server over its slots, and requests
    /// wait until it ends).
    pub fn acquire(&mut self, server: &str, who: Holder) -> Admit {
        let slots = self.slots(server) as usize;
        let count_subagents = self.cfg.subagents_count;
        let s = self.servers.entry(server.to_string()).or_default();
        if s.holders.contains(&who) {
            return Admit::Now;
        }
        if let Holder::Subagent(_) = who {
            if count_subagents {
                s.holders.push(who);
            }
            return Admit::Now;
        }
        if s.holders.len() < slots && s.queue.is_empty() {
            s.holders.push(who);
            return Admit::Now;
        }
        if let Some(p) = s.queue.iter().position(|h| *h == who) {
            return Admit::Queued { position: p + 1 };
        }
        s.queue.push_back(who);
        Admit::Queued {
            position: s.queue.len(),
        }
    }

    /// Gives a slot back (a request answered, a subagent ended, a waiter gave up). Returns the
    /// waiters now admitted, in order.
    pub fn release(&mut self, server: &str, who: &Holder) -> Vec<Holder> {
        let slots = self.slots(server) as usize;
        let Some(s) = self.servers.get_mut(server) else {
            return Vec::new();
        };
        s.holders.retain(|h| h != who);
        s.queue.retain(|h| h != who);
        let mut admitted = Vec::new();
        while s.holders.len() < slots {
            let Some(next) = s.queue.pop_front() else {
                break;
            };
            s.holders.push(next.clone());
            admitted.push(next);
        }
        admitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(subagents_count: bool) -> Capacity {
        Capacity::new(CapacityConfig {
            default_concurrent_requests: 1,
            subagents_count,
        })
    }

    #[test]
    fn running_subagents_take_slots() {
        let mut c = cap(true);
        c.set_slots("local", 2);
        assert_eq!(
            c.acquire("local", Holder::Subagent("s/1".into())),
            Admit::Now
        );
        assert_eq!(c.acquire("local", Holder::Request("a".into())), Admit::Now);
        assert_eq!(
            c.acquire("local", Holder::Request("b".into())),
            Admit::Queued { position: 1 }
        );
        let admitted = c.release("local", &Holder::Subagent("s/1".into()));
        assert_eq!(admitted, vec![Holder::Request("b".into())]);
        assert_eq!(c.available("local"), 0);
    }

    #[test]
    fn subagents_not_counted_when_off() {
        let mut c = cap(false);
        c.acquire("x", Holder::Subagent("s/1".into()));
        assert_eq!(c.acquire("x", Holder::Request("a".into())), Admit::Now);
        assert_eq!(c.in_use("x"), 1);
    }
}
