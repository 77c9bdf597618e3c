//! Rule patterns: `*` is any run of characters, `?` one character, a trailing ` *` also matches
//! nothing (so `ls *` matches `ls` but not `lsof`); everything else is literal.

/// Whether `pattern` matches the whole of `value`.
pub fn matches(pattern: &str, value: &str) -> bool {
    if let Some(head) = pattern.strip_suffix(" *")
        && (value == head || glob(head.as_bytes(), value.as_bytes()))
    {
        return true;
    }
    glob(pattern.as_bytes(), value.as_bytes())
}

fn glob(p: &[u8], v: &[u8]) -> bool {
    let (mut pi, mut vi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while vi < v.len() {
        if pi < p.len() && (p[pi] == b'?' || (p[pi] != b'*' && p[pi] == v[vi])) {
            pi += 1;
            vi += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, vi));
            pi += 1;
        } else if let Some((sp, sv)) = star {
            pi = sp + 1;
            vi = sv + 1;
            star = Some((sp, sv + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn space_star_is_a_word_boundary() {
        assert!(matches("ls *", "ls"));
        assert!(matches("ls *", "ls -la"));
        assert!(!matches("ls *", "lsof"));
        assert!(matches("ls*", "lsof"));
        assert!(matches("git status *", "git status --short"));
        assert!(!matches("git status *", "git stash"));
        assert!(matches("*", ""));
        assert!(matches("*.env", "/a/.env"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
    }
}
