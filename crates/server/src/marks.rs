//! The job marks of a machine turn as data. A message the harness wrote to the agent (a job's
//! end woke it, a running subagent reported) is made of the marks `spec/loop.json` defines
//! (`jobs.marks.finished`, `jobs.marks.report`); its stored `user_input` event carries them as
//! `jobs`: `[{"job_id", "kind", "state", "title", "text"}]` for a job's end, `[{"job_id",
//! "text"}]` for a report, in the order of the message. The page draws each in its job's card
//! from these fields and never reads the templates.

use serde::Serialize;
use serde_json::Value;

/// One mark of a machine turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobMark {
    /// The job's id.
    pub job_id: String,
    /// `command` or `subagent` (a job's end only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `done`, `failed` or `stopped` (a job's end only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The job's one-line title (a job's end only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the job said: its result, or the report.
    pub text: String,
}

/// A template's pieces: literal text and `{field}`s.
enum Piece<'a> {
    Text(&'a str),
    Field(&'a str),
}

fn pieces(template: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        if open > 0 {
            out.push(Piece::Text(&rest[..open]));
        }
        out.push(Piece::Field(&rest[open + 1..open + close]));
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    out
}

/// The fields of the mark `pieces` at the start of `text`, and where it ends: a field takes the
/// text up to the first place the literal after it follows.
fn match_start<'t>(pieces: &[Piece<'_>], text: &'t str) -> Option<(Vec<(String, &'t str)>, usize)> {
    let mut at = 0;
    let mut fields = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        match &pieces[i] {
            Piece::Text(lit) => {
                text[at..].starts_with(lit).then_some(())?;
                at += lit.len();
                i += 1;
            }
            Piece::Field(name) => {
                let end = match pieces.get(i + 1) {
                    Some(Piece::Text(lit)) => at + text[at..].find(lit)?,
                    Some(Piece::Field(_)) => return None,
                    None => text.len(),
                };
                fields.push(((*name).to_owned(), &text[at..end]));
                at = end;
                i += 1;
            }
        }
    }
    Some((fields, at))
}

fn field(fields: &[(String, &str)], name: &str) -> Option<String> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| (*v).to_owned())
}

/// The marks of a machine turn's `text`, in order (none when it holds none).
pub fn job_marks(text: &str) -> Vec<JobMark> {
    let marks = &harness_spec::Spec::embedded().loop_config().jobs.marks;
    let templates = [
        (pieces(&marks.finished), true),
        (pieces(&marks.report), false),
    ];
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let found = templates.iter().find_map(|(p, finished)| {
            let (fields, len) = match_start(p, &text[at..])?;
            let mark = JobMark {
                job_id: field(&fields, "id").filter(|id| !id.is_empty())?,
                kind: finished.then(|| field(&fields, "kind")).flatten(),
                state: finished.then(|| field(&fields, "state")).flatten(),
                title: finished.then(|| field(&fields, "title")).flatten(),
                text: field(&fields, if *finished { "body" } else { "text" })?,
            };
            Some((mark, len))
        });
        match found {
            Some((mark, len)) => {
                out.push(mark);
                at += len.max(1);
            }
            None => {
                at += text[at..].chars().next().map_or(1, char::len_utf8);
            }
        }
    }
    out
}

/// Gives a machine turn's `user_input` event its `jobs` (see the module), unless it has them.
pub fn add_job_marks(event: &mut Value) {
    let machine = event["type"] == "user_input" && event["origin"] == "machine";
    let Some(obj) = event
        .as_object_mut()
        .filter(|o| machine && !o.contains_key("jobs"))
    else {
        return;
    };
    let text = obj.get("text").and_then(Value::as_str).unwrap_or_default();
    let marks = job_marks(text);
    obj.insert(
        "jobs".into(),
        serde_json::to_value(marks).unwrap_or(Value::Array(Vec::new())),
    );
}
