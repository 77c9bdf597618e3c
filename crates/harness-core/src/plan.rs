//! The plan: one structure per session, written by `plan_write`, changed by `plan_update`,
//! submitted for approval by `plan_submit` in plan mode, shown as a card and rendered into the
//! prompt's `{{plan_context}}` on every step while it exists.
//!
//! Ids of phases (`p1`, `p2`, ...) and tasks (`t1`, `t2`, ... across the whole plan) are given
//! here, never by the model: an id in `plan_write`'s arguments is ignored, and `plan_update`
//! refers to tasks by the ids the rendered plan shows.
//!
//! The former tool `todo` is converted by [`todo_to_plan`]: its `todos[]` become one phase
//! called "Work", `pending` → `todo`, `in_progress` → `doing`, `completed` → `done`,
//! `cancelled` → `dropped`.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// The status of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started.
    #[default]
    Todo,
    /// Being worked on.
    Doing,
    /// Finished.
    Done,
    /// Given up or no longer needed.
    Dropped,
}

impl TaskStatus {
    /// The status as the spec spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Todo => "todo",
            TaskStatus::Doing => "doing",
            TaskStatus::Done => "done",
            TaskStatus::Dropped => "dropped",
        }
    }

    /// The status a former `todo` item's status becomes.
    pub fn from_todo(status: &str) -> Option<TaskStatus> {
        match status {
            "pending" => Some(TaskStatus::Todo),
            "in_progress" => Some(TaskStatus::Doing),
            "completed" => Some(TaskStatus::Done),
            "cancelled" => Some(TaskStatus::Dropped),
            _ => None,
        }
    }
}

/// One task of a phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Our id (`t1`, `t2`, ... across the whole plan).
    pub id: String,
    /// What the task is.
    pub title: String,
    /// Where it stands.
    pub status: TaskStatus,
}

/// One phase of the plan: an ordered group of tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    /// Our id (`p1`, `p2`, ...).
    pub id: String,
    /// The phase's name.
    pub title: String,
    /// Its tasks, in order.
    pub tasks: Vec<Task>,
}

/// The plan of a session.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Plan {
    /// A short title.
    #[serde(default)]
    pub title: String,
    /// What the plan does, in a few sentences.
    #[serde(default)]
    pub summary: String,
    /// What was learned that the plan rests on.
    #[serde(default)]
    pub findings: Vec<String>,
    /// What must be true when the work is done.
    #[serde(default)]
    pub objectives: Vec<String>,
    /// The phases, in order.
    #[serde(default)]
    pub phases: Vec<Phase>,
    /// Whether it was submitted with `plan_submit` (and awaits or has had the approval).
    #[serde(default)]
    pub submitted: bool,
}

/// A task as `plan_write` takes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskArg {
    title: String,
    #[serde(default)]
    status: Option<TaskStatus>,
    /// An id the model made up: ignored, ids are ours.
    #[serde(default)]
    #[allow(dead_code)]
    id: Option<Value>,
}

impl TaskArg {
    fn into_parts(self) -> (String, TaskStatus) {
        (self.title, self.status.unwrap_or_default())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseArg {
    title: String,
    /// An id the model made up: ignored, ids are ours.
    #[serde(default)]
    #[allow(dead_code)]
    id: Option<Value>,
    #[serde(default)]
    tasks: Vec<TaskArg>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    title: String,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    findings: Vec<String>,
    #[serde(default)]
    objectives: Vec<String>,
    #[serde(default)]
    phases: Vec<PhaseArg>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskChange {
    id: String,
    #[serde(default)]
    status: Option<TaskStatus>,
    #[serde(default)]
    title: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskAdd {
    #[serde(default)]
    phase: Option<String>,
    title: String,
    #[serde(default)]
    status: Option<TaskStatus>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    findings: Vec<String>,
    #[serde(default)]
    objectives: Vec<String>,
    #[serde(default)]
    tasks: Vec<TaskChange>,
    #[serde(default)]
    add: Vec<TaskAdd>,
}

fn args_error(tool: &str, reason: impl Into<String>) -> Error {
    Error::Arguments {
        tool: tool.to_owned(),
        reason: reason.into(),
    }
}

fn parse<T: serde::de::DeserializeOwned>(tool: &str, args: &Value) -> Result<T> {
    let args = if args.is_null() {
        &Value::Object(Map::new())
    } else {
        args
    };
    serde_json::from_value(args.clone()).map_err(|e| args_error(tool, e.to_string()))
}

impl Plan {
    /// A new plan from `plan_write`'s arguments, with our ids.
    pub fn write(args: &Value) -> Result<Plan> {
        let a: WriteArgs = parse("plan_write", args)?;
        let mut plan = Plan {
            title: a.title.trim().to_owned(),
            summary: a.summary.trim().to_owned(),
            findings: a.findings,
            objectives: a.objectives,
            phases: Vec::new(),
            submitted: false,
        };
        if plan.title.is_empty() {
            return Err(args_error("plan_write", "a plan needs a non-empty `title`"));
        }
        if a.phases.is_empty() {
            return Err(args_error(
                "plan_write",
                "a plan needs at least one phase in `phases`",
            ));
        }
        let mut next_task = 1;
        for (i, p) in a.phases.into_iter().enumerate() {
            let mut tasks = Vec::new();
            for t in p.tasks {
                let (title, status) = t.into_parts();
                tasks.push(Task {
                    id: format!("t{next_task}"),
                    title: title.trim().to_owned(),
                    status,
                });
                next_task += 1;
            }
            plan.phases.push(Phase {
                id: format!("p{}", i + 1),
                title: p.title.trim().to_owned(),
                tasks,
            });
        }
        Ok(plan)
    }

    /// Applies `plan_update`'s arguments. Nothing changes unless every change applies.
    pub fn update(&mut self, args: &Value) -> Result<()> {
        let a: UpdateArgs = parse("plan_update", args)?;
        let mut next = self.clone();
        if let Some(t) = a.title {
            next.title = t.trim().to_owned();
        }
        if let Some(s) = a.summary {
            next.summary = s.trim().to_owned();
        }
        next.findings.extend(a.findings);
        next.objectives.extend(a.objectives);
        for change in a.tasks {
            let known = next.task_ids().join(", ");
            let task = next
                .phases
                .iter_mut()
                .flat_map(|p| p.tasks.iter_mut())
                .find(|t| t.id == change.id)
                .ok_or_else(|| {
                    args_error(
                        "plan_update",
                        format!("no task `{}` in the plan (its tasks: {known})", change.id),
                    )
                })?;
            if let Some(s) = change.status {
                task.status = s;
            }
            if let Some(t) = change.title {
                task.title = t.trim().to_owned();
            }
        }
        for add in a.add {
            let id = format!("t{}", next.next_task_number());
            let phase = match &add.phase {
                Some(pid) => next
                    .phases
                    .iter_mut()
                    .find(|p| &p.id == pid)
                    .ok_or_else(|| {
                        args_error("plan_update", format!("no phase `{pid}` in the plan"))
                    })?,
                None => {
                    if next.phases.is_empty() {
                        next.phases.push(Phase {
                            id: "p1".into(),
                            title: "Work".into(),
                            tasks: Vec::new(),
                        });
                    }
                    let last = next.phases.len() - 1;
                    &mut next.phases[last]
                }
            };
            phase.tasks.push(Task {
                id,
                title: add.title.trim().to_owned(),
                status: add.status.unwrap_or_default(),
            });
        }
        *self = next;
        Ok(())
    }

    /// Every task id, in order.
    pub fn task_ids(&self) -> Vec<String> {
        self.phases
            .iter()
            .flat_map(|p| p.tasks.iter().map(|t| t.id.clone()))
            .collect()
    }

    fn next_task_number(&self) -> u64 {
        self.phases
            .iter()
            .flat_map(|p| &p.tasks)
            .filter_map(|t| t.id.strip_prefix('t')?.parse::<u64>().ok())
            .max()
            .unwrap_or(0)
            + 1
    }

    /// The titles of the tasks still open (to do or being done), in order: what the loop's
    /// nudges name.
    pub fn open_tasks(&self) -> Vec<String> {
        self.phases
            .iter()
            .flat_map(|p| &p.tasks)
            .filter(|t| matches!(t.status, TaskStatus::Todo | TaskStatus::Doing))
            .map(|t| t.title.clone())
            .collect()
    }

    /// A plan of one phase (`p1`, "Work") holding `tasks` (`t1`, `t2`, ... by their order),
    /// titled "Plan": a flat list of entries (an ACP client's) as a plan.
    pub fn of_entries(tasks: impl IntoIterator<Item = (String, TaskStatus)>) -> Plan {
        let tasks = tasks
            .into_iter()
            .enumerate()
            .map(|(i, (title, status))| Task {
                id: format!("t{}", i + 1),
                title,
                status,
            })
            .collect();
        Plan {
            title: "Plan".into(),
            phases: vec![Phase {
                id: "p1".into(),
                title: "Work".into(),
                tasks,
            }],
            ..Plan::default()
        }
    }

    /// Whether every task is done or dropped.
    pub fn is_finished(&self) -> bool {
        self.phases
            .iter()
            .flat_map(|p| &p.tasks)
            .all(|t| matches!(t.status, TaskStatus::Done | TaskStatus::Dropped))
    }

    /// The plan as the model reads it in `{{plan_context}}`: `## TITLE`, the summary, the
    /// findings and objectives as lists, then each phase as `### PHASE (ID)` with one line per
    /// task, `- [STATUS] TASK (ID)`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if self.title.is_empty() {
            s.push_str("## Plan\n");
        } else {
            let _ = writeln!(s, "## {}", self.title);
        }
        if self.submitted {
            s.push_str("\n(Submitted for the person's approval.)\n");
        }
        if !self.summary.is_empty() {
            let _ = write!(s, "\n{}\n", self.summary);
        }
        for (head, items) in [
            ("Findings", &self.findings),
            ("Objectives", &self.objectives),
        ] {
            if !items.is_empty() {
                let _ = write!(s, "\n{head}:\n");
                for i in items {
                    let _ = writeln!(s, "- {i}");
                }
            }
        }
        for p in &self.phases {
            let _ = write!(s, "\n### {} ({})\n", p.title, p.id);
            if p.tasks.is_empty() {
                s.push_str("(no tasks yet)\n");
            }
            for t in &p.tasks {
                let _ = writeln!(s, "- [{}] {} ({})", t.status.as_str(), t.title, t.id);
            }
        }
        s
    }
}

/// What a session holds of its plan, and the plan tools' effect on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanState {
    /// The plan, while it exists.
    pub plan: Option<Plan>,
}

impl PlanState {
    /// Runs one plan tool call (`plan_write`, `plan_update`, `plan_submit`; `todo` is converted
    /// first) and answers what the model is told. `plan_mode` says whether the session is in
    /// plan mode (`plan_submit` is refused elsewhere).
    pub fn apply(&mut self, tool: &str, args: &Value, plan_mode: bool) -> Result<String> {
        match tool {
            "todo" => {
                let converted = todo_to_plan(args)?;
                self.apply("plan_write", &converted, plan_mode)
            }
            "plan_write" => {
                let plan = Plan::write(args)?;
                let n = plan.task_ids().len();
                self.plan = Some(plan);
                Ok(format!(
                    "Plan written: {n} tasks. It is shown to the person and kept in your context."
                ))
            }
            "plan_update" => {
                let plan = self.plan.as_mut().ok_or_else(|| {
                    args_error(
                        "plan_update",
                        "there is no plan yet: write one with plan_write",
                    )
                })?;
                plan.update(args)?;
                Ok("Plan updated.".into())
            }
            "plan_submit" => {
                if !plan_mode {
                    return Err(args_error(
                        "plan_submit",
                        "plan_submit is only offered in plan mode",
                    ));
                }
                let plan = self.plan.as_mut().ok_or_else(|| {
                    args_error(
                        "plan_submit",
                        "there is no plan to submit: write one with plan_write",
                    )
                })?;
                plan.submitted = true;
                Ok("Plan submitted: the person is asked to approve it.".into())
            }
            other => Err(Error::UnknownTool(other.to_owned())),
        }
    }

    /// The value of `{{plan_context}}`: the rendered plan, or empty while there is none.
    pub fn context(&self) -> String {
        self.plan.as_ref().map(Plan::render).unwrap_or_default()
    }
}

/// Converts the former `todo` tool's arguments to `plan_write`'s: `todos[]` become one phase
/// called "Work" (the plan's title too, as `plan_write` needs one), each item's `content` a
/// task with its status mapped.
pub fn todo_to_plan(args: &Value) -> Result<Value> {
    let todos = args
        .get("todos")
        .and_then(Value::as_array)
        .ok_or_else(|| args_error("todo", "`todos` must be an array"))?;
    let mut tasks = Vec::new();
    for (i, item) in todos.iter().enumerate() {
        let content = item
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| args_error("todo", format!("todos[{i}] has no string `content`")))?;
        let status = match item.get("status") {
            None | Some(Value::Null) => TaskStatus::Todo,
            Some(Value::String(s)) => TaskStatus::from_todo(s).ok_or_else(|| {
                args_error(
                    "todo",
                    format!("todos[{i}] has unknown status `{s}` (expected pending, in_progress, completed or cancelled)"),
                )
            })?,
            Some(other) => {
                return Err(args_error("todo", format!("todos[{i}] has status {other}, not a string")));
            }
        };
        tasks.push(json!({"title": content, "status": status}));
    }
    Ok(json!({"title": "Work", "phases": [{"title": "Work", "tasks": tasks}]}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn todo_becomes_one_phase() {
        let mut s = PlanState::default();
        s.apply(
            "todo",
            &json!({"todos": [
                {"content": "a", "status": "pending"},
                {"content": "b", "status": "in_progress"},
                {"content": "c", "status": "completed"},
                {"content": "d", "status": "cancelled"}
            ]}),
            false,
        )
        .unwrap();
        let plan = s.plan.unwrap();
        assert_eq!(plan.phases.len(), 1);
        assert_eq!(plan.phases[0].title, "Work");
        let st: Vec<_> = plan.phases[0]
            .tasks
            .iter()
            .map(|t| t.status.as_str())
            .collect();
        assert_eq!(st, ["todo", "doing", "done", "dropped"]);
    }

    #[test]
    fn update_is_all_or_nothing() {
        let mut s = PlanState::default();
        s.apply(
            "plan_write",
            &json!({"title": "T", "phases": [{"title": "A", "tasks": [{"title": "x"}, {"title": "y"}]}]}),
            false,
        )
        .unwrap();
        let before = s.clone();
        let e = s
            .apply(
                "plan_update",
                &json!({"tasks": [{"id": "t1", "status": "done"}, {"id": "t9", "status": "done"}]}),
                false,
            )
            .unwrap_err();
        assert!(e.to_string().contains("t9"));
        assert_eq!(s, before);
        assert!(s.apply("plan_submit", &json!({}), false).is_err());
        assert!(s.apply("plan_submit", &json!({}), true).is_ok());
    }
}
