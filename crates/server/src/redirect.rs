//! Where the sign-in page goes once signed in: the `next` it was given only when that is a path
//! of this server, else the chat list. A browser reads `/\host`, `/<TAB>/host` and `//host` as
//! another site (it drops tabs and newlines, and takes `\` for `/`), so anything that could
//! become one is refused rather than repaired.

/// Where a sign-in goes when `next` is missing or refused.
pub const HOME: &str = "/chats";

/// `next` when it is a same-origin path — one leading `/`, not followed by `/` or `\`, and no
/// `\` or control character anywhere, as given or once percent-decoded — else [`HOME`].
pub fn after_sign_in(next: Option<&str>) -> String {
    match next {
        Some(n) if same_origin_path(n) => n.to_owned(),
        _ => HOME.to_owned(),
    }
}

/// Whether `next` is a path of this server that no browser reads as another site.
pub fn same_origin_path(next: &str) -> bool {
    let decoded = percent_encoding::percent_decode_str(next).decode_utf8_lossy();
    [next, decoded.as_ref()].iter().all(|s| plain_path(s)) && stays_here(next)
}

/// One leading `/`, the next character neither `/` nor `\`, no `\` nor control character.
fn plain_path(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next() == Some('/')
        && !matches!(chars.next(), Some('/' | '\\'))
        && !s.chars().any(|c| c == '\\' || c.is_control())
}

/// Resolved the way a browser does against a page of this server, `next` stays on its origin.
fn stays_here(next: &str) -> bool {
    let Ok(base) = url::Url::parse("http://llembas.invalid/login") else {
        return false;
    };
    base.join(next)
        .is_ok_and(|u| u.origin() == base.origin() && u.username().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_same_origin_paths_pass() {
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "/%5Cevil.example",
            "/%5cevil.example",
            "/%09/evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/%0A/evil.example",
            "/%2F/evil.example",
            "/%2f%2fevil.example",
            "https://evil.example",
            "http:evil.example",
            "javascript:alert(1)",
            "evil.example",
            "",
            " /chats",
            "/chats\\..\\",
            "\\\\evil.example",
        ] {
            assert_eq!(after_sign_in(Some(bad)), HOME, "{bad:?}");
        }
        for good in [
            "/chats",
            "/chats/abc?x=1#y",
            "/files",
            "/settings",
            "/a%20b",
        ] {
            assert_eq!(after_sign_in(Some(good)), good, "{good:?}");
        }
        assert_eq!(after_sign_in(None), HOME);
    }
}
