//! `spec/loop.json` as typed settings (the types live in `harness-spec`, which owns the spec's
//! typed form; they are re-exported here), and the filling of its `{placeholder}` texts.

pub use harness_spec::loop_config::*;

/// Fills `{name}` placeholders of a spec text. A placeholder with no value is left as it is,
/// so a test can find it (`unfilled`).
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end)
                if after[..end]
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_')
                    && end > 0 =>
            {
                let name = &after[..end];
                match values.iter().find(|(k, _)| *k == name) {
                    Some((_, v)) => out.push_str(v),
                    None => {
                        out.push('{');
                        out.push_str(name);
                        out.push('}');
                    }
                }
                rest = &after[end + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The `{placeholders}` a text holds, in order.
pub fn placeholders(template: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end)
                if end > 0
                    && after[..end]
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_') =>
            {
                found.push(after[..end].to_string());
                rest = &after[end + 1..];
            }
            _ => rest = after,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_replaces_known_and_keeps_unknown() {
        assert_eq!(fill("a {x} b {y} {", &[("x", "1")]), "a 1 b {y} {");
        assert_eq!(fill("{\"k\": 1}", &[]), "{\"k\": 1}");
        assert_eq!(
            placeholders("[{n} lines elided, full output {ref}]"),
            ["n", "ref"]
        );
    }

    #[test]
    fn embedded_config_loads() {
        let c = LoopConfig::embedded().unwrap();
        assert_eq!(c.context.cap.max_lines, 400);
        assert_eq!(c.context.cap.max_chars, 40_000);
        assert_eq!(c.context.result_id.hex_digits, 4);
    }
}
