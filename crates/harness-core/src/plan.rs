//! The plan: one structure per session, written by `plan_write`, changed by `plan_update`,
//! submitted for approval by `plan_submit` in plan mode, shown as a card and rendered into the
//! prompt's `{{plan_context}}` on every step while it exists. Ids of phases and tasks are given
//! here, never by the model.

use serde::{Deserialize, Serialize};

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
}
