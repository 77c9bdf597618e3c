//! A command's output, held in bounded memory whatever it prints (`loop.json` `jobs.limits`):
//! its first `output_head_chars` and last `output_kept_chars` characters; what lies between goes
//! on to a spill file the session owns (up to `spill_max_bytes`), named in the output. The
//! person is shown at most `stream_chars` characters waiting at a time; what comes faster is
//! folded into a count. A world that runs commands as processes feeds it what they write.

use std::io::Write as _;
use std::path::PathBuf;

/// The spec's numbers for a command's output.
#[derive(Debug, Clone, Copy)]
pub struct OutputLimits {
    /// First characters held (`output_head_chars`).
    pub head: usize,
    /// Last characters held (`output_kept_chars`).
    pub tail: usize,
    /// Bytes the spill file holds at most (`spill_max_bytes`).
    pub spill: u64,
    /// Characters waiting to be shown at most (`stream_chars`).
    pub stream: usize,
}

impl OutputLimits {
    /// The spec's numbers (`loop.json` `jobs.limits`).
    pub fn embedded() -> crate::Result<OutputLimits> {
        let l = harness_loop::config::LoopConfig::embedded()?.jobs.limits;
        Ok(OutputLimits {
            head: l.output_head_chars,
            tail: l.output_kept_chars,
            spill: l.spill_max_bytes,
            stream: l.stream_chars,
        })
    }
}

/// The output of a command as it is held.
#[derive(Debug)]
pub struct HeldOutput {
    limits: OutputLimits,
    head: String,
    head_chars: usize,
    tail: String,
    tail_chars: usize,
    /// Characters written in all.
    pub total: u64,
    /// Characters in neither the head nor the tail.
    middle: u64,
    /// Where the output past the head goes, opened when first needed.
    spill_path: Option<PathBuf>,
    spill: Option<std::fs::File>,
    spilled: u64,
    /// Output not shown yet, and characters dropped from it unshown.
    unsent: String,
    unsent_chars: usize,
    unshown: u64,
    /// Line ends among the characters dropped unshown.
    unshown_lines: u64,
}

impl HeldOutput {
    /// Output held within `limits`, spilling to `spill_path` (created when first needed).
    pub fn new(limits: OutputLimits, spill_path: Option<PathBuf>) -> HeldOutput {
        HeldOutput {
            limits,
            head: String::new(),
            head_chars: 0,
            tail: String::new(),
            tail_chars: 0,
            total: 0,
            middle: 0,
            spill_path,
            spill: None,
            spilled: 0,
            unsent: String::new(),
            unsent_chars: 0,
            unshown: 0,
            unshown_lines: 0,
        }
    }

    /// Takes in what a command wrote; `streaming`: it is also to be shown.
    pub fn push(&mut self, text: &str, streaming: bool) {
        let chars = text.chars().count();
        self.total += chars as u64;
        let mut rest = text;
        if self.head_chars < self.limits.head {
            let room = self.limits.head - self.head_chars;
            let cut = rest.char_indices().nth(room).map_or(rest.len(), |(i, _)| i);
            self.head.push_str(&rest[..cut]);
            self.head_chars += rest[..cut].chars().count();
            rest = &rest[cut..];
        }
        if !rest.is_empty() {
            self.spill_out(rest);
            self.tail.push_str(rest);
            self.tail_chars += rest.chars().count();
            if self.tail_chars > self.limits.tail.saturating_mul(2).max(1) {
                let drop = self.tail_chars - self.limits.tail;
                let cut = self
                    .tail
                    .char_indices()
                    .nth(drop)
                    .map_or(self.tail.len(), |(i, _)| i);
                self.tail.drain(..cut);
                self.tail_chars -= drop;
                self.middle += drop as u64;
            }
        }
        if streaming {
            self.unsent.push_str(text);
            self.unsent_chars += chars;
            if self.unsent_chars > self.limits.stream {
                let drop = self.unsent_chars - self.limits.stream;
                let cut = self
                    .unsent
                    .char_indices()
                    .nth(drop)
                    .map_or(self.unsent.len(), |(i, _)| i);
                let lines = self.unsent[..cut].bytes().filter(|b| *b == b'\n').count();
                self.unsent.drain(..cut);
                self.unsent_chars -= drop;
                self.unshown += drop as u64;
                self.unshown_lines += lines as u64;
            }
        }
    }

    fn spill_out(&mut self, text: &str) {
        if self.spilled >= self.limits.spill {
            return;
        }
        if self.spill.is_none() {
            let Some(path) = &self.spill_path else {
                return;
            };
            let opened = path
                .parent()
                .map(std::fs::create_dir_all)
                .transpose()
                .and_then(|_| {
                    use std::os::unix::fs::OpenOptionsExt as _;
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .mode(0o600)
                        .open(path)
                });
            match opened {
                Ok(mut f) => {
                    // The spill file holds the whole output: the head first.
                    let _ = f.write_all(self.head.as_bytes());
                    self.spill = Some(f);
                }
                Err(_) => {
                    self.spill_path = None;
                    return;
                }
            }
        }
        let room = usize::try_from(self.limits.spill - self.spilled).unwrap_or(usize::MAX);
        let bytes = &text.as_bytes()[..text.len().min(room)];
        if let Some(f) = &mut self.spill
            && f.write_all(bytes).is_ok()
        {
            self.spilled += bytes.len() as u64;
        }
    }

    /// What the model and job_output are given: the head, what was left out, the tail.
    pub fn view(&self) -> String {
        if self.middle == 0 {
            return format!("{}{}", self.head, self.tail);
        }
        let whole = match &self.spill_path {
            Some(p) if self.spill.is_some() => format!(" (the output is in {})", p.display()),
            _ => String::new(),
        };
        format!(
            "{}\n[{} characters of output not kept here{whole}]\n{}",
            self.head, self.middle, self.tail
        )
    }

    /// The output after the `from`th character, as far as it is held (a gap is said).
    pub fn since(&self, from: u64) -> String {
        let tail_start = self.total - self.tail_chars as u64;
        if from >= tail_start {
            let skip = usize::try_from(from - tail_start).unwrap_or(usize::MAX);
            let cut = self
                .tail
                .char_indices()
                .nth(skip)
                .map_or(self.tail.len(), |(i, _)| i);
            return self.tail[cut..].to_owned();
        }
        if from < self.head_chars as u64 && self.middle == 0 {
            let skip = usize::try_from(from).unwrap_or(usize::MAX);
            let cut = self
                .head
                .char_indices()
                .nth(skip)
                .map_or(self.head.len(), |(i, _)| i);
            return format!("{}{}", &self.head[cut..], self.tail);
        }
        format!(
            "[{} characters of output not kept here]\n{}",
            tail_start.saturating_sub(from),
            self.tail
        )
    }

    /// The output waiting to be shown, with a note of what was folded away.
    pub fn take_unsent(&mut self) -> Option<String> {
        if self.unsent.is_empty() && self.unshown == 0 {
            return None;
        }
        let mut text = std::mem::take(&mut self.unsent);
        self.unsent_chars = 0;
        if self.unshown > 0 {
            text = format!("{}\n{text}", fold_note(self.unshown_lines, self.unshown));
            self.unshown = 0;
            self.unshown_lines = 0;
        }
        Some(text)
    }
}

/// The line that stands for output folded unshown: `[… L lines, C characters not shown …]`
/// (a front end that counts lines reads it back with [`folded_lines`]).
pub fn fold_note(lines: u64, chars: u64) -> String {
    format!("[… {lines} lines, {chars} characters not shown …]")
}

/// The lines a [`fold_note`] line stands for (`None`: `line` is not one).
pub fn folded_lines(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("[… ")?;
    let (lines, rest) = rest.split_once(" lines, ")?;
    rest.strip_suffix(" characters not shown …]")?
        .parse::<u64>()
        .ok()?;
    lines.parse().ok()
}
