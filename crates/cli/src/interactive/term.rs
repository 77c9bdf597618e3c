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

/// While a turn runs, the terminal's input is read here, without echo and key by key: Esc
/// stops the turn, what else is typed (a bracketed paste whole) is kept for the next prompt
/// instead of being drawn into the answer or left in the terminal (where a lone Esc byte would
/// spoil the next paste). Paused while a question is read; the terminal is restored when
/// dropped.
pub(super) struct TypeAhead {
    /// The terminal as it was, when stdin is one.
    before: Option<rustix::termios::Termios>,
    esc: tokio::sync::mpsc::UnboundedSender<()>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    watcher: Option<std::thread::JoinHandle<Vec<u8>>>,
    /// What was read so far.
    bytes: Vec<u8>,
}

impl TypeAhead {
    /// Starts reading; each Esc is sent on `esc`.
    pub(super) fn start(esc: tokio::sync::mpsc::UnboundedSender<()>) -> TypeAhead {
        let stdin = std::io::stdin();
        let before = stdin
            .is_terminal()
            .then(|| rustix::termios::tcgetattr(&stdin).ok())
            .flatten();
        let mut t = TypeAhead {
            before,
            esc,
            stop: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            watcher: None,
            bytes: Vec::new(),
        };
        t.resume();
        t
    }

    /// Reads again after [`pause`](Self::pause).
    pub(super) fn resume(&mut self) {
        use rustix::termios::{LocalModes, OptionalActions, SpecialCodeIndex, tcsetattr};
        let Some(before) = &self.before else { return };
        if self.watcher.is_some() {
            return;
        }
        let mut raw = before.clone();
        raw.local_modes
            .remove(LocalModes::ECHO | LocalModes::ICANON);
        // A read returns after a tenth of a second without input, to see whether to stop.
        raw.special_codes[SpecialCodeIndex::VMIN] = 0;
        raw.special_codes[SpecialCodeIndex::VTIME] = 1;
        if tcsetattr(std::io::stdin(), OptionalActions::Now, &raw).is_err() {
            return;
        }
        self.stop.store(false, std::sync::atomic::Ordering::SeqCst);
        let stop = self.stop.clone();
        let esc = self.esc.clone();
        self.watcher = Some(std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                match rustix::io::read(std::io::stdin(), &mut buf) {
                    Ok(0) => {}
                    Ok(n) => {
                        if has_lone_esc(&buf[..n]) {
                            let _ = esc.send(());
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                    Err(_) => break,
                }
            }
            got
        }));
    }

    /// Stops reading and gives the terminal back as it was (a question is read).
    pub(super) fn pause(&mut self) {
        if let Some(w) = self.watcher.take() {
            self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
            if let Ok(got) = w.join() {
                self.bytes.extend(got);
            }
        }
        if let Some(t) = &self.before {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                t,
            );
        }
    }

    /// Stops reading: what was typed, for the next prompt.
    pub(super) fn finish(mut self) -> super::keys::Typed {
        self.pause();
        super::keys::typed_ahead(&std::mem::take(&mut self.bytes))
    }
}

impl Drop for TypeAhead {
    fn drop(&mut self) {
        self.pause();
    }
}

/// Whether a piece of input holds an Esc press: an Esc byte that starts no key's sequence
/// (`ESC [` and `ESC O` do).
fn has_lone_esc(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().any(|(i, &b)| {
        b == 0x1b
            && !matches!(bytes.get(i + 1), Some(b'[' | b'O' | 0x1b))
            && !(i > 0 && bytes[i - 1] == 0x1b)
    })
}
