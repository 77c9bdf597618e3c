//! The conformance runners of this crate's areas: `fill`, `narrow`, `plan`, `toolcall_index`,
//! `library_scope`, `prototype`, `offering`. Each case format is stated in the area file's `about`
//! (`spec/conformance/<area>.json`); `actual` always has the shape of the case's `expect`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use harness_spec::conformance::{AreaRunner, Outcome};
use harness_spec::{Narrow, Project, Spec, Variable};

use crate::error::Error;
use crate::fill::{Values, fill_schema, fill_text};
use crate::library::{scope_call, scope_from_meta};
use crate::narrow::{narrow_parameters, problem_code};
use crate::offer::{
    Facts, LOADER, OfferContext, Offering, deferred_lines, is_offered, resolve_call,
};
use crate::plan::PlanState;
use crate::prompt::{PrototypeHandoff, prototype_lines};
use crate::protocol::{Mode, SessionKind, ToolCall};
use crate::toolcall::{CallAssembler, CallDelta, CallEnd};

/// Every runner of this crate.
pub fn conformance_runners() -> Vec<Box<dyn AreaRunner>> {
    vec![
        Box::new(FillRunner),
        Box::new(NarrowRunner),
        Box::new(PlanRunner),
        Box::new(ToolCallIndexRunner),
        Box::new(LibraryScopeRunner),
        Box::new(PrototypeRunner),
        Box::new(OfferingRunner),
    ]
}

fn spec() -> &'static Spec {
    Spec::embedded()
}

fn project_of(case: &Value) -> Result<Project, String> {
    match case.get("project") {
        None => Ok(Project::Cli),
        Some(v) => serde_json::from_value(v.clone()).map_err(|_| format!("unknown project {v}")),
    }
}

fn string_map(case: &Value, key: &str) -> Result<BTreeMap<String, String>, String> {
    match case.get(key) {
        None => Ok(BTreeMap::new()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|_| format!("`{key}` must map names to strings")),
    }
}

/// The `error` of a fill case for an error of filling.
fn fill_error(e: &Error) -> Value {
    match e {
        Error::Unfilled { name, .. } => json!({"error": "unfilled", "name": name}),
        Error::MalformedVariable { .. } => json!({"error": "malformed"}),
        other => json!({"error": other.to_string()}),
    }
}

/// Keeps of `actual` the strings of `want` it holds (for `contains` / `absent` checks).
fn judge_strings(text: &str, want: Option<&Value>, present: bool) -> Option<Value> {
    let want = want?.as_array()?;
    Some(Value::Array(
        want.iter()
            .filter(|w| w.as_str().is_some_and(|w| text.contains(w) == present))
            .cloned()
            .collect(),
    ))
}

/// Runs `f`; a `String` error is a malformed case.
fn run_case(case: &Value, f: impl FnOnce(&Value) -> Result<Value, String>) -> Outcome {
    match f(case) {
        Ok(actual) => Outcome::compare(case, actual),
        Err(why) => Outcome::malformed(why),
    }
}

/// Area `fill`.
pub struct FillRunner;

impl AreaRunner for FillRunner {
    fn area(&self) -> &'static str {
        "fill"
    }

    fn run(&self, case: &Value) -> Outcome {
        run_case(case, fill_case)
    }
}

fn fill_case(case: &Value) -> Result<Value, String> {
    let project = project_of(case)?;
    let runtime = string_map(case, "values")?;
    let expect = case.get("expect").ok_or("no `expect`")?;
    if let Some(text) = case.get("text") {
        let text = text.as_str().ok_or("`text` must be a string")?;
        let declared: BTreeMap<String, Variable> = match case.get("variables") {
            None => BTreeMap::new(),
            Some(v) => {
                serde_json::from_value(v.clone()).map_err(|e| format!("`variables`: {e}"))?
            }
        };
        let values = Values {
            project,
            declared: &declared,
            runtime: &runtime,
        };
        return Ok(match fill_text(text, "case", &values) {
            Ok(t) => json!({"text": t}),
            Err(e) => fill_error(&e),
        });
    }
    let (filled, about) = if let Some(name) = case.get("tool").and_then(Value::as_str) {
        let tool = spec()
            .tool(name)
            .ok_or_else(|| format!("no tool `{name}` in the spec"))?;
        let values = Values {
            project,
            declared: &tool.variables,
            runtime: &runtime,
        };
        let result = fill_text(&tool.description, "description", &values).and_then(|d| {
            let p = fill_schema(&tool.parameters, "parameters", &values)?;
            Ok(format!("{d}\n{p}"))
        });
        (result, format!("tool {name}"))
    } else if let Some(rel) = case.get("prompt").and_then(Value::as_str) {
        let text = spec()
            .prompt(rel)
            .ok_or_else(|| format!("no prompt text `{rel}`"))?;
        let empty = BTreeMap::new();
        let declared = spec()
            .prompt_index()
            .fragments
            .get(rel)
            .map(|e| &e.variables)
            .unwrap_or(&empty);
        let values = Values {
            project,
            declared,
            runtime: &runtime,
        };
        (fill_text(text, rel, &values), format!("prompt {rel}"))
    } else {
        return Err("a fill case needs `text`, `tool` or `prompt`".into());
    };
    let filled = match filled {
        Ok(f) => f,
        Err(e) => return Ok(fill_error(&e)),
    };
    let mut actual = Map::new();
    if expect.get("filled").is_some() {
        actual.insert("filled".into(), Value::Bool(!filled.contains("{{")));
    }
    if let Some(v) = judge_strings(&filled, expect.get("contains"), true) {
        actual.insert("contains".into(), v);
    }
    if let Some(v) = judge_strings(&filled, expect.get("absent"), false) {
        actual.insert("absent".into(), v);
    }
    if actual.is_empty() {
        return Err(format!(
            "{about}: expect needs `filled`, `contains` or `absent`"
        ));
    }
    Ok(Value::Object(actual))
}

/// Area `narrow`.
pub struct NarrowRunner;

impl AreaRunner for NarrowRunner {
    fn area(&self) -> &'static str {
        "narrow"
    }

    fn run(&self, case: &Value) -> Outcome {
        run_case(case, narrow_case)
    }
}

/// Every property path of a schema (`a`, `a.b`, `a[].b`) in order, and the enum of each path
/// that has one (an array's items' enum under the array's path).
fn shape(schema: &Value, prefix: &str, paths: &mut Vec<Value>, enums: &mut Map<String, Value>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, prop) in props {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        paths.push(Value::String(path.clone()));
        if let Some(e) = prop.get("enum") {
            enums.insert(path.clone(), e.clone());
        }
        shape(prop, &path, paths, enums);
        if let Some(items) = prop.get("items") {
            if let Some(e) = items.get("enum") {
                enums.insert(path.clone(), e.clone());
            }
            shape(items, &format!("{path}[]"), paths, enums);
        }
    }
}

fn narrow_case(case: &Value) -> Result<Value, String> {
    let expect = case.get("expect").ok_or("no `expect`")?;
    let (name, parameters, narrow) = if let Some(name) = case.get("tool").and_then(Value::as_str) {
        let project = project_of(case)?;
        let tool = spec()
            .tool(name)
            .ok_or_else(|| format!("no tool `{name}` in the spec"))?;
        let narrow = tool.narrow.get(&project).cloned().unwrap_or_default();
        (name.to_owned(), tool.parameters.clone(), narrow)
    } else {
        let parameters = case
            .get("parameters")
            .cloned()
            .ok_or("a narrow case needs `tool` or `parameters`")?;
        let narrow: Narrow = match case.get("narrow") {
            None => Narrow::default(),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("`narrow`: {e}"))?,
        };
        ("case".to_owned(), parameters, narrow)
    };
    let out = match narrow_parameters(&name, &parameters, &narrow) {
        Ok(out) => out,
        Err(e) => {
            return Ok(
                json!({"error": problem_code(&e).map(str::to_owned).unwrap_or_else(|| e.to_string())}),
            );
        }
    };
    let mut actual = Map::new();
    if expect.get("parameters").is_some() {
        actual.insert("parameters".into(), out.clone());
    }
    if expect.get("paths").is_some() || expect.get("enums").is_some() {
        let mut paths = Vec::new();
        let mut enums = Map::new();
        shape(&out, "", &mut paths, &mut enums);
        if expect.get("paths").is_some() {
            actual.insert("paths".into(), Value::Array(paths));
        }
        if expect.get("enums").is_some() {
            actual.insert("enums".into(), Value::Object(enums));
        }
    }
    if actual.is_empty() {
        return Err("expect needs `parameters`, `paths`, `enums` or `error`".into());
    }
    Ok(Value::Object(actual))
}

/// Area `plan`.
pub struct PlanRunner;

impl AreaRunner for PlanRunner {
    fn area(&self) -> &'static str {
        "plan"
    }

    fn run(&self, case: &Value) -> Outcome {
        run_case(case, plan_case)
    }
}

fn plan_case(case: &Value) -> Result<Value, String> {
    let project = project_of(case)?;
    let mode: Mode = match case.get("mode") {
        None => Mode::Edit,
        Some(v) => serde_json::from_value(v.clone()).map_err(|_| format!("unknown mode {v}"))?,
    };
    let expect = case.get("expect").ok_or("no `expect`")?;
    let calls = case
        .get("calls")
        .and_then(Value::as_array)
        .ok_or("a plan case needs `calls`")?;
    let mut state = PlanState::default();
    let mut results = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        let tool = c
            .get("tool")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("calls[{i}] needs a `tool`"))?;
        let call = ToolCall {
            id: format!("c{i}"),
            name: tool.to_owned(),
            arguments: c.get("args").cloned().unwrap_or(json!({})),
        };
        let outcome = resolve_call(spec(), project, &call).and_then(|r| {
            if r.tool.name == "plan_submit" && mode != Mode::Plan {
                // Not offered outside plan mode: a call of it is a call of an unknown tool.
                return Err(Error::UnknownTool(call.name.clone()));
            }
            state.apply(&r.tool.name, &r.call.arguments, mode == Mode::Plan)
        });
        results.push(Value::String(
            if outcome.is_ok() { "ok" } else { "error" }.into(),
        ));
    }
    let mut actual = Map::new();
    if expect.get("results").is_some() {
        actual.insert("results".into(), Value::Array(results));
    }
    if expect.get("plan").is_some() {
        actual.insert(
            "plan".into(),
            serde_json::to_value(&state.plan).map_err(|e| e.to_string())?,
        );
    }
    if expect.get("context").is_some() {
        actual.insert("context".into(), Value::String(state.context()));
    }
    if actual.is_empty() {
        return Err("expect needs `results`, `plan` or `context`".into());
    }
    Ok(Value::Object(actual))
}

/// Area `toolcall_index`.
pub struct ToolCallIndexRunner;

impl AreaRunner for ToolCallIndexRunner {
    fn area(&self) -> &'static str {
        "toolcall_index"
    }

    fn run(&self, case: &Value) -> Outcome {
        run_case(case, |case| {
            let deltas: Vec<CallDelta> = serde_json::from_value(
                case.get("deltas")
                    .cloned()
                    .ok_or("a toolcall_index case needs `deltas`")?,
            )
            .map_err(|e| format!("`deltas`: {e}"))?;
            let end: CallEnd = match case.get("end") {
                None => CallEnd::Complete,
                Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("`end`: {e}"))?,
            };
            let mut a = CallAssembler::new();
            for d in &deltas {
                a.push(d);
            }
            let calls: Vec<Value> = a
                .finish(end)
                .into_iter()
                .map(|c| match c.arguments {
                    Ok(args) => json!({"name": c.name, "arguments": args}),
                    Err(_) => json!({"name": c.name, "invalid": c.raw}),
                })
                .collect();
            Ok(json!({"calls": calls}))
        })
    }
}

/// Area `library_scope`.
pub struct LibraryScopeRunner;

impl AreaRunner for LibraryScopeRunner {
    fn area(&self) -> &'static str {
        "library_scope"
    }

    fn run(&self, case: &Value) -> Outcome {
        run_case(case, |case| {
            let project = project_of(case)?;
            let lembas = match case.get("scope") {
                None => json!({}),
                Some(s) => json!({"scope": s}),
            };
            let scope = match scope_from_meta(&lembas) {
                Ok(s) => s,
                Err(_) => return Ok(json!({"error": "invalid_scope"})),
            };
            let name = case
                .get("tool")
                .and_then(Value::as_str)
                .ok_or("a case needs `tool`")?;
            let call = ToolCall {
                id: "c1".into(),
                name: name.to_owned(),
                arguments: case.get("args").cloned().unwrap_or(json!({})),
            };
            let resolved = match resolve_call(spec(), project, &call) {
                Ok(r) => r,
                Err(e) => return Ok(json!({"error": e.to_string()})),
            };
            let scoped = scope_call(
                &resolved.tool.name,
                &resolved.call.arguments,
                scope.as_ref(),
            );
            Ok(json!({
                "tool": resolved.tool.name,
                "args": scoped.arguments,
                "scope": scoped.scope,
            }))
        })
    }
}

/// Area `prototype`.
pub struct PrototypeRunner;

impl AreaRunner for PrototypeRunner {
    fn area(&self) -> &'static str {
        "prototype"
    }

    fn run(&self, case: &Value) -> Outcome {
        run_case(case, |case| {
            let project = project_of(case)?;
            let handoff = match case.get("instance") {
                None | Some(Value::Null) => None,
                Some(Value::String(instance)) => Some(PrototypeHandoff {
                    instance: instance.clone(),
                    prototypes: serde_json::from_value(
                        case.get("prototypes").cloned().unwrap_or(json!([])),
                    )
                    .map_err(|e| format!("`prototypes`: {e}"))?,
                }),
                Some(other) => {
                    return Err(format!("`instance` must be a version string, not {other}"));
                }
            };
            let display = case.get("display").and_then(Value::as_bool).unwrap_or(true);
            // `show` is offered where display holds and the project's agent session has it.
            let mut cx = OfferContext::new(project, SessionKind::Agent, Mode::Edit);
            cx.holds.display = display;
            let show_offered = spec().tool("show").is_some_and(|t| is_offered(t, &cx));
            let lines = prototype_lines(project, handoff.as_ref(), show_offered);
            if let Some(lines) = &lines {
                // The block must take the lines as they are.
                let mut values = BTreeMap::new();
                values.insert("prototypes".to_owned(), lines.join("\n"));
                let empty = BTreeMap::new();
                let declared = spec()
                    .prompt_index()
                    .fragments
                    .get("blocks/prototypes.md")
                    .map(|e| &e.variables)
                    .unwrap_or(&empty);
                let text = spec()
                    .prompt("blocks/prototypes.md")
                    .ok_or("no blocks/prototypes.md")?;
                let v = Values {
                    project,
                    declared,
                    runtime: &values,
                };
                let block =
                    fill_text(text, "blocks/prototypes.md", &v).map_err(|e| e.to_string())?;
                if !lines.iter().all(|l| block.contains(l.as_str())) {
                    return Err("blocks/prototypes.md does not show the lines".into());
                }
            }
            Ok(json!({"block": lines.is_some(), "lines": lines.unwrap_or_default()}))
        })
    }
}

/// Area `offering`: which tools a session is sent whole, which under the loader.
pub struct OfferingRunner;

impl AreaRunner for OfferingRunner {
    fn area(&self) -> &'static str {
        "offering"
    }

    fn run(&self, case: &Value) -> Outcome {
        run_case(case, |case| {
            let project = project_of(case)?;
            let kind = match case.get("kind") {
                None => SessionKind::Agent,
                Some(v) => {
                    serde_json::from_value(v.clone()).map_err(|_| format!("unknown kind {v}"))?
                }
            };
            let mode = match case.get("mode") {
                None => Mode::Edit,
                Some(v) => {
                    serde_json::from_value(v.clone()).map_err(|_| format!("unknown mode {v}"))?
                }
            };
            let mut cx = OfferContext::new(project, kind, mode);
            if let Some(list) = case.get("holds") {
                let list: Vec<harness_spec::Requirement> = serde_json::from_value(list.clone())
                    .map_err(|_| "`holds` must be a list of page, display, forge".to_owned())?;
                cx.holds = crate::offer::Holds::from_list(&list);
            }
            let holds = cx.holds;
            if let Some(agent) = case.get("subagent").and_then(Value::as_str) {
                cx = cx.for_subagent(agent);
            }
            let values = string_map(case, "values")?;
            cx.facts = Facts::from_values(&values);
            cx.values = values;
            // A run-time fact the tools' texts need, with a value of its shape.
            cx.values
                .entry("memory_limit".into())
                .or_insert_with(|| "4,000 characters".into());
            cx.loaded = match case.get("loaded") {
                None => Default::default(),
                Some(v) => serde_json::from_value(v.clone())
                    .map_err(|_| "`loaded` must be a list of names".to_owned())?,
            };
            let o = Offering::new(spec(), cx).map_err(|e| e.to_string())?;
            let sent: Vec<&str> = o.tools.iter().map(|t| t.name.as_str()).collect();
            let deferred: Vec<&str> = o.deferred.iter().map(|t| t.name.as_str()).collect();
            if let Some(loader) = o.tools.iter().find(|t| t.name == LOADER) {
                let lines = deferred_lines(&o.deferred);
                if !loader.description.contains(&lines) {
                    return Err(format!(
                        "the loader does not list the deferred tools: {lines}"
                    ));
                }
            }
            let mut answer = json!({"sent": sent, "deferred": deferred});
            if let Some(names) = case.get("unavailable").and_then(Value::as_array) {
                let mut texts = serde_json::Map::new();
                for name in names.iter().filter_map(Value::as_str) {
                    let tool = spec().tool(name).ok_or_else(|| format!("no tool {name}"))?;
                    texts.insert(
                        name.to_owned(),
                        json!(crate::offer::unavailable(tool, &holds)),
                    );
                }
                answer["unavailable"] = Value::Object(texts);
            }
            Ok(answer)
        })
    }
}
