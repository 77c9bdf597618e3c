//! Capacity: how many requests a model server takes at once (`loop.json` `capacity`).
//!
//! The harness queues locally rather than relying on a server's queue. Each server (named by
//! its endpoint) has a number of slots — its endpoint's own figure, else
//! `default_concurrent_requests`. A request holds a slot while it runs; a running subagent holds
//! one for as long as it runs (when `subagents_count`), so a main agent and its background
//! subagents never ask one small server for more than it takes.
//!
//! Waiters are admitted first come, first served, unless their callers put them in groups (a
//! server's users: [`Capacity::set_group`]): then a free slot goes to the waiting group with the
//! fewest slots held, among equals to the one served longest ago (a group never served first),
//! and within a group first come, first served — so one group's burst of requests cannot keep
//! another's one request waiting behind all of it.

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
    /// The operator's figure: wins over `slots` while set.
    fixed: Option<u32>,
    holders: Vec<Holder>,
    queue: VecDeque<Holder>,
}

/// Slots per server.
#[derive(Debug, Clone)]
pub struct Capacity {
    cfg: CapacityConfig,
    servers: BTreeMap<String, Server>,
    /// The group of each grouped caller (by the id its holders carry).
    groups: BTreeMap<String, String>,
    /// When each group was last given a slot (a count of admissions).
    served: BTreeMap<String, u64>,
    admissions: u64,
}

/// The caller id a holder carries (a subagent's is its session's).
fn caller(who: &Holder) -> &str {
    match who {
        Holder::Request(id) => id,
        Holder::Subagent(id) => id
            .split_once('/')
            .map_or(id.as_str(), |(session, _)| session),
    }
}

impl Capacity {
    /// No server known yet.
    pub fn new(cfg: CapacityConfig) -> Capacity {
        Capacity {
            cfg,
            servers: BTreeMap::new(),
            groups: BTreeMap::new(),
            served: BTreeMap::new(),
            admissions: 0,
        }
    }

    /// Sets a server's slots (its endpoint's `capacity`).
    pub fn set_slots(&mut self, server: &str, slots: u32) {
        self.servers.entry(server.to_string()).or_default().slots = Some(slots.max(1));
    }

    /// Fixes a server's slots whatever [`Capacity::set_slots`] says (`None`: no longer fixed).
    /// Returns the waiters a larger figure admits, in order.
    pub fn fix_slots(&mut self, server: &str, slots: Option<u32>) -> Vec<Holder> {
        self.servers.entry(server.to_string()).or_default().fixed = slots.map(|n| n.max(1));
        self.fill(server)
    }

    /// Puts the caller `id` (a session: its requests and subagents) in `group` (`None`: in none).
    pub fn set_group(&mut self, id: &str, group: Option<&str>) {
        match group {
            Some(g) => self.groups.insert(id.to_string(), g.to_string()),
            None => self.groups.remove(id),
        };
    }

    /// The slots of `server`.
    pub fn slots(&self, server: &str) -> u32 {
        self.servers
            .get(server)
            .and_then(|s| s.fixed.or(s.slots))
            .unwrap_or(self.cfg.default_concurrent_requests)
            .max(1)
    }

    fn group_of(&self, who: &Holder) -> Option<&str> {
        self.groups.get(caller(who)).map(String::as_str)
    }

    /// Notes that `who` was given a slot now.
    fn admitted(&mut self, who: &Holder) {
        self.admissions += 1;
        if let Some(g) = self.group_of(who).map(str::to_string) {
            self.served.insert(g, self.admissions);
        }
    }

    /// The place in `server`'s queue of the waiter to admit next: the first of the group holding
    /// the fewest slots, among equals the one served longest ago; ungrouped waiters in order.
    fn next_waiter(&self, s: &Server) -> Option<usize> {
        let held = |g: &str| {
            s.holders
                .iter()
                .filter(|h| self.group_of(h) == Some(g))
                .count()
        };
        s.queue
            .iter()
            .enumerate()
            .min_by_key(|(i, who)| match self.group_of(who) {
                Some(g) => (held(g), self.served.get(g).copied().unwrap_or(0), *i),
                None => (0, 0, *i),
            })
            .map(|(i, _)| i)
    }

    /// Admits waiters while `server` has free slots; returns them, in order.
    fn fill(&mut self, server: &str) -> Vec<Holder> {
        let slots = self.slots(server) as usize;
        let mut admitted = Vec::new();
        while let Some(s) = self.servers.get(server) {
            if s.holders.len() >= slots {
                break;
            }
            let Some(i) = self.next_waiter(s) else {
                break;
            };
            let Some(next) = self.servers.get_mut(server).and_then(|s| s.queue.remove(i)) else {
                break;
            };
            if let Some(s) = self.servers.get_mut(server) {
                s.holders.push(next.clone());
            }
            self.admitted(&next);
            admitted.push(next);
        }
        admitted
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
            s.holders.push(who.clone());
            self.admitted(&who);
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
        let Some(s) = self.servers.get_mut(server) else {
            return Vec::new();
        };
        s.holders.retain(|h| h != who);
        s.queue.retain(|h| h != who);
        self.fill(server)
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
    fn a_free_slot_goes_to_the_group_holding_fewest_then_served_longest_ago() {
        let mut c = cap(false);
        c.fix_slots("x", Some(2));
        for (id, group) in [("a1", "ann"), ("a2", "ann"), ("a3", "ann"), ("a4", "ann")] {
            c.set_group(id, Some(group));
        }
        c.set_group("b1", Some("bob"));
        let req = |id: &str| Holder::Request(id.into());
        assert_eq!(c.acquire("x", req("a1")), Admit::Now);
        assert_eq!(c.acquire("x", req("a2")), Admit::Now);
        assert_eq!(c.acquire("x", req("a3")), Admit::Queued { position: 1 });
        assert_eq!(c.acquire("x", req("a4")), Admit::Queued { position: 2 });
        assert_eq!(c.acquire("x", req("b1")), Admit::Queued { position: 3 });
        // ann holds one slot, bob none: bob's one request goes first.
        assert_eq!(c.release("x", &req("a1")), vec![req("b1")]);
        // Both hold one: ann's next, first come first served within ann.
        assert_eq!(c.release("x", &req("b1")), vec![req("a3")]);
        // A fixed figure wins over the endpoint's and admits at once when raised.
        c.set_slots("x", 1);
        assert_eq!(c.fix_slots("x", Some(3)), vec![req("a4")]);
        assert_eq!(c.slots("x"), 3);
    }

    #[test]
    fn ungrouped_waiters_come_first_come_first_served() {
        let mut c = cap(false);
        let req = |id: &str| Holder::Request(id.into());
        assert_eq!(c.acquire("x", req("a")), Admit::Now);
        assert_eq!(c.acquire("x", req("b")), Admit::Queued { position: 1 });
        assert_eq!(c.release("x", &req("a")), vec![req("b")]);
        assert_eq!(c.acquire("x", req("a")), Admit::Queued { position: 1 });
        assert_eq!(c.acquire("x", req("c")), Admit::Queued { position: 2 });
        assert_eq!(c.release("x", &req("b")), vec![req("a")]);
    }

    #[test]
    fn subagents_not_counted_when_off() {
        let mut c = cap(false);
        c.acquire("x", Holder::Subagent("s/1".into()));
        assert_eq!(c.acquire("x", Holder::Request("a".into())), Admit::Now);
        assert_eq!(c.in_use("x"), 1);
    }
}
