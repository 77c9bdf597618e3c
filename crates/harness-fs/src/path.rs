//! View paths: absolute, normalised, `/`-separated; and the portable-name rule.

use std::cmp::Ordering;
use std::fmt;

/// An absolute path in the view: starts with `/`, no empty, `.` or `..` segment, no trailing
/// `/` (except the root itself).
#[derive(Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct VPath(String);

impl VPath {
    /// The root, `/`.
    pub fn root() -> Self {
        VPath("/".to_string())
    }

    /// Resolves `input` lexically against `cwd` (harness-core's one resolver,
    /// [`harness_core::path::resolve`]): an absolute input starts at `/`, a relative one at
    /// `cwd`; `.` and empty segments drop, `..` goes up and stops at `/`.
    pub fn resolve(cwd: &VPath, input: &str) -> VPath {
        VPath(harness_core::path::resolve(cwd.as_str(), input))
    }

    /// Parses an absolute path (resolving `.`/`..` against `/`).
    pub fn parse(input: &str) -> VPath {
        VPath::resolve(&VPath::root(), input)
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is `/`.
    pub fn is_root(&self) -> bool {
        self.0 == "/"
    }

    /// The segments, outermost first (none for `/`).
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|s| !s.is_empty())
    }

    /// The last segment (empty for `/`).
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }

    /// The parent directory (`None` for `/`).
    pub fn parent(&self) -> Option<VPath> {
        if self.is_root() {
            return None;
        }
        match self.0.rfind('/') {
            Some(0) => Some(VPath::root()),
            Some(i) => Some(VPath(self.0[..i].to_string())),
            None => None,
        }
    }

    /// The child `name` of this directory (`name` is one segment).
    pub fn join(&self, name: &str) -> VPath {
        if self.is_root() {
            VPath(format!("/{name}"))
        } else {
            VPath(format!("{}/{name}", self.0))
        }
    }

    /// Whether `self` is `other` or inside it (whole segments: `/a` is not inside `/ab`).
    pub fn starts_with(&self, other: &VPath) -> bool {
        if other.is_root() {
            return true;
        }
        self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.as_bytes().get(other.0.len()) == Some(&b'/'))
    }

    /// Whether `self` is strictly inside `other`.
    pub fn is_strictly_inside(&self, other: &VPath) -> bool {
        self != other && self.starts_with(other)
    }

    /// The ancestors from the parent up to `/`.
    pub fn ancestors(&self) -> Vec<VPath> {
        let mut out = Vec::new();
        let mut cur = self.parent();
        while let Some(p) = cur {
            cur = p.parent();
            out.push(p);
        }
        out
    }

    /// The path relative to `base` (which it must be inside), `""` when equal.
    pub fn relative_to(&self, base: &VPath) -> Option<&str> {
        if !self.starts_with(base) {
            return None;
        }
        if base.is_root() {
            return Some(&self.0[1..]);
        }
        Some(self.0[base.0.len()..].trim_start_matches('/'))
    }
}

impl fmt::Display for VPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for VPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl PartialOrd for VPath {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Path order: segment by segment, so a directory's contents come right after it. Computed on
/// the bytes with `/` ranking below every other byte, which is the same order (a segment holds
/// no `/` and no NUL), without splitting.
impl Ord for VPath {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.0.as_bytes(), other.0.as_bytes());
        let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        match (a.get(common), b.get(common)) {
            (Some(x), Some(y)) => {
                let rank = |c: u8| if c == b'/' { 0 } else { u16::from(c) + 1 };
                rank(*x).cmp(&rank(*y))
            }
            _ => a.len().cmp(&b.len()),
        }
    }
}

/// Whether a name is portable (`spec/filesystem.md`, *Names*): not empty, not `.`/`..`, not ending
/// in a dot or a space, without `/`, `:`, `\`, a control character or any of `<>"|?*`, and not a
/// Windows device name (CON, PRN, AUX, NUL, COM1–9, LPT1–9) with or without an extension.
pub fn is_portable_name(name: &str) -> bool {
    if name.is_empty() || name == "." || name == ".." || name.ends_with('.') || name.ends_with(' ')
    {
        return false;
    }
    if name.chars().any(|c| {
        c.is_control() || matches!(c, '/' | ':' | '\\' | '<' | '>' | '"' | '|' | '?' | '*')
    }) {
        return false;
    }
    let stem = name
        .split('.')
        .next()
        .unwrap_or("")
        .trim_end()
        .to_ascii_uppercase();
    let device = match stem.as_str() {
        "CON" | "PRN" | "AUX" | "NUL" => true,
        s if s.len() == 4 && (s.starts_with("COM") || s.starts_with("LPT")) => {
            matches!(s.as_bytes()[3], b'1'..=b'9')
        }
        _ => false,
    };
    !device
}

/// Names the backends keep for themselves (temporary files, the trash): never shown.
pub const RESERVED_PREFIX: &str = ".llembas-";

/// Whether a name belongs to the backend itself.
pub fn is_reserved_name(name: &str) -> bool {
    name.starts_with(RESERVED_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_order_is_segment_by_segment() {
        let names = [
            "/", "/a", "/a/b", "/a/b/c", "/a-b", "/a.b", "/a b", "/ab", "/a/b-c", "/a/bc", "/b",
            "/A", "/é", "/a/\u{1}", "/a0", "/a/b/c/d",
        ];
        for x in names {
            for y in names {
                let (px, py) = (VPath::parse(x), VPath::parse(y));
                let by_segment = px.components().cmp(py.components());
                assert_eq!(px.cmp(&py), by_segment, "{x} vs {y}");
            }
        }
    }

    #[test]
    fn resolves_lexically() {
        let cwd = VPath::parse("/a/b");
        assert_eq!(VPath::resolve(&cwd, "c").as_str(), "/a/b/c");
        assert_eq!(VPath::resolve(&cwd, "../../../x").as_str(), "/x");
        assert_eq!(VPath::resolve(&cwd, "/x//./y/").as_str(), "/x/y");
        assert_eq!(VPath::resolve(&cwd, "").as_str(), "/a/b");
        assert_eq!(VPath::parse("/a").parent(), Some(VPath::root()));
        assert!(VPath::parse("/a/b").starts_with(&VPath::parse("/a")));
        assert!(!VPath::parse("/ab").starts_with(&VPath::parse("/a")));
        assert_eq!(
            VPath::parse("/a/b").relative_to(&VPath::parse("/a")),
            Some("b")
        );
    }

    #[test]
    fn portable_names() {
        for bad in [
            "", ".", "..", "x.", "x ", "a:b", "a\\b", "CON", "nul.txt", "com1", "Lpt9.log", "a*b",
            "a?b", "a\"b", "a<b", "a>b", "a|b", "a\u{0}b", "a\tb", "a\u{7f}b",
        ] {
            assert!(!is_portable_name(bad), "{bad:?}");
        }
        for good in ["a", "名前", "é", "com10", "console", ".env", "x.txt"] {
            assert!(is_portable_name(good), "{good:?}");
        }
    }

    #[test]
    fn path_order_puts_contents_after_directory() {
        let mut v = vec![
            VPath::parse("/a-b"),
            VPath::parse("/a/z"),
            VPath::parse("/a"),
        ];
        v.sort();
        assert_eq!(
            v,
            vec![
                VPath::parse("/a"),
                VPath::parse("/a/z"),
                VPath::parse("/a-b")
            ]
        );
    }
}
