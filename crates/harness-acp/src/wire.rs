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
/// never the end of the connection.
pub fn lines(
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> Lines<
    impl futures_util::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures_util::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    use tokio::io::AsyncWriteExt as _;
    let reader = tokio::io::BufReader::new(input);
    let incoming = futures_util::stream::unfold(Some(reader), async |reader| {
        let mut reader = reader?;
        loop {
            match next_line(&mut reader).await {
                Ok(None) => return None,
                Ok(Some(WireLine::Blank)) => continue,
                Ok(Some(WireLine::Text(line))) => return Some((Ok(line), Some(reader))),
                Err(e) => return Some((Err(e), None)),
            }
        }
    });
    let outgoing = futures_util::sink::unfold(output, async |mut out, line: String| {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        out.write_all(&bytes).await?;
        out.flush().await?;
        Ok::<_, std::io::Error>(out)
    });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// One line of the input as the crate is to see it.
#[derive(Debug, PartialEq)]
enum WireLine {
    /// Nothing but white space: no message, no answer.
    Blank,
    /// A JSON line, or the stand-in for a bad one.
    Text(String),
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
        return WireLine::Text(stand_in(
            &kept,
            len,
            &format!("over the limit of {MAX_LINE_BYTES} bytes"),
        ));
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
