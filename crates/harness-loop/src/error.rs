//! The crate's one error type.

/// What can go wrong in the loop's logic. Every message names the value at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec could not give a file (or it did not parse into our types).
    #[error(transparent)]
    Spec(#[from] harness_spec::Error),
    /// `loop.json` breaks a rule its schema cannot state.
    #[error("{what}: {why}")]
    Config {
        /// The file or field.
        what: String,
        /// What is wrong.
        why: String,
    },
    /// A transcript line in the middle of the log is not an event (a torn last line is not an
    /// error: it is reported by the reader and skipped).
    #[error("transcript line {line}: {why}")]
    Transcript {
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// Writing the transcript failed.
    #[error("transcript write failed: {0}")]
    Io(#[from] std::io::Error),
    /// An event came that the run cannot take in its state.
    #[error("the run cannot take {event} while it is {state}")]
    Unexpected {
        /// The event's name.
        event: String,
        /// The run's state.
        state: String,
    },
    /// The model's answer to a compaction's request had no text.
    #[error("the model gave no summary")]
    NoSummary,
    /// A rewind to a turn the session does not have.
    #[error("cannot rewind to turn {turn}: the session has {turns} turn(s)")]
    Rewind {
        /// The turn asked for.
        turn: u32,
        /// The turns there are.
        turns: u32,
    },
    /// A rewind to a turn a compaction folded into its summary.
    #[error(
        "cannot rewind to turn {turn}: turns 1 to {through} were compacted into a summary (/compact), so the earliest turn to rewind to is {}",
        through + 1
    )]
    RewindCompacted {
        /// The turn asked for.
        turn: u32,
        /// The last turn the compaction folded.
        through: u32,
    },
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
