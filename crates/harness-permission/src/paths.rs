//! Paths resolved lexically, by harness-core's one resolver ([`harness_core::path`]), and what a
//! delete or move of a glob-only last segment really reaches.

pub use harness_core::path::{inside, resolve};

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
