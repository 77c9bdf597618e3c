//! What the model is told of what the person did themselves, the same in every front end: a
//! `!command` they ran, a file they attached with `@path` — the texts of loop.json `calls`, the
//! content capped as a tool result is (`context.cap`: head and tail lines, head and tail
//! characters).

use harness_loop::config::LoopConfig;

/// The `@path` words of a prompt, in order, each once (trailing punctuation dropped).
pub fn mentioned_paths(prompt: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in prompt.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let path = path.trim_end_matches([',', '.', ';', ':', '?', '!', ')']);
        if !path.is_empty() && !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
        }
    }
    out
}

/// What the model is told of a file the person attached (loop.json `calls.person_mention`).
pub fn mention(path: &str, content: &str) -> String {
    match LoopConfig::embedded() {
        Ok(cfg) => cfg
            .calls
            .person_mention
            .replace("{path}", path)
            .replace("{content}", &capped(&cfg, content)),
        Err(_) => format!("{path}:\n{content}"),
    }
}

/// What the model is told of a command the person ran (loop.json `calls.person_shell`).
pub fn shell(command: &str, code: i32, output: &str) -> String {
    match LoopConfig::embedded() {
        Ok(cfg) => cfg
            .calls
            .person_shell
            .replace("{command}", command)
            .replace("{code}", &code.to_string())
            .replace("{output}", &capped(&cfg, output)),
        Err(_) => format!("$ {command}\n{output}"),
    }
}

/// `text` capped as a tool result is.
fn capped(cfg: &LoopConfig, output: &str) -> String {
    let cap = &cfg.context.cap;
    let lines: Vec<&str> = output.lines().collect();
    let (head, tail) = (
        cap.head_lines.min(lines.len()),
        cap.tail_lines.min(lines.len()),
    );
    let mut kept = if lines.len() > cap.max_lines && head + tail < lines.len() {
        let n = lines.len() - head - tail;
        format!(
            "{}\n[{n} lines elided]\n{}",
            lines[..head].join("\n"),
            lines[lines.len() - tail..].join("\n")
        )
    } else {
        output.trim_end().to_owned()
    };
    if kept.chars().count() > cap.max_chars.max(cap.head_chars + cap.tail_chars) {
        let head: String = kept.chars().take(cap.head_chars).collect();
        let total = kept.chars().count();
        let tail: String = kept.chars().skip(total - cap.tail_chars).collect();
        kept = format!(
            "{head}\n[{} characters elided]\n{tail}",
            total - cap.head_chars - cap.tail_chars
        );
    }
    kept
}

/// The media type of an image file by its name's ending (`png`, `jpg`/`jpeg`, `gif`, `webp`:
/// the kinds OpenAI-compatible servers take); `None` for any other file.
pub fn image_type(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

/// An image file the person attached, as the `data:` URL a prompt carries; `None` when the
/// file is not one of the image kinds of [`image_type`].
pub fn image_url(path: &str, bytes: &[u8]) -> Option<String> {
    use base64::Engine as _;
    let media = image_type(path)?;
    Some(format!(
        "data:{media};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    ))
}
