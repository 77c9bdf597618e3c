//! Capacity across the sessions of a process (`loop.json` `capacity`, harness-loop's
//! [`Capacity`]): each model server has its slots; a main session's model request waits for one,
//! and a running subagent holds one for as long as it runs (its own requests go in its slot), so
//! a main agent and its subagents never ask one small server for more than it takes.

use std::sync::Mutex;

use harness_loop::capacity::{Admit, Capacity, Holder};
use harness_loop::config::LoopConfig;
use harness_model::CancellationToken;
use tokio::sync::Notify;

use crate::error::Result;

/// The slots of every server a process talks to, shared by its sessions and their subagents.
#[derive(Debug)]
pub struct CapacityGate {
    state: Mutex<Capacity>,
    changed: Notify,
}

impl CapacityGate {
    /// Slots by `loop.json` (`default_concurrent_requests` for a server whose model says none).
    pub fn new() -> Result<CapacityGate> {
        Ok(CapacityGate {
            state: Mutex::new(Capacity::new(LoopConfig::embedded()?.capacity.clone())),
            changed: Notify::new(),
        })
    }

    /// The one gate of this process, made on first use: every session a process runs (an ACP
    /// agent's several, a terminal's one after another) counts against the same slots.
    pub fn process() -> Result<std::sync::Arc<CapacityGate>> {
        static GATE: std::sync::OnceLock<std::sync::Arc<CapacityGate>> = std::sync::OnceLock::new();
        if let Some(g) = GATE.get() {
            return Ok(g.clone());
        }
        let g = std::sync::Arc::new(CapacityGate::new()?);
        Ok(GATE.get_or_init(|| g).clone())
    }

    /// Sets a server's slots (its model's or endpoint's `capacity`).
    pub fn set_slots(&self, server: &str, slots: u32) {
        if let Ok(mut s) = self.state.lock() {
            s.set_slots(server, slots);
        }
    }

    /// Fixes `server`'s slots whatever a model's or endpoint's `capacity` says (`None`: no
    /// longer fixed); waiters a larger figure admits go at once.
    pub fn fix_slots(&self, server: &str, slots: Option<u32>) {
        if let Ok(mut s) = self.state.lock() {
            s.fix_slots(server, slots);
        }
        self.changed.notify_waiters();
    }

    /// Puts the session `id` (its requests and subagents) in `group` (a server's user): a free
    /// slot goes to the waiting group holding the fewest, so no group's burst starves another.
    pub fn set_group(&self, id: &str, group: Option<&str>) {
        if let Ok(mut s) = self.state.lock() {
            s.set_group(id, group);
        }
    }

    /// Holds a slot of `server` for `who`, waiting while every slot is taken; `on_queued` hears
    /// the place in line the first time it waits. `false`: `cancel` fired first (nothing held).
    pub async fn acquire(
        &self,
        server: &str,
        who: &Holder,
        cancel: &CancellationToken,
        on_queued: &mut (dyn FnMut(usize) + Send),
    ) -> bool {
        let mut told = false;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let admit = match self.state.lock() {
                Ok(mut s) => s.acquire(server, who.clone()),
                Err(_) => Admit::Now,
            };
            match admit {
                Admit::Now => return true,
                Admit::Queued { position } => {
                    if !told {
                        on_queued(position);
                        told = true;
                    }
                }
            }
            tokio::select! {
                () = &mut notified => {}
                () = cancel.cancelled() => {
                    self.release(server, who);
                    return false;
                }
            }
        }
    }

    /// Gives `who`'s slot (or place in line) back and wakes the waiters.
    pub fn release(&self, server: &str, who: &Holder) {
        if let Ok(mut s) = self.state.lock() {
            s.release(server, who);
        }
        self.changed.notify_waiters();
    }

    /// Slots held now on `server`.
    pub fn in_use(&self, server: &str) -> usize {
        self.state.lock().map(|s| s.in_use(server)).unwrap_or(0)
    }
}
