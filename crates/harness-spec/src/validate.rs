// Shared by `build.rs` (through `#[path]`) and by `Spec::from_dir`: the one place that knows
// which schema checks which spec file, and the rules that cross files. It sees the spec as a map
// of relative paths to bytes and never touches the disk, so both callers judge the same way.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// One thing wrong with the spec: the file, the JSON pointer inside it (empty for the whole
/// file), and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Path relative to `spec/`.
    pub file: String,
    /// JSON pointer into the file ("" for the whole file).
    pub pointer: String,
    /// What is wrong, in words.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "spec/{}: {}", self.file, self.message)
        } else {
            write!(
                f,
                "spec/{} at {}: {}",
                self.file, self.pointer, self.message
            )
        }
    }
}

/// What validation found: problems fail the build, notes are only printed.
#[derive(Debug, Default)]
pub struct Report {
    /// Everything that makes the spec invalid.
    pub problems: Vec<Problem>,
    /// Things worth saying that do not fail the build (a file with no schema yet).
    pub notes: Vec<String>,
}

/// The schema files (relative to `spec/`) that a spec file must satisfy. An empty list means the
/// file is not JSON data checked by a schema (texts, schemas themselves).
pub fn schemas_for(rel: &str) -> Vec<String> {
    let Some(stem_path) = rel.strip_suffix(".json") else {
        return Vec::new();
    };
    if rel.starts_with("schemas/") || rel == "models/schema.json" {
        return Vec::new();
    }
    if let Some(name) = stem_path.strip_prefix("tools/")
        && !name.contains('/')
    {
        return vec!["schemas/tool.schema.json".into()];
    }
    if rel == "prompts/index.json" {
        return vec!["schemas/prompts-index.schema.json".into()];
    }
    if let Some(name) = stem_path.strip_prefix("permission/") {
        return vec![format!("schemas/permission-{name}.schema.json")];
    }
    if rel == "models/catalogue.json" {
        return vec!["models/schema.json".into()];
    }
    if let Some(area) = stem_path.strip_prefix("conformance/") {
        return vec![
            "schemas/conformance.schema.json".into(),
            format!("schemas/conformance-{area}.schema.json"),
        ];
    }
    if !stem_path.contains('/') {
        return vec![format!("schemas/{stem_path}.schema.json")];
    }
    Vec::new()
}

/// Checks a whole spec given as relative path → bytes.
pub fn validate(files: &BTreeMap<String, Vec<u8>>) -> Report {
    let mut report = Report::default();
    let mut parsed: BTreeMap<&str, Value> = BTreeMap::new();

    for (rel, bytes) in files {
        let Ok(text) = std::str::from_utf8(bytes) else {
            report.problem(rel, "", "not valid UTF-8");
            continue;
        };
        if rel.ends_with(".json") {
            match serde_json::from_str::<Value>(text) {
                Ok(value) => {
                    parsed.insert(rel.as_str(), value);
                }
                Err(e) => report.problem(rel, "", format!("not valid JSON: {e}")),
            }
        }
    }

    check_version(files, &mut report);

    // Every schema must itself be a valid 2020-12 schema.
    for (rel, value) in &parsed {
        if (rel.starts_with("schemas/") || *rel == "models/schema.json")
            && let Err(e) = jsonschema::meta::validate(value)
        {
            report.problem(
                rel,
                e.instance_path().as_str(),
                format!("not a valid JSON Schema: {e}"),
            );
        }
    }

    for (rel, value) in &parsed {
        let schemas = schemas_for(rel);
        let mut checked = false;
        for schema_rel in &schemas {
            let Some(schema) = parsed.get(schema_rel.as_str()) else {
                continue;
            };
            checked = true;
            let validator = match jsonschema::validator_for(schema) {
                Ok(v) => v,
                Err(e) => {
                    report.problem(schema_rel, "", format!("schema does not compile: {e}"));
                    continue;
                }
            };
            for error in validator.iter_errors(value) {
                report.problem(
                    rel,
                    error.instance_path().as_str(),
                    format!("{error} (schema spec/{schema_rel})"),
                );
            }
        }
        if !checked && !schemas.is_empty() {
            report.notes.push(format!(
                "spec/{rel} has no schema yet (looked for {})",
                schemas.join(", ")
            ));
        }
    }

    if let Some(value) = parsed.get("loop.json") {
        check_loop(value, &mut report.problems);
    }
    check_tools(&parsed, &mut report);
    check_prompts(files, &parsed, &mut report);
    check_conformance(files, &mut report);
    report
}

impl Report {
    fn problem(&mut self, file: &str, pointer: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            file: file.to_string(),
            pointer: pointer.to_string(),
            message: message.into(),
        });
    }
}

fn check_version(files: &BTreeMap<String, Vec<u8>>, report: &mut Report) {
    match files.get("VERSION") {
        None => report.problem("VERSION", "", "missing"),
        Some(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            if let Err(e) = semver::Version::parse(text.trim()) {
                report.problem(
                    "VERSION",
                    "",
                    format!("{:?} is not SemVer: {e}", text.trim()),
                );
            }
        }
    }
}

/// The `{{name}}` placeholders in a text, in order of first use.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let name = after[..end].trim();
        if !name.is_empty() && !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
        rest = &after[end + 2..];
    }
    out
}

fn collect_descriptions(value: &Value, pointer: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                if k == "description"
                    && let Value::String(s) = v
                {
                    out.push((p.clone(), s.clone()));
                }
                collect_descriptions(v, &p, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect_descriptions(v, &format!("{pointer}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn check_tools(parsed: &BTreeMap<&str, Value>, report: &mut Report) {
    // name → the file that claims it (as a name or an alias), per project.
    let mut claimed: BTreeMap<(String, &'static str), String> = BTreeMap::new();
    for (rel, tool) in parsed {
        let Some(stem) = rel
            .strip_prefix("tools/")
            .and_then(|s| s.strip_suffix(".json"))
        else {
            continue;
        };
        if stem.contains('/') {
            continue;
        }
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        if name != stem {
            report.problem(
                rel,
                "/name",
                format!("name {name:?} differs from the file name {stem:?}"),
            );
        }
        for project in ["cli", "llembas"] {
            let mut names = vec![(name.to_string(), "/name".to_string())];
            if let Some(list) = tool
                .pointer(&format!("/aliases/{project}"))
                .and_then(Value::as_array)
            {
                for (i, a) in list.iter().enumerate() {
                    if let Some(a) = a.as_str() {
                        names.push((a.to_string(), format!("/aliases/{project}/{i}")));
                    }
                }
            }
            for (n, pointer) in names {
                if let Some(other) = claimed.insert((n.clone(), project), rel.to_string())
                    && (other != *rel || pointer != "/name")
                {
                    report.problem(
                        rel,
                        &pointer,
                        format!(
                            "the name {n:?} is already taken in project {project} by spec/{other}"
                        ),
                    );
                }
            }
        }

        // parameters must be a valid JSON Schema.
        if let Some(params) = tool.get("parameters")
            && let Err(e) = jsonschema::meta::validate(params)
        {
            report.problem(
                rel,
                &format!("/parameters{}", e.instance_path().as_str()),
                format!("parameters are not a valid JSON Schema: {e}"),
            );
        }

        // every placeholder declared, every declared variable used.
        let declared: BTreeSet<String> = tool
            .get("variables")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let mut texts = Vec::new();
        if let Some(Value::String(d)) = tool.get("description") {
            texts.push(("/description".to_string(), d.clone()));
        }
        if let Some(params) = tool.get("parameters") {
            collect_descriptions(params, "/parameters", &mut texts);
        }
        let mut used = BTreeSet::new();
        for (pointer, text) in &texts {
            for var in placeholders(text) {
                if !declared.contains(&var) {
                    report.problem(
                        rel,
                        pointer,
                        format!("{{{{{var}}}}} is used but not declared in /variables"),
                    );
                }
                used.insert(var);
            }
        }
        for var in declared.difference(&used) {
            report.problem(rel, &format!("/variables/{var}"), "declared but never used");
        }

        // renamed: only former names of this tool.
        if let Some(renamed) = tool.get("renamed").and_then(Value::as_object) {
            for former in renamed.keys() {
                let known = ["cli", "llembas"].iter().any(|p| {
                    tool.pointer(&format!("/aliases/{p}"))
                        .and_then(Value::as_array)
                        .is_some_and(|l| l.iter().any(|a| a.as_str() == Some(former)))
                });
                if !known {
                    report.problem(
                        rel,
                        &format!("/renamed/{former}"),
                        format!("{former:?} is not one of this tool's aliases"),
                    );
                }
            }
        }

        if let Some(params) = tool.get("parameters") {
            for project in ["cli", "llembas"] {
                check_narrow(rel, tool, params, project, report);
            }
        }
    }
}

/// Resolves `a.b` / `a[].b` to the schema of that property, returning it with the schema that
/// holds it (to read `required`) and the property's own name.
fn resolve_property<'a>(params: &'a Value, path: &str) -> Option<(&'a Value, &'a Value, String)> {
    let mut holder = params;
    let segments: Vec<&str> = path.split('.').collect();
    for (i, seg) in segments.iter().enumerate() {
        let (name, into_items) = match seg.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (*seg, false),
        };
        let prop = holder.get("properties")?.get(name)?;
        if i + 1 == segments.len() {
            if into_items {
                return None;
            }
            return Some((holder, prop, name.to_string()));
        }
        holder = if into_items { prop.get("items")? } else { prop };
    }
    None
}

fn check_narrow(rel: &str, tool: &Value, params: &Value, project: &str, report: &mut Report) {
    let Some(narrow) = tool.pointer(&format!("/narrow/{project}")) else {
        return;
    };
    if let Some(drops) = narrow.get("drop").and_then(Value::as_array) {
        for (i, d) in drops.iter().enumerate() {
            let Some(path) = d.as_str() else { continue };
            let pointer = format!("/narrow/{project}/drop/{i}");
            match resolve_property(params, path) {
                None => report.problem(
                    rel,
                    &pointer,
                    format!("{path:?} is not a property of the parameters"),
                ),
                Some((holder, _, name)) => {
                    let required = holder
                        .get("required")
                        .and_then(Value::as_array)
                        .is_some_and(|r| r.iter().any(|x| x.as_str() == Some(name.as_str())));
                    if required {
                        report.problem(
                            rel,
                            &pointer,
                            format!("{path:?} is required and cannot be dropped"),
                        );
                    }
                }
            }
        }
    }
    if let Some(enums) = narrow.get("enum").and_then(Value::as_object) {
        for (path, keep) in enums {
            let pointer = format!(
                "/narrow/{project}/enum/{}",
                path.replace('~', "~0").replace('/', "~1")
            );
            let Some((_, prop, _)) = resolve_property(params, path) else {
                report.problem(
                    rel,
                    &pointer,
                    format!("{path:?} is not a property of the parameters"),
                );
                continue;
            };
            let values = prop
                .get("enum")
                .or_else(|| prop.get("items").and_then(|i| i.get("enum")))
                .and_then(Value::as_array);
            let Some(values) = values else {
                report.problem(
                    rel,
                    &pointer,
                    format!("{path:?} has no enum to keep values of"),
                );
                continue;
            };
            for v in keep.as_array().into_iter().flatten() {
                if !values.contains(v) {
                    report.problem(
                        rel,
                        &pointer,
                        format!("{v} is not one of the values of {path:?}"),
                    );
                }
            }
        }
    }
}

fn check_prompts(
    files: &BTreeMap<String, Vec<u8>>,
    parsed: &BTreeMap<&str, Value>,
    report: &mut Report,
) {
    let texts: Vec<&String> = files
        .keys()
        .filter(|k| k.starts_with("prompts/") && k.ends_with(".md"))
        .collect();
    let Some(index) = parsed.get("prompts/index.json") else {
        if !texts.is_empty() {
            report.problem(
                "prompts/index.json",
                "",
                "missing, but prompts/ holds texts",
            );
        }
        return;
    };
    let Some(fragments) = index.get("fragments").and_then(Value::as_object) else {
        return;
    };
    for key in fragments.keys() {
        if !files.contains_key(&format!("prompts/{key}")) {
            report.problem(
                "prompts/index.json",
                &format!("/fragments/{}", key.replace('~', "~0").replace('/', "~1")),
                format!("names prompts/{key}, which does not exist"),
            );
        }
    }
    for rel in texts {
        let key = &rel["prompts/".len()..];
        let pointer = format!("/fragments/{}", key.replace('~', "~0").replace('/', "~1"));
        let Some(entry) = fragments.get(key) else {
            report.problem(rel, "", "has no entry in prompts/index.json");
            continue;
        };
        let text = String::from_utf8_lossy(&files[rel]);
        let declared: BTreeSet<String> = entry
            .get("variables")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let used: BTreeSet<String> = placeholders(&text).into_iter().collect();
        for var in used.difference(&declared) {
            report.problem(
                rel,
                "",
                format!("{{{{{var}}}}} is used but not declared in prompts/index.json {pointer}/variables"),
            );
        }
        for var in declared.difference(&used) {
            report.problem(
                "prompts/index.json",
                &format!("{pointer}/variables/{var}"),
                format!("declared but never used in {rel}"),
            );
        }
    }
}

fn check_conformance(files: &BTreeMap<String, Vec<u8>>, report: &mut Report) {
    for rel in files.keys() {
        if let Some(rest) = rel.strip_prefix("conformance/")
            && (!rest.ends_with(".json") || rest.contains('/'))
        {
            report.problem(rel, "", "conformance/ holds only <area>.json files");
        }
    }
}

/// The rules of `loop.json` that its schema cannot state: each budget's steps below the
/// backstop, the output cap's head and tail inside the cap, the repeated-call nudge ending the
/// turn no sooner than it nudges.
pub fn check_loop(value: &Value, problems: &mut Vec<Problem>) {
    let num = |p: &str| value.pointer(p).and_then(Value::as_u64);
    let mut bad = |pointer: &str, message: String| {
        problems.push(Problem {
            file: "loop.json".into(),
            pointer: pointer.into(),
            message,
        })
    };
    if let Some(backstop) = num("/steps/backstop") {
        for project in ["cli", "llembas"] {
            let pointer = format!("/budgets/{project}/steps");
            if let Some(steps) = num(&pointer)
                && steps >= backstop
            {
                bad(
                    &pointer,
                    format!("{steps} steps must be below steps.backstop ({backstop})"),
                );
            }
        }
    }
    for (part, whole) in [("lines", "max_lines"), ("chars", "max_chars")] {
        if let (Some(h), Some(t), Some(max)) = (
            num(&format!("/context/cap/head_{part}")),
            num(&format!("/context/cap/tail_{part}")),
            num(&format!("/context/cap/{whole}")),
        ) && h + t > max
        {
            bad(
                "/context/cap",
                format!(
                    "head_{part} + tail_{part} ({}) must fit inside {whole} ({max})",
                    h + t
                ),
            );
        }
    }
    if let (Some(end), Some(threshold)) = (
        num("/nudges/repeated_call/end_after"),
        num("/nudges/repeated_call/threshold"),
    ) && end < threshold
    {
        bad(
            "/nudges/repeated_call/end_after",
            format!("{end} must not be below threshold ({threshold})"),
        );
    }
}
