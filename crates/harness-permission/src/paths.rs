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
    // The resolver itself is harness-core's, tested there.
    #[test]
    fn a_glob_only_last_segment_reaches_its_parent() {
        assert_eq!(reach("/*"), "/");
        assert_eq!(reach("/home/user/*"), "/home/user");
        assert_eq!(reach("/home/user/.*"), "/home/user");
        assert_eq!(reach("/home/user/a*"), "/home/user/a*");
    }
}
