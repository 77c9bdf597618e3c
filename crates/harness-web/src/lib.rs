//! The harness's web tools, for every product: `web_fetch` (`spec/tools/web_fetch.json`) — a
//! page or text file fetched over HTTP(S) with reqwest (rustls, ring's provider) within the
//! spec's size, time and redirect limits for the project, HTML given back as Markdown or plain
//! text with `html2text`. A server fetches on behalf of its users from inside its own network,
//! so [`Reach::Public`] refuses every address that is not a public one (loopback, private,
//! link-local, ...), at each hop of a redirect and for each address a name resolves to.
//!
//! The result goes through the loop like any other (its output cap and recall apply); an
//! [`Error`]'s text is what the model is answered.
//!
//! ```no_run
//! # async fn f() -> Result<(), harness_web::Error> {
//! use harness_web::{Reach, WebFetch};
//! let web = WebFetch::new(harness_spec::Project::Cli, Reach::Any)?;
//! let args = serde_json::json!({"url": "https://example.com/"});
//! let text = web.fetch(&args, &tokio_util::sync::CancellationToken::new()).await?;
//! # Ok(()) }
//! ```

// A library says nothing on stdout or stderr of its own: it returns what happened.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use harness_spec::Project;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Why a fetch gave no text; the message is what the model is answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The call has no `url`.
    #[error("web_fetch: the argument `url` is missing")]
    MissingUrl,
    /// `format` is not one the tool knows.
    #[error("web_fetch: format {0:?} is not one of markdown, text, html")]
    Format(String),
    /// `url` does not parse.
    #[error("web_fetch: {raw:?} is not a URL: {why}")]
    NotUrl {
        /// What was given.
        raw: String,
        /// Why it is not one.
        why: String,
    },
    /// Not `http://` or `https://`.
    #[error("web_fetch: {0} is not an http:// or https:// address")]
    Scheme(String),
    /// The address (or one a name resolves to, or a redirect's) is not a public one.
    #[error("web_fetch: {0} is on the server's own network; it is not fetched")]
    NotPublic(String),
    /// The body is over the limit.
    #[error("web_fetch: {url} is over the limit of {limit} bytes; it is not shown")]
    TooLarge {
        /// The address, after redirects.
        url: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// The whole fetch took longer than the limit.
    #[error("web_fetch: {url} did not answer within {seconds} seconds")]
    Timeout {
        /// The address.
        url: String,
        /// The limit in seconds.
        seconds: u64,
    },
    /// More redirects than the limit.
    #[error("web_fetch: {url} redirects more than {limit} times")]
    Redirects {
        /// The address.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// The connection or the transfer failed; `why` names the causes (refused, no such host,
    /// TLS).
    #[error("web_fetch: cannot fetch {url}: {why}")]
    Fetch {
        /// The address.
        url: String,
        /// What failed.
        why: String,
    },
    /// An answer other than 2xx; `said` is the start of a text body (with its `: `), if any.
    #[error("web_fetch: {url} answered HTTP {status}{said}")]
    Status {
        /// The address, after redirects.
        url: String,
        /// The HTTP status.
        status: u16,
        /// `: ` and the start of the body, or nothing.
        said: String,
    },
    /// The body is not text.
    #[error("web_fetch: {url} is {content_type}, not text; it is not shown")]
    NotText {
        /// The address, after redirects.
        url: String,
        /// What it said it is.
        content_type: String,
    },
    /// The page could not be laid out as text.
    #[error("web_fetch: the page could not be read as HTML: {0}")]
    Html(String),
    /// The call was cancelled.
    #[error("web_fetch: cancelled")]
    Cancelled,
    /// The HTTP client could not be built.
    #[error("web_fetch: cannot build the HTTP client: {0}")]
    Client(String),
    /// The spec gives the tool no limits for the project.
    #[error("spec tools/web_fetch.json: variable {0} is not a whole number for this project")]
    Spec(String),
}

/// What a fetch may read and how long it may take: `web_fetch`'s variables as the spec fills
/// them for the project (the numbers live only there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of a body read at most.
    pub max_bytes: usize,
    /// The whole fetch (connecting, redirects, the body) takes at most this long.
    pub timeout: Duration,
    /// Redirects followed at most.
    pub max_redirects: usize,
}

impl Limits {
    /// The spec's limits for `project`.
    pub fn for_project(project: Project) -> Result<Limits, Error> {
        let var = |name: &str| -> Result<u64, Error> {
            harness_spec::Spec::embedded()
                .tool("web_fetch")
                .and_then(|t| t.variables.get(name))
                .and_then(|v| v.value_for(project))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| Error::Spec(name.to_owned()))
        };
        let megabytes = var("max_megabytes")?;
        Ok(Limits {
            max_bytes: usize::try_from(megabytes.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX),
            timeout: Duration::from_secs(var("timeout_seconds")?),
            max_redirects: usize::try_from(var("max_redirects")?).unwrap_or(usize::MAX),
        })
    }
}

/// Which addresses a fetch may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Any: the request is made from the person's own machine (the CLI).
    Any,
    /// Public addresses only: a server fetching for its users refuses its own network.
    Public,
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
pub enum Kind {
    /// A page to lay out.
    Html,
    /// Text as it is.
    Text,
    /// Not text (an image, an archive): refused.
    Other,
}

/// The width HTML is laid out to (long enough that prose is rarely wrapped).
const WIDTH: usize = 200;

/// The `web_fetch` tool of one project: its limits, its reach, its HTTP client.
#[derive(Debug, Clone)]
pub struct WebFetch {
    client: reqwest::Client,
    limits: Limits,
    reach: Reach,
}

impl WebFetch {
    /// The tool with the spec's limits for `project`.
    pub fn new(project: Project, reach: Reach) -> Result<WebFetch, Error> {
        WebFetch::with_limits(Limits::for_project(project)?, reach)
    }

    /// The tool with the given limits.
    pub fn with_limits(limits: Limits, reach: Reach) -> Result<WebFetch, Error> {
        // reqwest is built without a crypto provider of its own: ring's, as harness-model
        // installs it (an already installed provider is kept).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let max = limits.max_redirects;
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > max {
                return attempt.error(TooManyRedirects);
            }
            if reach == Reach::Public
                && let Some(ip) = literal_ip(attempt.url())
                && !is_public(ip)
            {
                let hop = attempt.url().to_string();
                return attempt.error(NotPublicHop(hop));
            }
            attempt.follow()
        });
        let mut builder = reqwest::Client::builder()
            .timeout(limits.timeout)
            .connect_timeout(limits.timeout.min(Duration::from_secs(10)))
            .redirect(policy)
            .user_agent(concat!("llembas/", env!("CARGO_PKG_VERSION")));
        if reach == Reach::Public {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        let client = builder.build().map_err(|e| Error::Client(e.to_string()))?;
        Ok(WebFetch {
            client,
            limits,
            reach,
        })
    }

    /// The limits it keeps.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Runs a `web_fetch` call: the text to answer, or the error to answer.
    pub async fn fetch(&self, args: &Value, cancel: &CancellationToken) -> Result<String, Error> {
        let raw = args
            .get("url")
            .and_then(Value::as_str)
            .ok_or(Error::MissingUrl)?;
        let format = match args.get("format").and_then(Value::as_str) {
            None | Some("markdown") => Format::Markdown,
            Some("text") => Format::Text,
            Some("html") => Format::Html,
            Some(other) => return Err(Error::Format(other.to_owned())),
        };
        let url = reqwest::Url::parse(raw.trim()).map_err(|e| Error::NotUrl {
            raw: raw.to_owned(),
            why: e.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::Scheme(url.to_string()));
        }
        if self.reach == Reach::Public
            && let Some(ip) = literal_ip(&url)
            && !is_public(ip)
        {
            return Err(Error::NotPublic(url.to_string()));
        }
        tokio::select! {
            r = self.get(&url, format) => r,
            () = cancel.cancelled() => Err(Error::Cancelled),
        }
    }

    async fn get(&self, url: &reqwest::Url, format: Format) -> Result<String, Error> {
        let response = self
            .client
            .get(url.clone())
            .header(
                reqwest::header::ACCEPT,
                "text/html,application/xhtml+xml,text/*;q=0.9,*/*;q=0.5",
            )
            .send()
            .await
            .map_err(|e| self.describe(url, &e))?;
        let status = response.status();
        let last = response.url().clone();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let too_large = || Error::TooLarge {
            url: last.to_string(),
            limit: self.limits.max_bytes,
        };
        if let Some(len) = response.content_length()
            && len > self.limits.max_bytes as u64
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(|e| self.describe(&last, &e))?;
            if body.len() + piece.len() > self.limits.max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&piece);
        }
        let kind = kind_of(&content_type, &body);
        if !status.is_success() {
            let said = String::from_utf8_lossy(&body[..body.len().min(300)])
                .trim()
                .to_owned();
            return Err(Error::Status {
                url: last.to_string(),
                status: status.as_u16(),
                said: if said.is_empty() || kind == Kind::Other {
                    String::new()
                } else {
                    format!(": {said}")
                },
            });
        }
        let text = match kind {
            Kind::Html => convert(&body, format)?,
            Kind::Text => String::from_utf8_lossy(&body).into_owned(),
            Kind::Other => {
                return Err(Error::NotText {
                    url: last.to_string(),
                    content_type,
                });
            }
        };
        let moved = if last == *url {
            String::new()
        } else {
            format!("(redirected to {last})\n\n")
        };
        Ok(if text.trim().is_empty() {
            format!("{moved}({last} has no text)")
        } else {
            format!("{moved}{text}")
        })
    }

    fn describe(&self, url: &reqwest::Url, e: &reqwest::Error) -> Error {
        let mut causes = Vec::new();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            causes.push(s.to_string());
            source = s.source();
        }
        // Refused by the reach: a redirect's hop, or a name with no public address.
        if let Some(hop) = causes.iter().find_map(|c| c.strip_prefix(NOT_PUBLIC_AT)) {
            let shown = if hop.contains("://") {
                hop.to_owned()
            } else {
                url.to_string()
            };
            return Error::NotPublic(shown);
        }
        if e.is_timeout() {
            Error::Timeout {
                url: url.to_string(),
                seconds: self.limits.timeout.as_secs(),
            }
        } else if e.is_redirect() {
            Error::Redirects {
                url: url.to_string(),
                limit: self.limits.max_redirects,
            }
        } else {
            let mut why = e.to_string();
            for c in causes {
                why.push_str(": ");
                why.push_str(&c);
            }
            Error::Fetch {
                url: url.to_string(),
                why,
            }
        }
    }
}

/// What kind of body `content_type` (or, when it says nothing, the body's start) announces.
pub fn kind_of(content_type: &str, body: &[u8]) -> Kind {
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
pub fn convert(html: &[u8], format: Format) -> Result<String, Error> {
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
    .map_err(|e| Error::Html(e.to_string()))
}

/// Whether `ip` is an address of the public internet (not loopback, private, link-local,
/// shared, documentation, multicast, unspecified or reserved; an IPv4-mapped IPv6 address as
/// its IPv4 one).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, _, _] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
                || (a == 192 && b == 0) // IETF protocol assignments
                || (a == 198 && (b == 18 || b == 19)) // benchmarking
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
        }
    }
}

fn literal_ip(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

const NOT_PUBLIC_AT: &str = "not public: ";

#[derive(Debug)]
struct TooManyRedirects;

impl std::fmt::Display for TooManyRedirects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("too many redirects")
    }
}

impl std::error::Error for TooManyRedirects {}

#[derive(Debug)]
struct NotPublicHop(String);

impl std::fmt::Display for NotPublicHop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{NOT_PUBLIC_AT}{}", self.0)
    }
}

impl std::error::Error for NotPublicHop {}

/// A resolver that keeps only the public addresses a name resolves to (none: the fetch fails).
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = all.into_iter().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(
                    Box::new(NotPublicHop(host)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}
