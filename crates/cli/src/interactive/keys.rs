//! What was typed while a turn ran, read from the terminal's bytes: lines ended with Enter (to
//! send, in order), and the line being typed (for the next prompt). A bracketed paste is taken
//! whole, its newlines kept; Esc and other keys' sequences are left out; Backspace and Ctrl-U
//! edit as the prompt would.

/// Type-ahead, read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Typed {
    /// Lines ended with Enter.
    pub lines: Vec<String>,
    /// The line not ended yet.
    pub rest: String,
}

/// Reads the bytes typed while a turn ran.
pub fn typed_ahead(bytes: &[u8]) -> Typed {
    const PASTE_START: &[u8] = b"\x1b[200~";
    const PASTE_END: &[u8] = b"\x1b[201~";
    let mut typed = Typed::default();
    let mut line: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(PASTE_START) {
            let body = &rest[PASTE_START.len()..];
            let end = find(body, PASTE_END).unwrap_or(body.len());
            for &b in &body[..end] {
                line.push(if b == b'\r' { b'\n' } else { b });
            }
            i += PASTE_START.len() + (end + PASTE_END.len()).min(body.len());
            continue;
        }
        match rest[0] {
            0x1b => i += escape_len(rest),
            b'\r' | b'\n' => {
                typed
                    .lines
                    .push(String::from_utf8_lossy(&line).into_owned());
                line.clear();
                i += 1;
            }
            0x7f | 0x08 => {
                // One character back (a UTF-8 character's continuation bytes with it).
                while let Some(b) = line.pop() {
                    if b & 0xc0 != 0x80 {
                        break;
                    }
                }
                i += 1;
            }
            0x15 => {
                line.clear();
                i += 1;
            }
            b if b < 0x20 && b != b'\t' => i += 1,
            b => {
                line.push(b);
                i += 1;
            }
        }
    }
    typed.rest = String::from_utf8_lossy(&line).into_owned();
    typed
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The length of the escape sequence at the start of `bytes` (a lone Esc: 1).
fn escape_len(bytes: &[u8]) -> usize {
    match bytes.get(1) {
        // CSI: parameters, then a final byte in `@`..=`~`.
        Some(b'[') => bytes[2..]
            .iter()
            .position(|b| (0x40..=0x7e).contains(b))
            .map_or(bytes.len(), |p| p + 3),
        Some(b'O') => 3.min(bytes.len()),
        _ => 1,
    }
}
