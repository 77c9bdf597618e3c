//! `web_fetch` (`spec/tools/web_fetch.json`): a page or text file fetched over HTTP(S) from this
//! machine with reqwest (rustls, ring's provider), within a size and a time limit, HTML turned
//! into Markdown or plain text with `html2text`. The result goes through the loop like any other
//! (its output cap and recall apply).

use std::sync::OnceLock;
use std::time::Duration;

use futures_util::StreamExt as _;
use harness_model::CancellationToken;
use serde_json::Value;

/// Bytes of a body read at most.
pub const MAX_BYTES: usize = 5 * 1024 * 1024;
/// The whole fetch (connecting, redirects, the body) takes at most this long.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 10;
/// The width HTML is laid out to (long enough that prose is rarely wrapped).
const WIDTH: usize = 200;

fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // reqwest is built without a crypto provider of its own: ring's, as harness-model
            // installs it (an already installed provider is kept).
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .timeout(TIMEOUT)
                .connect_timeout(Duration::from_secs(10))
                .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
                .user_agent(concat!("llembas/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| format!("web_fetch: cannot build the HTTP client: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// How an HTML page is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Markdown (the default).
    Markdown,
    /// Plain text.
    Text,
    /// The HTML as it came.
    Html,
}

/// What kind of body a content type announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Other,
}

fn kind_of(content_type: &str, body: &[u8]) -> Kind {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if mime.is_empty() {
        // Nothing said: text if it looks like text.
        let head = &body[..body.len().min(8192)];
        // Invalid UTF-8 (not merely a character cut at the sample's end) is not text.
        let bad = matches!(std::str::from_utf8(head), Err(e) if e.error_len().is_some());
        if head.contains(&0) || bad {
            return Kind::Other;
        }
        let start = String::from_utf8_lossy(&head[..head.len().min(512)]).to_ascii_lowercase();
        let start = start.trim_start();
        return if start.starts_with("<!doctype html") || start.starts_with("<html") {
            Kind::Html
        } else {
            Kind::Text
        };
    }
    match mime.as_str() {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        m if m.starts_with("text/")
            || m.ends_with("+json")
            || m.ends_with("+xml")
            || matches!(
                m,
                "application/json"
                    | "application/xml"
                    | "application/javascript"
                    | "application/x-javascript"
                    | "application/ecmascript"
                    | "application/x-sh"
                    | "application/toml"
                    | "application/yaml"
                    | "application/x-yaml"
                    | "application/sql"
                    | "application/graphql"
            ) =>
        {
            Kind::Text
        }
        _ => Kind::Other,
    }
}

/// Turns an HTML page into the asked format.
pub fn convert(html: &[u8], format: Format) -> Result<String, String> {
    let text = match format {
        Format::Html => return Ok(String::from_utf8_lossy(html).into_owned()),
        Format::Markdown => html2text::config::plain()
            .no_link_wrapping()
            .string_from_read(html, WIDTH),
        Format::Text => html2text::config::plain_no_decorate()
            .no_link_wrapping()
            .string_from_read(html, WIDTH),
    };
    text.map(|t| {
        t.lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_owned()
    })
    .map_err(|e| format!("web_fetch: the page could not be read as HTML: {e}"))
}

/// Runs a `web_fetch` call: the text to answer, or the error to answer.
pub async fn fetch(args: &Value, cancel: &CancellationToken) -> Result<String, String> {
    let Some(raw) = args.get("url").and_then(Value::as_str) else {
        return Err("web_fetch: the argument `url` is missing".into());
    };
    let format = match args.get("format").and_then(Value::as_str) {
        None | Some("markdown") => Format::Markdown,
        Some("text") => Format::Text,
        Some("html") => Format::Html,
        Some(other) => {
            return Err(format!(
                "web_fetch: format {other:?} is not one of markdown, text, html"
            ));
        }
    };
    let url = reqwest::Url::parse(raw.trim())
        .map_err(|e| format!("web_fetch: {raw:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "web_fetch: {url} is not an http:// or https:// address"
        ));
    }
    let work = async {
        let response = client()?
            .get(url.clone())
            .header(
                reqwest::header::ACCEPT,
                "text/html,application/xhtml+xml,text/*;q=0.9,*/*;q=0.5",
            )
            .send()
            .await
            .map_err(|e| describe(&url, &e))?;
        let status = response.status();
        let last = response.url().clone();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if let Some(len) = response.content_length()
            && len > MAX_BYTES as u64
        {
            return Err(too_large(&last));
        }
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(|e| describe(&last, &e))?;
            if body.len() + piece.len() > MAX_BYTES {
                return Err(too_large(&last));
            }
            body.extend_from_slice(&piece);
        }
        if !status.is_success() {
            let said = String::from_utf8_lossy(&body[..body.len().min(300)])
                .trim()
                .to_owned();
            return Err(format!(
                "web_fetch: {last} answered HTTP {}{}",
                status.as_u16(),
                if said.is_empty() || kind_of(&content_type, &body) == Kind::Other {
                    String::new()
                } else {
                    format!(": {said}")
                }
            ));
        }
        let text = match kind_of(&content_type, &body) {
            Kind::Html => convert(&body, format)?,
            Kind::Text => String::from_utf8_lossy(&body).into_owned(),
            Kind::Other => {
                return Err(format!(
                    "web_fetch: {last} is {content_type}, not text; it is not shown"
                ));
            }
        };
        let moved = if last == url {
            String::new()
        } else {
            format!("(redirected to {last})\n\n")
        };
        Ok(if text.trim().is_empty() {
            format!("{moved}({last} has no text)")
        } else {
            format!("{moved}{text}")
        })
    };
    tokio::select! {
        r = work => r,
        () = cancel.cancelled() => Err("web_fetch: cancelled".into()),
    }
}

fn too_large(url: &reqwest::Url) -> String {
    format!("web_fetch: {url} is over the limit of {MAX_BYTES} bytes; it is not shown")
}

fn describe(url: &reqwest::Url, e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!(
            "web_fetch: {url} did not answer within {} seconds",
            TIMEOUT.as_secs()
        )
    } else if e.is_redirect() {
        format!("web_fetch: {url} redirects more than {MAX_REDIRECTS} times")
    } else {
        // The causes say what failed (refused, no such host, TLS).
        let mut text = format!("web_fetch: cannot fetch {url}: {e}");
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text.push_str(&format!(": {s}"));
            source = s.source();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_markdown_or_text() {
        let page = b"<html><head><title>T</title><style>p{}</style></head><body><h1>Title</h1><p>Some <strong>bold</strong> and a <a href=\"https://example.invalid/x\">link</a>.</p><ul><li>one</li><li>two</li></ul></body></html>";
        let md = convert(page, Format::Markdown).unwrap();
        assert!(md.contains("# Title"), "{md}");
        assert!(md.contains("**bold**"), "{md}");
        assert!(md.contains("https://example.invalid/x"), "{md}");
        assert!(md.contains("* one"), "{md}");
        let text = convert(page, Format::Text).unwrap();
        assert!(text.contains("Title"), "{text}");
        assert!(!text.contains("**"), "{text}");
        assert!(!text.contains("p{}"), "{text}");
    }

    #[test]
    fn content_types() {
        assert_eq!(kind_of("text/html; charset=utf-8", b""), Kind::Html);
        assert_eq!(kind_of("application/json", b"{}"), Kind::Text);
        assert_eq!(kind_of("application/vnd.api+json", b"{}"), Kind::Text);
        assert_eq!(kind_of("image/png", b"\x89PNG"), Kind::Other);
        assert_eq!(kind_of("", b"<!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(kind_of("", b"plain words"), Kind::Text);
        assert_eq!(kind_of("", b"\x00\x01\x02"), Kind::Other);
    }
}
