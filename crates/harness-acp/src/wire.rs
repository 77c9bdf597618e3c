//! The wire: JSON-RPC messages one a line over any byte stream (`spec/acp.md` §1), with bad
//! lines answered rather than ending the connection.

use agent_client_protocol::Lines;
use tokio::io::{AsyncRead, AsyncWrite};

/// The longest line the agent takes from its input, in bytes: the device link's frame cap
/// (`spec/acp.md` §1, 16 MiB; no spec data file holds a number for the wire). A longer line is
/// read through and dropped, never held whole, and answered with a parse error.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// How much of a bad line a parse error shows (lossily decoded), in bytes.
const BAD_LINE_PREFIX_BYTES: usize = 200;

/// A byte stream pair as `agent-client-protocol`'s line transport (`input` read, `output`
/// written: stdin and stdout for a terminal agent), with `input` split into lines here rather
/// than by that crate: a blank line is skipped; a line that is not UTF-8, not JSON or over
/// [`MAX_LINE_BYTES`] reaches it as a short stand-in (see [`stand_in`]) that it answers
/// with a parse error (`-32700`, `id: null`) and goes on — never the whole line echoed back, and
/// never the end of the connection. A request over the limit whose `id` leads its text (see
/// [`request_id`]) is answered here on that id instead, `-32600` with the limit, so the client
/// waiting on it hears.
pub fn lines(
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> Lines<
    impl futures_util::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures_util::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    // One writer for both: the crate's messages, and the answers to lines too long for it.
    let output = std::sync::Arc::new(tokio::sync::Mutex::new(output));
    let answers = output.clone();
    let reader = tokio::io::BufReader::new(input);
    let incoming = futures_util::stream::unfold(Some(reader), move |reader| {
        let answers = answers.clone();
        async move {
            let mut reader = reader?;
            loop {
                match next_line(&mut reader).await {
                    Ok(None) => return None,
                    Ok(Some(WireLine::Blank)) => continue,
                    Ok(Some(WireLine::Text(line))) => return Some((Ok(line), Some(reader))),
                    Ok(Some(WireLine::Answer(line))) => {
                        if let Err(e) = write_line(&mut *answers.lock().await, line).await {
                            return Some((Err(e), None));
                        }
                    }
                    Err(e) => return Some((Err(e), None)),
                }
            }
        }
    });
    let outgoing = futures_util::sink::unfold(output, async |out, line: String| {
        write_line(&mut *out.lock().await, line).await?;
        Ok::<_, std::io::Error>(out)
    });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// Writes `line` and its newline, and flushes.
async fn write_line(out: &mut (impl AsyncWrite + Unpin), line: String) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    let mut bytes = line.into_bytes();
    bytes.push(b'\n');
    out.write_all(&bytes).await?;
    out.flush().await
}

/// One line of the input as the crate is to see it.
#[derive(Debug, PartialEq)]
enum WireLine {
    /// Nothing but white space: no message, no answer.
    Blank,
    /// A JSON line, or the stand-in for a bad one.
    Text(String),
    /// The answer to a request too long to take whose id could be read: written back here,
    /// the request never reaching the crate.
    Answer(String),
}

/// The next line of `input` (without its `\n` or `\r\n`), `None` at the end. At most
/// [`MAX_LINE_BYTES`] of a line are kept; past that only its length is counted.
async fn next_line(
    input: &mut (impl tokio::io::AsyncBufRead + Unpin),
) -> std::io::Result<Option<WireLine>> {
    use tokio::io::AsyncBufReadExt as _;
    let mut kept: Vec<u8> = Vec::new();
    let mut len = 0usize;
    let mut ended = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            break;
        }
        let (chunk, used) = match memchr_newline(buf) {
            Some(i) => (&buf[..i], i + 1),
            None => (buf, buf.len()),
        };
        let room = (MAX_LINE_BYTES + 1).saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        len += chunk.len();
        let done = used > chunk.len();
        input.consume(used);
        if done {
            ended = true;
            break;
        }
    }
    if !ended && len == 0 {
        return Ok(None);
    }
    if kept.last() == Some(&b'\r') && len <= MAX_LINE_BYTES {
        kept.pop();
        len -= 1;
    }
    Ok(Some(judge_line(kept, len)))
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// What the crate is given for a line of `len` bytes whose first bytes are `kept`.
fn judge_line(kept: Vec<u8>, len: usize) -> WireLine {
    if len > MAX_LINE_BYTES {
        let line = stand_in(
            &kept,
            len,
            &format!("over the limit of {MAX_LINE_BYTES} bytes"),
        );
        return match request_id(&kept[..kept.len().min(ID_SCAN_BYTES)]) {
            Some(id) => WireLine::Answer(too_long_answer(id, line)),
            None => WireLine::Text(line),
        };
    }
    match String::from_utf8(kept) {
        Err(e) => WireLine::Text(stand_in(e.as_bytes(), len, "not UTF-8")),
        Ok(text) if text.trim().is_empty() => WireLine::Blank,
        Ok(text) => match serde_json::from_str::<serde::de::IgnoredAny>(&text) {
            Ok(_) => WireLine::Text(text),
            Err(_) => WireLine::Text(stand_in(text.as_bytes(), len, "not JSON")),
        },
    }
}

/// The short text that stands for a bad line: its length, why, and its first
/// [`BAD_LINE_PREFIX_BYTES`] bytes, lossily decoded. It starts with `#`, which no JSON text
/// does, so the crate answers it with a parse error whose `data.line` is this text.
fn stand_in(bytes: &[u8], len: usize, why: &str) -> String {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(BAD_LINE_PREFIX_BYTES)]);
    format!("# a line of {len} bytes, {why}; it began: {head}")
}

/// How far into a line too long to take its request id is looked for, in bytes.
const ID_SCAN_BYTES: usize = 64 * 1024;

/// The error that answers request `id` whose line was too long to take (`-32600`): the
/// limit, and the stand-in `line` as for a parse error.
fn too_long_answer(id: serde_json::Value, line: String) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32600,
            "message": format!("Invalid request: a message may be at most {MAX_LINE_BYTES} bytes (16 MiB)"),
            "data": {"line": line, "limit": MAX_LINE_BYTES},
        },
    })
    .to_string()
}

/// The `id` of the JSON-RPC request whose text begins with `prefix`, when that member of the
/// top object (a number or a string) lies whole in it. The text is scanned, not parsed: the
/// strings, escapes and nesting tracked, nothing built but the id.
pub fn request_id(prefix: &[u8]) -> Option<serde_json::Value> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < prefix.len() {
        match prefix[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b'"' => {
                let end = string_end(prefix, i)?;
                let key = &prefix[i..=end];
                i = end + 1;
                if depth == 1 && key == b"\"id\"" {
                    let rest = &prefix[i..];
                    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
                    if rest[colon] == b':' {
                        return id_value(&rest[colon + 1..]);
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote that closes the string opening at `start`.
fn string_end(text: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// A request id (a string or a number) at the start of `text`, white space first.
fn id_value(text: &[u8]) -> Option<serde_json::Value> {
    let start = text.iter().position(|b| !b.is_ascii_whitespace())?;
    let end = if text[start] == b'"' {
        string_end(text, start)? + 1
    } else {
        start
            + text[start..]
                .iter()
                .position(|b| !(b.is_ascii_digit() || b"-+.eE".contains(b)))?
    };
    match serde_json::from_slice::<serde_json::Value>(&text[start..end]).ok()? {
        v @ (serde_json::Value::String(_) | serde_json::Value::Number(_)) => Some(v),
        _ => None,
    }
}
