//! Folding what is long to what a window shows: a text by its lines (the head and the tail kept,
//! the middle counted), each line by the window's width (a line of 300 KB is a few rows and a
//! count, not 2,000 rows), and a running command's output as it comes (its first lines, then
//! its last ones following).

use std::borrow::Cow;
use std::collections::VecDeque;

use unicode_width::UnicodeWidthChar as _;

/// Rows one line may fill before the rest of it is cut.
pub const LINE_ROWS: usize = 3;

/// Columns assumed when the window's are not known (a pipe).
pub const DEFAULT_WIDTH: usize = 100;

/// First lines of a result shown when it is folded.
pub const HEAD_LINES: usize = 4;

/// Last lines of a result (or of a running command's output) shown when it is folded.
pub const TAIL_LINES: usize = 3;

/// The columns one line keeps in a window `width` columns wide (`None`: not known).
pub fn line_cap(width: Option<usize>) -> usize {
    width.unwrap_or(DEFAULT_WIDTH).max(20) * LINE_ROWS
}

/// `line` cut to `cap` columns, the characters cut said after it.
pub fn cut_line(line: &str, cap: usize) -> Cow<'_, str> {
    let mut cols = 0usize;
    let mut end = line.len();
    for (i, c) in line.char_indices() {
        cols += c.width().unwrap_or(0);
        if cols > cap {
            end = i;
            break;
        }
    }
    if end == line.len() {
        return Cow::Borrowed(line);
    }
    // Room for the note: cut a little earlier.
    let note_room = 32;
    let keep = line[..end]
        .char_indices()
        .rev()
        .scan(0usize, |w, (i, c)| {
            *w += c.width().unwrap_or(0);
            Some((i, *w))
        })
        .find(|(_, w)| *w >= note_room)
        .map_or(0, |(i, _)| i);
    let more = line[keep..].chars().count();
    Cow::Owned(format!("{}{}", &line[..keep], more_chars(more)))
}

/// The note after a cut line.
fn more_chars(n: usize) -> String {
    format!(" … {n} more character{}", if n == 1 { "" } else { "s" })
}

/// A text's lines as shown folded: all of them when they are few, else the first
/// [`HEAD_LINES`], `None` for the lines left out (how many), and the last [`TAIL_LINES`]; each
/// cut to `cap` columns.
pub fn head_and_tail(text: &str, cap: usize) -> Vec<Result<Cow<'_, str>, usize>> {
    let total = text.lines().count();
    let shown = |l| Ok(cut_line(l, cap));
    if total <= HEAD_LINES + TAIL_LINES + 1 {
        return text.lines().map(shown).collect();
    }
    let mut out: Vec<_> = text.lines().take(HEAD_LINES).map(shown).collect();
    out.push(Err(total - HEAD_LINES - TAIL_LINES));
    out.extend(text.lines().skip(total - TAIL_LINES).map(shown));
    out
}

/// A running command's output as it comes: its first lines shown as they come (each cut to the
/// window), then the last lines kept to show when it ends, the ones between counted. Memory
/// stays bounded whatever the command prints.
#[derive(Debug, Default)]
pub struct Running {
    /// Lines shown as they came.
    shown: usize,
    /// Columns shown of the line being shown, and characters cut from it.
    cols: usize,
    cut: usize,
    /// Lines past the head, ended.
    past: usize,
    /// The last of them (cut), and the one coming (cut, its cut characters).
    tail: VecDeque<String>,
    partial: String,
    partial_cols: usize,
    partial_cut: usize,
}

impl Running {
    /// Takes a piece of output; what to print now (the head's part of it).
    pub fn push(&mut self, text: &str, head: usize, cap: usize) -> String {
        let mut out = String::new();
        for piece in text.split_inclusive('\n') {
            let (body, ended) = match piece.strip_suffix('\n') {
                Some(b) => (b, true),
                None => (piece, false),
            };
            // Output folded before it was shown stands for its lines.
            if ended
                && self.partial.is_empty()
                && let Some(n) = harness_agent::output::folded_lines(body)
            {
                self.past += usize::try_from(n).unwrap_or(usize::MAX);
                continue;
            }
            if self.shown < head {
                for c in body.chars() {
                    let w = c.width().unwrap_or(0);
                    if self.cut == 0 && self.cols + w <= cap {
                        out.push(c);
                        self.cols += w;
                    } else {
                        self.cut += 1;
                    }
                }
                if ended {
                    if self.cut > 0 {
                        out.push_str(&more_chars(self.cut));
                    }
                    out.push('\n');
                    self.shown += 1;
                    self.cols = 0;
                    self.cut = 0;
                }
                continue;
            }
            for c in body.chars() {
                let w = c.width().unwrap_or(0);
                if self.partial_cut == 0 && self.partial_cols + w <= cap {
                    self.partial.push(c);
                    self.partial_cols += w;
                } else {
                    self.partial_cut += 1;
                }
            }
            if ended {
                self.end_partial();
            }
        }
        out
    }

    fn end_partial(&mut self) {
        let mut line = std::mem::take(&mut self.partial);
        if self.partial_cut > 0 {
            line.push_str(&more_chars(self.partial_cut));
        }
        self.partial_cols = 0;
        self.partial_cut = 0;
        self.past += 1;
        self.tail.push_back(line);
        if self.tail.len() > TAIL_LINES {
            self.tail.pop_front();
        }
    }

    /// The line the output is at now, past the head (for a line that follows it while the
    /// command runs): the one coming, else the last ended.
    pub fn now(&self) -> Option<&str> {
        if !self.partial.is_empty() {
            return Some(&self.partial);
        }
        self.tail.back().map(String::as_str)
    }

    /// At the end: the last lines past the head, and how many lines between were left out.
    pub fn finish(&mut self) -> (Vec<String>, usize) {
        if !self.partial.is_empty() || self.partial_cut > 0 {
            self.end_partial();
        }
        let tail: Vec<String> = self.tail.drain(..).collect();
        let left_out = self.past.saturating_sub(tail.len());
        (tail, left_out)
    }

    /// Whether a head line is open (shown without its end yet).
    pub fn line_open(&self) -> bool {
        self.cols > 0 || self.cut > 0
    }
}

/// One page of `text` from byte `from`: as many of its lines as fill `rows` rows `cols`
/// columns wide (a line longer than what is left is split, mid-line, across pages), and where
/// the next page starts (`None`: this was the last). Only what is shown is read, so a huge
/// result pages at once.
pub fn page(text: &str, from: usize, rows: usize, cols: usize) -> (String, Option<usize>) {
    let cols = cols.max(1);
    let rows = rows.max(1);
    let rest = text.get(from..).unwrap_or_default();
    let mut out = String::new();
    let mut used = 0usize;
    let mut at = 0usize;
    while at < rest.len() && used < rows {
        let end = rest[at..].find('\n').map_or(rest.len(), |i| at + i);
        let line = &rest[at..end];
        // The rows this line fills; the row it ends on is counted once.
        let mut row_cols = 0usize;
        let mut line_rows = 1usize;
        let mut cut = None;
        for (i, c) in line.char_indices() {
            let w = c.width().unwrap_or(0);
            if row_cols + w > cols {
                line_rows += 1;
                row_cols = 0;
                if used + line_rows > rows {
                    cut = Some(i);
                    break;
                }
            }
            row_cols += w;
        }
        match cut {
            Some(i) => {
                out.push_str(&line[..i]);
                out.push('\n');
                return (out, Some(from + at + i));
            }
            None => {
                out.push_str(line);
                out.push('\n');
                used += line_rows;
                at = (end + 1).min(rest.len());
            }
        }
    }
    let next = (at < rest.len()).then_some(from + at);
    (out, next)
}
