//! Spelling a command plainly: the floor's normalisation steps, in the order `hardline.json`
//! lists them.

use std::sync::LazyLock;

use regex::Regex;
use unicode_normalization::UnicodeNormalization;

static ANSI: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\x1b\[[0-?]*[ -/]*[@-~]",
        r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?",
        r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?",
        r"|\x1b[ -/]+[0-~]",
        r"|\x1b[0-~]",
        r"|\u{9b}[0-?]*[ -/]*[@-~]",
        r"|[\u{80}-\u{9f}]"
    ))
    .ok()
});
static IFS: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\$\{IFS[^}]*\}|\$IFS\b|\$IFS").ok());
static LITERAL_SUBST: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"\$\(\s*(?:echo|printf)\s+(?:'([^'\s]*)'|"([^"\s$`]*)"|([A-Za-z0-9_./:-]+))\s*\)"#,
        r#"|`\s*(?:echo|printf)\s+(?:'([^'\s]*)'|"([^"\s$`]*)"|([A-Za-z0-9_./:-]+))\s*`"#,
        r"|\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=]([A-Za-z0-9_./-]+)\}"
    ))
    .ok()
});

/// Invisible format characters a shell keeps but a reader does not see.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{034f}' | '\u{061c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{feff}'
        | '\u{ffa0}' | '\u{fff0}'..='\u{fff8}' | '\u{e0000}'..='\u{e007f}')
}

/// Applies one named step. Unknown names are reported by `known`.
pub(crate) fn apply(step: &str, text: &str) -> String {
    match step {
        "strip_ansi" => match ANSI.as_ref() {
            Some(re) => re.replace_all(text, "").into_owned(),
            None => text.to_owned(),
        },
        "strip_nul" => text.replace('\0', ""),
        "strip_invisible" => text.chars().filter(|c| !invisible(*c)).collect(),
        "nfkc" => text.nfkc().collect(),
        "join_continuations" => text.replace("\\\r\n", "").replace("\\\n", ""),
        "decode_ansi_c" => decode_ansi_c_text(text),
        "drop_backslash_escapes" => drop_escapes(text),
        "drop_empty_quotes" => drop_empty_quotes(text),
        "ifs_to_space" => match IFS.as_ref() {
            Some(re) => re.replace_all(text, " ").into_owned(),
            None => text.to_owned(),
        },
        "literal_substitutions" => match LITERAL_SUBST.as_ref() {
            Some(re) => re
                .replace_all(text, |c: &regex::Captures<'_>| {
                    (1..=7)
                        .find_map(|i| c.get(i))
                        .map(|m| m.as_str().to_owned())
                        .unwrap_or_default()
                })
                .into_owned(),
            None => text.to_owned(),
        },
        _ => text.to_owned(),
    }
}

/// Whether a step name is one this engine implements.
pub(crate) fn known(step: &str) -> bool {
    matches!(
        step,
        "strip_ansi"
            | "strip_nul"
            | "strip_invisible"
            | "nfkc"
            | "join_continuations"
            | "decode_ansi_c"
            | "drop_backslash_escapes"
            | "drop_empty_quotes"
            | "ifs_to_space"
            | "literal_substitutions"
    )
}

#[derive(Clone, Copy, PartialEq)]
enum Q {
    None,
    Single,
    Double,
}

fn drop_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut q = Q::None;
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        match (q, c) {
            (Q::None, '\\') => match it.next() {
                Some('\n') => out.push_str("\\\n"),
                Some(n) => out.push(n),
                None => out.push('\\'),
            },
            (Q::Double, '\\') => {
                out.push(c);
                if let Some(n) = it.next() {
                    out.push(n);
                }
            }
            (Q::None, '\'') => {
                q = Q::Single;
                out.push(c)
            }
            (Q::Single, '\'') => {
                q = Q::None;
                out.push(c)
            }
            (Q::None, '"') => {
                q = Q::Double;
                out.push(c)
            }
            (Q::Double, '"') => {
                q = Q::None;
                out.push(c)
            }
            _ => out.push(c),
        }
    }
    out
}

fn drop_empty_quotes(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut q = Q::None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match q {
            Q::None => {
                if (c == '\'' || c == '"')
                    && chars.get(i + 1) == Some(&c)
                    && !(i > 0 && chars[i - 1] == '$')
                {
                    i += 2;
                    continue;
                }
                if c == '\\' {
                    out.push(c);
                    if let Some(n) = chars.get(i + 1) {
                        out.push(*n);
                    }
                    i += 2;
                    continue;
                }
                if c == '\'' {
                    q = Q::Single;
                } else if c == '"' {
                    q = Q::Double;
                }
                out.push(c);
            }
            Q::Single => {
                if c == '\'' {
                    q = Q::None;
                }
                out.push(c);
            }
            Q::Double => {
                if c == '\\' {
                    out.push(c);
                    if let Some(n) = chars.get(i + 1) {
                        out.push(*n);
                    }
                    i += 2;
                    continue;
                }
                if c == '"' {
                    q = Q::None;
                }
                out.push(c);
            }
        }
        i += 1;
    }
    out
}

fn decode_ansi_c_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut q = Q::None;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if q == Q::None && rest.starts_with("$'") {
            let body = &rest[2..];
            if let Some(end) = find_ansi_c_end(body) {
                let mut decoded = decode_ansi_c(&body[..end]);
                // bash ends the string at a NUL
                if let Some(nul) = decoded.find('\0') {
                    decoded.truncate(nul);
                }
                out.push('\'');
                out.push_str(&decoded.replace('\'', "'\\''"));
                out.push('\'');
                rest = &body[end + 1..];
                continue;
            }
        }
        match (q, c) {
            (Q::None, '\\') | (Q::Double, '\\') => {
                out.push(c);
                rest = &rest[1..];
                if let Some(n) = rest.chars().next() {
                    out.push(n);
                    rest = &rest[n.len_utf8()..];
                }
                continue;
            }
            (Q::None, '\'') => q = Q::Single,
            (Q::Single, '\'') => q = Q::None,
            (Q::None, '"') => q = Q::Double,
            (Q::Double, '"') => q = Q::None,
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn find_ansi_c_end(body: &str) -> Option<usize> {
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'\'' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Decodes the inside of `$'...'` as bash does.
pub(crate) fn decode_ansi_c(body: &str) -> String {
    let chars: Vec<char> = body.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let hex = |s: &[char], max: usize| -> (u32, usize) {
        let mut v = 0u32;
        let mut n = 0;
        while n < max && n < s.len() && s[n].is_ascii_hexdigit() {
            v = v * 16 + s[n].to_digit(16).unwrap_or(0);
            n += 1;
        }
        (v, n)
    };
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' || i + 1 >= chars.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let e = chars[i + 1];
        i += 2;
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'e' | 'E' => out.push('\u{1b}'),
            'f' => out.push('\u{c}'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            '?' => out.push('?'),
            'x' => {
                let (v, n) = hex(&chars[i..], 2);
                if n == 0 {
                    out.push_str("\\x");
                } else {
                    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                    i += n;
                }
            }
            'u' | 'U' => {
                let (v, n) = hex(&chars[i..], if e == 'u' { 4 } else { 8 });
                if n == 0 {
                    out.push('\\');
                    out.push(e);
                } else {
                    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                    i += n;
                }
            }
            'c' => {
                if let Some(n) = chars.get(i) {
                    out.push(char::from_u32((*n as u32) & 0x1f).unwrap_or('\u{fffd}'));
                    i += 1;
                }
            }
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                let mut n = 0;
                while n < 2 && i < chars.len() && chars[i].is_digit(8) {
                    v = v * 8 + chars[i].to_digit(8).unwrap_or(0);
                    i += 1;
                    n += 1;
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// Spells a command plainly: every step in order.
pub(crate) fn plain(steps: &[crate::data::Step], text: &str) -> String {
    let mut s = text.to_owned();
    for step in steps {
        s = apply(&step.step, &s);
    }
    s
}
