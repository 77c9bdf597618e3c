//! Skills over skill files (`spec/filesystem.md`, *Skills*): a skill is a directory
//! `<skills>/<name>/` holding `SKILL.md` (front matter `name` and `description`, then the
//! instructions) and any supporting files. `skills_list`, `skill_view` and `skill_manage` work
//! through the view, so levels apply to them as to any file.

use crate::backend::{Expect, Kind};
use crate::error::{Error, Result};
use crate::path::VPath;
use crate::view::View;

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// A skill as `skills_list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillSummary {
    /// The skill's name (its directory's name).
    pub name: String,
    /// What it is for, from its front matter.
    pub description: String,
}

/// Checks a skill name: lowercase letters, digits, `-`, `_` and `.`, 1 to 64 characters, not
/// starting with a dot.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::Skill(format!(
            "Skill: {name:?} is not a skill name (a-z, 0-9, -, _, ., at most 64)."
        )))
    }
}

/// The front matter's `name` and `description` of a `SKILL.md`.
pub fn front_matter(text: &str) -> Result<(String, String)> {
    let rest = text.strip_prefix("---\n").ok_or_else(|| {
        Error::Skill("Skill: SKILL.md must start with front matter (---).".to_string())
    })?;
    let end = rest.find("\n---").ok_or_else(|| {
        Error::Skill("Skill: SKILL.md's front matter is not closed (---).".to_string())
    })?;
    let mut name = None;
    let mut description = None;
    for line in rest[..end].lines() {
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim().trim_matches('"').to_string();
            match k.trim() {
                "name" => name = Some(v),
                "description" => description = Some(v),
                _ => {}
            }
        }
    }
    match (name, description) {
        (Some(n), Some(d)) if !n.is_empty() && !d.is_empty() => Ok((n, d)),
        _ => Err(Error::Skill(
            "Skill: SKILL.md's front matter needs name and description.".to_string(),
        )),
    }
}

/// The skills under `root` the session can see, by name.
pub fn list(view: &View, root: &str) -> Result<Vec<SkillSummary>> {
    let listing = match view.list(root) {
        Ok(l) => l,
        Err(Error::NotFound(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for e in listing.entries.iter().filter(|e| e.kind == Kind::Dir) {
        let p = listing.path.join(&e.name).join(SKILL_FILE);
        let Ok(bytes) = view.read_bytes(&p) else {
            continue;
        };
        let Ok(text) = crate::tools::decode_text(&p, &bytes) else {
            continue;
        };
        if let Ok((_, description)) = front_matter(&text) {
            out.push(SkillSummary {
                name: e.name.clone(),
                description,
            });
        }
    }
    Ok(out)
}

fn skill_dir(view: &View, root: &str, name: &str) -> Result<VPath> {
    check_name(name)?;
    Ok(view.resolve(root).join(name))
}

fn file_in(dir: &VPath, file: &str) -> Result<VPath> {
    let p = VPath::resolve(dir, file);
    if !p.is_strictly_inside(dir) {
        return Err(Error::Skill(format!(
            "Skill: {file:?} is not inside the skill."
        )));
    }
    Ok(p)
}

/// A skill's `SKILL.md`, or one of its files.
pub fn view_skill(view: &View, root: &str, name: &str, file: Option<&str>) -> Result<String> {
    let dir = skill_dir(view, root, name)?;
    let p = file_in(&dir, file.unwrap_or(SKILL_FILE))?;
    let bytes = view.read_bytes(&p).map_err(|e| match e {
        Error::NotFound(_) if file.is_none() => {
            Error::Skill(format!("Skill: no skill named {name:?}."))
        }
        other => other,
    })?;
    crate::tools::decode_text(&p, &bytes)
}

/// What `skill_manage` does.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum SkillAction {
    /// Creates a skill from a whole `SKILL.md`.
    Create {
        /// The skill.
        name: String,
        /// The `SKILL.md` text.
        content: String,
    },
    /// Replaces a skill's `SKILL.md`.
    Edit {
        /// The skill.
        name: String,
        /// The new `SKILL.md` text.
        content: String,
    },
    /// Replaces text in a skill's `SKILL.md` (or one of its files).
    Patch {
        /// The skill.
        name: String,
        /// The exact text to replace.
        old_string: String,
        /// What replaces it.
        new_string: String,
        /// A supporting file instead of `SKILL.md`.
        #[serde(default)]
        file_path: Option<String>,
        /// Replace every occurrence.
        #[serde(default)]
        replace_all: bool,
    },
    /// Writes a supporting file.
    WriteFile {
        /// The skill.
        name: String,
        /// The file, relative to the skill's directory.
        file_path: String,
        /// Its content.
        file_content: String,
    },
    /// Removes a supporting file.
    RemoveFile {
        /// The skill.
        name: String,
        /// The file, relative to the skill's directory.
        file_path: String,
    },
    /// Removes the skill (to the trash).
    Delete {
        /// The skill.
        name: String,
    },
}

/// Carries out a `skill_manage` action; answers a one-line confirmation.
pub fn manage(view: &View, root: &str, action: &SkillAction) -> Result<String> {
    match action {
        SkillAction::Create { name, content } => {
            let dir = skill_dir(view, root, name)?;
            front_matter(content)?;
            let p = dir.join(SKILL_FILE);
            view.write_bytes(&p, content.as_bytes(), &Expect::Absent)
                .map_err(|e| match e {
                    Error::AlreadyExists(_) => Error::Skill(format!(
                        "Skill: {name:?} already exists; use edit or patch."
                    )),
                    other => other,
                })?;
            Ok(format!("Created skill {name}."))
        }
        SkillAction::Edit { name, content } => {
            let dir = skill_dir(view, root, name)?;
            front_matter(content)?;
            let p = dir.join(SKILL_FILE);
            view.stat(&p)
                .map_err(|_| Error::Skill(format!("Skill: no skill named {name:?}.")))?;
            view.write_bytes(&p, content.as_bytes(), &Expect::Any)?;
            Ok(format!("Updated skill {name}."))
        }
        SkillAction::Patch {
            name,
            old_string,
            new_string,
            file_path,
            replace_all,
        } => {
            let dir = skill_dir(view, root, name)?;
            let p = file_in(&dir, file_path.as_deref().unwrap_or(SKILL_FILE))?;
            let bytes = view.read_bytes(&p)?;
            let text = crate::tools::decode_text(&p, &bytes)?;
            let spec = crate::tools::EditSpec {
                old_string: old_string.clone(),
                new_string: new_string.clone(),
                replace_all: *replace_all,
            };
            let (new_text, n) = crate::tools::apply_edit(&p, &text, &spec)?;
            if p.name() == SKILL_FILE {
                front_matter(&new_text)?;
            }
            view.write_bytes(
                &p,
                new_text.as_bytes(),
                &Expect::Version(crate::content_hash(&bytes)),
            )?;
            Ok(format!("Patched {p} ({n} replaced)."))
        }
        SkillAction::WriteFile {
            name,
            file_path,
            file_content,
        } => {
            let dir = skill_dir(view, root, name)?;
            view.stat(&dir.join(SKILL_FILE))
                .map_err(|_| Error::Skill(format!("Skill: no skill named {name:?}.")))?;
            let p = file_in(&dir, file_path)?;
            view.write_bytes(&p, file_content.as_bytes(), &Expect::Any)?;
            Ok(format!("Wrote {p}."))
        }
        SkillAction::RemoveFile { name, file_path } => {
            let dir = skill_dir(view, root, name)?;
            let p = file_in(&dir, file_path)?;
            if p.name() == SKILL_FILE && p.parent().as_ref() == Some(&dir) {
                return Err(Error::Skill(
                    "Skill: SKILL.md is removed with delete.".to_string(),
                ));
            }
            view.rm(p.as_str())?;
            Ok(format!("Removed {p}."))
        }
        SkillAction::Delete { name } => {
            let dir = skill_dir(view, root, name)?;
            view.rm(dir.as_str()).map_err(|e| match e {
                Error::NotFound(_) => Error::Skill(format!("Skill: no skill named {name:?}.")),
                other => other,
            })?;
            Ok(format!("Deleted skill {name}."))
        }
    }
}
