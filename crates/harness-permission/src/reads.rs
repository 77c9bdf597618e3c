//! Which bash commands only read, and the paths they read: the modes' `bash_read` table, git's
//! read-only subcommands, the sources of a copy or a link.

use crate::shell::Part;
use crate::{Engine, data, paths, wildcard};

impl Engine {
    /// Whether a part only reads, and the paths it reads.
    pub(crate) fn classify(&self, part: &Part) -> (bool, Vec<String>) {
        let d = &self.data;
        if part.redirect_only
            || part.path_qualified
            || part.dynamic_program
            || part.inline_code
            || !part.findings.is_empty()
        {
            return (false, Vec::new());
        }
        let Some(rc) = d.reads.get(&part.program) else {
            return (false, Vec::new());
        };
        // a variable set for the command can change what it runs (LD_PRELOAD, PATH, a pager)
        if part
            .assigns
            .iter()
            .any(|n| !d.safe_assignments.iter().any(|p| wildcard::matches(p, n)))
        {
            return (false, Vec::new());
        }
        let args = part.args();
        let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
        if unless_hit(rc, &texts).is_some() {
            return (false, Vec::new());
        }
        let ops = crate::shell::operands(args);
        if rc.max_operands.is_some_and(|m| ops.len() > m) {
            return (false, Vec::new());
        }
        match rc.only.as_deref() {
            Some("sed_print") => {
                let ok = texts.contains(&"-n")
                    && texts.iter().all(|t| {
                        !t.starts_with("-i")
                            && !t.starts_with("--in-place")
                            && *t != "-e"
                            && *t != "-f"
                    })
                    && ops.first().is_some_and(|s| sed_print(&s.text));
                if !ok {
                    return (false, Vec::new());
                }
            }
            Some("git_read") => {
                return match self.git_read(&texts) {
                    Some(paths) => (true, paths),
                    None => (false, Vec::new()),
                };
            }
            _ => {}
        }
        let paths: Vec<String> = match rc.paths.as_str() {
            "operands" => ops.iter().map(|w| w.text.clone()).collect(),
            "after_first" => {
                let explicit = texts.iter().any(|t| {
                    matches!(*t, "-e" | "-f" | "--regexp" | "--file") || t.starts_with("--regexp=")
                });
                ops.iter()
                    .skip(if explicit { 0 } else { 1 })
                    .map(|w| w.text.clone())
                    .collect()
            }
            "find" => args
                .iter()
                .take_while(|a| !a.text.starts_with('-') && a.text != "(" && a.text != "!")
                .map(|w| w.text.clone())
                .collect(),
            _ => Vec::new(),
        };
        (true, paths)
    }

    /// Whether a git command only reads, and the paths it reads (`-C`, `--no-index`, ...).
    pub(crate) fn git_read(&self, texts: &[&str]) -> Option<Vec<String>> {
        let globals = ["-c", "-p", "--paginate", "--exec-path", "--config-env"];
        let mut paths: Vec<String> = Vec::new();
        let mut i = 0;
        while i < texts.len() {
            let t = texts[i];
            if globals
                .iter()
                .any(|g| t == *g || t.starts_with(&format!("{g}=")))
                || (t.starts_with("-c") && !t.starts_with("--"))
            {
                return None;
            }
            if matches!(t, "-C" | "--git-dir" | "--work-tree") {
                paths.extend(texts.get(i + 1).map(|p| (*p).to_owned()));
                i += 2;
                continue;
            }
            if let Some(p) = t
                .strip_prefix("--git-dir=")
                .or_else(|| t.strip_prefix("--work-tree="))
            {
                paths.push(p.to_owned());
                i += 1;
                continue;
            }
            if t == "--namespace" {
                i += 2;
                continue;
            }
            if t.starts_with('-') {
                i += 1;
                continue;
            }
            break;
        }
        let sub = texts.get(i)?;
        if !self.data.git_read.contains(*sub) {
            return None;
        }
        let rest = &texts[i + 1..];
        if rest.iter().any(|t| {
            self.data.git_unless.iter().any(|u| {
                !globals.contains(&u.as_str())
                    && (*t == u
                        || (u.ends_with('=') && t.starts_with(u.as_str()))
                        || u.strip_suffix('*').is_some_and(|p| t.starts_with(p))
                        || t.starts_with(&format!("{u}=")))
            })
        }) {
            return None;
        }
        // paths a read-only subcommand reads through its own options
        let mut k = 0;
        let no_index = rest.contains(&"--no-index");
        while k < rest.len() {
            let t = rest[k];
            if matches!(t, "--contents" | "-f" | "--file" | "--output") {
                paths.extend(rest.get(k + 1).map(|p| (*p).to_owned()));
                k += 1;
            } else if let Some(p) = t
                .strip_prefix("--contents=")
                .or_else(|| t.strip_prefix("--file="))
            {
                paths.push(p.to_owned());
            } else if no_index && !t.starts_with('-') {
                paths.push(t.to_owned());
            }
            k += 1;
        }
        let pair = rest.first().is_some_and(|r| {
            self.data
                .git_read_pairs
                .iter()
                .any(|p| *p == format!("{sub} {r}"))
        });
        if matches!(*sub, "branch" | "tag" | "remote") && !pair {
            let listing = rest.iter().any(|t| {
                matches!(
                    *t,
                    "-l" | "--list"
                        | "-v"
                        | "-vv"
                        | "-a"
                        | "-r"
                        | "--show-current"
                        | "--contains"
                        | "--merged"
                )
            });
            let operands = rest.iter().any(|t| !t.starts_with('-'));
            if operands && !listing {
                return None;
            }
        }
        Some(paths)
    }
}

/// The paths a copying or linking command reads: every operand but the destination (all of them
/// with `-t DIR`; ln's lone operand). A link is read like its target, since it makes the target
/// readable under another name; a relative symbolic link's target is also taken from the link's
/// directory, where it points.
pub(crate) fn sources(part: &Part) -> Vec<String> {
    let program = part.program.as_str();
    if !matches!(
        program,
        "cp" | "scp" | "rsync" | "mv" | "tar" | "zip" | "curl" | "ln" | "link" | "install"
    ) {
        return Vec::new();
    }
    let args = part.args();
    let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
    let target_dir: Option<&str> = texts.iter().enumerate().find_map(|(i, t)| {
        if *t == "-t" || *t == "--target-directory" {
            texts.get(i + 1).copied()
        } else {
            t.strip_prefix("--target-directory=")
        }
    });
    let ops = crate::shell::operands(args);
    let mut out: Vec<String> = match target_dir {
        Some(dir) => {
            let mut skipped = false;
            ops.iter()
                .filter(|w| {
                    if !skipped && w.text == dir {
                        skipped = true;
                        return false;
                    }
                    true
                })
                .map(|w| w.text.clone())
                .collect()
        }
        None if program == "curl" => ops.iter().map(|w| w.text.clone()).collect(),
        None if matches!(program, "ln" | "link") && ops.len() == 1 => vec![ops[0].text.clone()],
        None => ops
            .iter()
            .take(ops.len().saturating_sub(1))
            .map(|w| w.text.clone())
            .collect(),
    };
    for t in &mut out {
        *t = t.trim_start_matches('@').to_owned();
    }
    let symbolic = program == "ln"
        && texts.iter().any(|t| {
            *t == "--symbolic" || (t.starts_with('-') && !t.starts_with("--") && t.contains('s'))
        });
    let link_at = target_dir.or(if ops.len() >= 2 {
        ops.last().map(|w| w.text.as_str())
    } else {
        None
    });
    if symbolic && let Some(at) = link_at {
        let at = paths::resolve(&part.cwd, at);
        let parent = at
            .rsplit_once('/')
            .map(|(p, _)| p)
            .unwrap_or("/")
            .to_owned();
        let relative: Vec<String> = out
            .iter()
            .filter(|t| !t.starts_with('/'))
            .cloned()
            .collect();
        for t in relative {
            out.push(paths::resolve(&at, &t));
            out.push(paths::resolve(
                if parent.is_empty() { "/" } else { &parent },
                &t,
            ));
        }
    }
    out
}

/// The first of a read command's `unless` flags (the forms that do more than read) among words.
pub(crate) fn unless_hit<'r>(rc: &'r data::ReadCommand, texts: &[&str]) -> Option<&'r str> {
    for u in &rc.unless {
        let hit = texts.iter().any(|t| {
            if rc
                .attached
                .iter()
                .any(|a| t.starts_with(a.as_str()) && t.len() > a.len())
            {
                false
            } else if let Some(prefix) = u.strip_suffix('*') {
                t.starts_with(prefix)
            } else if u.ends_with('=') {
                t.starts_with(u.as_str())
            } else if u.len() == 2 && !u.starts_with("--") {
                // `-o`, `-ofile`, `-so`: the flag alone, with its value attached, or in a group
                t.starts_with(u.as_str())
                    || (t.starts_with('-')
                        && !t.starts_with("--")
                        && t[1..].contains(&u[1..])
                        && t[1..].chars().all(|c| c.is_ascii_alphabetic()))
            } else {
                *t == u || t.starts_with(&format!("{u}="))
            }
        });
        if hit {
            return Some(u.as_str());
        }
    }
    None
}

pub(crate) fn sed_print(script: &str) -> bool {
    let s = script.trim();
    let Some(body) = s.strip_suffix('p') else {
        return false;
    };
    let addr = |a: &str| !a.is_empty() && (a == "$" || a.chars().all(|c| c.is_ascii_digit()));
    match body.split_once(',') {
        Some((a, b)) => addr(a) && addr(b),
        None => addr(body),
    }
}
