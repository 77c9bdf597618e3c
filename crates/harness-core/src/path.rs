//! The one path resolver (the design's rule): a path a model or a person gives is resolved
//! lexically against the session's directory before anything else — `~` and `~/…` are the
//! home directory, `.` and empty segments drop, `..` goes up and stops at `/` — and everything
//! after (the permission engine, the file tools, the question put to the person, a client's
//! locations) works on that one absolute path.
//!
//! ```
//! use harness_core::path::{inside, resolve, resolve_home};
//!
//! assert_eq!(resolve("/home/u/project", "../notes.md"), "/home/u/notes.md");
//! assert_eq!(resolve_home("/home/u/project", "/home/u", "~/.bashrc"), "/home/u/.bashrc");
//! assert!(inside("/home/u/project/src", "/home/u/project"));
//! assert!(!inside("/home/u/project2", "/home/u/project"));
//! ```

/// Resolves `path` against `cwd` lexically: an absolute path starts at `/`, a relative one at
/// `cwd`; `.` and empty segments drop, `..` goes up and stops at `/`.
pub fn resolve(cwd: &str, path: &str) -> String {
    let mut segs: Vec<&str> = Vec::new();
    let start = if path.starts_with('/') { "" } else { cwd };
    for s in start.split('/').chain(path.split('/')) {
        match s {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            other => segs.push(other),
        }
    }
    if segs.is_empty() {
        return "/".to_owned();
    }
    let mut out = String::with_capacity(path.len() + cwd.len() + 1);
    for s in segs {
        out.push('/');
        out.push_str(s);
    }
    out
}

/// Resolves `path` as [`resolve`] does after reading `~` and `~/…` as the home directory `home`.
pub fn resolve_home(cwd: &str, home: &str, path: &str) -> String {
    if path == "~" {
        return resolve("/", home);
    }
    match path.strip_prefix("~/") {
        Some(rest) => resolve(home, rest),
        None => resolve(cwd, path),
    }
}

/// Whether the absolute path `path` is `dir` or lies under it (whole segments: `/ab` is not
/// inside `/a`).
pub fn inside(path: &str, dir: &str) -> bool {
    if dir == "/" {
        return true;
    }
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical() {
        assert_eq!(resolve("/a/b", "../c"), "/a/c");
        assert_eq!(resolve("/a", "../../.."), "/");
        assert_eq!(resolve("/a", "//x/./y/"), "/x/y");
        assert_eq!(resolve("/a/b", ""), "/a/b");
        assert_eq!(resolve("/a/b", "."), "/a/b");
        assert_eq!(resolve_home("/w", "/h", "~"), "/h");
        assert_eq!(resolve_home("/w", "/h", "~/x/../y"), "/h/y");
        assert_eq!(resolve_home("/w", "/h", "~x"), "/w/~x");
        assert!(inside("/a/b", "/a"));
        assert!(inside("/a", "/"));
        assert!(!inside("/ab", "/a"));
    }
}
