//! Paths resolved lexically, as the design fixes them: `.` and empty segments drop, `..` goes up
//! and stops at `/`.

/// Resolves `path` against `cwd` lexically.
pub fn resolve(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{cwd}/{path}")
    };
    let mut segs: Vec<&str> = Vec::new();
    for s in joined.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            other => segs.push(other),
        }
    }
    if segs.is_empty() {
        "/".to_owned()
    } else {
        format!("/{}", segs.join("/"))
    }
}

/// Whether `path` is `dir` or lies under it.
pub fn inside(path: &str, dir: &str) -> bool {
    if dir == "/" {
        return true;
    }
    path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// A last segment made only of glob characters (`*`, `.*`, `?`): the path stands for its parent's
/// whole content.
pub(crate) fn glob_only(seg: &str) -> bool {
    !seg.is_empty() && seg.chars().all(|c| matches!(c, '*' | '?' | '.')) && seg.contains(['*', '?'])
}

/// The path a delete or move really reaches: `/x/*` reaches `/x`.
pub(crate) fn reach(resolved: &str) -> String {
    match resolved.rsplit_once('/') {
        Some((parent, last)) if glob_only(last) => {
            if parent.is_empty() {
                "/".to_owned()
            } else {
                parent.to_owned()
            }
        }
        _ => resolved.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn lexical() {
        assert_eq!(resolve("/a/b", "../c"), "/a/c");
        assert_eq!(resolve("/a", "../../.."), "/");
        assert_eq!(resolve("/a", "//x/./y/"), "/x/y");
        assert_eq!(reach("/*"), "/");
        assert_eq!(reach("/home/user/*"), "/home/user");
        assert!(inside("/a/b", "/a"));
        assert!(!inside("/ab", "/a"));
    }
}
