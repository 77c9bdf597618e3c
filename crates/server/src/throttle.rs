//! Throttles: how long a client must wait before it may try again. A key (an address, an address
//! and an account) gets a few tries free; past them each further one makes it wait twice as long
//! as the one before, up to a cap, and the tally is forgotten once it has been quiet a while. An
//! account is never locked: what one address does makes only that address wait.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a throttle counts.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Tries allowed before any wait.
    pub free: u32,
    /// The wait after the first try past them; doubled at each further one.
    pub first: Duration,
    /// The longest wait.
    pub cap: Duration,
    /// How long a key's tally lasts after its last try.
    pub forget: Duration,
}

impl Rule {
    /// The wait that `count` tries call for.
    fn wait(&self, count: u32) -> Duration {
        if count < self.free {
            return Duration::ZERO;
        }
        let doublings = (count - self.free).min(20);
        self.first.saturating_mul(1 << doublings).min(self.cap)
    }
}

/// How many keys a throttle holds before it drops the forgotten ones.
const PRUNE_AT: usize = 10_000;

/// The tries of each key, counted by one [`Rule`].
#[derive(Debug)]
pub struct Throttle {
    rule: Rule,
    tallies: Mutex<HashMap<String, (u32, Instant)>>,
}

impl Throttle {
    /// A throttle counting by `rule`.
    pub fn new(rule: Rule) -> Throttle {
        Throttle {
            rule,
            tallies: Mutex::default(),
        }
    }

    fn tallies(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u32, Instant)>> {
        self.tallies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Err(wait)` while `key` must still wait, else `Ok`.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        let tallies = self.tallies();
        let Some((count, last)) = tallies.get(key) else {
            return Ok(());
        };
        let elapsed = last.elapsed();
        if elapsed >= self.rule.forget {
            return Ok(());
        }
        match self.rule.wait(*count).checked_sub(elapsed) {
            Some(left) if !left.is_zero() => Err(left),
            _ => Ok(()),
        }
    }

    /// Counts a try of `key`.
    pub fn hit(&self, key: &str) {
        let mut tallies = self.tallies();
        if tallies.len() >= PRUNE_AT {
            let forget = self.rule.forget;
            tallies.retain(|_, (_, last)| last.elapsed() < forget);
        }
        let tally = tallies.entry(key.to_owned()).or_insert((0, Instant::now()));
        if tally.1.elapsed() >= self.rule.forget {
            tally.0 = 0;
        }
        *tally = (tally.0.saturating_add(1), Instant::now());
    }

    /// Forgets `key`'s tries.
    pub fn clear(&self, key: &str) {
        self.tallies().remove(key);
    }
}

/// Seconds to tell a client to wait (`Retry-After`): `wait` rounded up, at least one.
pub fn seconds(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_past_the_free_tries_up_to_the_cap() {
        let rule = Rule {
            free: 3,
            first: Duration::from_secs(10),
            cap: Duration::from_secs(60),
            forget: Duration::from_secs(3600),
        };
        let waits: Vec<u64> = (0..8).map(|n| rule.wait(n).as_secs()).collect();
        assert_eq!(waits, [0, 0, 0, 10, 20, 40, 60, 60]);
        let t = Throttle::new(rule);
        for _ in 0..3 {
            assert!(t.check("a").is_ok());
            t.hit("a");
        }
        let left = t.check("a").unwrap_err();
        assert!(left <= Duration::from_secs(10) && left > Duration::from_secs(9));
        assert!(t.check("b").is_ok(), "another key is not held up");
        t.clear("a");
        assert!(t.check("a").is_ok());
    }
}
