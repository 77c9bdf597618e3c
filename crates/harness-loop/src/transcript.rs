//! The transcript: a session's events as an append-only JSON-lines log.
//!
//! One [`Entry`] per line, written whole and flushed ([`TranscriptWriter`]). A crash in the
//! middle of a write leaves at most a torn last line: [`read`] returns every complete event
//! before it and says that the tail was torn; a bad line anywhere else is an error naming the
//! line (the log is damaged, not merely cut). [`replay`] rebuilds the history the model would
//! see — turns, compactions and rewinds applied — without rewriting a line: a rewind is itself an
//! entry.

use std::io::{BufRead, Write};

use harness_core::protocol::{JobEnd, JobKind, Origin, ResultId, ToolCall, TurnEnd};
use serde::{Deserialize, Serialize};

use crate::context::InsertKind;
use crate::error::{Error, Result};
use crate::message::Message;

/// One event of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
// A log line, written and read one at a time: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Entry {
    /// A turn began with this user (or machine) text.
    TurnStarted {
        /// The turn's number, from 1.
        turn: u32,
        /// The text.
        text: String,
        /// Who wrote it.
        origin: Origin,
        /// The images that went with it (`data:` or `https:` URLs).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    /// A user-role message inside a turn: a nudge, a wake-up, the wrap-up request.
    User {
        /// The text.
        text: String,
        /// Who wrote it.
        origin: Origin,
    },
    /// The model's answer.
    Assistant {
        /// Visible text.
        text: String,
        /// Reasoning.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
        /// Calls.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// A tool result went into the context.
    ToolResult {
        /// The call answered.
        call_id: String,
        /// The tool.
        tool: String,
        /// The stored result's id.
        result_id: ResultId,
        /// The full output (what `recall` shows).
        output: String,
        /// What the model was sent.
        text: String,
        /// How it went in.
        kind: InsertKind,
        /// The call's arguments (for the listing dedupe table on resume).
        #[serde(default)]
        args: serde_json::Value,
        /// For a read: what it read (for the read table on resume).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read: Option<crate::context::ReadInfo>,
    },
    /// A job started.
    JobStarted {
        /// The job.
        id: u32,
        /// Command or subagent.
        kind: JobKind,
        /// Its title.
        title: String,
    },
    /// A job ended.
    JobEnded {
        /// The job.
        id: u32,
        /// How.
        end: JobEnd,
    },
    /// The turn ended.
    TurnEnded {
        /// Why.
        reason: TurnEnd,
    },
    /// The history was compacted into this text (summary and table of reads).
    Compacted {
        /// What the model sees from then on.
        text: String,
    },
    /// The session was rewound to the start of `turn`.
    Rewound {
        /// The turn.
        turn: u32,
    },
    /// These calls started running (written before they run: on resume, a call started but
    /// without a result was interrupted, not merely not run).
    CallsStarted {
        /// The calls.
        call_ids: Vec<String>,
    },
}

/// Writes entries, one JSON line each, flushed after every entry.
#[derive(Debug)]
pub struct TranscriptWriter<W: Write> {
    out: W,
}

impl<W: Write> TranscriptWriter<W> {
    /// Appends to `out` (a file opened for appending, in the products).
    pub fn new(out: W) -> TranscriptWriter<W> {
        TranscriptWriter { out }
    }

    /// Writes one entry as one line, in one write, and flushes.
    pub fn append(&mut self, entry: &Entry) -> Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(|e| Error::Transcript {
            line: 0,
            why: e.to_string(),
        })?;
        line.push(b'\n');
        self.out.write_all(&line)?;
        self.out.flush()?;
        Ok(())
    }

    /// Writes several entries.
    pub fn append_all(&mut self, entries: &[Entry]) -> Result<()> {
        entries.iter().try_for_each(|e| self.append(e))
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// What [`read`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// Every complete entry, in order.
    pub entries: Vec<Entry>,
    /// The bytes of a torn last line (a write the crash cut), if any.
    pub torn_tail: Option<String>,
    /// Bytes up to the end of the last complete entry. Before appending to a log whose tail
    /// was torn, cut the file to this length, so the next entry starts on a line of its own
    /// (the CLI's JSONL store does so before every append, keeping the cut bytes aside in
    /// `<file>.torn-<n>`).
    pub valid_bytes: u64,
}

/// Reads a transcript: every complete event, up to a torn last line.
pub fn read(mut input: impl BufRead) -> Result<Loaded> {
    let mut entries = Vec::new();
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    let mut pending_bad: Option<(usize, String, String)> = None;
    let mut valid_bytes = 0u64;
    let mut offset = 0u64;
    loop {
        buf.clear();
        let n = input.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        offset += n as u64;
        if let Some((line, why, _)) = pending_bad.take() {
            // A bad line followed by more lines: damage, not a torn tail.
            return Err(Error::Transcript { line, why });
        }
        let complete = buf.last() == Some(&b'\n');
        let text = String::from_utf8_lossy(&buf);
        let trimmed = text.trim_end_matches(['\n', '\r']);
        if trimmed.trim().is_empty() {
            if complete {
                valid_bytes = offset;
            }
            continue;
        }
        match serde_json::from_str::<Entry>(trimmed) {
            Ok(entry) if complete => {
                entries.push(entry);
                valid_bytes = offset;
            }
            // A last line with no newline was cut mid-write even if it parses: the writer
            // always ends an entry with one.
            Ok(_) => pending_bad = Some((line_no, "no newline".into(), trimmed.to_string())),
            Err(e) => pending_bad = Some((line_no, e.to_string(), trimmed.to_string())),
        }
    }
    Ok(Loaded {
        entries,
        torn_tail: pending_bad.map(|(_, _, text)| text),
        valid_bytes,
    })
}

/// The history the model would see after these entries: turns, results, compactions and
/// rewinds applied.
pub fn replay(entries: &[Entry]) -> Vec<Message> {
    let mut history: Vec<Message> = Vec::new();
    let mut starts: Vec<usize> = Vec::new();
    for e in entries {
        match e {
            Entry::TurnStarted {
                text,
                origin,
                images,
                ..
            } => {
                starts.push(history.len());
                history.push(Message::User {
                    text: text.clone(),
                    origin: *origin,
                    images: images.clone(),
                });
            }
            Entry::User { text, origin } => history.push(Message::user_from(text.clone(), *origin)),
            Entry::Assistant {
                text,
                reasoning,
                tool_calls,
            } => history.push(Message::Assistant {
                text: text.clone(),
                reasoning: reasoning.clone(),
                tool_calls: tool_calls.clone(),
            }),
            Entry::ToolResult { call_id, text, .. } => history.push(Message::Tool {
                call_id: call_id.clone(),
                text: text.clone(),
            }),
            Entry::Compacted { text } => {
                history = vec![Message::user_from(text.clone(), Origin::Machine)];
                starts.fill(0);
            }
            Entry::Rewound { turn } => {
                let k = (*turn as usize).saturating_sub(1);
                if let Some(&at) = starts.get(k) {
                    history.truncate(at);
                    starts.truncate(k);
                }
            }
            Entry::JobStarted { .. }
            | Entry::JobEnded { .. }
            | Entry::TurnEnded { .. }
            | Entry::CallsStarted { .. } => {}
        }
    }
    history
}
