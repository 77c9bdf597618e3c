//! The terminal around the prompt: the spinner on stderr, echo off while a turn runs.

use std::io::{IsTerminal as _, Write as _};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::render::{Style, paint};

/// A spinner with the elapsed time on stderr, while nothing else is being written. Drawing
/// and stopping hold one lock, so a frame is never drawn over output that followed a stop.
#[derive(Clone)]
pub(super) struct Spinner {
    state: Arc<Mutex<SpinState>>,
    on: bool,
}

#[derive(Default)]
struct SpinState {
    since: Option<(Instant, String)>,
    /// When the last stopped spin started (a spin that follows a command's output goes on
    /// counting from it).
    last: Option<Instant>,
    drawn: bool,
}

impl Spinner {
    pub(super) fn new(on: bool, color: bool) -> Spinner {
        let s = Spinner {
            state: Arc::new(Mutex::new(SpinState::default())),
            on,
        };
        if on {
            let t = s.clone();
            tokio::spawn(async move {
                const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
                let mut i = 0usize;
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let Ok(mut st) = t.state.lock() else { return };
                    if let Some((since, label)) = &st.since {
                        let secs = since.elapsed().as_secs_f32();
                        if secs > 0.3 {
                            i = (i + 1) % FRAMES.len();
                            eprint!(
                                "\r\x1b[K{} {label} {secs:.0}s",
                                paint(FRAMES[i], Style::Cyan, color)
                            );
                            let _ = std::io::stderr().flush();
                            st.drawn = true;
                        }
                    }
                }
            });
        }
        s
    }

    pub(super) fn start(&self, label: &str) {
        if let Ok(mut st) = self.state.lock() {
            st.since = Some((Instant::now(), label.to_owned()));
        }
    }

    /// Spins on with another label, the time counted from the last start.
    pub(super) fn follow(&self, label: &str) {
        if let Ok(mut st) = self.state.lock() {
            let since = st.last.unwrap_or_else(Instant::now);
            st.since = Some((since, label.to_owned()));
        }
    }

    /// Stops and wipes the line (before anything else is written).
    pub(super) fn stop(&self) {
        if let Ok(mut st) = self.state.lock() {
            if let Some((since, _)) = st.since.take() {
                st.last = Some(since);
            }
            if self.on && st.drawn {
                eprint!("\r\x1b[K");
                let _ = std::io::stderr().flush();
                st.drawn = false;
            }
        }
    }
}

/// The terminal without echo while a turn runs (restored when dropped): type-ahead stays in
/// the terminal's input for the next prompt instead of being drawn into the answer.
pub(super) struct NoEcho(Option<rustix::termios::Termios>);

impl NoEcho {
    pub(super) fn new() -> NoEcho {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return NoEcho(None);
        }
        let Ok(before) = rustix::termios::tcgetattr(&stdin) else {
            return NoEcho(None);
        };
        let mut quiet = before.clone();
        quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
        match rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &quiet) {
            Ok(()) => NoEcho(Some(before)),
            Err(_) => NoEcho(None),
        }
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                t,
            );
        }
    }
}
