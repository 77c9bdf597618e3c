//! Server-sent events as model servers write them: bytes in, data payloads out.
//!
//! Lenient on purpose (quirk `sse-framing`): CR, LF and CRLF end a line; lines starting with `:`
//! are comments; `data:` is read with or without one space; a data line that is a complete JSON
//! value (or `[DONE]`) is an event by itself even when no blank line follows; a bare JSON line
//! (no `data:`) is taken as data too, as some servers answer a 200 with a plain error object.

/// Splits a byte stream into SSE data payloads.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of an unfinished line.
    partial: Vec<u8>,
    /// The last byte seen was a CR (so a following LF is part of the same line end).
    after_cr: bool,
    /// Data lines of the event being built.
    data: Vec<String>,
}

impl SseDecoder {
    /// A decoder at the start of a body.
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Feeds bytes; returns the data payloads completed by them.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            if b == b'\n' || b == b'\r' {
                self.after_cr = b == b'\r';
                let line = String::from_utf8_lossy(&self.partial).into_owned();
                self.partial.clear();
                self.push_line_into(&line, &mut out);
            } else {
                self.partial.push(b);
            }
        }
        out
    }

    /// Feeds one whole line (without its line end); returns the payloads it completes.
    pub fn push_line(&mut self, line: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.push_line_into(line, &mut out);
        out
    }

    /// The end of the body: whatever is pending becomes a last payload.
    pub fn finish(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.partial.is_empty() {
            let line = String::from_utf8_lossy(&self.partial).into_owned();
            self.partial.clear();
            self.push_line_into(&line, &mut out);
        }
        self.dispatch(&mut out);
        out
    }

    fn dispatch(&mut self, out: &mut Vec<String>) {
        if !self.data.is_empty() {
            out.push(self.data.join("\n"));
            self.data.clear();
        }
    }

    fn push_line_into(&mut self, line: &str, out: &mut Vec<String>) {
        if line.trim().is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let payload = if let Some(rest) = line.strip_prefix("data:") {
            rest.strip_prefix(' ').unwrap_or(rest)
        } else if line.trim_start().starts_with('{') && self.data.is_empty() {
            line.trim()
        } else {
            // `event:`, `id:`, `retry:` and anything else carry nothing we use.
            return;
        };
        if !self.data.is_empty() && is_whole(&self.data.join("\n")) {
            self.dispatch(out);
        }
        self.data.push(payload.to_string());
        let joined = self.data.join("\n");
        if is_whole(&joined) {
            self.dispatch(out);
        }
    }
}

fn is_whole(payload: &str) -> bool {
    let t = payload.trim();
    t == "[DONE]" || serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_variants() {
        let mut d = SseDecoder::new();
        let body = b": OPENROUTER PROCESSING\r\n\r\ndata:{\"a\":1}\r\ndata: {\"b\":\r\ndata: 2}\r\n\r\nevent: x\ndata: [DONE]\n";
        let mut out = Vec::new();
        for chunk in body.chunks(5) {
            out.extend(d.push_bytes(chunk));
        }
        out.extend(d.finish());
        assert_eq!(out, vec!["{\"a\":1}", "{\"b\":\n2}", "[DONE]"]);
    }
}
