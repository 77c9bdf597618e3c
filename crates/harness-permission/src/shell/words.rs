//! A word as the shell expands it: quoting, `~`, variables known so far, substitutions, braces.

use tree_sitter::Node;

use super::programs::echo_output;
use super::wrappers::listing_words;
use super::{Ctx, Output, State, Word};
use crate::data::Data;
use crate::normalise::decode_ansi_c;

impl<'a> Ctx<'a> {
    /// Expands one word node into the words it becomes.
    pub(super) fn word(&mut self, node: Node<'_>, src: &[u8], st: &mut State) -> Vec<Word> {
        let raw = text(node, src);
        if raw.contains('{') && raw.contains('}') && matches!(node.kind(), "word" | "concatenation")
        {
            let plain = !raw.contains(['\'', '"', '$', '`']);
            match brace_expand(raw, 64) {
                Some(alts) if plain => {
                    let mut out = Vec::new();
                    for a in alts {
                        let mut t = unescape_word(&a);
                        if t == "~" || t.starts_with("~/") {
                            t = format!("{}{}", self.home, &t[1..]);
                        }
                        out.push(Word {
                            glob: has_glob(&a),
                            text: t,
                            ..Word::default()
                        });
                    }
                    return out;
                }
                Some(_) => {
                    let mut frags = Vec::new();
                    self.frags(node, src, st, false, &mut frags);
                    let mut ws = assemble(frags);
                    for w in &mut ws {
                        w.glob = true;
                    }
                    return ws;
                }
                None => {}
            }
        }
        let mut frags = Vec::new();
        self.frags(node, src, st, false, &mut frags);
        assemble(frags)
    }

    pub(super) fn frags(
        &mut self,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        quoted: bool,
        out: &mut Vec<Frag>,
    ) {
        match node.kind() {
            "word" | "number" => {
                let raw = text(node, src);
                let mut t = unescape_word(raw);
                if !quoted && out.is_empty() && (t == "~" || t.starts_with("~/")) {
                    t = format!("{}{}", self.home, &t[1..]);
                }
                out.push(Frag {
                    glob: !quoted && has_glob(raw),
                    text: t,
                    ..Frag::default()
                });
            }
            "raw_string" => {
                let raw = text(node, src);
                let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or("");
                out.push(Frag {
                    text: inner.to_owned(),
                    quoted: true,
                    ..Frag::default()
                });
            }
            "ansi_c_string" => {
                let raw = text(node, src);
                let inner = raw.get(2..raw.len().saturating_sub(1)).unwrap_or("");
                // a NUL is kept here and ends the word (`assemble`): the argument as execve gets
                // it; bash's own reading, the string ending there, is the plain spelling's
                out.push(Frag {
                    text: decode_ansi_c(inner),
                    quoted: true,
                    ..Frag::default()
                });
            }
            "string" | "translated_string" => self.string_frags(node, src, st, out),
            "concatenation" => {
                let mut c = node.walk();
                let kids: Vec<Node<'_>> = node.named_children(&mut c).collect();
                let before = out.len();
                for k in kids {
                    let mut sub = Vec::new();
                    self.frags(k, src, st, quoted, &mut sub);
                    if out.len() > before && k.kind() == "word" {
                        // a `~` only expands at the start of the whole word
                        if let Some(f) = sub.first_mut()
                            && f.text.starts_with(self.home)
                            && text(k, src).starts_with('~')
                        {
                            f.text = unescape_word(text(k, src));
                        }
                    }
                    out.extend(sub);
                }
            }
            "simple_expansion" | "expansion" => {
                let raw = text(node, src).to_owned();
                self.expansion(&raw, node, src, st, quoted, out);
            }
            "command_substitution" => self.substitution_frags(node, src, st, quoted, out),
            "process_substitution" => {
                let before = self.out.parts.len();
                let mut inner = st.clone();
                inner.depth += 1;
                self.children(node, src, &mut inner);
                let fetched = self.out.parts[before..]
                    .iter()
                    .any(|p| self.data.streams.fetchers.contains(&p.program));
                out.push(Frag {
                    text: "/dev/fd/63".into(),
                    dynamic: true,
                    quoted,
                    fetched,
                    glob: false,
                    transform: false,
                    split: false,
                });
            }
            "arithmetic_expansion" | "brace_expression" => {
                let mut inner = st.clone();
                self.children(node, src, &mut inner);
                out.push(Frag {
                    text: text(node, src).to_owned(),
                    dynamic: node.kind() == "arithmetic_expansion",
                    quoted,
                    ..Frag::default()
                });
            }
            _ => {
                let mut inner = st.clone();
                self.children(node, src, &mut inner);
                out.push(Frag {
                    text: text(node, src).to_owned(),
                    quoted,
                    ..Frag::default()
                });
            }
        }
    }

    /// A double-quoted string's pieces (`"a $x $(cmd)"`), each quoted.
    fn string_frags(&mut self, node: Node<'_>, src: &[u8], st: &mut State, out: &mut Vec<Frag>) {
        let start = node.start_byte();
        let end = node.end_byte();
        let open = if node.kind() == "translated_string" {
            2
        } else {
            1
        };
        let mut pos = start + open;
        out.push(Frag {
            text: String::new(),
            quoted: true,
            ..Frag::default()
        });
        let mut c = node.walk();
        let kids: Vec<Node<'_>> = node.named_children(&mut c).collect();
        for k in kids {
            if k.kind() == "string" {
                self.frags(k, src, st, true, out);
                pos = k.end_byte();
                continue;
            }
            if k.start_byte() > pos {
                out.push(Frag {
                    text: unescape_dq(slice(src, pos, k.start_byte())),
                    quoted: true,
                    ..Frag::default()
                });
            }
            if k.kind() == "string_content" {
                out.push(Frag {
                    text: unescape_dq(text(k, src)),
                    quoted: true,
                    ..Frag::default()
                });
            } else {
                self.frags(k, src, st, true, out);
            }
            pos = k.end_byte();
        }
        if end > pos + 1 {
            out.push(Frag {
                text: unescape_dq(slice(src, pos, end - 1)),
                quoted: true,
                ..Frag::default()
            });
        }
    }

    /// A command substitution's value: a listing's paths (`$(find /)`), an echo's literal, or
    /// text known only when it runs (a download, if a fetcher wrote it).
    fn substitution_frags(
        &mut self,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        quoted: bool,
        out: &mut Vec<Frag>,
    ) {
        let before = self.out.parts.len();
        let mut inner = st.clone();
        inner.depth += 1;
        let output = self.substitution_output(node, src, &mut inner);
        if let Output::Listing(paths) = output
            && !quoted
        {
            // `rm -rf $(find /)`: the listed paths
            let words = listing_words(&paths);
            out.push(Frag {
                text: words
                    .iter()
                    .map(|w| w.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                split: true,
                dynamic: true,
                ..Frag::default()
            });
            return;
        }
        let new = &self.out.parts[before..];
        let fetched = new
            .iter()
            .any(|p| self.data.streams.fetchers.contains(&p.program));
        let literal = if new.len() == 1
            && (new[0].program == "echo" || new[0].program == "printf")
            && !new[0].dynamic
        {
            Some(
                echo_output(&new[0].program, new[0].args())
                    .trim_end_matches('\n')
                    .to_owned(),
            )
        } else {
            None
        };
        match literal {
            Some(t) => out.push(Frag {
                text: t,
                split: !quoted,
                dynamic: true,
                quoted,
                fetched,
                glob: false,
                transform: false,
            }),
            None => out.push(Frag {
                text: text(node, src).to_owned(),
                dynamic: true,
                quoted,
                fetched,
                glob: false,
                transform: false,
                split: false,
            }),
        }
    }

    pub(super) fn expansion(
        &mut self,
        raw: &str,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        quoted: bool,
        out: &mut Vec<Frag>,
    ) {
        let data: &'a Data = self.data;
        let first = out.len();
        let before = self.out.parts.len();
        self.expansion_value(raw, node, src, st, quoted, out);
        if !raw.starts_with("${") {
            return;
        }
        if data.expansions.runs.is_match(raw) {
            // `${x@P}`, `${!x}`: the value is run as shell code
            self.flag_part(raw, st, "expansion_runs");
        } else if data.expansions.unknown.is_match(raw) {
            for f in &mut out[first..] {
                f.transform = true;
                f.dynamic = true;
            }
        }
        if self.out.parts.len() == before
            && let Some(at) = raw.find("$(").or_else(|| raw.find('`'))
        {
            // an operand kept as text (`${x#$(cmd)}`) still runs its substitution
            let cmd = format!(": {}", raw[at..].trim_end_matches('}'));
            if self.extract(&cmd, st) {
                self.flag_part(raw, st, "uncertain");
            }
        }
    }

    pub(super) fn expansion_value(
        &mut self,
        raw: &str,
        node: Node<'_>,
        src: &[u8],
        st: &mut State,
        quoted: bool,
        out: &mut Vec<Frag>,
    ) {
        // walk substitutions nested in ${x:-$(...)}
        {
            let mut inner = st.clone();
            self.children(node, src, &mut inner);
        }
        let body = if let Some(b) = raw.strip_prefix("${").and_then(|b| b.strip_suffix('}')) {
            b
        } else {
            raw.strip_prefix('$').unwrap_or(raw)
        };
        let name_len = body
            .char_indices()
            .find(|(_, c)| !c.is_ascii_alphanumeric() && *c != '_')
            .map(|(i, _)| i)
            .unwrap_or(body.len());
        let (name, rest) = if name_len == 0 {
            body.split_at(body.len().min(1))
        } else {
            body.split_at(name_len)
        };
        if name == "IFS" {
            out.push(Frag {
                text: " ".into(),
                split: !quoted,
                dynamic: false,
                quoted,
                fetched: false,
                glob: false,
                transform: false,
            });
            return;
        }
        let known: Option<String> = match name {
            "HOME" => Some(self.home.to_owned()),
            "PWD" => Some(st.cwd.clone()),
            _ => st.vars.get(name).cloned(),
        };
        let alt: Option<String> = if let Some(d) = rest
            .strip_prefix(":-")
            .or_else(|| rest.strip_prefix('-'))
            .or_else(|| rest.strip_prefix(":="))
            .or_else(|| rest.strip_prefix('='))
        {
            Some(d.to_owned())
        } else if let Some(r) = rest.strip_prefix("//").or_else(|| rest.strip_prefix('/')) {
            r.split_once('/').map(|(_, rep)| rep.to_owned())
        } else {
            None
        };
        let stable = matches!(name, "HOME" | "PWD");
        if let Some(sub) = rest
            .strip_prefix(':')
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        {
            // ${x:offset:length}
            let mut it = sub.splitn(2, ':');
            let off: Option<usize> = it.next().and_then(|o| o.trim().parse().ok());
            let len: Option<Option<usize>> = match it.next() {
                Some(l) => l.trim().parse().ok().map(Some),
                None => Some(None),
            };
            if let (Some(v), Some(off), Some(len)) = (known.as_ref(), off, len) {
                let cut: String = v
                    .chars()
                    .skip(off)
                    .take(len.unwrap_or(usize::MAX))
                    .collect();
                out.push(Frag {
                    text: cut,
                    split: !quoted,
                    dynamic: !stable,
                    quoted,
                    fetched: false,
                    glob: false,
                    transform: false,
                });
            } else {
                out.push(Frag {
                    text: raw.to_owned(),
                    split: false,
                    dynamic: true,
                    quoted,
                    fetched: false,
                    glob: false,
                    transform: false,
                });
            }
            return;
        }
        if alt.is_none() && !rest.is_empty() {
            out.push(Frag {
                text: raw.to_owned(),
                split: false,
                dynamic: true,
                quoted,
                fetched: false,
                glob: false,
                transform: false,
            });
            return;
        }
        let value = known.filter(|v| !v.is_empty() || alt.is_none()).or(alt);
        match value {
            Some(v) => out.push(Frag {
                text: v,
                split: !quoted,
                dynamic: !stable,
                quoted,
                fetched: false,
                glob: false,
                transform: false,
            }),
            None => out.push(Frag {
                text: raw.to_owned(),
                split: false,
                dynamic: true,
                quoted,
                fetched: false,
                glob: false,
                transform: false,
            }),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct Frag {
    text: String,
    split: bool,
    dynamic: bool,
    quoted: bool,
    fetched: bool,
    glob: bool,
    transform: bool,
}

/// Whether an unquoted word's source holds a pattern the shell expands (`*`, `?`, `[...]`).
pub(super) fn has_glob(raw: &str) -> bool {
    let b = raw.as_bytes();
    let mut i = 0;
    let mut open = false;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'*' | b'?' => return true,
            b'[' => open = true,
            b']' if open => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// Whether a path text holds a shell pattern character.
pub(crate) fn has_pattern(t: &str) -> bool {
    has_glob(t)
}

/// Bash's brace expansion of an unquoted word (`{a,b}`, `x{1..3}`), at most `cap` words;
/// `None` when there is nothing to expand or it cannot be expanded with certainty.
pub(super) fn brace_expand(raw: &str, cap: usize) -> Option<Vec<String>> {
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'{' => {
                let mut depth = 0;
                let mut commas = Vec::new();
                let mut j = i;
                let mut end = None;
                while j < b.len() {
                    match b[j] {
                        b'\\' => j += 1,
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = Some(j);
                                break;
                            }
                        }
                        b',' if depth == 1 => commas.push(j),
                        _ => {}
                    }
                    j += 1;
                }
                let end = end?;
                let (pre, body, post) = (&raw[..i], &raw[i + 1..end], &raw[end + 1..]);
                let alts: Vec<String> = if !commas.is_empty() {
                    let mut v = Vec::new();
                    let mut start = i + 1;
                    for c in commas.iter().copied().chain(std::iter::once(end)) {
                        v.push(raw[start..c].to_owned());
                        start = c + 1;
                    }
                    v
                } else if let Some((a, z)) = body.split_once("..") {
                    let (a, z) = (a.parse::<i64>().ok()?, z.parse::<i64>().ok()?);
                    if (z - a).unsigned_abs() as usize > cap {
                        return None;
                    }
                    let v: Vec<i64> = if a <= z {
                        (a..=z).collect()
                    } else {
                        (z..=a).rev().collect()
                    };
                    v.into_iter().map(|n| n.to_string()).collect()
                } else {
                    i = end + 1;
                    continue;
                };
                let mut out = Vec::new();
                for alt in alts {
                    let word = format!("{pre}{alt}{post}");
                    match brace_expand(&word, cap) {
                        Some(more) => out.extend(more),
                        None => out.push(word),
                    }
                    if out.len() > cap {
                        return None;
                    }
                }
                return Some(out);
            }
            _ => i += 1,
        }
    }
    None
}

pub(super) fn assemble(frags: Vec<Frag>) -> Vec<Word> {
    let mut words = Vec::new();
    let mut cur = Word::default();
    let mut has = false;
    for f in frags {
        if f.split {
            let mut first = true;
            let pieces: Vec<&str> = f.text.split(|c: char| c.is_ascii_whitespace()).collect();
            for p in pieces {
                if !first && has {
                    words.push(std::mem::take(&mut cur));
                    has = false;
                }
                first = false;
                if !p.is_empty() {
                    cur.text.push_str(p);
                    cur.dynamic |= f.dynamic;
                    cur.fetched |= f.fetched;
                    cur.transform |= f.transform;
                    cur.glob |= f.dynamic && has_glob(p);
                    has = true;
                }
            }
            if f.text.is_empty() && f.dynamic {
                cur.dynamic = true;
                cur.transform |= f.transform;
            }
        } else {
            cur.text.push_str(&f.text);
            cur.dynamic |= f.dynamic;
            cur.quoted |= f.quoted;
            cur.fetched |= f.fetched;
            cur.glob |= f.glob;
            cur.transform |= f.transform;
            has = has || f.quoted || !f.text.is_empty() || f.dynamic;
        }
    }
    if has {
        words.push(cur);
    }
    // an argument ends at its first NUL, as execve passes it
    for w in &mut words {
        if let Some(nul) = w.text.find('\0') {
            w.text.truncate(nul);
        }
    }
    words
}

pub(super) fn join_words(ws: Vec<Word>) -> Word {
    let mut w = Word::default();
    for (i, x) in ws.into_iter().enumerate() {
        if i > 0 {
            w.text.push(' ');
        }
        w.text.push_str(&x.text);
        w.dynamic |= x.dynamic;
        w.quoted |= x.quoted;
        w.fetched |= x.fetched;
        w.transform |= x.transform;
    }
    w
}

pub(super) fn text<'s>(node: Node<'_>, src: &'s [u8]) -> &'s str {
    std::str::from_utf8(&src[node.start_byte()..node.end_byte()]).unwrap_or("")
}

pub(super) fn slice(src: &[u8], a: usize, b: usize) -> &str {
    src.get(a..b)
        .and_then(|s| std::str::from_utf8(s).ok())
        .unwrap_or("")
}

pub(super) fn unescape_word(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('\n') | None => {}
                Some(n) => out.push(n),
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn unescape_dq(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.peek() {
                Some('\n') => {
                    it.next();
                }
                Some(&n) if matches!(n, '$' | '`' | '"' | '\\') => {
                    out.push(n);
                    it.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}
