//! The streaming `<think>…</think>` splitter (quirk `think-tags-in-content`).
//!
//! Content is split into answer text and reasoning. An opening `<think>` counts at the start of
//! the content (after white space); a closing `</think>` ends the reasoning; a lone `</think>`
//! with no opener means everything before it was reasoning, which the splitter says with
//! [`Piece::TextWasReasoning`] since that text was already passed on. A chunk end that could be
//! the start of a tag is held back until the next chunk decides.

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// A piece of content, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Answer text.
    Text(String),
    /// Reasoning text.
    Reasoning(String),
    /// All answer text passed on so far (this string) was reasoning after all.
    TextWasReasoning(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    /// Nothing but white space seen yet.
    #[default]
    Start,
    /// Inside `<think>`.
    Think,
    /// Answer text; a lone `</think>` may still come.
    Text,
    /// Answer text after a think block: tags are plain text now.
    After,
}

/// Splits streamed content into text and reasoning.
#[derive(Debug, Default)]
pub struct ThinkSplitter {
    state: State,
    pending: String,
    text_so_far: String,
}

/// How many bytes at the end of `s` could be the start of `tag`.
fn partial_suffix(s: &str, tag: &str) -> usize {
    (1..tag.len().min(s.len() + 1))
        .rev()
        .find(|&n| s.is_char_boundary(s.len() - n) && tag.starts_with(&s[s.len() - n..]))
        .unwrap_or(0)
}

impl ThinkSplitter {
    /// A splitter at the start of an answer.
    pub fn new() -> ThinkSplitter {
        ThinkSplitter::default()
    }

    fn text(&mut self, out: &mut Vec<Piece>, s: &str) {
        if !s.is_empty() {
            self.text_so_far.push_str(s);
            out.push(Piece::Text(s.to_string()));
        }
    }

    fn reasoning(out: &mut Vec<Piece>, s: &str) {
        if !s.is_empty() {
            out.push(Piece::Reasoning(s.to_string()));
        }
    }

    /// Feeds one content delta.
    pub fn push(&mut self, delta: &str) -> Vec<Piece> {
        let mut out = Vec::new();
        let mut buf = std::mem::take(&mut self.pending);
        buf.push_str(delta);
        loop {
            match self.state {
                State::Start => {
                    let t = buf.trim_start();
                    if t.is_empty() || (OPEN.starts_with(t) && t.len() < OPEN.len()) {
                        self.pending = buf;
                        break;
                    }
                    if let Some(rest) = t.strip_prefix(OPEN) {
                        buf = rest.to_string();
                        self.state = State::Think;
                    } else {
                        self.state = State::Text;
                    }
                }
                State::Think => {
                    if let Some(i) = buf.find(CLOSE) {
                        Self::reasoning(&mut out, &buf[..i]);
                        buf = buf[i + CLOSE.len()..].to_string();
                        self.state = State::After;
                    } else {
                        let keep = partial_suffix(&buf, CLOSE);
                        let cut = buf.len() - keep;
                        Self::reasoning(&mut out, &buf[..cut]);
                        self.pending = buf[cut..].to_string();
                        break;
                    }
                }
                State::Text => {
                    if let Some(i) = buf.find(CLOSE) {
                        self.text(&mut out, &buf[..i]);
                        let moved = std::mem::take(&mut self.text_so_far);
                        out.push(Piece::TextWasReasoning(moved));
                        buf = buf[i + CLOSE.len()..].to_string();
                        self.state = State::After;
                    } else {
                        let keep = partial_suffix(&buf, CLOSE);
                        let cut = buf.len() - keep;
                        let head = buf[..cut].to_string();
                        self.text(&mut out, &head);
                        self.pending = buf[cut..].to_string();
                        break;
                    }
                }
                State::After => {
                    if self.text_so_far.is_empty() {
                        buf = buf.trim_start().to_string();
                    }
                    let s = std::mem::take(&mut buf);
                    self.text(&mut out, &s);
                    break;
                }
            }
        }
        out
    }

    /// The end of the content: anything held back is passed on as what it was.
    pub fn finish(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        let pending = std::mem::take(&mut self.pending);
        match self.state {
            State::Think => Self::reasoning(&mut out, &pending),
            _ => self.text(&mut out, &pending),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&str]) -> (String, String) {
        let mut s = ThinkSplitter::new();
        let mut pieces = Vec::new();
        for c in chunks {
            pieces.extend(s.push(c));
        }
        pieces.extend(s.finish());
        let (mut text, mut reasoning) = (String::new(), String::new());
        for p in pieces {
            match p {
                Piece::Text(t) => text.push_str(&t),
                Piece::Reasoning(r) => reasoning.push_str(&r),
                Piece::TextWasReasoning(moved) => {
                    assert!(text.ends_with(&moved) || moved.is_empty());
                    text.truncate(text.len() - moved.len());
                    reasoning.insert_str(0, &moved);
                }
            }
        }
        (text, reasoning)
    }

    #[test]
    fn split_tags() {
        assert_eq!(
            run(&["<thi", "nk>abc</th", "ink>\n\nHi"]),
            ("Hi".into(), "abc".into())
        );
        assert_eq!(
            run(&["plan it", "</think>", "Done"]),
            ("Done".into(), "plan it".into())
        );
        assert_eq!(
            run(&["a < b and x</", "p>"]),
            ("a < b and x</p>".into(), "".into())
        );
        assert_eq!(run(&["<th"]), ("<th".into(), "".into()));
        assert_eq!(run(&["<think>cut off"]), ("".into(), "cut off".into()));
    }
}
