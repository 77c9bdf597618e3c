//! `web_fetch` against a real HTTP server on loopback: formats, kinds, limits, redirects, errors,
//! and a server's reach (no address of its own network).

use std::time::Duration;

use harness_spec::Project;
use harness_web::{Error, Format, Kind, Limits, Reach, WebFetch, convert, is_public, kind_of};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

/// An answer: the status line, the headers, the body.
type Answer = (String, Vec<(String, String)>, Vec<u8>);

/// A loopback HTTP server answering each path as `route` says.
async fn serve(route: fn(&str) -> Answer) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                if path == "/slow" {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                let (status, headers, body) = route(&path);
                let mut reply = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
                for (k, v) in headers {
                    reply.push_str(&format!("{k}: {v}\r\n"));
                }
                reply.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
                let _ = conn.write_all(reply.as_bytes()).await;
                let _ = conn.write_all(&body).await;
            });
        }
    });
    base
}

fn route(path: &str) -> Answer {
    let h = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
    let ok = "200 OK".to_owned();
    match path {
        "/page" => (
            ok,
            h("content-type", "text/html; charset=utf-8"),
            b"<html><body><h1>Title</h1><p>Some <strong>bold</strong>.</p></body></html>".to_vec(),
        ),
        "/plain" => (
            ok,
            h("content-type", "text/plain"),
            b"just words\n".to_vec(),
        ),
        "/image" => (ok, h("content-type", "image/png"), b"\x89PNG\r\n".to_vec()),
        "/big" => (ok, h("content-type", "text/plain"), vec![b'x'; 2048]),
        "/missing" => (
            "404 Not Found".into(),
            h("content-type", "text/plain"),
            b"no such page".to_vec(),
        ),
        "/empty" => (
            ok,
            h("content-type", "text/html"),
            b"<html></html>".to_vec(),
        ),
        "/hop" => ("302 Found".into(), h("location", "/plain"), Vec::new()),
        p if p.starts_with("/loop") => ("302 Found".into(), h("location", "/loop"), Vec::new()),
        _ => ("500 Internal Server Error".into(), Vec::new(), Vec::new()),
    }
}

fn small() -> Limits {
    Limits {
        max_bytes: 1024,
        timeout: Duration::from_secs(2),
        max_redirects: 3,
    }
}

async fn get(web: &WebFetch, url: &str) -> Result<String, Error> {
    web.fetch(&json!({"url": url}), &CancellationToken::new())
        .await
}

#[test]
fn the_limits_are_the_specs() {
    for project in [Project::Cli, Project::Llembas] {
        let l = Limits::for_project(project).unwrap();
        assert_eq!(l.max_bytes, 5 * 1024 * 1024);
        assert_eq!(l.timeout, Duration::from_secs(30));
        assert_eq!(l.max_redirects, 10);
    }
}

#[tokio::test]
async fn pages_text_and_what_is_refused() {
    let base = serve(route).await;
    let web = WebFetch::with_limits(small(), Reach::Any).unwrap();

    let page = get(&web, &format!("{base}/page")).await.unwrap();
    assert!(
        page.contains("# Title") && page.contains("**bold**"),
        "{page}"
    );
    let text = web
        .fetch(
            &json!({"url": format!("{base}/page"), "format": "text"}),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(text.contains("Title") && !text.contains("**"), "{text}");
    assert_eq!(
        get(&web, &format!("{base}/plain")).await.unwrap(),
        "just words\n"
    );
    assert_eq!(
        get(&web, &format!("{base}/hop")).await.unwrap(),
        format!("(redirected to {base}/plain)\n\njust words\n")
    );
    assert_eq!(
        get(&web, &format!("{base}/empty")).await.unwrap(),
        format!("({base}/empty has no text)")
    );

    let cases = [
        (
            format!("{base}/image"),
            format!("web_fetch: {base}/image is image/png, not text; it is not shown"),
        ),
        (
            format!("{base}/big"),
            format!("web_fetch: {base}/big is over the limit of 1024 bytes; it is not shown"),
        ),
        (
            format!("{base}/missing"),
            format!("web_fetch: {base}/missing answered HTTP 404: no such page"),
        ),
        (
            format!("{base}/loop"),
            format!("web_fetch: {base}/loop redirects more than 3 times"),
        ),
        (
            format!("{base}/slow"),
            format!("web_fetch: {base}/slow did not answer within 2 seconds"),
        ),
        (
            "ftp://example.com/x".into(),
            "web_fetch: ftp://example.com/x is not an http:// or https:// address".into(),
        ),
    ];
    for (url, said) in cases {
        assert_eq!(
            get(&web, &url).await.unwrap_err().to_string(),
            said,
            "{url}"
        );
    }
    let bad = web
        .fetch(
            &json!({"url": "x", "format": "pdf"}),
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        bad.to_string(),
        "web_fetch: format \"pdf\" is not one of markdown, text, html"
    );
    let none = web
        .fetch(&json!({}), &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(none.to_string(), "web_fetch: the argument `url` is missing");
}

#[tokio::test]
async fn a_server_reaches_no_address_of_its_own_network() {
    let base = serve(route).await;
    let web = WebFetch::with_limits(small(), Reach::Public).unwrap();
    let direct = format!("{base}/plain");
    assert_eq!(
        get(&web, &direct).await.unwrap_err(),
        Error::NotPublic(direct.clone())
    );
    // A name that resolves to loopback only is refused as well.
    let port = base.rsplit(':').next().unwrap();
    let named = format!("http://localhost:{port}/plain");
    assert_eq!(
        get(&web, &named).await.unwrap_err().to_string(),
        format!("web_fetch: {named} is on the server's own network; it is not fetched")
    );
    // The machine's own fetch reaches it.
    let any = WebFetch::with_limits(small(), Reach::Any).unwrap();
    assert_eq!(get(&any, &direct).await.unwrap(), "just words\n");

    for (ip, public) in [
        ("127.0.0.1", false),
        ("10.1.2.3", false),
        ("172.16.0.1", false),
        ("192.168.1.1", false),
        ("169.254.169.254", false),
        ("100.64.0.1", false),
        ("0.0.0.0", false),
        ("::1", false),
        ("fd00::1", false),
        ("fe80::1", false),
        ("::ffff:127.0.0.1", false),
        ("93.184.215.14", true),
        ("2606:4700::1111", true),
    ] {
        assert_eq!(is_public(ip.parse().unwrap()), public, "{ip}");
    }
}

#[tokio::test]
async fn a_cancelled_fetch_says_so() {
    let base = serve(route).await;
    let web = WebFetch::with_limits(small(), Reach::Any).unwrap();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.cancel();
    });
    let e = web
        .fetch(&json!({"url": format!("{base}/slow")}), &cancel)
        .await
        .unwrap_err();
    assert_eq!(e, Error::Cancelled);
}

#[test]
fn html_becomes_markdown_or_text_and_kinds_are_told_apart() {
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

    assert_eq!(kind_of("text/html; charset=utf-8", b""), Kind::Html);
    assert_eq!(kind_of("application/json", b"{}"), Kind::Text);
    assert_eq!(kind_of("application/vnd.api+json", b"{}"), Kind::Text);
    assert_eq!(kind_of("image/png", b"\x89PNG"), Kind::Other);
    assert_eq!(kind_of("", b"<!DOCTYPE html><p>x"), Kind::Html);
    assert_eq!(kind_of("", b"plain words"), Kind::Text);
    assert_eq!(kind_of("", b"\x00\x01\x02"), Kind::Other);
}
