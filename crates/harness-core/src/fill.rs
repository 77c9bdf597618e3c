//! Filling `{{variables}}` in tool descriptions, parameter descriptions and prompt texts.
//!
//! A variable is `{{name}}` with a name of ASCII letters, digits and `_`. Its value is the fixed
//! value the spec gives for the project (a fixed fact stays fixed), else the value the project
//! gives at run time. Rules
//! (the `fill` conformance area):
//!
//! - every variable is replaced by its value, as it is; values are not filled again;
//! - a line that is nothing but a bullet (`-`, `*` or `+`, indentation allowed) and one variable
//!   disappears, newline and all, when the value is empty (or only blanks);
//! - a variable with no value is an error naming it and the place: nothing unfilled reaches a
//!   model, and no blank stands in silently;
//! - a `{{` that does not open a well-formed variable is an error too, so a typo never reaches a
//!   model as text.

use std::collections::BTreeMap;

use serde_json::Value;

use harness_spec::{Project, Variable};

use crate::error::{Error, Result};

/// Where the values of a text's variables come from.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    /// The project whose fixed values apply.
    pub project: Project,
    /// The declared variables (their fixed values per project).
    pub declared: &'a BTreeMap<String, Variable>,
    /// Values the project gives at run time, for variables with no fixed value.
    pub runtime: &'a BTreeMap<String, String>,
}

impl<'a> Values<'a> {
    /// The value of a variable, if it has one.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.declared
            .get(name)
            .and_then(|v| v.value_for(self.project))
            .or_else(|| self.runtime.get(name).map(String::as_str))
    }
}

/// One piece of a text: literal text, or a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'t> {
    Text(&'t str),
    Var(&'t str),
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Splits a line into literal text and variables.
fn pieces<'t>(line: &'t str, place: &str) -> Result<Vec<Piece<'t>>> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(Error::MalformedVariable {
                place: place.to_owned(),
                text: rest[open..].chars().take(40).collect(),
            });
        };
        let name = &after[..close];
        if name.is_empty() || !name.chars().all(is_name_char) {
            return Err(Error::MalformedVariable {
                place: place.to_owned(),
                text: format!("{{{{{name}}}}}"),
            });
        }
        out.push(Piece::Var(name));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// The variable of a line that is nothing but a bullet and that variable.
fn bullet_variable<'t>(pieces: &[Piece<'t>]) -> Option<&'t str> {
    let (lead, name, tail) = match pieces {
        [Piece::Text(lead), Piece::Var(name)] => (*lead, *name, ""),
        [Piece::Text(lead), Piece::Var(name), Piece::Text(tail)] => (*lead, *name, *tail),
        _ => return None,
    };
    (is_bullet(lead) && tail.trim().is_empty()).then_some(name)
}

fn is_bullet(lead: &str) -> bool {
    let t = lead.trim_start();
    let mut chars = t.chars();
    matches!(chars.next(), Some('-' | '*' | '+'))
        && chars.as_str().starts_with([' ', '\t'])
        && chars.as_str().trim().is_empty()
}

/// The names of the variables a text holds, in order of first appearance.
pub fn variables_in(text: &str) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for line in text.split('\n') {
        for p in pieces(line, "text")? {
            if let Piece::Var(n) = p
                && !names.iter().any(|x| x == n)
            {
                names.push(n.to_owned());
            }
        }
    }
    Ok(names)
}

/// Fills a text. `place` names it in errors (`tool read, description`; `prompt system/default.md`).
pub fn fill_text(text: &str, place: &str, values: &Values<'_>) -> Result<String> {
    fill_with(text, place, |name| values.get(name))
}

/// Fills a text with any lookup of values.
pub fn fill_with<'v>(
    text: &str,
    place: &str,
    lookup: impl Fn(&str) -> Option<&'v str>,
) -> Result<String> {
    if !text.contains("{{") {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        let last = lines.peek().is_none();
        let parts = pieces(line, place)?;
        if let Some(name) = bullet_variable(&parts) {
            let value = lookup(name).ok_or_else(|| unfilled(place, name))?;
            if value.trim().is_empty() {
                // The whole line goes, with its newline.
                if last && out.ends_with('\n') {
                    // The text's last line vanished: the newline before it went with it.
                    out.pop();
                }
                continue;
            }
        }
        for p in parts {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Var(name) => {
                    out.push_str(lookup(name).ok_or_else(|| unfilled(place, name))?)
                }
            }
        }
        if !last {
            out.push('\n');
        }
    }
    Ok(out)
}

fn unfilled(place: &str, name: &str) -> Error {
    Error::Unfilled {
        place: place.to_owned(),
        name: name.to_owned(),
    }
}

/// Fills every `description` string inside a JSON Schema (the parameters of a tool), at any
/// depth. Other strings (enum values, defaults, patterns) are left as they are.
pub fn fill_schema(schema: &Value, place: &str, values: &Values<'_>) -> Result<Value> {
    let mut out = schema.clone();
    fill_schema_in(&mut out, place, "", values)?;
    Ok(out)
}

fn fill_schema_in(node: &mut Value, place: &str, pointer: &str, values: &Values<'_>) -> Result<()> {
    match node {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let here = format!("{pointer}/{key}");
                if key == "description"
                    && let Value::String(s) = child
                {
                    *s = fill_text(s, &format!("{place} {here}"), values)?;
                } else if key != "enum" && key != "const" && key != "default" && key != "examples" {
                    fill_schema_in(child, place, &here, values)?;
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                fill_schema_in(child, place, &format!("{pointer}/{i}"), values)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(text: &str, vals: &[(&str, &str)]) -> Result<String> {
        let m: BTreeMap<String, String> = vals
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        fill_with(text, "test", |n| m.get(n).map(String::as_str))
    }

    #[test]
    fn fills_and_drops_bullet_lines() {
        assert_eq!(fill("a {{x}} b", &[("x", "1")]).unwrap(), "a 1 b");
        assert_eq!(fill("A\n- {{x}}\nB\n", &[("x", "")]).unwrap(), "A\nB\n");
        assert_eq!(fill("A\n- {{x}}\nB", &[("x", "y")]).unwrap(), "A\n- y\nB");
        assert_eq!(fill("A\n- {{x}}", &[("x", "")]).unwrap(), "A");
        assert_eq!(fill("A\n- {{x}}\n", &[("x", "")]).unwrap(), "A\n");
        assert_eq!(fill("A\n  * {{x}}  \nB", &[("x", " ")]).unwrap(), "A\nB");
        assert_eq!(
            fill("A\n- see {{x}}\nB", &[("x", "")]).unwrap(),
            "A\n- see \nB"
        );
        assert_eq!(fill("{{x}}", &[("x", "{{y}}")]).unwrap(), "{{y}}");
    }

    #[test]
    fn unfilled_is_an_error() {
        let e = fill("a {{x}}", &[]).unwrap_err();
        assert_eq!(e.to_string(), "test: `{{x}}` has no value");
        assert!(matches!(
            fill("a {{x", &[]),
            Err(Error::MalformedVariable { .. })
        ));
        assert!(matches!(
            fill("a {{x y}}", &[]),
            Err(Error::MalformedVariable { .. })
        ));
        assert!(matches!(fill("- {{x}}", &[]), Err(Error::Unfilled { .. })));
    }
}
