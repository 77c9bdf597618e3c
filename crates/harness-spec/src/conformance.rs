//! The contract between the spec and the code: conformance areas, and how an implementation
//! runs them.
//!
//! A conformance file is `{"about": "...", "cases": [...]}`; each case holds its inputs and its
//! expected result under `expect`. Each crate that implements an area provides an
//! [`AreaRunner`]; `cargo xtask conformance` and each crate's tests run the cases through it.

use serde_json::Value;

use crate::Spec;

/// One area's file: the rules in words and the cases.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseFile {
    /// The case format and the rules.
    pub about: String,
    /// The cases, each with an `expect`.
    pub cases: Vec<Value>,
}

impl CaseFile {
    /// Reads `{"about", "cases"}` from a parsed file.
    pub fn from_value(value: &Value) -> Result<CaseFile, String> {
        let about = value
            .get("about")
            .and_then(Value::as_str)
            .ok_or("a conformance file needs a string `about`")?
            .to_string();
        let cases = value
            .get("cases")
            .and_then(Value::as_array)
            .ok_or("a conformance file needs an array `cases`")?
            .clone();
        Ok(CaseFile { about, cases })
    }
}

/// What one case came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Whether the implementation did what `expect` says.
    pub passed: bool,
    /// What the implementation did, in the shape of `expect` (so `record` can write it there).
    pub actual: Value,
}

impl Outcome {
    /// An outcome judged by plain equality with the case's `expect`.
    pub fn compare(case: &Value, actual: Value) -> Outcome {
        let passed = case.get("expect") == Some(&actual);
        Outcome { passed, actual }
    }

    /// A case that could not be run as written: a failure saying why.
    pub fn malformed(why: impl Into<String>) -> Outcome {
        Outcome {
            passed: false,
            actual: serde_json::json!({ "malformed_case": why.into() }),
        }
    }
}

/// Runs the cases of one area through an implementation.
pub trait AreaRunner: Send + Sync {
    /// The area's name (the file stem).
    fn area(&self) -> &'static str;
    /// Runs one case.
    fn run(&self, case: &Value) -> Outcome;
}

/// A failed case: where it is, what was expected, what came.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// Index in `cases`.
    pub index: usize,
    /// The case's `expect` (null when it has none).
    pub expected: Value,
    /// What the implementation did.
    pub actual: Value,
    /// The case itself.
    pub case: Value,
}

/// The outcome of an area.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Cases that passed.
    pub passed: usize,
    /// Cases that failed.
    pub failures: Vec<Failure>,
}

/// Runs every case of a file.
pub fn run_cases(runner: &dyn AreaRunner, file: &CaseFile) -> Summary {
    let mut summary = Summary::default();
    for (index, case) in file.cases.iter().enumerate() {
        let outcome = runner.run(case);
        if outcome.passed {
            summary.passed += 1;
        } else {
            summary.failures.push(Failure {
                index,
                expected: case.get("expect").cloned().unwrap_or(Value::Null),
                actual: outcome.actual,
                case: case.clone(),
            });
        }
    }
    summary
}

/// For a `#[test]`: runs the spec's cases of the runner's area and panics listing every failure.
#[allow(clippy::panic)]
pub fn assert_area(runner: &dyn AreaRunner, spec: &Spec) {
    let area = runner.area();
    let Some(file) = spec.conformance(area) else {
        panic!("spec/conformance/{area}.json does not exist");
    };
    let summary = run_cases(runner, &file);
    if !summary.failures.is_empty() {
        let lines: Vec<String> = summary
            .failures
            .iter()
            .map(|f| {
                format!(
                    "case {}: {}\n  expected {}\n  actual   {}",
                    f.index,
                    serde_json::to_string(&f.case).unwrap_or_default(),
                    f.expected,
                    f.actual
                )
            })
            .collect();
        panic!(
            "{area}: {} passed, {} failed\n{}",
            summary.passed,
            summary.failures.len(),
            lines.join("\n")
        );
    }
}
